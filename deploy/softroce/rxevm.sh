#!/usr/bin/env bash
# rxevm.sh: soft-RoCE (rdma_rxe) test VM for machines whose kernel has no RDMA.
#
# Boots Debian 12's own kernel (linux-image-amd64) from a busybox initramfs in
# qemu, loads rdma_rxe, creates rxe0 on a dummy netdev (10.77.0.1/24) and runs a
# test script from a host folder shared over virtio-9p. Host-built binaries run
# in the guest unchanged (same Debian release, same glibc).
#
#   rxevm.sh prepare                      one-time setup of the cache (idempotent)
#   rxevm.sh run SHARE_DIR [-- ARGS...]   boot, run SHARE_DIR/test.sh ARGS, power off
#   rxevm.sh exec SHARE_DIR BINARY...     copy binaries to SHARE_DIR/bin and their
#                                         shared-library closure to SHARE_DIR/lib
#   rxevm.sh native SHARE_DIR [-- ARGS...]  no VM: run test.sh on this host, whose
#                                         kernel has rdma_rxe (device must exist)
#   rxevm.sh multi SHARE_A SHARE_B [SHARE_C...] [-- ARGS...]
#                                         "hosts": one VM per share, booted in
#                                         parallel, NICs joined by qemu socket
#                                         netdevs over host loopback (one L2
#                                         segment); VM k is role A,B,C..., IP
#                                         10.77.0.(k+1); all are torn down at
#                                         the end; 0 only when every VM passed
#
# `multi` knobs: TIMEOUT, TEST_TIMEOUT, MEM, ACCEL as for run (per VM); SMP=1
# per VM by default; MULTI_GRACE=30: seconds the other VMs get once one has
# failed, then they are killed; MULTI_LINK=stream|udp: the qemu socket netdev
# between VMs (udp: lossy on a busy host); MULTI_NODELAY=1: preload
# tcp_nodelay.so into qemu (built with cc into the cache) so that the stream
# link has no Nagle delay (0: qemu as is, ~40 ms per small exchange).
# test.sh also gets RXEVM_ROLE (A, B, ...),
# RXEVM_INDEX (0..), RXEVM_VMS (count), RXE_PEERS (the other VMs' addresses)
# and RXE_PEER_IP (the first of them).
#
# test.sh runs as root with cwd = the share (/mnt/share in the VM) and gets
# RXE_IP RXE_DEV RXE_GIDX RXE_IF RXEVM_SHARE; in the VM also LD_LIBRARY_PATH=
# /mnt/share/lib (when lib/ exists). The guest has bash (also as /bin/sh),
# busybox, iproute2 (ip, rdma) and the rdma-core tools (ibv_*, rping, ...).
#
# Environment knobs (all optional):
#   RXEVM_DIR     cache dir (default: <repo>/build/rxevm)
#   TIMEOUT=600   hard wall-clock limit of one `run`, seconds (qemu is killed)
#   TEST_TIMEOUT  limit for test.sh inside the guest (default TIMEOUT-60;
#                 TIMEOUT/2 when TIMEOUT <= 120)
#   MEM=2048 SMP=2
#   ACCEL=auto|kvm|tcg   auto = kvm only if kvm_intel/kvm_amd is loaded
#   NETDEV=dummy|virtio  netdev rxe0 is bound to (virtio = NIC on an empty qemu hub)
#   VM_IP=10.77.0.1      the guest's address (RXE_IP), /24
#   VM_MAC               MAC of the virtio NIC (NETDEV=virtio; default qemu's)
#   SMOKE=0|1      1: run ibv_rc_pingpong + rping before test.sh
#   RXEVM_ENV="A B"      host variables exported into test.sh's environment
#   QEMU_EXTRA="..."     extra qemu arguments (word-split)
#   QEMU_PRELOAD=LIB     LD_PRELOAD for qemu alone
#   LOG           console log file (default: SHARE_DIR/rxevm-console.log)
#   RXEVM_KERNEL_PKG     kernel package (default: what linux-image-amd64 depends on)
#
# Exit status of `run`: 0 when the VM booted, rxe0 came up and test.sh returned 0;
# test.sh's status when it failed; 124 on TIMEOUT; 125 for any harness failure.
set -euo pipefail
export LC_ALL=C   # apt-cache output is parsed ("Candidate:", "Depends:")

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
REPO=$(cd "$HERE/../.." && pwd)
W=${RXEVM_DIR:-$REPO/build/rxevm}
ARCH_LIBDIR=/usr/lib/x86_64-linux-gnu
KPKG=""   # kernel image package, resolved by cmd_prepare

# Host packages `prepare` installs when missing. busybox-static is *downloaded*
# instead (installing it would replace a dynamic `busybox` the user may rely on).
HOST_PKGS=(qemu-system-x86 cpio kmod iproute2 xz-utils)
# Packages downloaded (not installed) and unpacked into the guest image. libnl is
# what libibverbs links against; listed so a host without rdma-core works too.
GUEST_DEBS=(ibverbs-providers libibverbs1 librdmacm1 ibverbs-utils rdmacm-utils
            libnl-3-200 libnl-route-3-200 busybox-static)
# Kernel modules loaded at boot, in this order (dependencies are resolved on the
# host with `modprobe --show-depends`). crc32 is rxe's ICRC; 9p is the share.
BOOT_MODS=(crc32_generic crc32-pclmul virtio_pci virtio_net 9pnet_virtio 9p
           dummy rdma_rxe ib_uverbs rdma_ucm)
# Extra modules shipped in the image (loadable with modprobe) but not loaded.
EXTRA_MODS=(veth)
# Guest userland taken from the staged rdma-core packages.
RDMA_TOOLS=(ibv_devices ibv_devinfo ibv_rc_pingpong ibv_ud_pingpong ibv_srq_pingpong
            rping ucmatose udaddy rdma_server rdma_client rstream)

log() { echo "rxevm: $*" >&2; }
die() { echo "rxevm: ERROR: $*" >&2; exit 125; }

usage() {
  sed -n '2,/^set -euo/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//'
  exit 2
}

# ---------------------------------------------------------------- helpers

