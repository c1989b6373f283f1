#!/usr/bin/env bash
# deploy/cluster, ssh backend, against a real sshd: sshd runs in a network
# namespace (a "host" at 10.77.42.2) with a throwaway key pair and a private
# sshd_config; `cmake --install` makes an installed tree, the launcher pushes
# it there (push --from), starts 2 memory nodes over ssh with the pushed
# PREFIX/bin/dmg (nohup, remote pid files), asks `doctor` (here and on the
# host), runs PageRank on 2 compute nodes (one here, one over ssh) with
# --verify; SIGTERM and SIGKILL to a launcher whose run has a compute node
# over ssh must stop it there too; and `down` must leave no process or
# folder. First, without sshd: a host at 127.0.0.1 is reached over ssh like
# any other (a fake ssh and scp on PATH log their arguments and run the
# command here), push says what it copied where, and the daemon and the
# compute node there run the pushed dmg.
# Needs root; installs openssh-server when missing (skips without apt).
set -euo pipefail
cd "$(dirname "$0")/.."
export DMG_BIN="${DMG_BIN:-$PWD/build/release/tools/dmg}"
ns=dmg-t-sshhost; host=10.77.42.2; veth=dmgtsshv0
work=$(mktemp -d)
file=$work/cluster.toml
C=(deploy/cluster --state "$work/state" "$file")
L=(deploy/cluster --state "$work/lo-state" "$work/lo.toml")
cleanup() {
  PATH=$work/fakebin:$PATH "${L[@]}" down >/dev/null 2>&1 || true
  "${C[@]}" down >/dev/null 2>&1 || true
  [ -f "$work/sshd.pid" ] && kill "$(cat "$work/sshd.pid")" 2>/dev/null || true
  ip netns del $ns 2>/dev/null || true
  ip link del $veth 2>/dev/null || true
  [ -n "${KEEP_SSHD_LOG:-}" ] && cp "$work/sshd.log" "$KEEP_SSHD_LOG"
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

mkdir "$work/fakebin"
cat > "$work/fakebin/ssh" <<'SH'
#!/bin/bash
# ssh OPTIONS... TARGET -- COMMAND: logged, then COMMAND runs here.
echo "ssh $*" >> "${0%/*}/log"
while [ $# -gt 0 ] && [ "$1" != -- ]; do shift; done
exec bash -c "${*:2}"
SH
cat > "$work/fakebin/scp" <<'SH'
#!/bin/bash
# scp OPTIONS... SOURCES... TARGET:DIR: logged, then copied here.
echo "scp $*" >> "${0%/*}/log"
files=()
while [ $# -gt 0 ]; do
  case $1 in -o|-i|-P) shift 2 ;; -*) shift ;; *) files+=("$1"); shift ;; esac
done
exec cp -r "${files[@]:0:${#files[@]}-1}" "${files[-1]#*:}"
SH
chmod +x "$work/fakebin/ssh" "$work/fakebin/scp"
# With a cluster secret: the compute node over ssh proves the job's token,
# which must reach it on the session's stdin (never a command line).
"$DMG_BIN" secret --output="$work/lo.secret" >/dev/null
cat > "$work/lo.toml" <<TOML
name = "t-ssh-lo"
backend = "ssh"
secret_file = "$work/lo.secret"
[ssh]
prefix = "$work/lo-prefix"
remote_state = "$work/lo-remote-state"
[[memory_nodes]]
host = "127.0.0.1"
port = 7457
[[compute_nodes]]
threads = 1
[[compute_nodes]]
host = "127.0.0.1"
threads = 1
TOML
out=$(PATH=$work/fakebin:$PATH "${L[@]}" push)
echo "$out"
grep -q "pushed bin/dmg (= $DMG_BIN, [0-9.]* MB) to 127.0.0.1:$work/lo-prefix/" <<<"$out" ||
  { echo "FAIL: push to 127.0.0.1 did not say what it copied where"; exit 1; }
grep -q "^scp .* 127.0.0.1:$work/lo-prefix/" "$work/fakebin/log" ||
  { echo "FAIL: push used no scp"; exit 1; }
