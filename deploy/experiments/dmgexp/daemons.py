"""Memory-node daemons for the experiment scripts, started one way:

- MemoryNode: one `dmg memory-node` on loopback serving a store image
  (the A/B and baseline comparisons), ready when `dmg status` says so;
- Cluster: a cluster file's memory nodes through deploy/cluster (up, load,
  run, down) on any of its backends (the sweep runner).

A MemoryNode stops on stop() or on leaving its `with` block, a Cluster on
down(); both also on Ctrl-C, SIGTERM, SIGHUP (procs.unwind_on_signals, in
the finally blocks of their users) and at the script's exit."""
import atexit
import json
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import graphs, procs

REPO = Path(__file__).resolve().parents[3]
CLUSTER = REPO / "deploy" / "cluster"


class DaemonError(RuntimeError):
    """A memory node that did not come up, or a cluster command that failed."""


def free_ports(n, host="127.0.0.1"):
    """n ports free now (a fixed 7400+i may be someone else's on a shared host)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class MemoryNode:
    """`dmg memory-node --image=IMAGE` on host:port (default: a free port),
    in its own process group."""

    def __init__(self, dmg, image, node_id=0, transport="tcp", host="127.0.0.1",
                 port=None, log=None, wait_s=60):
        self.dmg, self.transport = dmg, transport
        self.addr = f"{host}:{port or free_ports(1, host)[0]}"
        argv = [dmg, "memory-node", f"--listen={self.addr}", f"--transport={transport}",
                f"--image={image}", f"--node_id={node_id}"]
        # A file, not a pipe: a pipe nobody reads would stall a chatty daemon.
        self.log = open(log, "a+b") if log else tempfile.TemporaryFile()
        self.proc = procs.start(argv, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready(wait_s)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, wait_s):
        """Ready is what the node answers (`dmg status --require_store`),
        never a guess from its log or a sleep."""
        deadline = time.time() + wait_s
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                err = self.log.read().decode(errors="replace").strip()[-500:]
                raise DaemonError(f"memory node {self.addr} exited ({self.proc.returncode})"
                                  + (f": {err}" if err else ""))
            r = subprocess.run([self.dmg, "status", f"--memory_nodes={self.addr}",
                                "--require_store", "--wait_ms=500"],
                               capture_output=True, text=True)
            if r.returncode == 0:
                return
            if r.returncode == 2:   # refused: asking again will not help
                raise DaemonError(f"`dmg status` of {self.addr}: {r.stderr.strip()}")
        raise DaemonError(f"memory node {self.addr} not ready after {wait_s} s")

    @property
    def port(self):
        return int(self.addr.rsplit(":", 1)[1])

    def flags(self):
        """What `dmg run` needs to use it."""
        return [f"--transport={self.transport}", f"--memory_nodes={self.addr}"]

    def stop(self):
        procs.stop(self.proc, grace=30)
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


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
    """A cluster file: keys, then [tables], then [[arrays of tables]]."""
    is_tables = lambda v: isinstance(v, list) and any(isinstance(x, dict) for x in v)
    lines = [f"{k} = {toml_value(v)}" for k, v in doc.items()
             if not isinstance(v, dict) and not is_tables(v)]
    for k, v in doc.items():
        if isinstance(v, dict):
            lines += [f"\n[{k}]"] + [f"{kk} = {toml_value(vv)}" for kk, vv in v.items()]
    for k, v in doc.items():
        if is_tables(v):
            for table in v:
                lines += [f"\n[[{k}]]"] + [f"{kk} = {toml_value(vv)}"
                                           for kk, vv in table.items()]
    return "\n".join(lines) + "\n"


class Cluster:
    """One cluster file's lifecycle through deploy/cluster. slurm: a cluster
    lives for one batch job, so there is no up or load; each run submits
    one, which loads --graph itself."""

    def __init__(self, file, dmg, state, logs, backend, push=False, load_flags=()):
        self.file, self.dmg, self.state, self.logs = Path(file), dmg, Path(state), Path(logs)
        self.tag = self.file.parent.name
        self.backend, self.push, self.load_flags = backend, push, list(load_flags)
        self.is_up = False
        self.rerun = None   # write_rerun's script

    def argv(self, *cmd):
        return [sys.executable, str(CLUSTER), "--dmg", self.dmg, "--state",
                str(self.state), str(self.file)] + list(cmd)

    def call(self, log_name, *cmd, timeout=600):
        log = self.logs / log_name
        rc, _ = procs.run_logged(self.argv(*cmd), log, timeout)
        if rc != 0:
            raise DaemonError(f"`cluster {' '.join(cmd[:2])}` failed (exit {rc}): "
                              f"{procs.tail_line(log)}")

    def up(self, graph, graph_flags=()):
        """The memory nodes, with graph loaded (graph_flags shape it)."""
        if self.backend == "slurm":
            return
        if self.push and self.backend == "ssh":
            self.call(f"{self.tag}-push.log", "push")
        self.is_up = True   # set first: a half-made cluster is taken down too
        atexit.register(self.down)
        self.call(f"{self.tag}-up.log", "up")
        self.call(f"{self.tag}-load-{graphs.slug(graphs.label(graph))}.log", "load", graph,
                  *graph_flags, *self.load_flags)

    def run_argv(self, flags):
        return self.argv("run", *flags)

    def down(self):
        if not self.is_up and self.backend != "slurm":
            return
        self.is_up = False
        log = self.logs / f"{self.tag}-down.log"
        with procs.signals_held():
            rc, _ = procs.run_logged(self.argv("down"), log, 120)
        if rc != 0:
            print(f"warning: `cluster down` for {self.tag} failed: {procs.tail_line(log)}",
                  file=sys.stderr)

    def write_rerun(self, graph_flags=()):
        """A script beside the cluster file that reruns one run on its own:
        `rerun GRAPH RUN_FLAGS...` brings the memory nodes up, loads GRAPH,
        runs, and takes them down whatever happened. Returns its path."""
        head = " ".join(shlex.quote(a) for a in self.argv()[:-3])   # python cluster --dmg D
        cluster = (f'{head} --state "${{TMPDIR:-/tmp}}/dmg-rerun-{self.tag}" '
                   f'"$here/{self.file.name}"')
        load = "".join(" " + shlex.quote(f) for f in list(graph_flags) + self.load_flags)
        steps = 'cluster run "$@"' if self.backend == "slurm" else \
            f'cluster up && cluster load "$graph"{load} && cluster run "$@"'
        path = self.file.parent / "rerun"
        path.write_text(RERUN.format(steps=steps, cluster=cluster))
        path.chmod(0o755)
        self.rerun = path
        return path


RERUN = """#!/bin/sh
# Reruns one run of a sweep on this folder's cluster file, on its own:
#   rerun GRAPH RUN_FLAGS...
# up, load GRAPH, `deploy/cluster ... run RUN_FLAGS`, then down, also after
# a failure or Ctrl-C. Written by deploy/experiments/sweep.py.
[ $# -ge 1 ] || {{ echo "usage: $0 GRAPH RUN_FLAGS..." >&2; exit 2; }}
here=$(cd "$(dirname "$0")" && pwd)
graph=$1; shift
cluster() {{ {cluster} "$@"; }}
trap 'cluster down >/dev/null 2>&1' EXIT
trap 'exit 130' INT TERM HUP
{steps}
"""
