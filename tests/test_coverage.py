"""Like with like: a codec that cannot send most calls is never compared with codecs that send them all.

A real run of the bundled sample with ``partial`` (tests/data/partialcodec.py), a plugin that sends only the
trace's smallest methods, about a tenth of the calls, and declares the failure to send the others. On its calls
it is small and fast, so it would win on its own figures; the verdict must never pick it, and the report must
show its coverage and its figures beside the reference's on the same calls. Then every verdict and summary
figure is recomputed from results.json by plain arithmetic here (no rule module of ``reports`` imported: only
``decide``, whose answer is checked).
"""

from __future__ import annotations

import json
import os
import runpy
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from rpcbench.reports import ReportOptions, decide
from rpcbench.results import load

ROOT = Path(__file__).resolve().parent.parent
write_build = runpy.run_path(str(ROOT / "tests" / "data" / "partialcodec.py"))["write_build"]
#: the smallest methods of samples/battle.rpct by json bytes per call, 9.6 % of its calls between them
SMALLEST = ("ping", "req_chat", "score", "req_attack", "pong")
CODECS = "json,msgpack,bson,json+zlib-1,json+zlibstream-1,partial"
#: the documented prices of the balanced rule (docs/decide.md), restated here so the check is independent
CORE_MONTH, RAM_GB_MONTH, MONTH_S, EGRESS = 32.0, 2.6, 730 * 3600, 0.08


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Tuple[Path, str]:
    """The run's folder and what it printed."""
    root = tmp_path_factory.mktemp("coverage")
    plugin = write_build(root / "plugin", SMALLEST)
    done = subprocess.run([sys.executable, str(ROOT / "run_bench.py"), "--codecs", CODECS, "--codec-path",
                           str(plugin), "--repeat", "5", "--processes", "2", "--sample", "400", "--min-time", "0.002",
                           "--no-floor", "--no-memory", "--no-report", "--out", str(root / "run")],
                          capture_output=True, text=True, cwd=ROOT, timeout=600, env={**os.environ, "COLUMNS": "100"})
    assert done.returncode == 0, done.stderr
    return root / "run", done.stdout


def rows(folder: Path) -> Dict[str, Dict[str, Any]]:
    """results.json's codec rows, as plain JSON."""
    data = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    return {r["codec"]: r for r in data["results"]}


def offered(r: Dict[str, Any]) -> int:
    return r["calls"] + r["failures"]


def undeclared(r: Dict[str, Any]) -> int:
    fails = r["failures"] - sum(p["count"] for p in r["problems"] if p["kind"] == "encode" and p["declared"])
    changed = r["mismatches"] - sum(p["count"] for p in r["problems"] if p["kind"] != "encode" and p["declared"])
    return max(0, fails) + max(0, changed)


def median_us(r: Dict[str, Any], op: str) -> float:
    return statistics.median(r[op]["rounds_ns"]) / 1000


