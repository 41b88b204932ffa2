"""``report.html``: one self-contained page (inline CSS, inline SVG charts, a small inline
script that sorts the results table), rendered from the Jinja2 templates in
``reports/templates/`` with autoescaping on.

The page is the sections of :data:`PARTS`, in order; the same list builds the table of
contents. A section is one line there: its anchor id, heading and the function gathering
what it shows; its text is the template ``_<id>.html``, which sees that as ``s``.

This module only gathers what the page shows into plain values and tables; every judgment
(winners, warnings, what is unstable) comes from the run's :class:`~reports.decision.Decision`, and every string,
trace-derived or not, is escaped by the template engine, never by hand. The charts are SVG
written by matplotlib, which escapes their text itself.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import jinja2
from markupsafe import Markup

from rpcbench.results import CodecResult, Suite

from . import analysis, loss
from .breakdown import MIN_TAIL_CALLS, MethodTails, SampleShare, StageSplit
from . import capacity
from .capacity import Estimate
from .decision import CapacityRow, Decision
from .formatting import MISSING, fmt_bytes, fmt_count, fmt_share, fmt_us, shown
from .precision import FIELD_COLUMNS
from .table import Column, columns, footnotes, latency_column, memory_column

TEMPLATES = Path(__file__).resolve().parent / "templates"
CHART_CAPTIONS = {
    "decision": "Above: each codec at (encode + decode CPU, bytes) per call on the front's axes (the sentence beside "
                "says which); orange line: the Pareto front, green ring: the pick, grey: dominated, red: undeclared "
                "failures; codecs not compared are left out (under Charts, every point named). Below: kbit/s per "
                "player, down and up, of the codecs the capacity table leads with, as that table gives them.",
    "pareto": "Each codec at (encode + decode CPU, bytes) per call, as sent under the decided --wire policy when "
              "the run priced one (wire bytes with headers, CPU on whole packets where timed; the axes say). The "
              "line joins the Pareto front: codecs no other beats on both; grey ones are dominated (another codec is "
              "smaller and cheaper). Red: calls failed or came back different without the codec declaring why, so "
              "the codec is not ranked.",
    "bytes": "Bytes per call: bar = mean over every call of the trace; the grey line runs from the median (p50, "
             "black mark) to the 99th percentile (red mark).",
    "timing": "CPU time per call: bar = median round, whiskers = the median's 95% confidence interval.",
    "levels": "Per compressed codec, level against bytes (left) and encode time (right; whiskers = the median's 95% "
              "confidence interval); dashed = the same codec uncompressed.",
    "tails": "Per-call time over all calls of the sample, log scale: bar = median call (p50); marks at p90, p99 and "
             "the slowest call (max, a single call: often an interrupt rather than the codec).",
    "wire": "Per player, kbit/s both ways on the wire (headers included) against the tick the server batches "
            "its calls by (--wire tick:MS policies), for the codecs with the fewest wire bytes.",
    "loss": "Against the loss rate of the run's --loss, for the pick, the baseline and the codecs with the fewest wire "
            "bytes at the decided rate (dotted): left, kbit/s per player both ways on the wire (resends, acks and "
            "headers included); right, the delay loss adds to a message, p99 (resend waits and head-of-line; 0 over "
            "plain UDP, where a lost call is lost instead). The table below gives the same figures.",
    "stages": "Each multi-step codec's encode and decode split into its stages (each timed on its own, median); "
              "the black tick is the whole operation's median, timed separately.",
}
#: charts shown inside their own sections rather than under "Charts"
SECTION_CHARTS = ("decision", "tails", "stages", "wire", "loss")
LATENCY_PCTS = ("p50", "p90", "p99", "max")
CODEC_COLUMNS = 10  #: codec columns of one table (p99 by method, a fleet's traces): more are split into tables of
                   #: this many, each as wide as 1280 px allows
MEMORY_FIGURES = (("peak_bytes_mean", "peak (mean)"), ("peak_bytes_max", "peak (max)"),
                  ("kept_bytes_mean", "kept bytes"), ("kept_blocks_mean", "kept blocks"))


@dataclass(frozen=True)
class Cell:
    """One table cell: its text (escaped when rendered) and CSS classes."""

    text: str
    css: str = ""
    value: Optional[float] = None  #: the number behind the text, for sorting (data-value)


@dataclass(frozen=True)
class Table:
    """A table as the template renders it: header cells, rows of (row class, cells), header groups above."""

    head: List[Cell]
    rows: List[Tuple[str, List[Cell]]]
    groups: Sequence[Tuple[str, int]] = ()
    css: str = ""
    key_column: bool = False  #: the first cell of each row is its header (key/value tables)


@dataclass(frozen=True)
class Figure:
    """A chart as inline SVG markup (from matplotlib, which escapes its text), with its caption."""

    svg: str
    caption: str


@dataclass
class Section:
    """What one section of the page needs besides its template text."""

    tables: Dict[str, Table] = field(default_factory=dict)
    facts: Dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Part:
    """One section of the page: anchor id, heading, and the function gathering what ``_<id>.html`` shows."""

    id: str
    title: str
    gather: Callable[[Decision], Section]
    applies: Callable[[Decision], bool] = lambda d: True  #: False: the run has nothing for this part (no heading)
    collapsed: bool = True  #: a detail section: closed under its heading until opened (open when printed)


def write_report(d: Decision, folder: str, charts: Mapping[str, str]) -> str:
    """Write ``report.html`` into ``folder``, the charts (name -> SVG markup) inline; return its path."""
    page = render_report(d, charts)
    path = os.path.join(folder, "report.html")
    with open(path, "w", encoding="utf-8", errors="xmlcharrefreplace") as f:  # lone surrogates: shown as U+FFFD
        f.write(page)
    return path


def render_report(d: Decision, charts: Mapping[str, str]) -> str:
    """The whole page as text: every part of :data:`PARTS`, a table of contents built from the same list; every
    figure and judgment from ``d``, the run's :class:`Decision`."""
    suite = d.suite
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(count=fmt_count, us=fmt_us)
    figures = {name: Figure(svg, CHART_CAPTIONS.get(name, "")) for name, svg in charts.items()}
    parts = [part for part in PARTS if part.applies(d)]
    return env.get_template("report.html").render(
        title=page_title(suite), suite=suite, parts=parts, calls_line=d.calls_line, schema_line=d.schema_line,
        capture_line=d.capture.line if d.capture else None, gathered={part.id: part.gather(d) for part in parts},
        css=(TEMPLATES / "report.css").read_text(encoding="utf-8"),
        script=(TEMPLATES / "sort.js").read_text(encoding="utf-8"),
        figures=figures, general_figures=[f for name, f in figures.items() if name not in SECTION_CHARTS],
        unstable_ci_pct=analysis.UNSTABLE_CI_PCT, min_tail_calls=MIN_TAIL_CALLS,
        decision=d)


