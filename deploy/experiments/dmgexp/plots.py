"""Plots of the experiment scripts, made to go into a paper as they are:
7.5 in wide (two columns of a page), 9 pt text; each figure saved as PNG
at 200 dpi, PDF and SVG (text kept as text) side by side; the legend
inside a panel, or beside the panels when it is long; every series named
in it; series that fall on each other told apart by colour, marker, line
style, hollow markers and a small sideways offset.

pyplot() and styled() set matplotlib up; sweep_figures() and
ablation_figures() give (file stem, figure) for a sweep's results.csv
rows; series_style(), dodged(), place_legend() and save() are the pieces
other scripts' plots use."""
import math
import re
import textwrap
from pathlib import Path

from . import graphs, report

DPI = 200
FORMATS = ("png", "pdf", "svg")
WIDTH = 7.5            # inches
PANEL_HEIGHT = 2.9     # inches, below the title
STYLE = {
    "font.size": 9, "axes.labelsize": 9, "axes.titlesize": 9, "xtick.labelsize": 9,
    "ytick.labelsize": 9, "legend.fontsize": 9, "figure.titlesize": 9.5,
    "lines.linewidth": 1.3, "lines.markersize": 5.5, "errorbar.capsize": 2.5,
    "legend.handlelength": 2.8,   # long enough to show each line style
    "svg.fonttype": "none",       # SVG text stays editable text
    "pdf.fonttype": 42,           # TrueType in the PDF, as publishers ask
}
MARKERS = "osD^vP<>Xh"
LINESTYLES = ("-", "--", "-.", (0, (4, 1, 1, 1, 1, 1)), (0, (6, 2)), (0, (2, 1)),
              (0, (8, 2, 2, 2)), (0, (3, 1, 1, 1)))
# A level (an unbounded cache's time) per series: dotted, each series at its
# own spacing, so that two equal levels still show both.
LEVELS = tuple((0, (1, 1.2 + 0.7 * k)) for k in range(8))
INSIDE_MAX = 5         # legend entries that still fit inside a panel ...
INSIDE_CHARS = 32      # ... when none is longer than this
DODGE = 0.02           # sideways step between series, in x-axis widths ...
DODGE_ALL = 0.08       # ... and between the outermost two at most


