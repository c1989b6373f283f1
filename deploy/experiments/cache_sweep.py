#!/usr/bin/env python3
"""Cache-demand sweep: time and remote bytes vs compute-side cache size.

For each graph, transport (local = embedded cluster, tcp = a memory-node
daemon on loopback), algorithm (PageRank, BFS), policy (graph_aware, the
baseline page_lru) and cache size (a fraction of the store image), runs
`dmg run --stats_json` and records the algorithm's time (the sum of its
supersteps: setup and result read-back excluded), remote bytes and cache
counters. Writes a CSV, a PNG plot (time and bytes vs cache size, one line
per policy and transport) and prints the derived figures: time at 5% vs
100%, graph_aware vs page_lru at 5%, and each policy's cache demand (the
smallest cache within 1.2x of its own 100%-cache time).

Runs that exceed --timeout are recorded as timeouts (time = the timeout,
marked), so a slow baseline cannot stall the sweep.

Example (what docs/PERFORMANCE.md reports):
  deploy/experiments/cache_sweep.py --graphs kron:20,urand:20,$G/road-NY.el \\
      --out build/cache_sweep
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def run(cmd, timeout):
    start = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr, time.time() - start
    except subprocess.TimeoutExpired:
        return None, "", "timeout", time.time() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dmg", default=os.path.join(REPO, "build/release/tools/dmg"))
    ap.add_argument("--graphs", default="kron:20,urand:20")
    ap.add_argument("--transports", default="local,tcp")
    ap.add_argument("--algos", default="pagerank,bfs")
    ap.add_argument("--policies", default="graph_aware,page_lru")
    ap.add_argument("--fractions", default="0.01,0.02,0.05,0.1,0.25,0.5,1.0")
    ap.add_argument("--iters", type=int, default=5, help="PageRank iterations")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--out", default=os.path.join(REPO, "build/cache_sweep"))
    ap.add_argument("--replot", metavar="CSV",
                    help="only re-make the summary and plot from a CSV")
    args = ap.parse_args()
    if args.replot:
        rows = load_csv(args.replot)
        os.makedirs(args.out, exist_ok=True)
        summary = summarize(rows)
        print(summary)
        with open(os.path.join(args.out, "summary.txt"), "w") as f:
            f.write(summary)
        plot(rows, os.path.join(args.out, "cache_sweep.png"))
        return
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="dmg-sweep-")
    rows = []
    for graph in args.graphs.split(","):
        name = os.path.basename(graph).replace(":", "")
        image = os.path.join(work, name + ".img")
        rc, out, err, _ = run([args.dmg, "load", "--graph=" + graph,
                               "--image=" + image], 600)
        if rc != 0:
            sys.exit(f"loading {graph} failed: {err}")
        # A BFS source that reaches a good part of the graph.
        source = 0
        for cand in range(0, 64):
            rc, out, err, _ = run([args.dmg, "run", "--algo=bfs",
                                   "--graph=" + image, f"--source={cand}"], 300)
            m = re.search(r"(\d+) reached", out)
            n = re.search(r"(\d+) vertices", out)
            if m and n and int(m.group(1)) > 0.1 * int(n.group(1)):
                source = cand
                break
        for transport in args.transports.split(","):
            daemon = None
            target = ["--graph=" + image]
            if transport == "tcp":
                log = open(os.path.join(work, "mn.log"), "w")
                daemon = subprocess.Popen(
                    [args.dmg, "memory-node", "--listen=127.0.0.1:0",
                     "--transport=tcp"], stdout=subprocess.PIPE,
                    stderr=log, text=True)
                addr = re.search(r"listening on (\S+)",
                                 daemon.stdout.readline()).group(1)
                rc, out, err, _ = run([args.dmg, "load", "--graph=" + image,
                                       "--memory_nodes=" + addr], 600)
                if rc != 0:
                    sys.exit(f"tcp load failed: {err}")
                target = ["--transport=tcp", "--memory_nodes=" + addr]
            for algo in args.algos.split(","):
                for policy in args.policies.split(","):
                    for frac in [float(f) for f in args.fractions.split(",")]:
                        stats = os.path.join(work, "stats.json")
                        if os.path.exists(stats):
                            os.remove(stats)
                        cmd = [args.dmg, "run", "--algo=" + algo, *target,
                               f"--threads={args.threads}",
                               f"--cache_fraction={frac}",
                               "--cache_policy=" + policy,
                               "--stats_json=" + stats]
                        if algo == "pagerank":
                            cmd += [f"--max_iters={args.iters}", "--tolerance=0"]
                        else:
                            cmd += [f"--source={source}"]
                        rc, out, err, wall = run(cmd, args.timeout)
                        row = dict(graph=name, transport=transport, algo=algo,
                                   policy=policy, fraction=frac)
                        if rc is None:
                            row.update(status="timeout", seconds=args.timeout)
                        elif rc != 0:
                            row.update(status="error: " + err.strip()[-200:],
                                       seconds="")
                        else:
                            s = json.load(open(stats))
                            tot, c = s["totals"], s["cache_totals"]
                            row.update(
                                status="ok",
                                seconds=sum(t["seconds"] for t in s["supersteps"]),
                                supersteps=len(s["supersteps"]),
                                cache_bytes=s["cache_capacity_bytes"],
                                cache_peak=s["cache_peak_bytes"],
                                bytes_read=tot["bytes_read"],
                                bytes_written=tot["bytes_written"],
                                round_trips=tot["round_trips"],
                                hits=c["hits"], misses=c["misses"],
                                bytes_fetched_pages=c["bytes_fetched"],
                                vertices=s["vertices"], arcs=s["arcs"])
                        rows.append(row)
                        print(json.dumps(row), flush=True)
            if daemon:
                daemon.terminate()
                daemon.wait()
    fields = ["graph", "transport", "algo", "policy", "fraction", "status",
              "seconds", "supersteps", "cache_bytes", "cache_peak",
              "bytes_read", "bytes_written", "round_trips", "hits", "misses",
              "bytes_fetched_pages", "vertices", "arcs"]
    with open(os.path.join(args.out, "cache_sweep.csv"), "w") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow(r)
    summary = summarize(rows)
    print(summary)
    with open(os.path.join(args.out, "summary.txt"), "w") as f:
        f.write(summary)
    plot(rows, os.path.join(args.out, "cache_sweep.png"))


def load_csv(path):
    rows = []
    for r in csv.DictReader(open(path)):
        for k in ("fraction", "seconds"):
            r[k] = float(r[k]) if r[k] else None
        for k in ("supersteps", "bytes_read", "vertices", "arcs"):
            r[k] = int(r[k]) if r.get(k) else None
        rows.append(r)
    return rows


def summarize(rows):
    """The issue's figures, one line per (graph, transport, algorithm)."""
    def find(g, tr, a, p, f):
        for r in rows:
            if (r["graph"], r["transport"], r["algo"], r["policy"],
                    r["fraction"]) == (g, tr, a, p, f):
                return r
        return None

    def secs(r):
        if r is None or r["status"] not in ("ok", "timeout"):
            return None, False
        return r["seconds"], r["status"] == "timeout"

    def demand(g, tr, a, policy):
        base, to = secs(find(g, tr, a, policy, 1.0))
        if base is None or to:
            return None
        for f in sorted({r["fraction"] for r in rows}):
            s, t = secs(find(g, tr, a, policy, f))
            if s is not None and not t and s <= 1.2 * base:
                return f
        return None

    fmt = lambda x, d=3: "-" if x is None else f"{x:.{d}g}"
    out = ["graph transport algo | graph_aware 5%/100% time | "
           "page_lru/graph_aware at 5% | demand graph_aware | demand page_lru "
           "| demand ratio | PR bytes/iter at 5% / (4m+8n)"]
    for g, tr, a in sorted({(r["graph"], r["transport"], r["algo"])
                            for r in rows}):
        ga100, _ = secs(find(g, tr, a, "graph_aware", 1.0))
        ga5, _ = secs(find(g, tr, a, "graph_aware", 0.05))
        lru5, lru5_to = secs(find(g, tr, a, "page_lru", 0.05))
        d_ga, d_lru = demand(g, tr, a, "graph_aware"), demand(g, tr, a, "page_lru")
        ratio = None
        if d_ga and d_lru:
            ratio = d_lru / d_ga
        lru_ratio = (lru5 / ga5) if lru5 and ga5 else None
        bytes_ratio = None
        r5 = find(g, tr, a, "graph_aware", 0.05)
        if (a == "pagerank" and r5 and r5["status"] == "ok"
                and r5.get("vertices")):
            must = 4 * r5["arcs"] + 8 * r5["vertices"]
            bytes_ratio = r5["bytes_read"] / r5["supersteps"] / must
        out.append(
            f"{g} {tr} {a} | {fmt(ga5 / ga100 if ga5 and ga100 else None)} | "
            f"{('>' if lru5_to else '') + fmt(lru_ratio)} | "
            f"{fmt(d_ga)} | {fmt(d_lru) if d_lru else '>1 or n/a'} | "
            f"{fmt(ratio)} | "
            f"{fmt(bytes_ratio)}")
    return "\n".join(out) + "\n"


