"""The scaling table and the update_mode x direction ablation of a sweep,
from the runner's rows (results.csv as read back: strings; or as written:
numbers): text for summary.txt; the ablation's plot is plots.py's.

Rows: experiment ("sweep" or "ablation"; absent in older CSVs: sweep),
update_mode and direction ("auto" when absent), rep (repetitions: the
fastest ok one of each configuration counts), time_median_s,
remote_bytes_median and, when the sweep kept --stats_json, balance,
wait_frac, chosen_directions and chosen_update_modes."""
import collections

# What makes one configuration (every key but the repetition).
CONFIG = ("experiment", "graph", "algorithm", "transport", "compute_nodes",
          "memory_nodes", "cache", "cache_policy", "threads", "update_mode",
          "direction")
DEFAULTS = {"experiment": "sweep", "update_mode": "auto", "direction": "auto"}
EXACT_ALGOS = ("bfs", "cc", "sssp")   # answers must not depend on the setup
MODE_ORDER = ["auto", "pull", "batch", "atomic"]
DIR_ORDER = ["auto", "push", "pull"]


def get(r, k):
    v = r.get(k)
    return DEFAULTS.get(k, "") if v in (None, "") else v


def num(r, k):
    v = r.get(k)
    return None if v in (None, "") else float(v)


def ok(r):
    return r is not None and r.get("status") == "ok"


def secs(r):
    return num(r, "time_median_s")


def mb(r):
    return num(r, "remote_bytes_median") / 1e6


def key(r, dims=CONFIG):
    return tuple(str(get(r, d)) for d in dims)


def best_rows(rows):
    """Configuration -> its fastest ok repetition (else its first row)."""
    best = {}
    for r in rows:
        k = key(r)
        cur = best.get(k)
        if cur is None or (ok(r) and (not ok(cur) or secs(r) < secs(cur))):
            best[k] = r
    return list(best.values())


def cell(r, fmt):
    if r is None:
        return "-"
    if not ok(r):
        s = r.get("status", "")
        return {"timeout": "T/O", "error": "ERR", "unsupported": "unsup",
                "skipped": "skip"}.get(s.split(" ")[0].rstrip(":"), s[:6])
    return fmt(r)


def by_int(values):
    return sorted(values, key=lambda v: int(v) if str(v).isdigit() else 0)


def scaling_table(rows):
    """Time and MB per compute-node count, speedup, balance and waiting at
    the most nodes; one line per everything else that varies."""
    sweep = [r for r in rows if get(r, "experiment") == "sweep"]
    cs = by_int({str(r["compute_nodes"]) for r in sweep})
    if len(cs) < 2:
        return []
    rest = [d for d in CONFIG if d not in ("experiment", "compute_nodes")]
    varying = [d for d in rest if len({str(get(r, d)) for r in sweep}) > 1]
    cells = {(key(r, varying), str(r["compute_nodes"])): r for r in sweep}
    head = " ".join(f"{d[:12]:>12s}" for d in varying)
    out = [f"scaling (fastest repetition; time: median per trial, s; MB: remote "
           f"read+written per trial, all compute nodes; speedup, balance and wait "
           f"at {cs[-1]} vs {cs[0]} compute nodes)",
           f"{head} | time " + " ".join(f"{'C=' + c:>8s}" for c in cs)
           + f" | {'speedup':>7s} | MB " + " ".join(f"{'C=' + c:>8s}" for c in cs)
           + " | balance  wait"]
    for k in sorted({key(r, varying) for r in sweep}):
        rs = [cells.get((k, c)) for c in cs]
        first, last = rs[0], rs[-1]
        speed = f"{secs(first) / secs(last):.2f}x" if ok(first) and ok(last) and secs(last) \
            else "-"
        bal = cell(last, lambda r: "-" if num(r, "balance") is None
                   else f"{num(r, 'balance'):.2f}")
        wait = cell(last, lambda r: "-" if num(r, "wait_frac") is None
                    else f"{100 * num(r, 'wait_frac'):.0f}%")
        out.append(" ".join(f"{v[:12]:>12s}" for v in k)
                   + " | time " + " ".join(f"{cell(r, lambda r: '%.4f' % secs(r)):>8s}"
                                           for r in rs)
                   + f" | {speed:>7s} | MB "
                   + " ".join(f"{cell(r, lambda r: '%.2f' % mb(r)):>8s}" for r in rs)
                   + f" | {bal:>7s} {wait:>5s}")
    return out + [""]


def combo_order(combo):
    mode, d = combo
    return (MODE_ORDER.index(mode) if mode in MODE_ORDER else 99, mode,
            DIR_ORDER.index(d) if d in DIR_ORDER else 99, d)


def ablation_groups(rows):
    """(everything but update_mode and direction) -> {(mode, dir): row}."""
    dims = [d for d in CONFIG if d not in ("update_mode", "direction")]
    groups = collections.defaultdict(dict)
    for r in rows:
        if get(r, "experiment") == "ablation":
            groups[key(r, dims)][(get(r, "update_mode"), get(r, "direction"))] = r
    return dims, groups


