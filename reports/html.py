"""``report.html``: one self-contained page (inline CSS, charts as PNG files beside it).

Every string that comes from the trace or a codec is passed through :func:`esc`
(``html.escape(..., quote=True)``): method names and metadata are recorded data, not markup.
"""

from __future__ import annotations

import html
import json
import math
import os
import statistics
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from rpcbench.results import CodecResult, Suite

from .table import (MISSING, UNSTABLE_STDEV_PCT, Column, columns, fmt_bytes, fmt_count, fmt_ratio, fmt_us, footnotes,
                    latency_column, latency_us, memory_column, shown, timing_notes, undeclared)

CHART_CAPTIONS = {
    "bytes": "Bytes per call: bar = mean over every call of the trace; the grey line runs from the median (p50, "
             "black mark) to the 99th percentile (red mark).",
    "timing": "CPU time per call: bar = median round, whiskers = fastest and slowest round.",
    "size_vs_encode": "Each codec at (encode time, bytes). Points down and to the left are smaller and cheaper.",
    "levels": "Per compressed codec, level against bytes (left) and encode time (right; whiskers = fastest and "
              "slowest round); dashed = the same codec uncompressed.",
    "tails": "Per-call time over all calls of the sample, log scale: bar = median call (p50); marks at p90, p99 and "
             "the slowest call (max, a single call: often an interrupt rather than the codec).",
    "stages": "Each multi-step codec's encode and decode split into its stages (each timed on its own, median); "
              "the black tick is the whole operation's median, timed separately.",
}
#: charts shown inside their own sections rather than under "Charts"
SECTION_CHARTS = ("tails", "stages")
#: rows of the per-method tail tables
TOP_METHODS = 8
#: below this many calls of a method in the sample, its p99 is simply its slowest call
MIN_TAIL_CALLS = 100
LATENCY_PCTS = ("p50", "p90", "p99", "max")
MEMORY_FIGURES = (("peak_bytes_mean", "peak (mean)"), ("peak_bytes_max", "peak (max)"),
                  ("kept_bytes_mean", "kept bytes"), ("kept_blocks_mean", "kept blocks"))

CSS = """
:root { color-scheme: light; --ink: #1d2330; --muted: #5b6474; --line: #dde1e8; --zebra: #f5f7fa;
        --bad: #b3261e; --bad-bg: #fdecea; --warn-bg: #fff6dc; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--ink); background: #fff; }
main { max-width: 1320px; margin: 0 auto; padding: 28px 32px 64px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 20px; margin: 40px 0 12px; padding-bottom: 6px; border-bottom: 2px solid var(--line); }
h3 { font-size: 16px; margin: 24px 0 8px; }
p, li { max-width: 90ch; }
.sub { color: var(--muted); margin: 0; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 13px; }
.summary { background: #f0f5fd; border: 1px solid #cfdcf2; border-radius: 8px; padding: 14px 22px; margin-top: 20px; }
.summary h2 { margin-top: 8px; }
.summary li { margin: 4px 0; }
.summary .answer { font-size: 16px; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: 14px; }
th, td { padding: 5px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: #eef1f6; font-weight: 600; white-space: nowrap; }
tbody tr:nth-child(even) { background: var(--zebra); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
table.results { font-size: 13.5px; }
table.results td, table.results th { padding: 5px 7px; white-space: nowrap; }
table.results td:last-child { white-space: normal; }
td:first-child, .summary b { white-space: nowrap; }
td.alarm { color: var(--bad); font-weight: 600; }
tr.undeclared td { background: var(--bad-bg); }
.scroll { overflow-x: auto; }
.notes { color: var(--muted); font-size: 13px; padding-left: 18px; }
.warn { background: var(--warn-bg); border-left: 4px solid #e0a800; padding: 8px 12px; }
.bad { color: var(--bad); font-weight: 600; }
figure { margin: 18px 0 30px; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); border-radius: 6px; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; }
.kv th { background: none; text-align: left; font-weight: 600; color: var(--muted); }
.cols > div > h3:first-child { margin-top: 0; }
.cols { display: flex; flex-wrap: wrap; gap: 12px 48px; align-items: flex-start; }
th.group { text-align: center; border-bottom: 2px solid #fff; }
td.hot { background: #fde3cf; font-weight: 600; }
td.muted { color: var(--muted); }
"""


