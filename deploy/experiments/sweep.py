#!/usr/bin/env python3
"""The experiment runner: one sweep file (TOML) in, one CSV row per run and
plots out.

    deploy/experiments/sweep.py SWEEP.toml [--out DIR] [--dmg PATH]
                                [--set KEY=VALUE]... [--dry-run]
    deploy/experiments/sweep.py --replot DIR/results.csv [--out DIR]

A sweep names graphs, algorithms, transports (local = the embedded cluster
in one process; tcp, rdma = memory-node daemons started by deploy/cluster on
the sweep's backend: local, netns, ssh or slurm), compute and memory node
counts, cache sizes and policies, threads, update modes and directions, and
trials. Every combination is one `dmg run ... --trials=N
--summary_json=FILE` (with `stats_json`, also --stats_json: balance,
waiting, the choices made). An [ablation] table is a second grid beside
the first (scaling.toml: update_mode x direction at 2 compute nodes), with
summary.txt's verdict: auto/auto within 10% of the best forced combination.
The format, the backends and examples: docs/EXPERIMENTS.md.

For transport local, a memory-node count M is `--layout_memory_nodes=M` (M
memory nodes inside the one process). For tcp and rdma, the runner writes a
cluster file per (transport, M) -- derived from the sweep's [cluster] base
file (its first M memory nodes) or generated -- and for each graph runs
`deploy/cluster F up`, `load GRAPH`, the runs, `down` (slurm: one batch job
per run, which loads the graph itself).

Output (default ~/dmg-experiments/NAME-YYYYmmdd-HHMMSS, printed): results.csv
(written as the runs finish; its `command` reruns a run on its own),
summaries/*.json (dmg's), stats/*.json, logs/*.log (each command's output),
clusters/*/ (each cluster file and its `rerun` script), the plots (PNG,
PDF, SVG) and summary.txt. Temporary files (cluster state, store images)
live in a dmg-sweep-* folder that is removed at the end, also on failure
or Ctrl-C; every cluster that was brought up is taken down.

Exit codes: 0 every run ok, 1 some run failed (the CSV says which), 2 a bad
sweep file or usage, 130 interrupted.
"""

import argparse
import datetime
import itertools
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
from dmgexp import (csvio, daemons, graphs, plots, procs, registry,  # noqa: E402
                    report, stats)

SYSTEM_PYTHON = "/usr/bin/python3"
TRANSPORTS = ("local", "tcp", "rdma")
BACKENDS = ("local", "netns", "ssh", "slurm")
POLICIES = ("graph_aware", "page_lru")


class SweepError(Exception):
    """A bad sweep file or usage: one line, exit 2."""


def say(msg):
    print(f"sweep: {msg}", flush=True)


# ---------------------------------------------------------------- matplotlib

def reexec_with_system_python():
    """Debian's python3-matplotlib serves /usr/bin/python3; another python3
    first on PATH (pyenv, a venv) does not see it. Re-run under it."""
    if plots.pyplot() or os.environ.get("DMG_SWEEP_REEXEC"):
        return
    if not os.path.exists(SYSTEM_PYTHON) or \
            os.path.realpath(sys.executable) == os.path.realpath(SYSTEM_PYTHON):
        return
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import tomllib, matplotlib"],
                           capture_output=True)
    if probe.returncode == 0:
        os.environ["DMG_SWEEP_REEXEC"] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, str(Path(__file__).resolve())] + sys.argv[1:])


# ---------------------------------------------------------------- the sweep file

# key: (type, default). Lists are lists of that element type.
SWEEP_KEYS = {
    "name": (str, None),
    "description": (str, ""),
    "graphs": (list, None),
    "algorithms": (list, None),
    "transports": (list, ["local"]),
    "compute_nodes": (list, [1]),
    "memory_nodes": (list, [1]),
    "caches": (list, ["unbounded"]),
    "cache_policies": (list, ["graph_aware"]),
    "threads": (list, [0]),
    "trials": (int, 1),
    "verify": (bool, False),
    "timeout_s": (int, 600),
    "flags": (list, []),
    "algorithm_flags": (dict, {}),
    "prebuild_images": (bool, True),
    "update_modes": (list, ["auto"]),
    "directions": (list, ["auto"]),
    "stats_json": (bool, False),
    "repeats": (int, 1),
    "ablation": (dict, {}),
    "cluster": (dict, {}),
}
# The keys that make the grid of runs; an [ablation] table may set any of
# them (a value or a list) for a second grid, run beside the first.
DIM_KEYS = ("algorithms", "transports", "compute_nodes", "memory_nodes", "caches",
            "cache_policies", "threads", "update_modes", "directions")
INT_LISTS = ("compute_nodes", "memory_nodes")
CLUSTER_KEYS = {"backend": str, "base": str, "load_flags": list, "push": bool,
                "wait_ms": int}
