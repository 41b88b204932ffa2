"""Charts of a Suite as inline SVG: bytes per call, encode/decode time, the size/CPU Pareto
front, compression levels, per-call latency tails and the stage split of multi-step codecs.

Each chart is drawn only from codecs that have the figures it needs; a chart with no
data is skipped. An axis whose values span 10x or more is drawn on a log scale; codecs
with undeclared failures are marked in red on every chart. matplotlib runs headless
(Agg backend), and every figure is closed.
"""

from __future__ import annotations

import io
import math
import os
import re
from collections import defaultdict
from typing import AbstractSet, Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import matplotlib

matplotlib.use("Agg")  # no display: must come before pyplot is imported
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.text import Annotation  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from rpcbench.results import CodecResult, Sizes, Suite, Timing  # noqa: E402

from .decision import Decision  # noqa: E402
from .formatting import fmt_ratio, fmt_us, latency_us  # noqa: E402
from .wire import tick_series  # noqa: E402

WIDTH_IN = 10.5
WIRE_CODECS = 5  #: codecs on the kbit/s-against-tick chart: the fewest wire bytes under the chosen policy
LOG_RANGE = 10  #: an axis whose largest value is this many times its smallest is drawn on a log scale
PNG_DPI = 150  #: --charts PNGs: sharp on a slide
STAGE_ROOM = 1.45  #: the stages chart's axis reaches this many times its longest bar (room for the note right of it)
LABEL_CHAR_SHARE = 0.0085  #: share of a bar chart's axis one character of an 8 pt label takes at the page's width
FAILING = "#c44e52"  #: colour of a codec with undeclared failures, on every chart
FAILING_MARK = " ⚠"  #: after such a codec's name
DOMINATED = "#b0b0b0"  #: codecs off the Pareto front
COLORS = {"bytes": "#4c72b0", "encode": "#dd8452", "decode": "#55a868"}
STAGE_COLORS = ("#4c72b0", "#dd8452", "#8172b3", "#937860", "#da8bc3", "#8c8c8c", "#ccb974", "#64b5cd")
#: per-call percentile -> (marker, size, colour) in the tails chart
TAIL_MARKS = {"p90": ("|", 140, "black"), "p99": ("D", 30, "#c44e52"), "max": ("x", 30, "#555555")}
_LEVEL_ID = re.compile(r"^(?P<series>.+\+[a-z0-9_]+)-(?P<level>-?\d+)$")