# sudo prefix for apt-get when not root (empty when root).
sudo_prefix() {
  if [ "$(id -u)" -eq 0 ]; then echo ""; return; fi
  command -v sudo >/dev/null || die "need root (or sudo) for apt-get: $*"
  echo sudo
}

pkg_installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

APT_UPDATED=0
apt_update_once() {
  [ "$APT_UPDATED" = 1 ] && return 0
  log "apt-get update"
  $(sudo_prefix update) apt-get update -qq
  APT_UPDATED=1
  CAND=()   # candidate versions may have changed
}

# Installs the host packages that are missing; no apt at all when none is.
ensure_host_packages() {
  local missing=() p
  for p in "${HOST_PKGS[@]}"; do pkg_installed "$p" || missing+=("$p"); done
  if [ ${#missing[@]} -eq 0 ]; then return 0; fi
  log "installing host packages: ${missing[*]}"
  apt_update_once
  DEBIAN_FRONTEND=noninteractive $(sudo_prefix install) \
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Candidate versions of the image's packages from the local apt lists, read
# with one `apt-cache policy` call (~0.3 s each) into CAND; call it in the main
# shell (not in $(...)) so the result is kept.
declare -A CAND=()
load_candidates() {
  local line pkg=""
  CAND=([.loaded]=1)
  while IFS= read -r line; do
    case "$line" in
      [!\ ]*:) pkg=${line%:}; pkg=${pkg%:amd64} ;;
      *Candidate:*) CAND[$pkg]=${line##* } ;;
    esac
  done < <(apt-cache policy ${KPKG:+"$KPKG"} "${GUEST_DEBS[@]}" 2>/dev/null)
}
# Candidate version of one of them (empty if unknown).
candidate() {
  [ -n "${CAND[.loaded]:-}" ] || load_candidates
  local v=${CAND[$1]:-}
  [ "$v" = "(none)" ] && v=""
  echo "$v"
}

# Kernel image package: RXEVM_KERNEL_PKG, else linux-image-amd64's current target.
kernel_pkg() {
  if [ -n "${RXEVM_KERNEL_PKG:-}" ]; then echo "$RXEVM_KERNEL_PKG"; return; fi
  apt-cache depends linux-image-amd64 2>/dev/null \
    | awk '/Depends: linux-image-[0-9]/{print $2; exit}'
}

host_ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo none; }

# Everything the image depends on; a change in any of it rebuilds the image.
stamp_key() {
  local p
  echo "script=$(sha256sum "$SELF" | cut -d' ' -f1)"
  echo "kernel=$KPKG $(candidate "$KPKG")"
  for p in "${GUEST_DEBS[@]}"; do echo "deb=$p $(candidate "$p")"; done
  # host files copied into the image (libc, libstdc++, iproute2, bash)
  for p in libc6 libstdc++6 libgcc-s1 iproute2 bash; do echo "host=$p $(host_ver "$p")"; done
}

image_files_present() {
  [ -s "$W/vmlinuz" ] && [ -s "$W/initrd.cpio" ] && [ -s "$W/guest-libs.txt" ] && [ -s "$W/stamp" ]
}

# Cheap staleness test used by `run`/`exec` (no apt): image present and built by
# this exact script.
image_current() {
  image_files_present &&
    grep -qx "script=$(sha256sum "$SELF" | cut -d' ' -f1)" "$W/stamp"
}

# Downloads package $1 (candidate version) into $W/debs unless already there.
fetch_deb() {
  local p=$1 v f
  v=$(candidate "$p")
  if [ -z "$v" ]; then apt_update_once; load_candidates; v=$(candidate "$p"); fi
  [ -n "$v" ] || die "package $p not found in the apt lists"
  for f in "$W"/debs/"${p}"_*.deb; do
    [ -e "$f" ] || continue
    if [ "$(dpkg-deb -f "$f" Version)" = "$v" ]; then return 0; fi
    rm -f "$f"   # stale version
  done
  log "downloading $p $v"
  # APT::Sandbox::User=root: avoids the _apt sandbox warning when running as root
  if ! (cd "$W/debs" && apt-get download -qq -o APT::Sandbox::User=root "$p=$v" >/dev/null); then
    # the lists may name a version the mirror no longer has: refresh and retry
    apt_update_once; load_candidates
    v=$(candidate "$p")
    (cd "$W/debs" && apt-get download -qq -o APT::Sandbox::User=root "$p=$v" >/dev/null) \
      || die "apt-get download $p failed"
  fi
}

# Copies file $1 (dereferenced) into the image root $2 at the same path.
copy_into() {
  local src=$1 root=$2 dst=${3:-$1}
  mkdir -p "$root$(dirname "$dst")"
  cp -L "$src" "$root$dst"
}

# ---------------------------------------------------------------- prepare

cmd_prepare() {
  mkdir -p "$W"
  exec 9>"$W/.lock"
  flock 9   # exclusive: no `run` uses the image while it is rebuilt

  ensure_host_packages
  KPKG=$(kernel_pkg)
  if [ -z "$KPKG" ]; then apt_update_once; KPKG=$(kernel_pkg); fi
  [ -n "$KPKG" ] || die "cannot resolve linux-image-amd64 to a kernel package"
  local kp=$KPKG
  load_candidates

  local key
  key=$(stamp_key)
  if image_files_present && [ "$key" = "$(cat "$W/stamp")" ]; then
    log "cache complete ($W, $(sed -n 's/^kernel=//p' "$W/stamp")): nothing to do"
    return 0
  fi

  mkdir -p "$W/debs"
  local p f
  for p in "$kp" "${GUEST_DEBS[@]}"; do fetch_deb "$p"; done
  # drop .debs no longer wanted (e.g. the previous kernel)
  for f in "$W"/debs/*.deb; do
    case " $kp ${GUEST_DEBS[*]} " in *" $(dpkg-deb -f "$f" Package) "*) ;; *) rm -f "$f" ;; esac
  done
  KPKG=$(kernel_pkg); kp=$KPKG   # may have moved on after an apt-get update
  load_candidates
  key=$(stamp_key)

  local S=$W/stage R=$W/initrd-root
  rm -rf "$S" "$R" && mkdir -p "$S" "$R"
  log "unpacking packages"
  for p in "$kp" "${GUEST_DEBS[@]}"; do
    dpkg-deb -x "$(ls "$W"/debs/"${p}"_*.deb)" "$S"
  done
  local K
  K=$(find "$S/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' | head -1)
  if [ -z "$K" ] || [ ! -s "$S/boot/vmlinuz-$K" ]; then die "kernel package $kp has no vmlinuz"; fi
  /sbin/depmod -b "$S" "$K"

  log "building initramfs for kernel $K"
  local d
  for d in bin sbin usr/bin usr/sbin usr/lib/x86_64-linux-gnu/libibverbs lib64 \
           etc/libibverbs.d proc sys dev tmp run mnt/share root var; do
    mkdir -p "$R/$d"
  done
  ln -s usr/lib "$R/lib"
  ln -s ../run "$R/var/run"

  # busybox (static) provides sh and the usual tools
  cp "$S/bin/busybox" "$R/bin/busybox"
  local a
  for a in $("$S/bin/busybox" --list); do
    [ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"
  done
  for a in modprobe insmod rmmod lsmod depmod poweroff reboot halt; do
    ln -sf ../bin/busybox "$R/sbin/$a"
  done

  # Dynamic executables for the guest: rdma-core tools (staged), iproute2's ip
  # and rdma, and bash (so test.sh may be a bash script) from the host.
  local bins=()
  for a in "${RDMA_TOOLS[@]}"; do
    cp "$S/usr/bin/$a" "$R/usr/bin/$a"; bins+=("$S/usr/bin/$a")
  done
  rm -f "$R/bin/ip" "$R/bin/bash"      # prefer the real ones over busybox applets
  copy_into "$(readlink -f /sbin/ip)" "$R" /usr/sbin/ip;  bins+=(/sbin/ip)
  copy_into "$(command -v rdma)" "$R" /usr/bin/rdma;      bins+=("$(command -v rdma)")
  copy_into /bin/bash "$R" /bin/bash;                     bins+=(/bin/bash)
  # /bin/sh is bash: Debian's busybox ash runs its own applets before PATH, so
  # `ip` in a #!/bin/sh script would be busybox's, not iproute2's
  ln -sf bash "$R/bin/sh"

  # rxe verbs provider + its driver file; libibverbs finds it via /etc/libibverbs.d
  local prov
  for prov in "$S$ARCH_LIBDIR"/libibverbs/librxe-rdmav*.so; do
    cp "$prov" "$R$ARCH_LIBDIR/libibverbs/"; bins+=("$prov")
  done
  cp "$S/etc/libibverbs.d/rxe.driver" "$R/etc/libibverbs.d/"

  # Shared-library closure; staged libibverbs/librdmacm/libnl win over the host's.
  local lib real closure
  closure=$(for a in "${bins[@]}"; do
      LD_LIBRARY_PATH="$S$ARCH_LIBDIR" ldd "$a"
    done)
  if grep -q 'not found' <<<"$closure"; then
    die "unresolved libraries for the guest image: $(grep 'not found' <<<"$closure" | sort -u | xargs)"
  fi
  while read -r lib; do
    real=$(readlink -f "$lib")
    case "$lib" in
      /lib64/*) copy_into "$real" "$R" "$lib" ;;
      *) copy_into "$real" "$R" "$ARCH_LIBDIR/$(basename "$lib")" ;;
    esac
  done < <(awk '/=> \//{print $3} /^\t\/lib/{print $1}' <<<"$closure" | sort -u)
  # glibc dlopen()s libgcc_s for pthread_exit/cancel; host-built C++ test
  # binaries need libstdc++/libgcc_s/libm; the rest are glibc's own libraries,
  # shipped so that `exec` never copies a piece of glibc into SHARE_DIR/lib.
  for lib in libgcc_s.so.1 libstdc++.so.6 libm.so.6 libpthread.so.0 libdl.so.2 \
             librt.so.1 libresolv.so.2 libutil.so.1 libanl.so.1; do
    copy_into "$ARCH_LIBDIR/$lib" "$R" "$ARCH_LIBDIR/$lib"
  done
  [ -e "$R/lib64/ld-linux-x86-64.so.2" ] || copy_into /lib64/ld-linux-x86-64.so.2 "$R"
  printf '%s\n' "$ARCH_LIBDIR" > "$R/etc/ld.so.conf"
  echo 'root:x:0:0:root:/root:/bin/sh' > "$R/etc/passwd"
  echo 'root:x:0:' > "$R/etc/group"
  printf '127.0.0.1 localhost\n10.77.0.1 rxevm\n' > "$R/etc/hosts"
  # Sonames present in the image: `exec` does not copy these into SHARE_DIR/lib.
  find "$R$ARCH_LIBDIR" -maxdepth 1 -name '*.so*' -printf '%f\n' | sort > "$W/guest-libs.txt"
  echo ld-linux-x86-64.so.2 >> "$W/guest-libs.txt"

  # Kernel modules and their dependencies, in load order.
  local m path order=()
  for m in "${BOOT_MODS[@]}" "${EXTRA_MODS[@]}"; do
    # lines: "insmod /path/x.ko [params]" or "builtin x"
    while read -r a path _; do
      [ "$a" = insmod ] || continue
      path=${path#"$S"}
      copy_into "$S$path" "$R" "$path"
      case " ${BOOT_MODS[*]} " in *" $m "*) order+=("$path");; esac
    done < <(/sbin/modprobe -d "$S" -S "$K" --show-depends "$m" 2>/dev/null || true)
  done
  # decompress modules if the kernel ships them compressed (busybox insmod
  # cannot read .ko.xz)
  local ko
  while IFS= read -r -d '' ko; do xz -d "$ko"; done \
    < <(find "$R/lib/modules" -name '*.ko.xz' -print0)
  cp "$S/lib/modules/$K"/modules.{order,builtin,builtin.modinfo} "$R/lib/modules/$K/" 2>/dev/null || true
  /sbin/depmod -b "$R" "$K"
  # load list for /init (dedup, keep first occurrence = dependency order)
  printf '%s\n' "${order[@]}" | sed 's/\.xz$//' | awk '!seen[$0]++' > "$R/etc/rxevm-modules"
  [ -s "$R/etc/rxevm-modules" ] || die "no kernel modules found for $K"
  grep -q '/rdma_rxe\.ko$' "$R/etc/rxevm-modules" || die "rdma_rxe.ko missing from $kp"

  write_init > "$R/init"
  chmod +x "$R/init"
  (cd "$R" && find . -print0 | cpio --null -o -H newc --quiet) > "$W/initrd.cpio.tmp"
  mv "$W/initrd.cpio.tmp" "$W/initrd.cpio"
  cp "$S/boot/vmlinuz-$K" "$W/vmlinuz"
  rm -rf "$S"   # ~400 MB of unpacked kernel; the .debs stay for offline rebuilds
  echo "$key" > "$W/stamp"
  log "ready: kernel $K, initramfs $(du -h "$W/initrd.cpio" | cut -f1) in $W"
}

# /init of the guest (busybox ash). Parameters come on the kernel command line
# as rxevm.KEY=VALUE. Prints RXEVM_* marker lines that the host parses.
write_init() {
  cat <<'EOF'
#!/bin/sh
# PID 1 of the rxevm guest: load modules, mount the share, bring up rxe0,
# run /mnt/share/test.sh, power off. Generated by deploy/softroce/rxevm.sh.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root TMPDIR=/tmp
mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp; mount -t tmpfs tmpfs /run
exec </dev/console >/dev/console 2>&1
dmesg -n 1                       # keep kernel chatter off the console (markers!)
ulimit -l unlimited              # verbs memory registration

NETDEV=dummy SMOKE=0 TMO=540 SHARE=0 IP=10.77.0.1
for a in $(cat /proc/cmdline); do
  case "$a" in
    rxevm.netdev=*) NETDEV=${a#*=} ;;
    rxevm.ip=*)     IP=${a#*=} ;;
    rxevm.smoke=*)  SMOKE=${a#*=} ;;
    rxevm.tmo=*)    TMO=${a#*=} ;;
    rxevm.share=*)  SHARE=${a#*=} ;;
  esac
done

off() {  # $1 = reason; dump the kernel log tail on failures
  [ "$1" = ok ] || { echo "===== dmesg (tail)"; dmesg | grep -v 'speed is unknown' | tail -40; }
  echo "RXEVM: done ($1), powering off"
  sync; poweroff -f
}

echo "RXEVM_BOOT_OK kernel=$(uname -r) cpus=$(nproc) mem=$(awk '/MemTotal/{print $2/1024 " MiB"}' /proc/meminfo) uptime=$(cut -d' ' -f1 /proc/uptime)s"
while read -r ko; do
  args=""
  case "$ko" in */dummy.ko) args=numdummies=0 ;; esac   # no stray dummy0
  # shellcheck disable=SC2086
  insmod "$ko" $args 2>/tmp/insmod.err || grep -q 'File exists' /tmp/insmod.err \
    || echo "RXEVM: insmod $ko failed: $(cat /tmp/insmod.err)"
done < /etc/rxevm-modules

if [ "$SHARE" = 1 ]; then
  if mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288,cache=mmap hostshare /mnt/share; then
    echo "RXEVM: 9p share mounted at /mnt/share"
  else
    echo "RXEVM_SHARE_FAILED"; off share
  fi
fi

ip link set lo up
if [ "$NETDEV" = virtio ]; then
  IF=""
  for n in /sys/class/net/*; do
    [ "$(basename "$(readlink "$n/device/driver" 2>/dev/null)")" = virtio_net ] && { IF=$(basename "$n"); break; }
  done
else
  IF=dum0; ip link add dum0 type dummy
fi
[ -n "$IF" ] || { echo "RXEVM_RXE_UP=0 (no netdev)"; off netdev; }
ip addr add "$IP/24" dev "$IF"; ip link set "$IF" up
rdma link add rxe0 type rxe netdev "$IF" || { echo "RXEVM_RXE_UP=0 (rdma link add failed)"; off rxe; }

# wait for the port to go ACTIVE and for the IPv4-mapped (RoCEv2) GID to appear
GIDX=""
i=0
while [ $i -lt 50 ]; do
  if ibv_devinfo -d rxe0 2>/dev/null | grep -q PORT_ACTIVE; then
    # (read, not cat: the table has 1024 entries and a fork costs ~50 ms in TCG)
    for g in /sys/class/infiniband/rxe0/ports/1/gids/*; do
      n=${g##*/}; v=""; t="RoCE v2"
      read -r v < "$g" 2>/dev/null || true
      case "$v" in 0000:0000:0000:0000:0000:ffff:*) ;; *) continue ;; esac
      read -r t < "/sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$n" 2>/dev/null || true
      [ "$t" = "RoCE v2" ] && { GIDX=$n; break; }
    done
    [ -n "$GIDX" ] && break
  fi
  sleep 0.2; i=$((i + 1))
