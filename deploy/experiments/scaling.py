#!/usr/bin/env python3
"""Scaling experiment: time and remote traffic vs the number of compute nodes.

Method
  Sweep: every graph x memory-node count M x transport x algorithm x
  compute-node count C runs `dmg run --compute_nodes=C --stats_json`:
    local  the embedded cluster in one process, M memory nodes
           (an image laid out for M nodes, --layout_memory_nodes=M);
    tcp    M `dmg memory-node` daemons on loopback, loaded once per graph
           with `dmg load --memory_nodes=...` (striped over M); dmg starts
           the C compute-node processes itself and node 0 reports.
  Each compute node gets --threads=max(1, cores // C), so the job never asks
  for more threads than the machine has cores (--cores overrides
  os.cpu_count()). PageRank runs a fixed --iters iterations (tolerance 0);
  BFS and SSSP use --source=random (a seeded pick: the same source in every
  run); SSSP on an unweighted graph adds --unit_weights.

  Ablation (--ablation, on by default): at --ablation_compute compute and
  --ablation_memory memory nodes, every --update_mode in --modes x every
  --direction in --directions. update_mode=pull with direction=push is a
  contradiction dmg refuses; it is recorded as "skipped" and not run. A mode
  dmg does not know yet (exit 2, "must be ...") is recorded as "unsupported".
  For each graph x algorithm x transport, auto/auto PASSes when its time and
  its remote bytes are both within 10% of the best forced combination (every
  combination other than auto/auto that ran, possibly two different ones).
  A forced combination whose runs made exactly auto's choices (the same
  directions and update_modes counts) ran the same code, so its runs count
  as repetitions of auto's: auto's time is the best of them all, and the
  verdict says so ("pooled"). PageRank's Gather has no update mode or
  direction: all its combinations run one code path.

  Repetitions (--reps) are interleaved: every configuration of a graph runs
  once before any runs a second time; the summary and plots keep the best
  (smallest time) repetition. Runs past --timeout are killed (with the
  compute-node processes they started) and recorded as "timeout".

Figures (per run, from --stats_json)
  time_s        algorithm time: the sum of the supersteps' seconds (setup,
                loading and read-back excluded), as cache_sweep.py measures;
  remote_bytes_read/written, round_trips, atomics
                job_totals: summed over every compute node (everything they
                sent, setup and waiting for each other included);
  balance       max over compute nodes of (seconds - wait_seconds) divided by
                their mean (1.0 = perfectly balanced; 1.0 for one node);
  wait_frac     sum of wait_seconds / sum of seconds over compute nodes;
  directions, update_modes, coordinators
                per-superstep choices as counts ("pull:3 push:2"); the last
                two only when dmg reports them.
  threads, threads_used
                --threads asked for and the count dmg reports (warned about
                when they differ);
  result        the answer's summary from dmg's output (BFS reached, CC
                components, ...); the summary warns when BFS, CC or SSSP give
                different answers in different configurations.

Outputs in --out (never the source tree; default build/scaling, --quick:
build/scaling_quick): scaling.csv (one row per run, written as it goes),
summary.txt (the printed summary), scaling.png (time and remote MB vs compute
nodes, one line per transport and memory-node count, a panel per graph x
algorithm), speedup.png (time at the fewest compute nodes / time), and
ablation.png (time and remote MB per update_mode/direction). Plots need
matplotlib (Debian: python3-matplotlib); without it they are skipped with a
message, and `--replot build/scaling/scaling.csv` re-makes them later.

Examples:
  deploy/experiments/scaling.py --quick          # smoke run, ~1-2 minutes
  deploy/experiments/scaling.py \\
      --graphs kron:20,urand:20,road-NY --reps 3 --out build/scaling
  (road-NY is found in $DMG_GRAPHS_DIR, default ../shared/graphs; a graph
  that is not there is skipped with a message.)
"""
import argparse
import collections
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

QUICK = dict(graphs="kron:14,urand:14", compute="1,2", memory="1,2", reps=1,
             timeout=60, out=os.path.join(REPO, "build/scaling_quick"))

FIELDS = ["experiment", "graph", "algo", "transport", "compute_nodes",
          "memory_nodes", "update_mode", "direction", "rep", "status",
          "time_s", "job_s", "wall_s", "remote_bytes_read",
          "remote_bytes_written", "round_trips", "atomics", "balance",
          "wait_frac", "supersteps", "directions", "update_modes",
          "coordinators", "threads", "threads_used", "source", "result",
          "message"]
