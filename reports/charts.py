"""Charts of a Suite as inline SVG: bytes per call, encode/decode time, the size/CPU Pareto
front, compression levels, per-call latency tails and the stage split of multi-step codecs.

Each chart is drawn only from codecs that have the figures it needs; a chart with no
data is skipped. An axis whose values span 10x or more is drawn on a log scale; codecs
with undeclared failures are marked in red on every chart. matplotlib runs headless
(Agg backend), and every figure is closed.
"""

from __future__ import annotations

import functools
import io
import math
import os
import re
from collections import defaultdict
from typing import AbstractSet, Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from rpcbench.results import CodecResult, Sizes, Suite, Timing
from rpcbench import worker
from rpcbench.watch import started

from .chart_kit import (COLORS, DOMINATED, FAILING, FAILING_MARK, note_right, place_labels, plain_log, plt,
                        value_axis)
from .decision import Decision
from .formatting import fmt_ratio, fmt_us, latency_us
from . import loss
from .wire import tick_series

WIDTH_IN = 10.5
DECISION_WIDTH_IN = 6.6  #: the first screen's chart, beside the verdict: about 630 px wide on the page
FRONT_IN = 3.1  #: height of its front panel, inches
PICK = "#2e7d32"  #: the verdict's pick: the capacity table's green
UP_COLOR = "#a8bfe0"  #: client-to-server kbit/s, stacked after the downstream
LOSS_MARKERS = ("o", "s", "^", "D", "v", "P")  #: one per codec of the loss chart, on both its panels
WIRE_CODECS = 5  #: codecs on the kbit/s-against-tick chart: the fewest wire bytes under the chosen policy
PNG_DPI = 150  #: --charts PNGs: sharp on a slide
STAGE_ROOM = 1.45  #: the stages chart's axis reaches this many times its longest bar (room for the note right of it)
LABEL_CHAR_SHARE = 0.0085  #: share of a bar chart's axis one character of an 8 pt label takes at the page's width
STAGE_COLORS = ("#4c72b0", "#dd8452", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd")
#: per-call percentile -> (marker, size, colour) in the tails chart
TAIL_MARKS = {"p90": ("|", 140, "black"), "p99": ("D", 30, "#c44e52"), "max": ("x", 30, "#555555")}
_LEVEL_ID = re.compile(r"^(?P<series>.+\+[a-z0-9_]+)-(?P<level>-?\d+)$")


def sizes(r: CodecResult) -> Sizes:
    """The codec's byte figures; only called on codecs a chart kept because they have them."""
    if r.sizes is None:
        raise ValueError(f"{r.codec} has no byte figures")
    return r.sizes


def encoded(r: CodecResult) -> Timing:
    """The codec's encode timing; only called on codecs a chart kept because they have one."""
    if r.encode is None:
        raise ValueError(f"{r.codec} has no encode timing")
    return r.encode


def render_charts(d: Decision, files: Optional[str] = None) -> Dict[str, str]:
    """Every chart that has data, as chart name -> SVG markup to put inline in report.html; with ``files`` (a
    folder, created if needed), also each chart as ``<name>.png`` and ``<name>.svg`` there, for slides. With two
    CPUs, every other chart is drawn in a forked process beside this one (drawing is 1-1.5 s of the run's end)."""
    names = tuple(CHARTS)
    aside = started(functools.partial(_draw, d, names[1::2], files)) if _two_cpus() else None
    try:
        drawn = _draw(d, names[0::2] if aside else names, files)
        if aside is not None:
            drawn.update(aside.result())
    finally:
        if aside is not None:
            aside.stop()
    return {name: drawn[name] for name in names if name in drawn}


def _two_cpus() -> bool:
    """Whether a forked process can draw beside this one on a CPU of its own."""
    return worker.available() and worker.usable_cpus() >= 2


def _draw(d: Decision, names: Sequence[str], files: Optional[str]) -> Dict[str, str]:
    """The charts ``names`` that have data, as name -> inline SVG (and their files, with ``files``)."""
    rendered = {}
    for name in names:
        fig = CHARTS[name](d)
        if fig is None:
            continue
        out = io.StringIO()
        try:  # text stays text (smaller, selectable); a fixed salt keeps the page the same from run to run
            with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": name}):
                fig.savefig(out, format="svg", bbox_inches="tight", pad_inches=0.15, metadata={"Date": None})
                if files is not None:
                    os.makedirs(files, exist_ok=True)
                    for kind, meta in (("svg", {"Date": None}), ("png", {})):
                        fig.savefig(os.path.join(files, f"{name}.{kind}"), format=kind, dpi=PNG_DPI,
                                    bbox_inches="tight", pad_inches=0.15, metadata=meta)
        finally:
            plt.close(fig)
        rendered[name] = inline_svg(out.getvalue(), name)
    return rendered


_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.S)
_IDS = re.compile(r"""(\bid="|url\(#|href="#)([^"')]+)""")


