#!/usr/bin/env python3
"""Scaling experiment: time, remote bytes, balance and waiting vs compute
nodes, and the update_mode x direction ablation with its verdict.

A thin wrapper: the sweep is deploy/experiments/sweeps/scaling.toml, run by
the experiment runner deploy/experiments/sweep.py (docs/EXPERIMENTS.md),
which does the work: the [ablation] grid (auto/auto PASSes when its time
and remote bytes are both within 10% of the best forced combination;
forced runs that made auto's choices are pooled with it), per-node balance
and wait fractions from --stats_json, interleaved repetitions (`repeats`,
fastest kept) and threads = max(1, cores // C) (`threads = ["split"]`).
Each flag becomes a `--set` of the runner; what is not given keeps
scaling.toml's value (kron:20 and road-NY.el; PageRank, BFS, CC, SSSP; 1,
2, 4 compute nodes; 1 memory node; local; no cache bound and 5%; the
ablation at 2 compute nodes, no cache bound).

Output (default ~/dmg-experiments/scaling-TIMESTAMP): results.csv,
summary.txt (the scaling table and the ablation's verdicts), stats/*.json,
compute-* (speedup and time vs compute nodes) and ablation-* plots, each
as PNG, PDF and SVG.

Examples:
  deploy/experiments/scaling.py --quick          # smoke run, kron:14, ~1 minute
  deploy/experiments/scaling.py --graphs kron:20,road-NY.el --reps 3
  deploy/experiments/scaling.py --replot OUT/results.csv
"""
import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "sweep.py"
SWEEP = HERE / "sweeps" / "scaling.toml"
QUICK = dict(graphs="kron:14", compute="1,2", memory="1", reps=1, timeout=60,
             cache_fraction="unbounded")

# flag -> the runner's key (a value of None: the flag was not given)
KEYS = (("graphs", "graphs"), ("compute", "compute_nodes"), ("memory", "memory_nodes"),
        ("transports", "transports"), ("algos", "algorithms"), ("reps", "repeats"),
        ("timeout", "timeout_s"), ("cache_fraction", "caches"))
ABLATION_KEYS = (("ablation_compute", "compute_nodes"), ("ablation_memory", "memory_nodes"),
                 ("ablation_transports", "transports"), ("modes", "update_modes"),
                 ("directions", "directions"))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dmg", help="the dmg binary (default: the runner's)")
    ap.add_argument("--graphs", help="generators, files, or names in $DMG_GRAPHS_DIR")
    ap.add_argument("--compute", help="compute-node counts (1,2,4)")
    ap.add_argument("--memory", help="memory-node counts (1)")
    ap.add_argument("--transports", help="local (tcp: memory-node daemons)")
    ap.add_argument("--algos", help="pagerank,bfs,cc,sssp")
    ap.add_argument("--reps", type=int, help="interleaved repetitions, fastest kept (1)")
    ap.add_argument("--timeout", type=int, help="per run, s (600)")
    ap.add_argument("--iters", type=int, help="PageRank iterations (10)")
    ap.add_argument("--cache_fraction", help="cache bounds: unbounded,0.05 (see --set caches)")
    ap.add_argument("--symmetrize", action="store_true", help="symmetrize when loading")
    ap.add_argument("--cores", type=int, help="threads per compute node = max(1, cores // C) "
                    "(default: this machine's cores)")
    ap.add_argument("--ablation", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--ablation_compute", type=int, help="(2)")
    ap.add_argument("--ablation_memory", type=int, help="(1)")
    ap.add_argument("--ablation_transports", help="(the sweep's)")
    ap.add_argument("--modes", help="--update_mode values of the ablation (auto,pull,batch,atomic)")
    ap.add_argument("--directions", help="--direction values of the ablation (auto,push,pull)")
    ap.add_argument("--graphs_dir", help="where graph names are looked up ($DMG_GRAPHS_DIR)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: kron:14, compute 1,2, no cache bound (explicit flags win)")
    ap.add_argument("--out", help="output folder (default ~/dmg-experiments/scaling-TIMESTAMP)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="any other key of the sweep (passed to the runner)")
    ap.add_argument("--replot", metavar="CSV", help="only remake summary.txt and the plots")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = ap.parse_args()
    if args.quick:
        for k, v in QUICK.items():
            if getattr(args, k) is None:
                setattr(args, k, v)
    if args.replot:
        cmd = [sys.executable, str(RUNNER), "--replot", args.replot]
        return subprocess.call(cmd + (["--out", args.out] if args.out else []))
    cmd = [sys.executable, str(RUNNER), str(SWEEP)]
    for flag, value in (("--dmg", args.dmg), ("--out", args.out)):
        if value:
            cmd += [flag, value]
    sets = [f"{key}={getattr(args, name)}" for name, key in KEYS
            if getattr(args, name) is not None]
    if args.iters is not None:
        sets.append(f'algorithm_flags.pagerank=["--max_iters={args.iters}", "--tolerance=0"]')
    if args.symmetrize:
        sets.append('flags=["--symmetrize"]')
    if args.cores:
        sets.append(f'threads=["split:{args.cores}"]')
    if not args.ablation:
        sets.append("ablation={}")
    else:
        sets += [f"ablation.{key}={getattr(args, name)}" for name, key in ABLATION_KEYS
                 if getattr(args, name) is not None]
    env = dict(os.environ)
    if args.graphs_dir:
        env["DMG_GRAPHS_DIR"] = args.graphs_dir
    for s in sets + args.set:
        cmd += ["--set", s]
    if args.dry_run:
        cmd.append("--dry-run")
    return subprocess.call(cmd, env=env)


if __name__ == "__main__":
    sys.exit(main())
