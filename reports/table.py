"""The results table, one row per codec: as fixed-width text for the terminal, and as
columns the HTML report renders, so both always show the same figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple

from rpcbench.results import SLOW_STATE_FACTOR, CodecResult, Suite, Timing

#: pyperf warns that a result "may be unstable" above this standard deviation (% of mean)
UNSTABLE_STDEV_PCT = 10.0
MISSING = "-"


@dataclass(frozen=True)
class Column:
    """One table column: header, alignment, the cell text and whether a cell needs attention."""

    title: str
    numeric: bool
    cell: Callable[[CodecResult], str]
    alarm: Callable[[CodecResult], bool] = lambda r: False


def fmt_us(value: float) -> str:
    """Microseconds with about three significant digits."""
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def fmt_ratio(value: float) -> str:
    """A ratio such as ``0.45x``."""
    return f"{value:.2f}x"


def fmt_count(n: object) -> str:
    """An int with thousands separators; anything else (a missing figure) as text."""
    return f"{n:,}" if isinstance(n, int) else "?" if n is None else str(n)


def fmt_bytes(value: float) -> str:
    """A byte count for people: ``207 B``, ``2.2 kB``, ``1.3 MB`` (powers of 1000)."""
    return f"{value:.0f} B" if value < 1000 else f"{value / 1e3:.1f} kB" if value < 1e6 else f"{value / 1e6:.1f} MB"


def latency_us(r: CodecResult, op: str, pct: str, method: str = "*") -> Optional[float]:
    """A per-call percentile (``p50``, ``p90``, ``p99``, ``max``) in µs, for all calls or one method; None if not measured."""
    value = (r.latency.get(op) or {}).get(method, {}).get(pct)
    return None if value is None else value / 1000


def memory_figure(r: CodecResult, op: str, key: str) -> Optional[float]:
    """One allocation figure per call (e.g. ``peak_bytes_mean``); None if not measured."""
    return (r.memory.get(op) or {}).get(key)


def worst_method(r: CodecResult, op: str) -> Optional[str]:
    """The method with the highest per-call p99 for ``op``, if tails were measured."""
    methods = {m: v["p99"] for m, v in (r.latency.get(op) or {}).items() if m != "*"}
    return max(methods, key=methods.__getitem__) if methods else None


def latency_column(op: str, pct: str, title: str) -> Column:
    """A column of one per-call percentile over all calls, µs."""
    return Column(title, True, lambda r: shown(latency_us(r, op, pct), fmt_us))


def memory_column(op: str, key: str, title: str, fmt: Callable[[float], str] = fmt_bytes) -> Column:
    """A column of one allocation figure per call."""
    return Column(title, True, lambda r: shown(memory_figure(r, op, key), fmt))


def undeclared(r: CodecResult, column: str) -> int:
    """Of the codec's ``failures`` or ``mismatches``, the calls no declared problem explains (bugs)."""
    total, kinds = (r.failures, ("encode",)) if column == "failures" else (r.mismatches, ("decode", "mismatch"))
    return max(0, total - sum(p.count for p in r.problems if p.kind in kinds and p.declared))


def unstable(r: CodecResult) -> List[str]:
    """Which of the codec's timings ("encode", "decode") vary more than pyperf's threshold."""
    return [k for k in ("encode", "decode") if _timing(r, k) and _timing(r, k).stdev_pct > UNSTABLE_STDEV_PCT]


def unstable_summary(suite: Suite) -> Optional[str]:
    """How many timings vary more than pyperf's threshold, the worst named; None if none do."""
    shaky = sorted(((_timing(r, k).stdev_pct, f"{r.codec} {k}") for r in suite.results for k in unstable(r)),
                   reverse=True)
    if not shaky:
        return None
    timed = sum(1 for r in suite.results for k in ("encode", "decode") if _timing(r, k))
    return (f"{len(shaky)} of {timed} timings have rounds whose standard deviation exceeds "
            f"{UNSTABLE_STDEV_PCT:.0f}% of their mean (pyperf's threshold; worst: {shaky[0][1]} "
            f"{shaky[0][0]:.1f}%): absolute µs move with the machine's speed. The enc/json and dec/json ratios pair "
            f"each round with json's round of the same turn, which cancels drift that slows every codec alike; compare codecs with them, "
            f"or rerun on an idle machine.")