done
echo "===== rdma link show"; rdma link show
echo "===== ibv_devices"; ibv_devices
echo "===== ibv_devinfo -d rxe0"; ibv_devinfo -d rxe0
[ -n "$GIDX" ] || { echo "RXEVM_RXE_UP=0 (port not active or no RoCEv2 GID)"; off rxe; }
echo "RXEVM: rxe0 on $IF, RoCEv2 gid index $GIDX = $(cat /sys/class/infiniband/rxe0/ports/1/gids/$GIDX)"
echo "RXEVM_RXE_UP=1"
export RXE_IP=$IP RXE_DEV=rxe0 RXE_GIDX=$GIDX RXE_IF=$IF RXEVM_SHARE=/mnt/share

if [ "$SMOKE" = 1 ]; then
  echo "===== smoke: ibv_rc_pingpong"
  rc=0
  ibv_rc_pingpong -d rxe0 -g "$GIDX" -n 100 >/tmp/pp.log 2>&1 & sp=$!; sleep 1
  timeout 60 ibv_rc_pingpong -d rxe0 -g "$GIDX" -n 100 "$RXE_IP" || rc=1
  wait $sp || rc=1
  echo "===== smoke: rping"
  rping -s -a "$RXE_IP" -C 5 >/tmp/rping.log 2>&1 & sp=$!; sleep 1
  timeout 60 rping -c -a "$RXE_IP" -C 5 -S 64 || rc=1
  wait $sp || rc=1
  echo "RXEVM_SMOKE_RC=$rc"
