#!/usr/bin/env python3
"""PageRank's time per arc as the graph grows (issue 11's growth line).

For kron:LO .. kron:HI, interleaved, best of --reps: DMG embedded
(`dmg run --algo=pagerank --graph=kron:N --cache_fraction=F --max_iters=20
--tolerance=0`, the algorithm's seconds from --stats_json) and GAPBS's `pr
-gN -i 20 -t 0` (its best trial; its own Kronecker generator, about the same
arcs). Prints ns per arc per iteration for both and each one's ratio to its
own best size: the acceptance line asks DMG's to stay within 1.5x.

  bench/pr_growth.py [--lo=16 --hi=22 --reps=2 --cache_fraction=0.05]

GAPBS is built (once) into build/vs_gapbs/gapbs as bench/vs_gapbs.py does;
without ../shared/anchors/gapbs the GAPBS column is left out.
"""
import argparse
import json
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vs_gapbs import build_gapbs, log, registry, run  # noqa: E402


def dmg_ns_per_arc(a, n, stats):
    run([a.dmg, "run", "--algo=pagerank", f"--graph=kron:{n}",
         f"--threads={a.threads}", f"--cache_fraction={a.cache_fraction}",
         "--max_iters=20", "--tolerance=0",
         "--stats_json=" + stats], timeout=1800)
    with open(stats) as f:
        j = json.load(f)
    return j["seconds"], j["arcs"], j["seconds"] / (j["arcs"] * 20) * 1e9


def gapbs_ns_per_arc(a, gapbs, n):
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    out = run([os.path.join(gapbs, "pr"), f"-g{n}", "-n", str(a.trials),
               "-i", "20", "-t", "0"], env=env, timeout=1800)
    m = re.search(r"and (\d+) undirected edges", out)
    trials = [float(x) for x in re.findall(r"Trial Time:\s+([0-9.]+)", out)]
    if not m or not trials:
        sys.exit(f"pr_growth: unexpected GAPBS output:\n{out}")
    arcs = 2 * int(m.group(1))
    return min(trials) / (arcs * 20) * 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dmg", default=registry.default_dmg())
    ap.add_argument("--gapbs_src", default="../shared/anchors/gapbs")
    ap.add_argument("--work", default="build/vs_gapbs")
    ap.add_argument("--lo", type=int, default=16)
    ap.add_argument("--hi", type=int, default=22)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache_fraction", type=float, default=0.05)
    a = ap.parse_args()
    if not os.path.exists(a.dmg):
        sys.exit(f"pr_growth: {a.dmg} not found (build first)")
    gapbs = None
    if os.path.isdir(a.gapbs_src):
        os.makedirs(a.work, exist_ok=True)
        gapbs = build_gapbs(a.gapbs_src, a.work)
    else:
        log(f"pr_growth: {a.gapbs_src} absent; DMG only")
    sizes = list(range(a.lo, a.hi + 1))
    best = {n: None for n in sizes}
    gbest = {n: None for n in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        stats = os.path.join(tmp, "stats.json")
        for rep in range(a.reps):
            for n in sizes:
                log(f"rep {rep + 1}/{a.reps}: kron:{n}")
                sec, arcs, ns = dmg_ns_per_arc(a, n, stats)
                if best[n] is None or ns < best[n][2]:
                    best[n] = (sec, arcs, ns)
                if gapbs:
                    g = gapbs_ns_per_arc(a, gapbs, n)
                    gbest[n] = g if gbest[n] is None else min(gbest[n], g)
    dmg_min = min(b[2] for b in best.values())
    g_min = min(g for g in gbest.values()) if gapbs else None
    print(f"PageRank, 20 iterations, {a.threads} threads, embedded, "
          f"cache_fraction {a.cache_fraction}, best of {a.reps}")
    print(f"{'graph':9}{'arcs':>12}{'DMG s':>9}{'DMG ns/arc':>12}"
          f"{'x best':>8}{'GAPBS ns/arc':>14}{'x best':>8}")
    for n in sizes:
        sec, arcs, ns = best[n]
        row = (f"kron:{n:<4}{arcs:>12,}{sec:>9.3f}{ns:>12.2f}"
               f"{ns / dmg_min:>8.2f}")
        if gapbs:
            row += f"{gbest[n]:>14.2f}{gbest[n] / g_min:>8.2f}"
        print(row)
    worst = max(b[2] for b in best.values()) / dmg_min
    print(f"DMG's worst size is {worst:.2f}x its best (target <= 1.5x)")
    if gapbs:
        gw = max(gbest.values()) / g_min
        print(f"GAPBS's worst size is {gw:.2f}x its best")


if __name__ == "__main__":
    main()