STATE_GAP = 1.05  #: ratios to json this far apart between the machine's two speed states are worth a warning


def state_summary(suite: Suite) -> Optional[str]:
    """When the machine switched speed state during the run and codec ratios differ between
    the states (see ``SLOW_STATE_FACTOR``): how often, and the codec most affected; else None."""
    ref = suite.find("json")
    if ref is None or ref.encode is None:
        return None
    gaps = []
    for r in suite.results:
        for kind in ("encode", "decode"):
            mine, theirs = _timing(r, kind), _timing(ref, kind)
            by_state = mine.ratio_by_state(theirs) if mine and theirs and r is not ref else {}
            if by_state:
                fast, slow = by_state["fast"][0], by_state["slow"][0]
                gaps.append((max(fast, slow) / min(fast, slow), f"{r.codec} {kind}", fast, slow))
    wide = [g for g in gaps if g[0] >= STATE_GAP]
    if not wide:
        return None
    gap, name, fast, slow = max(wide)
    slow_rounds = sum(ref.encode.slow_rounds)
    return (f"the machine changed speed state during the run: {slow_rounds} of {len(ref.encode.rounds_ns)} json encode "
            f"rounds ran over {SLOW_STATE_FACTOR:g}x slower than its fastest. Codecs do not slow down alike, so their "
            f"ratios to json differ between the states by {STATE_GAP:g}x or more for {len(wide)} "
            f"timing{'s' if len(wide) > 1 else ''}, most for {name}: "
            f"{fmt_ratio(fast)} in fast rounds, {fmt_ratio(slow)} in slow ones ({gap:.2f}x apart). The table's ratios mix "
            f"the states as this run happened to; compare runs made in the same state (results.json keeps every round), "
            f"or rerun on an idle machine.")


def json_sizes(suite: Suite) -> Optional[float]:
    """Mean bytes per call of the ``json`` codec, the usual baseline, if it was measured."""
    ref = suite.find("json")
    return ref.sizes.mean if ref and ref.sizes else None


def columns(suite: Suite) -> List[Column]:
    """The table's columns; the "x json" size ratio only when json was measured."""
    json_mean = json_sizes(suite)
    cols = [
        Column("codec", False, lambda r: r.codec, lambda r: bool(r.error)),
        Column("calls", True, lambda r: f"{r.calls:,}"),
    ]
    cols += [Column(name, True, lambda r, n=name: _fidelity(getattr(r, n), undeclared(r, n)),
                    lambda r, n=name: undeclared(r, n) > 0) for name in ("failures", "mismatches")]
    cols += [
        Column("bytes mean", True, lambda r: f"{r.sizes.mean:.1f}" if r.sizes else MISSING),
        Column("p50", True, lambda r: str(r.sizes.p50) if r.sizes else MISSING),
        Column("p99", True, lambda r: str(r.sizes.p99) if r.sizes else MISSING),
    ]
    if json_mean:
        cols.append(Column("x json", True, lambda r: fmt_ratio(r.sizes.mean / json_mean) if r.sizes else MISSING))
    json_result = suite.find("json")
    for kind in ("encode", "decode"):
        cols += [
            Column(f"{kind} µs", True, lambda r, k=kind: fmt_us(_timing(r, k).median_us) if _timing(r, k) else MISSING),
            Column("±", True, lambda r, k=kind: _pct(_timing(r, k).spread_pct) if _timing(r, k) else MISSING),
        ]
        if json_result and json_result.encode and json_result.decode:
            cols.append(Column(f"{kind[:3]}/json", True, lambda r, k=kind: cpu_ratio(r, json_result, k)))
    cols.append(Column("note", False, _note, lambda r: bool(r.error or unstable(r))))
    return cols


def cpu_ratio(r: CodecResult, ref: CodecResult, kind: str) -> str:
    """CPU time relative to ``ref``, paired round by round (see Timing.ratio_to)."""
    mine, theirs = _timing(r, kind), _timing(ref, kind)
    return fmt_ratio(mine.ratio_to(theirs)) if mine and theirs else MISSING


