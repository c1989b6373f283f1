#!/usr/bin/env bash
# The experiment runner (deploy/experiments/sweep.py): a tiny sweep (kron:10,
# BFS, local + tcp on the local backend, 1-2 memory nodes, 2 cache sizes,
# 1 trial) writes a CSV row per run and the plots; a bad sweep file is one
# line and exit 2; Ctrl-C in the middle of a run takes the cluster down. No
# dmg-sweep-* folder and no memory-node daemon is left behind. Then the
# scaling pieces: an [ablation] sweep at 1-4 compute nodes with stats,
# scaling.py's flags, cost_model.py --validate, fit_coordinator.py. ~20 s.
set -euo pipefail
cd "$(dirname "$0")/.."
DMG_BIN="${DMG_BIN:-$PWD/build/release/tools/dmg}"
DMG_BIN=$(realpath "$DMG_BIN")
[ -x "$DMG_BIN" ] || { echo "experiments_test: no dmg at $DMG_BIN (build it or set DMG_BIN)"; exit 1; }
work=$(mktemp -d)
mkdir -p "$work/tmp"
export TMPDIR="$work/tmp"     # the runner's temporary folders land here
daemons() { ps -eo pid=,args= | awk -v b="$DMG_BIN" '$2 == b && $3 == "memory-node" {print $1}' | sort; }
before=$(daemons)
trap 'rm -rf "$work"' EXIT
fail() { echo "experiments_test: FAIL: $*"; exit 1; }
check_clean() {
  left=$(ls "$TMPDIR" | grep '^dmg-sweep-' || true)
  [ -z "$left" ] || fail "$1: temporary folders left: $left"
  new=$(comm -13 <(echo "$before") <(daemons) | tr '\n' ' ')
  [ -z "${new// }" ] || fail "$1: memory-node daemons left: $new"
}

cat > "$work/tiny.toml" <<'EOF'
name = "tiny"
graphs = ["kron:10"]
algorithms = ["bfs"]
transports = ["local", "tcp"]
memory_nodes = [1, 2]
caches = ["75%", "100%"]
threads = [1]
trials = 1
verify = true
[cluster]
backend = "local"
EOF
out="$work/out"
deploy/experiments/sweep.py "$work/tiny.toml" --dmg "$DMG_BIN" --out "$out" > "$work/log" 2>&1 ||
  { cat "$work/log"; fail "the sweep failed"; }
rows=$(tail -n +2 "$out/results.csv" | wc -l)
ok=$(tail -n +2 "$out/results.csv" | grep -c ',ok,' || true)
[ "$rows" = 8 ] && [ "$ok" = 8 ] || { cat "$out/results.csv"; fail "$rows CSV rows, $ok ok (want 8, 8)"; }
head -1 "$out/results.csv" | grep -q 'time_median_s,time_min_s,time_max_s' || fail "CSV header"
head -1 "$out/results.csv" | grep -q ',verify,' || fail "no verify column"
for p in cache-kron10-bfs-local cache-kron10-bfs-tcp memory-kron10-bfs-local memory-kron10-bfs-tcp; do
  [ -s "$out/$p.png" ] || { ls "$out"; fail "no $p.png"; }
