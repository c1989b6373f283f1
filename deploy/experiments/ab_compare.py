#!/usr/bin/env python3
"""Two dmg binaries (A: before a change, B: after) on the same store image,
interleaved run by run, best of N: the algorithm's time (the sum of its
superstep times from --stats_json) at the cache sweep's points, on the
embedded cluster (local) and over tcp (one memory-node daemon of B's on
loopback serving the image). Prints one line per point with B/A.

  dmg load --graph=kron:20 --image=/tmp/k20.img
  deploy/experiments/ab_compare.py --a=OLD/dmg --b=build/release/tools/dmg \
      --image=/tmp/k20.img --reps=10

This machine is noisy: interleaving and best-of-N make A and B see the same
conditions; compare ratios, not absolute times across sessions.
"""
import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmgexp import daemons, procs  # noqa: E402


def algo_seconds(binary, args, stats):
    r = subprocess.run([binary, "run", *args, f"--stats_json={stats}"],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{binary} {' '.join(args)}: {r.stderr.strip()}")
    with open(stats) as f:
        s = json.load(f)
    return sum(t["seconds"] for t in s["supersteps"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", required=True, help="dmg before")
    ap.add_argument("--b", required=True, help="dmg after")
    ap.add_argument("--image", required=True, help="store image")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--transports", default="local,tcp")
    ap.add_argument("--fractions", default="0.05,1.0")
    ap.add_argument("--algos", default="pagerank,bfs")
    ap.add_argument("--iters", type=int, default=5, help="PageRank iterations")
    ap.add_argument("--source", default="1", help="BFS source")
    ap.add_argument("--port", type=int, default=7611)
    args = ap.parse_args()
    procs.unwind_on_signals()   # SIGTERM stops the memory node too
    stats = os.path.join(tempfile.mkdtemp(), "stats.json")
    for tr in args.transports.split(","):
        daemon = None
        if tr == "tcp":
            daemon = daemons.MemoryNode(args.b, args.image, port=args.port)
            target = daemon.flags()
        else:
            target = [f"--graph={args.image}"]
        try:
            for algo, frac in itertools.product(
                    args.algos.split(","),
                    [float(x) for x in args.fractions.split(",")]):
                extra = ([f"--max_iters={args.iters}", "--tolerance=0"]
                         if algo == "pagerank" else [f"--source={args.source}"])
                run = [f"--algo={algo}", *target, f"--cache_fraction={frac}",
                       *extra]
                best = {"a": float("inf"), "b": float("inf")}
                for _ in range(args.reps):
                    for name in ("a", "b"):
                        binary = args.a if name == "a" else args.b
                        best[name] = min(best[name],
                                         algo_seconds(binary, run, stats))
                print(f"{tr:5s} {algo:8s} {frac * 100:5.0f}%  A {best['a']:.4f} s"
                      f"  B {best['b']:.4f} s  B/A {best['b'] / best['a']:.3f}",
                      flush=True)
        finally:
            if daemon:
                daemon.stop()


if __name__ == "__main__":
    sys.exit(main())
