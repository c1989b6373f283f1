#!/usr/bin/env python3
"""DMG against DM-style peers at equal compute-side memory: one table.

Method
  Three cache policies of the same engine, binary and image, each a design
  the paper compares with (`dmg run --cache_policy`):
    graph_aware  DMG: streamed scans with prefetch, hot blocks, block
                 headers, state resident or paged by hint, claim filter;
    page_lru     a swap-style DM system (Fastswap-like): every remote byte,
                 blocks and state, through one LRU cache of 4 KiB pages;
    fam          FAM-Graph's design (IPDPS'22): all vertex state local,
                 edges remote with no edge cache, neighbour lists fetched
                 per vertex batch (a job whose state does not fit the
                 bound cannot run).
  Graphs as bench/vs_gapbs.py makes them (kron20: GAPBS's generator,
  road-NY: the published file; both symmetrized), served by a `dmg
  memory-node` daemon on loopback over tcp (--transport), sharing the
  machine's cores. The compute-side memory is the cache bound
  (`--cache_mb`: state included), M0 = --fraction of the image's bytes
  (5%: DMG's operating point). Workloads: PageRank 20 iterations at
  tolerance 0, BFS from --sources seeded sources (their best times summed).
  Times are the run's algorithm seconds from --stats_json (graph loading
  excluded), best of --reps.
  1. Every policy at M0: its time, and DMG's speedup over it (a baseline
     that cannot run at M0 says why).
  2. For each baseline, the memory it needs to match DMG's time at M0:
     M0 times 1, 1.5, 2, 3, 4, 6, ... up to --max_ratio, the first that is
     at least as fast (the ratio printed is that multiple: an upper bound,
     the multiple before it too slow), or "> max_ratio".
  Output: one table, and vs_dm_peers.csv in --work.

Example: bench/vs_dm_peers.py --graphs=kron20,road-NY --reps=2
"""
import argparse
import json
import os
import subprocess
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "deploy", "experiments"))
import vs_gapbs  # noqa: E402  (graph preparation)
from dmgexp import csvio, procs, registry  # noqa: E402