PATH=$work/fakebin:$PATH "${L[@]}" up
n=$(pgrep -fc "^$work/lo-prefix/bin/dmg memory-node --listen=127.0.0.1:7457" || true)
[ "$n" = 1 ] || { echo "FAIL: the memory node at 127.0.0.1 runs no pushed dmg"; exit 1; }
PATH=$work/fakebin:$PATH "${L[@]}" load kron:10
out=$(PATH=$work/fakebin:$PATH "${L[@]}" run --algo=bfs --graph=kron:10 --verify)
grep -q "verify: OK" <<<"$out" && grep -q "2 compute nodes" <<<"$out" ||
  { echo "$out"; echo "FAIL: bfs over fake ssh"; exit 1; }
grep -q "^ssh .*127.0.0.1 -- sh -c .* $work/lo-prefix/bin/dmg run .*--compute_node_id=1" \
  "$work/fakebin/log" || { echo "FAIL: compute node 1 at 127.0.0.1 ran without ssh"; exit 1; }
if grep "compute_node_id=0" "$work/fakebin/log"; then
  echo "FAIL: compute node 0 (no host) went over ssh"; exit 1
fi
if grep -q "DMG_JOB_TOKEN=" "$work/fakebin/log"; then
  echo "FAIL: the job's token was on an ssh command line"; exit 1
fi
PATH=$work/fakebin:$PATH "${L[@]}" down
[ -e "$work/lo-remote-state" ] && { echo "FAIL: down left $work/lo-remote-state"; exit 1; }
echo "cluster_ssh_test: a host at 127.0.0.1 is reached over ssh"

if [ ! -x /usr/sbin/sshd ]; then
  if ! command -v apt-get >/dev/null; then
    echo "cluster_ssh_test: SKIP: no /usr/sbin/sshd and no apt-get to install it"; exit 0
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends openssh-server >/dev/null
fi
cleanup_before() { ip netns del $ns 2>/dev/null || true; ip link del $veth 2>/dev/null || true; }
cleanup_before

# The "host": a namespace joined to this one by a veth pair.
ip netns add $ns
ip link add $veth type veth peer name eth0 netns $ns
ip addr add 10.77.42.1/30 dev $veth && ip link set $veth up
ip -n $ns addr add $host/30 dev eth0 && ip -n $ns link set eth0 up && ip -n $ns link set lo up

# Its sshd: root by key only, everything in $work (StrictModes off: the
# key folder sits under /tmp, whose modes sshd may refuse).
ssh-keygen -q -t ed25519 -N '' -f "$work/hostkey"
ssh-keygen -q -t ed25519 -N '' -f "$work/id"
cp "$work/id.pub" "$work/authorized_keys"
cat > "$work/sshd_config" <<CONF
Port 2222
ListenAddress $host
HostKey $work/hostkey
AuthorizedKeysFile $work/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PidFile none
StrictModes no
Subsystem sftp /usr/lib/openssh/sftp-server
CONF
mkdir -p /run/sshd   # sshd's privilege-separation folder
# -D: in the foreground, we keep its pid (daemon() can fail in containers).
ip netns exec $ns /usr/sbin/sshd -D -f "$work/sshd_config" -E "$work/sshd.log" &
echo $! > "$work/sshd.pid"
for _ in $(seq 50); do (exec 3<>/dev/tcp/$host/2222) 2>/dev/null && break; sleep 0.1; done