def page_title(suite: Suite) -> str:
    """``rpcbench: `` and the game named in the trace's metadata, else the trace file's name (a name that already
    starts with rpcbench, as the bundled simulator's does, is not prefixed twice)."""
    name = str((suite.trace.get("metadata") or {}).get("game") or os.path.basename(str(suite.trace.get("path"))))
    return name if name.lower().startswith("rpcbench") else f"rpcbench: {name}"


# -- sections ---------------------------------------------------------------------------------------


def summary_section(d: Decision) -> Section:
    """The headlines: smallest, fastest encode, fastest decode; the Pareto front's codecs and those, each vs json
    and bson (the verdict above names the front)."""
    return Section(facts={
        "winners": [(h.label, h.codec, h.text, h.failed) for h in d.headlines],
        "comparisons": list(d.comparisons),
        "warnings": len(d.warnings),
    })


def notes_section(d: Decision) -> Section:
    """Reasons to distrust parts of the run, then what the table's marks mean: kept off the first screen."""
    return Section(facts={"warnings": list(d.warnings), "notes": footnotes(d)})


def results_section(d: Decision) -> Section:
    """The results table (same columns as the terminal table, sortable) and the timing detail."""
    suite = d.suite
    tables = {"results": column_table(columns(d), suite.results, "results sortable")}
    detail = _timing_detail(d)
    if detail:
        tables["detail"] = detail
    return Section(tables=tables)


