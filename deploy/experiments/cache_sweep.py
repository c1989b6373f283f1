#!/usr/bin/env python3
"""Cache-demand sweep: time and remote bytes vs compute-side cache size.

A thin wrapper: the sweep itself is deploy/experiments/sweeps/cache.toml,
run by the experiment runner deploy/experiments/sweep.py (docs/EXPERIMENTS.md).
Each flag of this script becomes a `--set` of the runner; after the runs it
prints and writes summary.txt: the issue's figures from the
runner's results.csv -- graph_aware time at 5% vs 100%, page_lru vs
graph_aware at 5%, each policy's cache demand (the smallest cache within
1.2x of its own 100%-cache time), PageRank remote bytes per iteration at 5%
against 4m + 8n.

Example (what docs/PERFORMANCE.md reports):
  deploy/experiments/cache_sweep.py --graphs kron:20,urand:20,road-NY.el --timeout 30
  deploy/experiments/cache_sweep.py --summary OUT/results.csv   # the summary alone
"""
import argparse
import datetime
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from dmgexp import csvio  # noqa: E402
RUNNER = HERE / "sweep.py"
SWEEP = HERE / "sweeps" / "cache.toml"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dmg", help="the dmg binary (default: the runner's)")
    ap.add_argument("--graphs", help="comma-separated graph SPECs (cache.toml: kron:20,urand:20)")
    ap.add_argument("--transports", help="local,tcp (rdma: see docs/EXPERIMENTS.md)")
    ap.add_argument("--algos", help="pagerank,bfs")
    ap.add_argument("--policies", help="graph_aware,page_lru")
    ap.add_argument("--fractions", help="0.01,0.02,0.05,0.1,0.25,0.5,1.0")
    ap.add_argument("--iters", type=int, help="PageRank iterations (5)")
    ap.add_argument("--threads", help="2")
    ap.add_argument("--trials", type=int, help="1")
    ap.add_argument("--timeout", type=int, help="seconds per run (120)")
    ap.add_argument("--out", help="output folder (default ~/dmg-experiments/cache-TIMESTAMP)")
    ap.add_argument("--summary", metavar="CSV",
                    help="only print the summary of a results.csv (and write summary.txt next to it)")
    ap.add_argument("--replot", metavar="CSV", help="remake the plots of a results.csv")
    args = ap.parse_args()
    if args.replot:
        return subprocess.call([sys.executable, str(RUNNER), "--replot", args.replot])
    if args.summary:
        return write_summary(Path(args.summary))
    out = Path(args.out or Path(os.environ.get("DMG_EXPERIMENTS_DIR",
                                               Path.home() / "dmg-experiments")) /
               f"cache-{datetime.datetime.now():%Y%m%d-%H%M%S}")
    cmd = [sys.executable, str(RUNNER), str(SWEEP), "--out", str(out)]
    if args.dmg:
        cmd += ["--dmg", args.dmg]
    for key, value in (("graphs", args.graphs), ("transports", args.transports),
                       ("algorithms", args.algos), ("cache_policies", args.policies),
                       ("caches", args.fractions), ("threads", args.threads),
                       ("trials", args.trials), ("timeout_s", args.timeout)):
        if value is not None:
            cmd += ["--set", f"{key}={value}"]
    if args.iters is not None:
        cmd += ["--set", f'algorithm_flags.pagerank=["--max_iters={args.iters}", "--tolerance=0"]']
    rc = subprocess.call(cmd)
    if (out / "results.csv").exists():
        write_summary(out / "results.csv")
    return rc


def write_summary(path):
    rows = csvio.read(path)
    text = summarize(rows)
    print(text, end="")
    (path.parent / "summary.txt").write_text(text)
    return 0


def summarize(rows):
    """The issue's figures, one line per (graph, transport, algorithm)."""
    def frac(r):
        c = r["cache"]
        return float(c[:-1]) / 100 if c.endswith("%") else None

    def find(g, tr, a, p, f):
        for r in rows:
            if (r["graph"], r["transport"], r["algorithm"], r["cache_policy"]) == \
                    (g, tr, a, p) and frac(r) is not None and abs(frac(r) - f) < 1e-9:
                return r
        return None

    def secs(r):
        """(seconds, timed out): a timeout counts as its cap."""
        if r is None:
            return None, False
        if r["status"] == "ok":
            return float(r["time_median_s"]), False
        if r["status"].startswith("timeout"):
            return float(r["status"].split("(")[1].split()[0]), True
        return None, False

    def demand(g, tr, a, policy):
        base, to = secs(find(g, tr, a, policy, 1.0))
        if base is None or to:
            return None
        for f in sorted({frac(r) for r in rows if frac(r) is not None}):
            s, t = secs(find(g, tr, a, policy, f))
            if s is not None and not t and s <= 1.2 * base:
                return f
        return None

    fmt = lambda x, d=3: "-" if x is None else f"{x:.{d}g}"
    out = ["graph transport algo | graph_aware 5%/100% time | "
           "page_lru/graph_aware at 5% | demand graph_aware | demand page_lru "
           "| demand ratio | PR bytes/iter at 5% / (4m+8n)"]
    for g, tr, a in sorted({(r["graph"], r["transport"], r["algorithm"]) for r in rows}):
        ga100, _ = secs(find(g, tr, a, "graph_aware", 1.0))
        ga5, _ = secs(find(g, tr, a, "graph_aware", 0.05))
        lru5, lru5_to = secs(find(g, tr, a, "page_lru", 0.05))
        d_ga, d_lru = demand(g, tr, a, "graph_aware"), demand(g, tr, a, "page_lru")
        ratio = d_lru / d_ga if d_ga and d_lru else None
        lru_ratio = lru5 / ga5 if lru5 and ga5 else None
        bytes_ratio = None
        r5 = find(g, tr, a, "graph_aware", 0.05)
        if a == "pagerank" and r5 and r5["status"] == "ok" and r5["vertices"]:
            must = 4 * int(r5["arcs"]) + 8 * int(r5["vertices"])
            bytes_ratio = float(r5["bytes_read_median"]) / float(r5["supersteps_median"]) / must
        out.append(f"{g} {tr} {a} | {fmt(ga5 / ga100 if ga5 and ga100 else None)} | "
                   f"{('>' if lru5_to else '') + fmt(lru_ratio)} | {fmt(d_ga)} | "
                   f"{fmt(d_lru) if d_lru else '>1 or n/a'} | {fmt(ratio)} | {fmt(bytes_ratio)}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
