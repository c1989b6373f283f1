#!/usr/bin/env bash
# softroce-setup.sh: soft-RoCE (rdma_rxe) on this machine, for a laptop or
# workstation whose kernel has the rdma_rxe module. No RDMA NIC needed.
#
#   deploy/softroce-setup.sh up   [--netdev IF] [--name rxe0]
#       modprobe rdma_rxe (and ib_uverbs, rdma_ucm), `rdma link add rxe0
#       type rxe netdev IF` (IF: the interface of the default route), checks
#       the locked-memory limit (and prints how to raise it) and prints the
#       GID index to use (`dmg doctor` when a dmg binary is found, else from
#       sysfs). Idempotent: an rxe0 that is already there is fine.
#   deploy/softroce-setup.sh down [--name rxe0]
#       rdma link delete rxe0 (nothing there: fine).
#   deploy/softroce-setup.sh status [--name rxe0]
#
# Needs root (sudo) and iproute2's `rdma` tool. A kernel without rdma_rxe
# (containers, CI runners, many cloud kernels): use the qemu VM instead,
# deploy/softroce/README.md ("Kernels without rdma_rxe" in docs/DEPLOY.md).
# The dmg binary: $DMG_BIN, else build/release/tools/dmg, else PREFIX/bin/dmg
# (installed with cmake --install), else dmg on PATH.
# Exit: 0 done, 1 failed, 2 usage.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
REPO=$(cd "$(dirname "$SELF")/.." && pwd)

say() { echo "softroce-setup: $*"; }
die() { echo "softroce-setup: error: $*" >&2; exit 1; }
usage() {
  sed -n '2,/^set -euo/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}

cmd=${1:-}; [ -n "$cmd" ] || usage; shift
NETDEV="" NAME=rxe0
while [ $# -gt 0 ]; do
  case "$1" in
    --netdev) [ $# -ge 2 ] || usage; NETDEV=$2; shift 2 ;;
    --netdev=*) NETDEV=${1#*=}; shift ;;
    --name) [ $# -ge 2 ] || usage; NAME=$2; shift 2 ;;
    --name=*) NAME=${1#*=}; shift ;;
    -h|--help) usage ;;
    *) echo "softroce-setup: error: unknown argument '$1'" >&2; usage ;;
  esac
done

need_root() {
  [ "$(id -u)" -eq 0 ] || die "needs root: sudo $SELF $cmd${NETDEV:+ --netdev $NETDEV}"
}
need_rdma_tool() {
  command -v rdma >/dev/null \
    || die "no 'rdma' tool (iproute2): sudo apt install iproute2 (Debian/Ubuntu) or dnf install iproute"
}

# The netdev an existing rxe device is bound to ("" when it does not exist).
bound_netdev() {
  rdma link show "$NAME/1" 2>/dev/null | sed -n 's/.* netdev \([^ ]*\).*/\1/p' || true
}

find_dmg() {
  local d
  # a build tree; an installed tree (this script is PREFIX/share/dmg/deploy/)
  for d in "${DMG_BIN:-}" "$REPO/build/release/tools/dmg" "$REPO/../../bin/dmg" \
           "$(command -v dmg 2>/dev/null || true)"; do
    [ -n "$d" ] && [ -x "$d" ] && { echo "$d"; return 0; }
  done
  return 1
}

check_memlock() {
  local l
  l=$(ulimit -l)
  if [ "$l" = unlimited ]; then
    say "locked memory (ulimit -l): unlimited: OK"
  elif [ "$l" -ge $((64 * 1024)) ]; then
    say "locked memory (ulimit -l): $l KiB: enough for a compute node with up to $((l / 8192 - 1)) threads"
    say "  memory nodes register their whole store: 'ulimit -l unlimited' before dmg memory-node"
  else
    say "WARNING: locked memory (ulimit -l) is $l KiB: too low for dmg (8 MiB per compute thread, the whole store on a memory node)"
    say "  now, in the shell that runs dmg:  ulimit -l unlimited   (as root, or within the hard limit $(ulimit -H -l))"
    say "  for good: echo '* - memlock unlimited' | sudo tee /etc/security/limits.d/90-dmg-memlock.conf"
    say "            (then log in again; systemd services: LimitMEMLOCK=infinity)"
  fi
}