done
[ ! -e "$out/compute-kron10-bfs-tcp.png" ] || fail "a compute-node plot with one compute-node count"
ls "$out"/summaries/*.json >/dev/null || fail "no summary JSONs kept"
check_clean "after the sweep"

# A bad sweep file: one line naming the file and the key, exit 2.
printf 'graphs = ["kron:10"]\nalgorithms = ["bfs"]\ncahces = ["5%%"]\n' > "$work/bad.toml"
rc=0; err=$(deploy/experiments/sweep.py "$work/bad.toml" --dmg "$DMG_BIN" 2>&1) || rc=$?
[ $rc = 2 ] && grep -q "bad.toml: cahces: unknown key" <<<"$err" || fail "bad file: rc $rc: $err"

# Ctrl-C while a run is going: the cluster goes down, the temp folder goes.
mkdir -p "$work/bin"
cat > "$work/bin/dmg" <<EOF
#!/bin/sh
[ "\$1" = run ] && sleep 60
exec "$DMG_BIN" "\$@"
EOF
chmod +x "$work/bin/dmg"
deploy/experiments/sweep.py "$work/tiny.toml" --dmg "$work/bin/dmg" --out "$work/int" \
  --set transports=tcp --set memory_nodes=2 > "$work/int.log" 2>&1 &
pid=$!
for _ in $(seq 100); do ls "$work/int/logs/"001-* >/dev/null 2>&1 && break; sleep 0.1; done
ls "$work/int/logs/"001-* >/dev/null 2>&1 || { cat "$work/int.log"; fail "the interrupted sweep never started a run"; }
sleep 0.5
kill -INT $pid
rc=0; wait $pid || rc=$?
[ $rc = 130 ] || { cat "$work/int.log"; fail "interrupted sweep: exit $rc, want 130"; }
left=$(ps -eo pid=,args= | grep -F "$work/" | grep -v grep || true)
[ -z "$left" ] || fail "processes of the interrupted sweep left: $left"
check_clean "after Ctrl-C"
# The scaling sweep's pieces (sweeps/scaling.toml's keys, tiny): compute
# nodes 1, 2, 4 with --stats_json, interleaved repeats, an [ablation] grid
# with its verdict (pull/push is recorded as skipped, not run); scaling.py
# maps its old flags onto it; cost_model.py --validate reads the stats.
cat > "$work/scale.toml" <<'EOF'
name = "scale"
graphs = ["kron:12"]
algorithms = ["pagerank", "bfs"]
compute_nodes = [1, 2, 4]
threads = [1]
stats_json = true
repeats = 2
[algorithm_flags]
pagerank = ["--max_iters=3", "--tolerance=0"]
[ablation]
algorithms = "bfs"
compute_nodes = 2
update_modes = ["auto", "pull", "batch"]
directions = ["auto", "push"]
EOF
deploy/experiments/sweep.py "$work/scale.toml" --dmg "$DMG_BIN" --out "$work/scale" > "$work/scale.log" 2>&1 ||
  { cat "$work/scale.log"; fail "the scaling sweep failed"; }
csv="$work/scale/results.csv"
rows=$(tail -n +2 "$csv" | wc -l)
skipped=$(grep -c ',skipped,' "$csv" || true)
[ "$rows" = 23 ] && [ "$skipped" = 1 ] || { cat "$csv"; fail "$rows rows, $skipped skipped (want 23, 1)"; }
head -1 "$csv" | grep -q ',command,experiment,update_mode,direction,rep,' || fail "CSV: new columns not last"
grep -q '^ablation: bfs on kron:12' "$work/scale/summary.txt" &&
  grep -Eq '=> (PASS|MISS)$' "$work/scale/summary.txt" &&
  grep -Eq '^ablation overall: auto within 10% of the best forced time in [0-9]+ of 1 cells' "$work/scale/summary.txt" &&
  grep -q '^scaling ' "$work/scale/summary.txt" || { cat "$work/scale/summary.txt"; fail "summary.txt"; }
for p in ablation-kron12-bfs compute-kron12-pagerank-local; do
  [ -s "$work/scale/$p.png" ] || { ls "$work/scale"; fail "no $p.png"; }
done
deploy/experiments/sweep.py --replot "$csv" --out "$work/replot" > /dev/null 2>&1 &&
  cmp -s "$work/scale/summary.txt" "$work/replot/summary.txt" || fail "--replot: another summary.txt"
n=$(deploy/experiments/scaling.py --quick --dmg "$DMG_BIN" --no-ablation --algos bfs --dry-run |
  grep -c -- '--algo=bfs')
[ "$n" = 2 ] || fail "scaling.py --quick --no-ablation --algos bfs: $n runs (want 2: 1 and 2 nodes)"
st() { ls "$work/scale/stats/"*"-$1-local-c$2-"*-r0.json | head -1; }
deploy/experiments/cost_model.py --validate "pr=$(st pagerank 1),$(st pagerank 2),$(st pagerank 4)" \
  --project 8,64 --memory 1,4 > "$work/cm.log" 2>&1 || { cat "$work/cm.log"; fail "cost_model --validate"; }
grep -q '^| pr | 4 | 1+2-node |' "$work/cm.log" && grep -q '^| pr | 64 | ' "$work/cm.log" ||
  { cat "$work/cm.log"; fail "cost_model --validate: no 4-node row or 64-node projection"; }
check_clean "after the scaling sweep"
# fit_coordinator.py: constants made from known ones come back (self-test);
# a fit of the scaling sweep's stats writes a line dmg run takes.
deploy/experiments/fit_coordinator.py --self_test > "$work/fit.log" 2>&1 ||
  { cat "$work/fit.log"; fail "fit_coordinator.py --self_test"; }
deploy/experiments/fit_coordinator.py "$work/scale/stats" --write "$work/k.txt" > "$work/fit.log" 2>&1 &&
  grep -q '^cost_constants: pull_ns=' "$work/fit.log" || { cat "$work/fit.log"; fail "fit_coordinator.py"; }
"$DMG_BIN" run --algo=bfs --graph=kron:10 --compute_nodes=2 --cost_constants="$(cat "$work/k.txt")" \
  --stats_json="$work/k.json" > "$work/k.log" 2>&1 && python3 - "$work/k.txt" "$work/k.json" <<'PY' ||
import json, sys
want = dict(kv.split("=") for kv in open(sys.argv[1]).read().strip().split(","))
got = dict(kv.split("=") for kv in json.load(open(sys.argv[2]))["cost_constants"].split(","))
sys.exit(any(abs(float(got[k]) - float(v)) > 1e-9 * max(1, float(v)) for k, v in want.items()))
PY
  { cat "$work/k.log"; fail "dmg run --cost_constants with the fit's line"; }
echo "experiments_test: PASS"