fi

if [ "$SHARE" = 1 ]; then
  # binaries copied by `rxevm.sh exec` find their libraries here; libibverbs,
  # librdmacm and the rxe provider always come from the image (exec skips them)
  if [ -d /mnt/share/lib ]; then
    export LD_LIBRARY_PATH=/mnt/share/lib
    for f in /mnt/share/lib/libibverbs.so* /mnt/share/lib/librdmacm.so*; do
      [ -e "$f" ] && echo "RXEVM: warning: $f shadows the image's copy; the rxe provider may not load"
    done
  fi
  echo "===== test.sh (timeout ${TMO}s)"
  t0=$(cut -d' ' -f1 /proc/uptime)
  cd /mnt/share
  # .rxevm-invoke.sh (written by the host) exports RXEVM_ENV and sets "$@"
  timeout "$TMO" bash -c '. ./.rxevm-invoke.sh
    if [ -x ./test.sh ]; then exec ./test.sh "$@"; else exec bash ./test.sh "$@"; fi'
  rc=$?
  cd /
  t1=$(cut -d' ' -f1 /proc/uptime)
  # busybox timeout makes a timed-out command exit 143 (SIGTERM): report 124
  if [ "$rc" = 143 ] && awk "BEGIN{exit !($t1 - $t0 >= $TMO)}"; then
    echo "RXEVM: test.sh timed out after ${TMO}s"; rc=124
  fi
  echo "RXEVM_USER_TEST_RC=$rc"
  echo "RXEVM: test.sh took $(awk "BEGIN{print $t1 - $t0}") s"
  [ "$rc" = 0 ] || off test
