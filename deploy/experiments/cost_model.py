#!/usr/bin/env python3
"""Cost model for DMG jobs on N compute x M memory nodes (issue 10, item 7).

Reads `dmg run ... --stats_json=FILE` output and predicts, per superstep, the
time of the same job on a target cluster (NIC latency/bandwidth, cores per
compute node), naming the resource that bounds each superstep. The model is
deliberately simple; docs/COST_MODEL.md gives every formula and assumption.

  cost_model.py --stats s1.json [--stats2 s2.json] --compute 1,2,4,8,16 \
      --memory 1,2,4 --nic_gbps 100 --nic_us 2 --cores 32 [--scale_edges F]
  cost_model.py --stats s.json --self_check
  cost_model.py --validate "kron:20 PR=c1.json,c2.json,c4.json" \
      [--validate "road-NY BFS@road-NY.el=..."] [--project 8,16,64] [--memory 1,4,16]

--validate models the per-node byte structure of multi-node runs (edges and
owners' writes split over the nodes, each node READing the changed lines
it references on the others, exchanges, each its range of the result), predicts
the 2- and 4-node runs of the same job from its 1-node run (and the
4-node run from the 1- and 2-node runs), prints predicted vs measured as
one markdown table, and projects --project compute nodes onto the fabric.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmgexp import graphs, plots, stats  # noqa: E402  (deploy/experiments/dmgexp)
from dmgexp.stats import nbytes  # noqa: E402


def load(path):
    d = stats.load(path)
    if not d.get("supersteps"):
        sys.exit("%s: no supersteps" % path)
    return d


def node0_totals(d):
    nodes = d.get("nodes") or []
    return nodes[0]["ops"] if nodes else d["totals"]


def job_ratio(d, f):
    """job_totals / node-0 totals for figure f (1 on a single node)."""
    jt = d.get("job_totals") or d["totals"]
    n0 = node0_totals(d)
    a, b = f(jt), f(n0)
    return a / b if b else float(d.get("compute_nodes", 1) or 1)


class Run:
    """Per-superstep job-level figures of one measured run."""

    def __init__(self, d, here_rtt_us=None, here_bpus=None):
        self.d = d
        self.n0 = int(d.get("compute_nodes", 1) or 1)
        self.threads = int(d["threads"])
        self.arcs = int(d["arcs"])
        nodes = d.get("nodes") or []
        # Transport parameters of this machine: the run's sample, else given.
        rtt = d.get("transport_rtt_us", 0.0) or 0.0
        bpus = d.get("transport_bytes_per_us", 0.0) or 0.0
        self.rtt_us = here_rtt_us if here_rtt_us is not None else rtt
        self.bpus = here_bpus if here_bpus is not None else bpus
        rb = job_ratio(d, nbytes)
        rr = job_ratio(d, lambda o: o.get("round_trips", 0))
        # Busy share of node 0 (per-superstep busy time is not recorded:
        # node 0's busy/seconds is applied to every superstep).
        if nodes:
            n0 = nodes[0]
            self.busy_share = n0["busy_seconds"] / n0["seconds"] if n0["seconds"] else 1.0
            busy0 = n0["busy_seconds"]
            self.busy_ratio = sum(n["busy_seconds"] for n in nodes) / busy0 if busy0 else self.n0
            self.rounds = max(n["rounds"] for n in nodes)
        else:
            self.busy_share, self.busy_ratio, self.rounds = 1.0, 1.0, 0
        self.steps = []
        for s in d["supersteps"]:
            o = s["ops"]
            b0, rt0 = nbytes(o), o.get("round_trips", 0)
            busy = s["seconds"] * self.busy_share
            transport = (rt0 * self.rtt_us + (b0 / self.bpus if self.bpus else 0.0)) / 1e6
            cpu0 = max(busy - transport, 0.0)
            self.steps.append({
                "index": s["index"],
                "seconds": s["seconds"],
                "direction": s.get("direction", ""),
                "mode": s.get("update_mode", ""),
                "max_outstanding": s.get("max_outstanding", 0),
                "job_bytes": b0 * rb,
                "job_rt": rt0 * rr,
                # CPU work of the whole job in this superstep, in
                # core-seconds at this machine's speed.
                "cpu_core_s": cpu0 * self.busy_ratio * self.threads,
            })

    def measured_seconds(self):
        return sum(s["seconds"] for s in self.steps)


class Model:
    def __init__(self, base, second=None, scale_edges=1.0, outstanding="1"):
        self.base, self.second = base, second
        self.F = scale_edges
        self.outstanding = outstanding
        self.notes = []
        self.slope_b = self.slope_r = None
        if second is not None:
            if second.n0 == base.n0:
                sys.exit("--stats2 must come from a different compute-node count")
            dn = second.n0 - base.n0
            if len(second.steps) == len(base.steps):
                self.slope_b = [(t["job_bytes"] - s["job_bytes"]) / dn
                                for s, t in zip(base.steps, second.steps)]
                self.slope_r = [(t["job_rt"] - s["job_rt"]) / dn
                                for s, t in zip(base.steps, second.steps)]
                self.notes.append("bytes and round trips: linear in N per superstep "
                                  "(two measured points, N=%d and N=%d)" % (base.n0, second.n0))
            else:
                jb = sum(s["job_bytes"] for s in base.steps)
                jb2 = sum(s["job_bytes"] for s in second.steps)
                jr = sum(s["job_rt"] for s in base.steps)
                jr2 = sum(s["job_rt"] for s in second.steps)
                gb = (jb2 - jb) / dn / jb if jb else 0.0
                gr = (jr2 - jr) / dn / jr if jr else 0.0
                self.slope_b = [s["job_bytes"] * gb for s in base.steps]
                self.slope_r = [s["job_rt"] * gr for s in base.steps]
                self.notes.append("superstep counts differ (%d vs %d): job-level growth "
                                  "spread over supersteps" % (len(base.steps), len(second.steps)))
        else:
            self.notes.append("one run only: job bytes and round trips held at the measured "
                              "N=%d values (optimistic for N>%d)" % (base.n0, base.n0))
            if base.n0 == 1:
                self.notes.append("1-node run: no exchange round trips known; pass --stats2 "
                                  "from a 2-node run of the same job")
        # Exchange rounds per superstep (recorded per node only: spread evenly).
        self.rounds_s = 0.0
        if second is not None and base.n0 == 1:
            self.rounds_s = second.rounds / float(len(second.steps))
            self.slope_r = None
            self.notes.append("round trips: 1-node data round trips / N + %.1f exchange rounds "
                              "per superstep x (4 + N-1) (polls of this machine excluded)"
                              % self.rounds_s)
        if self.F != 1.0:
            self.notes.append("--scale_edges %g: bytes, round trips and CPU scaled linearly "
                              "with edges; superstep count held" % self.F)

    def step(self, i, N, M, nic_bpus, nic_us, cores):
        s = self.base.steps[i]
        dn = N - self.base.n0
        jb = s["job_bytes"] + (self.slope_b[i] * dn if self.slope_b else 0.0)
        jr = s["job_rt"] + (self.slope_r[i] * dn if self.slope_r else 0.0)
        jb, jr = max(jb, 0.0) * self.F, max(jr, 0.0) * self.F
        b_node, rt_node = jb / N, jr / N
        if N > 1:  # exchange rounds do not grow with the graph
            rt_node += self.rounds_s * (4 + N - 1)
        cpu = s["cpu_core_s"] * self.F / N / cores
        mem_share = M * nic_bpus / N  # each memory node's NIC shared by N
        bw = min(nic_bpus, mem_share)
        net = b_node / bw / 1e6
        if self.outstanding == "auto":
            out = max(1, s["max_outstanding"])
        else:
            out = max(1, int(self.outstanding))
        lat = rt_node * nic_us / out / 1e6
        t = max(cpu, net) + lat
        terms = {"cpu": cpu, ("net-bw" if nic_bpus <= mem_share else "mem-bw"): net,
                 "latency": lat}
        limit = max(terms, key=terms.get)
        return {"time": t, "cpu": cpu, "net": net, "lat": lat, "limit": limit,
                "bytes_node": b_node, "rt_node": rt_node}

    def predict(self, N, M, nic_bpus, nic_us, cores):
        steps = [self.step(i, N, M, nic_bpus, nic_us, cores) for i in range(len(self.base.steps))]
        total = sum(x["time"] for x in steps)
        by = {}
        for x in steps:
            by[x["limit"]] = by.get(x["limit"], 0.0) + x["time"]
        limit = max(by, key=by.get) if by else "-"
        return {"time": total, "steps": steps, "limit": limit,
                "share": by[limit] / total if total else 0.0,
                "bytes_node": sum(x["bytes_node"] for x in steps),
                "rt_node": sum(x["rt_node"] for x in steps)}


# ---------------------------------------------------------------- --validate: the per-node byte structure

LINE = 64          # StateArray::kLineBytes: other nodes' changes are READ by the line
PEER_BYTES = 128   # an exchange round: a node's slot and board as each other node reads them
POLL_BYTES = 16    # one poll of the job record
VALUE_BYTES = {"pagerank": 8}   # bytes a vertex of the array others read (else 4)
# Algorithms whose 1-node run keeps the array others read in its cache
# (PageRank's contributions): with several nodes its changed lines are also
# written, once a superstep, by their owners.
PUBLISH = ("pagerank",)
SETUP_EXTRA = 400000   # a node's setup beyond its share (the transport probe, boards)


class Profile:
    """One measured run: the figures --validate compares and fits."""

    def __init__(self, path):
        d = load(path)
        self.path, self.d = path, d
        self.n = int(d.get("compute_nodes", 1) or 1)
        self.threads = int(d["threads"])
        self.algo = d.get("algorithm", "?")
        self.vertices = int(d["vertices"])
        self.steps = [{"seconds": t["seconds"], "bytes": nbytes(t["ops"]),
                       "rt": t["ops"].get("round_trips", 0),
                       "frontier": t.get("frontier", 0)} for t in d["supersteps"]]
        self.time = stats.superstep_seconds(d)
        self.rtt_us = d.get("transport_rtt_us", 0.0) or 0.0
        self.bpus = d.get("transport_bytes_per_us", 0.0) or 0.0
        self.node_bytes = stats.node_bytes(d)
        self.job_bytes = nbytes(stats.job_ops(d))
        self.job_written = stats.job_ops(d).get("bytes_written", 0)
        nodes = d.get("nodes") or []
        self.rounds = max((n["rounds"] for n in nodes), default=0)
        self.polls = max((n.get("poll_round_trips", 0) for n in nodes), default=0)
        self.balance = stats.balance(d)
        # Busy core-seconds in the supersteps, all nodes (one node: its time).
        self.busy = sum(n["busy_seconds"] * self.time / n["seconds"] for n in nodes
                        if n["seconds"]) * self.threads if nodes else self.time * self.threads
        # Node 0's bytes outside the supersteps: setup (split over the
        # nodes) and the result's read-back at the end (on several nodes,
        # each READs its own range of it).
        self.setup_bytes = nbytes(d["setup"])   # node 0's
        self.finish_bytes = max(nbytes(d["totals"]) - self.setup_bytes
                                - sum(t["bytes"] for t in self.steps), 0)


def read_arcs(path):
    """(u, v) of every arc of a text edge list (.el/.wel: 'u v [w]'; lines
    starting with #, %, c or p skipped)."""
    us, vs = [], []
    with open(path) as f:
        for line in f:
            if not line.strip() or line[0] in "#%cp":
                continue
            a = line.split()
            us.append(int(a[0]))
            vs.append(int(a[1]))
    return us, vs


def range_refs(arcs, vertices, N, value_bytes):
    """Mean share of all state lines a node references in the others'
    ranges, the N ranges split evenly by arcs + vertices (dmg's stage 1 with
    --stage1_alpha=1): a line counts when an arc joins it to the node's
    range, in either direction."""
    us, vs = arcs
    cost = [1] * vertices
    for u, v in zip(us, vs):
        cost[u] += 1
        cost[v] += 1
    total, cuts, acc = sum(cost), [], 0
    for i, c in enumerate(cost):
        acc += c
        if len(cuts) < N - 1 and acc >= total * (len(cuts) + 1) / N:
            cuts.append(i + 1)
    owner = bisect_owner(cuts, vertices)
    refs = [set() for _ in range(N)]
    for u, v in zip(us, vs):
        ou, ov = owner[u], owner[v]
        if ou != ov:
            refs[ou].add(v * value_bytes // LINE)
            refs[ov].add(u * value_bytes // LINE)
    lines = max(1.0, vertices * value_bytes / LINE)
    return sum(len(r) for r in refs) / N / lines


def bisect_owner(cuts, vertices):
    owner, k = [0] * vertices, 0
    for v in range(vertices):
        while k < len(cuts) and v >= cuts[k]:
            k += 1
        owner[v] = k
    return owner


class Structure:
    """Per-node bytes and time of a job on N compute nodes, from its 1-node
    run (and, when given, its 2-node run to calibrate); docs/COST_MODEL.md,
    "Validation"."""

    def __init__(self, base, rtt_us, bpus, here_cores, calib=None, value_bytes=None,
                 arcs=None):
        if base.n != 1:
            sys.exit("%s: --validate needs the 1-node run first (it has %d)" % (base.path, base.n))
        self.base, self.rtt_us, self.bpus, self.here_cores = base, rtt_us, bpus, here_cores
        vb = value_bytes or VALUE_BYTES.get(base.algo, 4)
        lines = max(1.0, base.vertices * vb / LINE)
        self.vb, self.lines, self.arcs, self.ref_cache = vb, lines, arcs, {}
        # x_s: bytes of the other nodes' changed lines superstep s reads if it
        # references them all: the lines holding the vertices changed in s-1
        # (s's frontier), one line each until every line has changed.
        self.x = [0.0] + [LINE * lines * (1 - math.exp(-t["frontier"] / lines))
                          for t in base.steps[1:]]
        # CPU core-seconds per superstep: busy time less this machine's transport.
        self.cpu = [max(t["seconds"] - (t["rt"] * rtt_us + t["bytes"] / bpus) / 1e6, 0.0)
                    * base.threads for t in base.steps]
        # Written once a superstep by the owners of the lines that changed in
        # it (the next superstep's x), when the 1-node run did not write them.
        self.publish = [x if base.algo in PUBLISH else 0.0 for x in self.x[1:] + [0.0]]
        self.rho, self.rounds_s, self.polls_round, self.sync_us, self.balance = \
            1.0, 1.0, 1.0, 0.0, 1.0
        self.w2 = 1.0   # CPU work at 2 nodes / at 1 (remote-line checks, exchanges)
        self.peer_bytes, self.setup_extra = PEER_BYTES, SETUP_EXTRA
        self.calibrated = calib is not None
        if calib is not None:
            self.calibrate(calib)

    def exchange(self, N):
        """Bytes a node moves in a superstep's exchange rounds."""
        if N == 1:
            return 0.0
        return self.rounds_s * ((N - 1) * self.peer_bytes + self.polls_round * POLL_BYTES)

    def ref(self, N):
        """The share of all state lines a node references in the others'
        ranges: from the graph's arcs (--graph), else as if ids were random
        (2 arcs/N endpoints a node, each on a random line)."""
        if N not in self.ref_cache:
            if N == 1:
                r = 0.0
            elif self.arcs is not None:
                r = range_refs(self.arcs, self.base.vertices, N, self.vb)
            else:
                ends = 2.0 * self.base.d["arcs"] / N
                r = (N - 1) / N * (1 - math.exp(-ends / self.lines))
            self.ref_cache[N] = r
        return self.ref_cache[N]

    def share(self, N):
        """Of the lines that changed, the share a node reads: the ones it
        references in the others' ranges (rho: the 2-node run's correction)."""
        return self.rho * self.ref(N)

    def inflation(self, N):
        """CPU work at N nodes / at 1: the 2-node run's excess grows with the
        share of a node's sources on other nodes, (N-1)/N."""
        return 1.0 + (self.w2 - 1.0) * ((N - 1) / N) / 0.5 if N > 1 else 1.0

    def overcommit(self, N):
        return max(1.0, N * self.base.threads / self.here_cores)

    def step_bytes(self, i, N):
        """A node's bytes in superstep i: its share of what the 1-node run
        moved, the referenced changed lines, its share of the published
        lines, its exchanges."""
        b = self.base.steps[i]["bytes"] / N
        if N > 1:
            b += self.x[i] * self.share(N) + self.publish[i] / N + self.exchange(N)
        return b

    def node_bytes(self, N):
        """(a node's bytes, the largest node's): setup share, supersteps, and
        (the second) its share of the result's read-back: each node READs its
        own range of it (node 0, the largest, also the setup's extra)."""
        b = self.base.setup_bytes / N + (self.setup_extra if N > 1 else 0.0) + \
            sum(self.step_bytes(i, N) for i in range(len(self.base.steps)))
        return b, b + self.base.finish_bytes / N

    def calibrate(self, c):
        steps = len(self.base.steps)
        self.rounds_s = c.rounds / max(1, len(c.steps))
        self.polls_round = c.polls / c.rounds if c.rounds else 1.0
        self.balance = max(c.balance, 1.0)
        # Node 0's setup beyond its share; the job's writes beyond the 1-node
        # run's (flat in N: each changed line is written once), as x spreads.
        self.setup_extra = max(c.setup_bytes - self.base.setup_bytes / c.n, 0.0)
        extra_w = max(c.job_written - self.base.job_written, 0.0)
        spread = self.x[1:] + [0.0] if sum(self.x) else [1.0] * steps
        self.publish = [extra_w * w / sum(spread) for w in spread]
        # What a node moved beyond all that: its exchanges, fitted as bytes a
        # round per other node (polls at POLL_BYTES each apart).
        self.peer_bytes = 0.0
        rest = (c.job_bytes - self.base.finish_bytes) / c.n - self.node_bytes(c.n)[0]
        rounds = self.rounds_s * steps
        if rounds:
            self.peer_bytes = max((rest / rounds - self.polls_round * POLL_BYTES)
                                  / (c.n - 1), 0.0)
        # The 2-node run's busy core-seconds (less its transport, and less the
        # time-sharing when its nodes outnumber the cores) / the 1-node run's CPU.
        net2 = sum(self.step_bytes(i, c.n) for i in range(steps)) * c.n / self.bpus / 1e6 \
            if self.bpus else 0.0
        cpu1 = sum(self.cpu)
        if cpu1 > 0:
            self.w2 = max((c.busy / self.overcommit(c.n) - net2) / cpu1, 0.5)
        # This machine's cost of an exchange round beyond its round trips
        # (threads waking, nodes sharing cores): what the 2-node run took
        # over the prediction without it, per round.
        if c.rounds:
            rest = self.predict(c.n, here=True)["time"]
            self.sync_us = max(c.time - rest, 0.0) / (self.rounds_s * steps) \
                / self.overcommit(c.n) * 1e6

    def predict(self, N, here=True, M=1, nic_bpus=None, nic_us=None, cores=None,
                outstanding=1):
        """here: this machine (its rtt and bandwidth, one thread a node on
        here_cores cores, transfer on the same cores: cpu + net); else a
        fabric (nic_bpus, nic_us, cores per node, M memory nodes: max(cpu,
        net) + latency)."""
        total, by = 0.0, {}
        for i, t in enumerate(self.base.steps):
            b = self.step_bytes(i, N)
            rt = t["rt"] / N + (self.rounds_s * (4 + N - 1) if N > 1 else 0.0)
            if here:
                cpu = self.cpu[i] * self.inflation(N) / N / self.base.threads * \
                    self.overcommit(N) * (self.balance if N > 1 else 1.0)
                net = b / self.bpus / 1e6 if self.bpus else 0.0
                lat = rt * self.rtt_us / 1e6 + (self.rounds_s * self.sync_us / 1e6 *
                                                self.overcommit(N) if N > 1 else 0.0)
                terms = {"cpu": cpu, "net-bw": net, "latency": lat}
                step = cpu + net + lat
            else:
                cpu = self.cpu[i] * self.inflation(N) / N / cores * \
                    (self.balance if N > 1 else 1.0)
                bw = min(nic_bpus, M * nic_bpus / N)
                net = b / bw / 1e6
                lat = rt * nic_us / outstanding / 1e6
                terms = {"cpu": cpu, ("net-bw" if nic_bpus <= M * nic_bpus / N else "mem-bw"):
                         net, "latency": lat}
                step = max(cpu, net) + lat
            limit = max(terms, key=terms.get)
            by[limit] = by.get(limit, 0.0) + step
            total += step
        per_node, node0 = self.node_bytes(N)
        limit = max(by, key=by.get) if by else "-"
        return {"time": total, "max_node": node0,
                "job": per_node * N + self.base.finish_bytes, "limit": limit,
                "share": by[limit] / total if total else 0.0}


def err(p, m):
    return "%+.0f%%" % (100.0 * (p - m) / m) if m else "-"


def validate(args):
    """Predicted vs measured at each measured N; then the fabric projection."""
    print("| job | N | model | time s pred | meas | err | max node MB pred | meas | err "
          "| job MB pred | meas | err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    fits = []
    for spec in args.validate:
        label, _, files = spec.rpartition("=")
        runs = sorted((Profile(f) for f in files.split(",") if f), key=lambda r: r.n)
        base = runs[0]
        label = label or "%s %s" % (base.algo, os.path.basename(base.path))
        # This machine's transport: the multi-node runs' own samples (a
        # 1-node run probes nothing), or --here_rtt_us / --here_bytes_per_us.
        sampled = [r for r in runs if r.bpus]
        rtt = args.here_rtt_us if args.here_rtt_us is not None else \
            (sum(r.rtt_us for r in sampled) / len(sampled) if sampled else base.rtt_us)
        bpus = args.here_bytes_per_us if args.here_bytes_per_us is not None else \
            (sum(r.bpus for r in sampled) / len(sampled) if sampled else 0.0)
        two = next((r for r in runs if r.n == 2), None)
        arcs = None
        if "@" in label:   # LABEL@GRAPH.el: the graph's arcs give the references
            label, graph = label.split("@", 1)
            try:
                arcs = read_arcs(graphs.resolve(graph))
            except graphs.GraphNotFound as e:
                sys.exit(f"cost_model: --validate: {e}")
        models = [("1-node", Structure(base, rtt, bpus, args.here_cores,
                                       value_bytes=args.value_bytes, arcs=arcs))]
        if two is not None:
            models.append(("1+2-node", Structure(base, rtt, bpus, args.here_cores, two,
                                                 args.value_bytes, arcs)))
        for r in runs:
            for name, m in models:
                if r.n == 1 and name != "1-node":
                    continue
                p = m.predict(r.n, here=True)
                print("| %s | %d | %s | %.4f | %.4f | %s | %.1f | %.1f | %s | %.1f | %.1f | %s |"
                      % (label, r.n, name + (" (fit)" if m.calibrated and r.n == 2 else ""),
                         p["time"], r.time, err(p["time"], r.time), p["max_node"] / 1e6,
                         max(r.node_bytes) / 1e6, err(p["max_node"], max(r.node_bytes)),
                         p["job"] / 1e6, r.job_bytes / 1e6, err(p["job"], r.job_bytes)))
        fits.append((label, models[-1][1], rtt, bpus))
    print()
    for label, m, rtt, bpus in fits:
        print("%s: here rtt %.3g us, %.0f B/us, %d cores; fitted: %s" % (
            label, rtt, bpus, args.here_cores,
            "%.2f rounds a superstep, %.1f polls a round, %.0f B a round per other node, "
            "%.1f us a round, balance %.2f, CPU x%.2f at 2 nodes, setup +%.2f MB a node, "
            "published %.1f MB; lines referenced at 2/4 nodes %.3f/%.3f"
            % (m.rounds_s, m.polls_round, m.peer_bytes, m.sync_us, m.balance, m.w2,
               m.setup_extra / 1e6, sum(m.publish) / 1e6, m.ref(2), m.ref(4))
            if m.calibrated else "none (no 2-node run): 1 round a superstep, %d B a round "
            "per other node" % PEER_BYTES))
    if not args.project:
        return
    nic_bpus = args.nic_gbps * 1e9 / 8 / 1e6
    Ms = ints(args.memory)
    print("\nProjection (model output, not a measurement): %g Gb/s, %g us, %d cores a "
          "compute node, M memory nodes; time s / limit (share) / MB per node"
          % (args.nic_gbps, args.nic_us, args.cores))
    print()
    print("| job | N | " + " | ".join("M=%d" % M for M in Ms) + " |")
    print("|---|---|" + "---|" * len(Ms))
    for label, m, _, _ in fits:
        for N in ints(args.project):
            cells = []
            for M in Ms:
                p = m.predict(N, here=False, M=M, nic_bpus=nic_bpus, nic_us=args.nic_us,
                              cores=args.cores, outstanding=int(args.outstanding)
                              if args.outstanding.isdigit() else 1)
                cells.append("%.4f %s (%.0f%%) %.1f" % (p["time"], p["limit"], 100 * p["share"],
                                                        p["max_node"] / 1e6))
            print("| %s | %d | %s |" % (label, N, " | ".join(cells)))


def ints(s):
    return [int(x) for x in s.split(",") if x]


def self_check(args):
    base = Run(load(args.stats), args.here_rtt_us, args.here_bytes_per_us)
    m = Model(base, None, 1.0, args.outstanding)
    bpus = base.bpus if base.bpus else float("inf")
    p = m.predict(base.n0, args.self_memory, bpus, base.rtt_us, base.threads)
    meas = base.measured_seconds()
    print("self-check %s: %s, %d compute node(s), %d thread(s)/node, rtt %.3g us, %.0f B/us"
          % (args.stats, base.d.get("algorithm", "?"), base.n0, base.threads, base.rtt_us, base.bpus))
    if args.detail:
        detail(p, base)
    print("predicted %.5f s  measured %.5f s (sum of supersteps)  ratio %.2f  limit %s (%.0f%%)"
          % (p["time"], meas, p["time"] / meas if meas else 0.0, p["limit"], 100 * p["share"]))


def detail(p, base):
    print("  step dir   meas_s    pred_s    cpu_s     net_s     lat_s     MB/node  rt/node limit")
    for s, x in zip(base.steps, p["steps"]):
        print("  %4d %-5s %.6f  %.6f  %.6f  %.6f  %.6f  %7.2f %7.0f %s"
              % (s["index"], s["direction"][:5], s["seconds"], x["time"], x["cpu"], x["net"],
                 x["lat"], x["bytes_node"] / 1e6, x["rt_node"], x["limit"]))


def table(args):
    base = Run(load(args.stats), args.here_rtt_us, args.here_bytes_per_us)
    second = Run(load(args.stats2), args.here_rtt_us, args.here_bytes_per_us) if args.stats2 else None
    if second is not None and base.n0 > second.n0:
        base, second = second, base
    if base.rtt_us == 0 and base.bpus == 0 and second is not None:
        # A 1-node run samples no transport: borrow the other run's sample.
        base = Run(base.d, second.rtt_us, second.bpus)
    m = Model(base, second, args.scale_edges, args.outstanding)
    nic_bpus = args.nic_gbps * 1e9 / 8 / 1e6
    d = base.d
    print("# model output, not a measurement: %s on %d vertices, %d arcs (x%g edges); "
          "base run %d compute node(s), %d thread(s)/node, measured %.4f s"
          % (d.get("algorithm", "?"), d["vertices"], d["arcs"], args.scale_edges, base.n0,
             base.threads, base.measured_seconds()))
    print("# target: %g Gb/s, %g us, %d cores per compute node; this machine's transport "
          "rtt %.3g us, %.0f B/us" % (args.nic_gbps, args.nic_us, args.cores, base.rtt_us, base.bpus))
    if base.rtt_us == 0 and base.bpus == 0:
        m.notes.append("no transport sample (1-node run): CPU time includes transport; "
                       "give --here_rtt_us/--here_bytes_per_us")
    for n in m.notes:
        print("# " + n)
    Ms = ints(args.memory)
    print("%4s | %s" % ("N", " | ".join("M=%d: time_s   limit        MB/node" % M for M in Ms)))
    rows = []
    for N in ints(args.compute):
        cells = []
        for M in Ms:
            p = m.predict(N, M, nic_bpus, args.nic_us, args.cores)
            rows.append((N, M, p))
            cells.append("%9.5f %-8s %3.0f%% %8.1f" % (p["time"], p["limit"], 100 * p["share"],
                                                         p["bytes_node"] / 1e6))
        print("%4d | %s" % (N, " | ".join(cells)))
    if args.detail:
        N, M = ints(args.detail)
        print("# per superstep, N=%d M=%d" % (N, M))
        detail(m.predict(N, M, nic_bpus, args.nic_us, args.cores), base)
    if args.png:
        plot(args.png, rows, Ms)


def plot(path, rows, Ms):
    """Predicted time vs compute nodes, a line per memory-node count: PATH
    (its .png, .pdf and .svg)."""
    plt = plots.pyplot()
    if plt is None:
        print("# matplotlib unavailable: no plot (try /usr/bin/python3)")
        return
    Ns = [N for N, _, _ in rows]
    with plots.styled():
        fig, ax = plt.subplots(figsize=(plots.WIDTH / 2, 3.0))
        for i, M in enumerate(Ms):
            xs = [N for N, m, _ in rows if m == M]
            ys = [p["time"] for N, m, p in rows if m == M]
            ax.plot(plots.dodged(xs, i, len(Ms), min(Ns), max(Ns), log=True), ys,
                    label="M=%d memory node%s" % (M, "s" if M != 1 else ""),
                    **plots.series_style(i))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("compute nodes")
        ax.set_ylabel("predicted time (s), model output")
        ax.grid(True, which="both", alpha=0.3)
        plots.place_legend(fig, [ax])
        png = plots.save(fig, path)
        plt.close(fig)
    print("# wrote %s (and .pdf, .svg)" % png)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stats", help="--stats_json of the base run")
    ap.add_argument("--stats2", help="same job at another compute-node count (bytes growth)")
    ap.add_argument("--compute", default="1,2,4,8,16")
    ap.add_argument("--memory", default="1,2,4")
    ap.add_argument("--nic_gbps", type=float, default=100.0)
    ap.add_argument("--nic_us", type=float, default=2.0, help="round-trip latency, us")
    ap.add_argument("--cores", type=int, default=32, help="cores per compute node")
    ap.add_argument("--scale_edges", type=float, default=1.0)
    ap.add_argument("--outstanding", default="1",
                    help="batches in flight per round trip: a number or 'auto' (max_outstanding)")
    ap.add_argument("--here_rtt_us", type=float, help="override this machine's transport rtt")
    ap.add_argument("--here_bytes_per_us", type=float, help="override this machine's bandwidth")
    ap.add_argument("--detail", help="N,M: print the per-superstep breakdown")
    ap.add_argument("--png", help="write a plot (needs matplotlib): this PNG, and a PDF "
                    "and an SVG beside it")
    ap.add_argument("--self_check", action="store_true")
    ap.add_argument("--validate", action="append", metavar="LABEL[@GRAPH.el]=S1,S2,S4",
                    help="the same job's stats at 1, 2, 4 compute nodes (the 1-node run "
                    "first; the 2-node run calibrates): predicted vs measured, a markdown "
                    "table (repeatable: one table). @GRAPH.el: the graph's edge list, "
                    "whose arcs give the lines a node references (else: random ids)")
    ap.add_argument("--project", default="8,16,64",
                    help="with --validate: compute-node counts to project on the fabric "
                    "(--nic_gbps, --nic_us, --cores, --memory); '' for none")
    ap.add_argument("--here_cores", type=int, default=os.cpu_count() or 1,
                    help="with --validate: this machine's cores (the runs' nodes share them)")
    ap.add_argument("--value_bytes", type=int,
                    help="with --validate: bytes a vertex of the state others read "
                    "(default 8 for pagerank, else 4)")
    ap.add_argument("--self_memory", type=int, default=1, help="memory nodes of the measured run")
    args = ap.parse_args(argv)
    if args.validate:
        validate(args)
    elif args.self_check:
        if args.detail is None:
            args.detail = ""
        self_check(args)
    elif args.stats:
        table(args)
    else:
        ap.error("give --stats (a projection), --stats --self_check, or --validate")


if __name__ == "__main__":
    main()