# Flags the sweep sets itself: not allowed in `flags`.
OWN_FLAGS = ("--trials", "--summary_json", "--algo", "--graph", "--transport",
             "--memory_nodes", "--compute_nodes", "--threads", "--cache_mb",
             "--cache_fraction", "--cache_policy", "--layout_memory_nodes",
             "--update_mode", "--direction", "--stats_json")
# dmg flags that shape the stored graph (tools/graph_flags.cc, less --graph,
# --threads, --layout_memory_nodes): given in `flags`, they go to the load too.
GRAPH_FLAGS = ("--seed", "--symmetrize", "--drop_self_loops", "--drop_parallel_arcs",
               "--relabel", "--block_size", "--compress")


def parse_cache(value, where):
    """A cache size: a fraction in (0, 1], 'N%' of the store image,
    'N MiB' / 'NMiB' / 'N GiB', or 'unbounded'. Returns (label, flags, kind, x)."""
    if isinstance(value, bool):
        raise SweepError(f"{where}: {value!r} is not a cache size")
    if isinstance(value, (int, float)):
        f = float(value)
        if not 0 < f <= 1:
            raise SweepError(f"{where}: {value!r}: a number is a fraction of the "
                             "store image, 0 < f <= 1 (use \"64 MiB\" for sizes)")
        return f"{f * 100:g}%", [f"--cache_fraction={f:g}"], "fraction", f
    if not isinstance(value, str):
        raise SweepError(f"{where}: {value!r} is not a cache size")
    s = value.strip()
    if re.fullmatch(r"[0-9]*\.?[0-9]+", s) and float(s) != 0:
        return parse_cache(float(s), where)   # "0.05" as 0.05 (--set caches=0.05,0.1)
    if s.lower() in ("unbounded", "none", "0"):
        return "unbounded", [], "unbounded", None
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*%", s)
    if m:
        f = float(m.group(1)) / 100
        if not 0 < f <= 1:
            raise SweepError(f"{where}: {value!r}: between 0% and 100%")
        return f"{float(m.group(1)):g}%", [f"--cache_fraction={f:g}"], "fraction", f
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*(MiB|MB|M|GiB|GB|G)", s, re.IGNORECASE)
    if m:
        mib = float(m.group(1)) * (1024 if m.group(2).upper().startswith("G") else 1)
        if mib <= 0:
            raise SweepError(f"{where}: {value!r}: must be > 0")
        return f"{mib:g}MiB", [f"--cache_mb={mib:g}"], "mib", mib
    raise SweepError(f"{where}: {value!r}: use a fraction (0.05), a percentage "
                     "(\"5%\"), a size (\"64 MiB\") or \"unbounded\"")


def apply_sets(doc, sets):
    """--set KEY=VALUE, VALUE in TOML syntax (a bare word is taken as a string;
    KEY may be dotted: cluster.backend=netns)."""
    for s in sets:
        if "=" not in s:
            raise SweepError(f"--set {s!r}: expected KEY=VALUE")
        key, value = s.split("=", 1)
        key = key.strip()
        try:
            parsed = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            parsed = value
        base = key[len("ablation."):] if key.startswith("ablation.") else key
        if SWEEP_KEYS.get(base, (None,))[0] is list and not isinstance(parsed, list):
            parsed = [x.strip() for x in parsed.split(",") if x.strip()] \
                if isinstance(parsed, str) else [parsed]
            if base in INT_LISTS + ("threads",):
                try:
                    parsed = [x if base == "threads" and str(x).startswith("split")
                              else int(x) for x in parsed]
                except ValueError:
                    raise SweepError(f"--set {s!r}: expected integers")
        table = doc
        parts = key.split(".")
        for p in parts[:-1]:
            table = table.setdefault(p, {})
        table[parts[-1]] = parsed


def read_sweep(path, sets=(), dmg=None):
    """The sweep file with --set applied, checked, defaults filled in and
    graphs resolved; SweepError names the file and the key."""
    path = Path(path)
    doc = load_toml(path)
    apply_sets(doc, sets)
    sw = typed_keys(path, doc)
    sw["name"] = sw["name"] or path.stem
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", sw["name"]):
        raise SweepError(f"{path}: name: {sw['name']!r}: letters, digits, '-', '_', '.'")
    # The names `dmg help` lists, asked only once a file names algorithms.
    algorithms = lambda: registry.algorithms(dmg or registry.default_dmg())
    check_strings(path, sw, "", "graphs")
    check_strings(path, sw, "", "flags")
    check_dims(path, sw, "", algorithms)
    sw["ablation"] = read_ablation(path, sw, algorithms)
    for key in ("trials", "timeout_s", "repeats"):
        if sw[key] < 1:
            raise SweepError(f"{path}: {key}: must be >= 1")
    check_flags(path, sw, algorithms)
    sw["cluster"] = read_cluster(path, sw)
    sw["graphs"] = [resolve_graph(g, path) for g in sw["graphs"]]
    sw["path"] = path
    return sw


def load_toml(path):
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise SweepError(f"{path}: no such sweep file")
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{path}: not valid TOML: {e}")