fi
off ok
EOF
}

# ---------------------------------------------------------------- run

cmd_run() {
  [ $# -ge 1 ] || usage
  local share
  share=$(readlink -f "$1"); shift
  if [ "${1:-}" = -- ]; then shift; fi
  [ -d "$share" ] || die "share dir $share does not exist"
  [ -f "$share/test.sh" ] || die "$share/test.sh does not exist"
  image_current || { log "image missing or stale: running prepare"; cmd_prepare; exec 9>&-; }

  local timeout=${TIMEOUT:-600} mem=${MEM:-2048} smp=${SMP:-2}
  local accel=${ACCEL:-auto} netdev=${NETDEV:-dummy} smoke=${SMOKE:-0}
  local vmip=${VM_IP:-10.77.0.1} vmmac=${VM_MAC:-}
  [[ "$vmip" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] || die "VM_IP=$vmip is not an IPv4 address"
  [ -z "$vmmac" ] || [[ "$vmmac" =~ ^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$ ]] \
    || die "VM_MAC=$vmmac is not a MAC address"
  local tmo=${TEST_TIMEOUT:-$(( timeout > 120 ? timeout - 60 : timeout / 2 ))}
  local logf=${LOG:-$share/rxevm-console.log}
  if [ "$accel" = auto ]; then
    # KVM only with a real VMX/SVM backend; on hosts whose /dev/kvm is a
    # paravirtual backend (kvm_pvm) a stock Debian kernel hangs in early boot.
    if [ -w /dev/kvm ] && { [ -d /sys/module/kvm_intel ] || [ -d /sys/module/kvm_amd ]; }; then
      accel=kvm; else accel=tcg; fi
  fi
  local qa=()
  # shellcheck disable=SC2054  # commas are qemu option syntax
  case "$accel" in
    kvm) qa=(-accel kvm -cpu host) ;;
    tcg) qa=(-accel tcg,thread=multi -cpu max) ;;
    *) die "ACCEL must be auto, kvm or tcg" ;;
  esac
  # No traffic can leave the VM: no NIC at all, or a NIC on a hub with nothing else.
  # shellcheck disable=SC2054
  case "$netdev" in
    dummy) qa+=(-nic none) ;;
    virtio) qa+=(-netdev hubport,id=n0,hubid=0 -device "virtio-net-pci,netdev=n0,romfile=${vmmac:+,mac=$vmmac}") ;;
    *) die "NETDEV must be dummy or virtio" ;;
  esac
  qa+=(-virtfs "local,path=$share,mount_tag=hostshare,security_model=none,multidevs=remap,id=hs0")
  # shellcheck disable=SC2206  # QEMU_EXTRA is word-split on purpose
  [ -n "${QEMU_EXTRA:-}" ] && qa+=(${QEMU_EXTRA})

  # test.sh's arguments and the RXEVM_ENV variables, quoted for bash
  local inv=$share/.rxevm-invoke.sh v
  {
    echo "# written by rxevm.sh run; sourced before test.sh"
    for v in ${RXEVM_ENV:-}; do printf 'export %s=%q\n' "$v" "${!v-}"; done
    printf 'set --'; printf ' %q' "$@"; echo
  } > "$inv"

  exec 9>"$W/.lock"
  flock -s 9   # shared: several runs may use the image, prepare waits for them

  log "accel=$accel smp=$smp mem=${mem}M netdev=$netdev ip=$vmip share=$share timeout=${timeout}s log=$logf"
  local t0 rcs
  t0=$(date +%s%N)
  set +e
  local qenv=()   # QEMU_PRELOAD: a library preloaded into qemu alone
  [ -z "${QEMU_PRELOAD:-}" ] || qenv=(env "LD_PRELOAD=$QEMU_PRELOAD")
  timeout --kill-after=10 "$timeout" "${qenv[@]}" qemu-system-x86_64 "${qa[@]}" -smp "$smp" -m "$mem" \
      -nodefaults -no-user-config -display none -serial stdio -no-reboot \
      -kernel "$W/vmlinuz" -initrd "$W/initrd.cpio" \
      -append "console=ttyS0 quiet loglevel=4 panic=-1 rxevm.netdev=$netdev rxevm.smoke=$smoke rxevm.tmo=$tmo rxevm.share=1 rxevm.ip=$vmip" \
      < /dev/null 2>&1 | sed -u 's/\r//g' | tee "$logf"
  rcs=("${PIPESTATUS[@]}")
  set -e
  rm -f "$inv"
  local ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  local qrc=${rcs[0]}

  # verdict from the console markers
  local verdict rc=125 urc
  urc=$(grep -a -o 'RXEVM_USER_TEST_RC=[0-9]*' "$logf" | tail -1 | cut -d= -f2 || true)
  if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
    verdict="TIMEOUT after ${timeout}s"; rc=124
  elif ! grep -aq '^RXEVM_BOOT_OK' "$logf"; then
    verdict="guest did not boot (qemu exit $qrc)"
  elif grep -aq '^RXEVM_SHARE_FAILED' "$logf"; then
    verdict="9p share could not be mounted"
  elif ! grep -aq '^RXEVM_RXE_UP=1' "$logf"; then
    verdict="rxe0 did not come up"
  elif [ "$smoke" = 1 ] && ! grep -aq '^RXEVM_SMOKE_RC=0' "$logf"; then
    verdict="smoke tests failed"
  elif [ -z "$urc" ]; then
    verdict="test.sh did not finish (qemu exit $qrc)"
  elif [ "$urc" != 0 ]; then
    verdict="test.sh failed with status $urc"; rc=$urc
  else
    verdict="PASS"; rc=0
  fi
  log "result: $verdict (wall $((ms / 1000)).$(printf %03d $((ms % 1000))) s, log $logf)"
  return "$rc"
}