def latency_section(d: Decision) -> Section:
    """Per-call percentiles over all calls, then the slowest methods' p99 per codec."""
    suite = d.suite
    measured = [r for r in suite.results if r.latency]
    groups = [("", 1)] + [(f"{op} µs per call", len(LATENCY_PCTS)) for op in analysis.OPS]
    cols = [Column("codec", False, lambda r: r.codec)] + [
        latency_column(op, pct, pct) for op in analysis.OPS for pct in LATENCY_PCTS]
    tables = {"all": column_table(cols, measured, groups=groups)} if measured else {}
    by_method = {op: [_tails_table(tails, codecs) for codecs in codec_groups(tails.codecs)]
                 for op, tails in d.breakdown.tails.items()}
    return Section(tables=tables, facts={
        "measured": bool(measured), "by_method": by_method,
        "hidden": {op: tails.hidden for op, tails in d.breakdown.tails.items()},
        "not_measured": _not_measured(suite, [r for r in suite.results if not r.latency], "tails")})


def memory_section(d: Decision) -> Section:
    """Allocation figures per call under tracemalloc, encode and decode side by side."""
    suite = d.suite
    measured = [r for r in suite.results if r.memory]
    groups = [("", 1)] + [(op, len(MEMORY_FIGURES)) for op in analysis.OPS]
    cols = [Column("codec", False, lambda r: r.codec)] + [
        memory_column(op, key, title, fmt_bytes if key != "kept_blocks_mean" else "{:.1f}".format)
        for op in analysis.OPS for key, title in MEMORY_FIGURES]
    return Section(tables={"memory": column_table(cols, measured, groups=groups)} if measured else {},
                   facts={"not_measured": _not_measured(suite, [r for r in suite.results if not r.memory], "memory")})


def stages_section(d: Decision) -> Section:
    """The stage split of multi-step codecs: each stage's µs and share of the operation."""
    suite = d.suite
    splits = d.breakdown.stages
    facts = {"single": [r.codec for r in suite.results if not r.stages]}
    if not splits:
        return Section(facts=facts)
    steps = max(len(split.stages) for split in splits)
    rows = [_stage_row(split, steps) for split in splits]
    head = ("codec", "op", *(f"step {i + 1}: µs · % of stages" for i in range(steps)), "stages µs", "whole op µs")
    return Section(tables={"stages": plain_table(head, rows, numeric=range(2, steps + 4))}, facts=facts)


def wire_section(d: Decision) -> Section:
    """Each codec under each --wire policy, in two tables that fit the page: what it costs (wire bytes, payload per
    packet, kbit/s, CPU as sent), then how it is sent (packets per second, added latency, packing work)."""
    w = d.wire
    ranked = [r for policy in w.policies for codec in w.rankings.get(policy, ()) if (r := w.row(codec, policy))]
    cost = ("codec", "policy", "B/call on the wire", "payload B/packet p50", "p99", "kbit/s up", "down", "fragmented",
            "encode µs/call", "decode µs/call")
    sending = ("codec", "policy", "packets/s up", "down", "latency +ms mean", "p99", "packing µs/call")
    cost_rows = [(r.codec, r.policy, f"{r.bytes_per_call:.1f}", f"{r.payload_p50:.0f}", f"{r.payload_p99:.0f}",
                  f"{r.kbps_up:.2f}", f"{r.kbps_down:.2f}", f"{r.fragmented:,}", shown(r.encode_us, fmt_us),
                  shown(r.decode_us, fmt_us)) for r in ranked]
    sending_rows = [(r.codec, r.policy, f"{r.packets_up:.1f}", f"{r.packets_down:.1f}", f"{r.latency_mean_ms:.1f}",
                     f"{r.latency_p99_ms:.1f}", f"{r.packet_us_per_call:.2f}") for r in ranked]
    problems = [f"{r.codec} under {r.policy}: {r.problem}" for r in w.rows if r.problem]
    return Section(tables={"wire": plain_table(cost, cost_rows, numeric=range(2, len(cost))),
                           "sending": plain_table(sending, sending_rows, numeric=range(2, len(sending)))},
                   facts={"chosen": w.chosen, "transport": w.transport, "notes": [*w.notes, *problems]})


