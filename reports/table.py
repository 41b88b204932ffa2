"""The results table, one row per codec: as fixed-width text for the terminal, and as
columns the HTML report and report.md render, so all show the same figures: those of the
:class:`~reports.decision.Decision` (ratios, stability, undeclared failures), never recomputed here."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence

from rpcbench.results import CONFIDENCE, CodecResult, Suite

from .analysis import PROJECTED_CONNECTIONS, OPS, OpFigures
from .breakdown import StageSplit
from .decision import Decision
from .formatting import MISSING, fmt_bytes, fmt_count, fmt_ratio, fmt_us, latency_us, memory_figure, shown


LOW_CONFIDENCE_MARK = "†"  #: after a ±CI figure whose interval covers the median with less than 95 % confidence


@dataclass(frozen=True)
class Column:
    """One table column: header, alignment, the cell text, whether a cell needs attention, and the number
    behind the text (what the report's table sorts by; None for text columns and missing figures)."""

    title: str
    numeric: bool
    cell: Callable[[CodecResult], str]
    alarm: Callable[[CodecResult], bool] = lambda r: False
    value: Callable[[CodecResult], Optional[float]] = lambda r: None
    key: str = ""  #: what the column is, whatever the reference codec's name in its title (``x ref``); "": title

    @property
    def kind(self) -> str:
        """The column's key, else its title: what KEEP_ORDER and report.md choose columns by."""
        return self.key or self.title


def figure_column(title: str, value: Callable[[CodecResult], Optional[float]], fmt: Callable[[float], str],
                  alarm: Callable[[CodecResult], bool] = lambda r: False, key: str = "") -> Column:
    """A numeric column: the figure ``value`` gives, written by ``fmt`` (the missing mark for None), sorted by it."""
    return Column(title, True, lambda r: shown(value(r), fmt), alarm, value, key)


def latency_column(op: str, pct: str, title: str) -> Column:
    """A column of one per-call percentile over all calls, µs."""
    return figure_column(title, lambda r: latency_us(r, op, pct), fmt_us)


def memory_column(op: str, key: str, title: str, fmt: Callable[[float], str] = fmt_bytes) -> Column:
    """A column of one allocation figure per call."""
    return figure_column(title, lambda r: memory_figure(r, op, key), fmt)


def columns(d: Decision) -> List[Column]:
    """The table's columns; the ratio to the reference codec (``x json``) only when there is one, CPU time only
    when a codec was timed (not after ``--sizes-only``)."""
    suite = d.suite
    cols = [
        Column("codec", False, lambda r: r.codec, lambda r: _failed(r, suite)),
        figure_column("calls", lambda r: r.calls, "{:,}".format),
    ]
    cols += [_fidelity_column(name, d) for name in ("failures", "mismatches")]
    cols += [
        figure_column("bytes mean", lambda r: d.figures[r.codec].bytes_mean, "{:.1f}".format),
        figure_column("p50", lambda r: r.sizes.p50 if r.sizes else None, str),
        figure_column("p99", lambda r: r.sizes.p99 if r.sizes else None, str),
    ]
    if d.reference:
        cols.append(figure_column(d.ratio_title("x "), lambda r: d.figures[r.codec].bytes_ratio, fmt_ratio,
                                  key="x ref"))
    if any(r.floor_ratio for r in suite.results):
        title = "x floor~" if (suite.trace.get("floor") or {}).get("estimated") else "x floor"
        cols.append(figure_column(title, lambda r: d.figures[r.codec].floor_ratio or None, fmt_ratio, key="x floor"))
    for op in OPS:
        cols += _timing_columns(op, d) if any(r.encode or r.decode for r in suite.results) else []
    cols += [figure_column("state/conn", lambda r: r.state_bytes_per_conn or 0, lambda v: fmt_bytes(v) if v else "0"),
             figure_column(f"{PROJECTED_CONNECTIONS // 1000}k conns",
                           lambda r: r.state_bytes_for(PROJECTED_CONNECTIONS), fmt_bytes)]
    cols.append(Column("note", False, lambda r: _note(r, d),
                       lambda r: _failed(r, suite) or bool(d.figures[r.codec].unstable)))
    return cols


def _failed(r: CodecResult, suite: Suite) -> bool:
    """The codec has an error worth a flag: not the untimed state every codec of a ``--sizes-only`` run is in."""
    return bool(r.error) and not suite.settings.get("sizes_only")


def footnotes(d: Decision) -> List[str]:
    """What the markers in the table mean, with the figures behind them."""
    suite = d.suite
    notes = [_ci_note(d)] if any(r.encode or r.decode for r in suite.results) else []
    if any(r.problems for r in suite.results):
        notes.append("declared: the codec documents this difference (a property of the format, e.g. bytes -> "
                     "base64 str); UNDECLARED: a call failed or came back different without the codec saying so.")
    notes += [f"{name}: {text}" for name, text in d.timing_notes]
    partial = [f.codec for f in d.figures.values() if f.same_calls]
    if partial:
        notes.append(f"partial: {', '.join(partial)} cannot send every call; bytes mean is over the calls it "
                     f"carries, and its {d.ratio_title('x ')}, enc/ and dec/ ratios are on those calls beside "
                     f"{d.reference} on the same calls (no x floor: the floor is over every call). Not compared "
                     "with the others: see the verdict.")
    floor = suite.trace.get("floor")
    if floor:
        notes.append(f"x floor: bytes per call over the trace's floor, {floor['bytes_per_call']:.1f} B/call"
                     f"{_floor_estimate(floor)}: each connection's whole stream of compact JSON compressed at once "
                     f"({_floor_compressors(floor)}; over {floor['calls']:,} of {floor['of_calls']:,} calls). A codec "
                     "sending each call as it happens can hardly reach it: it shows what is left on the table.")
    if any(r.state_bytes_for(1) for r in suite.results):
        notes.append("state/conn: memory one end of a connection keeps for the codec (the compressor of the stream "
                     "it sends and the decompressor of the one it receives), measured after replaying the trace; "
                     f"{PROJECTED_CONNECTIONS // 1000}k conns: that for {PROJECTED_CONNECTIONS:,} connections plus "
                     "what is shared by all (a dictionary).")
    if any(r.ordered_delivery for r in suite.results):
        notes.append("ordered: the codec keeps state across calls, so it needs reliable, ordered delivery (TCP, "
                     "WebSocket, a reliable channel); one lost or reordered message breaks every later one of its "
                     "connection.")
    splits = _stage_notes(d.breakdown.stages)
    if splits:  # one note for every multi-step codec: the same words once, not once per codec
        notes.append(f"stages (medians, timed each on its own): {'; '.join(splits)}")
    if any(split.alone for split in d.breakdown.stages):
        notes.append("a stage is timed in its codec's own process, in the first rounds of each process set, on the "
                     "previous stage's outputs; the codec of the same name alone is set beside it over those same "
                     "rounds (not its median over the run). A gap left is the process: the composite's process "
                     "also runs the other stages (their caches and heap), so compare stages within a codec.")
    if d.timed_reference:
        notes.append(f"µs and enc/{d.reference} can order two codecs differently: µs is the median of a codec's "
                     f"rounds, enc/{d.reference} the median of its round-by-round ratios to {d.reference}'s round of "
                     "the same turn, which cancels the machine's drift that the µs keep; two codecs whose ±CI "
                     "overlap are not ordered by this run either way.")
    notes += [f"dictionary: {_dictionary_text(r, suite)}" for r in suite.results if r.dictionary]
    return notes + _error_notes(suite)


def _error_notes(suite: Suite) -> List[str]:
    """One note per codec that has no figures or no timing; one note for all when every codec has the same reason
    (``--sizes-only``, an interrupted run)."""
    if suite.settings.get("sizes_only"):
        return []  # not timed by request: nothing went wrong
    errors = [r.error for r in suite.results]
    if len(errors) > 1 and len(set(errors)) == 1 and errors[0]:
        return [f"error: every codec: {errors[0]}"]
    return [f"error: {r.codec}: {r.error}" for r in suite.results if r.error]


def _stage_notes(splits: Sequence[StageSplit]) -> List[str]:
    """``json+zlib-1: encode = serialize 0.86 + compress 2.63 µs; decode = ...``, per codec timed in several
    stages; a stage that is a codec of the run is set beside that codec alone over the same turns."""
    by_codec: Dict[str, List[str]] = {}
    for split in splits:
        if len(split.stages) > 1:
            steps = " + ".join(f"{name} {fmt_us(us)}" for name, us, _ in split.stages)
            beside = "".join(f" ({stage} alone on the same turns: {fmt_us(us)} µs)" for stage, us in split.alone)
            by_codec.setdefault(split.codec, []).append(f"{split.op} = {steps} µs{beside}")
    return [f"{codec}: {'; '.join(ops)}" for codec, ops in by_codec.items()]


def tail_columns(d: Decision) -> List[Column]:
    """The compact "tails and allocations" table: per-call p50/p99 (all calls), worst method, peak kB."""
    return [
        Column("codec", False, lambda r: r.codec),
        latency_column("encode", "p50", "enc p50"), latency_column("encode", "p99", "enc p99"),
        latency_column("decode", "p50", "dec p50"), latency_column("decode", "p99", "dec p99"),
        Column("slowest method (enc p99)", False, lambda r: _clip(d.breakdown.slowest_encode[r.codec] or MISSING, 28)),
        memory_column("encode", "peak_bytes_mean", "enc peak kB", _kb),
        memory_column("decode", "peak_bytes_mean", "dec peak kB", _kb),
    ]


#: Which columns a narrow terminal keeps longest (first: always); a title not listed ranks just before "calls".
KEEP_ORDER = ("codec", "bytes mean", "x ref", "encode µs", "decode µs", "enc/ref", "dec/ref", "note", "failures",
              "mismatches", "x floor", "p99", "state/conn", "calls", "p50", "10k conns",
              "enc p50", "dec p50", "enc p99", "dec p99", "slowest method (enc p99)", "enc peak kB", "dec peak kB")


def format_table(d: Decision, width: Optional[int] = None, full: str = "report.html") -> str:
    """The results as fixed-width text (codecs in the order given), its footnotes, then tails and
    allocations. With ``width`` (a terminal's columns) every line fits it: a table too wide is split
    into sizes and CPU time, then loses its lowest-ranked columns (KEEP_ORDER), and the text says
    which and that ``full`` has them all."""
    suite = d.suite
    left_out: List[str] = []
    out: List[str] = []
    for table in _split(columns(d), d, width):
        out += ([""] if out else []) + _fitted(table, suite.results, width, left_out)
    notes = footnotes(d)
    if notes:
        out += [""] + [line for note in notes for line in _wrapped(f"* {note}", width)]
    if any(r.latency or r.memory for r in suite.results):
        out += ["", *_wrapped(f"Tails and allocations, per call (µs, each call timed alone: above the batch "
                              f"medians; sample of {fmt_count(suite.settings.get('sample'))} calls; peak = mean "
                              "bytes allocated per call):", width),
                *_fitted(tail_columns(d), suite.results, width, left_out)]
        if not all(r.latency and r.memory for r in suite.results):
            out += _wrapped(f"{MISSING}: not measured (per-connection streaming codec, --no-tails / --no-memory, or "
                            "timing failed)", width)
    if left_out:
        out += ["", *_wrapped(f"Left out to fit {width} columns: {', '.join(dict.fromkeys(left_out))}; {full} and "
                              "results.csv have every column.", width)]
    return "\n".join(out)


def _split(cols: List[Column], d: Decision, width: Optional[int]) -> List[List[Column]]:
    """One table when it fits ``width``; else sizes and fidelity, then CPU time (each led by the codec)."""
    if width is None or _width(cols, d.suite.results) <= width:
        return [cols]
    timing = {c.title for op in OPS for c in _timing_columns(op, d)}
    timed = [c for c in cols if c.title in timing]
    return [[c for c in cols if c.title not in timing], cols[:1] + timed] if timed else [cols]


def _fitted(cols: List[Column], results: Sequence[CodecResult], width: Optional[int], left_out: List[str]) -> List[str]:
    """The grid of ``cols`` without its lowest-ranked columns until it fits ``width`` (dropped titles
    appended to ``left_out``); the first column always stays. A column that is 0 for every codec
    says least, so it goes first (named "(all 0)")."""
    cols = list(cols)

    def zero(c: Column) -> bool:
        return all(c.cell(r) == "0" for r in results)

    def rank(c: Column) -> int:
        kept = KEEP_ORDER.index(c.kind) if c.kind in KEEP_ORDER else KEEP_ORDER.index("calls") - 1
        return kept + (len(KEEP_ORDER) if zero(c) else 0)

    while width is not None and len(cols) > 1 and _width(cols, results) > width:
        drop = max(reversed(cols[1:]), key=rank)
        left_out.append(f"{drop.title} (all 0)" if zero(drop) else drop.title)
        cols.remove(drop)
    return grid(cols, results)


def _width(cols: Sequence[Column], results: Sequence[CodecResult]) -> int:
    return max(len(line) for line in grid(cols, results))


def fit_lines(lines: Sequence[str], width: Optional[int]) -> List[str]:
    """Each line wrapped to ``width`` (continuations indented two more than the line), or as they are."""
    return [part for line in lines for part in _wrapped(line, width)]


def _wrapped(text: str, width: Optional[int]) -> List[str]:
    """``text`` as lines of at most ``width`` characters (continuations indented), or as it is."""
    if width is None:
        return [text]
    indent = " " * (len(text) - len(text.lstrip(" ")))
    return textwrap.wrap(text.lstrip(" "), width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False) or [""]


def grid(cols: Sequence[Column], results: Sequence[CodecResult]) -> List[str]:
    """Fixed-width lines: header, rule, one row per result."""
    rows = [[c.title for c in cols]] + [[c.cell(r) for c in cols] for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]

    def line(cells: List[str]) -> str:
        return "  ".join(t.rjust(w) if c.numeric else t.ljust(w) for t, w, c in zip(cells, widths, cols)).rstrip()

    return [line(rows[0]), "  ".join("-" * w for w in widths)] + [line(row) for row in rows[1:]]


def _dictionary_text(r: CodecResult, suite: Suite) -> str:
    """A trained codec's dictionary: size, training, and its shipping cost kept apart from the bytes per call."""
    d = r.dictionary or {}
    training = suite.trace.get("training") or {}
    return (f"{r.codec}: {d.get('bytes', 0):,} B, trained in {d.get('train_s', 0):.2f} s on "
            f"{training.get('source', 'held-out calls')}, which no figure includes; shipping it once per client "
            f"({d.get('ship_bytes', 0):,} B compressed) adds {d.get('ship_bytes_per_call', 0):.2f} B/call over this "
            "trace's sessions (not in its bytes mean)")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _pct(value: float) -> str:
    return f"{value:.1f}%" if value < 10 else f"{value:.0f}%"


def _kb(value: float) -> str:
    return f"{value / 1000:.1f}"


def _fidelity_column(name: str, d: Decision) -> Column:
    """``failures`` or ``mismatches``: the count, how much of it is undeclared, alarmed when any is."""
    def bad(r: CodecResult) -> int:
        f = d.figures[r.codec]
        return f.undeclared_failures if name == "failures" else f.undeclared_mismatches

    return Column(name, True, lambda r: _fidelity(getattr(r, name), bad(r)), lambda r: bad(r) > 0,
                  lambda r: getattr(r, name))


def _timing_columns(op: str, d: Decision) -> List[Column]:
    """µs per call and how sure that median is (95 % CI) for ``op``, and the ratio to the reference codec paired
    round by round (when it was timed); an unstable timing's interval is alarmed."""
    def fig(r: CodecResult) -> Optional[OpFigures]:
        return d.figures[r.codec].op(op)

    cols = [figure_column(f"{op} µs", lambda r: f.median_us if (f := fig(r)) else None, fmt_us),
            Column("±CI", True, lambda r: _ci_cell(fig(r)), lambda r: bool((f := fig(r)) and f.stability.unstable),
                   lambda r: f.stability.ci_half_pct if (f := fig(r)) else None)]
    if d.timed_reference:
        cols.append(figure_column(d.ratio_title(f"{op[:3]}/"), lambda r: f.ratio if (f := fig(r)) else None,
                                  fmt_ratio, key=f"{op[:3]}/ref"))
    return cols


def _ci_cell(f: Optional[OpFigures]) -> str:
    """``±2.4%``: half the median's 95 % confidence interval, % of the median; ``†`` when it covers less than 95 %."""
    if f is None:
        return MISSING
    return f"±{_pct(f.stability.ci_half_pct)}" + (LOW_CONFIDENCE_MARK if f.stability.low_confidence else "")


def _ci_note(d: Decision) -> str:
    """What ±CI means, and when there were too few rounds for 95 %, the coverage it has instead."""
    timings = [t for f in d.figures.values() for op in OPS if (t := f.op(op))]
    note = (f"±CI: half the width of the median's {CONFIDENCE:.0%} confidence interval, as % of the median "
            "(distribution-free, from the rounds' order statistics): the true median lies within it; it narrows "
            "as rounds are added. Two codecs whose intervals overlap are not told apart by this run.")
    few = [t for t in timings if t.stability.low_confidence]
    if few:
        rounds = min(t.stability.rounds for t in few)
        note += (f" {LOW_CONFIDENCE_MARK}: only {rounds} rounds, too few for {CONFIDENCE:.0%}: the interval is "
                 f"the fastest to the slowest round, which covers the median with {min(t.ci_us[2] for t in few):.1%} "
                 "confidence; raise --repeat.")
    return note


def _fidelity(total: int, bad: int) -> str:
    """``0``, ``312 declared``, ``41 UNDECLARED`` or ``353 (41 UNDECLARED)``."""
    if not total:
        return "0"
    if not bad:
        return f"{total:,} declared"
    return f"{total:,} UNDECLARED" if bad == total else f"{total:,} ({bad:,} UNDECLARED)"


def _note(r: CodecResult, d: Decision) -> str:
    shaky = d.figures[r.codec].unstable
    flags = (["error"] if _failed(r, d.suite) else []) + (["ordered"] if r.ordered_delivery else [])
    flags += ["partial"] if d.figures[r.codec].same_calls else []
    flags += [f"unstable ({', '.join(k[:3] for k in shaky)})"] if shaky else []
    return ", ".join(flags)


def _floor_estimate(floor: Dict[str, Any]) -> str:
    """What an estimated floor (rpcbench.floor: a trace over its budget) took and how sure it is; "" if exact."""
    if not floor.get("estimated"):
        return ""
    return (f" (x floor~: estimated, ± {floor['ci_half_width']:.1f} B/call at 95 %: {floor['compressed_share']:.0%} "
            "of the JSON compressed, each long stream's start whole and the rest at the rate of windows spread "
            "over it)")


def _floor_compressors(floor: Dict[str, Any]) -> str:
    """What the floor compressed each stream with: its ``compressor`` (rpcbench.floor), or in files written
    before it had one, the smaller per stream of zstd-19 (streams up to 512 KiB) and xz -9, with their figures."""
    if "compressor" in floor:
        return str(floor["compressor"])
    xz = f"xz -9, {floor['xz9_bytes_per_call']:.1f}"
    if floor["zstd19_long_bytes_per_call"] is None:
        return f"{xz}, or zstd-19 with long matching where smaller on streams up to 512 KiB"
    return f"best of zstd-19 with long matching, {floor['zstd19_long_bytes_per_call']:.1f}, and {xz}, per stream"
