"""A report that decides: verdict, capacity plan, where the bytes go, the study re-tested.

One real run on the bundled sample (the study's codecs, a stream codec) feeds every test;
capacity figures are checked against sums computed here from the trace file with the
codec objects directly.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Dict, List

import pytest

from rpcbench.reports.capacity import ReportOptions, figures, plan
from rpcbench.reports.html import render_report
from rpcbench.reports.study import NOT_MEASURED, STUDY_CODECS, retest
from rpcbench.reports.verdict import decide
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


def decided(suite: Suite, **options: object):
    chosen = ReportOptions(**options)  # type: ignore[arg-type]
    return decide(suite, chosen, plan(suite, chosen.transport))


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
    page = render_report(dataclasses.replace(suite, results=results), {})
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