def footnotes(suite: Suite) -> List[str]:
    """What the markers in the table mean, with the figures behind them."""
    notes = []
    if any(r.problems for r in suite.results):
        notes.append("declared: the codec documents this difference (a property of the format, e.g. bytes -> "
                     "base64 str); UNDECLARED: a call failed or came back different without the codec saying so.")
    notes += [f"{name}: {text}" for name, text in timing_notes(suite)]
    notes += [f"error: {r.codec}: {r.error}" for r in suite.results if r.error]
    return notes


def timing_notes(suite: Suite) -> List[Tuple[str, str]]:
    """The reasons to read the timings with care, as (name, text): a partial run, unstable rounds, speed states."""
    partial = f"{suite.partial}: the timings cover the rounds done before it" if suite.partial else ""
    notes = [("partial", partial), ("unstable", unstable_summary(suite)), ("speed states", state_summary(suite))]
    return [(name, text) for name, text in notes if text]


def tail_columns() -> List[Column]:
    """The compact "tails and allocations" table: per-call p50/p99 (all calls), worst method, peak kB."""
    return [
        Column("codec", False, lambda r: r.codec),
        latency_column("encode", "p50", "enc p50"), latency_column("encode", "p99", "enc p99"),
        latency_column("decode", "p50", "dec p50"), latency_column("decode", "p99", "dec p99"),
        Column("slowest method (enc p99)", False, lambda r: _clip(worst_method(r, "encode") or MISSING, 28)),
        memory_column("encode", "peak_bytes_mean", "enc peak kB", _kb),
        memory_column("decode", "peak_bytes_mean", "dec peak kB", _kb),
    ]


def format_table(suite: Suite) -> str:
    """The results as a fixed-width text table (codecs in the order given), its footnotes, then tails and allocations."""
    out = grid(columns(suite), suite.results)
    notes = footnotes(suite)
    if notes:
        out += [""] + [f"* {note}" for note in notes]
    if any(r.latency or r.memory for r in suite.results):
        out += ["", f"Tails and allocations, per call (µs; sample of {fmt_count(suite.settings.get('sample'))} calls; "
                "peak = mean bytes allocated while handling one call):", *grid(tail_columns(), suite.results)]
        if not all(r.latency and r.memory for r in suite.results):
            out.append(f"{MISSING}: not measured (per-connection streaming codec, --no-tails / --no-memory, or timing "
                       "failed)")
    return "\n".join(out)


def grid(cols: Sequence[Column], results: Sequence[CodecResult]) -> List[str]:
    """Fixed-width lines: header, rule, one row per result."""
    rows = [[c.title for c in cols]] + [[c.cell(r) for c in cols] for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]

    def line(cells: List[str]) -> str:
        return "  ".join(t.rjust(w) if c.numeric else t.ljust(w) for t, w, c in zip(cells, widths, cols)).rstrip()

    return [line(rows[0]), "  ".join("-" * w for w in widths)] + [line(row) for row in rows[1:]]


def shown(value: Optional[float], fmt: Callable[[float], str]) -> str:
    """``fmt(value)``, or the missing-figure mark for None."""
    return MISSING if value is None else fmt(value)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _pct(value: float) -> str:
    return f"{value:.1f}%" if value < 10 else f"{value:.0f}%"


def _kb(value: float) -> str:
    return f"{value / 1000:.1f}"


def _timing(r: CodecResult, kind: str) -> Optional[Timing]:
    return r.encode if kind == "encode" else r.decode


def _fidelity(total: int, bad: int) -> str:
    """``0``, ``312 declared``, ``41 UNDECLARED`` or ``353 (41 UNDECLARED)``."""
    if not total:
        return "0"
    if not bad:
        return f"{total:,} declared"
    return f"{total:,} UNDECLARED" if bad == total else f"{total:,} ({bad:,} UNDECLARED)"


def _note(r: CodecResult) -> str:
    shaky = unstable(r)
    flags = (["error"] if r.error else []) + ([f"unstable ({', '.join(k[:3] for k in shaky)})"] if shaky else [])
    return ", ".join(flags)