# ---------------------------------------------------------------- exec

cmd_exec() {
  [ $# -ge 2 ] || usage
  local share=$1; shift
  mkdir -p "$share/bin" "$share/lib"
  share=$(readlink -f "$share")

  # sonames the guest image already has: never shadow them (libc must match the
  # image's loader; libibverbs must be the one whose rxe provider is installed)
  local have
  if [ -s "$W/guest-libs.txt" ]; then
    have=$(cat "$W/guest-libs.txt")
    image_current || log "warning: image in $W is stale; run prepare"
    local built now
    built=$(sed -n 's/^host=libc6 //p' "$W/stamp")
    now=$(host_ver libc6)
    [ "$built" = "$now" ] || log "warning: image has libc6 $built, host has $now: run prepare"
  else
    log "warning: no image in $W yet; using the default list of image libraries"
    have=$(printf '%s\n' libc.so.6 libm.so.6 libstdc++.so.6 libgcc_s.so.1 \
      ld-linux-x86-64.so.2 libpthread.so.0 libdl.so.2 librt.so.1 \
      libibverbs.so.1 librdmacm.so.1 libnl-3.so.200 libnl-route-3.so.200)
  fi

  local b closure="" out
  for b in "$@"; do
    [ -f "$b" ] || die "$b: no such file"
    local dst
    dst=$share/bin/$(basename "$b")
    if [ "$(readlink -f "$b")" != "$(readlink -f "$dst" 2>/dev/null || true)" ]; then
      cp -L "$b" "$dst"
    fi
    out=$(ldd "$b" 2>&1 || true)
    case "$out" in *"not a dynamic executable"*|*"statically linked"*) continue ;; esac
    if grep -q 'not found' <<<"$out"; then
      die "$b: unresolved libraries: $(grep 'not found' <<<"$out" | xargs)"
    fi
    closure+=$out$'\n'
  done

  local name path copied=0 skipped=0 bytes=0
  while read -r name path; do
    if grep -qxF "$name" <<<"$have" || [[ "$path" == */libibverbs/* ]]; then
      skipped=$((skipped + 1)); continue
    fi
    cp -L "$path" "$share/lib/$name"
    copied=$((copied + 1)); bytes=$((bytes + $(stat -c %s "$share/lib/$name")))
  done < <(awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' <<<"$closure" | sort -u)
  log "exec: $# binaries in $share/bin; $copied libraries ($((bytes / 1024)) KiB) copied to $share/lib, $skipped already in the image"
  log "exec: in the guest they run as /mnt/share/bin/NAME (LD_LIBRARY_PATH=/mnt/share/lib is preset)"
}

# ---------------------------------------------------------------- native

# Runs SHARE_DIR/test.sh on this host, for kernels that have rdma_rxe (or real
# RoCE hardware): same environment contract as inside the VM, no VM. Changes
# nothing on the system; create the device first, e.g.
#   modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0
cmd_native() {
  [ $# -ge 1 ] || usage
  local share
  share=$(readlink -f "$1"); shift
  if [ "${1:-}" = -- ]; then shift; fi
  [ -f "$share/test.sh" ] || die "$share/test.sh does not exist"
  local dev=${RXE_DEV:-rxe0}
  [ -d "/sys/class/infiniband/$dev" ] \
    || die "no RDMA device $dev (modprobe rdma_rxe && rdma link add $dev type rxe netdev IFACE)"
  local ifc=${RXE_IF:-}
  [ -n "$ifc" ] || ifc=$(rdma link show "$dev/1" | sed -n 's/.* netdev \([^ ]*\).*/\1/p')
  [ -n "$ifc" ] || die "cannot tell which netdev $dev is bound to; set RXE_IF"
  local ip=${RXE_IP:-}
  [ -n "$ip" ] || ip=$(ip -4 -o addr show dev "$ifc" | awk '{sub("/.*", "", $4); print $4; exit}')
  [ -n "$ip" ] || die "$ifc has no IPv4 address; set RXE_IP"
  # GID index of ::ffff:IP with type RoCE v2
  local want g n v t gidx=""
  local -a oct
  IFS=. read -r -a oct <<<"$ip"
  want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "${oct[@]}")
  for g in "/sys/class/infiniband/$dev/ports/1/gids/"*; do
    n=${g##*/}; v=""; t="RoCE v2"
    read -r v < "$g" 2>/dev/null || true
    [ "$v" = "$want" ] || continue
    read -r t < "/sys/class/infiniband/$dev/ports/1/gid_attrs/types/$n" 2>/dev/null || true
    [ "$t" = "RoCE v2" ] && { gidx=$n; break; }
  done
  [ -n "$gidx" ] || die "no RoCE v2 GID for $ip on $dev"
  log "native: RXE_DEV=$dev RXE_IF=$ifc RXE_IP=$ip RXE_GIDX=$gidx, running $share/test.sh"
  local v
  for v in ${RXEVM_ENV:-}; do export "${v?}"; done
  local rc=0
  (cd "$share" && RXE_DEV=$dev RXE_IF=$ifc RXE_IP=$ip RXE_GIDX=$gidx RXEVM_SHARE=$share \
     bash -c 'if [ -x ./test.sh ]; then exec ./test.sh "$@"; else exec bash ./test.sh "$@"; fi' \
     test.sh "$@") || rc=$?
  log "result: $([ "$rc" = 0 ] && echo PASS || echo "test.sh failed with status $rc")"
  return "$rc"
}

# ---------------------------------------------------------------- multi

# Several VMs as several hosts: VM k (role A, B, ...) has a virtio NIC with MAC
# 52:54:00:77:00:0(k+1) and address 10.77.0.(k+1)/24 on its qemu hub; the hubs
# of neighbouring VMs are joined by a qemu socket netdev over host loopback
# (VM k listens on a free port, VM k+1 connects to it), so all VMs share one
# L2 segment and RoCEv2 packets cross a (virtual) wire. Nothing else is on it.

MULTI_TMP=""
MULTI_PIDS=()

# Process ids below $1 (children first level, then theirs).
multi_descendants() {
  local c
  for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    echo "$c"; multi_descendants "$c"
  done
}

# Stops the qemu whose pid file is $1 (only if that pid is a qemu).
multi_stop_qemu() {
  local pid comm i
  [ -s "$1" ] || return 0
  read -r pid < "$1" 2>/dev/null || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
  case "$comm" in qemu-system*) ;; *) return 0 ;; esac
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

# Always run at the end of `multi` (also on errors and signals): no qemu, no
# runner outlives it.
multi_cleanup() {
  local f pid i alive all
  [ -n "$MULTI_TMP" ] || return 0
  for f in "$MULTI_TMP"/qemu.*.pid; do multi_stop_qemu "$f"; done
  for i in $(seq 50); do   # runners end once their qemu is gone
    alive=0
    for pid in "${MULTI_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.2
  done
  # a qemu that had not written its pid file yet, a stuck timeout or sed
  for pid in "${MULTI_PIDS[@]}"; do
    kill -0 "$pid" 2>/dev/null || continue
    all=$(multi_descendants "$pid")
    # shellcheck disable=SC2086
    kill -TERM "$pid" $all 2>/dev/null || true
    sleep 1
    # shellcheck disable=SC2086
    kill -KILL "$pid" $all 2>/dev/null || true
  done
  rm -rf "$MULTI_TMP"; MULTI_TMP=""
}

# A TCP port on 127.0.0.1 that nothing listens on (and not in "$@").
multi_free_port() {
  local p t
  for t in $(seq 100); do
    p=$(( 20000 + RANDOM % 30000 ))
    case " $* " in *" $p "*) continue ;; esac
    [ -z "$(ss -Htuln "sport = :$p" 2>/dev/null)" ] && { echo "$p"; return 0; }
  done
  die "no free TCP port for the socket netdev"
}

