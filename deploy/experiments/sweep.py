#!/usr/bin/env python3
"""The experiment runner: one sweep file (TOML) in, one CSV row per run and
PNG plots out.

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
(written as the runs finish), summaries/*.json (dmg's), stats/*.json,
logs/*.log (each command's output), the plots and summary.txt. Temporary files (cluster files, cluster
state) live in a dmg-sweep-* folder that is removed at the end, also on
failure or Ctrl-C; every cluster that was brought up is taken down.

Exit codes: 0 every run ok, 1 some run failed (the CSV says which), 2 a bad
sweep file or usage, 130 interrupted.
"""

import argparse
import csv
import datetime
import itertools
import json
import math
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
from dmgexp import report, stats  # noqa: E402  (deploy/experiments/dmgexp)

CLUSTER = REPO / "deploy" / "cluster"
SYSTEM_PYTHON = "/usr/bin/python3"
ALGORITHMS = ("pagerank", "bfs", "cc", "sssp", "bc", "tc", "kcore")
TRANSPORTS = ("local", "tcp", "rdma")
BACKENDS = ("local", "netns", "ssh", "slurm")
POLICIES = ("graph_aware", "page_lru")
# --update_mode / --direction values dmg knew when this was written; another
# is run anyway (a newer dmg) and recorded as "unsupported" if dmg refuses it.
UPDATE_MODES = ("auto", "pull", "batch", "atomic")
DIRECTIONS = ("auto", "push", "pull")


class SweepError(Exception):
    """A bad sweep file or usage: one line, exit 2."""


def say(msg):
    print(f"sweep: {msg}", flush=True)


# ---------------------------------------------------------------- matplotlib

def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def reexec_with_system_python():
    """Debian's python3-matplotlib serves /usr/bin/python3; another python3
    first on PATH (pyenv, a venv) does not see it. Re-run under it."""
    if have_matplotlib() or os.environ.get("DMG_SWEEP_REEXEC"):
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


