#!/usr/bin/env python3
"""DMG against GAPBS on the same graph file: one table of DMG/GAPBS ratios.

Method
  GAPBS (the GAP Benchmark Suite, ../shared/anchors/gapbs by default) is
  copied into --work and built there with its own Makefile (never in the
  source tree); without it the script prints a line and exits 0.
  Graphs, each given to both systems as the same edge list:
    kron20   GAPBS's own Kronecker generator (`converter -g20 -w -e`:
             scale 20, edge factor 16, weights 1-255), its weights
             dropped for the unweighted workloads;
    road-NY  (or any NAME with NAME.el / NAME.wel in --graphs_dir) the
             published file.
  GAPBS gets `converter -f X -s -b X.sg` (and `.wsg` for SSSP); DMG gets
  `dmg load --graph=X --symmetrize --image=X.img`. "Edge bytes" are 4 per
  arc of the symmetrized graph: one direction's targets, what one traversal
  must read at least once. Workloads: PageRank 20
  iterations at tolerance 0 (`pr -i 20 -t 0`, `--max_iters=20
  --tolerance=0`), BFS and SSSP from the same --sources sources (seeded
  picks of vertices with edges; `-r S`, `--source=S`), CC (GAPBS's
  Afforest, and DMG's `--algo=cc`, Afforest too: the same components).
  Each repetition runs, per workload and source, one GAPBS process
  (`-n --trials`, its best trial: how GAPBS users read it) and then one
  `dmg run --trials=--trials` per --transports entry: `local` (the
  embedded cluster) and `tcp` (a `dmg memory-node` daemon on loopback,
  started once per image, sharing the same cores). Both systems are timed
  alike: the best of the process's trials, each trial's time being the
  algorithm's alone (GAPBS's Trial Time; DMG's setup + supersteps + finish
  from --summary_json, graph loading excluded). DMG runs with --threads
  and --cache_fraction. The first trial of a DMG process (fresh buffers
  and page faults, a cold header cache) is also kept: the `first` columns
  and the CSV's *_first_* fields. Best of --reps repetitions each; BFS and
  SSSP sum the best time of every source.
  --compressed adds `local-z` and `tcp-z`: the same runs on an image of
  compressed blocks (`dmg load --compress`), with the same cache bytes as
  the plain image's fraction (--cache_mb), so that only the encoding
  differs; the table then also gives each image's block bytes per arc.
  OMP_NUM_THREADS = --threads for GAPBS.

Output: one table (GAPBS seconds, DMG seconds and ratio per transport, and
for tcp the remote bytes against the store's edge bytes), and
vs_gapbs.csv in --work.

Example: bench/vs_gapbs.py --graphs=kron20,road-NY --reps=3
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "deploy", "experiments"))
from dmgexp import csvio, daemons, graphs, procs, registry  # noqa: E402

WORKLOADS = ("pr", "bfs", "cc", "sssp")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(cmd, env=None, timeout=900):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env,
                       timeout=timeout)
    if r.returncode != 0:
        sys.exit(f"vs_gapbs: {' '.join(cmd)} failed ({r.returncode}):\n"
                 f"{r.stderr[-2000:]}")
    return r.stdout


def build_gapbs(src, work):
    out = os.path.join(work, "gapbs")
    bins = ["bfs", "pr", "cc", "sssp", "converter"]
    if all(os.path.exists(os.path.join(out, b)) for b in bins):
        return out
    if os.path.exists(out):
        shutil.rmtree(out)
    shutil.copytree(src, out, ignore=shutil.ignore_patterns(".git"))
    log(f"building GAPBS in {out}")
    run(["make", "-C", out, "-j2"] + bins, timeout=1800)
    return out


def prepare_graph(name, a, gapbs, work):
    """Edge lists for both systems, GAPBS .sg/.wsg and DMG images."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    el, wel = os.path.join(d, name + ".el"), os.path.join(d, name + ".wel")
    m = re.fullmatch(r"kron(\d+)", name)
    if m:
        if not os.path.exists(wel):
            log(f"generating GAPBS kron-{m.group(1)}")
            run([os.path.join(gapbs, "converter"), "-g" + m.group(1), "-w",
                 "-e", wel])
        if not os.path.exists(el):
            with open(wel) as fin, open(el, "w") as fout:
                for line in fin:
                    p = line.split()
                    if len(p) >= 2:
                        fout.write(f"{p[0]} {p[1]}\n")
    else:
        for ext, dst in ((".el", el), (".wel", wel)):
            try:
                srcf = graphs.resolve(name + ext, a.graphs_dir, here=False, extensions=())
            except graphs.GraphNotFound as e:
                sys.exit(f"vs_gapbs: {e} (set --graphs_dir)")
            if not os.path.exists(dst):
                os.symlink(srcf, dst)
    files = {}
    for kind, edges, ext in (("u", el, ".sg"), ("w", wel, ".wsg")):
        sg = os.path.join(d, name + ext)
        if not os.path.exists(sg):
            run([os.path.join(gapbs, "converter"), "-f", edges, "-s"] +
                (["-w"] if kind == "w" else []) + ["-b", sg])
        img = os.path.join(d, name + "." + kind + ".img")
        if not os.path.exists(img):
            run([a.dmg, "load", "--graph=" + edges, "--symmetrize",
                 "--image=" + img])
        files[kind] = (sg, img)
        if a.compressed:
            zimg = os.path.join(d, name + "." + kind + ".z.img")
            if not os.path.exists(zimg):
                run([a.dmg, "load", "--graph=" + img, "--compress",
                     "--image=" + zimg])
            files[kind + "z"] = (sg, zimg)
    # Sources: seeded picks of vertices that have edges (first column of
    # random lines of the edge list), the same for both systems.
    rng = random.Random(a.seed)
    size = os.path.getsize(el)
    sources = []
    with open(el, "rb") as f:
        while len(sources) < a.sources:
            f.seek(rng.randrange(size))
            f.readline()  # to the start of the next line
            p = f.readline().split()
            if len(p) >= 2 and p[0].isdigit() and int(p[0]) not in sources:
                sources.append(int(p[0]))
    files["sources"] = sources
    files["edge_bytes"] = edge_bytes(a.dmg, files["u"][1])
    files["per_arc"] = {k: bytes_per_arc(a.dmg, files[k][1])
                        for k in ("u", "uz") if k in files}
    return files


