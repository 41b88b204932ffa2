"""What ``run_bench.py`` and ``run_bench.py report`` print: the results table, a fleet's spread and the verdict,
all from the run's :class:`~reports.decision.Decision`. One function for both commands, so they print the same."""

from __future__ import annotations

from typing import List, Optional

from . import loss, precision
from .decision import Decision
from .table import fit_lines, format_table
from .wire import closing_lines

SPREADS_SHOWN = 5  #: the widest spreads between a fleet's traces printed
WIRE_CODECS_SHOWN = 6  #: codecs the wire note gives figures for: the fewest wire bytes under the chosen policy


def terminal_text(d: Decision, width: Optional[int] = None, full: str = "report.html") -> str:
    """The table (fitted to ``width``; ``full`` names the file with every column), the fleet lines, then the
    verdict: the lines a run or a rebuilt report ends with."""
    head = [d.calls_line + "."] + ([d.schema_line] if d.schema_line else []) + (
        [d.precision.line] if d.precision.line else []) + ([d.capture.line] if d.capture else [])
    closing = [*d.precision.closing, *(note for note in (d.precision.floor_note, d.precision.cpu_note) if note)]
    return "\n".join([format_table(d, width, full), *fleet_lines(d), *fit_lines(lossy_lines(d.precision), width), "",
                      *fit_lines(head, width), *fit_lines(d.verdict.lines(), width), *fit_lines(wire_note(d), width),
                      *loss_lines(d, width),
                      *fit_lines(([""] if closing else []) + closing, width)])


def lossy_lines(v: precision.PrecisionView, limit: int = 8) -> List[str]:
    """The terminal's lines: each lossy codec's most changed fields."""
    lines: List[str] = []
    for c in v.codecs:
        lines.append(f"{c.codec}: {c.changed:,} values came back within their declared step (field: values changed, "
                     "largest error / step):")
        lines += ["  {}: {}, {} / {} ({} of a step)".format(*f.cells()) for f in c.fields[:limit]]
        if len(c.fields) > limit:
            lines.append(f"  ... {len(c.fields) - limit} more fields in report.html")
    return lines



def wire_note(d: Decision) -> List[str]:
    """The closing note on the wire, when the run compared sending policies or batched calls (--wire)."""
    w = d.wire
    if w.chosen is None or w.policies == ("per-call",):
        return []
    leading = [*(w.rankings.get(w.chosen, ())[:WIRE_CODECS_SHOWN]), *([d.reference] if d.reference else [])]
    return ["", *closing_lines(w, list(dict.fromkeys(leading)))]


def loss_lines(d: Decision, width: Optional[int] = None) -> List[str]:
    """The lossy link's tables, one per loss rate, of the codecs the decision leads with (never wrapped); then what
    loss costs each (wrapped to ``width``)."""
    v = d.loss
    if not v.shown:
        return []
    out = ["", *fit_lines([f"under loss ({v.link}; {v.policy}; the verdict decided at {v.rate_text}):"], width)]
    for rate in v.rates:
        rows = [loss.cells(r, loss.TERMINAL_COLUMNS) for c in d.loss_codecs if (r := v.row(c, rate))]
        more = len(v.rankings.get(rate, ())) - len(rows)
        grid = [[f"{loss.pct(rate)} loss", *loss.TERMINAL_COLUMNS[1:]], *rows]
        widths = [max(len(row[i]) for row in grid) for i in range(len(grid[0]))]
        out += ["  " + "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
                for row in grid]
        out += [f"  (+{more} more codecs in report.html)"] if more > 0 else []
    return out + fit_lines([f"  {note}" for note in loss.flags(v, d.loss_codecs)], width)


def fleet_lines(d: Decision) -> List[str]:
    """The terminal's lines on a fleet: traces merged, the widest spreads, the traces that differ, estimates."""
    f = d.fleet
    lines = []
    if f.traces:
        lines.append(f"fleet: {f.traces} traces, {f.calls:,} calls merged "
                     "(results.csv: one row per codec per trace, trace * = merged)")
        for s in f.spreads[:SPREADS_SHOWN]:
            lines.append(f"  {s.codec}: {s.merged:.1f} B/call over the fleet; traces {s.low:.1f} ({s.low_trace}) "
                         f"to {s.high:.1f} ({s.high_trace}), spread {s.pct:.0f} %")
        lines.extend(f"  differs: {note}" for note in f.odd)
    lines.extend(f"  sampled size pass: {codec}: {mean}; total {total}" for codec, mean, total, _ in f.estimates)
    return lines
