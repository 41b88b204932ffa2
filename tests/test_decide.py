"""A report that decides: verdict, capacity plan, where the bytes go, the study re-tested.

One real run on the bundled sample (the study's codecs, a stream codec) feeds every test;
capacity figures are checked against sums computed here from the trace file with the
codec objects directly.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List

import pytest
from markupsafe import escape

from rpcbench.reports import build, terminal_text
from rpcbench.reports.capacity import Estimate, ReportOptions, figures, plan
from rpcbench.reports.compare import Shift, compare
from rpcbench.reports.compare_report import Runs, format_comparison, render_compare_html
from rpcbench.reports.decision import Decision, decide
from rpcbench.reports.fleet import Fleet, Spread
from rpcbench.reports.formatting import fmt_ratio, fmt_us
from rpcbench.reports.markdown import md_escape
from rpcbench.reports.html import render_report
from rpcbench.reports.study import NOT_MEASURED, STUDY_CODECS, retest
from rpcbench.reports.verdict import Verdict
from rpc_capture import open_trace
from rpcbench.config import DEFAULT_TRACE, RunConfig
from rpcbench.pipeline import run_benchmark
from rpcbench.results import Problem, Suite, load

REPO = Path(__file__).resolve().parent.parent
CODECS = (*STUDY_CODECS, "msgpack", "msgpack+zlib-1", "json+zlibstream-1")


@pytest.fixture(scope="module")
def suite() -> Suite:
    config = RunConfig(codecs=CODECS, sample=300, repeat=5, min_time=0.002, processes=0, tails=False, memory=False,
                       floor=False)
    return run_benchmark(config)


def decided(suite: Suite, **options: object) -> Verdict:
    return decide(suite, ReportOptions(**options)).verdict  # type: ignore[arg-type]


def test_capacity_equals_bytes_per_call_times_call_rate_from_the_trace(suite: Suite) -> None:
    registry = RunConfig().registry()
    codec = registry.create("msgpack+zlib-1")
    by_dir: Dict[str, List[int]] = defaultdict(lambda: [0, 0])
    spans: Dict[object, List[int]] = {}
    for call in open_trace(str(DEFAULT_TRACE)):
        by_dir[call.dir][0] += 1
        by_dir[call.dir][1] += len(codec.encode(call))
        first, last = spans.get(call.conn, (call.t, call.t))
        spans[call.conn] = [min(first, call.t), max(last, call.t)]
    seconds = sum((last - first) / 1e9 for first, last in spans.values())
    result = suite.result("msgpack+zlib-1")
    for transport, header in (("none", 0), ("tcp", 40), ("udp", 28)):
        f = figures(plan(suite, transport).rows["msgpack+zlib-1"], 10_000, 0.08)
        for direction, got in (("s2c", f.down_kbps.value), ("c2s", f.up_kbps.value)):
            calls, size = by_dir[direction]
            expected = (size / calls + header) * (calls / seconds) * 8 / 1000  # bytes/call x call rate
            assert got == pytest.approx(expected, rel=0.01)
        assert f.down_kbps.low < f.down_kbps.value < f.down_kbps.high
    assert result.encode and result.decode
    cores = figures(plan(suite).rows["msgpack+zlib-1"], 10_000, 0.08).server_cores
    expected_cores = (result.encode.median_us * by_dir["s2c"][0] + result.decode.median_us * by_dir["c2s"][0]) \
        / seconds * 10_000 / 1e6
    assert cores is not None and cores.value == pytest.approx(expected_cores, rel=0.01)


def with_undeclared(suite: Suite, codec: str) -> Suite:
    """The suite with one undeclared mismatch added to ``codec``."""
    bug = Problem("mismatch", "other", False, 1, 0, "sync_position", "args", "came back different")
    results = tuple(dataclasses.replace(r, mismatches=r.mismatches + 1, problems=(bug, *r.problems))
                    if r.codec == codec else r for r in suite.results)
    return dataclasses.replace(suite, results=results)


def test_verdict_never_picks_a_codec_with_undeclared_failures(suite: Suite) -> None:
    for goal in ("balanced", "bandwidth", "cpu"):
        pick = decided(suite, goal=goal).pick
        assert pick is not None
        broken = with_undeclared(suite, pick.codec)
        verdict = decided(broken, goal=goal)
        assert verdict.pick is not None and verdict.pick.codec != pick.codec
        assert pick.codec in dict(verdict.excluded)
        assert pick.codec not in verdict.front


def twin(suite: Suite, codec: str, factor: float) -> Suite:
    """The run plus ``codec-twin``: the same bytes, every timing round of ``codec`` times ``factor``."""
    r = suite.result(codec)
    scaled = {op: dataclasses.replace(t, rounds_ns=tuple(x * factor for x in t.rounds_ns))
              for op in ("encode", "decode") if (t := getattr(r, op)) is not None}
    return dataclasses.replace(suite, results=(*suite.results, dataclasses.replace(r, codec=f"{codec}-twin",
                                                                                   **scaled)))


@pytest.mark.parametrize("goal", ["cpu", "balanced"])
def test_overlapping_intervals_give_a_tie_naming_both_and_what_separates_them(suite: Suite, goal: str) -> None:
    pick = decided(suite, goal=goal).pick
    assert pick is not None
    close = decided(twin(suite, pick.codec, 1.001), goal=goal)  # within its own interval: this run cannot tell
    assert close.pick is not None and close.pick.codec == pick.codec
    assert close.tied[:2] == [pick.codec, f"{pick.codec}-twin"]
    assert close.sentence.startswith(f"tied within this run's precision: {pick.codec} ")
    assert f", {pick.codec}-twin " in close.sentence and "their 95% intervals overlap" in close.sentence
    assert "What would separate them: narrower CPU intervals (more rounds: --repeat, --processes" in close.sentence
    # the fixture's 5 rounds give wide intervals; a thousand times the CPU stands apart whatever the machine did
    apart = decided(twin(suite, pick.codec, 1000.0), goal=goal)
    assert apart.pick is not None and apart.pick.codec == pick.codec and f"{pick.codec}-twin" not in apart.tied


def test_goal_changes_the_pick(suite: Suite) -> None:
    bandwidth, cpu = decided(suite, goal="bandwidth").pick, decided(suite, goal="cpu").pick
    assert bandwidth and cpu and bandwidth.codec != cpu.codec
    sizes = {r.codec: r.sizes.mean for r in suite.results if r.sizes}
    assert bandwidth.codec == min(sizes, key=sizes.__getitem__) == "json+zlibstream-1"
    assert cpu.codec in {r.codec for r in suite.results if not r.codec.count("+")}  # no compressor is cheapest


def test_balanced_minimizes_the_stated_monthly_cost(suite: Suite) -> None:
    rows = plan(suite).rows
    candidates = [r.codec for r in suite.results if r.codec in rows]
    for price in (0.0, 0.08, 10.0):
        pick = decided(suite, egress_price=price).pick
        costs = {c: rows[c].month_cost(10_000, price) for c in candidates}
        assert pick is not None and costs[pick.codec] == min(costs.values())
    free, dear = decided(suite, egress_price=0.0).pick, decided(suite, egress_price=10.0).pick
    assert free and dear and "+" not in free.codec  # bandwidth free: no compressor pays for its CPU
    assert dear.codec == min(candidates, key=lambda c: rows[c].down.value)  # bandwidth dear: least egress


def test_udp_never_recommends_ordered_delivery(suite: Suite) -> None:
    tcp = decided(suite, goal="bandwidth", transport="tcp")
    assert tcp.pick and tcp.pick.ordered_delivery
    assert any("ordered delivery" in note for note in tcp.caveats)
    udp = decided(suite, goal="bandwidth", transport="udp")
    assert udp.pick and not udp.pick.ordered_delivery
    assert "json+zlibstream-1" in dict(udp.excluded)


def test_bandwidth_goal_decides_without_timing(suite: Suite) -> None:
    """A --sizes-only run has bytes but no CPU: bandwidth still picks the smallest clean codec, the others say why."""
    untimed = dataclasses.replace(suite, results=tuple(
        dataclasses.replace(r, encode=None, decode=None, error="not timed: --sizes-only") for r in suite.results))
    timed_pick = decided(suite, goal="bandwidth").pick
    pick = decided(untimed, goal="bandwidth").pick
    assert pick is not None and timed_pick is not None and pick.codec == timed_pick.codec
    balanced = decided(untimed)
    assert balanced.pick is None and "--goal bandwidth decides on bytes alone" in balanced.sentence


def test_bad_baseline_is_refused_and_metadata_names_the_default(suite: Suite) -> None:
    with pytest.raises(Exception, match="--baseline nope"):
        decided(suite, baseline="nope")
    shipped = dataclasses.replace(suite, trace={**suite.trace, "metadata": {"current_format": "bson"}})
    assert decided(shipped).baseline.codec == "bson"  # type: ignore[union-attr]
    assert decided(suite).baseline.codec == "json"  # type: ignore[union-attr]


def stopped(suite: Suite, codec: str) -> Suite:
    """The run as if ``codec`` had been stopped in the size pass: no figures, none of its bytes per connection."""
    results = tuple(dataclasses.replace(r, sizes=None, calls=0, by_direction={}, wire=(), error="size pass stopped")
                    if r.codec == codec else r for r in suite.results)
    table = suite.trace["per_connection"]
    kept = {name: columns for name, columns in table["bytes"].items() if name != codec}
    trace = {**suite.trace, "per_connection": {**table, "bytes": kept}}
    return dataclasses.replace(suite, results=results, trace=trace)


def test_the_capacity_plan_follows_the_reports_reference_codec(suite: Suite) -> None:
    """The size pass keeps every codec's bytes per connection and chooses none: the plan uses the reference
    reports/reference.py chooses (--baseline included), and still plans when json was stopped."""
    assert set(suite.trace["per_connection"]["bytes"]) == {r.codec for r in suite.results}
    full = decide(suite).plan
    for baseline in ("msgpack", "bson"):
        other = decide(suite, ReportOptions(baseline=baseline)).plan
        assert other.missing is None and set(other.rows) == set(full.rows)
        for codec, row in full.rows.items():  # the point estimates scale exactly; only the intervals' basis moves
            assert other.rows[codec].down.value == pytest.approx(row.down.value, rel=1e-9)
    without_json = decide(stopped(suite, "json"))
    assert without_json.reference != "json" and without_json.plan.missing is None
    assert without_json.plan.rows["msgpack"].down.value == pytest.approx(full.rows["msgpack"].down.value)


def test_results_of_schema_6_keep_one_codecs_bytes_per_connection_and_plan_alike(suite: Suite, tmp_path: Path) -> None:
    folder = tmp_path
    suite.save(str(folder))
    data = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    table = data["trace"]["per_connection"]
    json_bytes = table.pop("bytes")["json"]
    data["trace"]["per_connection"] = {"codec": "json", **table, **json_bytes}
    data["schema_version"] = 6
    (folder / "results.json").write_text(json.dumps(data), encoding="utf-8")
    old = load(str(folder))
    assert set(old.trace["per_connection"]["bytes"]) == {"json"}
    for baseline in (None, "msgpack"):  # an older file's one codec is the basis whichever the reference
        then, now = (decide(s, ReportOptions(baseline=baseline)).plan for s in (old, suite))
        assert then.missing is None and set(then.rows) == set(now.rows)
        for codec, row in now.rows.items():
            assert then.rows[codec].down.value == pytest.approx(row.down.value, rel=1e-9)


def test_study_has_seven_verdicts_and_names_missing_codecs(suite: Suite) -> None:
    findings = retest(suite)
    assert [f.number for f in findings] == list(range(1, 8))
    assert all(f.verdict in ("holds", "partly", "reversed") for f in findings)
    without = dataclasses.replace(suite, results=tuple(r for r in suite.results if r.codec != "json+zlib-9"))
    four = retest(without)[3]
    assert four.verdict == NOT_MEASURED and "add --codecs json+zlib-9" in four.evidence


def test_new_sections_escape_trace_method_names(suite: Suite) -> None:
    evil = "<script>alert(1)</script>"
    results = tuple(dataclasses.replace(r, by_method={evil: {"calls": 10**6, "bytes": 10**9}, **r.by_method})
                    for r in suite.results)
    page = render_report(decide(dataclasses.replace(suite, results=results)), {})
    section = page[page.index("<section id='bytes'"):page.index("<section id='study'")]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in section
    assert evil not in page


def test_report_cli_with_options_and_old_results(suite: Suite, tmp_path: Path) -> None:
    suite.save(str(tmp_path))
    done = run_cli("report", str(tmp_path), "--goal", "bandwidth", "--ccu", "20000", "--egress-price", "0.05",
                   "--transport", "websocket", "--baseline", "bson")
    assert done.returncode == 0, done.stderr
    assert "verdict (bandwidth" in done.stdout and "the bytes of bson" in done.stdout
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "value='20000'" in page and "20,000" in page and "Transport <b>websocket</b>" in page
    bad = run_cli("report", str(tmp_path), "--baseline", "nope")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--baseline nope" in bad.stderr
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    data["schema_version"] = 3
    del data["trace"]["per_connection"]
    for r in data["results"]:
        del r["by_direction"]
    (tmp_path / "results.json").write_text(json.dumps(data), encoding="utf-8")
    old = run_cli("report", str(tmp_path))
    assert old.returncode == 0, old.stderr
    assert "no recommendation" in old.stdout
    assert "Capacity plan not available" in (tmp_path / "report.html").read_text(encoding="utf-8")
    assert load(str(tmp_path)).results[0].by_direction == {}


def test_run_cli_refuses_a_baseline_outside_the_codecs(tmp_path: Path) -> None:
    done = run_cli("--codecs", "json", "--baseline", "bson", "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


# -- every output formats one Decision ---------------------------------------------------------------


def outputs(decision: Decision, folder: Path) -> Dict[str, str]:
    """Every output of a run from ``decision``: terminal text, report.html (charts inline), report.md, results.csv."""
    folder.mkdir()
    decision.suite.save(str(folder))
    build(decision, str(folder))
    return {"terminal": terminal_text(decision), "html": (folder / "report.html").read_text(encoding="utf-8"),
            "md": (folder / "report.md").read_text(encoding="utf-8"),
            "csv": (folder / "results.csv").read_text(encoding="utf-8")}


def row(text: str, codec: str, kind: str) -> str:
    """The codec's row in the terminal table, report.md's table or report.html's results table."""
    if kind == "terminal":
        return next(line for line in text.splitlines() if line.startswith(codec + " "))
    if kind == "md":
        return next(line for line in text.splitlines() if line.startswith(f"| {md_escape(codec)} |"))
    table = text[text.index("<table class='results sortable'"):]
    start = table.index(f"<td>{escape(codec)}</td>") if f"<td>{escape(codec)}</td>" in table else table.index(
        f">{escape(codec)}</td>")
    return table[start:table.index("</tr>", start)]