def ablation_table(rows):
    dims, groups = ablation_groups(rows)
    out = []
    for k, group in sorted(groups.items()):
        g = dict(zip(dims, k))
        out.append(f"ablation: {g['algorithm']} on {g['graph']}, {g['transport']}, "
                   f"{g['compute_nodes']} compute, {g['memory_nodes']} memory nodes, "
                   f"cache {g['cache']} {g['cache_policy']}, threads {g['threads']}")
        out.append(f"  {'update':7s} {'dir':5s} | {'time s':>8s} {'MB':>8s} | chosen")
        for mode, d in sorted(group, key=combo_order):
            r = group[(mode, d)]
            chosen = " ".join(x for x in (r.get("chosen_directions", ""),
                                          r.get("chosen_update_modes", "")) if x)
            out.append(f"  {mode:7s} {d:5s} | {cell(r, lambda r: '%.4f' % secs(r)):>8s} "
                       f"{cell(r, lambda r: '%.2f' % mb(r)):>8s} | {chosen}")
        out.append("  " + verdict(group))
        out.append("")
    cells = [r for r in (ratios(g) for g in groups.values()) if r is not None]
    if cells:
        in_time = sum(rt <= 1.1 for rt, _ in cells)
        in_bytes = sum(rb <= 1.1 for _, rb in cells)
        out.append(f"ablation overall: auto within 10% of the best forced time in "
                   f"{in_time} of {len(cells)} cells ({100 * in_time / len(cells):.0f}%), "
                   f"of the fewest bytes in {in_bytes} of {len(cells)} "
                   f"({100 * in_bytes / len(cells):.0f}%)")
        out.append("")
    return out


def compare(group):
    """auto/auto against the best forced combination: (auto's time, the
    fastest forced row, the fewest-bytes forced row, the time ratio, the
    bytes ratio, how many forced runs were pooled with auto); None without
    auto/auto or a forced run."""
    auto = group.get(("auto", "auto"))
    forced = [r for k, r in group.items() if k != ("auto", "auto") and ok(r)]
    if not ok(auto) or not forced:
        return None
    bt = min(forced, key=secs)
    bb = min(forced, key=mb)
    # A forced combination that made every choice auto made (the same
    # directions and update modes, superstep counts) ran the same code: its
    # runs are repetitions of auto's, and the best of them is auto's time
    # (else the best of many forced samples of one execution is held against
    # auto's few: noise, not choice). Needs the stats columns.
    same = [r for r in forced if r.get("chosen_directions")
            and r.get("chosen_directions") == auto.get("chosen_directions")
            and r.get("chosen_update_modes") == auto.get("chosen_update_modes")]
    auto_t = min([secs(auto)] + [secs(r) for r in same])
    rt = auto_t / secs(bt) if secs(bt) > 0 else 1.0
    rb = mb(auto) / mb(bb) if mb(bb) > 0 else 1.0
    pooled = len(same) if same and auto_t < secs(auto) else 0
    return auto_t, bt, bb, rt, rb, pooled


def ratios(group):
    c = compare(group)
    return None if c is None else (c[3], c[4])


def verdict(group):
    """auto/auto against the best forced combination, in time and in bytes:
    PASS when both are within 10%."""
    c = compare(group)
    if c is None:
        return "auto/auto or every forced mode missing: no verdict"
    auto_t, bt, bb, rt, rb, same = c
    auto = group[("auto", "auto")]
    pooled = f" (pooled with {same} forced making the same choices)" if same else ""
    mark = lambda x: "PASS" if x <= 1.1 else "MISS"
    return (f"auto {auto_t:.4f} s{pooled} vs best forced {secs(bt):.4f} s "
            f"({get(bt, 'update_mode')}/{get(bt, 'direction')}) = {rt:.2f}x {mark(rt)}; "
            f"auto {mb(auto):.2f} MB vs {mb(bb):.2f} MB "
            f"({get(bb, 'update_mode')}/{get(bb, 'direction')}) = {rb:.2f}x {mark(rb)}"
            f" => {mark(max(rt, rb))}")


def checks(rows):
    """Exact answers that differ between configurations; run counts."""
    out = []
    answers = collections.defaultdict(set)
    for r in rows:
        if ok(r) and r.get("algorithm") in EXACT_ALGOS and r.get("result"):
            answers[(r["graph"], r["algorithm"])].add(r["result"])
    for (g, a), res in sorted(answers.items()):
        if len(res) > 1:
            out.append(f"WARNING: {a} on {g} gives different answers: "
                       + " | ".join(sorted(res)))
    status = collections.Counter((r.get("status") or "").split(" ")[0].rstrip(":")
                                 for r in rows)
    out.append("runs: " + ", ".join(f"{k} {v}" for k, v in sorted(status.items())))
    return out


def summarize(rows):
    """The text of summary.txt ('' when the sweep has neither several
    compute-node counts nor an ablation)."""
    best = best_rows(rows)
    body = scaling_table(best) + ablation_table(best)
    return "\n".join(body + checks(rows)) + "\n" if body else ""
