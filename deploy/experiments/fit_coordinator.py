#!/usr/bin/env python3
"""Fit the update coordinator's constants to measured supersteps.

The coordinator (coordinator/update_coordinator.h) chooses pull or push and
batch or atomic updates from a cost model with eight constants: CPU per
vertex or arc a pull visits (pull_ns) or a push visits (push_ns), per
update sent to another node's vertex (remote_ns), per compare-and-swap
(atomic_ns), the fixed cost of one exchange between compute nodes beyond
its round trips (exchange_us), per visit of a Gather (gather_ns), per
arc of a pull from an active source (pull_hit_ns) and per byte READ
(byte_ns). `dmg run --stats_json` records, per
superstep, what node 0 measured of each (push_arcs, remote_arcs,
pull_visits, ops.cas, rounds, gather_visits, pull_hits, ops.bytes_read)
and the
superstep's time. This fits

  seconds(us) - transport(us) = pull_ns/1000 * pull_visits/T
                              + push_ns/1000 * (push_arcs + frontier/N)/T
                              + remote_ns/1000 * remote_arcs/T
                              + atomic_ns/1000 * cas/T
                              + exchange_us * rounds
                              + gather_ns/1000 * gather_visits/T
                              + pull_hit_ns/1000 * pull_hits/T
                              + byte_ns/1000 * bytes_read/T
                              + vertex_ns/1000 * vertex_visits/T
                              + step_us

over every superstep of the runs given (T threads, N compute nodes;
transport = bytes moved / measured bandwidth + rounds * 4 measured round
trips, known; gather_ns, per vertex or arc a Gather visits, which the
coordinator uses for PageRank's choice; pull_hit_ns, per arc of a pull
whose source is active (its value and combine); byte_ns, per byte READ
(parsing, checking, keeping blocks: the CPU's part beside the link's); vertex_ns, per vertex a VertexMap,
VertexFilter or Reduce visits, and step_us, the fixed cost of a superstep, are common to every
choice and not used by the coordinator). Least squares with every constant
>= 0, each superstep weighted by 1 / its time (relative error). A pull
that stops at the first frontier neighbour (BFS's bottom-up steps: no
block scanned whole, pull_visits and gather_visits 0) is left out: the coordinator does not
estimate it (Ligra's rule chooses it). So is a step whose work items other
nodes could take (steal "on"): node 0's figures then mix its own work with
taken work and claims.

  fit_coordinator.py STATS_OR_DIR... [--write FILE] [--markdown] [--runs]
  fit_coordinator.py --self_test

Prints the constants as `dmg run --cost_constants` takes them (and writes
that line to --write), and the fit's error (predicted vs measured time of
the modelled supersteps) per algorithm and graph; --runs, per run;
--markdown, the constants as a table too.
"""
import argparse
import glob
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dmgexp import stats  # noqa: E402  (deploy/experiments/dmgexp)

# (key in --cost_constants, feature, scale from the fitted us-per-unit)
CONSTANTS = (("pull_ns", 1000.0), ("push_ns", 1000.0), ("remote_ns", 1000.0),
             ("atomic_ns", 1000.0), ("exchange_us", 1.0), ("gather_ns", 1000.0),
             ("pull_hit_ns", 1000.0), ("byte_ns", 1000.0))
EXTRA = (("vertex_ns", 1000.0), ("step_us", 1.0))
BUILT_IN = {"pull_ns": 10, "push_ns": 20, "remote_ns": 20, "atomic_ns": 0,
            "exchange_us": 0, "gather_ns": 10, "pull_hit_ns": 0, "byte_ns": 0}
EXCHANGE_ROUND_TRIPS = 4  # coordinator::kExchangeRoundTrips


def features(run, step):
    """(x, y_us) of one superstep: x in the order CONSTANTS + EXTRA."""
    t = max(1, int(run.get("threads", 1) or 1))
    n = max(1, int(run.get("compute_nodes", 1) or 1))
    ops = step.get("ops", {})
    push = step.get("push_arcs", 0)
    frontier = step.get("frontier", 0) / n if push else 0
    x = [step.get("pull_visits", 0) / t, (push + frontier) / t,
         step.get("remote_arcs", 0) / t, ops.get("cas", 0) / t,
         step.get("rounds", 0), step.get("gather_visits", 0) / t,
         step.get("pull_hits", 0) / t, ops.get("bytes_read", 0) / t,
         step.get("vertex_visits", 0) / t, 1.0]
    rtt = run.get("transport_rtt_us", 0) or 0
    bw = run.get("transport_bytes_per_us", 0) or 0
    known = step.get("rounds", 0) * EXCHANGE_ROUND_TRIPS * rtt
    if bw > 0:
        known += (ops.get("bytes_read", 0) + ops.get("bytes_written", 0)) / bw
    return x, step["seconds"] * 1e6 - known


