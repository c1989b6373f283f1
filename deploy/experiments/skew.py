#!/usr/bin/env python3
"""Skew experiment: stage 2 of the workload manager (work stealing across
compute nodes) on a graph where one node's range holds most of the work.

Method
  The graph: the first half of the vertices is a dense random graph (each
  vertex --degree random neighbours in the first half), the second half
  short paths of 4 vertices hanging off it; symmetrized. The split balances
  vertices only (--stage1_alpha=1e12), so compute node 0's range holds nearly
  every edge. Each algorithm runs with --direction forced to each of
  --directions (push: frontier chunks are stolen; pull: units of blocks)
  on --compute_nodes=2 (1 thread each: the job stays within 2
  cores), with --steal=true and --steal=false interleaved, --reps times; the
  best repetition (smallest time) of each is kept.

Figures (from --stats_json)
  time_s        the sum of the supersteps' seconds;
  busy_N        node N's busy seconds (its seconds minus the time it waited
                for the others);
  slowest_busy  the largest busy time of the nodes: what stealing shortens;
  stolen        work items (frontier chunks) each node took from the other.
  ratio         slowest_busy with stealing over slowest_busy without
                (below 1: stealing shortened the slowest node);
  time_ratio    time_s with stealing over time_s without: the critical
                path, step by step. The two differ where the light node has
                heavy steps of its own (BFS's paths, whose levels only node
                1 works on): work it takes in node 0's heavy steps shortens
                those steps but adds to its own total.

Example: deploy/experiments/skew.py --reps=3   (prints one table; writes
skew.csv into --out, default build/skew)
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmgexp import csvio, registry  # noqa: E402


def write_graph(path, half, degree, seed):
    rng = random.Random(seed)
    with open(path, "w") as f:
        for u in range(half):
            for _ in range(degree):
                f.write(f"{u} {rng.randrange(half)}\n")
        for u in range(half, 2 * half, 4):
            f.write(f"{u % half} {u}\n")
            for k in range(3):
                f.write(f"{u + k} {u + k + 1}\n")


def run(dmg, image, algo, steal, stats, direction="push"):
    cmd = [dmg, "run", "--algo=" + algo.split()[0], "--graph=" + image,
           "--compute_nodes=2", "--threads=1", "--stage1_alpha=1e12",
           "--direction=" + direction,
           "--steal=" + ("true" if steal else "false"),
           "--source=1", "--stats_json=" + stats] + algo.split()[1:]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        sys.exit(f"skew: {' '.join(cmd)} failed:\n{r.stderr}")
    with open(stats) as f:
        j = json.load(f)
    nodes = j["nodes"]
    return {
        "time_s": sum(s["seconds"] for s in j["supersteps"]),
        "busy": [n["busy_seconds"] for n in nodes],
        "stolen": [n["stolen_items"] for n in nodes],
        "own": [n["own_items"] for n in nodes],
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dmg", default=registry.default_dmg())
    ap.add_argument("--half", type=int, default=65536,
                    help="vertices in the dense half (and in the paths)")
    ap.add_argument("--degree", type=int, default=24)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--algos", default="cc,sssp --unit_weights,bfs")
    ap.add_argument("--directions", default="push",
                    help="push, pull or both (push,pull): the steps "
                    "stealing applies to, forced")
    ap.add_argument("--out", default="build/skew")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dmg-skew-") as tmp:
        el = os.path.join(tmp, "skew.el")
        image = os.path.join(tmp, "skew.img")
        stats = os.path.join(tmp, "stats.json")
        write_graph(el, a.half, a.degree, a.seed)
        r = subprocess.run([a.dmg, "load", "--graph=" + el, "--symmetrize",
                            "--image=" + image], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("skew: dmg load failed:\n" + r.stderr)
        algos = [x.strip() for x in a.algos.split(",") if x.strip()]
        directions = [x.strip() for x in a.directions.split(",") if x.strip()]
        for d in directions:
            if d not in ("push", "pull"):
                sys.exit(f"skew: --directions takes push and pull, not {d!r}")
        cells = [(algo, d) for d in directions for algo in algos]
        best = {}
        for _ in range(a.reps):
            for algo, d in cells:
                for steal in (True, False):
                    res = run(a.dmg, image, algo, steal, stats, d)
                    key = (algo, d, steal)
                    if key not in best or res["time_s"] < best[key]["time_s"]:
                        best[key] = res
    rows = []
    print(f"skewed graph: {2 * a.half} vertices, dense half of degree "
          f"{a.degree}; 2 compute nodes x 1 thread, best of {a.reps}")
    print(f"{'algorithm':<22} {'dir':<4} {'steal':<5} {'time_s':>7} "
          f"{'busy_0':>7} {'busy_1':>7} {'slowest':>7} {'stolen':>9} "
          f"{'ratio':>6} {'time_ratio':>10}")
    for algo, d in cells:
        off = max(best[(algo, d, False)]["busy"])
        off_time = best[(algo, d, False)]["time_s"]
        for steal in (True, False):
            b = best[(algo, d, steal)]
            slowest = max(b["busy"])
            ratio = slowest / off if off > 0 else float("nan")
            time_ratio = (b["time_s"] / off_time if off_time > 0
                          else float("nan"))
            print(f"{algo:<22} {d:<4} {'on' if steal else 'off':<5} "
                  f"{b['time_s']:7.3f} {b['busy'][0]:7.3f} {b['busy'][1]:7.3f} "
                  f"{slowest:7.3f} {'/'.join(map(str, b['stolen'])):>9} "
                  f"{ratio:6.2f} {time_ratio:10.2f}")
            rows.append({"algorithm": algo, "steal": steal,
                         "time_s": b["time_s"], "busy_0": b["busy"][0],
                         "busy_1": b["busy"][1], "slowest_busy": slowest,
                         "stolen_0": b["stolen"][0], "stolen_1": b["stolen"][1],
                         "slowest_vs_off": ratio, "direction": d,
                         "time_vs_off": time_ratio})
    csvio.write(os.path.join(a.out, "skew.csv"), rows)


if __name__ == "__main__":
    main()