def test_every_output_prints_the_decisions_figures(suite: Suite, tmp_path: Path) -> None:
    """Terminal, report.html, report.md and results.csv show each headline figure as the Decision holds it."""
    d = decide(suite)
    out = outputs(d, tmp_path / "run")
    sentence = d.verdict.sentence
    assert sentence in out["terminal"] and str(escape(sentence)) in out["html"] and md_escape(sentence) in out["md"]
    for h in d.headlines:
        assert f"<b>{escape(h.label)}:</b> <b>{escape(h.codec)}</b>, {escape(h.text)}" in out["html"]
        assert f"**{md_escape(h.label)}:** **{md_escape(h.codec)}**, {md_escape(h.text)}" in out["md"]
    assert "Pareto front" in out["md"] and md_escape(", ".join(d.front)) in out["md"]
    csv_rows = {line.split(",")[0]: line.split(",") for line in out["csv"].splitlines()[1:]}
    for codec, f in d.figures.items():
        assert f.bytes_mean is not None and f.bytes_ratio is not None and f.encode and f.decode
        for kind in ("terminal", "md"):
            cells = row(out[kind], codec, kind)
            for figure in (f"{f.bytes_mean:.1f}", fmt_ratio(f.bytes_ratio), fmt_us(f.encode.median_us)):
                assert f" {figure} " in f"{cells} ", (kind, codec, figure)
            if codec != d.reference:
                assert f" {fmt_ratio(f.encode.ratio or 0)} " in cells and f" {fmt_ratio(f.decode.ratio or 0)} " in cells
        html = row(out["html"], codec, "html")
        for value in (f.bytes_mean, f.bytes_ratio, f.encode.median_us, f.encode.ratio, f.decode.ratio):
            assert f"data-value='{value}'" in html, (codec, value)
        assert csv_rows[codec][5] == f"{f.bytes_mean:.2f}" and csv_rows[codec][8] == f"{f.encode.median_us:.3f}"
    for capacity_row in (*d.capacity_rows, *d.other_rows):
        gb, total = capacity_row.figures.egress_gb, capacity_row.figures.total_usd
        for css, e in (("cap-gb", gb), ("cap-total", total)):
            cell = f"<td class='num {css}'>{e.value:,.0f} <span class='ci'>[{e.low:,.0f}-{e.high:,.0f}]</span></td>"
            assert cell in out["html"], cell
    for finding in d.findings:
        assert f"<td>{escape(finding.evidence)}</td>" in out["html"]