def read_sweep(path, sets=()):
    path = Path(path)
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise SweepError(f"{path}: no such sweep file")
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"{path}: not valid TOML: {e}")
    apply_sets(doc, sets)
    sw = {}
    for key, value in doc.items():
        if key not in SWEEP_KEYS:
            raise SweepError(f"{path}: {key}: unknown key (allowed: "
                             f"{', '.join(sorted(SWEEP_KEYS))})")
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
    sw["name"] = sw["name"] or path.stem
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", sw["name"]):
        raise SweepError(f"{path}: name: {sw['name']!r}: letters, digits, '-', '_', '.'")

    def strings(t, pre, key, allowed=None, pattern=None):
        for i, v in enumerate(t[key]):
            if not isinstance(v, str) or not v:
                raise SweepError(f"{path}: {pre}{key}[{i}]: expected a string, got {v!r}")
            if allowed and v not in allowed:
                raise SweepError(f"{path}: {pre}{key}[{i}]: {v!r} "
                                 f"(one of: {', '.join(allowed)})")
            if pattern and not re.fullmatch(pattern, v):
                raise SweepError(f"{path}: {pre}{key}[{i}]: {v!r} (e.g. {pattern!r})")

    def counts(t, pre, key, low):
        for i, v in enumerate(t[key]):
            if isinstance(v, str) and key == "threads" and re.fullmatch(r"split(:[1-9]\d*)?", v):
                continue   # max(1, cores // compute nodes)
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise SweepError(f"{path}: {pre}{key}[{i}]: expected an int >= {low}"
                                 + (' or "split[:CORES]"' if key == "threads" else "")
                                 + f", got {v!r}")

    def check_dims(t, pre):
        strings(t, pre, "algorithms", ALGORITHMS)
        strings(t, pre, "transports", TRANSPORTS)
        strings(t, pre, "cache_policies", POLICIES)
        strings(t, pre, "update_modes", pattern="[a-z_]+")
        strings(t, pre, "directions", pattern="[a-z_]+")
        counts(t, pre, "compute_nodes", 1)
        counts(t, pre, "memory_nodes", 1)
        counts(t, pre, "threads", 0)
        t["cache_specs"] = [parse_cache(v, f"{path}: {pre}caches[{i}]")
                            for i, v in enumerate(t["caches"])]

    strings(sw, "", "graphs")
    strings(sw, "", "flags")
    check_dims(sw, "")
    # [ablation]: a second grid, the first's keys with the table's values.
    abl = sw["ablation"]
    for k, v in abl.items():
        if k not in DIM_KEYS:
            raise SweepError(f"{path}: ablation.{k}: unknown key (allowed: "
                             f"{', '.join(DIM_KEYS)})")
        if not isinstance(v, list):
            abl[k] = [v]
        if not abl[k]:
            raise SweepError(f"{path}: ablation.{k}: an empty list")
    if abl:
        sw["ablation"] = {k: abl.get(k, sw[k]) for k in DIM_KEYS}
        check_dims(sw["ablation"], "ablation.")
    else:
        sw["ablation"] = None
    for key in ("trials", "timeout_s", "repeats"):
        if sw[key] < 1:
            raise SweepError(f"{path}: {key}: must be >= 1")
    for flag in sw["flags"]:
        for own in ("--trials", "--summary_json", "--algo", "--graph", "--transport",
                    "--memory_nodes", "--compute_nodes", "--threads", "--cache_mb",
                    "--cache_fraction", "--cache_policy", "--layout_memory_nodes",
                    "--update_mode", "--direction", "--stats_json"):
            if flag == own or flag.startswith(own + "="):
                raise SweepError(f"{path}: flags: {own} is set by the sweep itself")
    for algo, flags in sw["algorithm_flags"].items():
        if algo not in ALGORITHMS:
            raise SweepError(f"{path}: algorithm_flags.{algo}: not an algorithm")
        if not isinstance(flags, list) or not all(isinstance(f, str) for f in flags):
            raise SweepError(f"{path}: algorithm_flags.{algo}: expected a list of strings")
        for flag in flags:
            if flag.split("=")[0] in GRAPH_FLAGS:
                raise SweepError(f"{path}: algorithm_flags.{algo}: {flag} shapes the loaded "
                                 "graph, which every algorithm shares: put it in flags")
    cl = dict(sw["cluster"])
    for key, value in cl.items():
        if key not in CLUSTER_KEYS:
            raise SweepError(f"{path}: cluster.{key}: unknown key (allowed: "
                             f"{', '.join(sorted(CLUSTER_KEYS))})")
        if not isinstance(value, CLUSTER_KEYS[key]):
            raise SweepError(f"{path}: cluster.{key}: expected "
                             f"{CLUSTER_KEYS[key].__name__}, got {value!r}")
    if "base" in cl:
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
    cl.setdefault("backend", "local")
    if cl["backend"] not in BACKENDS:
        raise SweepError(f"{path}: cluster.backend: {cl['backend']!r} "
                         f"(one of: {', '.join(BACKENDS)})")
    cl.setdefault("load_flags", [])
    cl.setdefault("push", False)
    if cl["backend"] in ("ssh", "slurm") and "base" not in cl:
        needs_cluster = any(t != "local" for t in every(sw, "transports"))
        if needs_cluster:
            raise SweepError(f"{path}: cluster.base: tcp/rdma on the {cl['backend']} "
                             "backend need a base cluster file (hosts, ssh or slurm settings)")
    sw["cluster"] = cl
    sw["graphs"] = [resolve_graph(g, path) for g in sw["graphs"]]
    sw["path"] = path
    return sw


GENERATOR = re.compile(r"(kron|urand):\d+(:\d+)?")
# dmg flags that shape the stored graph (tools/graph_flags.cc, less --graph,
# --threads, --layout_memory_nodes): given in `flags`, they go to the load too.
GRAPH_FLAGS = ("--seed", "--symmetrize", "--drop_self_loops", "--drop_parallel_arcs",
               "--relabel", "--block_size", "--compress")


def graph_flags(sw):
    return [f for f in sw["flags"] if f.split("=")[0] in GRAPH_FLAGS]