def bytes_per_arc(dmg, image):
    """Out-blocks' bytes per arc, from `dmg info`."""
    out = run([dmg, "info", "--graph=" + image])
    m = re.search(r"^out-blocks:.* ([0-9.]+) bytes per arc", out, re.M)
    return float(m.group(1)) if m else float("nan")


def edge_bytes(dmg, image):
    """The store's edge bytes: 4 per arc, one direction's targets (what a
    traversal reads at least once), from `dmg info`."""
    out = run([dmg, "info", "--graph=" + image])
    m = re.search(r"^arcs:\s+(\d+)", out, re.M)
    if not m:
        sys.exit(f"vs_gapbs: no arc count in `dmg info` of {image}")
    return 4 * int(m.group(1))


def gapbs_time(gapbs, kernel, sg, source, a):
    cmd = [os.path.join(gapbs, kernel), "-f", sg, "-n", str(a.trials)]
    if kernel == "pr":
        cmd += ["-i", "20", "-t", "0"]
    if source is not None:
        cmd += ["-r", str(source)]
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    out = run(cmd, env=env)
    trials = [float(x) for x in re.findall(r"Trial Time:\s+([0-9.]+)", out)]
    if not trials:
        sys.exit(f"vs_gapbs: no trial times from {' '.join(cmd)}:\n{out}")
    return min(trials)


def start_memory_node(dmg, image):
    """A `dmg memory-node` on loopback serving image (stopped on exit)."""
    try:
        return daemons.MemoryNode(dmg, image)
    except daemons.DaemonError as e:
        sys.exit(f"vs_gapbs: {e}")


def dmg_time(a, workload, image, source, transport, daemon, stats,
             cache_bytes=None):
    algo = {"pr": "pagerank", "bfs": "bfs", "cc": "cc", "sssp": "sssp"}
    cache = (f"--cache_mb={cache_bytes / 2**20:.6f}" if cache_bytes
             else f"--cache_fraction={a.cache_fraction}")
    summary = stats + ".summary"
    cmd = [a.dmg, "run", "--algo=" + algo[workload],
           f"--threads={a.threads}", cache, "--stats_json=" + stats,
           f"--trials={a.trials}", "--summary_json=" + summary]
    if workload == "pr":
        cmd += ["--max_iters=20", "--tolerance=0"]
    if source is not None:
        cmd += [f"--source={source}"]
    if transport.startswith("local"):
        cmd += ["--graph=" + image]
    else:
        cmd += daemon.flags()
    run(cmd)
    with open(stats) as f:  # the last trial's; every trial moves the same
        j = json.load(f)
    t = j["job_totals"] if "job_totals" in j else j["totals"]
    with open(summary) as f:
        trials = [x["seconds"] for x in json.load(f)["trials"]]
    return min(trials), t["bytes_read"] + t["bytes_written"], trials[0]


def main():
    a = parse_args()
    if not os.path.isdir(a.gapbs_src):
        print(f"vs_gapbs: GAPBS not found at {a.gapbs_src}; skipping")
        return
    if not os.path.exists(a.dmg):
        sys.exit(f"vs_gapbs: {a.dmg} not found (build first)")
    procs.unwind_on_signals()   # SIGTERM stops the memory nodes too
    os.makedirs(a.work, exist_ok=True)
    gapbs = build_gapbs(a.gapbs_src, a.work)
    transports = [t for t in a.transports.split(",") if t]
    if a.compressed:
        transports += [t + "-z" for t in list(transports)]
    rows = []
    for name in [g for g in a.graphs.split(",") if g]:
        rows += measure_graph(a, gapbs, name, transports)
    print_table(a, rows, transports)
    if rows:
        csvio.write(os.path.join(a.work, "vs_gapbs.csv"), rows)


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dmg", default=registry.default_dmg())
    ap.add_argument("--gapbs_src", default="../shared/anchors/gapbs")
    ap.add_argument("--graphs_dir", default=os.environ.get(
        "DMG_GRAPHS_DIR", "../shared/graphs"))
    ap.add_argument("--graphs", default="kron20,road-NY")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--transports", default="local,tcp")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--trials", type=int, default=3,
                    help="trials per process, both systems (GAPBS -n, "
                         "dmg run --trials); each takes its best")
    ap.add_argument("--sources", type=int, default=4)
    ap.add_argument("--seed", type=int, default=27491095)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cache_fraction", type=float, default=0.05)
    ap.add_argument("--work", default="build/vs_gapbs")
    ap.add_argument("--compressed", action="store_true",
                    help="also run on compressed blocks (local-z, tcp-z)")
    return ap.parse_args()