def candidates(table: Dict[str, Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Codecs that send every call, every problem declared, with bytes and both timings."""
    return [r for r in table.values() if r["calls"] == offered(r) and not undeclared(r) and r["sizes"]
            and r["encode"] and r["decode"] and not r["error"]]


def test_a_codec_carrying_a_tenth_of_the_calls_never_wins_and_shows_its_coverage(run: Tuple[Path, str]) -> None:
    folder, printed = run
    table = rows(folder)
    mine = table["partial"]
    share = mine["calls"] / offered(mine)
    assert 0.09 < share < 0.11 and mine["failures"] == offered(mine) - mine["calls"]
    assert [(p["feature"], p["declared"]) for p in mine["problems"] if p["kind"] == "encode"] == [("method", True)]
    suite = load(str(folder))
    for goal in ("balanced", "cpu", "bandwidth"):
        verdict = decide(suite, ReportOptions(goal=goal)).verdict
        assert verdict.pick is not None and verdict.pick.codec != "partial", goal
        assert "partial" not in verdict.tied and "partial" in dict(verdict.excluded)
    flat = " ".join(printed.split())
    assert f"not compared: partial carries {mine['calls']:,} of {offered(mine):,} calls ({share:.1%}), under " \
           "--min-coverage 100%: " in flat
    # its bytes on its own calls beside json's on the same calls: exact, it carries whole methods
    ours = sum(v["bytes"] for v in mine["by_method"].values()) / mine["calls"]
    theirs = sum(table["json"]["by_method"][m]["bytes"] for m in mine["by_method"]) / mine["calls"]
    assert f"on the calls it carries: {ours:.1f} B/call vs json {theirs:.1f} B/call on the same calls" in flat
    assert decide(suite).figures["partial"].bytes_ratio == pytest.approx(ours / theirs)
    # admitted by a lower bar, its figures on a tenth of the calls would win the bytes: the bar is what stops it
    admitted = decide(suite, ReportOptions(goal="bandwidth", min_coverage=0.05)).verdict
    assert admitted.pick is not None and admitted.pick.codec == "partial"


def test_every_verdict_and_summary_figure_recomputed_from_results_json(run: Tuple[Path, str]) -> None:
    folder, _ = run
    table = rows(folder)
    data = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    decision = decide(load(str(folder)))
    pool = candidates(table)
    # headlines: over codecs that send every call only
    expect = {
        "Smallest": min(pool, key=lambda r: r["sizes"]["mean"])["codec"],
        "Fastest encode": min(pool, key=lambda r: median_us(r, "encode"))["codec"],
        "Fastest decode": min(pool, key=lambda r: median_us(r, "decode"))["codec"],
        "Shortest encode tail": min((r for r in pool if r["latency"].get("encode")),
                                    key=lambda r: r["latency"]["encode"]["*"]["p99"])["codec"],
    }
    assert {h.label: h.codec for h in decision.headlines} == expect
    smallest = next(h for h in decision.headlines if h.label == "Smallest")
    assert smallest.value == table[expect["Smallest"]]["sizes"]["mean"]
    # the Pareto front: no other candidate at least as good on mean bytes and encode + decode CPU, better on one
    points = {r["codec"]: (r["sizes"]["mean"], median_us(r, "encode") + median_us(r, "decode")) for r in pool}
    front = [c for c, (b, t) in points.items()
             if not any(b2 <= b and t2 <= t and (b2, t2) != (b, t) for c2, (b2, t2) in points.items() if c2 != c)]
    assert sorted(decision.front) == sorted(front)
    # x json: every codec over the same calls as json (a partial codec: json's bytes on its methods)
    json_bytes = table["json"]["by_method"]
    for r in table.values():
        same = sum(json_bytes[m]["bytes"] for m in r["by_method"]) / r["calls"]
        assert decision.figures[r["codec"]].bytes_ratio == pytest.approx(r["sizes"]["mean"] / same)
    # the verdicts: cpu (encode + decode medians), bandwidth (every call sent: total bytes), balanced ($/month)
    cpu = min(pool, key=lambda r: median_us(r, "encode") + median_us(r, "decode"))["codec"]
    assert decide(load(str(folder)), ReportOptions(goal="cpu")).verdict.pick.codec == cpu  # type: ignore[union-attr]
    wire = min(pool, key=lambda r: r["sizes"]["total"])["codec"]
    bandwidth = decide(load(str(folder)), ReportOptions(goal="bandwidth")).verdict.pick
    assert bandwidth is not None and bandwidth.codec == wire
    assert decision.verdict.pick is not None and decision.verdict.pick.codec == balanced_pick(data, pool)


def balanced_pick(data: Dict[str, Any], pool: List[Dict[str, Any]]) -> str:
    """The least $/month at 10,000 CCU: egress (s2c bytes) + serialization cores + stream state, per player rates
    over the trace's connection-seconds (results.json ``trace.per_connection``)."""
    conns = data["trace"]["per_connection"]
    seconds = sum(conns["span_ms"]) / 1000
    ccu = 10_000

    def cost(r: Dict[str, Any]) -> float:
        d = r["by_direction"]
        s2c_rate, c2s_rate = d["s2c"]["calls"] / seconds, d["c2s"]["calls"] / seconds
        egress = d["s2c"]["bytes"] / seconds * ccu * MONTH_S / 1e9 * EGRESS
        cores = (median_us(r, "encode") * s2c_rate + median_us(r, "decode") * c2s_rate) * ccu / 1e6
        return egress + cores * CORE_MONTH + r["state_bytes_per_conn"] * ccu / 1e9 * RAM_GB_MONTH

    return min(pool, key=cost)["codec"]