def typed_keys(path, doc):
    """Every key known and of its type, the missing ones' defaults."""
    for key in doc:
        if key not in SWEEP_KEYS:
            raise SweepError(f"{path}: {key}: unknown key (allowed: "
                             f"{', '.join(sorted(SWEEP_KEYS))})")
    sw = {}
    for key, (want, default) in SWEEP_KEYS.items():
        if key not in doc:
            if default is None and key != "name":
                raise SweepError(f"{path}: {key}: missing")
            sw[key] = default
            continue
        value = doc[key]
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise SweepError(f"{path}: {key}: expected "
                             f"{'a table' if want is dict else want.__name__}, "
                             f"got {type(value).__name__} {value!r}")
        if want is list and not value:
            raise SweepError(f"{path}: {key}: an empty list")
        sw[key] = value
    return sw


def check_strings(path, t, pre, key, allowed=None, pattern=None):
    for i, v in enumerate(t[key]):
        if not isinstance(v, str) or not v:
            raise SweepError(f"{path}: {pre}{key}[{i}]: expected a string, got {v!r}")
        if allowed and v not in allowed:
            raise SweepError(f"{path}: {pre}{key}[{i}]: {v!r} "
                             f"(one of: {', '.join(allowed)})")
        if pattern and not re.fullmatch(pattern, v):
            raise SweepError(f"{path}: {pre}{key}[{i}]: {v!r} (e.g. {pattern!r})")


def check_counts(path, t, pre, key, low):
    for i, v in enumerate(t[key]):
        if isinstance(v, str) and key == "threads" and re.fullmatch(r"split(:[1-9]\d*)?", v):
            continue   # max(1, cores // compute nodes)
        if not isinstance(v, int) or isinstance(v, bool) or v < low:
            raise SweepError(f"{path}: {pre}{key}[{i}]: expected an int >= {low}"
                             + (' or "split[:CORES]"' if key == "threads" else "")
                             + f", got {v!r}")


def check_dims(path, t, pre, algorithms):
    """The grid's keys (the sweep's, or its [ablation]'s); adds cache_specs."""
    check_strings(path, t, pre, "algorithms", algorithms())
    check_strings(path, t, pre, "transports", TRANSPORTS)
    check_strings(path, t, pre, "cache_policies", POLICIES)
    check_strings(path, t, pre, "update_modes", pattern="[a-z_]+")
    check_strings(path, t, pre, "directions", pattern="[a-z_]+")
    check_counts(path, t, pre, "compute_nodes", 1)
    check_counts(path, t, pre, "memory_nodes", 1)
    check_counts(path, t, pre, "threads", 0)
    t["cache_specs"] = [parse_cache(v, f"{path}: {pre}caches[{i}]")
                        for i, v in enumerate(t["caches"])]


def read_ablation(path, sw, algorithms):
    """[ablation]: a second grid, the sweep's keys with the table's values
    (None without one)."""
    abl = sw["ablation"]
    for k, v in abl.items():
        if k not in DIM_KEYS:
            raise SweepError(f"{path}: ablation.{k}: unknown key (allowed: "
                             f"{', '.join(DIM_KEYS)})")
        if not isinstance(v, list):
            abl[k] = [v]
        if not abl[k]:
            raise SweepError(f"{path}: ablation.{k}: an empty list")
    if not abl:
        return None
    grid = {k: abl.get(k, sw[k]) for k in DIM_KEYS}
    check_dims(path, grid, "ablation.", algorithms)
    return grid


def check_flags(path, sw, algorithms):
    for flag in sw["flags"]:
        for own in OWN_FLAGS:
            if flag == own or flag.startswith(own + "="):
                raise SweepError(f"{path}: flags: {own} is set by the sweep itself")
    for algo, flags in sw["algorithm_flags"].items():
        if algo not in algorithms():
            raise SweepError(f"{path}: algorithm_flags.{algo}: not an algorithm "
                             f"(one of: {', '.join(algorithms())})")
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            raise SweepError(f"{path}: algorithm_flags.{algo}: expected a list of strings")
        for flag in flags:
            if flag.split("=")[0] in GRAPH_FLAGS:
                raise SweepError(f"{path}: algorithm_flags.{algo}: {flag} shapes the loaded "
                                 "graph, which every algorithm shares: put it in flags")


def read_cluster(path, sw):
    """[cluster], with the base file read (its backend is the sweep's)."""
    cl = dict(sw["cluster"])
    for key, value in cl.items():
        if key not in CLUSTER_KEYS:
            raise SweepError(f"{path}: cluster.{key}: unknown key (allowed: "
                             f"{', '.join(sorted(CLUSTER_KEYS))})")
        if not isinstance(value, CLUSTER_KEYS[key]):
            raise SweepError(f"{path}: cluster.{key}: expected "
                             f"{CLUSTER_KEYS[key].__name__}, got {value!r}")
    if "base" in cl:
        read_base(path, cl)
    cl.setdefault("backend", "local")
    if cl["backend"] not in BACKENDS:
        raise SweepError(f"{path}: cluster.backend: {cl['backend']!r} "
                         f"(one of: {', '.join(BACKENDS)})")
    cl.setdefault("load_flags", [])
    cl.setdefault("push", False)
    if cl["backend"] in ("ssh", "slurm") and "base" not in cl and \
            any(t != "local" for t in every(sw, "transports")):
        raise SweepError(f"{path}: cluster.base: tcp/rdma on the {cl['backend']} "
                         "backend need a base cluster file (hosts, ssh or slurm settings)")
    return cl