def loss_section(d: Decision) -> Section:
    """Every codec at every loss rate, fewest wire bytes first within a rate (the cells: :func:`reports.loss.cells`)."""
    v = d.loss
    head = ("loss %", *loss.COLUMNS)
    rows = [(f"{rate:g}", *loss.cells(r)) for rate in v.rates for r in v.at(rate)]
    table = plain_table(head, rows, numeric=[0, *range(3, 6), *range(7, len(head))],
                        row_class=lambda n: "recommended" if rows[n][1] == _pick(d) else "")
    return Section(tables={"loss": replace(table, css="loss")},
                   facts={"link": v.link, "policy": v.policy, "rate": v.rate_text, "flags": list(v.flags)})


def _pick(d: Decision) -> str:
    return d.verdict.pick.codec if d.verdict.pick else ""


def fidelity_section(d: Decision) -> Section:
    """Every codec's problem groups in one table, undeclared ones highlighted; codec errors above it."""
    suite = d.suite
    problems = [(r.codec, p) for r in suite.results for p in r.problems]
    facts = {
        "errors": [(r.codec, r.error) for r in suite.results if r.error],
        "clean": [r.codec for r in suite.results
                  if not r.problems and not r.failures and not r.mismatches and not r.error],
    }
    if not problems:
        return Section(facts=facts)
    table = plain_table(
        ("codec", "kind", "feature", "declared", "calls", "example call #", "method", "path", "detail"),
        [(c, p.kind, p.feature, "yes" if p.declared else "NO", f"{p.count:,}", p.example_index, p.example_method,
          p.example_path, p.detail) for c, p in problems],
        numeric={4, 5}, row_class=lambda i: "" if problems[i][1].declared else "undeclared")
    return Section(tables={"problems": table}, facts=facts)


def fleet_section(d: Decision) -> Section:
    """A fleet run: the merge against each trace (bytes per call, failures), the spread between traces,
    the traces that differ, and the intervals of a sampled size pass."""
    suite, f = d.suite, d.fleet
    tables: Dict[str, Table] = {}
    by_trace: List[Table] = []
    for codecs in codec_groups([r.codec for r in suite.results] if suite.traces else []):
        rows = [("* (merged)", f"{f.calls:,}", *(_mean(suite.result(c)) for c in codecs))]
        for t in suite.traces:
            by_codec = {r.codec: r for r in t.results}
            rows.append((t.trace["path"], f"{t.trace.get('calls') or 0:,}", *(_mean(by_codec.get(c)) for c in codecs)))
        by_trace.append(plain_table(("trace", "calls", *codecs), rows, numeric=range(1, len(codecs) + 2)))
    if f.traces:
        tables["spread"] = plain_table(
            ("codec", "fleet B/call", "lowest trace", "B/call", "highest trace", "B/call", "spread %"),
            [(s.codec, f"{s.merged:.1f}", s.low_trace, f"{s.low:.1f}", s.high_trace, f"{s.high:.1f}",
              f"{s.pct:.0f}") for s in f.spreads], numeric={1, 3, 5, 6})
    if f.estimates:
        tables["estimates"] = plain_table(("codec", "bytes per call", "bytes in all", "failures"), f.estimates)
    return Section(tables=tables, facts={"odd": list(f.odd), "traces": f.traces, "by_trace": by_trace})


