"""``run_bench.py compare`` output: the comparison as text for the terminal (at most 100 columns), as
``compare.html`` (Jinja2, autoescaping, inline CSS) and as ``compare.md`` (a pull-request comment), all from the
same rows.

Every judgment (significance, verdicts, the gate) comes from :mod:`reports.compare`; this module
only writes it down.
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

import jinja2

from rpcbench.errors import BenchError
from rpcbench.results import Suite

from .compare import FAST_END_PERCENTILE, GATE_RUN_SETTINGS, MIN_SETS, TEST, Comparison, CpuChange, Shift, unseen
from .formatting import MISSING, fmt_us
from .html import TEMPLATES, Table, plain_table
from .markdown import md_escape

WIDTH = 100  #: terminal lines never exceed this
BYTES_HEAD = ("codec", "old B/call", "new B/call", "change", "verdict")
CPU_HEAD = ("codec", "op", "old µs", "new µs", "change", "p", "old ratio", "new ratio", "change", "p", "verdict")


@dataclass(frozen=True)
class Runs:
    """What the output says about the two runs compared: how the user named them, and the runs."""

    old_label: str
    new_label: str
    old: Suite
    new: Suite


def fmt_p(p: Optional[float]) -> str:
    """A p-value with three decimals, ``<0.001`` below that."""
    return MISSING if p is None else "<0.001" if p < 0.001 else f"{p:.3f}"


def fmt_change(shift: Optional[Shift]) -> str:
    """``+20.4%``; ``0.0%`` for no change at all."""
    return MISSING if shift is None else f"{shift.change_pct:+.1f}%" if shift.new != shift.old else "0.0%"


def bytes_rows(comparison: Comparison) -> List[Tuple[str, ...]]:
    """One row per codec in both runs: mean bytes per call in each, the change, larger/smaller/same."""
    return [(c.codec, f"{c.bytes.old:.1f}" if c.bytes else MISSING, f"{c.bytes.new:.1f}" if c.bytes else MISSING,
             fmt_change(c.bytes), c.bytes_verdict) for c in comparison.codecs]


def cpu_rows(comparison: Comparison) -> List[Tuple[str, ...]]:
    """One row per codec and operation timed in both runs: absolute µs and ratio to the reference."""
    return [(c.codec, t.op, *_cpu_cells(t)) for c in comparison.codecs for t in c.cpu]


def _cpu_cells(t: CpuChange) -> Tuple[str, ...]:
    a, r = t.absolute, t.ratio
    ratio = (f"{r.old:.3f}x", f"{r.new:.3f}x", fmt_change(r), fmt_p(r.p)) if r else (MISSING,) * 4
    return (fmt_us(a.old), fmt_us(a.new), fmt_change(a), fmt_p(a.p), *ratio, t.verdict)


def explanation(comparison: Comparison) -> List[str]:
    """How to read the figures: the reference codec, the test and alpha, what a verdict means."""
    return [
        f"Reference codec: {comparison.reference_note}.",
        "Bytes: mean bytes per call over every call of the trace; exact, so any change is real." if
        comparison.same_calls else "Bytes: mean bytes per call, but over different calls in the two runs ("
        f"{'; '.join(comparison.calls_differ)}): a change may come from the calls, not the codec, so none is "
        "exact (verdict: other calls) and the gate leaves bytes out; rerun both on the same trace and settings.",
        "CPU: each process set of a run gives one figure, no round set aside: its ratio = the median over its "
        "turns of the codec's round over the reference's round of the same turn (same process, moments apart: "
        f"the machine's speed cancels); its µs = the {FAST_END_PERCENTILE}th percentile of its rounds (other work "
        "only adds time: the codec when least crowded). A run's figure is the geometric mean of its sets.",
        f"p: {TEST}: rounds of one process share its speed, so the process set is the unit and the noise between "
        f"sets is the yardstick (each run needs {MIN_SETS} sets or more). The null hypothesis is a ratio change "
        f"of at most {comparison.min_effect:g}% (--min-effect): a change is called (slower/faster) when p < "
        f"{comparison.alpha:g}, i.e. it is shown to exceed that; n.s. = not called; few sets = not testable. "
        "Absolute µs are tested too, for information only.",
    ]


def gate_lines(comparison: Comparison) -> List[str]:
    """The gate's outcome: what failed it, or that it passed; nothing without ``--fail-above``."""
    violations, fail_above = comparison.violations, comparison.fail_above
    if fail_above is None:
        return []
    blind = unseen(comparison, fail_above)
    short = ([f"  these runs cannot see a CPU change of {fail_above:g}% in {len(blind)} timing(s) (smallest "
              "significant change: " + ", ".join(f"{name} {pct:.1f}%" for name, pct in blind[:4])
              + (", ..." if len(blind) > 4 else "")
              + "): a pass says little about them; more --processes narrow it"] if blind else [])
    if comparison.outcome == "inconclusive":
        return [inconclusive_line(comparison), *short]
    if not violations:
        judged = "no bytes increase and no" if comparison.same_calls else "bytes not judged (other calls); no"
        allowed = f"; --allow-untested: {len(comparison.untested)} untested" if comparison.untested else ""
        return [f"gate --fail-above {fail_above:g}: passed ({judged} significant CPU ratio "
                f"increase over {fail_above:g}%{allowed})", *short]
    return [f"gate --fail-above {fail_above:g}: FAILED, {len(violations)} change(s) over {fail_above:g}%:",
            *(f"  {v.text}" for v in violations), *short]