cat > "$file" <<TOML
name = "t-ssh"
backend = "ssh"
wait_ms = 15000
[ssh]
user = "root"
port = 2222
identity_file = "$work/id"
options = ["StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "LogLevel=ERROR"]
prefix = "$work/prefix"
remote_state = "$work/remote-state"
[[memory_nodes]]
host = "$host"
port = 7400
[[memory_nodes]]
host = "$host"
port = 7401
[[compute_nodes]]
threads = 1
[[compute_nodes]]
host = "$host"
threads = 1
TOML

graph=kron:16
if [ -f "${DMG_GRAPHS_DIR:-}/ca-GrQc.el" ]; then graph=$DMG_GRAPHS_DIR/ca-GrQc.el; fi
echo "cluster_ssh_test: graph $graph"

# The installed tree (bin/dmg, share/dmg/deploy, share/doc/dmg) is what goes.
cmake --install build/release --prefix "$work/install" >/dev/null
rc=0; "${C[@]}" push --from "$work/nonexistent" 2>/dev/null || rc=$?
[ $rc = 2 ] || { echo "FAIL: push --from a missing folder: exit $rc, not 2"; exit 1; }
"${C[@]}" push --from "$work/install"
for f in bin/dmg share/dmg/deploy/cluster share/dmg/deploy/softroce-setup.sh share/doc/dmg/DEPLOY.md; do
  [ -e "$work/prefix/$f" ] || { echo "FAIL: push left no $work/prefix/$f"; exit 1; }
done
"${C[@]}" up
# The daemons on the host run the pushed dmg, not the build tree's.
n=$(ps -eo args= | grep -c "^$work/prefix/bin/dmg memory-node" || true)
[ "$n" = 2 ] || { echo "FAIL: $n memory nodes run $work/prefix/bin/dmg, not 2"; exit 1; }
out=$("${C[@]}" doctor) || { echo "$out"; echo "FAIL: doctor exited non-zero"; exit 1; }
grep -q "OK    memory node $host:7401 (position 1): up" <<<"$out" \
  || { echo "$out"; echo "FAIL: doctor did not see memory node 1 up"; exit 1; }
grep -q "^==> $host <==" <<<"$out" || { echo "FAIL: doctor did not run on $host"; exit 1; }
"${C[@]}" load "$graph"
out=$("${C[@]}" run --algo=pagerank --graph="$graph" --verify)
echo "$out"
grep -q "verify: OK" <<<"$out" || { echo "FAIL: pagerank not verified"; exit 1; }
grep -q "2 compute nodes" <<<"$out" || { echo "FAIL: not on 2 compute nodes"; exit 1; }

# A long job, compute node 1 over ssh, and a launcher stopped by SIG: within
# about 2 s no compute node may be left, here or there, nor a job region.
regions() { "${C[@]}" status | awk '/job regions/ {n += $(NF-4)} END {print n + 0}'; }
for sig in TERM KILL; do
  "${C[@]}" run --algo=pagerank --graph="$graph" --tolerance=0 --max_iters=10000000 \
    --keep_state_s=0 >"$work/run.log" 2>&1 &
  launcher=$!; left=; n=
  for _ in $(seq 200); do [ "$(regions)" -gt 0 ] && break; sleep 0.05; done
  [ "$(pgrep -fc -- "^$work/prefix/bin/dmg run .*--compute_node_id=1" || true)" = 1 ] ||
    { cat "$work/run.log"; echo "FAIL: SIG$sig: compute node 1 never ran"; exit 1; }
  exec 3>&2 2>/dev/null   # bash's own "Killed" notice for SIGKILL: not a failure
  kill -$sig $launcher
  for _ in $(seq 20); do
    left=$(pgrep -af -- "dmg run .*--memory_nodes=$host:" || true); n=$(regions 2>&3)
    [ -z "$left" ] && [ "$n" = 0 ] && break; sleep 0.1
  done
  wait $launcher || true
  exec 2>&3 3>&-
  [ -z "$left" ] && [ "$n" = 0 ] ||
    { echo "FAIL: SIG$sig to the launcher left $n job regions and: $left"; exit 1; }
  echo "cluster_ssh_test: SIG$sig to the launcher: no compute node left, here or over ssh"
done
"${C[@]}" down
"${C[@]}" down >/dev/null   # idempotent

left=$(ps -eo stat=,args= | awk '$1 !~ /^Z/' | grep -- "--listen=$host:" | grep -v grep || true)
[ -e "$work/remote-state" ] && left+=" remote state folder"
[ -e "$work/state" ] && left+=" state folder"
if [ -n "$left" ]; then echo "FAIL: left behind: $left"; exit 1; fi
echo "cluster_ssh_test: PASS"