def inline_svg(svg: str, prefix: str) -> str:
    """matplotlib's SVG document as an element for an HTML page: the XML prolog and doctype dropped, every id
    (and reference to one) prefixed with ``prefix`` so that two charts on one page never share an id."""
    return _IDS.sub(lambda m: f"{m[1]}{prefix}-{m[2]}", _PROLOG.sub("", svg, count=1))


def bytes_chart(d: Decision) -> Optional[Figure]:
    """Mean bytes per call as bars, p50 and p99 as marks, each bar labelled with its mean (and x the reference)."""
    suite = d.suite
    rows = [r for r in suite.results if r.sizes]
    if not rows:
        return None
    fig, ax = _bar_figure([(r.codec, r) for r in rows], d.failing)
    y = range(len(rows))
    ax.barh(y, [sizes(r).mean for r in rows], color=COLORS["bytes"], height=0.6, label="mean")
    ax.hlines(y, [sizes(r).p50 for r in rows], [sizes(r).p99 for r in rows], color="#888888", lw=1, zorder=2)
    ax.scatter([sizes(r).p50 for r in rows], y, marker="|", s=260, linewidths=2, color="black", label="p50", zorder=3)
    ax.scatter([sizes(r).p99 for r in rows], y, marker="|", s=260, linewidths=2, color="#c44e52", label="p99", zorder=3)
    for i, r in enumerate(rows):
        ratio = d.figures[r.codec].bytes_ratio
        text = f"mean {sizes(r).mean:.0f} B" + (f" = {fmt_ratio(ratio)} {d.reference}" if ratio is not None else "")
        note_right(ax, (max(sizes(r).mean, sizes(r).p99), i), text, fontsize=9)
    scale = value_axis(ax, [sizes(r).mean for r in rows], room=1.3, reach=[sizes(r).p99 for r in rows])
    _frame(ax, f"bytes per call{scale} (bar = mean; line from p50 to p99)", "Bytes on the wire per RPC call")
    _legend_below(fig)
    return fig


def timing_chart(d: Decision) -> Optional[Figure]:
    """Encode and decode µs per call side by side; error bars are the median's 95 % confidence interval."""
    suite = d.suite
    rows = [r for r in suite.results if r.encode or r.decode]
    if not rows:
        return None
    fig, ax = _bar_figure([(r.codec, r) for r in rows], d.failing, per_row=0.42)
    for offset, kind in ((-0.2, "encode"), (0.2, "decode")):
        timings: List[Optional[Timing]] = [getattr(r, kind) for r in rows]
        ys = [i + offset for i in range(len(rows))]
        errors = list(zip(*(_ci_range(t) if t else (0.0, 0.0) for t in timings)))
        ax.barh(ys, [t.median_us if t else float("nan") for t in timings], height=0.38, color=COLORS[kind],
                xerr=errors, error_kw={"elinewidth": 1, "capsize": 2}, label=kind)
        for y, t in zip(ys, timings):
            note_right(ax, (t.ci_us[1] if t else 0, y), fmt_us(t.median_us) if t else f"{kind}: n/a")
    # linear even when the values span 10x: on a log axis a bar's length says nothing; each bar is labelled
    scale = value_axis(ax, [v for r in rows for t in (r.encode, r.decode) if t for v in t.ci_us[:2]], room=1.15,
                        log=False)
    _frame(ax, f"µs per call{scale} (bar = median round; whiskers = its 95% confidence interval)",
           "Encode and decode CPU time per RPC call")
    _legend_below(fig)
    return fig