def codec_groups(codecs: Sequence[str]) -> List[Sequence[str]]:
    """``codecs`` in groups of at most :data:`CODEC_COLUMNS`, one table each."""
    return [codecs[i:i + CODEC_COLUMNS] for i in range(0, len(codecs), CODEC_COLUMNS)]


def _mean(r: Optional[CodecResult]) -> str:
    """A codec's bytes per call, one decimal ("-" when nothing was encoded)."""
    return f"{r.sizes.mean:.1f}" if r and r.sizes else "-"


def trace_section(d: Decision) -> Section:
    """What was replayed: the trace file, its traffic, its methods, header metadata and recorder counters."""
    suite = d.suite
    t = suite.trace
    calls, duration = t.get("calls"), t.get("duration_s")
    facts = {
        "file": t.get("path"), "format": t.get("format"), "size": _bytes(t.get("file_bytes")),
        "sha256": t.get("sha256"),
        "calls": fmt_count(calls), "duration": f"{duration:.1f} s" if duration else None,
        "call rate": f"{rate:.1f} calls/s" if (rate := d.breakdown.call_rate) else None,
        "connections": t.get("connections"),
        "directions": ", ".join(f"{k} {fmt_count(v)}" for k, v in (t.get("directions") or {}).items()) or None,
    }
    tables = {"facts": kv_table(facts), "methods": _methods_table(d)}
    if t.get("metadata"):
        tables["metadata"] = kv_table(t["metadata"])
    if t.get("recorder"):
        tables["recorder"] = kv_table({k: fmt_count(v) for k, v in t["recorder"].items()})
    return Section(tables=tables, facts={"truncated_bytes": t.get("truncated_bytes"),
                                         "methods": len(t.get("methods") or {})})


def setup_section(d: Decision) -> Section:
    """Codec configurations, benchmark settings and the machine: what a rerun must match."""
    suite = d.suite
    codecs = plain_table(("codec", "library", "version", "origin", "config"),
                         [(r.codec, r.library or "stdlib", r.library_version or "", r.origin,
                           json.dumps(r.config, ensure_ascii=False, default=str)) for r in suite.results])
    tables = {"codecs": codecs, "settings": kv_table(_settings_facts(suite.settings)),
              "environment": kv_table(suite.environment)}
    if d.breakdown.sample:
        tables["sample"] = _sample_table(d.breakdown.sample)
    return Section(tables=tables, facts={"sample_state": d.breakdown.sample_state,
                                         "worst_share_gap": d.breakdown.sample_gap})


def reading_section(d: Decision) -> Section:
    """The settings the "how to read the numbers" text quotes: sample, timer, rounds, isolation."""
    suite = d.suite
    s = suite.settings
    return Section(facts={
        "processes": s.get("processes"), "lanes": s.get("timing_lanes") or 1, "repeat": s.get("repeat", "?"),
        "sample": fmt_count(s.get("sample")), "sample_method": s.get("sample_method", "drawn from the trace"),
        "sample_seed": s.get("sample_seed", "?"), "timer": s.get("timer", "?"), "min_time_s": s.get("min_time_s", "?"),
        "warmup": s.get("warmup", "?"), "gc": s.get("gc", "?")})


def capacity_section(d: Decision) -> Section:
    """The capacity table's cells: the recommendation, the baseline and the front, then every other codec."""
    return Section(facts={"lead": [_capacity_cells(r) for r in d.capacity_rows],
                          "others": [_capacity_cells(r) for r in d.other_rows],
                          "core_price": capacity.CORE_MONTH_PRICE, "ram_price": capacity.RAM_GB_MONTH_PRICE})