def resolve_graph(spec, path):
    """A generator spec as is; a file: $VARS expanded, relative to the cwd,
    else to $DMG_GRAPHS_DIR (default ../shared/graphs of the repository)."""
    if GENERATOR.fullmatch(spec):
        return spec
    s = os.path.expanduser(os.path.expandvars(spec))
    if os.path.isabs(s):
        if not os.path.exists(s):
            raise SweepError(f"{path}: graphs: {spec}: no such file")
        return s
    candidates = [Path.cwd() / s,
                  Path(os.environ.get("DMG_GRAPHS_DIR", REPO.parent / "shared" / "graphs")) / s]
    for c in candidates + [c.with_name(c.name + ext) for c in candidates
                           for ext in (".el", ".wel")]:   # "road-NY" as scaling.py took it
        if c.exists():
            return str(c.resolve())
    raise SweepError(f"{path}: graphs: {spec}: not found here nor in "
                     f"{candidates[1].parent} ($DMG_GRAPHS_DIR)")


def graph_label(spec):
    if GENERATOR.fullmatch(spec):
        return spec
    return os.path.basename(spec)


def slug(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "", text.replace(":", "")) or "x"


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
                runs.append(dict(graph=graph, graph_label=graph_label(graph),
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

def free_ports(n):
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)   # a JSON string is a valid TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} as TOML")


def toml_dump(doc):
    lines = []
    for k, v in doc.items():
        if not isinstance(v, (dict, list)) or (isinstance(v, list) and not
                                                any(isinstance(x, dict) for x in v)):
            lines.append(f"{k} = {toml_value(v)}")
    for k, v in doc.items():
        if isinstance(v, dict):
            lines.append(f"\n[{k}]")
            lines += [f"{kk} = {toml_value(vv)}" for kk, vv in v.items()]
    for k, v in doc.items():
        if isinstance(v, list) and any(isinstance(x, dict) for x in v):
            for table in v:
                lines.append(f"\n[[{k}]]")
                lines += [f"{kk} = {toml_value(vv)}" for kk, vv in table.items()]
    return "\n".join(lines) + "\n"


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
        ports = free_ports(m)
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


class Cluster:
    """One derived cluster file and its lifecycle through deploy/cluster."""

    def __init__(self, sw, args, work, transport, m, logs):
        self.sw, self.args = sw, args
        self.tag = f"sw{os.getpid() % 100000}{transport[0]}{m}"
        self.dir = work / self.tag
        self.dir.mkdir(parents=True, exist_ok=True)
        self.file = self.dir / "cluster.toml"
        self.file.write_text(f"# Written by deploy/experiments/sweep.py for {sw['path']}\n"
                             + toml_dump(cluster_doc(sw, transport, m, self.tag)))
        self.state = self.dir / "state"
        self.logs = logs
        self.backend = sw["cluster"]["backend"]
        self.is_up = False

    def argv(self, *cmd):
        return [sys.executable, str(CLUSTER), "--dmg", self.args.dmg, "--state",
                str(self.state), str(self.file)] + list(cmd)

    def call(self, log_name, *cmd, timeout=600):
        log = self.logs / log_name
        rc, _ = run_logged(self.argv(*cmd), log, timeout)
        if rc != 0:
            last = tail_line(log)
            raise RuntimeError(f"`cluster {' '.join(cmd[:2])}` failed (exit {rc}): {last}")

    def up(self, graph):
        if self.backend == "slurm":
            return   # the batch job of each run brings its cluster up and loads
        if self.sw["cluster"].get("push") and self.backend == "ssh":
            self.call(f"{self.tag}-push.log", "push")
        self.is_up = True   # before: a half-made cluster is taken down too
        self.call(f"{self.tag}-up.log", "up")
        self.call(f"{self.tag}-load-{slug(graph_label(graph))}.log", "load", graph,
                  *graph_flags(self.sw),
                  *self.sw["cluster"]["load_flags"])

    def run_argv(self, flags):
        return self.argv("run", *flags)

    def down(self):
        if not self.is_up and self.backend != "slurm":
            return
        self.is_up = False
        # A second Ctrl-C must not cut `down` short: it would leave daemons.
        sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        old = [signal.signal(s, signal.SIG_IGN) for s in sigs]
        try:
            rc, _ = run_logged(self.argv("down"), self.logs / f"{self.tag}-down.log", 120)
        finally:
            for s, h in zip(sigs, old):
                signal.signal(s, h)
        if rc != 0:
            say(f"warning: `cluster down` for {self.tag} failed: "
                f"{tail_line(self.logs / f'{self.tag}-down.log')}")


# ---------------------------------------------------------------- running

def run_logged(argv, log, timeout):
    """Runs argv with its output in log; kills its whole process group on a
    timeout or an interrupt. Returns (rc or None on timeout, seconds)."""
    start = time.time()
    with open(log, "ab") as out:
        out.write(f"$ {shlex.join(argv)}\n".encode())
        out.flush()
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(p)
            out.write(f"[sweep: killed after {timeout} s]\n".encode())
            return None, time.time() - start
        except BaseException:
            kill_group(p)
            raise
    return rc, time.time() - start


def kill_group(p):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            return
        try:
            p.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def tail_line(log):
    try:
        lines = [l for l in Path(log).read_text(errors="replace").splitlines()
                 if l.strip() and not l.startswith("$ ")]
    except FileNotFoundError:
        return ""
    errs = [l for l in lines if "error" in l.lower()]
    return (errs or lines or [""])[-1].strip()[:300]


CSV_FIELDS = [
    "sweep", "graph", "algorithm", "transport", "backend", "compute_nodes",
    "memory_nodes", "cache", "cache_policy", "threads", "trials", "status",
    "time_median_s", "time_min_s", "time_max_s", "time_average_s",
    "remote_bytes_median", "remote_bytes_min", "remote_bytes_max",
    "bytes_read_median", "bytes_written_median", "round_trips_median",
    "supersteps_median", "cache_bound_bytes", "cache_peak_bytes", "cache_hits",
    "cache_misses", "cache_bytes_fetched", "vertices", "arcs", "load_seconds",
    "threads_used", "verify", "result", "wall_s", "summary_json", "log", "command",
    # Added with the update_mode/direction grid, repetitions and stats_json
    # (new columns go last: scripts that index columns keep working).
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
    image = work / f"{slug(graph_label(graph))}-m{m}.img"
    log = logs / f"image-{image.stem}.log"
    argv = [args.dmg, "load", f"--graph={graph}", f"--image={image}",
            f"--layout_memory_nodes={m}"] + graph_flags(sw)
    if args.dry_run:
        print(shlex.join(argv))
        return image
    rc, _ = run_logged(argv, log, max(600, sw["timeout_s"]))
    if rc != 0:
        raise RuntimeError(f"`dmg load --image` of {graph_label(graph)} failed "
                           f"(exit {rc}): {tail_line(log)}")
    return image


def run_one(sw, args, run, index, out, cluster, image=None, rep=0):
    name = (f"{index:03d}-{slug(run['graph_label'])}-{run['algorithm']}-{run['transport']}"
            f"-c{run['compute_nodes']}-m{run['memory_nodes']}-{slug(run['cache'])}"
            f"-{run['cache_policy']}-t{slug(str(run['threads']))}")
    if (run["update_mode"], run["direction"]) != ("auto", "auto"):
        name += f"-{run['update_mode']}-{run['direction']}"
    if sw["repeats"] > 1:
        name += f"-r{rep}"
    summary = out / "summaries" / f"{name}.json"
    stats_file = out / "stats" / f"{name}.json"
    log = out / "logs" / f"{name}.log"
    flags = run_flags(sw, run) + [f"--summary_json={summary}"]
    if sw["stats_json"]:
        flags.append(f"--stats_json={stats_file}")
    if run["transport"] == "local":
        argv = [args.dmg, "run", f"--graph={image or run['graph']}",
                f"--layout_memory_nodes={run['memory_nodes']}"] + flags
        backend = "embedded"
    else:
        # --graph names the graph in the summary (and is what --verify and a
        # slurm job load); the run itself reads the loaded memory nodes.
        argv = cluster.run_argv(flags + [f"--graph={run['graph']}"])
        backend = sw["cluster"]["backend"]
    row = {k: "" for k in CSV_FIELDS}
    row.update(sweep=sw["name"], graph=run["graph_label"], algorithm=run["algorithm"],
               transport=run["transport"], backend=backend,
               compute_nodes=run["compute_nodes"], memory_nodes=run["memory_nodes"],
               cache=run["cache"], cache_policy=run["cache_policy"], threads=run["threads"],
               trials=sw["trials"], summary_json=str(summary.relative_to(out)),
               log=str(log.relative_to(out)), command=shlex.join(argv),
               experiment=run["experiment"], update_mode=run["update_mode"],
               direction=run["direction"], rep=rep)
    if run["update_mode"] == "pull" and run["direction"] == "push":
        # A pull sends no updates: dmg refuses the pair; recorded, not run.
        row.update(status="skipped", summary_json="", log="", command="")
        return None if args.dry_run else row
    if args.dry_run:
        print(shlex.join(argv))
        return None
    rc, wall = run_logged(argv, log, sw["timeout_s"])
    row["wall_s"] = f"{wall:.3f}"
    if rc is None:
        row["status"] = f"timeout ({sw['timeout_s']} s)"
    elif rc == 2 and "must be" in log.read_text(errors="replace"):
        # A --update_mode/--direction value this dmg does not know.
        row["status"] = f"unsupported: {tail_line(log)}"
    elif rc != 0:
        row["status"] = f"error (exit {rc}): {tail_line(log)}"
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
    t = row["time_median_s"]
    modes = "" if (run["update_mode"], run["direction"]) == ("auto", "auto") else \
        f" {run['update_mode']}/{run['direction']}"
    say(f"{index:3d} {run['algorithm']} {run['graph_label']} {run['transport']} "
        f"C={run['compute_nodes']} M={run['memory_nodes']} cache={run['cache']} "
        f"{run['cache_policy']} threads={run['threads']}{modes}: {row['status']}"
        + (f", median {t:.4g} s, remote {row['remote_bytes_median'] / 1e6:.3g} MB"
           if row["status"] == "ok" else f" (log {log})"))
    return row


def sweep(sw, args):
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else \
        Path(os.environ.get("DMG_EXPERIMENTS_DIR", Path.home() / "dmg-experiments")) / \
        f"{sw['name']}-{stamp}"
    out = out.resolve()
    groups = plan(sw)
    total = sum(len(r) for _, r in groups) * sw["repeats"]
    # Every cluster file can be made (enough memory nodes in the base) before
    # anything runs, so that a bad sweep is exit 2 at once, not half way.
    for _, g in grids(sw):
        for transport, m in itertools.product(g["transports"], g["memory_nodes"]):
            if transport != "local":
                cluster_doc(sw, transport, m, "check")
    if args.dry_run:
        say(f"{total} runs (dry run: the commands; cluster files are written at run time)")
        work = Path(tempfile.mkdtemp(prefix="dmg-sweep-"))
        index = 0
        try:
            for (transport, m, graph), runs in groups:
                cl = image = None
                if transport == "local" and sw["prebuild_images"]:
                    image = build_image(sw, args, work, graph, m, work)
                if transport != "local":
                    cl = Cluster(sw, args, work, transport, m, work)
                    print(f"# cluster {cl.tag} ({sw['cluster']['backend']}, {transport}, "
                          f"{m} memory nodes): up; load {graph}; runs; down")
                for run in runs:
                    index += 1
                    run_one(sw, args, run, index, Path("OUT"), cl, image)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    if not os.access(args.dmg, os.X_OK):
        raise SweepError(f"dmg: {args.dmg} is not an executable (build it, or give --dmg)")
    for sub in ("summaries", "logs") + (("stats",) if sw["stats_json"] else ()):
        (out / sub).mkdir(parents=True, exist_ok=True)
    say(f"{sw['name']}: {total} runs x {sw['trials']} trials; output in {out}")
    csv_path = out / "results.csv"
    rows = []
    work = Path(tempfile.mkdtemp(prefix="dmg-sweep-"))
    cluster = None
    index = 0
    try:
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=CSV_FIELDS)
            w.writeheader()
            for (transport, m, graph), runs in groups:
                cluster = None
                done = 0
                # Repetitions interleaved: every run of the group once before
                # any runs again (the fastest counts in summary.txt).
                todo = [(rep, run) for rep in range(sw["repeats"]) for run in runs
                        if rep == 0 or (run["update_mode"], run["direction"]) !=
                        ("pull", "push")]
                try:
                    image = None
                    if transport != "local":
                        cluster = Cluster(sw, args, work, transport, m, out / "logs")
                        say(f"cluster {cluster.tag}: {sw['cluster']['backend']}, {transport}, "
                            f"{m} memory node(s), graph {graph_label(graph)}")
                        cluster.up(graph)
                    elif sw["prebuild_images"]:
                        image = build_image(sw, args, work, graph, m, out / "logs")
                    for rep, run in todo:
                        index += 1
                        row = run_one(sw, args, run, index, out, cluster, image, rep)
                        rows.append(row)
                        w.writerow(row)
                        f.flush()
                        done += 1
                except RuntimeError as e:
                    # The cluster did not come up or load: its runs are errors.
                    say(f"error: {e}")
                    for rep, run in todo[done:]:
                        index += 1
                        row = {k: "" for k in CSV_FIELDS}
                        row.update(sweep=sw["name"], graph=run["graph_label"],
                                   algorithm=run["algorithm"], transport=transport,
                                   backend=sw["cluster"]["backend"],
                                   compute_nodes=run["compute_nodes"], memory_nodes=m,
                                   cache=run["cache"], cache_policy=run["cache_policy"],
                                   threads=run["threads"], trials=sw["trials"],
                                   status=f"error: {e}", experiment=run["experiment"],
                                   update_mode=run["update_mode"],
                                   direction=run["direction"], rep=rep)
                        rows.append(row)
                        w.writerow(row)
                    f.flush()
                finally:
                    if cluster:
                        cluster.down()
                        cluster = None
                    if image:
                        Path(image).unlink(missing_ok=True)
    finally:
        if cluster:
            cluster.down()
        shutil.rmtree(work, ignore_errors=True)
    say(f"wrote {csv_path} ({len(rows)} rows)")
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

def load_csv(path):
    rows = list(csv.DictReader(open(path, newline="")))
    return rows


def num(r, k):
    return float(r[k]) if r.get(k) not in (None, "") else None


def cache_axis(rows):
    """x values for the cache plots: % of the store image when every size is
    a fraction; else the bound dmg reports, in MiB. Unbounded: None."""
    labels = {r["cache"] for r in rows}
    if all(l.endswith("%") or l == "unbounded" for l in labels):
        return "cache size (% of the store image)", \
            lambda r: None if r["cache"] == "unbounded" else float(r["cache"][:-1])
    return "cache bound (MiB, as dmg reports it)", \
        lambda r: None if r["cache"] == "unbounded" or not num(r, "cache_bound_bytes") \
        else num(r, "cache_bound_bytes") / 2 ** 20


DIMS = ("compute_nodes", "memory_nodes", "cache", "cache_policy", "threads", "update_mode",
        "direction")
DIM_LABEL = {"compute_nodes": "C", "memory_nodes": "M", "cache": "cache",
             "cache_policy": "", "threads": "threads"}


def dim_order(dim, value):
    """Sorts series by size, not as strings ("5%" before "25%")."""
    if dim == "cache":
        if value == "unbounded":
            return (2, math.inf, value)
        m = re.match(r"[0-9.]+", value)
        return (0 if value.endswith("%") else 1, float(m.group()) if m else 0, value)
    try:
        return (0, float(value), "")
    except ValueError:
        return (0, 0, str(value))


def describe(r, dims):
    parts = []
    for d in dims:
        v = report.get(r, d)
        if d == "compute_nodes":
            parts.append(f"{v} compute node{'s' if str(v) != '1' else ''}")
        elif d == "memory_nodes":
            parts.append(f"{v} memory node{'s' if str(v) != '1' else ''}")
        elif d == "threads":
            parts.append("threads: all cores" if str(v) == "0" else
                         "threads: cores / compute nodes" if str(v).startswith("split") else
                         f"{v} thread{'s' if str(v) != '1' else ''}")
        elif d == "cache":
            parts.append(f"cache {v}")
        elif d in ("update_mode", "direction"):
            parts.append(f"{d} {v}")
        else:
            parts.append(str(v))
    return ", ".join(parts)


def make_plots(rows, out, name):
    if not rows:
        return []
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say("matplotlib missing (Debian: apt-get install python3-matplotlib): no plots; "
            f"`{Path(__file__).name} --replot {out / 'results.csv'}` makes them later")
        return []
    made = []
    # The sweep's grid (the ablation has its own plot), fastest repetition.
    ok_rows = [r for r in report.best_rows(rows) if r["status"] == "ok" and
               report.get(r, "experiment") == "sweep"]
    keys = sorted({(r["graph"], r["algorithm"], r["transport"]) for r in ok_rows})
    for graph, algo, transport in keys:
        grp = [r for r in ok_rows if (r["graph"], r["algorithm"], r["transport"]) ==
               (graph, algo, transport)]
        backend = grp[0]["backend"]
        trials = grp[0]["trials"]
        where = f"{algo} on {graph}, transport {transport}" + \
            (f" ({backend} backend)" if transport != "local" else " (embedded cluster)")
        for axis, kind, title in (
                ("cache", "cache", "time and remote bytes vs cache size"),
                ("compute_nodes", "compute", "speedup vs compute nodes"),
                ("memory_nodes", "memory", "time and remote bytes vs memory nodes")):
            values = {report.get(r, axis) for r in grp}
            if len(values) < 2:
                continue
            others = [d for d in DIMS if d != axis]
            varying = [d for d in others if len({report.get(r, d) for r in grp}) > 1]
            fixed = [d for d in others if d not in varying]
            series = {}
            for r in grp:
                series.setdefault(tuple(report.get(r, d) for d in varying), []).append(r)
            nseries = len(series)
            unbounded = sum(1 for rs in series.values() if any(
                r["cache"] == "unbounded" for r in rs)) if axis == "cache" else 0
            entries = (nseries if varying else 0) + unbounded + \
                (1 if axis == "compute_nodes" else 0)
            ncol = 1 if entries <= 2 else 2
            legend_in = (0.2 + 0.2 * math.ceil(entries / ncol)) if entries else 0
            height = 4.4 + legend_in
            fig, axes = plt.subplots(1, 2, figsize=(11, height))
            if axis == "cache":
                xlabel, xof = cache_axis(grp)
            else:
                xlabel = "compute nodes" if axis == "compute_nodes" else "memory nodes"
                xof = lambda r, a=axis: float(r[a])
            markers = "osD^v<>ph*"
            for i, (skey, srows) in enumerate(sorted(
                    series.items(), key=lambda kv: [dim_order(d, v) for d, v in
                                                    zip(varying, kv[0])])):
                color, marker = f"C{i % 10}", markers[(i // 10 + i) % len(markers)]
                label = describe(dict(zip(varying, skey)), varying) or None
                pts = sorted(((xof(r), r) for r in srows if xof(r) is not None),
                             key=lambda p: p[0])
                unb = [r for r in srows if xof(r) is None]
                xs = [x for x, _ in pts]
                med = [num(r, "time_median_s") for _, r in pts]
                lo = [num(r, "time_median_s") - num(r, "time_min_s") for _, r in pts]
                hi = [num(r, "time_max_s") - num(r, "time_median_s") for _, r in pts]
                mb = [num(r, "remote_bytes_median") / 1e6 for _, r in pts]
                mblo = [(num(r, "remote_bytes_median") - num(r, "remote_bytes_min")) / 1e6
                        for _, r in pts]
                mbhi = [(num(r, "remote_bytes_max") - num(r, "remote_bytes_median")) / 1e6
                        for _, r in pts]
                style = dict(color=color, marker=marker, capsize=3, label=label)
                if axis == "compute_nodes":
                    sp = [med[0] / m for m in med]
                    axes[0].plot(xs, sp, "-", color=color, marker=marker, label=label)
                    if nseries <= 4:
                        for x, v in zip(xs, sp):
                            axes[0].annotate(f"{v:.2f}x", (x, v), textcoords="offset points",
                                             xytext=(5, 4), fontsize=7, color=color)
                    axes[1].errorbar(xs, med, yerr=[lo, hi], fmt="-", **style)
                elif xs:
                    axes[0].errorbar(xs, med, yerr=[lo, hi], fmt="-", **style)
                    axes[1].errorbar(xs, mb, yerr=[mblo, mbhi], fmt="-", **style)
                for r in unb:   # cache plots: the unbounded run as a level
                    axes[0].axhline(num(r, "time_median_s"), color=color, ls=":",
                                    label=f"{label + ', ' if label else ''}unbounded cache")
                    axes[1].axhline(num(r, "remote_bytes_median") / 1e6, color=color, ls=":")
            if axis == "compute_nodes":
                xs_all = sorted({float(v) for v in values})
                axes[0].plot(xs_all, [x / xs_all[0] for x in xs_all], "--", color="gray",
                             lw=0.8, label="ideal (linear)")
                axes[0].set_ylabel(f"speedup (median time at {xs_all[0]:g} / at x)")
                axes[1].set_ylabel("time (s): median, bars min-max")
            else:
                axes[0].set_ylabel("time (s): median, bars min-max")
                axes[1].set_ylabel("remote MB read + written: median, bars min-max")
            for ax in axes:
                ax.set_xlabel(xlabel)
                ax.grid(True, which="both", alpha=0.3)
                if axis == "cache":
                    ax.set_xscale("log")
                    if xlabel.startswith("cache size (%"):
                        xs_all = sorted({xof(r) for r in grp if xof(r) is not None})
                        ax.set_xticks(xs_all)
                        ax.set_xticklabels([f"{x:g}" for x in xs_all])
                        ax.minorticks_off()
                    else:
                        from matplotlib.ticker import LogLocator, ScalarFormatter
                        ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
                        ax.xaxis.set_major_formatter(ScalarFormatter())
                        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
                else:
                    ax.set_xticks(sorted({float(v) for v in values}))
                # A range over 30x (a baseline 30x slower, say): a log axis, so
                # that the small values are not flattened to the floor.
                ys = [y for line in ax.get_lines() for y in line.get_ydata()
                      if isinstance(y, (int, float)) and y > 0]
                if ys and max(ys) / min(ys) > 30 and not (axis == "compute_nodes" and
                                                          ax is axes[0]):
                    ax.set_yscale("log")
                else:
                    ax.set_ylim(bottom=0)
            handles, labels = axes[0].get_legend_handles_labels()
            if handles:
                fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8,
                           frameon=False)
            sub = describe(grp[0], fixed)
            per_point = f"each point: median of {trials} trials" if str(trials) != "1" \
                else "1 trial per point"
            fig.suptitle(f"{where}: {title}\n{sub}{'; ' if sub else ''}{per_point} "
                         f"(sweep {name})", fontsize=10)
            fig.tight_layout(rect=(0, legend_in / height, 1, 1))
            path = out / f"{kind}-{slug(graph)}-{algo}-{transport}.png"
            fig.savefig(path, dpi=100)
            plt.close(fig)
            made.append(path)
            say(f"wrote {path}")
    for path in report.plot_ablation(plt, rows, out, slug):
        made.append(path)
        say(f"wrote {path}")
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
    p.add_argument("--dmg", default=os.environ.get("DMG_BIN",
                                                   str(REPO / "build/release/tools/dmg")),
                   help="the dmg binary (default $DMG_BIN, else build/release/tools/dmg)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a sweep key (TOML value; lists also as a,b,c): "
                   "--set graphs=kron:18 --set cluster.backend=netns")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.add_argument("--replot", metavar="CSV", help="only remake the plots from a results.csv")
    a = p.parse_args(argv)
    a.dmg = str(Path(a.dmg).resolve()) if os.path.sep in a.dmg else a.dmg

    # SIGTERM (a batch system, `kill`), SIGHUP (the terminal went away) unwind
    # like Ctrl-C: clusters go down, temporary files go.
    def on_term(signum, frame):
        raise KeyboardInterrupt
    # SIGINT explicitly too: a shell starts background jobs with it ignored.
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, on_term)
    try:
        if a.replot:
            rows = load_csv(a.replot)
            out = Path(a.out or Path(a.replot).parent)
            out.mkdir(parents=True, exist_ok=True)
            made = make_plots(rows, out, rows[0]["sweep"] if rows else "")
            write_summary(rows, out)
            return 0 if made or not rows else 1
        if not a.sweep:
            raise SweepError("give a sweep file (or --replot CSV)")
        return sweep(read_sweep(a.sweep, a.set), a)
    except SweepError as e:
        print(f"sweep: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("sweep: interrupted; clusters taken down, temporary files removed",
              file=sys.stderr)
        return 130
    except BrokenPipeError:   # `--dry-run | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