# Path of tcp_nodelay.so in the cache, built from tcp_nodelay.c when missing
# or older; fails (with a warning) when there is no C compiler.
multi_nodelay_lib() {
  local src=$HERE/tcp_nodelay.c lib=$W/tcp_nodelay.so cc
  [ -f "$src" ] || { log "warning: $src missing: the stream link keeps Nagle's delay"; return 1; }
  if [ -s "$lib" ] && [ "$lib" -nt "$src" ]; then echo "$lib"; return 0; fi
  cc=$(command -v cc || command -v gcc || true)
  if [ -z "$cc" ]; then
    log "warning: no C compiler for tcp_nodelay.so: the stream link keeps Nagle's ~40 ms delay"
    return 1
  fi
  mkdir -p "$W"
  if ! { "$cc" -shared -fPIC -O2 -o "$lib.$$" "$src" -ldl && mv "$lib.$$" "$lib"; }; then
    rm -f "$lib.$$"
    log "warning: building tcp_nodelay.so failed: the stream link keeps Nagle's delay"
    return 1
  fi
  echo "$lib"
}

cmd_multi() {
  local shares=() a
  while [ $# -gt 0 ] && [ "$1" != -- ]; do shares+=("$1"); shift; done
  if [ "${1:-}" = -- ]; then shift; fi
  local n=${#shares[@]}
  [ "$n" -ge 2 ] || die "multi needs at least two share dirs"
  [ "$n" -le 26 ] || die "multi: at most 26 VMs"
  local i s
  for i in "${!shares[@]}"; do
    s=$(readlink -f "${shares[$i]}")
    [ -f "$s/test.sh" ] || die "$s/test.sh does not exist"
    case " ${shares[*]:0:$i} " in *" $s "*) die "multi: one share dir per VM ($s twice)" ;; esac
    shares[i]=$s
  done
  command -v ss >/dev/null || die "multi needs ss (iproute2)"
  image_current || { log "image missing or stale: running prepare"; cmd_prepare; exec 9>&-; }

  local grace=${MULTI_GRACE:-30} link=${MULTI_LINK:-stream} preload=""
  case "$link" in stream|udp) ;; *) die "MULTI_LINK must be stream or udp" ;; esac
  if [ "$link" = stream ] && [ "${MULTI_NODELAY:-1}" = 1 ]; then
    preload=$(multi_nodelay_lib) || preload=""
  fi
  local roles=() ips=() macs=() ports=() letters=ABCDEFGHIJKLMNOPQRSTUVWXYZ
  for i in $(seq 0 $((n - 1))); do
    roles+=("${letters:$i:1}")
    ips+=("10.77.0.$((i + 1))")
    macs+=("$(printf '52:54:00:77:00:%02x' $((i + 1)))")
  done
  MULTI_TMP=$(mktemp -d "${TMPDIR:-/tmp}/rxevm-multi.XXXXXX")
  MULTI_PIDS=()
  trap multi_cleanup EXIT
  trap 'log "multi: interrupted: stopping all VMs"; multi_cleanup; exit 130' INT TERM

  log "multi: $n VMs (${roles[*]}) at ${ips[*]}, joined over 127.0.0.1 socket netdevs ($link${preload:+, TCP_NODELAY})"
  local t0 extra peers j
  t0=$(date +%s%N)
  for i in $(seq 0 $((n - 1))); do
    extra="-pidfile $MULTI_TMP/qemu.$i.pid"
    if [ "$link" = udp ]; then
      # link k (VM k <-> k+1): VM k sends from ports[2k] to ports[2k+1]
      if [ "$i" -lt $((n - 1)) ]; then
        ports+=("$(multi_free_port "${ports[@]}")")
        ports+=("$(multi_free_port "${ports[@]}")")
        extra+=" -netdev socket,id=down,udp=127.0.0.1:${ports[$((2 * i + 1))]},localaddr=127.0.0.1:${ports[$((2 * i))]}"
        extra+=" -netdev hubport,id=hdown,hubid=0,netdev=down"
      fi
      if [ "$i" -gt 0 ]; then
        extra+=" -netdev socket,id=up,udp=127.0.0.1:${ports[$((2 * i - 2))]},localaddr=127.0.0.1:${ports[$((2 * i - 1))]}"
        extra+=" -netdev hubport,id=hup,hubid=0,netdev=up"
      fi
    else
      if [ "$i" -gt 0 ]; then
        extra+=" -netdev socket,id=up,connect=127.0.0.1:${ports[$((i - 1))]}"
        extra+=" -netdev hubport,id=hup,hubid=0,netdev=up"
      fi
      if [ "$i" -lt $((n - 1)) ]; then
        ports+=("$(multi_free_port "${ports[@]}")")
        extra+=" -netdev socket,id=down,listen=127.0.0.1:${ports[$i]}"
        extra+=" -netdev hubport,id=hdown,hubid=0,netdev=down"
      fi
    fi
    peers=""
    for j in "${!ips[@]}"; do [ "$j" = "$i" ] || peers+="${peers:+ }${ips[$j]}"; done
    (
      trap - EXIT INT TERM
      export NETDEV=virtio SMP=${SMP:-1} VM_IP=${ips[$i]} VM_MAC=${macs[$i]}
      export QEMU_EXTRA="${QEMU_EXTRA:-}${QEMU_EXTRA:+ }$extra"
      export LOG=${shares[$i]}/rxevm-console.log QEMU_PRELOAD=$preload
      export RXEVM_ROLE=${roles[$i]} RXEVM_INDEX=$i RXEVM_VMS=$n
      export RXE_PEERS=$peers RXE_PEER_IP=${peers%% *}
      export RXEVM_ENV="${RXEVM_ENV:-} RXEVM_ROLE RXEVM_INDEX RXEVM_VMS RXE_PEERS RXE_PEER_IP"
      rc=0
      cmd_run "${shares[$i]}" -- "$@" || rc=$?
      echo "$rc" > "$MULTI_TMP/rc.$i"
    ) > >(sed -u "s/^/[${roles[$i]}] /") 2>&1 &
    MULTI_PIDS+=("$!")
    # the next VM connects to this one's listening socket: wait for it
    if [ "$link" = stream ] && [ "$i" -lt $((n - 1)) ]; then
      for j in $(seq 300); do
        [ -n "$(ss -Htln "sport = :${ports[$i]}" 2>/dev/null)" ] && break
        kill -0 "${MULTI_PIDS[$i]}" 2>/dev/null || break
        sleep 0.1
      done
      if [ -z "$(ss -Htln "sport = :${ports[$i]}" 2>/dev/null)" ]; then
        log "multi: VM ${roles[$i]}'s qemu is not listening on 127.0.0.1:${ports[$i]}: stopping"
        multi_cleanup; return 125
      fi
    fi
  done

  # wait for all; once one has failed, the others get `grace` seconds
  local rcs=() left fail_at="" now
  while :; do
    left=0
    for i in $(seq 0 $((n - 1))); do
      [ -n "${rcs[$i]:-}" ] && continue
      if [ -s "$MULTI_TMP/rc.$i" ]; then
        read -r "rcs[$i]" < "$MULTI_TMP/rc.$i"
      elif ! kill -0 "${MULTI_PIDS[$i]}" 2>/dev/null; then
        rcs[i]=125   # the runner died without a verdict
      else
        left=$((left + 1)); continue
      fi
      if [ "${rcs[$i]}" != 0 ] && [ -z "$fail_at" ]; then
        fail_at=$(date +%s)
        log "multi: VM ${roles[$i]} failed (status ${rcs[$i]}): the others get ${grace}s"
      fi
    done
    [ "$left" = 0 ] && break
    now=$(date +%s)
    if [ -n "$fail_at" ] && [ $((now - fail_at)) -ge "$grace" ]; then
      log "multi: stopping the VMs still running"
      for i in $(seq 0 $((n - 1))); do
        [ -n "${rcs[$i]:-}" ] || multi_stop_qemu "$MULTI_TMP/qemu.$i.pid"
      done
      fail_at=$((now + 3600))   # once
    fi
    sleep 0.5
  done
  wait "${MULTI_PIDS[@]}" 2>/dev/null || true

  local ms=$(( ($(date +%s%N) - t0) / 1000000 )) rc=0 marks
  for i in $(seq 0 $((n - 1))); do
    marks=$(grep -a -o 'RXEVM_[A-Z_]*RC=[0-9]*' "${shares[$i]}/rxevm-console.log" 2>/dev/null | xargs || true)
    log "multi: VM ${roles[$i]} (${ips[$i]}): $([ "${rcs[$i]}" = 0 ] && echo PASS || echo "FAIL (status ${rcs[$i]})") ${marks:-(no RXEVM_*_RC lines)}, log ${shares[$i]}/rxevm-console.log"
    [ "$rc" != 0 ] || rc=${rcs[$i]}
  done
  log "multi: result: $([ "$rc" = 0 ] && echo PASS || echo FAIL) (wall $((ms / 1000)).$(printf %03d $((ms % 1000))) s)"
  multi_cleanup
  trap - EXIT INT TERM
  return "$rc"
}

# ---------------------------------------------------------------- main

case "${1:-}" in
  prepare) shift; cmd_prepare "$@" ;;
  run) shift; cmd_run "$@" ;;
  exec) shift; cmd_exec "$@" ;;
  native) shift; cmd_native "$@" ;;
  multi) shift; cmd_multi "$@" ;;
  -h|--help|help) usage ;;
  *) usage ;;
esac