def perturbed(d: Decision) -> Decision:
    """``d`` with one value of each kind changed to a figure no rule would make: what the outputs must follow."""
    pick = d.verdict.pick
    assert pick is not None and pick.codec != d.reference
    f = d.figures[pick.codec]
    assert f.encode is not None and f.decode is not None
    shaky = dataclasses.replace(f.encode, ratio=7.77, stability=dataclasses.replace(f.encode.stability, unstable=True))
    steady = dataclasses.replace(f.decode, stability=dataclasses.replace(f.decode.stability, unstable=False))
    figures = {**d.figures, pick.codec: dataclasses.replace(f, bytes_mean=9876.5, bytes_ratio=12.34, encode=shaky,
                                                             decode=steady)}
    first, *rest = d.headlines
    lead, *rest_rows = d.capacity_rows
    spread = Spread(pick.codec, 1.0, 0.5, "a.rpct", 1.5, "b.rpct")
    return dataclasses.replace(
        d, figures=figures, verdict=dataclasses.replace(d.verdict, sentence="PERTURBED verdict"),
        headlines=(dataclasses.replace(first, text="PERTURBED headline"), *rest),
        capacity_rows=(dataclasses.replace(lead, figures=dataclasses.replace(lead.figures, egress_gb=Estimate(
            123456789.0, 123456788.0, 123456790.0))), *rest_rows),
        findings=(dataclasses.replace(d.findings[0], evidence="PERTURBED finding"), *d.findings[1:]),
        warnings=("PERTURBED warning",), fleet=Fleet(2, 1234, (spread,), ("PERTURBED trace",), ()))