def measure_graph(a, gapbs, name, transports):
    """One row per workload of graph name; its memory nodes (one per image
    the tcp transports read) up for the duration."""
    files = prepare_graph(name, a, gapbs, a.work)
    nodes = {}
    try:
        if "tcp" in transports:
            for kind in ("u", "w"):
                nodes[kind] = start_memory_node(a.dmg, files[kind][1])
        if "tcp-z" in transports:
            for kind in ("uz", "wz"):
                nodes[kind] = start_memory_node(a.dmg, files[kind][1])
        return [measure_workload(a, gapbs, name, files, nodes, w, transports)
                for w in a.workloads.split(",") if w]
    finally:
        for d in nodes.values():
            d.stop()


def measure_workload(a, gapbs, name, files, nodes, w, transports):
    kind = "w" if w == "sssp" else "u"
    sg, img = files[kind]
    srcs = files["sources"] if w in ("bfs", "sssp") else [None]
    stats = os.path.join(a.work, "stats.json")
    best = {}  # (system, source) -> (seconds, bytes)
    first = {}  # (transport, source) -> best first-trial seconds
    for rep in range(a.reps):
        for s in srcs:
            g = gapbs_time(gapbs, w, sg, s, a)
            k = ("gapbs", s)
            best[k] = min(best.get(k, (g, 0)), (g, 0))
            for t in transports:
                z = t.endswith("-z")
                r = dmg_time(
                    a, w, files[kind + "z"][1] if z else img, s,
                    t, nodes.get(kind + "z" if z else kind), stats,
                    a.cache_fraction * os.path.getsize(img) if z else None)
                k = (t, s)
                if k not in best or r[0] < best[k][0]:
                    best[k] = r[:2]
                first[k] = min(first.get(k, r[2]), r[2])
        log(f"{name} {w} rep {rep + 1}/{a.reps} done")
    row = {"graph": name, "workload": w, "sources": len(srcs),
           "plain_bytes_per_arc": files["per_arc"].get("u"),
           "compressed_bytes_per_arc": files["per_arc"].get("uz")}
    row["gapbs_s"] = sum(best[("gapbs", s)][0] for s in srcs)
    for t in transports:
        row[t + "_s"] = sum(best[(t, s)][0] for s in srcs)
        row[t + "_ratio"] = row[t + "_s"] / row["gapbs_s"]
        row[t + "_bytes_per_run"] = sum(best[(t, s)][1] for s in srcs) / len(srcs)
        row[t + "_vs_edge_bytes"] = row[t + "_bytes_per_run"] / files["edge_bytes"]
    for t in transports:  # appended: the CSV's earlier columns keep their place
        row[t + "_first_s"] = sum(first[(t, s)] for s in srcs)
        row[t + "_first_ratio"] = row[t + "_first_s"] / row["gapbs_s"]
    return row


def print_table(a, rows, transports):
    print(f"DMG / GAPBS, {a.threads} threads, DMG cache {a.cache_fraction:g} "
          f"of the graph, best of {a.reps} processes of {a.trials} trials "
          f"each, both systems (first: DMG's first trial in a process); "
          f"BFS/SSSP: sum over {a.sources} sources")
    head = f"{'graph':<9} {'workload':<8} {'GAPBS s':>9}"
    for t in transports:
        head += f" {t + ' s':>9} {'ratio':>6} {'first':>6}"
        if not t.startswith("local"):
            head += f" {'bytes/edge bytes':>17}"
    print(head)
    for r in rows:
        line = f"{r['graph']:<9} {r['workload']:<8} {r['gapbs_s']:9.4f}"
        for t in transports:
            line += (f" {r[t + '_s']:9.4f} {r[t + '_ratio']:5.2f}x"
                     f" {r[t + '_first_ratio']:5.2f}x")
            if not t.startswith("local"):
                line += f" {r[t + '_vs_edge_bytes']:17.2f}"
        print(line)
    if a.compressed:
        for r in {r["graph"]: r for r in rows}.values():
            print(f"{r['graph']}: block bytes per arc (out-blocks, unweighted "
                  f"image): plain {r['plain_bytes_per_arc']:.2f}, compressed "
                  f"{r['compressed_bytes_per_arc']:.2f}")


if __name__ == "__main__":
    main()