def _legend_below(fig: Figure) -> None:
    """One legend row under the plot, where it can't cover a bar's label."""
    fig.legend(loc="outside lower center", frameon=False, fontsize=9, ncols=4)


def pareto_chart(d: Decision) -> Optional[Figure]:
    """Each codec a point on the front's axes (encode + decode µs, bytes per call: as sent under the decided --wire
    policy, else per message); the Pareto front joined by its line and named, the verdict's pick ringed, dominated
    codecs grey, codecs with undeclared failures red (they cannot be on the front)."""
    if not _front_rows(d):
        return None
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 6.5), layout="constrained")
    _front_panel(fig, ax, d, every_label=True)
    ax.set_title("Size vs CPU: the Pareto front")
    _legend_below(fig)
    return fig


def decision_chart(d: Decision) -> Optional[Figure]:
    """The decision at a glance, for the first screen beside the verdict: the Pareto front with the pick ringed
    (above), and kbit/s per player both ways of the capacity table's leading codecs, the pick, the baseline and the
    front, with the figures of that table (below; left out when the run has no capacity plan). Each panel is a
    subfigure of its own, so the bars' long codec names do not narrow the front's plot."""
    if not _front_rows(d):
        return None
    lead = d.capacity_rows
    rates_in = 0.85 + 0.21 * len(lead) if lead else 0.0
    fig = plt.figure(figsize=(DECISION_WIDTH_IN, FRONT_IN + rates_in), layout="constrained")
    if lead:
        grid = fig.add_gridspec(2, 1, height_ratios=(FRONT_IN, rates_in))
        _rate_panel(fig.add_subfigure(grid[1]).subplots(), d)
        front_ax = fig.add_subfigure(grid[0]).subplots()
    else:
        front_ax = fig.subplots()
    _front_panel(fig, front_ax, d, every_label=False)
    front_ax.set_title("The Pareto front and the pick", fontsize=11)
    return fig


def _front_rows(d: Decision) -> List[CodecResult]:
    """The codecs with a point on the front's axes."""
    axes = d.front_axes
    return [r for r in d.suite.results if r.codec in axes.bytes and r.codec in axes.cpu]


def _front_panel(fig: Figure, ax: Axes, d: Decision, every_label: bool) -> None:
    """The front on ``ax``: its codecs joined and named, the pick ringed, failing codecs red and named; dominated
    codecs grey, each named when ``every_label`` (else only the baseline among them: the first screen's chart is
    small)."""
    axes, rows = d.front_axes, _front_rows(d)
    if not every_label:  # a codec not compared stands on its own calls: the verdict's notes give its figures
        rows = [r for r in rows if r.codec not in {codec for codec, _ in d.verdict.partial}]
    front = [d.suite.result(c) for c in d.front]
    pick = d.verdict.pick if d.verdict.pick and d.verdict.pick in rows else None
    baseline = d.verdict.baseline

    def xy(r: CodecResult) -> Tuple[float, float]:
        return axes.cpu[r.codec], axes.bytes[r.codec]

    def cpu(codecs: List[CodecResult]) -> List[float]:
        return [axes.cpu[r.codec] for r in codecs]

    def size(codecs: List[CodecResult]) -> List[float]:
        return [axes.bytes[r.codec] for r in codecs]

    ax.plot(cpu(front), size(front), "-", color=COLORS["encode"], lw=1.5, zorder=2,
            label="Pareto front: no codec is both smaller and cheaper")
    ax.scatter(cpu(front), size(front), s=45, color=COLORS["encode"], zorder=4)
    others = [r for r in rows if r not in front]
    failing = [r for r in others if r.codec in d.failing]
    dominated = [r for r in others if r not in failing]
    ax.scatter(cpu(dominated), size(dominated), s=25, color=DOMINATED, zorder=3, label="dominated")
    if failing:
        ax.scatter(cpu(failing), size(failing), s=45, marker="X", color=FAILING, zorder=3,
                   label="undeclared failures (not ranked)")
    if pick:
        ax.scatter(cpu([pick]), size([pick]), s=220, facecolors="none", edgecolors=PICK, linewidths=2.2, zorder=5,
                   label=f"the verdict's pick ({d.options.goal})")
    labels = [(r, r.codec, {"fontsize": 9, "fontweight": "bold", "color": PICK if r is pick else "black"})
              for r in ([pick] if pick else []) + [r for r in front if r is not pick]]
    labels += [(r, r.codec + FAILING_MARK, {"fontsize": 8, "color": FAILING}) for r in failing]
    if every_label:
        labels += _dominated_labels(dominated)
    elif baseline in dominated:
        labels.append((baseline, f"{baseline.codec} (baseline)", {"fontsize": 8, "color": "#555555"}))
    x_scale = value_axis(ax, cpu(rows), room=1.25, axis="x")
    y_scale = value_axis(ax, size(rows), room=1.15, axis="y")
    place_labels(fig, ax, [(xy(r), text, style) for r, text, style in labels],
                 [xy(r) for r in rows if r.codec not in {named.codec for named, _, _ in labels}])
    ax.text(0.01, 0.02, "lower left is better: fewer bytes, less CPU", transform=ax.transAxes, fontsize=9,
            color="#555555", style="italic")
    if every_label:
        ax.set_xlabel(f"{axes.cpu_label}{x_scale}")
        ax.set_ylabel(f"{axes.bytes_label}{y_scale}")
    else:  # the sentence beside the chart names the axes in full
        ax.set_xlabel(axes.cpu_label.split(" (")[0] + x_scale, fontsize=9)
        ax.set_ylabel(axes.bytes_label.split(" (")[0] + y_scale, fontsize=9)
    ax.grid(alpha=0.3, which="both")


