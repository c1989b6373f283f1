#!/usr/bin/env bash
# deploy/cluster, local backend: up, a verified BFS on 2 compute nodes, down;
# and a bad cluster file is one line naming the file and key, exit 2.
set -euo pipefail
cd "$(dirname "$0")/.."
export DMG_BIN="${DMG_BIN:-$PWD/build/release/tools/dmg}"
work=$(mktemp -d)
C=(deploy/cluster --state "$work/state" "$work/c.toml")
trap '"${C[@]}" down >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

printf 'backend = "local"\n[[memory_nodes]]\nport = 7453\nmemroy_mb = 1\n' > "$work/c.toml"
rc=0; err=$("${C[@]}" up 2>&1) || rc=$?
[ $rc = 2 ] && grep -q "c.toml: memory_nodes\[0\].memroy_mb: unknown key" <<<"$err" ||
  { echo "FAIL: bad file: rc $rc: $err"; exit 1; }

printf 'name = "t-local"\nbackend = "local"\n[[memory_nodes]]\nport = 7453\n[[memory_nodes]]\nport = 7454\n' > "$work/c.toml"
"${C[@]}" up
"${C[@]}" load kron:12
out=$("${C[@]}" run --algo=bfs --graph=kron:12 --verify --compute_nodes=2)
echo "$out"
grep -q "verify: OK" <<<"$out" || { echo "FAIL: bfs not verified"; exit 1; }
"${C[@]}" down
left=$(ps -eo stat=,args= | awk '$1 !~ /^Z/' | grep -E -- '--listen=127\.0\.0\.1:745[34]' | grep -v grep || true)
if [ -n "$left" ] || [ -e "$work/state" ]; then echo "FAIL: left behind: $left"; exit 1; fi
echo "cluster_local_test: PASS"