plt.rcParams.update({"font.size": 10, "axes.titlesize": 12, "axes.titleweight": "bold",
                     "axes.spines.top": False, "axes.spines.right": False})


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
    folder, created if needed), also each chart as ``<name>.png`` and ``<name>.svg`` there, for slides."""
    rendered = {}
    for name, draw in CHARTS.items():
        fig = draw(d)
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
        _note_right(ax, (max(sizes(r).mean, sizes(r).p99), i), text, fontsize=9)
    scale = _value_axis(ax, [sizes(r).mean for r in rows], room=1.3, reach=[sizes(r).p99 for r in rows])
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
            _note_right(ax, (t.ci_us[1] if t else 0, y), fmt_us(t.median_us) if t else f"{kind}: n/a")
    # linear even when the values span 10x: on a log axis a bar's length says nothing; each bar is labelled
    scale = _value_axis(ax, [v for r in rows for t in (r.encode, r.decode) if t for v in t.ci_us[:2]], room=1.15,
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
    policy, else per message); the Pareto front joined by its line and named, dominated codecs grey, codecs with
    undeclared failures red (they cannot be on the front)."""
    suite, axes = d.suite, d.front_axes
    rows = [r for r in suite.results if r.codec in axes.bytes and r.codec in axes.cpu]
    if not rows:
        return None
    front = [suite.result(c) for c in d.front]

    def cpu(r: CodecResult) -> float:
        return axes.cpu[r.codec]

    def size(r: CodecResult) -> float:
        return axes.bytes[r.codec]

    fig, ax = plt.subplots(figsize=(WIDTH_IN, 6.5), layout="constrained")
    xs, ys = [cpu(r) for r in front], [size(r) for r in front]
    ax.plot(xs, ys, "-", color=COLORS["encode"], lw=1.5, zorder=2, label="Pareto front: no codec is both smaller "
            "and cheaper")
    ax.scatter(xs, ys, s=45, color=COLORS["encode"], zorder=4)
    others = [r for r in rows if r not in front]
    failing = [r for r in others if r.codec in d.failing]
    dominated = [r for r in others if r not in failing]
    ax.scatter([cpu(r) for r in dominated], [size(r) for r in dominated], s=25, color=DOMINATED, zorder=3,
               label="dominated")
    if failing:
        ax.scatter([cpu(r) for r in failing], [size(r) for r in failing], s=45, marker="X", color=FAILING,
                   zorder=3, label="undeclared failures (not ranked)")
    labels = ([(r, r.codec, {"fontsize": 9, "fontweight": "bold"}) for r in front]
              + [(r, r.codec + FAILING_MARK, {"fontsize": 8, "color": FAILING}) for r in failing]
              + _dominated_labels(dominated))
    x_scale = _value_axis(ax, [cpu(r) for r in rows], room=1.25, axis="x")
    y_scale = _value_axis(ax, [size(r) for r in rows], room=1.15, axis="y")
    _place_labels(fig, ax, [((cpu(r), size(r)), text, style) for r, text, style in labels])
    ax.text(0.01, 0.02, "lower left is better: fewer bytes, less CPU", transform=ax.transAxes, fontsize=9,
            color="#555555", style="italic")
    ax.set_xlabel(f"{axes.cpu_label}{x_scale}")
    ax.set_ylabel(f"{axes.bytes_label}{y_scale}")
    ax.set_title("Size vs CPU: the Pareto front")
    ax.grid(alpha=0.3, which="both")
    _legend_below(fig)
    return fig


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
            _note_right(ax, (floor if math.isnan(high) else high, y), text)
    ax.set_xscale("log")
    _plain_log(ax.xaxis)
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
        _note_right(ax, (max(left, whole.median_us if whole else 0), y),
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


#: where a point's label may go, tried in order: (dx, dy) in points, horizontal and vertical alignment
_LABEL_SPOTS = ((6, 3, "left", "bottom"), (6, -3, "left", "top"), (-6, 3, "right", "bottom"),
                (-6, -3, "right", "top"), (0, 7, "center", "bottom"), (0, -7, "center", "top"),
                (6, 12, "left", "bottom"), (6, -12, "left", "top"), (-6, 12, "right", "bottom"),
                (-6, -12, "right", "top"))


def _place_labels(fig: Figure, ax: Axes, labels: List[Tuple[Tuple[float, float], str, Dict[str, Any]]]) -> None:
    """Label each (x, y) point at the first spot that overlaps no point and no earlier label."""
    fig.draw_without_rendering()  # settle the layout so display coordinates are final
    canvas = fig.canvas
    assert isinstance(canvas, FigureCanvasAgg), "charts are drawn with the Agg backend"
    renderer = canvas.get_renderer()
    xy = [point for point, _, _ in labels]
    taken = [Bbox.from_bounds(px - 4, py - 4, 8, 8) for px, py in ax.transData.transform(xy)]
    for point, (_, text, style) in zip(xy, labels):
        for spot in _LABEL_SPOTS:
            note = _annotate(ax, point, text, spot, style)
            if not any(note.get_window_extent(renderer).overlaps(box) for box in taken):
                break
            note.remove()
        else:  # crowded everywhere: the first spot it is
            note = _annotate(ax, point, text, _LABEL_SPOTS[0], style)
        taken.append(note.get_window_extent(renderer))


def _annotate(ax: Axes, point: Tuple[float, float], text: str, spot: Tuple[float, float, str, str],
              style: Dict[str, Any]) -> Annotation:
    dx, dy, ha, va = spot
    return ax.annotate(text, point, xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, **style)


def _note_right(ax: Axes, point: Tuple[float, float], text: str, fontsize: float = 8) -> None:
    """A label just right of a bar's end or mark, vertically centred on it."""
    _annotate(ax, point, text, (6, 0, "left", "center"), {"fontsize": fontsize})


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


def _value_axis(ax: Axes, values: List[float], room: float, axis: str = "x", reach: Sequence[float] = (),
                log: bool = True) -> str:
    """Fit the value axis to ``values`` (and the marks in ``reach``) with ``room`` (a factor) past the largest:
    a log scale when ``values`` span LOG_RANGE x or more (and ``log``), else linear from 0. Returns ", log scale"
    or "" for the axis label."""
    known = [v for v in values if v and not math.isnan(v)]
    if not known:
        return ""
    low, high = min(known), max([*known, *reach])
    limits = getattr(ax, f"set_{axis}lim")
    if log and max(known) / low >= LOG_RANGE:
        getattr(ax, f"set_{axis}scale")("log")
        _plain_log(ax.xaxis if axis == "x" else ax.yaxis)
        limits(low / 1.5, high * room ** 3)  # labels right of the bars need more room on a log axis
        return ", log scale"
    limits(0, high * room)
    return ""


def _level_series(rows: List[CodecResult]) -> Dict[str, List[Tuple[int, CodecResult]]]:
    """``json+zlib`` -> [(level, result), ...] by level, for series run at two or more levels."""
    series: Dict[str, List[Tuple[int, CodecResult]]] = defaultdict(list)
    for r in rows:
        m = _LEVEL_ID.match(r.codec)
        if m:
            series[m["series"]].append((int(m["level"]), r))
    return {name: sorted(points, key=lambda p: p[0]) for name, points in series.items() if len(points) >= 2}


def _plain_log(axis: Any) -> None:
    """Ticks of a log axis at 1, 2, 5 x 10^n, written as plain numbers (0.5, 1, 2, 5, 10), not powers of ten."""
    axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


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


CHARTS: Dict[str, Callable[[Decision], Optional[Figure]]] = {
    "pareto": pareto_chart,
    "bytes": bytes_chart,
    "timing": timing_chart,
    "levels": levels_chart,
    "wire": wire_chart,
    "tails": tails_chart,
    "stages": stages_chart,
}