def inconclusive_line(comparison: Comparison) -> str:
    """The one line of a gate that could not test every timing it guards: which, and what to rerun."""
    names = comparison.untested
    return (f"gate --fail-above {comparison.fail_above:g}: INCONCLUSIVE (exit 3): {len(names)} timing(s) not tested "
            f"({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}); rerun both runs with {GATE_RUN_SETTINGS} "
            "(docs/compare.md), or pass --allow-untested to gate on the rest")


def format_comparison(runs: Runs, comparison: Comparison) -> str:
    """The whole comparison as terminal text, no line over WIDTH columns."""
    out = _wrapped([f"{name} {label}: {run.created}, {len(run.results)} codecs"
                    for name, label, run in (("OLD", runs.old_label, runs.old), ("NEW", runs.new_label, runs.new))])
    out += ["", *_wrapped(explanation(comparison))]
    if comparison.warnings:
        out += [""] + _wrapped([f"warning: {w}" for w in comparison.warnings])
    out += ["", "Bytes per call", *text_grid(BYTES_HEAD, bytes_rows(comparison), numeric={1, 2, 3})]
    out += ["", "CPU per call", *text_grid(CPU_HEAD, cpu_rows(comparison), numeric=set(range(2, 10)))]
    out += [""] + _wrapped(unmatched(comparison))
    gate = gate_lines(comparison)
    return "\n".join(out + ([""] + _wrapped(gate) if gate else [])).rstrip()


def unmatched(comparison: Comparison) -> List[str]:
    """Codecs only in one run, and figures one run lacks for a codec both have."""
    lines = [f"added (only in NEW): {', '.join(comparison.added) or 'none'}",
             f"removed (only in OLD): {', '.join(comparison.removed) or 'none'}"]
    return lines + [f"{c.codec}: {', '.join(c.missing)}" for c in comparison.codecs if c.missing]


def _wrapped(lines: Sequence[str]) -> List[str]:
    """Prose lines wrapped to WIDTH, continuation lines indented."""
    return [part for line in lines for part in textwrap.wrap(line, WIDTH, subsequent_indent="  ",
                                                            break_on_hyphens=False, break_long_words=True)]


def text_grid(head: Sequence[str], rows: Sequence[Sequence[str]], numeric: set) -> List[str]:
    """Fixed-width lines (header, rule, rows). The first column (codec) is as wide as fits in WIDTH;
    a longer name goes on a line of its own above its row."""
    widths = [max(len(row[i]) for row in (head, *rows)) for i in range(len(head))]
    rest = sum(widths[1:]) + 2 * (len(widths) - 1)
    widths[0] = max(len(head[0]), min(widths[0], WIDTH - rest))

    def line(cells: Sequence[str]) -> str:
        return "  ".join(t.rjust(w) if i in numeric else t.ljust(w)
                         for i, (t, w) in enumerate(zip(cells, widths))).rstrip()

    out = [line(head), "  ".join("-" * w for w in widths)]
    for row in rows:
        if len(row[0]) > widths[0]:
            out += textwrap.wrap(row[0], WIDTH, break_long_words=True)
            row = ("", *row[1:])
        out.append(line(row))
    return out