# The RoCE v2 entry of the IPv4-mapped GID, the one dmg's rdma transport
# uses (dmg doctor prints the same), read from sysfs.
sysfs_gid_index() {
  local g n v t
  for g in "/sys/class/infiniband/$NAME/ports/1/gids/"*; do
    n=${g##*/}; v=""; t=""
    read -r v < "$g" 2>/dev/null || true
    case "$v" in 0000:0000:0000:0000:0000:ffff:*) ;; *) continue ;; esac
    read -r t < "/sys/class/infiniband/$NAME/ports/1/gid_attrs/types/$n" 2>/dev/null || true
    [ "$t" = "RoCE v2" ] && { echo "$n $v"; return 0; }
  done
  return 1
}

cmd_up() {
  need_root
  need_rdma_tool
  if [ -z "$NETDEV" ]; then
    NETDEV=$(ip -4 route show default 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "dev") {print $(i + 1); exit}}')
    [ -n "$NETDEV" ] || die "no default route to take the interface from: give --netdev IF (ip -br link lists them)"
    say "netdev: $NETDEV (the default route's)"
  fi
  [ -e "/sys/class/net/$NETDEV" ] || die "no network interface '$NETDEV' (ip -br link lists them)"
  if ! modprobe rdma_rxe 2>/tmp/softroce-setup.$$; then
    local why; why=$(cat /tmp/softroce-setup.$$); rm -f /tmp/softroce-setup.$$
    die "cannot load rdma_rxe (${why:-no reason given}): this kernel ($(uname -r)) has no soft-RoCE module.
  Ubuntu: sudo apt install linux-modules-extra-\$(uname -r); Debian's stock kernel has it.
  Containers and kernels built without RDMA: use the qemu VM route instead
  (deploy/softroce/README.md; docs/DEPLOY.md, 'Kernels without rdma_rxe')."
  fi
  rm -f /tmp/softroce-setup.$$
  # The user-space device nodes dmg needs: /dev/infiniband/uverbs* and rdma_cm.
  modprobe ib_uverbs 2>/dev/null || true
  modprobe rdma_ucm 2>/dev/null || true
  local have
  have=$(bound_netdev)
  if [ -n "$have" ]; then
    if [ "$have" = "$NETDEV" ]; then
      say "$NAME already exists on $NETDEV: OK"
    else
      say "$NAME already exists, on $have (not $NETDEV): leaving it (down first to move it)"
      NETDEV=$have
    fi
  else
    rdma link add "$NAME" type rxe netdev "$NETDEV" \
      || die "rdma link add $NAME type rxe netdev $NETDEV failed (see above)"
    say "$NAME created on $NETDEV"
  fi
  ip -4 -o addr show dev "$NETDEV" | grep -q inet \
    || say "WARNING: $NETDEV has no IPv4 address: dmg connects over IPv4 (ip addr add A.B.C.D/24 dev $NETDEV)"
  # the port goes ACTIVE and the GIDs appear within a moment
  local i found=""
  for i in $(seq 50); do
    found=$(sysfs_gid_index || true)
    [ -n "$found" ] && break
    sleep 0.1
  done
  check_memlock
  local dmg
  if dmg=$(find_dmg); then
    say "running $dmg doctor"
    local rc=0
    "$dmg" doctor --rdma_device="$NAME" || rc=$?
    [ "$rc" = 0 ] || say "dmg doctor exited $rc: see its FAIL lines (memlock: see above)"
  fi
  if [ -n "$found" ]; then
    say "GID index to use: ${found%% *} (RoCE v2, ${found#* }); dmg finds it itself (--rdma_gid_index=-1)"
    say "  e.g. ibv_rc_pingpong -d $NAME -g ${found%% *}"
  else
    say "WARNING: no RoCE v2 IPv4-mapped GID on $NAME port 1 yet (is $NETDEV up with an IPv4 address?)"
    exit 1
  fi
}

cmd_down() {
  need_root
  need_rdma_tool
  if [ -z "$(bound_netdev)" ] && ! rdma link show "$NAME/1" >/dev/null 2>&1; then
    say "no $NAME: nothing to do"
    return 0
  fi
  rdma link delete "$NAME" || die "rdma link delete $NAME failed"
  say "$NAME deleted"
}

cmd_status() {
  need_rdma_tool
  local have
  have=$(bound_netdev)
  [ -n "$have" ] || { say "no $NAME"; exit 1; }
  rdma link show "$NAME/1"
  local found
  found=$(sysfs_gid_index || true)
  [ -n "$found" ] && say "GID index to use: ${found%% *} (${found#* })"
  check_memlock
}

case "$cmd" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  -h|--help|help) usage ;;
  *) echo "softroce-setup: error: unknown command '$cmd' (up, down, status)" >&2; usage ;;
esac