def _rate_panel(ax: Axes, d: Decision) -> None:
    """kbit/s per player, down and up stacked, of the capacity table's leading rows, each written as the table
    writes it; the pick's row in the pick's colour."""
    rows = d.capacity_rows
    down = [r.figures.down_kbps.value for r in rows]
    up = [r.figures.up_kbps.value for r in rows]
    y = range(len(rows))
    ax.barh(y, down, height=0.62, color=[PICK if r.role == "recommended" else COLORS["bytes"] for r in rows],
            label="down (server to client)")
    ax.barh(y, up, left=down, height=0.62, color=UP_COLOR, label="up")
    for i, (low, high) in enumerate(zip(down, up)):
        note_right(ax, (low + high, i), f"{low:,.1f} down + {high:,.1f} up")
    ax.set_yticks(list(y), [r.codec + (f" ({r.role})" if r.role else "") for r in rows], fontsize=9)
    for tick, r in zip(ax.get_yticklabels(), rows):
        tick.set_fontweight("bold" if r.role == "recommended" else "normal")
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, max(a + b for a, b in zip(down, up)) * 1.6)
    headers = "payload only" if d.plan.transport.name == "none" else f"{d.plan.transport.name} headers included"
    ax.set_xlabel(f"kbit/s per player, both ways ({headers})", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    ax.set_title("kbit/s per player, as in Capacity and cost", fontsize=11)


def _dominated_labels(dominated: List[CodecResult]) -> List[Tuple[CodecResult, str, Dict[str, Any]]]:
    """Grey labels for dominated codecs; a compression-level series (whose points crowd together) is named once,
    at its lowest level (``json+zlib-1,9``), and the other points of a longer series carry just their level number."""
    style = {"fontsize": 8, "color": "#777777"}
    labels: List[Tuple[CodecResult, str, Dict[str, Any]]] = []
    in_series: Set[str] = set()
    for name, points in _level_series(dominated).items():
        levels = [str(level) for level, _ in points]
        span = ",".join(levels) if len(levels) <= 3 else f"{levels[0]}..{levels[-1]}"
        labels.append((points[0][1], f"{name}-{span}", style))
        if len(levels) > 3:  # a short series is named whole above: a lone level number beside it would be a stray
            labels += [(r, str(level), style) for level, r in points[1:]]
        in_series.update(r.codec for _, r in points)
    return labels + [(r, r.codec, style) for r in dominated if r.codec not in in_series]


def levels_chart(d: Decision) -> Optional[Figure]:
    """One row per codec+compressor run at two or more levels: bytes (left) and encode µs (right) by level."""
    suite = d.suite
    series = _level_series([r for r in suite.results if r.sizes and r.encode])
    if not series:
        return None
    fig, axes = plt.subplots(len(series), 2, figsize=(WIDTH_IN + 1, 0.8 + 3.6 * len(series)), layout="constrained",
                             squeeze=False)
    for (name, points), (left, right) in zip(series.items(), axes):
        base = _base_result(suite, name)
        _level_panel(left, points, d.failing, lambda r: sizes(r).mean, None, "{:.0f}", COLORS["bytes"],
                     sizes(base).mean if base else None, f"{name}: bytes per call (mean)")
        _level_panel(right, points, d.failing, lambda r: encoded(r).median_us, lambda r: _ci_range(encoded(r)),
                     "{:.1f}", COLORS["encode"], encoded(base).median_us if base else None,
                     f"{name}: encode µs per call (median)")
        if base:
            left.legend(loc="lower right", fontsize=8)
    fig.suptitle("Compression level: bytes vs encode time", fontweight="bold")
    return fig


def tails_chart(d: Decision) -> Optional[Figure]:
    """Per-call encode and decode time over all calls: bar to p50, marks at p90, p99 and max, log scale."""
    suite = d.suite
    rows = [r for r in suite.results if latency_us(r, "encode", "p50") or latency_us(r, "decode", "p50")]
    if not rows:
        return None
    fig, ax = _bar_figure([(r.codec, r) for r in rows], d.failing, per_row=0.48)
    values = {(r.codec, op, pct): latency_us(r, op, pct) for r in rows for op in ("encode", "decode")
              for pct in ("p50", *TAIL_MARKS)}
    known = [v for v in values.values() if v]
    floor, top = min(known) / 2, max(known)
    for offset, op in ((-0.2, "encode"), (0.2, "decode")):
        ys = [i + offset for i in range(len(rows))]
        pcts = {pct: [values[r.codec, op, pct] or float("nan") for r in rows] for pct in ("p50", *TAIL_MARKS)}
        ax.barh(ys, [p - floor for p in pcts["p50"]], left=floor, height=0.36, color=COLORS[op], label=f"{op} p50")
        ax.hlines(ys, pcts["p50"], pcts["max"], color="#999999", lw=1, zorder=2)
        for pct, (marker, size, color) in TAIL_MARKS.items():
            ax.scatter(pcts[pct], ys, marker=marker, s=size, color=color, zorder=3,
                       label=pct if op == "encode" else None)
        for y, p50, p99, high in zip(ys, pcts["p50"], pcts["p99"], pcts["max"]):
            text = f"{op}: n/a" if math.isnan(p50) else f"p50 {fmt_us(p50)} · p99 {fmt_us(p99)} µs"
            note_right(ax, (floor if math.isnan(high) else high, y), text)
    ax.set_xscale("log")
    plain_log(ax.xaxis)
    ax.set_xlim(floor, top * 8)
    _frame(ax, "µs per call, log scale (bar = median call; marks at p90, p99 and the slowest call)",
           "Per-call latency tails: encode and decode, all calls")
    fig.legend(loc="outside lower center", frameon=False, fontsize=9, ncols=5)
    return fig


def stages_chart(d: Decision) -> Optional[Figure]:
    """Stacked bars of stage medians for each multi-step codec's encode and decode; tick = whole op timed alone."""
    suite = d.suite
    rows = [(r, op) for r in suite.results for op in ("encode", "decode") if r.stages.get(op)]
    if not rows:
        return None
    fig, ax = _bar_figure([(f"{r.codec} {op}", r) for r, op in rows], d.failing, per_row=0.36)
    colors = _stage_colors(rows)
    right = max(max(sum(t.median_us for t in r.stages[op].values()),
                    getattr(r, op).median_us if getattr(r, op) else 0) for r, op in rows)
    for y, (r, op) in enumerate(rows):
        left = 0.0
        for name, t in r.stages[op].items():
            ax.barh(y, t.median_us, left=left, height=0.6, color=colors[name], edgecolor="white")
            label = f"{name} {fmt_us(t.median_us)}"
            if t.median_us > len(label) * LABEL_CHAR_SHARE * right * STAGE_ROOM:  # only a label that fits
                ax.text(left + t.median_us / 2, y, label, ha="center", va="center",
                        fontsize=8, color="white", fontweight="bold")
            left += t.median_us
        whole = getattr(r, op)
        note_right(ax, (max(left, whole.median_us if whole else 0), y),
                    f"{fmt_us(left)} µs" + (f" (whole {fmt_us(whole.median_us)})" if whole else ""))
        if whole:
            ax.scatter([whole.median_us], [y], marker="|", s=400, linewidths=2, color="black", zorder=3)
    ax.set_xlim(0, right * STAGE_ROOM)
    _frame(ax, "µs per call (segments = median of each stage timed on its own; black tick = whole "
           "op's median)", "Where the time goes: stages of multi-step codecs")
    ax.legend(handles=[Patch(color=c, label=name) for name, c in colors.items()], loc="lower right", fontsize=8)
    return fig


def _frame(ax: Axes, xlabel: str, title: str) -> None:
    """The x label and title of a bar chart."""
    ax.set_xlabel(xlabel)
    ax.set_title(title)


def _stage_colors(rows: List[Tuple[CodecResult, str]]) -> Dict[str, str]:
    """One colour per stage name, the same in every codec, in order of first appearance."""
    names = dict.fromkeys(name for r, op in rows for name in r.stages[op])
    return {name: STAGE_COLORS[i % len(STAGE_COLORS)] for i, name in enumerate(names)}


def _level_panel(ax: Axes, points: List[Tuple[int, CodecResult]], failing: AbstractSet[str],
                 value: Callable[[CodecResult], float],
                 spread: Optional[Callable[[CodecResult], Tuple[float, float]]], fmt: str, color: str,
                 baseline: Optional[float], title: str) -> None:
    """One figure against level, values annotated, whiskers if ``spread``, the uncompressed codec dashed."""
    levels, values = [lvl for lvl, _ in points], [value(r) for _, r in points]
    errors = list(zip(*(spread(r) for _, r in points))) if spread else None
    ax.errorbar(levels, values, yerr=errors, fmt="o-", color=color, capsize=3, elinewidth=1, label="compressed")
    for (lvl, r), v in zip(points, values):
        bad = r.codec in failing
        ax.annotate(fmt.format(v) + (FAILING_MARK if bad else ""), (lvl, v), xytext=(5, 5), textcoords="offset points",
                    fontsize=8, color=FAILING if bad else "black",
                    bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none"})
    if baseline is not None:
        ax.axhline(baseline, ls="--", lw=1, color="#555555", label="uncompressed")
    ax.set_xticks(levels)
    ax.set_xlim(levels[0] - 0.5, levels[-1] + 0.8)
    ax.set_ylim(0, ax.get_ylim()[1] * 1.08)
    ax.set_xlabel("compression level")
    ax.set_title(title, fontsize=10.5)
    ax.grid(alpha=0.3)


def _bar_figure(rows: List[Tuple[str, CodecResult]], failing_codecs: AbstractSet[str],
                per_row: float = 0.34) -> Tuple[Figure, Axes]:
    """A horizontal-bar figure tall enough for one readable row per (label, codec), first on top;
    codecs with undeclared failures labelled in red with a warning mark."""
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 1.4 + per_row * len(rows)), layout="constrained")
    failing = [r.codec in failing_codecs for _, r in rows]
    ax.set_yticks(range(len(rows)), [label + (FAILING_MARK if bad else "") for (label, _), bad in zip(rows, failing)])
    for tick, bad in zip(ax.get_yticklabels(), failing):
        if bad:
            tick.set_color(FAILING)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.grid(axis="x", alpha=0.3, which="both")
    ax.set_axisbelow(True)
    return fig, ax