def _capacity_cells(row: CapacityRow) -> Dict[str, Any]:
    """One codec's row: the cells at the user's CCU and price, and per-CCU figures the page's script rescales."""
    f, one = row.figures, row.per_player
    return {
        "codec": row.codec, "role": row.role, "down": ci_cell(f.down_kbps), "up": ci_cell(f.up_kbps),
        "gb": ci_cell(f.egress_gb, 0), "usd": ci_cell(f.egress_usd, 0), "cores": ci_cell(f.server_cores, 2),
        "client": ci_cell(f.client_ms_per_s, 3), "state": fmt_bytes(f.state_bytes) if f.state_bytes else "0",
        "total": ci_cell(f.total_usd, 0),
        "scale": {"gb": _triple(one.egress_gb), "usd": _triple(one.egress_usd), "cores": _triple(one.server_cores),
                  "state": row.state_bytes},
    }


def ci_text(e: Optional[Estimate], digits: int = 1) -> str:
    """``47.4 [43.6-50.9]``; the interval left out when there is none."""
    if e is None:
        return MISSING
    if math.isnan(e.low) or math.isnan(e.high):
        return f"{e.value:,.{digits}f}"
    return f"{e.value:,.{digits}f} [{e.low:,.{digits}f}-{e.high:,.{digits}f}]"


def ci_cell(e: Optional[Estimate], digits: int = 1) -> Markup:
    """:func:`ci_text` for a narrow table cell: the interval kept whole on its own line under the figure."""
    figure, _, interval = ci_text(e, digits).partition(" ")
    return Markup("{} <span class='ci'>{}</span>").format(figure, interval) if interval else Markup.escape(figure)


def _triple(e: Optional[Estimate]) -> str:
    """An estimate as ``value low high`` for a data attribute (the script multiplies each)."""
    return "" if e is None else " ".join(repr(x) for x in (e.value, e.low, e.high))


def bytes_section(d: Decision) -> Section:
    """Where the bytes go: per method, share of calls, and share of bytes and bytes per call under the baseline
    and the pick."""
    head = ["method", "calls", "% of calls"]
    for codec in d.bytes_codecs:
        head += [f"% of bytes ({codec})", f"bytes/call ({codec})"]
    rows = [[m.method, f"{m.calls:,}", fmt_share(m.call_share),
             *(cell for share, per_call in m.codecs
               for cell in (shown(share, fmt_share), shown(per_call, "{:.1f}".format)))] for m in d.bytes_methods]
    return Section(facts={"head": head, "rows": rows})


def from_page_globals(d: Decision) -> Section:
    """Nothing to gather: the part's template reads what :func:`render_report` hands the whole page
    (``figures``: the charts; ``decision``: the verdict, the capacity plan's inputs, the study findings)."""
    return Section()


def _settings_facts(settings: Mapping[str, Any]) -> Dict[str, Any]:
    """The run's settings, in words where a bare value would puzzle (processes, jobs, sample, passes)."""
    facts = {k: v for k, v in settings.items() if k not in ("sample_by_method", "sample_method")}
    processes = facts.get("processes")
    if processes is not None:
        facts["processes"] = (f"{processes}: each codec timed in {processes} fresh worker process(es), one after "
                              "another; rounds pooled" if processes else "0: in this process, codecs interleaved")
    if facts.get("timing_lanes") is not None:
        lanes = facts["timing_lanes"]
        facts["timing_lanes"] = (f"{lanes}: codecs timed {lanes} at a time, each on a CPU of its own" if lanes > 1
                                 else "1: codecs timed one at a time")
    if facts.get("jobs") is not None:
        facts["jobs"] = f"{facts['jobs']} process(es) share the size and fidelity pass"
    if facts.get("sample") is not None:
        facts["sample"] = f"{fmt_count(facts['sample'])} calls, {settings.get('sample_method', 'from the trace')}"
    for key, done in (("tails", "per-call percentiles measured"), ("memory", "tracemalloc pass run")):
        if key in facts:
            facts[key] = done if facts[key] else f"skipped (--no-{key})"
    return facts