INT_FIELDS = ("compute_nodes", "memory_nodes", "rep", "remote_bytes_read",
              "remote_bytes_written", "round_trips", "atomics", "supersteps",
              "threads", "threads_used")
FLOAT_FIELDS = ("time_s", "job_s", "wall_s", "balance", "wait_frac")
EXACT_ALGOS = ("bfs", "cc", "sssp")  # answers must not depend on the setup


class Interrupted(Exception):
    pass


def on_sigterm(signum, frame):
    raise Interrupted(f"signal {signum}")


# ---------------------------------------------------------------- processes

def run(cmd, timeout):
    """Runs cmd in its own process group; on timeout or Ctrl-C the whole
    group (dmg and the compute-node processes it spawned) is killed.
    Returns (rc or None on timeout, stdout, stderr, wall seconds)."""
    start = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err, time.time() - start
    except subprocess.TimeoutExpired:
        kill_group(p)
        p.communicate()
        return None, "", "timeout", time.time() - start
    except BaseException:
        kill_group(p)
        p.communicate()
        raise


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class MemoryNodes:
    """M `dmg memory-node` daemons on loopback (tcp), stopped with SIGTERM."""

    def __init__(self, dmg, count, work, tag):
        self.procs, self.addrs = [], []
        for k in range(count):
            log = os.path.join(work, f"mn-{tag}-{k}.log")
            with open(log, "w") as f:
                p = subprocess.Popen(
                    [dmg, "memory-node", "--listen=127.0.0.1:0",
                     "--transport=tcp"], stdout=f, stderr=subprocess.STDOUT,
                    start_new_session=True)
            self.procs.append(p)
            self.addrs.append(wait_for_address(p, log))

    def spec(self):
        return ",".join(self.addrs)

    def stop(self):
        """SIGTERM every daemon; returns the non-zero exit codes seen."""
        bad = []
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                rc = p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill_group(p)
                rc = p.wait()
            if rc != 0:
                bad.append(rc)
        self.procs = []
        return bad


def wait_for_address(p, log, limit=15):
    """The address a daemon prints ("listening on 127.0.0.1:PORT")."""
    deadline = time.time() + limit
    while time.time() < deadline:
        with open(log) as f:
            m = re.search(r"listening on (\S+)", f.read())
        if m:
            return m.group(1)
        if p.poll() is not None:
            break
        time.sleep(0.05)
    with open(log) as f:
        tail = f.read()[-500:]
    raise RuntimeError(f"memory node did not start: {tail}")


# ------------------------------------------------------------------- graphs

def resolve_graph(spec, graphs_dir):
    """A generator, an existing file, or a name in graphs_dir (NAME,
    NAME.el, NAME.wel); None when absent."""
    if re.match(r"^(kron|urand):", spec) or os.path.exists(spec):
        return spec
    for cand in (spec, spec + ".el", spec + ".wel"):
        path = os.path.join(graphs_dir, cand)
        if os.path.exists(path):
            return path
    return None


def graph_label(spec):
    if re.match(r"^(kron|urand):", spec):
        return spec
    name = os.path.basename(spec)
    for ext in (".gz", ".xz", ".el", ".wel", ".txt", ".gr", ".mtx", ".img"):
        if name.endswith(ext):
            name = name[:-len(ext)]
    return name


def build_images(args, spec, label, counts, work):
    """One store image per memory-node count (laid out for that many)."""
    images, start = {}, time.time()
    for m in counts:
        img = os.path.join(work, re.sub(r"[^\w.-]", "", label) + f"-m{m}.img")
        cmd = [args.dmg, "load", "--graph=" + spec, "--image=" + img,
               f"--layout_memory_nodes={m}"]
        if args.symmetrize:
            cmd.append("--symmetrize")
        rc, out, err, wall = run(cmd, args.load_timeout)
        if rc != 0:
            raise RuntimeError(f"loading {spec} failed: {err.strip()}")
        images[m] = img
    first = out.strip().splitlines()[0] if out.strip() else ""
    print(f"{label}: {len(images)} image(s) (memory nodes {counts}) in "
          f"{time.time() - start:.1f} s; {first}", flush=True)
    return images


def is_weighted(dmg, image):
    rc, out, err, _ = run([dmg, "info", "--graph=" + image], 600)
    return rc == 0 and re.search(r"^weighted:\s+yes", out, re.M) is not None


# ------------------------------------------------------------ configurations

