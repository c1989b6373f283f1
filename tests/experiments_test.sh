#!/usr/bin/env bash
# The experiment runner (deploy/experiments/sweep.py): a tiny sweep (kron:10,
# BFS, local + tcp on the local backend, 1-2 memory nodes, 2 cache sizes,
# 1 trial) writes a CSV row per run whose command reruns it as written, and
# the plots (PNG, PDF, SVG); a bad sweep file is one line and exit 2; the
# algorithms are the ones `dmg help` lists; Ctrl-C in the middle of a run
# takes the cluster down. No dmg-sweep-* folder and no memory-node daemon is
# left behind. Then the scaling pieces: an [ablation] sweep at 1-4 compute
# nodes with stats, scaling.py's flags, cost_model.py --validate,
# fit_coordinator.py; the plots of all of them checked for a paper; the
# scripts' shared module (deploy/experiments/dmgexp) used by every script,
# ab_compare.py's memory node stopped. ~30 s.
set -euo pipefail
cd "$(dirname "$0")/.."
DMG_BIN="${DMG_BIN:-$PWD/build/release/tools/dmg}"
DMG_BIN=$(realpath "$DMG_BIN")
[ -x "$DMG_BIN" ] || { echo "experiments_test: no dmg at $DMG_BIN (build it or set DMG_BIN)"; exit 1; }
work=$(mktemp -d)
mkdir -p "$work/tmp"
export TMPDIR="$work/tmp"     # the runner's temporary folders land here
# This test's memory nodes: those that inherited its TMPDIR (other people's
# tests may run daemons of the same binary meanwhile).
daemons() {
  for pid in $(ps -eo pid=,args= | awk -v b="$DMG_BIN" '$2 == b && $3 == "memory-node" {print $1}'); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qxF "TMPDIR=$TMPDIR"; then
      echo "$pid"
    fi
  done | sort
}
before=$(daemons)
trap 'rm -rf "$work"' EXIT
fail() { echo "experiments_test: FAIL: $*"; exit 1; }
check_clean() {
  left=$(ls "$TMPDIR" | grep -E '^dmg-(sweep|rerun)-' || true)
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
  for ext in png pdf svg; do
    [ -s "$out/$p.$ext" ] || { ls "$out"; fail "no $p.$ext"; }
  done
done
[ ! -e "$out/compute-kron10-bfs-tcp.png" ] || fail "a compute-node plot with one compute-node count"
ls "$out"/summaries/*.json >/dev/null || fail "no summary JSONs kept"
check_clean "after the sweep"

# Every row's command reruns as written once the sweep is over: no path in
# it is gone (the sweep's temporary folder is), and a local row (on the
# graph as given) and a tcp row (its cluster's rerun script: up, load, run,
# down) run again, from another folder, writing their summary anew.
python3 - "$out/results.csv" > "$work/reruns" <<'PY' || fail "a CSV command names a path that is gone"
import csv, os, shlex, sys
rows = list(csv.DictReader(open(sys.argv[1])))
gone = [(r["command"], w) for r in rows for w in shlex.split(r["command"])
        if w.split("=", 1)[-1].startswith("/") and not os.path.exists(w.split("=", 1)[-1])]
for cmd, path in gone:
    print(f"gone: {path} in: {cmd}", file=sys.stderr)
for t in ("local", "tcp"):
    r = next(r for r in rows if r["transport"] == t)
    print(r["summary_json"] + "\t" + r["command"])
sys.exit(1 if gone else 0)
PY
while IFS=$'\t' read -r summary cmd; do
  rm -f "$out/$summary"
  (cd / && sh -c "$cmd") > "$work/rerun.log" 2>&1 || { cat "$work/rerun.log"; fail "rerun of: $cmd"; }
  [ -s "$out/$summary" ] || fail "the rerun wrote no $summary: $cmd"
done < "$work/reruns"
[ "$(wc -l < "$work/reruns")" = 2 ] || fail "no local and tcp row to rerun"
check_clean "after the reruns"

# The algorithms are dmg's (its `dmg help` list), not a list of the runner's:
# cc_lp is one; a name that is not lists dmg's; no dmg is one line, exit 2.
want=$("$DMG_BIN" help | awk '/^algorithms/ {on = 1; next} on && /^[^ ]/ {exit}
  on && /^  [a-z]/ {printf "%s%s", sep, $1; sep = ", "}')
printf 'graphs = ["kron:10"]\nalgorithms = ["cc_lp", "nosuch"]\n' > "$work/algos.toml"
rc=0; err=$(deploy/experiments/sweep.py "$work/algos.toml" --dmg "$DMG_BIN" --dry-run 2>&1) || rc=$?
[ $rc = 2 ] && grep -qF "algorithms[1]: 'nosuch' (one of: $want)" <<<"$err" ||
  fail "algorithms not dmg's ($want): rc $rc: $err"
rc=0; err=$(deploy/experiments/sweep.py "$work/tiny.toml" --dmg "$work/no/dmg" 2>&1) || rc=$?
[ $rc = 2 ] && [ "$(wc -l <<<"$err")" = 1 ] && grep -q "no/dmg is not an executable" <<<"$err" ||
  fail "no dmg: rc $rc: $err"

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
# maps its flags onto it; cost_model.py --validate reads the stats.
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
# The plots, for a paper. Each figure is checked as it is saved (the CSVs
# plotted again in one process): the sweeps' above, docs/experiments' and
# 8 series that coincide exactly (the tiny sweep's rows under 4 more
# names). PNG at >= 200 dpi with a PDF and an SVG beside it; legends inside
# the figure, not below the panels, in >= 9 pt; every series named in a
# legend; series on top of each other told apart (marker, line style, and
# a hollow marker or an offset).
PY=python3; $PY -c 'import matplotlib' 2>/dev/null || PY=/usr/bin/python3
python3 - "$out/results.csv" "$work/many.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
w = csv.DictWriter(open(sys.argv[2], "w", newline=""), fieldnames=list(rows[0]))
w.writeheader()
w.writerows(dict(r, cache_policy=p, threads=t) for p in ("graph_aware", "page_lru")
            for t in ("1", "2") for r in rows)
PY
cat > "$work/plotcheck.py" <<'PY'
# usage: plotcheck.py REPO OUTDIR CSV...
import itertools, os, struct, sys
repo, outdir, csvs = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.path.insert(0, os.path.join(repo, "deploy", "experiments"))
import matplotlib
matplotlib.use("Agg")
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure
import sweep

bad, seen, saved = [], set(), []
NO_MARKER = (None, "", "None", " ", "none")


def dash(l):
    return (l.get_linestyle(), str(getattr(l, "_unscaled_dash_pattern", "")))


def series_of(ax):
    """(label, Line2D or None) of each series drawn in ax."""
    out, parts = [], set()
    for c in ax.containers:
        if isinstance(c, ErrorbarContainer):
            data, caps = c.lines[0], c.lines[1]
            parts.update([data, *caps])
            out.append((c.get_label(), data))
        elif isinstance(c, BarContainer) and len(c):
            out.append((c.get_label(), None))
    return out + [(l.get_label(), l) for l in ax.get_lines() if l not in parts]


def points(l):
    return l.get_transform().transform(l.get_xydata())


def overlap(a, b, tol):
    return min(((p[0] - q[0]) ** 2 + (p[1] - q[1]) ** 2) ** 0.5
               for p in points(a) for q in points(b)) <= tol


def check_pair(name, fig, la, a, lb, b):
    ma, mb = a.get_marker() not in NO_MARKER, b.get_marker() not in NO_MARKER
    px = fig.dpi / 72
    if ma and mb and overlap(a, b, px * max(a.get_markersize(), b.get_markersize())):
        if a.get_marker() == b.get_marker() or dash(a) == dash(b):
            bad.append(f"{name}: {la!r} and {lb!r} fall on each other with the same "
                       "marker or line style")
        elif overlap(a, b, 2) and "none" not in (a.get_markerfacecolor(),
                                                 b.get_markerfacecolor()):
            bad.append(f"{name}: {la!r} hides {lb!r} (same place, both filled)")
    elif not ma and not mb and overlap(a, b, 1) and dash(a) == dash(b):
        bad.append(f"{name}: lines {la!r} and {lb!r} fall on each other in one style")


def check(fig, name):
    r = fig.canvas.get_renderer()
    legends = [a.get_legend() for a in fig.axes if a.get_legend()] + list(fig.legends)
    named = {t.get_text() for g in legends for t in g.get_texts()}
    if not legends:
        bad.append(f"{name}: no legend")
    bottom = min(a.get_window_extent(r).y0 for a in fig.axes)
    for g in legends:
        box = g.get_window_extent(r)
        if box.x0 < -1 or box.y0 < -1 or box.x1 > fig.bbox.x1 + 1 or box.y1 > fig.bbox.y1 + 1:
            bad.append(f"{name}: a legend outside the figure")
        if box.y0 < bottom - 1:
            bad.append(f"{name}: a legend below the panels")
        small = [t.get_text() for t in g.get_texts() if t.get_fontsize() < 9]
        if small:
            bad.append(f"{name}: legend text under 9 pt: {small}")
    for ax in fig.axes:
        series = series_of(ax)
        for label, _ in series:
            if not label or label.startswith("_") or label not in named:
                bad.append(f"{name}: a series not named in the legend ({label!r})")
        lines = [(lab, l) for lab, l in series if l is not None]
        for (la, a), (lb, b) in itertools.combinations(lines, 2):
            check_pair(name, fig, la, a, lb, b)


def savefig(self, fname, *args, **kw):
    if id(self) not in seen:
        seen.add(id(self))
        check(self, os.path.basename(str(fname)))
    saved.append(str(fname))
    return original(self, fname, *args, **kw)


def png_dpi(path):
    """From the PNG's pHYs chunk (pixels per metre); 0 without one."""
    data = open(path, "rb").read()
    i = data.find(b"pHYs")
    return 0 if i < 0 else round(struct.unpack(">I", data[i + 4:i + 8])[0] * 0.0254)


original = Figure.savefig
Figure.savefig = savefig
for n, csv_path in enumerate(csvs):
    out = os.path.join(outdir, str(n))
    if sweep.main(["--replot", csv_path, "--out", out]) != 0:
        bad.append(f"{csv_path}: --replot failed")
    pngs = [f for f in os.listdir(out) if f.endswith(".png")]
    if not pngs:
        bad.append(f"{csv_path}: no plots")
    for f in pngs:
        stem = os.path.join(out, f[:-4])
        if png_dpi(stem + ".png") < 200:
            bad.append(f"{f}: {png_dpi(stem + '.png')} dpi (want >= 200)")
        for ext in (".pdf", ".svg"):
            if not (os.path.exists(stem + ext) and os.path.getsize(stem + ext)):
                bad.append(f"{f}: no {ext} beside it")
for b in bad:
    print("plotcheck:", b)
print(f"plotcheck: {len(seen)} figures, {len(bad)} problems")
sys.exit(1 if bad else 0)
PY
$PY "$work/plotcheck.py" "$PWD" "$work/plots" "$out/results.csv" "$csv" \
  docs/experiments/small-results.csv "$work/many.csv" > "$work/plots.log" 2>&1 ||
  { grep '^plotcheck' "$work/plots.log" || tail "$work/plots.log"; fail "the plots"; }

# One module (deploy/experiments/dmgexp) for what the scripts share: none
# keeps its own CSV reader or writer, process-group kill, generator pattern,
# memory-node start or list of every algorithm.
own=$(grep -nE 'csv\.(DictReader|DictWriter|writer)\(|os\.killpg|"memory-node"|GENERATOR = |"bc", "tc"' \
  deploy/experiments/*.py bench/*.py || true)
[ -z "$own" ] || fail "shared code copied into a script: $own"
# ab_compare.py: its memory node (dmgexp's MemoryNode) serves the image and stops.
"$DMG_BIN" load --graph=kron:14 --image="$work/k14.img" > /dev/null 2>&1 || fail "dmg load kron:14"
deploy/experiments/ab_compare.py --a="$DMG_BIN" --b="$DMG_BIN" --image="$work/k14.img" --reps=1 \
  --algos=bfs --fractions=1.0 --port=0 > "$work/ab.log" 2>&1 &&
  [ "$(grep -c 'B/A' "$work/ab.log")" = 2 ] || { cat "$work/ab.log"; fail "ab_compare.py"; }
check_clean "after ab_compare.py"
echo "experiments_test: PASS"