def _sample_table(sample: Sequence[SampleShare]) -> Table:
    """Each method's share of the timing sample next to its share of the trace."""
    rows = [(m.method, fmt_count(m.trace_calls), fmt_share(m.trace_share), fmt_count(m.sample_calls),
             fmt_share(m.sample_share), f"{m.points:+.1f}" if m.points else "0.0") for m in sample]
    head = ("method", "trace calls", "% of trace", "sample calls", "% of sample", "difference (points)")
    return plain_table(head, rows, numeric={1, 2, 3, 4, 5})


# -- pieces -----------------------------------------------------------------------------------------


def _methods_table(d: Decision) -> Table:
    """Each method's calls and share of calls, plus its share of bytes under the reference codec."""
    head = ["method", "calls", "% of calls"]
    if d.breakdown.methods_by_bytes:
        head += [f"% of bytes ({d.reference})", f"bytes/call ({d.reference})"]
    rows = []
    for m in d.breakdown.methods:
        row: List[Any] = [m.method, f"{m.calls:,}", fmt_share(m.call_share)]
        if d.breakdown.methods_by_bytes:
            row += [shown(m.byte_share, fmt_share), shown(m.bytes_per_call, "{:.0f}".format)]
        rows.append(row)
    return plain_table(head, rows, numeric=range(1, len(head)))


def _timing_detail(d: Decision) -> Optional[Table]:
    """One row per codec and operation: median with its confidence interval, IQR, MAD, rounds, stability."""
    rows = []
    for r in d.suite.results:
        for op in analysis.OPS:
            t, f = analysis.timing_of(r, op), d.figures[r.codec].op(op)
            if t and f:
                lo, hi, confidence = f.ci_us
                rows.append((r.codec, op, f"{fmt_us(f.median_us)} [{fmt_us(lo)}–{fmt_us(hi)}]", f"{confidence:.0%}",
                             f"±{f.stability.ci_half_pct:.1f}%", fmt_us(t.iqr_us), fmt_us(t.mad_us),
                             f.stability.rounds, f"{t.loops:,} × {t.calls:,}",
                             "unstable" if f.stability.unstable else "ok"))
    if not rows:
        return None
    return plain_table(("codec", "op", "median [CI]", "conf.", "±CI", "IQR", "MAD", "rounds", "loops × calls",
                        "stability"), rows, numeric=range(2, 9),
                       cell_class=lambda n, i: "alarm" if i == 9 and rows[n][9] != "ok" else "")


def _tails_table(tails: MethodTails, codecs: Sequence[str]) -> Table:
    """Methods × ``codecs`` of per-call p99, slowest first, the tail shaded, thin samples greyed."""
    rows = [[m, shown(tails.call_share[m], fmt_share), fmt_count(tails.timed[m])]
            + [shown(tails.p99[m, codec], fmt_us) for codec in codecs] for m in tails.methods]

    def shade(n: int, i: int) -> str:
        if i < 3:
            return ""
        method = tails.methods[n]
        return "muted" if method in tails.muted else "hot" if (method, codecs[i - 3]) in tails.hot else ""

    return plain_table(["method", "% of calls", "timed", *codecs], rows, numeric=range(1, len(codecs) + 3),
                       cell_class=shade)


def _stage_row(split: StageSplit, steps: int) -> List[str]:
    """One codec's operation as a table row: each stage's µs and share, padded to ``steps``, then the sum and the
    whole."""
    cells = [f"{name} {fmt_us(us)} µs · {fmt_share(share)}" for name, us, share in split.stages]
    return [split.codec, split.op, *cells, *[""] * (steps - len(cells)), fmt_us(split.total_us),
            shown(split.whole_us, fmt_us)]


def _not_measured(suite: Suite, missing: Sequence[CodecResult], setting: str) -> Optional[Tuple[str, str]]:
    """The codecs without ``latency`` or ``memory`` figures, and the likely reason; None if every codec has them."""
    if not missing:
        return None
    if suite.settings.get(setting) is False:
        why = f"the run skipped this pass (--no-{setting})"
    else:
        why = ("per-connection streaming codecs are timed only as whole batches, since each call depends on the "
               "connection's earlier calls; codecs whose timing failed have no figures either")
    return ", ".join(r.codec for r in missing), why