def pyplot():
    """matplotlib.pyplot drawing to files only; None without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def styled():
    """The look above, for figures made and saved inside this `with`."""
    import matplotlib
    return matplotlib.rc_context(STYLE)


def series_style(i):
    """Series i: its own colour, marker and line style. Every second series
    has hollow, slightly larger markers drawn above the others, so that a
    filled marker exactly under one still shows."""
    s = dict(color=f"C{i % 10}", marker=MARKERS[i % len(MARKERS)],
             linestyle=LINESTYLES[i % len(LINESTYLES)], zorder=2)
    if i % 2:
        s.update(markerfacecolor="none", markeredgewidth=1.3, markersize=7, zorder=3)
    return s


def dodged(xs, i, n, lo, hi, log=False):
    """xs moved sideways by series i of n (all x within lo..hi), so that
    equal points of different series sit side by side, not on top of each
    other; on a log axis by a factor."""
    if n < 2:
        return list(xs)
    k = (i - (n - 1) / 2) * min(DODGE, DODGE_ALL / (n - 1))
    if log:
        decades = math.log10(hi / lo) if hi > lo > 0 else 1
        return [x * 10 ** (k * decades) for x in xs]
    return [x + k * ((hi - lo) or 1) for x in xs]


def place_legend(fig, axes, handles=None, inside=True):
    """The legend inside the first panel when it is short (and inside);
    else a compact block in as many columns as the width takes, between the
    title and the panels, the figure made taller by its height so that the
    panels keep their size. Then the panels are laid out (tight_layout
    keeps the suptitle's room)."""
    if handles is None:
        handles, labels = axes[0].get_legend_handles_labels()
    else:
        labels = [h.get_label() for h in handles]
    if not handles:
        fig.tight_layout()
    elif inside and len(handles) <= INSIDE_MAX and max(map(len, labels)) <= INSIDE_CHARS:
        axes[0].legend(handles, labels, loc="best", framealpha=0.85)
        fig.tight_layout()
    else:
        legend_above(fig, handles, labels)


def legend_above(fig, handles, labels):
    one = fig.legend(handles, labels, ncol=1, frameon=False)
    fig.canvas.draw()
    ncol = max(1, min(len(handles), int(0.96 * fig.bbox.width // one.get_window_extent().width)))
    one.remove()
    leg = fig.legend(handles, labels, ncol=ncol, frameon=False, loc="upper center",
                     columnspacing=1.2)
    fig.canvas.draw()
    grow = leg.get_window_extent().height / fig.dpi   # inches
    fig.set_figheight(fig.get_figheight() + grow)
    fig.canvas.draw()
    title = fig._suptitle.get_window_extent().y0 / fig.bbox.height if fig._suptitle else 1
    leg.set_bbox_to_anchor((0.5, title), transform=fig.transFigure)
    # tight_layout moves the panels down by what the rect leaves at the top.
    fig.tight_layout(rect=(0, 0, 1, 1 - grow / fig.get_figheight()))


def save(fig, path):
    """path.png (DPI), path.pdf and path.svg; returns the PNG's path."""
    path = Path(path)
    base = path.with_suffix("") if path.suffix[1:] in FORMATS else path
    for fmt in FORMATS:
        fig.savefig(base.with_name(f"{base.name}.{fmt}"), dpi=DPI)
    return base.with_name(f"{base.name}.png")


def title_lines(*lines, panels=PANEL_HEIGHT):
    """The suptitle wrapped to the figure's width, and the figure's height
    (panels: inches below the title)."""
    text = "\n".join(textwrap.fill(l, 110) for l in lines if l)
    return text, panels + 0.18 * (text.count("\n") + 1) + 0.05


# ---------------------------------------------------------------- a sweep's plots

DIMS = ("compute_nodes", "memory_nodes", "cache", "cache_policy", "threads", "update_mode",
        "direction")
KINDS = (("cache", "cache", "time and remote bytes vs cache size"),
         ("compute_nodes", "compute", "speedup and time vs compute nodes"),
         ("memory_nodes", "memory", "time and remote bytes vs memory nodes"))
TIME_LABEL = "time per trial (s)"
MB_LABEL = "remote MB per trial\n(read + written)"


def num(r, k):
    return float(r[k]) if r.get(k) not in (None, "") else None


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


def plural(v, what):
    return f"{v} {what}{'s' if str(v) != '1' else ''}"


def describe(r, dims):
    parts = []
    for d in dims:
        v = report.get(r, d)
        if d == "compute_nodes":
            parts.append(plural(v, "compute node"))
        elif d == "memory_nodes":
            parts.append(plural(v, "memory node"))
        elif d == "threads":
            parts.append("threads: all cores" if str(v) == "0" else
                         "threads: cores / compute nodes" if str(v).startswith("split") else
                         plural(v, "thread"))
        elif d == "cache":
            parts.append(f"cache {v}")
        elif d in ("update_mode", "direction"):
            parts.append(f"{d} {v}")
        else:
            parts.append(str(v))
    return ", ".join(parts)


def x_axis(grp, axis):
    """(label, row -> x, log scale); x None: an unbounded cache, drawn as a
    level. Cache: % of the store image when every size is a fraction, else
    the bound dmg reports, in MiB."""
    if axis != "cache":
        return axis.replace("_", " "), lambda r: float(r[axis]), False
    if all(r["cache"].endswith("%") or r["cache"] == "unbounded" for r in grp):
        return "cache size (% of the store image)", \
            lambda r: None if r["cache"] == "unbounded" else float(r["cache"][:-1]), True
    return "cache bound (MiB, as dmg reports it)", \
        lambda r: None if r["cache"] == "unbounded" or not num(r, "cache_bound_bytes") \
        else num(r, "cache_bound_bytes") / 2 ** 20, True


def sweep_figures(plt, rows, name):
    """(stem, figure) per graph x algorithm x transport and axis (cache,
    compute nodes, memory nodes) with more than one value among the
    sweep's ok runs (fastest repetition)."""
    ok_rows = [r for r in report.best_rows(rows) if r["status"] == "ok" and
               report.get(r, "experiment") == "sweep"]
    for graph, algo, transport in sorted({(r["graph"], r["algorithm"], r["transport"])
                                          for r in ok_rows}):
        grp = [r for r in ok_rows
               if (r["graph"], r["algorithm"], r["transport"]) == (graph, algo, transport)]
        for axis, kind, title in KINDS:
            if len({report.get(r, axis) for r in grp}) > 1:
                yield (f"{kind}-{graphs.slug(graph)}-{algo}-{transport}",
                       sweep_figure(plt, grp, axis, title, name))


def split_series(grp, axis):
    """(the other keys that vary, those fixed, [(values, rows)] in order)."""
    others = [d for d in DIMS if d != axis]
    varying = [d for d in others if len({report.get(r, d) for r in grp}) > 1]
    fixed = [d for d in others if d not in varying]
    series = {}
    for r in grp:
        series.setdefault(tuple(report.get(r, d) for d in varying), []).append(r)
    order = lambda kv: [dim_order(d, v) for d, v in zip(varying, kv[0])]
    return varying, fixed, sorted(series.items(), key=order)


def sweep_figure(plt, grp, axis, title, name):
    varying, fixed, series = split_series(grp, axis)
    xlabel, xof, log = x_axis(grp, axis)
    r0 = grp[0]
    where = f"{r0['algorithm']} on {r0['graph']}, transport {r0['transport']}" + \
        (f" ({r0['backend']} backend)" if r0["transport"] != "local" else
         " (embedded cluster)")
    per_point = "1 trial per point" if str(r0["trials"]) == "1" else \
        f"points: median of {r0['trials']} trials, bars min-max"
    # update_mode and direction auto, dmg's default, go without saying.
    fixed = [d for d in fixed if report.get(r0, d) != "auto"]
    text, height = title_lines(f"{where}: {title}",
                               "; ".join(x for x in (describe(r0, fixed), per_point,
                                                     f"sweep {name}") if x))
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, height))
    xs = [x for x in map(xof, grp) if x is not None]
    for i, (skey, srows) in enumerate(series):
        label = describe(dict(zip(varying, skey)), varying) or "measured"
        draw_series(axes, axis, srows, xof, label, i, len(series),
                    (min(xs), max(xs), log))
    if axis == "compute_nodes":
        draw_ideal(axes[0], sorted(set(xs)))
    format_axes(axes, axis, xlabel, xs, log)
    fig.suptitle(text)
    place_legend(fig, axes)
    return fig


def draw_series(axes, axis, rows, xof, label, i, n, span):
    """One series in both panels: speedup and time (compute nodes), else
    time and remote MB, each point the run's median with bars from its
    fastest to its slowest trial; an unbounded cache's run as a level."""
    pts = sorted(((xof(r), r) for r in rows if xof(r) is not None), key=lambda p: p[0])
    xs = dodged([x for x, _ in pts], i, n, *span)
    rs = [r for _, r in pts]
    style = series_style(i)
    time = [num(r, "time_median_s") for r in rs]
    terr = [[t - num(r, "time_min_s") for t, r in zip(time, rs)],
            [num(r, "time_max_s") - t for t, r in zip(time, rs)]]
    mb = [num(r, "remote_bytes_median") / 1e6 for r in rs]
    mberr = [[m - num(r, "remote_bytes_min") / 1e6 for m, r in zip(mb, rs)],
             [num(r, "remote_bytes_max") / 1e6 - m for m, r in zip(mb, rs)]]
    if axis == "compute_nodes" and xs:
        speedup = [time[0] / t if t else math.nan for t in time]
        axes[0].plot(xs, speedup, label=label, **style)
        if n <= 4:
            for x, v in zip(xs, speedup):
                axes[0].annotate(f"{v:.2f}x", (x, v), textcoords="offset points",
                                 xytext=(5, 4 - 12 * (i % 2)), fontsize=8, color=style["color"])
        axes[1].errorbar(xs, time, yerr=terr, label=label, **style)
    elif xs:
        axes[0].errorbar(xs, time, yerr=terr, label=label, **style)
        axes[1].errorbar(xs, mb, yerr=mberr, label=label, **style)
    for r in rows:
        if xof(r) is None:
            level = dict(color=style["color"], linestyle=LEVELS[i % len(LEVELS)], lw=1.1,
                         label="unbounded cache" if label == "measured"
                         else f"{label}, unbounded cache")
            axes[0].axhline(num(r, "time_median_s"), **level)
            axes[1].axhline(num(r, "remote_bytes_median") / 1e6, **level)


def draw_ideal(ax, xs):
    ax.plot(xs, [x / xs[0] for x in xs], color="gray", linestyle=":", lw=1.0, zorder=1,
            label="ideal (linear)")


def format_axes(axes, axis, xlabel, xs, log):
    xs = sorted(set(xs))
    if axis == "compute_nodes":
        axes[0].set_ylabel(f"speedup over {xs[0]:g} compute node{'s' if xs[0] != 1 else ''}")
        axes[1].set_ylabel(TIME_LABEL)
    else:
        axes[0].set_ylabel(TIME_LABEL)
        axes[1].set_ylabel(MB_LABEL)
    for ax in axes:
        ax.set_xlabel(xlabel)
        ax.grid(True, which="both", alpha=0.3)
        if log:
            log_x_ticks(ax, xs, xlabel.startswith("cache size (%"))
        else:
            ax.set_xticks(xs)
        # A range over 30x (a baseline 30x slower, say): a log axis, so
        # that the small values are not flattened to the floor.
        ys = [y for line in ax.get_lines() for y in line.get_ydata()
              if isinstance(y, (int, float)) and y > 0]
        if ys and max(ys) / min(ys) > 30 and not (axis == "compute_nodes" and ax is axes[0]):
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)


def log_x_ticks(ax, xs, percent):
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter
    ax.set_xscale("log")
    if percent:   # a tick at every size of the sweep, as a plain number
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{x:g}" for x in xs])
        ax.minorticks_off()
    else:
        ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())


