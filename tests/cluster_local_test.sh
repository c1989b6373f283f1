#!/usr/bin/env bash
# deploy/cluster, local backend: up, a verified BFS on 2 compute nodes, down;
# a bad cluster file is one line naming the file and key, exit 2; every
# command answers --help, a misspelt one gets a suggestion; and a run
# stopped by SIGTERM, SIGHUP, SIGINT or SIGKILL to the launcher leaves no
# compute node running and no job region on the memory nodes.
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

for cmd in up status load run logs down push doctor slurm-script; do
  for h in --help -h; do
    rc=0; out=$("${C[@]}" $cmd $h 2>&1) || rc=$?
    [ $rc = 0 ] && grep -q "^usage: cluster .*FILE $cmd" <<<"$out" ||
      { echo "FAIL: $cmd $h: exit $rc: $out"; exit 1; }
  done
done
rc=0; err=$("${C[@]}" stauts 2>&1) || rc=$?
[ $rc = 2 ] && grep -q "unknown command 'stauts'; did you mean 'status'?" <<<"$err" ||
  { echo "FAIL: a misspelt command: exit $rc: $err"; exit 1; }

# A long job whose launcher gets SIG: within about 2 s no compute node may
# be left, nor a job region (--keep_state_s=0: a job that stops is not kept
# for --resume, so its regions go with its connections).
nodes=127.0.0.1:7453,127.0.0.1:7454
regions() {
  "$DMG_BIN" status --memory_nodes=$nodes | awk '/job regions/ {n += $(NF-4)} END {print n + 0}'
}
stop_run() {  # SIG COMPUTE_NODES EXIT_STATUS
  # (env: a background job of a script starts with SIGINT ignored.)
  env --default-signal=INT "${C[@]}" run --algo=pagerank --graph=kron:12 --tolerance=0 \
    --max_iters=10000000 --keep_state_s=0 --compute_nodes=$2 >"$work/run.log" 2>&1 &
  local launcher=$! rc=0 left= n=
  for _ in $(seq 200); do [ "$(regions)" -gt 0 ] && break; sleep 0.05; done
  [ "$(regions)" -gt 0 ] || { cat "$work/run.log"; echo "FAIL: SIG$1: the job never ran"; exit 1; }
  exec 3>&2 2>/dev/null   # bash's own "Killed" notice for SIGKILL: not a failure
  kill -$1 $launcher
  for _ in $(seq 40); do
    left=$(pgrep -af -- "run .*--memory_nodes=$nodes" || true); n=$(regions 2>&3)
    [ -z "$left" ] && [ "$n" = 0 ] && break; sleep 0.05
  done
  wait $launcher || rc=$?
  exec 2>&3 3>&-
  [ -z "$left" ] && [ "$n" = 0 ] ||
    { echo "FAIL: SIG$1, $2 compute node(s): $n job regions left, and: $left"; exit 1; }
  [ $rc = $3 ] ||
    { cat "$work/run.log"; echo "FAIL: SIG$1: the launcher exited $rc, not $3"; exit 1; }
  echo "cluster_local_test: SIG$1 to the launcher of $2 compute node(s): none left"
}
stop_run TERM 2 143
stop_run HUP 1 129
stop_run INT 2 130
stop_run KILL 2 137
"${C[@]}" down
left=$(ps -eo stat=,args= | awk '$1 !~ /^Z/' | grep -E -- '--listen=127\.0\.0\.1:745[34]' | grep -v grep || true)
if [ -n "$left" ] || [ -e "$work/state" ]; then echo "FAIL: left behind: $left"; exit 1; fi
echo "cluster_local_test: PASS"