def test_outputs_follow_the_decision_rather_than_recompute(suite: Suite, tmp_path: Path) -> None:
    """Change the Decision, not the results: every output must change with it (none recomputes a figure)."""
    d = perturbed(decide(suite))
    out = outputs(d, tmp_path / "perturbed")
    pick = d.verdict.pick
    assert pick is not None
    for kind in ("terminal", "md"):
        cells = row(out[kind], pick.codec, kind)
        assert " 12.34x " in cells and " 7.77x " in cells and "unstable (enc)" in cells, (kind, cells)
    assert " 9876.5 " in row(out["terminal"], pick.codec, "terminal")
    html = row(out["html"], pick.codec, "html")
    assert "data-value='12.34'" in html and "data-value='7.77'" in html and "unstable (enc)" in html
    assert "12.34x json" in out["html"]  # the bytes chart's label
    for kind in ("terminal", "html", "md"):
        assert "PERTURBED verdict" in out[kind]
    for kind in ("html", "md"):
        assert "PERTURBED headline" in out[kind] and "PERTURBED warning" in out[kind]
    assert "123,456,789 <span class='ci'>[123,456,788-123,456,790]</span>" in out["html"]  # egress GB/month
    assert "PERTURBED finding" in out["html"] and "PERTURBED trace" in out["html"]
    assert "fleet: 2 traces, 1,234 calls merged" in out["terminal"] and "differs: PERTURBED trace" in out["terminal"]
    assert "9876.5" not in out["csv"]  # results.csv is the measured results, which did not change