def plot(rows, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        # Debian's python3-matplotlib serves /usr/bin/python3; another
        # python3 first on PATH (pyenv, a venv) does not see it.
        system = "/usr/bin/python3"
        if os.path.realpath(sys.executable) != os.path.realpath(system) and \
                os.path.exists(system):
            csv_path = os.path.join(os.path.dirname(path), "cache_sweep.csv")
            if subprocess.run([system, "-c", "import matplotlib"],
                              capture_output=True).returncode == 0 and \
                    os.path.exists(csv_path):
                subprocess.run([system, os.path.abspath(__file__), "--replot",
                                csv_path, "--out", os.path.dirname(path)],
                               stdout=subprocess.DEVNULL)
                print("plot made with " + system + ": " + path)
                return
        print("matplotlib missing (apt-get install python3-matplotlib): no plot")
        return
    panels = sorted({(r["graph"], r["algo"]) for r in rows})
    fig, axes = plt.subplots(2, len(panels), figsize=(4.5 * len(panels), 8),
                             squeeze=False)
    for col, (g, a) in enumerate(panels):
        for key in sorted({(r["policy"], r["transport"]) for r in rows}):
            pts = sorted((r["fraction"], r) for r in rows
                         if (r["graph"], r["algo"], r["policy"],
                             r["transport"]) == (g, a) + key
                         and r["status"] in ("ok", "timeout"))
            if not pts:
                continue
            xs = [100 * f for f, _ in pts]
            style = "-" if key[0] == "graph_aware" else "--"
            label = f"{key[0]} / {key[1]}"
            axes[0][col].plot(xs, [r["seconds"] for _, r in pts], style,
                              marker="o", label=label)
            ok = [(x, r) for x, (_, r) in zip(xs, pts) if r["status"] == "ok"]
            axes[1][col].plot([x for x, _ in ok],
                              [r["bytes_read"] / 1e6 for _, r in ok], style,
                              marker="o", label=label)
        for row, ylabel in ((0, "time (s, timeouts at the cap)"),
                            (1, "remote MB read")):
            ax = axes[row][col]
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("cache size (% of store image)")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{a} on {g}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print("wrote", path)


if __name__ == "__main__":
    main()