# ---------------------------------------------------------------- the ablation

def ablation_figures(plt, rows):
    """(stem, figure) per graph x algorithm of the [ablation] grid: time
    and remote MB per update_mode/direction, a bar per group (transport,
    nodes, cache); auto/auto hatched."""
    dims, groups = report.ablation_groups(report.best_rows(rows))
    panels = {}   # (graph, algo) -> {group key: {(mode, dir): row}}
    for k, group in groups.items():
        g = dict(zip(dims, k))
        panels.setdefault((g["graph"], g["algorithm"]), {})[k] = group
    for (graph, algo), gs in sorted(panels.items()):
        yield (f"ablation-{graphs.slug(graph)}-{algo}",
               ablation_figure(plt, graph, algo, gs, dims))


def ablation_figure(plt, graph, algo, gs, dims):
    from matplotlib.patches import Patch
    combos = sorted({c for g in gs.values() for c in g}, key=report.combo_order)
    # Taller panels: the rotated tick labels take their share.
    text, height = title_lines(f"{algo} on {graph}: update_mode x direction ablation "
                               "(hatched: auto/auto)", panels=PANEL_HEIGHT + 0.5)
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH, height))
    width = 0.8 / len(gs)
    handles = []
    for si, k in enumerate(sorted(gs)):
        g = dict(zip(dims, k))
        label = (f"{g['transport']}, C={g['compute_nodes']} M={g['memory_nodes']}, "
                 f"cache {g['cache']}")
        x0 = (si - (len(gs) - 1) / 2) * width
        for ax, value in ((axes[0], report.secs), (axes[1], report.mb)):
            ablation_bars(ax, [gs[k].get(c) for c in combos], combos, x0, width, value,
                          dict(color=f"C{si % 10}", label=label))
        # The legend's swatch unhatched: hatching marks auto/auto only.
        handles.append(Patch(facecolor=f"C{si % 10}", edgecolor="black", linewidth=0.4,
                             label=label))
    for ax, ylabel in ((axes[0], TIME_LABEL), (axes[1], MB_LABEL)):
        ax.set_xticks(range(len(combos)))
        ax.set_xticklabels([f"{m}/{d}" for m, d in combos], rotation=45, ha="right")
        ax.set_xlabel("--update_mode / --direction")
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(text)
    # Above the panels: inside one, a legend would hide bars.
    place_legend(fig, axes, handles=handles, inside=False)
    return fig


def ablation_bars(ax, rows, combos, x0, width, value, style):
    """One group's bars; a run that has none says why (T/O, ERR, skip)."""
    xs, ys, auto = [], [], []
    for ci, (r, combo) in enumerate(zip(rows, combos)):
        if report.ok(r):
            xs.append(ci + x0)
            ys.append(value(r))
            auto.append(combo == ("auto", "auto"))
        elif r is not None:
            ax.text(ci + x0, 0, report.cell(r, None), rotation=90, fontsize=7,
                    ha="center", va="bottom", color="gray")
    bars = ax.bar(xs, ys, width, edgecolor="black", linewidth=0.4, **style)
    for bar, a in zip(bars, auto):
        if a:
            bar.set_hatch("//")