def test_run_and_report_print_one_terminal_text(suite: Suite, tmp_path: Path) -> None:
    """``run_bench.py report`` prints terminal_text of the decision for its options, then the report's path."""
    suite.save(str(tmp_path))
    done = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "report", str(tmp_path), "--goal", "cpu"],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "90"})
    assert done.returncode == 0, done.stderr
    expected = terminal_text(decide(load(str(tmp_path)), ReportOptions(goal="cpu")), 90)
    assert done.stdout == f"{expected}\nreport: {tmp_path / 'report.html'}\n"


def test_compare_reference_comes_from_the_one_chooser(suite: Suite, tmp_path: Path) -> None:
    """compare's reference is the run's reference codec; its text and page print the Comparison's figures."""
    comparison = compare(suite, suite, fail_above=5)
    assert comparison.reference == decide(suite).reference == "json" and comparison.violations == ()
    change = comparison.codecs[0]
    assert change.bytes is not None
    moved = dataclasses.replace(comparison, codecs=(dataclasses.replace(change, bytes=Shift(100.0, 150.0)),
                                                    *comparison.codecs[1:]))
    runs = Runs("OLD", "NEW", suite, suite)
    for text in (format_comparison(runs, moved), render_compare_html(runs, moved)):
        assert "+50.0%" in text and "150.0" in text and "larger" in text
        assert f"{comparison.codecs[1].bytes.new:.1f}" in text  # type: ignore[union-attr]


