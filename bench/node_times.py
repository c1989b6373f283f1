#!/usr/bin/env python3
"""Job times as compute nodes are added, as ratios measured in one run
(issue 36's time lines).

For each graph x algorithm runs, interleaved, `--reps` times each:
  1x1  --compute_nodes=1 --threads=1
  2x1  --compute_nodes=2 --threads=1
  1x2  --compute_nodes=1 --threads=2
on the embedded cluster, and prints the best time of each (the job's
`seconds` from --stats_json, setup included; with --trials=N, each
process's best of N trials, which leaves out first-touch costs) and the
ratios the issue
names: 1x1 / 2x1 (the speed-up of a second node) and 2x1 / 1x2 (the cost
of being two nodes on the same cores). Times on a shared 2-core machine
are noisy: only ratios from one run mean anything.

  bench/node_times.py --graphs /tmp/k20.img --algos pagerank,bfs \\
      --cache_fraction 0.05
  bench/node_times.py --graphs ../shared/graphs/road-NY.el --algos bfs \\
      --source 10969 --configs 1x1,2x1
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from node_bytes import find_graph, registry, run_stats  # noqa: E402


def run(args, graph, algo, nodes, threads):
    if args.trials <= 1:
        return run_stats(args.dmg, graph, algo, nodes, threads, args,
                         who="node_times")["seconds"]
    s = run_stats(args.dmg, graph, algo, nodes, threads, args,
                  who="node_times", summary=True)
    return min(t["seconds"] for t in s["trials"])


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--dmg", default=registry.default_dmg())
    p.add_argument("--graphs", required=True, help="comma-separated")
    p.add_argument("--algos", default="pagerank,bfs")
    p.add_argument("--configs", default="1x1,2x1,1x2",
                   help="NODESxTHREADS, comma-separated")
    p.add_argument("--cache_fraction", type=float, default=0)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--source", default="random")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--trials", type=int, default=1,
                   help="trials in each process; above 1, the best "
                   "trial's time (--summary_json), setup excluded")
    p.add_argument("--timeout", type=int, default=600)
    args = p.parse_args()
    configs = [tuple(int(x) for x in c.split("x"))
               for c in args.configs.split(",")]
    print(f"{'graph':16} {'algo':9} " +
          " ".join(f"{f'{n}x{t} s':>9}" for n, t in configs) +
          "  1x1/2x1  2x1/1x2")
    for graph in args.graphs.split(","):
        graph = find_graph(graph, None, "node_times")
        for algo in args.algos.split(","):
            best = {}
            for _ in range(args.reps):
                for n, t in configs:
                    s = run(args, graph, algo, n, t)
                    best[(n, t)] = min(best.get((n, t), s), s)
            row = f"{os.path.basename(graph):16} {algo:9} " + " ".join(
                f"{best[c]:9.3f}" for c in configs)
            if (1, 1) in best and (2, 1) in best:
                row += f"  {best[(1, 1)] / best[(2, 1)]:7.2f}"
            else:
                row += f"  {'':7}"
            if (2, 1) in best and (1, 2) in best:
                row += f"  {best[(2, 1)] / best[(1, 2)]:7.2f}"
            print(row, flush=True)


if __name__ == "__main__":
    main()