def read_base(path, cl):
    base = Path(os.path.expandvars(cl["base"]))
    if not base.is_absolute():
        # Relative to the repository (deploy/clusters/...), else the cwd.
        base = REPO / base if (REPO / base).exists() else Path.cwd() / base
    if not base.exists():
        raise SweepError(f"{path}: cluster.base: {cl['base']}: no such file")
    cl["base"] = str(base)
    with open(base, "rb") as f:
        base_doc = tomllib.load(f)
    if "backend" in cl and cl["backend"] != base_doc.get("backend"):
        raise SweepError(f"{path}: cluster.backend: {cl['backend']!r} but the base "
                         f"file's backend is {base_doc.get('backend')!r}")
    cl["backend"] = base_doc.get("backend")
    cl["base_doc"] = base_doc


def graph_flags(sw):
    return [f for f in sw["flags"] if f.split("=")[0] in GRAPH_FLAGS]


def resolve_graph(spec, path):
    try:
        return graphs.resolve(spec)
    except graphs.GraphNotFound as e:
        raise SweepError(f"{path}: graphs: {e}")


# ---------------------------------------------------------------- the plan

def grids(sw):
    """(experiment, grid): the sweep's own, then its [ablation]'s."""
    return [("sweep", sw)] + ([("ablation", sw["ablation"])] if sw["ablation"] else [])


def every(sw, key):
    """The values of a grid key over both grids, in order, once each."""
    return list(dict.fromkeys(v for _, g in grids(sw) for v in g[key]))


def plan(sw):
    """Every run, grouped by where it runs: a list of (group, runs); a group
    is (transport, memory_nodes, graph); the runs of a tcp/rdma group share
    one cluster up/load/down. The ablation's runs join the groups."""
    groups = {}
    for experiment, g in grids(sw):
        for transport, m, graph in itertools.product(g["transports"], g["memory_nodes"],
                                                     sw["graphs"]):
            runs = groups.setdefault((transport, m, graph), [])
            for algo, c, threads, policy, cache, mode, direction in itertools.product(
                    g["algorithms"], g["compute_nodes"], g["threads"],
                    g["cache_policies"], g["cache_specs"], g["update_modes"],
                    g["directions"]):
                runs.append(dict(graph=graph, graph_label=graphs.label(graph),
                                 algorithm=algo, transport=transport, compute_nodes=c,
                                 memory_nodes=m, threads=threads, cache_policy=policy,
                                 cache=cache[0], cache_flags=cache[1], cache_kind=cache[2],
                                 cache_x=cache[3], experiment=experiment,
                                 update_mode=mode, direction=direction))
    return list(groups.items())


