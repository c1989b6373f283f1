#!/usr/bin/env python3
"""Cost model for DMG jobs on N compute x M memory nodes (issue 10, item 7).

Reads `dmg run ... --stats_json=FILE` output and predicts, per superstep, the
time of the same job on a target cluster (NIC latency/bandwidth, cores per
compute node), naming the resource that bounds each superstep. The model is
deliberately simple; docs/COST_MODEL.md gives every formula and assumption.

  cost_model.py --stats s1.json [--stats2 s2.json] --compute 1,2,4,8,16 \
      --memory 1,2,4 --nic_gbps 100 --nic_us 2 --cores 32 [--scale_edges F]
  cost_model.py --stats s.json --self_check
"""
import argparse
import json
import sys

BYTE_KEYS = ("bytes_read", "bytes_written")


def load(path):
    with open(path) as f:
        d = json.load(f)
    if not d.get("supersteps"):
        sys.exit("%s: no supersteps" % path)
    return d


def nbytes(ops):
    return sum(ops.get(k, 0) for k in BYTE_KEYS)


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
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# matplotlib unavailable: no plot (try /usr/bin/python3)")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for M in Ms:
        xs = [N for N, m, _ in rows if m == M]
        ys = [p["time"] for N, m, p in rows if m == M]
        ax.plot(xs, ys, marker="o", label="M=%d memory nodes" % M)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("compute nodes")
    ax.set_ylabel("predicted time (s), model output")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    print("# wrote " + path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stats", required=True, help="--stats_json of the base run")
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
    ap.add_argument("--png", help="write a plot (needs matplotlib)")
    ap.add_argument("--self_check", action="store_true")
    ap.add_argument("--self_memory", type=int, default=1, help="memory nodes of the measured run")
    args = ap.parse_args()
    if args.self_check:
        if args.detail is None:
            args.detail = ""
        self_check(args)
    else:
        table(args)


if __name__ == "__main__":
    main()