def column_table(cols: Sequence[Column], results: Sequence[CodecResult], css: str = "",
                 groups: Sequence[Tuple[str, int]] = ()) -> Table:
    """Results as a table of ``cols`` (shared with the terminal table), alarms marked;
    ``groups`` = (title, span) above."""
    head = [Cell(c.title, "num" if c.numeric else "") for c in cols]
    rows = [("", [Cell(c.cell(r), _classes(("num", c.numeric), ("alarm", c.alarm(r))), c.value(r)) for c in cols])
            for r in results]
    return Table(head, rows, groups, css)


def precision_section(d: Decision) -> Section:
    """The precision profile, and per lossy codec each field's values changed within their step."""
    v = d.precision
    tables = {c.codec: plain_table(FIELD_COLUMNS, [f.cells() for f in c.fields], numeric={1, 2, 3, 4})
              for c in v.codecs}
    return Section(tables=tables, facts={"line": v.line, "closing": list(v.closing), "floor": v.floor_note,
                                         "cpu": v.cpu_note})


def plain_table(head: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Iterable[int] = (),
                row_class: Optional[Callable[[int], str]] = None,
                cell_class: Optional[Callable[[int, int], str]] = None) -> Table:
    """A table of plain values; ``numeric`` column indexes are right-aligned; classes by row and by cell."""
    nums = set(numeric)
    body = []
    for n, row in enumerate(rows):
        cells = [Cell(str(v), _classes(("num", i in nums), (cell_class(n, i) if cell_class else "", True)))
                 for i, v in enumerate(row)]
        body.append((row_class(n) if row_class else "", cells))
    return Table([Cell(h, "num" if i in nums else "") for i, h in enumerate(head)], body)


def kv_table(mapping: Mapping[str, Any]) -> Table:
    """Key/value pairs as a two-column table; nested mappings become ``key value, ...`` text."""
    rows = [("", [Cell(str(k)), Cell(_text(v))]) for k, v in mapping.items() if v is not None]
    return Table([], rows, css="kv", key_column=True)


def _text(value: Any) -> str:
    """A metadata or settings value as one line of text (lists and mappings flattened)."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    return str(value)


def _bytes(n: Optional[int]) -> Optional[str]:
    return None if n is None else f"{n:,} bytes ({n / 1e6:.1f} MB)"


def _classes(*flags: Tuple[str, bool]) -> str:
    """CSS class names whose flag is set, space-separated."""
    return " ".join(name for name, on in flags if on and name)


#: the page, top to bottom; each part's text is ``templates/_<id>.html``. The table of contents is built from it.
PARTS: Tuple[Part, ...] = (
    Part("verdict", "Verdict", from_page_globals, collapsed=False),
    Part("capacity", "Capacity and cost", capacity_section, collapsed=False),
    Part("wire", "On the wire", wire_section, lambda d: d.wire.compared),
    Part("loss", "Under loss", loss_section, lambda d: d.loss.shown),
    Part("summary", "Summary", summary_section, collapsed=False),
    Part("bytes", "Where the bytes go", bytes_section),
    Part("study", "The study re-tested", from_page_globals),
    Part("results", "Results", results_section, collapsed=False),
    Part("fleet", "Fleet", fleet_section, lambda d: d.fleet.shown),
    Part("charts", "Charts", from_page_globals),
    Part("latency", "Latency tails", latency_section),
    Part("allocations", "Allocations", memory_section),
    Part("stages", "Where the time goes", stages_section),
    Part("fidelity", "Fidelity", fidelity_section),
    Part("precision", "Precision profile and lossy values", precision_section,
         lambda d: bool(d.precision.profile or d.precision.generated)),
    Part("trace", "Trace", trace_section),
    Part("setup", "Codecs, settings and environment", setup_section),
    Part("notes", "Notes", notes_section),
    Part("reading", "How to read the numbers", reading_section),
)