def write_compare_html(runs: Runs, comparison: Comparison, folder: str) -> str:
    """Write ``compare.html`` into ``folder`` (created if needed); return its path."""
    page = render_compare_html(runs, comparison)
    path = os.path.join(folder, "compare.html")
    try:
        os.makedirs(folder, exist_ok=True)
        with open(path, "w", encoding="utf-8", errors="xmlcharrefreplace") as f:
            f.write(page)
    except OSError as e:
        raise BenchError(f"cannot write {path}: {e.strerror or e}") from None
    return path


def write_compare_markdown(runs: Runs, comparison: Comparison, folder: str) -> str:
    """Write ``compare.md`` (a pull-request comment) into ``folder`` (created if needed); return its path."""
    path = os.path.join(folder, "compare.md")
    try:
        os.makedirs(folder, exist_ok=True)
        with open(path, "w", encoding="utf-8", errors="replace") as f:
            f.write(render_compare_markdown(runs, comparison))
    except OSError as e:
        raise BenchError(f"cannot write {path}: {e.strerror or e}") from None
    return path


def render_compare_markdown(runs: Runs, comparison: Comparison) -> str:
    """The comparison in Markdown: the same rows, explanation, warnings and gate as the terminal, every
    value escaped (:func:`reports.markdown.md_escape`)."""
    def grid(head: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int]) -> List[str]:
        def line(cells: Sequence[str]) -> str:
            return f"| {' | '.join(md_escape(c) for c in cells)} |"
        rule = " | ".join("---:" if i in numeric else ":---" for i in range(len(head)))
        return [line(head), f"| {rule} |", *map(line, rows)]

    gate = gate_lines(comparison)
    outcome = {"failed": ": FAILED", "inconclusive": ": INCONCLUSIVE"}.get(comparison.outcome, "")
    lines = [f"## rpcbench compare{outcome}", ""]
    lines += [f"- {name} {md_escape(label)}: {md_escape(run.created)}, {len(run.results)} codecs"
              for name, label, run in (("OLD", runs.old_label, runs.old), ("NEW", runs.new_label, runs.new))]
    lines += ["", *(f"**{md_escape(g.strip())}**" if i == 0 else f"- {md_escape(g.strip())}"
                    for i, g in enumerate(gate)), ""] if gate else [""]
    lines += [f"- **warning:** {md_escape(w)}" for w in comparison.warnings] + ([""] if comparison.warnings else [])
    lines += ["### Bytes per call", "", *grid(BYTES_HEAD, bytes_rows(comparison), (1, 2, 3)), ""]
    lines += ["### CPU per call", "", *grid(CPU_HEAD, cpu_rows(comparison), range(2, 10)), ""]
    lines += [f"- {md_escape(line)}" for line in (*unmatched(comparison), *explanation(comparison))]
    return "\n".join(lines) + "\n"


def render_compare_html(runs: Runs, comparison: Comparison) -> str:
    """The page as text: the same rows as the terminal, every string escaped by the template engine."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    failed = {(v.codec, v.figure) for v in comparison.violations}
    cpu, sizes = cpu_rows(comparison), bytes_rows(comparison)
    cpu_table = plain_table(CPU_HEAD, cpu, numeric=range(2, 10),
                            cell_class=lambda n, i: "alarm" if i in (8, 10) and cpu[n][:2] in failed else "")
    tables: Dict[str, Table] = {
        "bytes": plain_table(BYTES_HEAD, sizes, numeric={1, 2, 3},
                             cell_class=lambda n, i: "alarm" if i >= 3 and (sizes[n][0], "bytes") in failed else ""),
        "cpu": replace(cpu_table, groups=(("", 2), ("µs per call", 4), (f"ratio to {comparison.reference}", 4),
                                          ("", 1))),
    }
    return env.get_template("compare.html").render(
        title="rpcbench: compare", runs=runs, comparison=comparison, tables=tables,
        explanation=explanation(comparison), unmatched=unmatched(comparison), gate=gate_lines(comparison),
        failed=comparison.outcome in ("failed", "inconclusive"),
        css=(TEMPLATES / "report.css").read_text(encoding="utf-8"))