@pytest.mark.parametrize("transport", ["none", "udp"])
def test_every_verdict_figure_is_recomputed_from_the_tables_beside_it(suite: Suite, transport: str) -> None:
    """The headline's ratios come from the results table; its GB, egress $ and total $ are differences of the
    capacity table's cells (egress $ = egress GB x price); with a transport, its wire ratio is that of the
    kbit/s columns."""
    import re
    d = decide(suite, ReportOptions(transport=transport))
    pick, base = d.verdict.pick, d.verdict.baseline
    assert pick is not None and base is not None and pick.codec != base.codec
    rows = {r.codec: r.figures for r in (*d.capacity_rows, *d.other_rows)}
    mine, theirs, f = rows[pick.codec], rows[base.codec], d.figures[pick.codec]
    assert f.encode and f.decode and f.bytes_ratio
    # a run too noisy to rank the leaders says so first (which varies with the machine's load), then the same figures
    tie, _, text = d.verdict.sentence.rpartition("Lowest point estimate: ")
    assert bool(tie) == bool(d.verdict.tied) and all(f"{c} $" in tie for c in d.verdict.tied)
    assert text.startswith(f"{pick.codec}: {fmt_ratio(f.bytes_ratio)} the bytes of {base.codec} at "
                           f"{fmt_ratio(f.encode.ratio or 0)} its encode CPU ({fmt_ratio(f.decode.ratio or 0)} decode)")
    saved = re.search(r"(saves|costs) ([\d,.]+) GB/month of egress \(\$([\d,]+)/month\), (saves|costs) "
                      r"\$([\d,]+)/month in all", text)
    assert saved, text
    gb, usd, total = (float(saved[i].replace(",", "")) for i in (2, 3, 5))
    sign = 1 if saved[1] == "saves" else -1
    assert sign * gb == pytest.approx(theirs.egress_gb.value - mine.egress_gb.value, abs=1)
    assert sign * usd == pytest.approx(theirs.egress_usd.value - mine.egress_usd.value, abs=1)
    assert usd == pytest.approx(gb * d.options.egress_price, abs=1)  # GB and $ count the same bytes
    total_sign = 1 if saved[4] == "saves" else -1
    assert total_sign * total == pytest.approx(theirs.total_usd.value - mine.total_usd.value, abs=1)
    for r in (mine, theirs):
        cores = r.server_cores.value if r.server_cores else 0.0
        assert r.total_usd.value == pytest.approx(r.egress_usd.value + cores * 32.0 + r.state_bytes / 1e9 * 2.6)
    if transport == "udp":
        wire = (mine.down_kbps.value + mine.up_kbps.value) / (theirs.down_kbps.value + theirs.up_kbps.value)
        assert f", {fmt_ratio(wire)} on the wire with udp headers;" in text
    else:
        assert "on the wire" not in text