def _level_series(rows: List[CodecResult]) -> Dict[str, List[Tuple[int, CodecResult]]]:
    """``json+zlib`` -> [(level, result), ...] by level, for series run at two or more levels."""
    series: Dict[str, List[Tuple[int, CodecResult]]] = defaultdict(list)
    for r in rows:
        m = _LEVEL_ID.match(r.codec)
        if m:
            series[m["series"]].append((int(m["level"]), r))
    return {name: sorted(points, key=lambda p: p[0]) for name, points in series.items() if len(points) >= 2}


def _ci_range(t: Timing) -> Tuple[float, float]:
    """How far the median's confidence interval reaches below and above the median, in µs."""
    lo, hi, _ = t.ci_us
    return t.median_us - lo, hi - t.median_us


def _base_result(suite: Suite, series: str) -> Optional[CodecResult]:
    """The uncompressed codec of a series (``json`` for ``json+zlib``), if measured."""
    base = suite.find(series.split("+")[0])
    return base if base and base.sizes and base.encode else None


#: chart name -> drawing function, in the order the page shows them
def wire_chart(d: Decision) -> Optional[Figure]:
    """kbit/s per player (both ways, headers included) against tick length, for the leading codecs."""
    w = d.wire
    leading = [c for c in w.rankings.get(w.chosen or "", ())][:WIRE_CODECS]
    series = tick_series(w, leading)
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 4.2), layout="constrained")
    for codec, points in series.items():
        ax.plot([t for t, _ in points], [k for _, k in points], marker="o", label=codec)
    ax.set_ylim(bottom=0)
    _frame(ax, "tick length, ms (--wire tick:MS)", f"kbit/s per player on the wire ({w.headers})")
    ax.set_ylabel("kbit/s per player, both ways")
    _legend_below(fig)
    return fig