def rows_of(run):
    out = []
    for s in run.get("supersteps", []):
        if "push_arcs" not in s:
            sys.exit("%s: no push_arcs in its supersteps (stats from a dmg "
                     "older than the fit)" % run.get("_path", "?"))
        if s.get("seconds", 0) <= 0:
            continue
        scanned = s.get("pull_visits", 0) + s.get("gather_visits", 0)
        if "pull" in s.get("direction", "") and scanned == 0:
            continue  # a bottom-up pull (stops early): not the model's
        if s.get("steal") == "on":
            continue  # shared work items: claims and taken work, not node 0's
        x, y = features(run, s)
        out.append((x, y, 1.0 / (s["seconds"] * 1e6 + 20.0)))
    return out


def nnls(rows, k, iters=4000):
    """Weighted least squares with every coefficient >= 0 (coordinate
    descent on the normal equations; k unknowns, a handful)."""
    a = [[0.0] * k for _ in range(k)]
    b = [0.0] * k
    for x, y, w in rows:
        for i in range(k):
            b[i] += w * w * x[i] * y
            for j in range(k):
                a[i][j] += w * w * x[i] * x[j]
    c = [0.0] * k
    for _ in range(iters):
        moved = 0.0
        for i in range(k):
            if a[i][i] <= 0:
                continue
            r = b[i] - sum(a[i][j] * c[j] for j in range(k) if j != i)
            new = max(0.0, r / a[i][i])
            moved = max(moved, abs(new - c[i]) * math.sqrt(a[i][i]))
            c[i] = new
        if moved < 1e-12:
            break
    return c


def fit(runs):
    rows = [r for run in runs for r in rows_of(run)]
    if len(rows) < 8:
        sys.exit("fit_coordinator: %d supersteps; need at least 8" % len(rows))
    k = len(CONSTANTS) + len(EXTRA)
    c = nnls(rows, k)
    fitted = {name: c[i] * scale
              for i, (name, scale) in enumerate(CONSTANTS + EXTRA)}
    return fitted, c


def predict(c, run):
    return sum(sum(ci * xi for ci, xi in zip(c, x)) for x, _, _ in rows_of(run))


def flag_line(fitted):
    return ",".join("%s=%.3g" % (name, fitted[name]) for name, _ in CONSTANTS)


def describe(run):
    path = os.path.basename(run.get("_path", "?"))
    modes = sorted({s.get("update_mode", "") for s in run["supersteps"]} - {""})
    dirs = sorted({s.get("direction", "") for s in run["supersteps"]} - {"", "none"})
    return "%s: %s, %d node(s) x %d thread(s), %s, %s" % (
        path, run.get("algorithm", "?"), run.get("compute_nodes", 1),
        run.get("threads", 1), "+".join(dirs) or "-", "+".join(modes) or "-")