def thread_count(threads, compute_nodes):
    """A threads value as --threads: "split[:CORES]" is max(1, CORES //
    compute nodes) (CORES: this machine's), so that a job never asks for
    more threads than there are cores."""
    if isinstance(threads, str):
        cores = int(threads[6:]) if threads.startswith("split:") else os.cpu_count() or 1
        return max(1, cores // compute_nodes)
    return threads


def run_flags(sw, run):
    """dmg run flags common to both ways of running (no graph/transport)."""
    flags = [f"--algo={run['algorithm']}", f"--trials={sw['trials']}",
             f"--compute_nodes={run['compute_nodes']}",
             f"--cache_policy={run['cache_policy']}"] + run["cache_flags"]
    threads = thread_count(run["threads"], run["compute_nodes"])
    if threads:
        flags.append(f"--threads={threads}")
    for key, flag in (("update_mode", "--update_mode"), ("direction", "--direction")):
        if run[key] != "auto":   # auto: dmg's default
            flags.append(f"{flag}={run[key]}")
    if sw["verify"]:
        flags.append("--verify")
    flags += sw["flags"] + sw["algorithm_flags"].get(run["algorithm"], [])
    return flags


# ---------------------------------------------------------------- clusters

def cluster_doc(sw, transport, m, tag):
    """The cluster file for M memory nodes: the base file's first M memory
    nodes (local/netns: more generated when it has fewer), else generated."""
    cl = sw["cluster"]
    backend = cl["backend"]
    base = cl.get("base_doc")
    doc = {k: v for k, v in (base or {}).items()
           if k not in ("name", "dmg", "state_dir", "memory_nodes", "compute_nodes")}
    doc["name"] = tag
    doc["backend"] = backend
    doc["transport"] = transport
    if "wait_ms" in cl:
        doc["wait_ms"] = cl["wait_ms"]
    mem = [dict(t) for t in (base or {}).get("memory_nodes", [])][:m]
    if len(mem) < m:
        if backend == "ssh":
            raise SweepError(f"{cl['base']}: has {len(mem)} memory nodes; the sweep "
                             f"asks for {m} (add [[memory_nodes]] tables)")
        proto = dict(mem[-1]) if mem else {}
        proto.pop("port", None)
        if backend != "local":
            proto.pop("host", None)
        while len(mem) < m:
            mem.append(dict(proto))
    if backend == "local":
        # Ports that are free now: 7400+i may be someone else's on a shared host.
        ports = daemons.free_ports(m)
        for t, p in zip(mem, ports):
            t.setdefault("host", "127.0.0.1")
            if not base or "port" not in t:
                t["port"] = p
    doc["memory_nodes"] = mem
    comp = [dict(t) for t in (base or {}).get("compute_nodes", [])]
    if not comp and backend in ("local", "netns"):
        # One place per compute node (netns: its own namespace each).
        comp = [{} for _ in range(max(every(sw, "compute_nodes")))]
    if comp:
        doc["compute_nodes"] = comp
    if backend == "netns" and "subnet" not in doc.get("netns", {}):
        # Not the examples' 10.77.0.0/24: another cluster may be up on it.
        doc.setdefault("netns", {})["subnet"] = f"10.78.{os.getpid() % 250}.0/24"
    return doc


def make_cluster(sw, args, folder, work, transport, m, logs):
    """The cluster file for (transport, M) in folder/TAG/, with the script
    that reruns one run on it; its state (while up) in work/TAG/."""
    tag = f"sw{os.getpid() % 100000}{transport[0]}{m}"
    (folder / tag).mkdir(parents=True, exist_ok=True)
    file = folder / tag / "cluster.toml"
    file.write_text(f"# Written by deploy/experiments/sweep.py for {sw['path']}\n"
                    + daemons.toml_dump(cluster_doc(sw, transport, m, tag)))
    cl = sw["cluster"]
    cluster = daemons.Cluster(file, args.dmg, work / tag / "state", logs, cl["backend"],
                              cl["push"], cl["load_flags"])
    cluster.write_rerun(graph_flags(sw))
    return cluster


# ---------------------------------------------------------------- running

CSV_FIELDS = [
    "sweep", "graph", "algorithm", "transport", "backend", "compute_nodes",
    "memory_nodes", "cache", "cache_policy", "threads", "trials", "status",
    "time_median_s", "time_min_s", "time_max_s", "time_average_s",
    "remote_bytes_median", "remote_bytes_min", "remote_bytes_max",
    "bytes_read_median", "bytes_written_median", "round_trips_median",
    "supersteps_median", "cache_bound_bytes", "cache_peak_bytes", "cache_hits",
    "cache_misses", "cache_bytes_fetched", "vertices", "arcs", "load_seconds",
    "threads_used", "verify", "result", "wall_s", "summary_json", "log", "command",
    # New columns go last, so that scripts that index columns keep working.
    "experiment", "update_mode", "direction", "rep", "time_supersteps_s", "job_bytes",
    "max_node_bytes", "balance", "wait_frac", "chosen_directions", "chosen_update_modes",
    "chosen_coordinators", "stats_json",
]


def median(xs):
    return statistics.median(xs) if xs else ""


def row_from_summary(row, s):
    trials = s["trials"]
    secs = [t["seconds"] for t in trials]
    remote = [t["bytes_read"] + t["bytes_written"] for t in trials]
    row.update(
        time_median_s=s["seconds"]["median"], time_min_s=s["seconds"]["min"],
        time_max_s=s["seconds"]["max"], time_average_s=s["seconds"]["average"],
        remote_bytes_median=median(remote), remote_bytes_min=min(remote),
        remote_bytes_max=max(remote),
        bytes_read_median=median([t["bytes_read"] for t in trials]),
        bytes_written_median=median([t["bytes_written"] for t in trials]),
        round_trips_median=median([t["round_trips"] for t in trials]),
        supersteps_median=median([t["supersteps"] for t in trials]),
        cache_bound_bytes=s["cache"]["bound_bytes"], cache_peak_bytes=s["cache"]["peak_bytes"],
        cache_hits=sum(t["cache_hits"] for t in trials),
        cache_misses=sum(t["cache_misses"] for t in trials),
        cache_bytes_fetched=sum(t["cache_bytes_fetched"] for t in trials),
        vertices=s["vertices"], arcs=s["arcs"], load_seconds=s["load_seconds"],
        threads_used=s["threads"], verify=s.get("verify", ""))
    # The answer's figures, per trial: reached / components / iterations ...
    parts = []
    for key in ("reached", "components", "iterations", "converged", "triangles"):
        vals = [t[key] for t in trials if key in t]
        if vals:
            distinct = list(dict.fromkeys(str(v).lower() for v in vals))
            parts.append(f"{key}={'/'.join(distinct)}")
    sources = [t.get("source") for t in trials if t.get("source") is not None]
    if sources:
        parts.append("sources=" + "/".join(map(str, sources)))
    row["result"] = " ".join(parts)
    if len(secs) != row["trials"]:
        row["status"] = f"error: {len(secs)} trials in the summary, {row['trials']} asked for"
    if s.get("verify") == "mismatch":
        row["status"] = "error: verify mismatch"


def build_image(sw, args, work, graph, m, logs):
    """transport local: the store image for M memory nodes, made once per
    graph and M instead of in every run (an image carries its layout)."""
    image = work / f"{graphs.slug(graphs.label(graph))}-m{m}.img"
    log = logs / f"image-{image.stem}.log"
    argv = [args.dmg, "load", f"--graph={graph}", f"--image={image}",
            f"--layout_memory_nodes={m}"] + graph_flags(sw)
    if args.dry_run:
        print(shlex.join(argv))
        return image
    rc, _ = procs.run_logged(argv, log, max(600, sw["timeout_s"]))
    if rc != 0:
        raise RuntimeError(f"`dmg load --image` of {graphs.label(graph)} failed "
                           f"(exit {rc}): {procs.tail_line(log)}")
    return image


def run_name(sw, run, index, rep):
    name = (f"{index:03d}-{graphs.slug(run['graph_label'])}-{run['algorithm']}"
            f"-{run['transport']}-c{run['compute_nodes']}-m{run['memory_nodes']}"
            f"-{graphs.slug(run['cache'])}-{run['cache_policy']}"
            f"-t{graphs.slug(str(run['threads']))}")
    if (run["update_mode"], run["direction"]) != ("auto", "auto"):
        name += f"-{run['update_mode']}-{run['direction']}"
    return name + (f"-r{rep}" if sw["repeats"] > 1 else "")


def run_argvs(args, run, flags, cluster, image):
    """(the command run now, the one the CSV records). The recorded one
    reruns the run on its own, with nothing of the sweep's temporary
    folder: local, on the graph as given (the image is the same graph,
    made once); tcp/rdma, through the cluster's rerun script (up, load,
    run, down)."""
    if run["transport"] == "local":
        rest = [f"--layout_memory_nodes={run['memory_nodes']}"] + flags
        return ([args.dmg, "run", f"--graph={image or run['graph']}"] + rest,
                [args.dmg, "run", f"--graph={run['graph']}"] + rest)
    # --graph names the graph in the summary (and is what --verify and a
    # slurm job load); the run itself reads the loaded memory nodes.
    flags = flags + [f"--graph={run['graph']}"]
    return cluster.run_argv(flags), [str(cluster.rerun), run["graph"]] + flags


def backend_of(sw, transport):
    return "embedded" if transport == "local" else sw["cluster"]["backend"]


def new_row(sw, run, rep):
    row = {k: "" for k in CSV_FIELDS}
    row.update(sweep=sw["name"], graph=run["graph_label"], algorithm=run["algorithm"],
               transport=run["transport"], backend=backend_of(sw, run["transport"]),
               compute_nodes=run["compute_nodes"], memory_nodes=run["memory_nodes"],
               cache=run["cache"], cache_policy=run["cache_policy"], threads=run["threads"],
               trials=sw["trials"], experiment=run["experiment"],
               update_mode=run["update_mode"], direction=run["direction"], rep=rep)
    return row


def run_one(sw, args, run, index, out, cluster, image=None, rep=0):
    name = run_name(sw, run, index, rep)
    summary = out / "summaries" / f"{name}.json"
    stats_file = out / "stats" / f"{name}.json"
    log = out / "logs" / f"{name}.log"
    flags = run_flags(sw, run) + [f"--summary_json={summary}"]
    if sw["stats_json"]:
        flags.append(f"--stats_json={stats_file}")
    argv, rerun = run_argvs(args, run, flags, cluster, image)
    row = new_row(sw, run, rep)
    row.update(summary_json=str(summary.relative_to(out)), log=str(log.relative_to(out)),
               command=shlex.join(rerun))
    if run["update_mode"] == "pull" and run["direction"] == "push":
        # A pull sends no updates: dmg refuses the pair; recorded, not run.
        row.update(status="skipped", summary_json="", log="", command="")
        return None if args.dry_run else row
    if args.dry_run:
        print(shlex.join(argv))
        return None
    rc, wall = procs.run_logged(argv, log, sw["timeout_s"])
    row["wall_s"] = f"{wall:.3f}"
    record_outcome(sw, row, rc, log, summary, stats_file, out)
    modes = "" if (run["update_mode"], run["direction"]) == ("auto", "auto") else \
        f" {run['update_mode']}/{run['direction']}"
    say(f"{index:3d} {run['algorithm']} {run['graph_label']} {run['transport']} "
        f"C={run['compute_nodes']} M={run['memory_nodes']} cache={run['cache']} "
        f"{run['cache_policy']} threads={run['threads']}{modes}: {row['status']}"
        + (f", median {row['time_median_s']:.4g} s, remote "
           f"{row['remote_bytes_median'] / 1e6:.3g} MB" if row["status"] == "ok"
           else f" (log {log})"))
    return row


def record_outcome(sw, row, rc, log, summary, stats_file, out):
    """The row's status and figures, from the exit code and the JSONs."""
    if rc is None:
        row["status"] = f"timeout ({sw['timeout_s']} s)"
    elif rc == 2 and "must be" in log.read_text(errors="replace"):
        # A --update_mode/--direction value this dmg does not know.
        row["status"] = f"unsupported: {procs.tail_line(log)}"
    elif rc != 0:
        row["status"] = f"error (exit {rc}): {procs.tail_line(log)}"
    elif not summary.exists():
        row["status"] = "error: no summary JSON written"
    else:
        try:
            s = json.loads(summary.read_text())
            if s.get("format") != "dmg-summary-1":
                raise ValueError(f"format {s.get('format')!r}")
            row["status"] = "ok"
            row_from_summary(row, s)
        except (ValueError, KeyError, TypeError) as e:
            row["status"] = f"error: bad summary JSON: {e}"
        if sw["stats_json"] and row["status"] == "ok":
            try:
                row.update(stats.figures(stats.load(stats_file)),
                           stats_json=str(stats_file.relative_to(out)))
            except (OSError, ValueError, KeyError, TypeError) as e:
                row["status"] = f"error: bad stats JSON: {e}"


def sweep(sw, args):
    groups = plan(sw)
    total = sum(len(r) for _, r in groups) * sw["repeats"]
    # Every cluster file can be made (enough memory nodes in the base) before
    # anything runs, so that a bad sweep is exit 2 at once, not half way.
    for _, g in grids(sw):
        for transport, m in itertools.product(g["transports"], g["memory_nodes"]):
            if transport != "local":
                cluster_doc(sw, transport, m, "check")
    if args.dry_run:
        return dry_run(sw, args, groups, total)
    registry.check(args.dmg)
    out = out_dir(sw, args)
    for sub in ("summaries", "logs") + (("stats",) if sw["stats_json"] else ()):
        (out / sub).mkdir(parents=True, exist_ok=True)
    say(f"{sw['name']}: {total} runs x {sw['trials']} trials; output in {out}")
    rows = []
    work = Path(tempfile.mkdtemp(prefix="dmg-sweep-"))
    try:
        with csvio.Writer(out / "results.csv", CSV_FIELDS) as csv_out:
            def emit(row):
                rows.append(row)
                csv_out.row(row)
            index = 1
            for group, runs in groups:
                index = run_group(sw, args, out, work, group, runs, index, emit)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return finish(rows, out, sw)


def out_dir(sw, args):
    if args.out:
        return Path(args.out).resolve()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(os.environ.get("DMG_EXPERIMENTS_DIR", Path.home() / "dmg-experiments"))
    return (base / f"{sw['name']}-{stamp}").resolve()


def run_group(sw, args, out, work, group, runs, index, emit):
    """The runs of one (transport, M, graph), on a cluster brought up for
    them (tcp/rdma) or a store image made for them (local); a cluster or
    image that cannot be made makes its runs errors. Returns the next
    run's index."""
    transport, m, graph = group
    # Repetitions interleaved: every run of the group once before any runs
    # again (the fastest counts in summary.txt).
    todo = [(rep, run) for rep in range(sw["repeats"]) for run in runs
            if rep == 0 or (run["update_mode"], run["direction"]) != ("pull", "push")]
    cluster = image = None
    done = 0
    try:
        if transport != "local":
            cluster = make_cluster(sw, args, out / "clusters", work, transport, m,
                                   out / "logs")
            say(f"cluster {cluster.tag}: {sw['cluster']['backend']}, {transport}, "
                f"{m} memory node(s), graph {graphs.label(graph)}")
            cluster.up(graph, graph_flags(sw))
        elif sw["prebuild_images"]:
            image = build_image(sw, args, work, graph, m, out / "logs")
        for rep, run in todo:
            emit(run_one(sw, args, run, index + done, out, cluster, image, rep))
            done += 1
    except RuntimeError as e:   # daemons.DaemonError too
        say(f"error: {e}")
        for rep, run in todo[done:]:
            emit(dict(new_row(sw, run, rep), status=f"error: {e}"))
        done = len(todo)
    finally:
        if cluster:
            cluster.down()
        if image:
            Path(image).unlink(missing_ok=True)
    return index + done


def dry_run(sw, args, groups, total):
    say(f"{total} runs (dry run: the commands; cluster files are written at run time)")
    work = Path(tempfile.mkdtemp(prefix="dmg-sweep-"))
    index = 0
    try:
        for (transport, m, graph), runs in groups:
            cluster = image = None
            if transport == "local" and sw["prebuild_images"]:
                image = build_image(sw, args, work, graph, m, work)
            if transport != "local":
                cluster = make_cluster(sw, args, work, work, transport, m, work)
                print(f"# cluster {cluster.tag} ({sw['cluster']['backend']}, {transport}, "
                      f"{m} memory nodes): up; load {graph}; runs; down")
            for run in runs:
                index += 1
                run_one(sw, args, run, index, Path("OUT"), cluster, image)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def finish(rows, out, sw):
    """The plots, the table, summary.txt; the exit code."""
    say(f"wrote {out / 'results.csv'} ({len(rows)} rows)")
    make_plots(rows, out, sw["name"])
    print_table(rows)
    write_summary(rows, out)
    bad = [r for r in rows if r["status"] != "ok" and
           not r["status"].startswith(("skipped", "unsupported"))]
    good = sum(1 for r in rows if r["status"] == "ok")
    other = len(rows) - good - len(bad)
    say(f"done: {good} ok, {len(bad)} failed"
        + (f", {other} skipped or unsupported" if other else "") + f"; output in {out}")
    return 1 if bad else 0


def print_table(rows):
    print(f"{'graph':<14} {'algo':<9} {'transport':<9} {'C':>2} {'M':>2} {'cache':>9} "
          f"{'policy':<11} {'thr':>3} {'median s':>9} {'min s':>9} {'max s':>9} {'remote MB':>10}")
    for r in rows:
        ok = r["status"] == "ok"
        f = lambda k, d=4: f"{float(r[k]):.{d}g}" if ok else "-"
        mb = f"{float(r['remote_bytes_median']) / 1e6:.4g}" if ok else r["status"][:30]
        print(f"{r['graph']:<14} {r['algorithm']:<9} {r['transport']:<9} "
              f"{r['compute_nodes']:>2} {r['memory_nodes']:>2} {r['cache']:>9} "
              f"{r['cache_policy']:<11} {r['threads']:>3} {f('time_median_s'):>9} "
              f"{f('time_min_s'):>9} {f('time_max_s'):>9} "
              f"{mb:>10}" + ("" if (report.get(r, "update_mode"), report.get(r, "direction"))
                             == ("auto", "auto") else
                             f" {r['update_mode']}/{r['direction']}"))


# ---------------------------------------------------------------- plots

def make_plots(rows, out, name):
    """Each plot as NAME.png, .pdf and .svg in out; the PNGs' paths."""
    if not rows:
        return []
    plt = plots.pyplot()
    if plt is None:
        say("matplotlib missing (Debian: apt-get install python3-matplotlib): no plots; "
            f"`{Path(__file__).name} --replot {out / 'results.csv'}` makes them later")
        return []
    made = []
    with plots.styled():
        for stem, fig in itertools.chain(plots.sweep_figures(plt, rows, name),
                                         plots.ablation_figures(plt, rows)):
            made.append(plots.save(fig, out / stem))
            plt.close(fig)
            say(f"wrote {made[-1]} (and .pdf, .svg)")
    if not made:
        say("no plots: no axis (cache, compute nodes, memory nodes) has more than one "
            "value with an ok run")
    return made


def write_summary(rows, out):
    """summary.txt: the scaling table and the ablation's verdicts, when the
    sweep has several compute-node counts or an [ablation]."""
    text = report.summarize(rows)
    if text:
        print(text, end="")
        (out / "summary.txt").write_text(text)
        say(f"wrote {out / 'summary.txt'}")


# ---------------------------------------------------------------- main

def main(argv):
    reexec_with_system_python()
    p = argparse.ArgumentParser(
        prog="sweep.py", description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="The sweep file format: docs/EXPERIMENTS.md.")
    p.add_argument("sweep", nargs="?", help="the sweep file (TOML)")
    p.add_argument("--out", help="output folder (default ~/dmg-experiments/NAME-TIMESTAMP, "
                   "or $DMG_EXPERIMENTS_DIR/NAME-TIMESTAMP)")
    p.add_argument("--dmg", default=registry.default_dmg(),
                   help="the dmg binary (default $DMG_BIN, else build/release/tools/dmg)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a sweep key (TOML value; lists also as a,b,c): "
                   "--set graphs=kron:18 --set cluster.backend=netns")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.add_argument("--replot", metavar="CSV", help="only remake the plots from a results.csv")
    a = p.parse_args(argv)
    a.dmg = str(Path(a.dmg).resolve()) if os.path.sep in a.dmg else a.dmg
    procs.unwind_on_signals()
    try:
        if a.replot:
            return replot(a)
        if not a.sweep:
            raise SweepError("give a sweep file (or --replot CSV)")
        return sweep(read_sweep(a.sweep, a.set, a.dmg), a)
    except (SweepError, registry.DmgMissing) as e:
        print(f"sweep: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sweep: interrupted; clusters taken down, temporary files removed",
              file=sys.stderr)
        return 130
    except BrokenPipeError:   # `--dry-run | head`
        sys.stderr.close()
        return 0


def replot(a):
    rows = csvio.read(a.replot)
    out = Path(a.out or Path(a.replot).parent)
    out.mkdir(parents=True, exist_ok=True)
    made = make_plots(rows, out, rows[0]["sweep"] if rows else "")
    write_summary(rows, out)
    return 0 if made or not rows else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
