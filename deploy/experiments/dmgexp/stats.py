"""Figures of one `dmg run --stats_json=FILE` (the last trial's engine
statistics): per superstep under "supersteps", per compute node under
"nodes" (several compute nodes only), the job's sum under "job_totals", and
this machine's transport sample ("transport_rtt_us",
"transport_bytes_per_us"; 0 on one compute node, which probes nothing)."""
import collections
import json

BYTE_KEYS = ("bytes_read", "bytes_written")


def load(path):
    with open(path) as f:
        return json.load(f)


def nbytes(ops):
    """Remote bytes of an ops record: read + written."""
    return sum(ops.get(k, 0) for k in BYTE_KEYS)


def job_ops(d):
    """Every compute node's ops summed (one node: its totals)."""
    return d.get("job_totals") or d["totals"]


def node_ops(d):
    """Each compute node's ops, node 0 first (one node: its totals)."""
    return [n["ops"] for n in d.get("nodes") or []] or [d["totals"]]


def node_bytes(d):
    return [nbytes(o) for o in node_ops(d)]


def superstep_seconds(d):
    """The algorithm's time: the sum of the supersteps (setup, loading and
    the result's read-back excluded)."""
    return sum(s["seconds"] for s in d["supersteps"])


def balance(d):
    """max over compute nodes of (seconds - wait_seconds) / their mean; 1.0
    for one node."""
    busy = [n["seconds"] - n["wait_seconds"] for n in d.get("nodes") or []]
    if not busy or sum(busy) <= 0:
        return 1.0
    return max(busy) / (sum(busy) / len(busy))


def wait_frac(d):
    """Sum of wait_seconds / sum of seconds over compute nodes."""
    nodes = d.get("nodes") or []
    total = sum(n["seconds"] for n in nodes)
    return sum(n["wait_seconds"] for n in nodes) / total if total > 0 else 0.0


def counts(steps, key):
    """'pull:3 push:2' for a per-superstep field ('none' for an empty
    value); '' when dmg does not report the field."""
    c = collections.Counter(str(t[key]) or "none" for t in steps if key in t)
    return " ".join(f"{k}:{v}" for k, v in sorted(c.items()))


def figures(d):
    """The runner's per-run columns from one stats file."""
    steps = d["supersteps"]
    return dict(
        time_supersteps_s=round(superstep_seconds(d), 6),
        job_bytes=nbytes(job_ops(d)), max_node_bytes=max(node_bytes(d)),
        balance=round(balance(d), 4), wait_frac=round(wait_frac(d), 4),
        chosen_directions=counts(steps, "direction"),
        chosen_update_modes=counts(steps, "update_mode"),
        chosen_coordinators=counts(steps, "coordinator"))