POLICIES = ("graph_aware", "page_lru", "fam")
RATIOS = (1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def dmg_run(a, workload, daemon, policy, cache_bytes, source, stats):
    """Algorithm seconds, or (None, reason) when the run cannot be made."""
    cmd = [a.dmg, "run",
           "--algo=" + {"pr": "pagerank", "bfs": "bfs"}[workload],
           f"--threads={a.threads}", f"--cache_mb={cache_bytes / 2**20:.6f}",
           "--cache_policy=" + policy, "--stats_json=" + stats,
           "--progress=false"] + daemon.flags()
    if workload == "pr":
        cmd += ["--max_iters=20", "--tolerance=0"]
    else:
        cmd += [f"--source={source}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        lines = [x for x in r.stderr.splitlines() if "error" in x]
        return None, (lines[-1] if lines else r.stderr[-300:]).strip()
    with open(stats) as f:
        return json.load(f)["seconds"], ""


def best_time(a, workload, daemon, policy, cache_bytes, sources, stats):
    """Best of --reps, summed over the sources; (None, why) if it fails."""
    total = 0.0
    for s in sources:
        best = None
        for _ in range(a.reps):
            t, why = dmg_run(a, workload, daemon, policy, cache_bytes, s,
                             stats)
            if t is None:
                return None, why
            best = t if best is None else min(best, t)
        total += best
    return total, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dmg", default=registry.default_dmg())
    ap.add_argument("--gapbs_src", default="../shared/anchors/gapbs",
                    help="for GAPBS's kron generator (kron graphs only)")
    ap.add_argument("--graphs_dir", default=os.environ.get(
        "DMG_GRAPHS_DIR", "../shared/graphs"))
    ap.add_argument("--graphs", default="kron20,road-NY")
    ap.add_argument("--workloads", default="pr,bfs")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--sources", type=int, default=2)
    ap.add_argument("--seed", type=int, default=27491095)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--fraction", type=float, default=0.05,
                    help="M0: DMG's cache bound as a fraction of the image")
    ap.add_argument("--max_ratio", type=float, default=64)
    ap.add_argument("--work", default="build/vs_gapbs",
                    help="shared with vs_gapbs.py: graphs are made once")
    a = ap.parse_args()
    if not os.path.exists(a.dmg):
        sys.exit(f"vs_dm_peers: {a.dmg} not found (build first)")
    procs.unwind_on_signals()   # SIGTERM stops the memory node too
    os.makedirs(a.work, exist_ok=True)
    graphs = [g for g in a.graphs.split(",") if g]
    workloads = [w for w in a.workloads.split(",") if w]
    if any(g.startswith("kron") for g in graphs) and \
            not os.path.isdir(a.gapbs_src):
        print(f"vs_dm_peers: GAPBS not found at {a.gapbs_src} (its kron "
              "generator makes the kron graphs); skipping")
        return
    gapbs = vs_gapbs.build_gapbs(a.gapbs_src, a.work) \
        if os.path.isdir(a.gapbs_src) else None
    prep = types.SimpleNamespace(dmg=a.dmg, graphs_dir=a.graphs_dir,
                                 seed=a.seed, sources=a.sources,
                                 compressed=False)
    stats = os.path.join(a.work, "vs_dm_peers.stats.json")
    rows = []
    for g in graphs:
        files = vs_gapbs.prepare_graph(g, prep, gapbs, a.work)
        image = files["u"][1]
        m0 = a.fraction * os.path.getsize(image)
        daemon = vs_gapbs.start_memory_node(a.dmg, image)
        try:
            for w in workloads:
                sources = files["sources"] if w == "bfs" else [None]
                row = {"graph": g, "workload": w, "m0_mb": m0 / 1e6}
                for p in POLICIES:
                    log(f"{g} {w} {p} at {m0 / 1e6:.2f} MB")
                    t, why = best_time(a, w, daemon, p, m0, sources, stats)
                    row[p + "_s"] = t
                    row[p + "_why"] = why
                dmg_s = row["graph_aware_s"]
                for p in POLICIES[1:]:
                    t = row[p + "_s"]
                    row[p + "_speedup"] = t / dmg_s if t and dmg_s else None
                    # The memory it needs to be as fast as DMG at M0.
                    need = None
                    if dmg_s:
                        for r in RATIOS:
                            if r > a.max_ratio:
                                break
                            if r == 1:
                                tr = t
                            else:
                                log(f"{g} {w} {p} at {r}x")
                                tr, _ = best_time(a, w, daemon, p, r * m0,
                                                  sources, stats)
                            if tr is not None and tr <= dmg_s:
                                need = r
                                break
                    row[p + "_needs"] = need
                rows.append(row)
        finally:
            daemon.stop()
    print_table(rows, a)
    out = os.path.join(a.work, "vs_dm_peers.csv")
    csvio.write(out, rows)
    log(f"wrote {out}")


def print_table(rows, a):
    def sec(x):
        return f"{x:8.3f}" if x is not None else "       -"

    def times(x):
        return f"{x:6.2f}x" if x is not None else "      -"

    def need(x):
        return f"{x:g}x" if x is not None else f"> {a.max_ratio:g}x"

    print(f"tcp loopback, {a.threads} threads; memory M0 = {a.fraction:g} "
          "of the image (state included); best of "
          f"{a.reps}; speedup = baseline time / DMG time at M0; needs = "
          "memory a baseline needs to match DMG at M0, in M0")
    print(f"{'graph':8} {'work':4} {'M0 MB':>7} {'DMG s':>8} "
          f"{'page_lru s':>10} {'speedup':>7} {'needs':>7} "
          f"{'fam s':>8} {'speedup':>7} {'needs':>7}")
    for r in rows:
        print(f"{r['graph']:8} {r['workload']:4} {r['m0_mb']:7.2f} "
              f"{sec(r['graph_aware_s'])} {sec(r['page_lru_s']):>10} "
              f"{times(r['page_lru_speedup'])} {need(r['page_lru_needs']):>7} "
              f"{sec(r['fam_s'])} {times(r['fam_speedup'])} "
              f"{need(r['fam_needs']):>7}")
    for r in rows:
        for p in POLICIES:
            if r[p + "_why"]:
                print(f"  {r['graph']} {r['workload']} {p} at M0: "
                      f"{r[p + '_why']}")


if __name__ == "__main__":
    main()