def loss_chart(d: Decision) -> Optional[Figure]:
    """Against the loss rate, for the codecs the decision leads with (:attr:`Decision.loss_codecs`): kbit/s per player
    on the wire, both ways (left), and the delay loss adds, p99, of those not over plain UDP (right); the decided
    rate dotted. Each codec keeps its colour and marker on both panels."""
    v = d.loss
    panels = [loss.series(v, d.loss_codecs, "kbps"), loss.series(v, loss.delayed(v, d.loss_codecs), "latency_p99_ms")]
    if not v.shown or len(v.rates) < 2 or not panels[0]:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(WIDTH_IN, 3.8), layout="constrained")
    pick = d.verdict.pick.codec if d.verdict.pick else None
    style = {c: (f"C{i % 10}", LOSS_MARKERS[i % len(LOSS_MARKERS)]) for i, c in enumerate(panels[0])}
    for ax, lines in zip(axes, panels):
        for codec, points in lines.items():
            colour, marker = style[codec]
            ax.plot([x for x, _ in points], [y for _, y in points], marker=marker, color=colour,
                    label=codec + (" (recommended)" if codec == pick else "") if ax is axes[0] else None,
                    linewidth=2.6 if codec == pick else 1.4, zorder=3 if codec == pick else 2)
        ax.axvline(v.chosen, color=DOMINATED, linestyle=":", zorder=1)
        ax.set_xticks(list(v.rates), [f"{r:g}" for r in v.rates])
        ax.set_ylim(bottom=0)
        ax.set_xlabel(f"loss, % of packets (dotted: the verdict's {loss.pct(v.chosen or 0.0)})")
    axes[0].set_title(f"kbit/s per player on the wire ({v.policy})")
    axes[0].set_ylabel("kbit/s per player, both ways")
    axes[1].set_title("Delay added by loss, p99")
    axes[1].set_ylabel("ms over loss-free delivery")
    if not panels[1]:
        axes[1].text(0.5, 0.5, "every codec shown goes over plain UDP:\nno delay, lost calls instead",
                     transform=axes[1].transAxes, ha="center", va="center", color="#555555")
    _legend_below(fig)
    return fig


CHARTS: Dict[str, Callable[[Decision], Optional[Figure]]] = {
    "decision": decision_chart,
    "pareto": pareto_chart,
    "bytes": bytes_chart,
    "timing": timing_chart,
    "levels": levels_chart,
    "wire": wire_chart,
    "loss": loss_chart,
    "tails": tails_chart,
    "stages": stages_chart,
}
