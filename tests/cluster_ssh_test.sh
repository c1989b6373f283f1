#!/usr/bin/env bash
# deploy/cluster, ssh backend, against a real sshd: sshd runs in a network
# namespace (a "host" at 10.77.42.2) with a throwaway key pair and a private
# sshd_config; `cmake --install` makes an installed tree, the launcher pushes
# it there (push --from), starts 2 memory nodes over ssh with the pushed
# PREFIX/bin/dmg (nohup, remote pid files), asks `doctor` (here and on the
# host), runs PageRank on 2 compute nodes (one here, one over ssh) with
# --verify, and `down` must leave no process or folder.
# Needs root; installs openssh-server when missing (skips without apt).
set -euo pipefail
cd "$(dirname "$0")/.."
export DMG_BIN="${DMG_BIN:-$PWD/build/release/tools/dmg}"
if [ ! -x /usr/sbin/sshd ]; then
  if ! command -v apt-get >/dev/null; then
    echo "cluster_ssh_test: SKIP: no /usr/sbin/sshd and no apt-get to install it"; exit 0
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends openssh-server >/dev/null
fi

ns=dmg-t-sshhost; host=10.77.42.2; veth=dmgtsshv0
work=$(mktemp -d)
file=$work/cluster.toml
C=(deploy/cluster --state "$work/state" "$file")
cleanup() {
  "${C[@]}" down >/dev/null 2>&1 || true
  [ -f "$work/sshd.pid" ] && kill "$(cat "$work/sshd.pid")" 2>/dev/null || true
  ip netns del $ns 2>/dev/null || true
  ip link del $veth 2>/dev/null || true
  [ -n "${KEEP_SSHD_LOG:-}" ] && cp "$work/sshd.log" "$KEEP_SSHD_LOG"
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
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
host = "localhost"
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
"${C[@]}" down
"${C[@]}" down >/dev/null   # idempotent

left=$(ps -eo stat=,args= | awk '$1 !~ /^Z/' | grep -- "--listen=$host:" | grep -v grep || true)
[ -e "$work/remote-state" ] && left+=" remote state folder"
[ -e "$work/state" ] && left+=" state folder"
if [ -n "$left" ]; then echo "FAIL: left behind: $left"; exit 1; fi
echo "cluster_ssh_test: PASS"