Config = collections.namedtuple(
    "Config", "experiment algo transport compute memory update_mode direction")


def configs(args):
    """Every run of one graph, in the order one repetition runs them."""
    out = []
    for m in args.memory:
        for tr in args.transports:
            for algo in args.algos:
                for c in args.compute:
                    out.append(Config("sweep", algo, tr, c, m, "auto", "auto"))
    if args.ablation:
        for tr in args.ablation_transports:
            for algo in args.algos:
                for mode in args.modes:
                    for d in args.directions:
                        out.append(Config("ablation", algo, tr,
                                          args.ablation_compute,
                                          args.ablation_memory, mode, d))
    return out


def run_command(args, cfg, target, weighted, stats):
    threads = max(1, args.cores // cfg.compute)
    cmd = [args.dmg, "run", "--algo=" + cfg.algo, *target,
           f"--compute_nodes={cfg.compute}", f"--threads={threads}",
           "--stats_json=" + stats]
    if cfg.experiment == "ablation":
        cmd += ["--update_mode=" + cfg.update_mode,
                "--direction=" + cfg.direction]
    if cfg.algo == "pagerank":
        cmd += [f"--max_iters={args.iters}", "--tolerance=0"]
    if cfg.algo in ("bfs", "sssp"):
        cmd.append("--source=random")
    if cfg.algo == "sssp" and not weighted:
        cmd.append("--unit_weights")
    if args.cache_fraction is not None:
        cmd.append(f"--cache_fraction={args.cache_fraction}")
    return cmd, threads


def one_run(args, cfg, label, rep, target, weighted, work):
    row = dict(experiment=cfg.experiment, graph=label, algo=cfg.algo,
               transport=cfg.transport, compute_nodes=cfg.compute,
               memory_nodes=cfg.memory, update_mode=cfg.update_mode,
               direction=cfg.direction, rep=rep)
    if cfg.update_mode == "pull" and cfg.direction == "push":
        row.update(status="skipped", message="pull sends no updates: no push")
        return row
    stats = os.path.join(work, "stats.json")
    if os.path.exists(stats):
        os.remove(stats)
    cmd, threads = run_command(args, cfg, target, weighted, stats)
    rc, out, err, wall = run(cmd, args.timeout)
    row.update(threads=threads, wall_s=round(wall, 3))
    if rc is None:
        row.update(status="timeout", message=f"> {args.timeout} s")
    elif rc == 2 and "must be" in err:
        row.update(status="unsupported", message=last_line(err))
    elif rc != 0 or not os.path.exists(stats):
        row.update(status="error", message=f"rc={rc}: {last_line(err)}")
    else:
        with open(stats) as f:
            row.update(status="ok", **stats_figures(json.load(f)))
        row.update(parse_summary(out))
    return row


def last_line(text):
    lines = [l for l in text.strip().splitlines() if l.strip()]
    return lines[-1][-300:] if lines else ""


def parse_summary(out):
    """Source and the answer's summary from dmg's one-line report."""
    line = next((l for l in out.splitlines() if " round trips" in l), "")
    m = re.search(r"round trips; (.*)", line)
    result = re.sub(r"; \d+ compute nodes$", "", m.group(1)) if m else ""
    src = re.search(r"source (\d+)", result)
    return dict(source=src.group(1) if src else "", result=result)


def stats_figures(s):
    steps = s["supersteps"]
    tot = s.get("job_totals") or s["totals"]
    busy = [n["seconds"] - n["wait_seconds"] for n in s.get("nodes") or []]
    total = sum(n["seconds"] for n in s.get("nodes") or [])
    balance, wait = 1.0, 0.0
    if busy and sum(busy) > 0:
        balance = max(busy) / (sum(busy) / len(busy))
    if total > 0:
        wait = sum(n["wait_seconds"] for n in s["nodes"]) / total
    return dict(
        time_s=sum(t["seconds"] for t in steps), job_s=s.get("seconds"),
        threads_used=s.get("threads"),
        remote_bytes_read=tot["bytes_read"],
        remote_bytes_written=tot["bytes_written"],
        round_trips=tot["round_trips"], atomics=tot.get("atomics", 0),
        balance=round(balance, 4), wait_frac=round(wait, 4),
        supersteps=len(steps), directions=counts(steps, "direction"),
        update_modes=counts(steps, "update_mode"),
        coordinators=counts(steps, "coordinator"))


def counts(steps, key):
    """'pull:3 push:2' for a per-superstep field ('none' for an empty
    value); '' when dmg does not report the field."""
    c = collections.Counter(str(t[key]) or "none" for t in steps if key in t)
    return " ".join(f"{k}:{v}" for k, v in sorted(c.items()))


# --------------------------------------------------------------- the sweep

def sweep_graph(args, spec, label, work, writer, rows):
    todo = configs(args)
    counts_needed = sorted({c.memory for c in todo})
    images = build_images(args, spec, label, counts_needed, work)
    weighted = is_weighted(args.dmg, images[counts_needed[0]])
    daemons = {}
    try:
        targets = {}
        for m in counts_needed:
            targets[("local", m)] = ["--graph=" + images[m],
                                     f"--layout_memory_nodes={m}"]
            if any(c.transport == "tcp" and c.memory == m for c in todo):
                daemons[m] = MemoryNodes(args.dmg, m, work, f"{m}")
                load_tcp(args, images[m], daemons[m])
                # --graph only names the loaded graph (dmg uses it for
                # --verify); without it this dmg ignores --threads over tcp.
                targets[("tcp", m)] = ["--transport=tcp",
                                       "--memory_nodes=" + daemons[m].spec(),
                                       "--graph=" + images[m]]
        for rep in range(args.reps):
            for cfg in todo:
                row = one_run(args, cfg, label, rep,
                              targets[(cfg.transport, cfg.memory)],
                              weighted, work)
                rows.append(row)
                writer(row)
                progress(row, len(rows))
    finally:
        for m, d in daemons.items():
            bad = d.stop()
            if bad:
                print(f"WARNING: {m} memory node(s) of {label} exited with "
                      f"{bad} on SIGTERM (expected 0)", flush=True)


def load_tcp(args, image, daemons):
    cmd = [args.dmg, "load", "--graph=" + image,
           "--memory_nodes=" + daemons.spec()]
    rc, out, err, _ = run(cmd, args.load_timeout)
    if rc != 0:
        raise RuntimeError(f"tcp load of {image} failed: {err.strip()}")


def progress(row, n):
    what = (f"{row['experiment'][:5]} {row['graph']} {row['algo']} "
            f"{row['transport']} c{row['compute_nodes']} "
            f"m{row['memory_nodes']}")
    if row["experiment"] == "ablation":
        what += f" {row['update_mode']}/{row['direction']}"
    if row["status"] == "ok":
        res = (f"{row['time_s']:.4f} s  "
               f"{mb(row):.1f} MB  bal {row['balance']:.2f}")
    else:
        res = row["status"] + (": " + row["message"]
                               if row["status"] == "error" else "")
    print(f"[{n}] {what}: {res}", flush=True)


def mb(row):
    return (row["remote_bytes_read"] + row["remote_bytes_written"]) / 1e6


# ----------------------------------------------------------------- summary

def best_rows(rows):
    """(experiment, graph, algo, transport, C, M, mode, direction) -> the
    fastest ok repetition, or the first non-ok row when none was ok."""
    best = {}
    for r in rows:
        key = (r["experiment"], r["graph"], r["algo"], r["transport"],
               r["compute_nodes"], r["memory_nodes"], r["update_mode"],
               r["direction"])
        cur = best.get(key)
        if cur is None or (r["status"] == "ok" and (
                cur["status"] != "ok" or r["time_s"] < cur["time_s"])):
            best[key] = r
    return best


def cell(r, fmt):
    if r is None:
        return "-"
    if r["status"] != "ok":
        return {"timeout": "T/O", "error": "ERR", "unsupported": "unsup",
                "skipped": "skip"}.get(r["status"], r["status"])
    return fmt(r)


def summarize(rows):
    best = best_rows(rows)
    out = sweep_summary(best) + ablation_summary(best) + checks(rows)
    return "\n".join(out) + "\n"


def sweep_summary(best):
    sweep = {k: v for k, v in best.items() if k[0] == "sweep"}
    if not sweep:
        return []
    cs = sorted({k[4] for k in sweep})
    out = ["scaling (best repetition; time = sum of supersteps, s; MB = "
           "remote read+written, all compute nodes; speedup, balance and "
           f"wait at {cs[-1]} vs {cs[0]} compute node(s))",
           f"{'graph':10s} {'algo':8s} {'tr':5s} {'mem':>3s} | time "
           + " ".join(f"{'C=' + str(c):>8s}" for c in cs)
           + f" | {'speedup':>7s} | MB " + " ".join(f"{'C=' + str(c):>7s}" for c in cs)
           + " | balance wait"]
    for g, a, tr, m in sorted({(k[1], k[2], k[3], k[5]) for k in sweep}):
        rs = [sweep.get(("sweep", g, a, tr, c, m, "auto", "auto")) for c in cs]
        first, last = rs[0], rs[-1]
        speed = "-"
        if ok(first) and ok(last) and last["time_s"] > 0:
            speed = f"{first['time_s'] / last['time_s']:.2f}x"
        out.append(
            f"{g:10s} {a:8s} {tr:5s} {m:3d} | time "
            + " ".join(f"{cell(r, secs):>8s}" for r in rs)
            + f" | {speed:>7s} | MB "
            + " ".join(f"{cell(r, megabytes):>7s}" for r in rs)
            + f" | {cell(last, balance):>7s} {cell(last, waiting):>4s}")
    return out + [""]


def ok(r):
    return r is not None and r["status"] == "ok"


def secs(r):
    return "%.4f" % r["time_s"]


def megabytes(r):
    return "%.2f" % mb(r)


def balance(r):
    return "%.2f" % r["balance"]


def waiting(r):
    return "%.0f%%" % (100 * r["wait_frac"])


def ablation_summary(best):
    abl = {k: v for k, v in best.items() if k[0] == "ablation"}
    out = []
    for g, a in sorted({(k[1], k[2]) for k in abl}):
        trs = sorted({k[3] for k in abl if k[1:3] == (g, a)})
        c, m = next((k[4], k[5]) for k in abl if k[1:3] == (g, a))
        out.append(f"ablation: {a} on {g} ({c} compute, {m} memory nodes; "
                   "time s / remote MB)")
        out.append(f"  {'update':7s} {'dir':5s} | "
                   + " | ".join(f"{tr:>5s} {'time':>8s} {'MB':>8s}"
                                for tr in trs))
        combos = sorted({(k[6], k[7]) for k in abl if k[1:3] == (g, a)},
                        key=combo_order)
        for mode, d in combos:
            rs = [abl.get(("ablation", g, a, tr, c, m, mode, d)) for tr in trs]
            out.append(f"  {mode:7s} {d:5s} | " + " | ".join(
                f"{'':5s} {cell(r, secs):>8s} {cell(r, megabytes):>8s}"
                for r in rs))
        for tr in trs:
            group = {k[6:8]: v for k, v in abl.items()
                     if k[1:4] == (g, a, tr)}
            out.append(f"  {tr}: " + verdict(group))
        out.append("")
    return out


MODE_ORDER = ["auto", "pull", "batch", "atomic"]
DIR_ORDER = ["auto", "push", "pull"]


def combo_order(combo):
    mode, d = combo
    return (MODE_ORDER.index(mode) if mode in MODE_ORDER else 99, mode,
            DIR_ORDER.index(d) if d in DIR_ORDER else 99, d)


def verdict(group):
    """auto/auto vs the best forced combination, in time and in bytes."""
    auto = group.get(("auto", "auto"))
    forced = [r for k, r in group.items() if k != ("auto", "auto") and ok(r)]
    if not ok(auto) or not forced:
        return "auto/auto or every forced mode missing: no verdict"
    bt = min(forced, key=lambda r: r["time_s"])
    bb = min(forced, key=mb)
    # A forced combination that made every choice auto made (the same
    # directions and update modes, superstep by superstep counts) ran the
    # same code: its runs are repetitions of auto's, and the best of them
    # is auto's time (otherwise the best of many forced samples of one
    # execution is held against the best of auto's few: noise, not choice).
    same = [r for r in forced
            if r.get("directions") == auto.get("directions")
            and r.get("update_modes") == auto.get("update_modes")]
    auto_t = min([auto["time_s"]] + [r["time_s"] for r in same])
    pooled = (f" (pooled with {len(same)} forced making the same choices)"
              if same and auto_t < auto["time_s"] else "")
    rt = auto_t / bt["time_s"] if bt["time_s"] > 0 else 1.0
    rb = mb(auto) / mb(bb) if mb(bb) > 0 else 1.0
    mark = lambda x: "PASS" if x <= 1.1 else "MISS"
    return (f"auto {auto_t:.4f} s{pooled} vs best forced {bt['time_s']:.4f} s "
            f"({bt['update_mode']}/{bt['direction']}) = {rt:.2f}x {mark(rt)}; "
            f"auto {mb(auto):.2f} MB vs {mb(bb):.2f} MB "
            f"({bb['update_mode']}/{bb['direction']}) = {rb:.2f}x {mark(rb)}"
            f" => {mark(max(rt, rb))}")


def checks(rows):
    """Exact answers that differ between configurations; failures."""
    out = []
    answers = collections.defaultdict(set)
    for r in rows:
        if ok(r) and r["algo"] in EXACT_ALGOS and r.get("result"):
            answers[(r["graph"], r["algo"])].add(r["result"])
    for (g, a), res in sorted(answers.items()):
        if len(res) > 1:
            out.append(f"WARNING: {a} on {g} gives different answers: "
                       + " | ".join(sorted(res)))
    threads = collections.Counter(
        (r["transport"], r["compute_nodes"], r["threads"], r["threads_used"])
        for r in rows if ok(r) and r["threads_used"] not in (None, "")
        and r["threads_used"] != r["threads"])
    for (tr, c, asked, used), n in sorted(threads.items()):
        out.append(f"WARNING: {tr} with {c} compute node(s): --threads={asked}"
                   f" but dmg reports {used} threads ({n} runs)")
    status = collections.Counter(r["status"] for r in rows)
    out.append("runs: " + ", ".join(f"{k} {v}" for k, v in sorted(status.items())))
    for r in rows:
        if r["status"] in ("error", "timeout"):
            out.append(f"  {r['status']}: {r['experiment']} {r['graph']} "
                       f"{r['algo']} {r['transport']} c{r['compute_nodes']} "
                       f"m{r['memory_nodes']} {r['update_mode']}/"
                       f"{r['direction']}: {r.get('message', '')}")
    return out


# ------------------------------------------------------------------- plots

def plot_all(rows, out_dir, csv_path):
    plt = import_pyplot()
    if plt is None:
        replot_with_system_python(csv_path, out_dir)
        return
    best = best_rows(rows)
    sweep = {k: v for k, v in best.items() if k[0] == "sweep"}
    abl = {k: v for k, v in best.items() if k[0] == "ablation"}
    if sweep:
        plot_scaling(plt, sweep, os.path.join(out_dir, "scaling.png"))
        plot_speedup(plt, sweep, os.path.join(out_dir, "speedup.png"))
    if abl:
        plot_ablation(plt, abl, os.path.join(out_dir, "ablation.png"))


def import_pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


def replot_with_system_python(csv_path, out_dir):
    # Debian's python3-matplotlib serves /usr/bin/python3; another python3
    # first on PATH (pyenv, a venv) does not see it.
    system = "/usr/bin/python3"
    if os.path.realpath(sys.executable) != os.path.realpath(system) and \
            os.path.exists(system) and subprocess.run(
                [system, "-c", "import matplotlib"],
                capture_output=True).returncode == 0:
        subprocess.run([system, os.path.abspath(__file__), "--replot",
                        csv_path, "--out", out_dir, "--plots_only"])
        return
    print("matplotlib missing (apt-get install python3-matplotlib): no plots; "
          f"later: {os.path.relpath(__file__)} --replot {csv_path}")


def series(sweep, g, a):
    """(transport, M) -> sorted [(C, row)] of ok rows of one panel."""
    out = collections.defaultdict(list)
    for k, r in sweep.items():
        if k[1:3] == (g, a) and ok(r):
            out[(k[3], k[5])].append((k[4], r))
    return {key: sorted(pts, key=lambda p: p[0]) for key, pts in out.items()}


def style(key, ms):
    tr, m = key
    colors = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    return dict(linestyle="-" if tr == "local" else "--", marker="o",
                color=colors[ms.index(m) % len(colors)],
                label=f"{tr}, {m} memory node{'s' if m > 1 else ''}")


def grid(plt, nrows, ncols, w=4.2, h=3.2):
    fig, axes = plt.subplots(nrows, ncols, figsize=(w * ncols, h * nrows),
                             squeeze=False)
    return fig, axes


def finish(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print("wrote", path)


def plot_scaling(plt, sweep, path):
    graphs = sorted({k[1] for k in sweep})
    algos = sorted({k[2] for k in sweep})
    ms = sorted({k[5] for k in sweep})
    cs = sorted({k[4] for k in sweep})
    fig, axes = grid(plt, 2 * len(graphs), len(algos))
    for gi, g in enumerate(graphs):
        for ai, a in enumerate(algos):
            for key, pts in sorted(series(sweep, g, a).items()):
                xs = [c for c, _ in pts]
                axes[2 * gi][ai].plot(xs, [r["time_s"] for _, r in pts],
                                      **style(key, ms))
                axes[2 * gi + 1][ai].plot(xs, [mb(r) for _, r in pts],
                                          **style(key, ms))
            for row, ylabel in ((2 * gi, "time (s)"),
                                (2 * gi + 1, "remote MB (read+written)")):
                ax = axes[row][ai]
                decorate(ax, cs, ylabel, f"{a} on {g}", (row, ai) == (0, 0))
                if row % 2 == 0:
                    plain_log_y(ax)
                else:
                    ax.set_ylim(bottom=0)
    finish(fig, path)


def decorate(ax, cs, ylabel, title, legend):
    ax.set_xscale("log", base=2)
    ax.set_xticks(cs)
    ax.set_xticklabels([str(c) for c in cs])
    ax.set_xlabel("compute nodes")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def plain_log_y(ax):
    """Log scale labelled 0.01, 0.02, 0.05, 0.1, ... (no 1e-2 notation)."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def plot_speedup(plt, sweep, path):
    graphs = sorted({k[1] for k in sweep})
    algos = sorted({k[2] for k in sweep})
    ms = sorted({k[5] for k in sweep})
    cs = sorted({k[4] for k in sweep})
    fig, axes = grid(plt, len(graphs), len(algos))
    for gi, g in enumerate(graphs):
        for ai, a in enumerate(algos):
            ax = axes[gi][ai]
            ax.plot(cs, [c / cs[0] for c in cs], ":", color="gray",
                    label="ideal")
            for key, pts in sorted(series(sweep, g, a).items()):
                if pts[0][0] != cs[0] or pts[0][1]["time_s"] <= 0:
                    continue
                base = pts[0][1]["time_s"]
                ax.plot([c for c, _ in pts],
                        [base / r["time_s"] for _, r in pts], **style(key, ms))
            decorate(ax, cs, f"speedup over {cs[0]} compute node(s)",
                     f"{a} on {g}", (gi, ai) == (0, 0))
    finish(fig, path)


def plot_ablation(plt, abl, path):
    from matplotlib.patches import Patch
    panels = sorted({(k[1], k[2]) for k in abl})
    trs = sorted({k[3] for k in abl})
    combos = sorted({(k[6], k[7]) for k in abl}, key=combo_order)
    fig, axes = grid(plt, len(panels), 2, w=6.5, h=3.0)
    width = 0.8 / max(1, len(trs))
    for pi, (g, a) in enumerate(panels):
        for col, (ylabel, value) in enumerate((("time (s)", lambda r: r["time_s"]),
                                               ("remote MB", mb))):
            ax = axes[pi][col]
            for ti, tr in enumerate(trs):
                xs, ys = [], []
                for ci, (mode, d) in enumerate(combos):
                    r = next((v for k, v in abl.items() if k[1:4] == (g, a, tr)
                              and k[6:8] == (mode, d)), None)
                    x = ci + (ti - (len(trs) - 1) / 2) * width
                    if ok(r):
                        xs.append(x)
                        ys.append(value(r))
                    elif r is not None:  # why there is no bar
                        ax.text(x, 0, cell(r, None), rotation=90, fontsize=6,
                                ha="center", va="bottom", color="gray")
                bars = ax.bar(xs, ys, width, color=f"C{ti}")
                for x, bar in zip(xs, bars):  # the automatic choice
                    if combos[round(x)] == ("auto", "auto"):
                        bar.set_hatch("//")
            ax.set_xticks(range(len(combos)))
            ax.set_xticklabels([f"{m}/{d}" for m, d in combos], rotation=45,
                               ha="right", fontsize=7)
            ax.set_ylabel(ylabel)
            c, m = next((k[4], k[5]) for k in abl if k[1:3] == (g, a))
            ax.set_title(f"{a} on {g} (update_mode/direction; {c} compute, "
                         f"{m} memory; hatched: auto/auto)", fontsize=9)
            ax.grid(True, axis="y", alpha=0.3)
            ax.legend(handles=[Patch(color=f"C{ti}", label=tr)
                               for ti, tr in enumerate(trs)], fontsize=7)
    finish(fig, path)


# -------------------------------------------------------------------- main

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--dmg", default=os.path.join(REPO, "build/release/tools/dmg"))
    ap.add_argument("--graphs", default="kron:20,urand:20,road-NY",
                    help="generators, files, or names in $DMG_GRAPHS_DIR")
    ap.add_argument("--compute", default="1,2,4", help="compute-node counts")
    ap.add_argument("--memory", default="1,2,3", help="memory-node counts")
    ap.add_argument("--transports", default="local,tcp")
    ap.add_argument("--algos", default="pagerank,bfs,cc,sssp")
    ap.add_argument("--reps", type=int, default=1, help="best time kept")
    ap.add_argument("--timeout", type=float, default=300, help="per run, s")
    ap.add_argument("--load_timeout", type=float, default=1800)
    ap.add_argument("--iters", type=int, default=10, help="PageRank iterations")
    ap.add_argument("--cache_fraction", type=float, default=None)
    ap.add_argument("--symmetrize", action="store_true",
                    help="symmetrize the graphs when loading")
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1,
                    help="threads per compute node = max(1, cores // C)")
    ap.add_argument("--ablation", action=argparse.BooleanOptionalAction,
                    default=True)
    ap.add_argument("--ablation_compute", type=int, default=2)
    ap.add_argument("--ablation_memory", type=int, default=2)
    ap.add_argument("--ablation_transports", default=None,
                    help="default: --transports")
    ap.add_argument("--modes", default="auto,pull,batch,atomic",
                    help="--update_mode values of the ablation")
    ap.add_argument("--directions", default="auto,push,pull",
                    help="--direction values of the ablation")
    ap.add_argument("--graphs_dir", default=os.environ.get(
        "DMG_GRAPHS_DIR", os.path.join(os.path.dirname(REPO), "shared/graphs")))
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: kron:14,urand:14, compute 1,2, memory "
                         "1,2, reps 1 (explicit flags still win)")
    ap.add_argument("--out", default=os.path.join(REPO, "build/scaling"))
    ap.add_argument("--replot", metavar="CSV",
                    help="only re-make the summary and plots from a CSV")
    ap.add_argument("--plots_only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        ap.set_defaults(**QUICK)
        args = ap.parse_args()
    split = lambda s: [x for x in s.split(",") if x]
    args.compute = [int(x) for x in split(args.compute)]
    args.memory = [int(x) for x in split(args.memory)]
    args.transports = split(args.transports)
    args.ablation_transports = (split(args.ablation_transports)
                                if args.ablation_transports else args.transports)
    args.algos, args.modes = split(args.algos), split(args.modes)
    args.directions, args.graphs = split(args.directions), split(args.graphs)
    return args


def load_csv(path):
    rows = []
    with open(path) as f:
        for r in csv.DictReader(f):
            for k in INT_FIELDS:
                r[k] = int(r[k]) if r.get(k) else None
            for k in FLOAT_FIELDS:
                r[k] = float(r[k]) if r.get(k) else None
            rows.append(r)
    return rows


def report(rows, out_dir, csv_path, plots_only=False):
    if not plots_only:
        summary = summarize(rows)
        print(summary)
        with open(os.path.join(out_dir, "summary.txt"), "w") as f:
            f.write(summary)
    plot_all(rows, out_dir, csv_path)


def sweep(args, csv_path):
    rows = []
    work = tempfile.mkdtemp(prefix="dmg-scaling-")
    try:
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=FIELDS)
            w.writeheader()

            def writer(row):
                w.writerow(row)
                f.flush()

            for g in args.graphs:
                spec = resolve_graph(g, args.graphs_dir)
                if spec is None:
                    print(f"skipping {g}: not a generator, not a file, not in "
                          f"{args.graphs_dir} (set DMG_GRAPHS_DIR)", flush=True)
                    continue
                sweep_graph(args, spec, graph_label(spec), work, writer, rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return rows


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.replot:
        report(load_csv(args.replot), args.out, args.replot, args.plots_only)
        return 0
    if not os.access(args.dmg, os.X_OK):
        sys.exit(f"no dmg binary at {args.dmg} (build it or pass --dmg)")
    signal.signal(signal.SIGTERM, on_sigterm)
    csv_path = os.path.join(args.out, "scaling.csv")
    start = time.time()
    try:
        rows = sweep(args, csv_path)
    except (KeyboardInterrupt, Interrupted):
        print(f"\ninterrupted: partial results in {csv_path}", file=sys.stderr)
        return 130
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{len(rows)} runs in {time.time() - start:.0f} s; {csv_path}\n")
    report(rows, args.out, csv_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