def report(runs, fitted, c, markdown, per_run):
    print("cost_constants: " + flag_line(fitted))
    print("not used by the coordinator: vertex_ns=%.3g (per vertex of a "
          "VertexMap), step_us=%.3g (per superstep)"
          % (fitted["vertex_ns"], fitted["step_us"]))
    if markdown:
        print("\n| constant | fitted | hand-set before |")
        print("|---|---:|---:|")
        for name, _ in CONSTANTS:
            print("| %s | %.3g | %g |" % (name, fitted[name], BUILT_IN[name]))
    groups = {}
    errors = []
    for run in runs:
        rows = rows_of(run)
        if not rows:
            continue  # every step a bottom-up pull
        measured = sum(y for _, y, _ in rows) / 1e6
        ratio = predict(c, run) / 1e6 / measured if measured > 0 else float("nan")
        errors.append(abs(math.log(ratio)) if ratio > 0 else float("inf"))
        key = (run.get("algorithm", "?"), run.get("vertices", 0))
        groups.setdefault(key, []).append(ratio)
        if per_run:
            print("  %-70s %5d steps  measured %.4f s  predicted x%.2f"
                  % (describe(run), len(run["supersteps"]), measured, ratio))
    print("\npredicted / measured time (sum of the modelled supersteps), per "
          "algorithm and graph:")
    print("| algorithm | vertices | runs | least | median | most |")
    print("|---|---:|---:|---:|---:|---:|")
    for (algo, n), ratios in sorted(groups.items()):
        ratios.sort()
        print("| %s | %d | %d | %.2f | %.2f | %.2f |" % (
            algo, n, len(ratios), ratios[0], ratios[len(ratios) // 2], ratios[-1]))
    errors.sort()
    if errors:
        med = math.exp(errors[len(errors) // 2])
        print("%d runs; median |predicted/measured| off by x%.2f, worst x%.2f"
              % (len(errors), med, math.exp(errors[-1])))


def load(paths):
    files = []
    for p in paths:
        files += sorted(glob.glob(os.path.join(p, "*.json"))) if os.path.isdir(p) else [p]
    runs = []
    for f in files:
        try:
            d = stats.load(f)
        except (OSError, ValueError) as e:
            sys.exit("fit_coordinator: %s: %s" % (f, e))
        if "supersteps" not in d:
            continue  # a summary JSON, not --stats_json
        d["_path"] = f
        runs.append(d)
    if not runs:
        sys.exit("fit_coordinator: no --stats_json files among %s" % " ".join(paths))
    return runs


def self_test():
    """Steps made from known constants (plus 3% noise) come back."""
    rng = random.Random(7)
    truth = [0.004, 0.009, 0.03, 0.06, 25.0, 0.003, 0.012, 0.0005, 0.002,
             40.0]  # us per unit
    runs = []
    for n in (1, 2, 4):
        steps = []
        for _ in range(300):
            kind = rng.choice(("pull", "push", "atomic"))
            s = {"frontier": rng.randrange(1, 10**5), "rounds": 0,
                 "vertex_visits": rng.choice((0, rng.randrange(10**4, 10**6))),
                 "push_arcs": 0, "remote_arcs": 0, "pull_visits": 0,
                 "ops": {"cas": 0, "bytes_written": 0,
                         "bytes_read": rng.choice((0, rng.randrange(10**4, 10**8)))}}
            if kind == "pull":
                s["pull_visits"] = rng.randrange(10**5, 10**7)
                s["gather_visits"] = rng.choice((0, rng.randrange(10**5, 10**7)))
                s["pull_hits"] = int(s["pull_visits"] * rng.random())
            else:
                s["push_arcs"] = rng.randrange(10, 10**6)
                s["remote_arcs"] = int(s["push_arcs"] * (n - 1) / n * rng.random())
                if kind == "atomic" and n > 1:
                    s["ops"]["cas"] = s["push_arcs"]
            s["rounds"] = 0 if n == 1 else rng.choice((1, 2))
            s["seconds"] = 0
            run = {"threads": 1, "compute_nodes": n, "supersteps": [s]}
            x, _ = features(run, s)
            s["seconds"] = sum(a * b for a, b in zip(truth, x)) * (1 + rng.uniform(-.03, .03)) / 1e6
            steps.append(s)
        runs.append({"threads": 1, "compute_nodes": n, "supersteps": steps,
                     "_path": "synthetic-%d" % n, "algorithm": "synthetic"})
    fitted, _ = fit(runs)
    want = {name: t * scale for t, (name, scale) in zip(truth, CONSTANTS + EXTRA)}
    bad = [k for k in want if abs(fitted[k] - want[k]) > 0.1 * want[k]]
    for k in want:
        print("%-12s fitted %8.3f  true %8.3f" % (k, fitted[k], want[k]))
    if bad:
        sys.exit("fit_coordinator: self-test FAILED: %s off by more than 10%%" % bad)
    print("fit_coordinator: self-test PASS")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stats", nargs="*", help="--stats_json files, or folders of them")
    ap.add_argument("--write", help="write the --cost_constants line to this file")
    ap.add_argument("--markdown", action="store_true", help="the constants as a table too")
    ap.add_argument("--runs", action="store_true", help="a line per run")
    ap.add_argument("--self_test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return
    if not args.stats:
        ap.error("name --stats_json files or folders (or --self_test)")
    runs = load(args.stats)
    fitted, c = fit(runs)
    report(runs, fitted, c, args.markdown, args.runs)
    if args.write:
        with open(args.write, "w") as fh:
            fh.write(flag_line(fitted) + "\n")


if __name__ == "__main__":
    main()
