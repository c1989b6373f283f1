#!/usr/bin/env bash
# deploy/cluster, netns backend: 2 memory nodes and 2 compute nodes, each in
# its own network namespace; load a real graph, PageRank and BFS verified
# against the reference; SIGTERM to the launcher of a long job must stop
# its compute nodes in their namespaces; then `down` must leave no
# namespace, link or dmg process behind. Needs root (ip netns). Graph:
# $DMG_GRAPHS_DIR/road-NY.el, else kron:16.
set -euo pipefail
cd "$(dirname "$0")/.."
export DMG_BIN="${DMG_BIN:-$PWD/build/release/tools/dmg}"
work=$(mktemp -d)
file=$work/cluster.toml
C=(deploy/cluster --state "$work/state" "$file")
trap '"${C[@]}" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

# A private name and subnet, so a cluster someone else has up is untouched.
# Real (non-loopback) addresses: the nodes share a cluster secret.
"$DMG_BIN" secret --output="$work/secret" >/dev/null
cat > "$file" <<TOML
name = "t-netns"
backend = "netns"
secret_file = "$work/secret"
[netns]
subnet = "10.77.41.0/24"
[[memory_nodes]]
port = 7400
[[memory_nodes]]
port = 7400
[[compute_nodes]]
threads = 1
[[compute_nodes]]
threads = 1
TOML

graph=kron:16
if [ -f "${DMG_GRAPHS_DIR:-}/road-NY.el" ]; then graph=$DMG_GRAPHS_DIR/road-NY.el; fi
echo "cluster_netns_test: graph $graph"

"${C[@]}" up
"${C[@]}" status --require_store >/dev/null && { echo "FAIL: a store before load"; exit 1; }
"${C[@]}" load "$graph"
"${C[@]}" status --require_store
# Without the secret, a client in the compute namespace gets nothing.
first=$(sed -n 's/.*"addr": "\([0-9.]*:[0-9]*\)".*/\1/p' "$work/state/state.json" | head -1)
if [ -n "$first" ]; then
  if ip netns exec dmg-t-netns-c0 env -u DMG_SECRET_FILE "$DMG_BIN" run --algo=bfs \
       --memory_nodes="$first" >"$work/nosecret.log" 2>&1; then
    echo "FAIL: a job without the secret ran"; exit 1
  fi
  grep -q "requires the cluster secret" "$work/nosecret.log" \
    || { echo "FAIL: no clear refusal:"; cat "$work/nosecret.log"; exit 1; }
  echo "cluster_netns_test: a job without the secret is refused"
fi
if grep -l "is OPEN" "$work"/state/logs/*.log 2>/dev/null; then
  echo "FAIL: a memory node ran open"; exit 1
fi
for algo in pagerank bfs; do
  out=$("${C[@]}" run --algo=$algo --graph="$graph" --verify)
  echo "$out"
  grep -q "verify: OK" <<<"$out" || { echo "FAIL: $algo not verified"; exit 1; }
  grep -q "2 compute nodes" <<<"$out" || { echo "FAIL: $algo not on 2 compute nodes"; exit 1; }
done

# Within about 2 s of the SIGTERM: no compute node left, nor a job region.
regions() { "${C[@]}" status | awk '/job regions/ {n += $(NF-4)} END {print n + 0}'; }
"${C[@]}" run --algo=pagerank --graph="$graph" --tolerance=0 --max_iters=10000000 \
  --keep_state_s=0 >"$work/run.log" 2>&1 &
launcher=$!; left=; n=
for _ in $(seq 200); do [ "$(regions)" -gt 0 ] && break; sleep 0.05; done
[ "$(regions)" -gt 0 ] || { cat "$work/run.log"; echo "FAIL: the long job never ran"; exit 1; }
kill -TERM $launcher
for _ in $(seq 20); do
  left=$(ip netns pids dmg-t-netns-c0; ip netns pids dmg-t-netns-c1); n=$(regions)
  [ -z "$left" ] && [ "$n" = 0 ] && break; sleep 0.1
done
rc=0; wait $launcher || rc=$?
[ -z "$left" ] && [ "$n" = 0 ] && [ $rc = 143 ] ||
  { echo "FAIL: SIGTERM to the launcher: exit $rc, $n job regions, pids left: $left"; exit 1; }
echo "cluster_netns_test: SIGTERM to the launcher stopped its compute nodes"
"${C[@]}" down
"${C[@]}" down >/dev/null   # idempotent
# An `up` whose state was lost (a crash, a deleted folder): down still finds
# everything by the names it derives from the file.
"${C[@]}" up >/dev/null
rm -rf "$work/state"
"${C[@]}" down

# Nothing left: namespaces, bridge, veths, live processes on our subnet.
left=$(ip netns list | grep '^dmg-t-netns-' || true)
left+=$(ip -o link show | grep -E ': dmg[bv]'"$(printf t-netns | sha1sum | cut -c1-5)" || true)
left+=$(ps -eo stat=,args= | awk '$1 !~ /^Z/' | grep -- '--listen=10\.77\.41\.' | grep -v grep || true)
[ -d "$work/state" ] && left+=" state folder"
if [ -n "$left" ]; then echo "FAIL: left behind: $left"; exit 1; fi
echo "cluster_netns_test: PASS"