def esc(value: Any) -> str:
    """Any value as HTML text, quotes included, so it is safe in element text and attributes."""
    return html.escape(str(value), quote=True)


def write_report(suite: Suite, folder: str, charts: Mapping[str, str]) -> str:
    """Write ``report.html`` into ``folder``, linking the chart files named in ``charts``; return its path."""
    title = f"rpcbench: {(suite.trace.get('metadata') or {}).get('game') or os.path.basename(str(suite.trace.get('path')))}"
    body = "\n".join([
        f"<h1>{esc(title)}</h1>",
        f"<p class='sub'>{esc(fmt_count(suite.trace.get('calls')))} recorded RPC calls replayed through "
        f"{len(suite.results)} codecs · run {esc(suite.created)} · "
        f"<span class='mono'>{esc(' '.join(suite.command))}</span></p>",
        summary_section(suite),
        results_section(suite),
        charts_section(charts),
        latency_section(suite, charts),
        memory_section(suite),
        stages_section(suite, charts),
        fidelity_section(suite),
        trace_section(suite),
        setup_section(suite),
        reading_section(suite),
    ])
    page = (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{esc(title)}</title>"
            f"<style>{CSS}</style></head><body><main>\n{body}\n</main></body></html>\n")
    path = os.path.join(folder, "report.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path


# -- sections ---------------------------------------------------------------------------------------


def summary_section(suite: Suite) -> str:
    """The answer: smallest, fastest encode, fastest decode, the size/CPU frontier, each vs json and bson."""
    items = []
    winners = _winners(suite)
    for label, (best, text) in winners.items():
        items.append(f"<li class='answer'><b>{label}:</b> <b>{esc(best.codec)}</b>, {esc(text)}{_caveat(best)}</li>")
    frontier = _frontier(suite)
    if frontier:
        items.append("<li><b>Size/encode trade-off</b> (no other codec is both smaller and faster to encode), "
                     f"smallest first: {', '.join(f'<b>{esc(r.codec)}</b>' for r in frontier)}.</li>")
    notable = [*frontier, *(best for best, _ in winners.values())]
    comparisons = [f"<li>{esc(line)}</li>" for line in _comparisons(suite, notable)]
    warnings = [f"<li class='bad'>{esc(note)}</li>" for note in _warnings(suite)]
    return (f"<section class='summary'><h2>Summary</h2><ul>{''.join(items)}</ul>"
            + (f"<h3>Compared with json and bson</h3><ul>{''.join(comparisons)}</ul>" if comparisons else "")
            + (f"<h3>Check before trusting</h3><ul>{''.join(warnings)}</ul>" if warnings else "")
            + "</section>")


def results_section(suite: Suite) -> str:
    """The results table (same columns as the terminal table), its footnotes and the timing detail."""
    notes = "".join(f"<li>{esc(n)}</li>" for n in footnotes(suite))
    return (f"<h2>Results</h2><p class='sub'>Bytes over every call of the trace; times in µs per call; "
            f"± is the spread of the rounds (half the fastest-to-slowest range, % of the median).</p>"
            f"<div class='scroll'>{_column_table(columns(suite), suite.results, 'results')}</div>"
            + (f"<ul class='notes'>{notes}</ul>" if notes else "") + _timing_detail(suite))


def charts_section(charts: Mapping[str, str]) -> str:
    """Every general chart that was written, as a relative link to its PNG beside the report."""
    figures = "".join(_figure(charts, name) for name in charts if name not in SECTION_CHARTS)
    return f"<h2>Charts</h2>{figures or '<p>No chart had data to draw.</p>'}"


def latency_section(suite: Suite, charts: Mapping[str, str]) -> str:
    """Per-call percentiles over all calls (table and chart), then the slowest methods' p99 per codec."""
    measured = [r for r in suite.results if r.latency]
    intro = ("<h2>Latency tails</h2><p>A frame budget is broken by the slow calls, not the average one. Here every "
             "call of the timing sample was timed on its own (the timer's own cost subtracted) and the times were "
             "ranked: p50 is the median call, p99 the call slower than 99 % of them, max the slowest one. "
             "µs per call.</p>")
    if not measured:
        return intro + _not_measured(suite, suite.results, "tails")
    groups = [("", 1)] + [(f"{op} µs per call", len(LATENCY_PCTS)) for op in ("encode", "decode")]
    cols = [Column("codec", False, lambda r: r.codec)] + [
        latency_column(op, pct, pct) for op in ("encode", "decode") for pct in LATENCY_PCTS]
    return (intro + f"<h3>All calls</h3><div class='scroll'>{_column_table(cols, measured, groups=groups)}</div>"
            + _figure(charts, "tails") + _method_tails(suite, measured, "encode") + _method_tails(suite, measured, "decode")
            + _not_measured(suite, [r for r in suite.results if not r.latency], "tails"))


def memory_section(suite: Suite) -> str:
    """Allocation figures per call under tracemalloc, encode and decode side by side."""
    measured = [r for r in suite.results if r.memory]
    intro = ("<h2>Allocations</h2><p>From a separate, untimed replay under <code>tracemalloc</code>. "
             "<b>Peak</b>: the most memory allocated above the starting point at any moment while one call was "
             "handled, temporary buffers included (mean over the calls, and the largest). <b>Kept</b>: what the "
             "result still holds afterwards (the encoded <code>bytes</code>; the decoded call), in bytes and in "
             "memory blocks, i.e. objects the caller will free later. Per call.</p>")
    if not measured:
        return intro + _not_measured(suite, suite.results, "memory")
    groups = [("", 1)] + [(op, len(MEMORY_FIGURES)) for op in ("encode", "decode")]
    cols = [Column("codec", False, lambda r: r.codec)] + [
        memory_column(op, key, title, fmt_bytes if key != "kept_blocks_mean" else "{:.1f}".format)
        for op in ("encode", "decode") for key, title in MEMORY_FIGURES]
    return (intro + f"<div class='scroll'>{_column_table(cols, measured, groups=groups)}</div>"
            + _not_measured(suite, [r for r in suite.results if not r.memory], "memory"))


def stages_section(suite: Suite, charts: Mapping[str, str]) -> str:
    """The stage split of multi-step codecs: chart, then each stage's µs and share of the operation."""
    split = [r for r in suite.results if r.stages]
    intro = ("<h2>Where the time goes</h2><p>Codecs made of several steps (serialize, then compress) have each "
             "step timed on its own, fed the previous step's outputs, so the stage medians add up to roughly the "
             "whole operation, timed separately (its confidence interval is under Timing detail). µs per call, medians.</p>")
    if not split:
        return intro + "<p class='sub'>No codec of this run has several stages timed separately (not measured).</p>"
    steps = max(len(stages) for r in split for stages in r.stages.values())
    rows = [_stage_row(r, op, steps) for r in split for op in ("encode", "decode") if r.stages.get(op)]
    single = [r.codec for r in suite.results if not r.stages]
    return (intro + _figure(charts, "stages")
            + _table(("codec", "op", *(f"step {i + 1}: µs · % of stages" for i in range(steps)), "stages µs",
                      "whole op µs"), rows, numeric=set(range(2, steps + 4)))
            + (f"<p class='sub'>No stage split for {esc(', '.join(single))}: single-step codecs, per-connection "
               "streaming codecs (timed only whole) or codecs whose timing did not run.</p>" if single else ""))


def fidelity_section(suite: Suite) -> str:
    """Every codec's problem groups in one table, undeclared ones highlighted; codec errors above it."""
    parts = ["<h2>Fidelity</h2><p>Does the codec give the same call back? <b>Declared</b> problems are "
             "documented properties of the format (json turns bytes into base64 text); <span class='bad'>"
             "undeclared</span> ones are bugs or surprises and are highlighted.</p>"]
    parts += [f"<p class='warn'><b>{esc(r.codec)}</b>: timing could not run: <span class='mono'>{esc(r.error)}</span></p>"
              for r in suite.results if r.error]
    clean = [r.codec for r in suite.results if not r.problems and not r.failures and not r.mismatches and not r.error]
    if clean:
        parts.append(f"<p>Every call came back identical: {', '.join(f'<b>{esc(c)}</b>' for c in clean)}.</p>")
    problems = [(r.codec, p) for r in suite.results for p in r.problems]
    if problems:
        parts.append("<div class='scroll'>" + _table(
            ("codec", "kind", "feature", "declared", "calls", "example call #", "method", "path", "detail"),
            [(c, p.kind, p.feature, "yes" if p.declared else "NO", f"{p.count:,}", p.example_index, p.example_method,
              p.example_path, p.detail) for c, p in problems],
            numeric={4, 5}, row_class=lambda i: "" if problems[i][1].declared else "undeclared") + "</div>")
    return "".join(parts)


def trace_section(suite: Suite) -> str:
    """What was replayed: the trace file, its traffic, its methods, header metadata and recorder counters."""
    t = suite.trace
    calls, duration = t.get("calls"), t.get("duration_s")
    facts = {
        "file": t.get("path"), "format": t.get("format"), "size": _bytes(t.get("file_bytes")), "sha256": t.get("sha256"),
        "calls": fmt_count(calls), "duration": f"{duration:.1f} s" if duration else None,
        "call rate": f"{calls / duration:.1f} calls/s" if calls and duration else None,
        "connections": t.get("connections"),
        "directions": ", ".join(f"{k} {fmt_count(v)}" for k, v in (t.get("directions") or {}).items()) or None,
    }
    parts = ["<h2>Trace</h2>"]
    if t.get("truncated_bytes"):
        parts.append(f"<p class='warn'>The trace ends in a truncated record: {esc(t['truncated_bytes'])} bytes "
                     "were ignored (the recorder was probably killed mid-write).</p>")
    parts.append(f"<div class='cols'><div>{_kv(facts)}</div>")
    if t.get("metadata"):
        parts.append(f"<div><h3>Header metadata</h3>{_kv(t['metadata'])}</div>")
    if t.get("recorder"):
        parts.append(f"<div><h3>Recorder counters</h3>{_kv({k: fmt_count(v) for k, v in t['recorder'].items()})}</div>")
    parts.append("</div>" + _methods_table(suite))
    return "".join(parts)


def setup_section(suite: Suite) -> str:
    """Codec configurations, benchmark settings and the machine: what a rerun must match."""
    codecs = _table(("codec", "library", "version", "origin", "config"),
                    [(r.codec, r.library or "stdlib", r.library_version or "", r.origin,
                      json.dumps(r.config, ensure_ascii=False, default=str)) for r in suite.results])
    return (f"<h2>Codecs, settings and environment</h2><h3>Codecs</h3><div class='scroll'>{codecs}</div>"
            f"<div class='cols'><div><h3>Settings</h3>{_kv(_settings_facts(suite.settings))}</div>"
            f"<div><h3>Environment</h3>{_kv(suite.environment)}</div></div>" + _sample_table(suite))


def _settings_facts(settings: Mapping[str, Any]) -> Dict[str, Any]:
    """The run's settings, in words where a bare value would puzzle (processes, jobs, sample, passes)."""
    facts = {k: v for k, v in settings.items() if k not in ("sample_by_method", "sample_method")}
    processes = facts.get("processes")
    if processes is not None:
        facts["processes"] = (f"{processes}: each codec timed in {processes} fresh worker process(es), one after "
                              "another; rounds pooled" if processes else "0: in this process, codecs interleaved")
    if facts.get("jobs") is not None:
        facts["jobs"] = f"{facts['jobs']} process(es) share the size and fidelity pass"
    if facts.get("sample") is not None:
        facts["sample"] = f"{fmt_count(facts['sample'])} calls, {settings.get('sample_method', 'from the trace')}"
    for key, done in (("tails", "per-call percentiles measured"), ("memory", "tracemalloc pass run")):
        if key in facts:
            facts[key] = done if facts[key] else f"skipped (--no-{key})"
    return facts


def _sample_table(suite: Suite) -> str:
    """Each method's share of the timing sample next to its share of the trace."""
    sampled: Mapping[str, int] = suite.settings.get("sample_by_method") or {}
    traced: Mapping[str, int] = suite.trace.get("methods") or {}
    title = "<h3>Timing sample vs trace</h3>"
    if not sampled:
        return title + "<p class='sub'>The sample's methods were not recorded (not measured).</p>"
    if dict(sampled) == dict(traced):
        return title + "<p class='sub'>The sample is the whole trace: every call was timed.</p>"
    n_sample, n_trace = sum(sampled.values()) or 1, sum(traced.values()) or 1
    rows, worst = [], 0.0
    for method in sorted({*sampled, *traced}, key=lambda m: (-traced.get(m, 0), -sampled.get(m, 0), m)):
        trace_share, sample_share = traced.get(method, 0) / n_trace, sampled.get(method, 0) / n_sample
        worst = max(worst, abs(sample_share - trace_share))
        points = round((sample_share - trace_share) * 100, 1)
        rows.append((method, fmt_count(traced.get(method, 0)), _pct(trace_share), fmt_count(sampled.get(method, 0)),
                     _pct(sample_share), f"{points:+.1f}" if points else "0.0"))
    return (title + f"<p class='sub'>Timing ran on a sample; it represents the trace if every method has about the "
            f"same share of both. Largest difference here: {worst * 100:.1f} percentage points.</p>"
            + _table(("method", "trace calls", "% of trace", "sample calls", "% of sample", "difference (points)"),
                     rows, numeric={1, 2, 3, 4, 5}))


def reading_section(suite: Suite) -> str:
    """How the numbers were made, with this run's settings filled in."""
    s = suite.settings
    processes = s.get("processes")
    isolation = ("each codec was timed in {n} fresh worker process(es), one after another (a forked child per codec "
                 "and process, so no codec inherits another's heap, caches or garbage), {r} rounds in each, all "
                 "rounds pooled".format(n=esc(processes), r=esc(s.get("repeat", "?"))) if processes else
                 "codecs were timed in one process, taking turns round by round so that drift of the machine's speed "
                 f"hits each alike, {esc(s.get('repeat', '?'))} rounds each")
    return f"""<h2>How to read the numbers</h2><ul>
<li><b>Bytes</b> are the encoded size of every call in the trace ({esc(fmt_count(suite.trace.get('calls')))} calls),
as sent on the wire: mean, median (p50) and 99th percentile per call. "x json" divides by json's mean.</li>
<li><b>Sample.</b> Times come from a sample of {esc(fmt_count(s.get('sample')))} calls
({esc(s.get('sample_method', 'drawn from the trace'))}, seed {esc(s.get('sample_seed', '?'))}): when the trace is
larger, every method gets its share of the trace and calls are drawn at random within it, so the mix of small and
large calls is the trace's (see "Timing sample vs trace").</li>
<li><b>Times</b> are elapsed time per call on one thread, which for this CPU-bound work is its CPU cost, timed over
whole batches (timer: <code>{esc(s.get('timer', '?'))}</code>) and divided by the number of calls; each round
replays the batch enough times to last at least {esc(s.get('min_time_s', '?'))} s, after
{esc(s.get('warmup', '?'))} warm-up round(s). Process isolation: {isolation}. The <b>median</b> round is reported,
with a confidence interval from the rounds' order statistics (no normal distribution assumed). Garbage collector:
{esc(s.get('gc', '?'))}.</li>
<li><b>±</b> (spread) is half the range between the fastest and slowest round, as % of the median: two codecs
whose difference is smaller than their spreads are not distinguishable by this run.</li>
<li><b>unstable</b> marks a timing whose rounds' standard deviation exceeds {UNSTABLE_STDEV_PCT:.0f}% of their
mean (pyperf's warning): the machine was busy or the CPU frequency changed; rerun before drawing conclusions.</li>
<li><b>Latency tails</b> come from one extra replay with a timer around each single call; the median cost of the
timer itself is subtracted. They show how slow the slow calls are (p99, max), which batch medians hide. A single
call's time includes whatever interrupted it, so max is noisy; p99 is the figure to plan a frame budget with.</li>
<li><b>Allocations</b> come from another replay under <code>tracemalloc</code>, on an even subset of the sample. It
slows Python down a lot, so it is never mixed with timing. Peak counts temporary buffers too; kept counts what the
result holds afterwards.</li>
<li><b>Stages</b>: a multi-step codec (e.g. json then zlib) also has each step timed alone, on the previous step's
outputs; the stages add up to roughly the whole, which is timed separately.</li>
<li><b>Fidelity</b>: every call is decoded and compared with the original (same types, same values);
<b>failures</b> are calls a codec could not encode, <b>mismatches</b> calls that failed to decode or came back
different. Sizes count only the calls that encoded.</li>
<li>Encode time covers turning the call's Python values into bytes (including compression); decode time covers
rebuilding the full call, every value materialised.</li></ul>"""


# -- pieces -----------------------------------------------------------------------------------------


def _winners(suite: Suite) -> Dict[str, Tuple[CodecResult, str]]:
    """Each headline label ("Smallest", "Fastest encode", ...) -> (the best codec, its figure as text), where measured."""
    measures = (
        ("Smallest", lambda r: r.sizes.mean if r.sizes else None, lambda v: f"{v:.1f} B/call"),
        ("Fastest encode", lambda r: r.encode.median_us if r.encode else None, lambda v: f"{fmt_us(v)} µs/call"),
        ("Fastest decode", lambda r: r.decode.median_us if r.decode else None, lambda v: f"{fmt_us(v)} µs/call"),
        ("Shortest encode tail", lambda r: latency_us(r, "encode", "p99"), lambda v: f"p99 {fmt_us(v)} µs/call"),
    )
    winners = {}
    for label, value, text in measures:
        pool = [r for r in suite.results if value(r) is not None]
        if pool:
            best = min(pool, key=value)
            winners[label] = (best, text(value(best)))
    return winners


def _comparisons(suite: Suite, notable: Sequence[CodecResult]) -> List[str]:
    """One plain sentence per notable codec (and json, bson): bytes and CPU relative to json and bson."""
    refs = [r for r in (suite.find("json"), suite.find("bson")) if r and r.sizes and r.encode]
    shown = {r.codec: r for r in (*notable, *refs) if r.sizes and r.encode}
    lines = []
    for r in shown.values():
        parts = [_relative(r, ref) for ref in refs if ref.codec != r.codec]
        if parts:
            lines.append(f"{r.codec}: " + "; ".join(parts) + ".")
    return lines


def _relative(r: CodecResult, ref: CodecResult) -> str:
    """``0.76x json bytes at 2.38x json encode CPU (1.70x decode)``."""
    text = (f"{fmt_ratio(r.sizes.mean / ref.sizes.mean)} {ref.codec} bytes at "
            f"{fmt_ratio(r.encode.ratio_to(ref.encode))} {ref.codec} encode CPU")
    if r.decode and ref.decode:
        text += f" ({fmt_ratio(r.decode.ratio_to(ref.decode))} decode)"
    return text


def _frontier(suite: Suite) -> List[CodecResult]:
    """Codecs that no other codec beats on both mean bytes and encode time, smallest first."""
    rows = sorted((r for r in suite.results if r.sizes and r.encode), key=lambda r: (r.sizes.mean, r.encode.median_us))
    frontier: List[CodecResult] = []
    for r in rows:
        if not frontier or r.encode.median_us < frontier[-1].encode.median_us:
            frontier.append(r)
    return frontier


def _caveat(r: CodecResult) -> str:
    """A short warning after a winner that failed or garbled calls it did not declare."""
    bad = undeclared(r, "failures") + undeclared(r, "mismatches")
    return f" <span class='bad'>(but {bad:,} calls failed or came back different, undeclared)</span>" if bad else ""


def _warnings(suite: Suite) -> List[str]:
    """Reasons to distrust parts of the run: errors, undeclared fidelity problems, unstable timings, dropped calls."""
    notes = []
    for r in suite.results:
        bad = undeclared(r, "failures") + undeclared(r, "mismatches")
        reasons = ([f"timing could not run ({r.error})"] if r.error else []) + (
            [f"{bad:,} calls failed or came back different, undeclared (see Fidelity)"] if bad else [])
        if reasons:
            notes.append(f"{r.codec}: {'; '.join(reasons)}.")
    titles = {"partial": "Partial run", "unstable": "Unstable timings", "speed states": "Speed states"}
    notes += [f"{titles[name]}: {text[0].upper()}{text[1:]}" for name, text in timing_notes(suite)]
    recorder = suite.trace.get("recorder") or {}
    dropped = sum(v for k, v in recorder.items() if k.startswith("dropped") and isinstance(v, int))
    if dropped:
        notes.append(f"The recorder dropped {dropped:,} calls while capturing: the trace is not every call.")
    if suite.trace.get("truncated_bytes"):
        notes.append(f"The trace was truncated ({suite.trace['truncated_bytes']} bytes ignored).")
    return notes


def _methods_table(suite: Suite) -> str:
    """Each method's calls and share of calls, plus its share of bytes under the reference codec."""
    methods: Dict[str, int] = suite.trace.get("methods") or {}
    total_calls = sum(methods.values()) or 1
    ref = suite.find(suite.trace.get("bytes_reference") or "")
    by_method = ref.by_method if ref else {}
    total_bytes = sum(m.get("bytes", 0) for m in by_method.values()) or 1
    head = ["method", "calls", "% of calls"]
    if by_method:
        head += [f"% of bytes ({ref.codec})", f"bytes/call ({ref.codec})"]
    rows = []
    for name, count in sorted(methods.items(), key=lambda kv: -kv[1]):
        row: List[Any] = [name, f"{count:,}", _pct(count / total_calls)]
        if by_method:
            b = by_method.get(name, {}).get("bytes")
            row += [_pct(b / total_bytes), f"{b / count:.0f}"] if b is not None and count else ["-", "-"]
        rows.append(row)
    return f"<h3>Methods ({len(methods)})</h3>" + _table(head, rows, numeric=set(range(1, len(head))))


def _timing_detail(suite: Suite) -> str:
    """One row per codec and operation: median with its confidence interval, IQR, MAD, stdev, rounds."""
    rows = []
    for r in suite.results:
        for op in ("encode", "decode"):
            t = getattr(r, op)
            if t:
                lo, hi, confidence = t.ci_us
                rows.append((r.codec, op, f"{fmt_us(t.median_us)} [{fmt_us(lo)}–{fmt_us(hi)}]", f"{confidence:.0%}",
                             fmt_us(t.iqr_us), fmt_us(t.mad_us), f"{t.stdev_pct:.1f}%", f"{t.spread_pct:.1f}%",
                             len(t.rounds_ns), f"{t.loops:,} × {t.calls:,}", "unstable" if t.unstable else "ok"))
    if not rows:
        return ""
    return ("<h3>Timing detail: how sure is each median?</h3><p class='sub'>µs per call. [CI] = distribution-free "
            "confidence interval of the median (order statistics of the rounds; 'conf.' is its coverage, below 95 % "
            "when there are few rounds). IQR and MAD measure how far the rounds scatter; unstable = standard "
            f"deviation over {UNSTABLE_STDEV_PCT:.0f}% of the mean.</p><div class='scroll'>"
            + _table(("codec", "op", "median [CI]", "conf.", "IQR", "MAD", "stdev", "±", "rounds", "loops × calls",
                      "stability"), rows, numeric=set(range(2, 10)),
                     cell_class=lambda n, i: "alarm" if i == 10 and rows[n][10] != "ok" else "")
            + "</div>")


def _method_tails(suite: Suite, measured: Sequence[CodecResult], op: str) -> str:
    """Methods × codecs of per-call p99 for ``op``, slowest first (median over codecs), the tail shaded."""
    p99s: Dict[str, List[float]] = {}
    timed: Dict[str, int] = {}
    for r in measured:
        for method, figures in r.latency.get(op, {}).items():
            if method != "*":
                p99s.setdefault(method, []).append(figures["p99"])
                timed[method] = max(timed.get(method, 0), int(figures["n"]))
    if not p99s:
        return ""
    top = sorted(p99s, key=lambda m: -statistics.median(p99s[m]))[:TOP_METHODS]
    traced: Dict[str, int] = suite.trace.get("methods") or {}
    total = sum(traced.values()) or 1
    rows = [[m, _pct(traced[m] / total) if m in traced else MISSING, fmt_count(timed[m])]
            + [shown(latency_us(r, op, "p99", m), fmt_us) for r in measured] for m in top]
    overall = [latency_us(r, op, "p99") or math.inf for r in measured]

    def shade(n: int, i: int) -> str:
        if i < 3:
            return ""
        if timed[top[n]] < MIN_TAIL_CALLS:
            return "muted"
        return "hot" if (latency_us(measured[i - 3], op, "p99", top[n]) or 0) >= overall[i - 3] else ""

    rest = len(p99s) - len(top)
    return (f"<h3>{op.capitalize()} p99 by method, slowest first</h3><p class='sub'>µs per call. Shaded: at or "
            "above the codec's p99 over all calls, i.e. this method <em>is</em> the tail. Grey: fewer than "
            f"{MIN_TAIL_CALLS} calls timed, so p99 is just the slowest call."
            + (f" {rest} faster method{'s' if rest > 1 else ''} not shown." if rest > 0 else "") + "</p>"
            + "<div class='scroll'>" + _table(["method", "% of calls", "timed", *(r.codec for r in measured)], rows,
                                              numeric=set(range(1, len(measured) + 3)), cell_class=shade) + "</div>")


def _stage_row(r: CodecResult, op: str, steps: int) -> List[str]:
    """One codec's ``op`` as a table row: each stage's µs and share, padded to ``steps``, then the sum and the whole."""
    stages = r.stages.get(op) or {}
    total = sum(t.median_us for t in stages.values())
    cells = [f"{name} {fmt_us(t.median_us)} µs · {_pct(t.median_us / (total or 1))}" for name, t in stages.items()]
    whole = getattr(r, op)
    return [r.codec, op, *cells, *[""] * (steps - len(cells)), fmt_us(total),
            shown(whole.median_us if whole else None, fmt_us)]


def _not_measured(suite: Suite, missing: Sequence[CodecResult], setting: str) -> str:
    """A short note naming the codecs without ``latency`` or ``memory`` figures, and the likely reason."""
    if not missing:
        return ""
    if suite.settings.get(setting) is False:
        why = f"the run skipped this pass (--no-{setting})"
    else:
        why = ("per-connection streaming codecs are timed only as whole batches, since each call depends on the "
               "connection's earlier calls; codecs whose timing failed have no figures either")
    return f"<p class='sub'>Not measured for {esc(', '.join(r.codec for r in missing))}: {esc(why)}.</p>"


def _figure(charts: Mapping[str, str], name: str) -> str:
    """One chart as a figure with its caption, or nothing if it was not drawn."""
    if name not in charts:
        return ""
    caption = CHART_CAPTIONS.get(name, "")
    return (f"<figure><img src='{esc(charts[name])}' alt='{esc(caption or name)}'>"
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def _column_table(cols: Sequence[Column], results: Sequence[CodecResult], css: str = "",
                  groups: Sequence[Tuple[str, int]] = ()) -> str:
    """Results as a table of ``cols`` (shared with the terminal table), alarms marked; ``groups`` = (title, span) above."""
    top = "".join(f"<th colspan='{span}' class='group'>{esc(title)}</th>" for title, span in groups)
    head = "".join(f"<th class='{'num' if c.numeric else ''}'>{esc(c.title)}</th>" for c in cols)
    rows = "".join(
        "<tr>" + "".join(f"<td class='{_classes(c.numeric, c.alarm(r))}'>{esc(c.cell(r))}</td>" for c in cols) + "</tr>"
        for r in results)
    return (f"<table class='{css}'><thead>" + (f"<tr>{top}</tr>" if top else "")
            + f"<tr>{head}</tr></thead><tbody>{rows}</tbody></table>")


def _table(head: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Iterable[int] = (),
           row_class: Optional[Callable[[int], str]] = None, cell_class: Optional[Callable[[int, int], str]] = None) -> str:
    """A plain HTML table, every cell escaped; ``numeric`` column indexes are right-aligned; classes by row, cell."""
    nums = set(numeric)

    def td(n: int, i: int, value: Any) -> str:
        classes = ("num" if i in nums else "", cell_class(n, i) if cell_class else "")
        return f"<td class='{' '.join(c for c in classes if c)}'>{esc(value)}</td>"

    th = "".join(f"<th class='{'num' if i in nums else ''}'>{esc(h)}</th>" for i, h in enumerate(head))
    body = "".join(f"<tr class='{row_class(n) if row_class else ''}'>" + "".join(td(n, i, v) for i, v in enumerate(row))
                   + "</tr>" for n, row in enumerate(rows))
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _kv(mapping: Mapping[str, Any]) -> str:
    """Key/value pairs as a two-column table; nested mappings become ``key value, ...`` text."""
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(_text(v))}</td></tr>" for k, v in mapping.items() if v is not None)
    return f"<table class='kv'><tbody>{rows}</tbody></table>"


def _text(value: Any) -> str:
    """A metadata or settings value as one line of text (lists and mappings flattened)."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {_text(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value)
    return str(value)


def _pct(share: float) -> str:
    """A share as a percentage; tiny non-zero shares show as ``<0.1%`` rather than a misleading 0.0%."""
    return "<0.1%" if 0 < share < 0.001 else f"{share * 100:.1f}%"


def _bytes(n: Optional[int]) -> Optional[str]:
    return None if n is None else f"{n:,} bytes ({n / 1e6:.1f} MB)"


def _classes(numeric: bool, alarm: bool) -> str:
    return " ".join(c for c, on in (("num", numeric), ("alarm", alarm)) if on)
