"""Tests of the terminal table, the charts, report.html, report.md and the ``report`` subcommand.

The fixture is a hand-built Suite with realistic figures for a battle-RPC trace: json,
ujson, bson, json+zlib-1..9, bson+zlib-6, json+zlibstream-6 and a protobuf codec whose
timing could not run (error, no sizes, no timings). Codecs have per-call latency tails
by method (battle.sync_state, the big one, is the tail) and allocation figures; the
"+zlib" codecs have stage timings; the streaming codec has neither, as in real runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from html.parser import HTMLParser
from typing import Any, Dict, List, Optional, Tuple
from xml.etree import ElementTree

import pytest

from markupsafe import escape

from rpcbench.reports import analysis, build, decide
from rpcbench.reports.capacity import ReportOptions
from rpcbench.reports.charts import render_charts
from rpcbench.reports.html import PARTS, write_report
from rpcbench.reports.formatting import fmt_us
from rpcbench.reports.markdown import md_escape, render_markdown
from rpcbench.reports.table import footnotes, format_table
from rpcbench.results import CodecResult, Problem, Sizes, Suite, Timing, load

ROOT = Path(__file__).resolve().parent.parent
HOSTILE_METHOD = "<script>alert(1)</script>"
HOSTILE_VALUE = '"><img src=x onerror=alert(1)>'


def escaped(text: str) -> str:
    """``text`` as the report's template engine escapes it (quotes included)."""
    return str(escape(text))
LIBRARIES = {"bson": ("pymongo", "4.6.1"), "ujson": ("ujson", "5.9.0"), "protobuf": ("protobuf", "4.25.2")}
CHART_NAMES = {"decision", "pareto", "bytes", "timing", "levels", "tails", "stages"}
CALLS = 20_000
METHODS = {"battle.move": 10_400, "battle.cast_skill": 4_100, "battle.hit": 3_600,
           "battle.sync_state": 1_500, "chat.say": 400}
# method -> mean json bytes per call, so bytes shares differ from call shares
JSON_BYTES = {"battle.move": 118, "battle.cast_skill": 176, "battle.hit": 142, "battle.sync_state": 1_190,
              "chat.say": 240}


def timing(median_us: float, wobble_pct: float = 2.0) -> Timing:
    """Five rounds around ``median_us`` (per call), spread by about ``wobble_pct``."""
    steps = (-1.0, -0.4, 0.0, 0.5, 1.0)
    return Timing(tuple(median_us * 1000 * (1 + s * wobble_pct / 100) for s in steps), calls=5000, loops=4)


def tails(median_us: float) -> Dict[str, Dict[str, float]]:
    """Per-call percentiles (ns) by method, scaled by each method's size, so battle.sync_state is the tail."""
    out = {}
    for method, calls in METHODS.items():
        p50 = median_us * 1000 * JSON_BYTES[method] / 195
        out[method] = {"n": calls // 4, "p50": p50, "p90": p50 * 1.3, "p99": p50 * 1.9, "max": p50 * 6}
    big = out["battle.sync_state"]
    out["*"] = {"n": 5000, "p50": median_us * 800, "p90": median_us * 1500, "p99": big["p90"], "max": big["max"]}
    return out


def allocations(mean: float, compressed: bool) -> Dict[str, Dict[str, float]]:
    """tracemalloc figures per call: a compressor allocates its state (~300 kB) for every call."""
    peak = 301_112.2 if compressed else mean * 11.2
    return {"encode": {"peak_bytes_mean": peak, "peak_bytes_max": peak * 1.01 if compressed else mean * 150,
                       "kept_bytes_mean": mean + 33, "kept_blocks_mean": 1.05},
            "decode": {"peak_bytes_mean": mean * 4.4, "peak_bytes_max": mean * 66, "kept_bytes_mean": mean * 3.5,
                       "kept_blocks_mean": 12.43}}


def problem(kind: str, feature: str, declared: bool, count: int, path: str, detail: str,
            method: str = "battle.hit") -> Problem:
    return Problem(kind, feature, declared, count, 1234, method, path, detail)


def codec(name: str, mean: float, enc: Optional[float], dec: Optional[float], problems: Tuple[Problem, ...] = (),
          error: Optional[str] = None, enc_wobble: float = 2.0) -> CodecResult:
    """One codec's result; sizes and timings None when ``mean`` / ``enc`` / ``dec`` are None."""
    failures = sum(p.count for p in problems if p.kind == "encode")
    mismatches = sum(p.count for p in problems if p.kind != "encode")
    ratio = mean / 195.0 if mean else 0
    base, _, comp = name.partition("+")
    config = {"separators": [",", ":"], "ensure_ascii": False}
    if comp:
        config.update(compressor=comp.split("-")[0], level=int(comp.split("-")[1]))
    streaming, timed = "stream" in comp, bool(enc and dec)
    extra: Dict[str, Any] = {}
    if timed and comp and not streaming:
        extra["stages"] = {"encode": {base: timing(enc * 0.45), "zlib": timing(enc * 0.52)},
                           "decode": {"zlib": timing(dec * 0.31), base: timing(dec * 0.66)}}
    if timed and not streaming:
        extra.update(latency={"encode": tails(enc), "decode": tails(dec)}, memory=allocations(mean, bool(comp)))
    return CodecResult(
        codec=name, config=config, library=LIBRARIES.get(base, (None, None))[0],
        library_version=LIBRARIES.get(base, (None, None))[1], origin=f"codecs/{base}.py", calls=CALLS,
        failures=failures, mismatches=mismatches,
        sizes=Sizes(total=int(mean * CALLS), mean=mean, p50=int(mean * 0.82), p99=int(mean * 4.2),
                    min=int(mean * 0.3), max=int(mean * 9)) if mean else None,
        encode=timing(enc, enc_wobble) if enc else None, decode=timing(dec) if dec else None,
        problems=problems,
        by_method=({m: {"calls": n, "bytes": int(n * JSON_BYTES[m] * ratio)} for m, n in METHODS.items()}
                   if mean else {}),
        error=error, **extra,
    )


def make_suite(hostile: bool = False, zlib_levels: bool = True) -> Suite:
    """A realistic suite; ``hostile`` adds a script-tag method name and an attribute-breaking metadata value."""
    int_keys = problem("mismatch", "int keys", True, 312, "args.buffs{7}", "int key -> str key", "battle.cast_skill")
    zlib = [(1, 148.2, 9.8), (2, 147.0, 10.0), (3, 146.1, 10.3), (4, 144.0, 10.9), (5, 143.2, 11.4),
            (6, 142.5, 12.0), (7, 142.3, 12.4), (8, 142.1, 13.5), (9, 142.0, 14.1)]
    if not zlib_levels:
        zlib = [z for z in zlib if z[0] == 6]
    results = [
        codec("json", 195.3, 4.12, 3.61, (int_keys,)),
        codec("ujson", 193.8, 2.21, 2.43, (int_keys, problem("mismatch", "float precision", False, 41,
              "args.units[3].pos", "0.30000000000000004 -> 0.3", "battle.move"))),
        codec("bson", 316.4, 3.02, 2.08, (problem("encode", "int keys", True, 312, "args.buffs",
              "documents must have only string keys, key was 7", "battle.cast_skill"),)),
        *[codec(f"json+zlib-{lvl}", mean, enc, 5.9 + lvl * 0.03, (int_keys,), enc_wobble=28.0 if lvl == 9 else 2.0)
          for lvl, mean, enc in zlib],
        codec("bson+zlib-6", 170.1, 11.5, 5.02, (problem("encode", "int keys", True, 312, "args.buffs",
              "documents must have only string keys, key was 7", "battle.cast_skill"),)),
        codec("json+zlibstream-6", 61.7, 8.52, 5.48, (int_keys,)),
        codec("protobuf", None, None, None, (problem("encode", "other", False, CALLS, "args",
              "KeyError: 'battle.sync_state'", "battle.sync_state"),),
              error="no message type for method 'battle.sync_state' in proto/battle.proto"),
    ]
    methods = dict(METHODS)
    metadata = {"game": "Starfall Arena", "build": "2024.06.1-b3811", "capture_start": "2024-06-12T19:03:11Z",
                "seed": 8812}
    if hostile:
        methods[HOSTILE_METHOD] = 7
        metadata["note"] = HOSTILE_VALUE
        latency = {op: {**by_method, HOSTILE_METHOD: {"n": 2, "p50": 9e5, "p90": 9e5, "p99": 9e5, "max": 9e5}}
                   for op, by_method in results[0].latency.items()}
        results[0] = dataclasses.replace(results[0], by_method={**results[0].by_method,
                                                                HOSTILE_METHOD: {"calls": 7, "bytes": 900}},
                                         latency=latency)
    trace = {"path": "traces/battle-0612.rpctrace", "format": "rpctrace v2", "calls": CALLS,
             "sha256": "9f2c" * 16, "file_bytes": 4_822_113, "metadata": metadata, "methods": methods,
             "directions": {"c2s": 7_300, "s2c": 12_700}, "connections": 10, "duration_s": 612.4,
             "truncated_bytes": 0,
             "recorder": {"offered": 20_013, "recorded": 20_000, "dropped_queue_full": 13, "flushes": 311},
             "bytes_reference": "json"}
    settings = {"codecs": [r.codec for r in results], "repeat": 5, "warmup": 1, "processes": 2, "jobs": 2,
                "sample": 5000, "sample_seed": 1, "sample_method": "stratified by method, seeded",
                "sample_by_method": {m: n // 4 for m, n in METHODS.items()}, "min_time_s": 0.2,
                "gc": "off inside timed loops", "timer": "perf_counter_ns", "tails": True, "memory": True}
    environment = {"python": "3.11.7", "implementation": "CPython", "build": "main, Dec  8 2023 14:22:03",
                   "compiler": "GCC 12.2.0", "platform": "Linux-6.1.0-18-amd64-x86_64-with-glibc2.36",
                   "cpu_model": "AMD EPYC 7B13", "cpu_count": 8,
                   "libraries": {"pymongo": "4.6.1", "ujson": "5.9.0"}, "rpcbench": "0.1.0"}
    return Suite(schema_version=1, created="2024-06-13T10:00:00Z",
                 command=["run_bench.py", "traces/battle-0612.rpctrace"],
                 environment=environment, settings=settings, trace=trace, results=tuple(results))


@pytest.fixture(scope="module")
def suite() -> Suite:
    return make_suite(hostile=True)


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("report")


@pytest.fixture(scope="module")
def report(report_dir: Path, suite: Suite) -> Tuple[str, Dict[str, str]]:
    """report.html's text and the charts inline in it (built once: drawing takes a second)."""
    charts = render_charts(decide(suite))
    path = write_report(decide(suite), str(report_dir), charts)
    assert path == str(report_dir / "report.html")
    return Path(path).read_text(encoding="utf-8"), charts


class PageParser(HTMLParser):
    """Every URL-bearing attribute of a page, its inline <svg> roots with their ids, and table cells."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: List[Tuple[str, str, str]] = []  # (tag, attribute, value)
        self.svg_ids: List[str] = []
        self.tags: List[str] = []
        self.depth = 0

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
        self.tags.append(tag)
        values = dict(attrs)
        self.urls += [(tag, k, v or "") for k, v in attrs if k in ("src", "href", "xlink:href", "action", "data",
                                                                      "poster", "srcset", "background")]
        if tag == "svg" and self.depth == 0:
            self.svg_ids.append(values.get("id") or "")
        self.depth += tag == "svg"

    def handle_endtag(self, tag: str) -> None:
        self.depth -= tag == "svg"


def parse(text: str) -> PageParser:
    parser = PageParser()
    parser.feed(text)
    return parser


def test_charts_are_inline_svg_with_ids_of_their_own(suite: Suite) -> None:
    import matplotlib.pyplot as plt

    charts = render_charts(decide(suite))
    assert set(charts) == CHART_NAMES
    ids: List[str] = []
    for name, svg in charts.items():
        root = ElementTree.fromstring(svg)  # well-formed XML: no prolog or doctype left to break the page
        assert root.tag == "{http://www.w3.org/2000/svg}svg" and root.get("viewBox"), name
        assert len(svg) > 10_000, f"{name} is suspiciously small"
        chart_ids = [e.get("id") for e in root.iter() if e.get("id")]
        assert chart_ids and all(i.startswith(f"{name}-") for i in chart_ids), name
        refs = re.findall(r"(?:url\(#|href=\"#)([^\")]+)", svg)
        assert refs and set(refs) <= set(chart_ids), name  # every reference points inside the same chart
        ids += chart_ids
    assert len(ids) == len(set(ids)), "two charts share an id"
    assert plt.get_fignums() == [], "figures left open"


def test_levels_chart_skipped_without_zlib_levels() -> None:
    charts = render_charts(decide(make_suite(zlib_levels=False)))
    assert set(charts) == CHART_NAMES - {"levels"}


def test_charts_mark_undeclared_failures_and_draw_the_front(report: Tuple[str, Dict[str, str]],
                                                           suite: Suite) -> None:
    _, charts = report
    # by bytes: 61.7 B at 14.0 µs, 195.3 B at 7.73 µs, 316.4 B at 5.10 µs; ujson (2.21 + 2.43 µs) is not ranked
    front = analysis.pareto_front(suite, analysis.message_axes(suite))
    assert [r.codec for r in front] == ["json+zlibstream-6", "json", "bson"]
    # ujson garbled 41 calls undeclared: red and marked wherever it is drawn
    for name in ("pareto", "bytes", "timing", "tails"):
        assert "ujson ⚠" in charts[name], name
    assert "json ⚠" not in charts["bytes"].replace("ujson ⚠", "")
    assert "Pareto front" in charts["pareto"] and "undeclared failures (not ranked)" in charts["pareto"]


def test_report_shows_every_codecs_figures(report: Tuple[str, Dict[str, str]], suite: Suite) -> None:
    text, _ = report
    for r in suite.results:
        assert f">{escaped(r.codec)}</td>" in text
        if r.sizes:
            assert f">{r.sizes.mean:.1f}</td>" in text and f">{r.sizes.p99}</td>" in text
    for cell in ("9.80", "5.93", "0.76x", "14.1", "±28%†", "353 (41 UNDECLARED)", "312 declared", "unstable (enc)"):
        assert f">{cell}</td>" in text, cell


def test_report_is_one_self_contained_file(report: Tuple[str, Dict[str, str]], report_dir: Path) -> None:
    text, charts = report
    page = parse(text)
    assert page.urls, "the table of contents links its sections"
    outside = [u for u in page.urls if not u[2].startswith(("#", "data:"))]
    assert outside == [], "report.html must refer to no other file and no network"
    assert "link" not in page.tags and "img" not in page.tags and "iframe" not in page.tags
    assert len(page.svg_ids) == len(charts) == len(CHART_NAMES)  # every chart inline, once
    for svg in charts.values():
        assert svg in text
    assert sorted(os.listdir(report_dir)) == ["report.html"]


def test_table_of_contents_and_sections_come_from_one_list(report: Tuple[str, Dict[str, str]], suite: Suite) -> None:
    text, _ = report
    toc = text[text.index("<nav class='toc'"):text.index("</nav>")]
    shown = [p for p in PARTS if p.applies(decide(suite))]
    assert re.findall(r"<a href='#([^']+)'>([^<]+)</a>", toc) == [(p.id, escaped(p.title)) for p in shown]
    for part in shown:  # detail sections collapsed under their heading (the page stays short), the decision open
        heading = f"<details class='part'><summary><h2>{escaped(part.title)}</h2></summary>" if part.collapsed \
            else f"<h2>{escaped(part.title)}</h2>"
        assert f"<section id='{part.id}' class='{part.id}'>{heading}" in text
    assert [p.id for p in PARTS if not p.collapsed] == ["verdict", "capacity", "summary", "results"]
    # one trace, every call measured, sent per call, no precision profile, no --loss: no fleet, wire, precision or
    # loss part
    assert len(shown) == len(PARTS) - 4 and "id='fleet'" not in text and "id='wire'" not in text
    assert "id='loss'" not in text
    assert "id='precision'" not in text
    assert text.index("<section id='summary'") < text.index("<section id='results'") < text.index(
        "<section id='notes'")
    # notes and warnings sit in their own section, not on the first screen
    first_screen = text[:text.index("<section id='results'")]
    assert "stages (medians" not in first_screen and "Check before trusting:</b> 4 warnings" in first_screen


def test_results_table_sorts_by_data_values(report: Tuple[str, Dict[str, str]], suite: Suite) -> None:
    text, _ = report
    table = text[text.index("<table class='results sortable'>"):]
    table = table[:table.index("</table>")]
    rows = re.findall(r"<tr class=''>(.*?)</tr>", table)
    assert len(rows) == len(suite.results)
    zlib9 = rows[[r.codec for r in suite.results].index("json+zlib-9")]
    t = suite.result("json+zlib-9").encode
    assert f"data-value='{t.median_us}'>14.1</td>" in zlib9
    assert f"data-value='{analysis.ci_half_pct(t)}'>±28%†</td>" in zlib9
    assert "data-value='142.0'>142.0</td>" in zlib9 and "data-value='20000'>20,000</td>" in zlib9
    # a missing figure has no value, so it sorts last either way; the script is inline and sorts by data-value
    protobuf = rows[-1]
    assert ">protobuf</td>" in protobuf and "<td class='num'>-</td>" in protobuf
    script = text[text.index("<script>"):text.index("</script>")]
    assert "data-value" in script and "table.sortable" in script


def test_report_escapes_trace_and_codec_strings(report: Tuple[str, Dict[str, str]]) -> None:
    text, _ = report
    assert "<script>alert(1)" not in text
    assert escaped(HOSTILE_METHOD) in text
    assert "<img src=x" not in text and '"><img' not in text
    assert escaped(HOSTILE_VALUE) in text


def test_summary_is_computed_from_the_data(tmp_path: Path, suite: Suite) -> None:
    text = Path(write_report(decide(suite), str(tmp_path), {})).read_text(encoding="utf-8")
    assert "<b>Smallest:</b> <b>json+zlibstream-6</b>, 61.7 B/call" in text
    # ujson encodes fastest (2.21 µs) but garbled 41 calls undeclared: never named best, and said why
    assert "<b>Fastest encode:</b> <b>ujson</b>" not in text and "<b>Fastest encode:</b> <b>" in text
    assert "ujson: 41 calls failed or came back different, undeclared" in text
    # bson decodes fastest (2.08 µs) but cannot send 312 of the calls (int keys, declared): its figures cover other
    # calls than json's, so it is not compared (--min-coverage 100 %) and the page says so, with its coverage
    assert "<b>Fastest decode:</b> <b>json</b>" in text
    assert "Not compared: <b>bson</b> carries 20,000 of 20,312 calls (98.5%), under --min-coverage 100%" in text
    assert "json+zlibstream-6: 0.32x json bytes at 2.07x json encode CPU (1.52x decode)." in text
    assert "<b>Fastest decode:</b> <b>bson</b>" in Path(write_report(decide(suite, ReportOptions(
        min_coverage=0.98)), str(tmp_path), {})).read_text(encoding="utf-8")  # admitted at 98 %
    # make json the smallest and the summary must follow
    smaller = dataclasses.replace(suite.result("json"), sizes=Sizes(1000, 50.0, 40, 90, 20, 120))
    changed = dataclasses.replace(suite, results=tuple(smaller if r.codec == "json" else r for r in suite.results))
    text = Path(write_report(decide(changed), str(tmp_path), {})).read_text(encoding="utf-8")
    assert "<b>Smallest:</b> <b>json</b>, 50.0 B/call" in text


def test_codec_with_error_and_no_figures_renders(report: Tuple[str, Dict[str, str]], suite: Suite) -> None:
    text, _ = report
    error = suite.result("protobuf").error
    assert escaped(error) in text
    line = next(row for row in format_table(decide(suite)).splitlines() if row.startswith("protobuf "))
    assert line.count(" - ") >= 8 and line.endswith("error") and "20,000 UNDECLARED" in line


def test_suite_where_nothing_was_measured_still_reports(tmp_path: Path, suite: Suite) -> None:
    empty = dataclasses.replace(suite, results=tuple(
        dataclasses.replace(r, sizes=None, encode=None, decode=None, error="boom", stages={}, latency={}, memory={})
        for r in suite.results))
    path = build(decide(empty), str(tmp_path / "out"))
    assert sorted(os.listdir(tmp_path / "out")) == ["report.html", "report.md"]
    text = Path(path).read_text(encoding="utf-8")
    assert "No chart had data to draw." in text
    assert text.count("Not measured for") == 2 and "several stages timed separately (not measured)" in text


def test_format_table_lists_every_codec_in_order(suite: Suite) -> None:
    lines = format_table(decide(suite)).splitlines()
    header = lines[0].split()
    assert header[:4] == ["codec", "calls", "failures", "mismatches"] and "x" in header and "json" in header
    rows = [line.split()[0] for line in lines[2:2 + len(suite.results)]]
    assert rows == [r.codec for r in suite.results]
    zlib9 = lines[2 + [r.codec for r in suite.results].index("json+zlib-9")]
    assert "14.1" in zlib9 and "±28%†" in zlib9 and "3.42x" in zlib9 and zlib9.endswith("unstable (enc)")
    assert any(line.startswith("* unstable: 1 of 28 timings") and "worst: json+zlib-9 encode ±28.0%" in line
               for line in lines)
    assert any(line.startswith("* ±CI: half the width") and "†: only 5 rounds, too few for 95%" in line
               and "93.8% confidence" in line for line in lines)


def test_format_table_without_json_has_no_ratio_column(suite: Suite) -> None:
    no_json = dataclasses.replace(suite, results=tuple(r for r in suite.results if r.codec != "json"))
    assert "x json" not in format_table(decide(no_json))
    assert "x json" in format_table(decide(suite))


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run_bench.py"), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "MPLBACKEND": ""})


def test_report_subcommand_end_to_end(tmp_path: Path, suite: Suite) -> None:
    suite.save(str(tmp_path))
    assert load(str(tmp_path)) == suite
    out = tmp_path / "out"
    done = run_cli("report", str(tmp_path / "results.json"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "json+zlibstream-6" in done.stdout and f"report: {out / 'report.html'}" in done.stdout
    text = (out / "report.html").read_text(encoding="utf-8")
    assert "<b>Smallest:</b> <b>json+zlibstream-6</b>" in text
    assert len(parse(text).svg_ids) == len(CHART_NAMES) and sorted(os.listdir(out)) == ["report.html", "report.md"]
    assert "**Smallest:** **json+zlibstream-6**" in (out / "report.md").read_text(encoding="utf-8")
    # without --out the report goes next to results.json
    assert run_cli("report", str(tmp_path)).returncode == 0 and (tmp_path / "report.html").is_file()


def test_report_subcommand_reports_a_missing_file(tmp_path: Path) -> None:
    done = run_cli("report", str(tmp_path / "nope.json"))
    assert done.returncode == 2 and "cannot read results" in done.stderr


def section(text: str, title: str) -> str:
    """The HTML from the ``<h2>`` titled ``title`` to the next ``<h2>``."""
    start = text.index(f"<h2>{title}</h2>")
    end = text.find("<h2>", start + 1)
    return text[start:end if end > 0 else len(text)]


def test_latency_section_shows_tails_and_the_slowest_method(report: Tuple[str, Dict[str, str]],
                                                            suite: Suite) -> None:
    text = section(report[0], "Latency tails")
    assert report[1]["tails"] in text
    bson = suite.result("bson").latency
    for op in ("encode", "decode"):  # all-calls p50/p90/p99/max in µs
        for pct in ("p50", "p90", "p99", "max"):
            assert f">{fmt_us(bson[op]['*'][pct] / 1000)}</td>" in text, (op, pct)
    encode = text[text.index("<h3>Encode p99 by method"):text.index("<h3>Decode p99 by method")]
    rows = re.findall(r"<tr class=''><td class=''>([^<]*)</td>", encode)
    # slowest first: the hostile method (2 calls, greyed) and then the big call, the real tail
    assert rows[:3] == [escaped(HOSTILE_METHOD), "battle.sync_state", "chat.say"], rows
    # its row in each table (codecs split 10 to a table, so each fits the page's width): shaded for every codec
    sync_rows = [part.split("</tr>")[0] for part in encode.split(">battle.sync_state<")[1:]]
    codecs = [r for r in suite.results if r.latency]
    assert len(sync_rows) == -(-len(codecs) // 10) and len(sync_rows) > 1
    assert sum(row.count("num hot") for row in sync_rows) == len(codecs)
    assert f">{fmt_us(bson['encode']['battle.sync_state']['p99'] / 1000)}</td>" in "".join(sync_rows)
    assert "Not measured for json+zlibstream-6, protobuf" in text


def test_latency_tables_escape_method_names(report: Tuple[str, Dict[str, str]]) -> None:
    text = section(report[0], "Latency tails")
    assert f"<td class=''>{escaped(HOSTILE_METHOD)}</td>" in text
    assert "<script" not in text
    # two calls timed: its p99 is one call, greyed and never shaded as the tail
    hostile_row = text[text.index(escaped(HOSTILE_METHOD)):].split("</tr>")[0]
    assert "num muted" in hostile_row and "hot" not in hostile_row


def test_allocations_section(report: Tuple[str, Dict[str, str]]) -> None:
    text = section(report[0], "Allocations")
    for cell in ("301.1 kB", "304.1 kB", "228 B", "2.2 kB", "12.4", "1.1"):  # json+zlib peak; json kept, peak...
        assert f">{cell}</td>" in text, cell
    assert "<th colspan='4' class='group'>encode</th>" in text
    assert "Not measured for json+zlibstream-6, protobuf" in text


def test_stages_section(report: Tuple[str, Dict[str, str]], suite: Suite) -> None:
    text = section(report[0], "Where the time goes")
    assert report[1]["stages"] in text
    zlib1 = suite.result("json+zlib-1")
    row = text[text.index("<td class=''>json+zlib-1</td><td class=''>encode</td>"):].split("</tr>")[0]
    stages = zlib1.stages["encode"]
    assert re.findall(r">([^<]+)</td>", row) == [  # 0.45 and 0.52 of encode, as shares of their sum
        "json+zlib-1", "encode", f"json {fmt_us(stages['json'].median_us)} µs · 46.4%",
        f"zlib {fmt_us(stages['zlib'].median_us)} µs · 53.6%",
        fmt_us(stages["json"].median_us + stages["zlib"].median_us), fmt_us(zlib1.encode.median_us)]
    assert "No stage split for json, ujson, bson, json+zlibstream-6, protobuf" in text


def test_timing_detail_shows_confidence_intervals(report: Tuple[str, Dict[str, str]], suite: Suite) -> None:
    text = section(report[0], "Results")
    t = suite.result("json").encode
    lo, hi, confidence = t.ci_us
    assert f">{fmt_us(t.median_us)} [{fmt_us(lo)}–{fmt_us(hi)}]</td>" in text and f">{confidence:.0%}</td>" in text
    shaky = text[text.index(">json+zlib-9</td><td class=''>encode"):].split("</tr>")[0]
    assert "<td class='alarm'>unstable</td>" in shaky


def test_settings_show_isolation_and_sample(report: Tuple[str, Dict[str, str]]) -> None:
    text = section(report[0], "Codecs, settings and environment")
    assert "each codec timed in 2 fresh worker process(es)" in text
    assert "5,000 calls, stratified by method, seeded" in text and "off inside timed loops" in text
    assert "2 process(es) share the size and fidelity pass" in text
    move = text[text.index("<h3>Timing sample vs trace</h3>"):].split(">battle.move<")[1].split("</tr>")[0]
    assert re.findall(r">([^<]+)</td>", move) == ["10,400", "52.0%", "2,600", "52.0%", "0.0"]
    reading = section(report[0], "How to read the numbers")
    assert "fresh worker process" in reading and "timer itself is subtracted" in reading
    assert "tracemalloc" in reading and "every method gets its share" in reading


def test_missing_tails_memory_and_stages_render_and_load(tmp_path: Path, suite: Suite) -> None:
    bare = dataclasses.replace(suite, settings={k: v for k, v in suite.settings.items() if k != "sample_by_method"},
                               results=tuple(dataclasses.replace(r, stages={}, latency={}, memory={})
                                             for r in suite.results))
    suite.save(str(tmp_path))
    data = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    for r in data["results"]:
        del r["stages"], r["latency"], r["memory"]
    del data["settings"]["sample_by_method"]
    (tmp_path / "results.json").write_text(json.dumps(data), encoding="utf-8")
    assert load(str(tmp_path)) == bare  # older results.json files still load
    text = Path(build(decide(bare), str(tmp_path / "out"))).read_text(encoding="utf-8")
    assert "<svg" not in section(text, "Latency tails") and "<svg" not in section(text, "Where the time goes")
    assert "Not measured for json, ujson" in section(text, "Latency tails")
    assert "Not measured for json, ujson" in section(text, "Allocations")
    assert "(not measured)" in section(text, "Where the time goes")
    assert "sample's methods were not recorded (not measured)" in text
    assert "Tails and allocations" not in format_table(decide(bare))


def test_format_table_adds_tails_and_allocations(suite: Suite) -> None:
    lines = format_table(decide(suite)).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Tails and allocations"))
    assert lines[start + 1].split()[:5] == ["codec", "enc", "p50", "enc", "p99"]
    bson = next(line for line in lines[start:] if line.startswith("bson "))
    latency = suite.result("bson").latency
    p99 = fmt_us(latency["encode"]["*"]["p99"] / 1000)
    assert p99 in bson.split() and "battle.sync_state" in bson and bson.split()[-2:] == ["3.5", "1.4"]
    stream = next(line for line in lines[start:] if line.startswith("json+zlibstream-6 "))
    assert stream.split()[1:] == ["-"] * 7
    assert lines[-1].startswith("-: not measured")
    assert max(len(line) for line in lines[start:]) <= 150


# ---------------------------------------------------------------------------------- machine speed states


def two_state_timings(fast_ratio: float, slow_ratio: float):
    """json and msgpack over 40 turns, the machine slow (json 1.7x) in turns 10-29;
    msgpack's ratio per state as given."""
    slow = [10 <= i < 30 for i in range(40)]
    ref = Timing(tuple(8_500.0 if s else 5_000.0 for s in slow), calls=1000, loops=1)
    mine = Timing(tuple(8_500.0 * slow_ratio if s else 5_000.0 * fast_ratio for s in slow), calls=1000, loops=1)
    return ref, mine


def test_rounds_in_the_slow_state_and_the_ratio_in_each_state():
    ref, mine = two_state_timings(0.147, 0.176)
    assert sum(ref.slow_rounds) == 20 and ref.slow_rounds[10] and not ref.slow_rounds[9]
    by_state = mine.ratio_by_state(ref)
    assert by_state["fast"] == (pytest.approx(0.147), 20) and by_state["slow"] == (pytest.approx(0.176), 20)
    one_state = Timing(tuple(5_000.0 * (1 + i % 3 / 100) for i in range(40)), calls=1000, loops=1)
    assert not any(one_state.slow_rounds) and one_state.ratio_by_state(one_state) == {}


def test_the_table_warns_when_ratios_differ_between_speed_states():
    def suite_of(json_timing: Timing, msgpack_timing: Timing) -> Suite:
        json = dataclasses.replace(make_suite().results[0], encode=json_timing, decode=None)
        return dataclasses.replace(make_suite(),
                                   results=(json, dataclasses.replace(json, codec="msgpack", encode=msgpack_timing)))

    def state_notes(suite: Suite) -> list:
        return [n for n in footnotes(decide(suite)) if n.startswith("speed states:")]

    [note] = state_notes(suite_of(*two_state_timings(0.147, 0.176)))
    assert "20 of 40 json encode rounds ran over 1.25x slower" in note
    assert "most for msgpack encode: 0.15x in fast rounds, 0.18x in slow ones (1.20x apart)" in note
    assert state_notes(suite_of(*two_state_timings(0.15, 0.15))) == []


# ---------------------------------------------------------------------------------- stability, report.md, escaping

RUNS = ROOT / "tests" / "data" / "results"  #: results.json of two real runs of the bundled sample (see README)


def all_timings(suite: Suite) -> List[Timing]:
    return [t for r in suite.results for t in (r.encode, r.decode) if t]


def unstable_timing(t: Timing) -> bool:
    """The stability rule's verdict on one timing."""
    return analysis.stability(t).unstable


def low_confidence(t: Timing) -> bool:
    """Too few rounds for a 95 % interval, by the stability rule."""
    return analysis.stability(t).low_confidence


def test_stability_rule_flags_noise_not_an_ordinary_run() -> None:
    quiet, loaded = load(str(RUNS / "quiet.json")), load(str(RUNS / "two-busy-loops.json"))
    assert len(all_timings(quiet)) == 42 and not any(map(unstable_timing, all_timings(quiet)))
    assert not any(analysis.unstable(r) for r in quiet.results)
    assert analysis.unstable_summary(quiet, quiet.find("json")) is None
    # the old rule (stdev over 10 % of the mean) flagged most of this quiet run
    assert sum(t.stdev_pct > 10 for t in all_timings(quiet)) > 30
    # next to two busy loops nearly everything is noisy, and is flagged
    assert sum(map(unstable_timing, all_timings(loaded))) >= 35
    # a synthetic timing: 40 tight rounds, then the same with every other round 1.5x slower
    tight = Timing(tuple(5_000.0 * (1 + (i % 5) / 200) for i in range(40)), calls=1000, loops=3)
    noisy = Timing(tuple(x * (1.5 if i % 2 else 1.0) for i, x in enumerate(tight.rounds_ns)), calls=1000, loops=3)
    assert not unstable_timing(tight) and unstable_timing(noisy)
    assert analysis.ci_half_pct(tight) < 2 < analysis.UNSTABLE_CI_PCT < analysis.ci_half_pct(noisy)


def test_ci_column_says_when_there_are_too_few_rounds_for_95() -> None:
    quiet = load(str(RUNS / "quiet.json"))
    assert not any(map(low_confidence, all_timings(quiet)))  # 40 rounds: 96.2 % coverage
    assert "†" not in format_table(decide(quiet))
    five = Timing((5000.0, 5100.0, 4900.0, 5050.0, 5200.0), calls=1000, loops=1)
    assert low_confidence(five) and five.ci_us[2] == pytest.approx(1 - 2 / 32)
    assert analysis.ci_half_pct(five) == pytest.approx((5200 - 4900) / 2 / 5050 * 100)


def test_report_md_is_written_and_escapes_markdown(tmp_path: Path) -> None:
    piped = "battle.hit|crit"
    suite = make_suite(hostile=True)
    trace = {**suite.trace, "methods": {**suite.trace["methods"], piped: 9_000, "*bold* _it_ `code`": 8_000}}
    path = Path(build(decide(dataclasses.replace(suite, trace=trace)), str(tmp_path)))
    text = (path.parent / "report.md").read_text(encoding="utf-8")
    assert text == render_markdown(decide(dataclasses.replace(suite, trace=trace)))
    assert "| battle.hit\\|crit | 9,000 |" in text and piped not in text
    assert "\\*bold\\* \\_it\\_ \\`code\\`" in text
    assert "\\<script>alert(1)\\</script>" in text and not re.search(r"(?<!\\)<", text), "no unescaped <"
    # the results table: a header, its alignment row and one row per codec, each with the same number of cells
    table = [line for line in text.splitlines() if line.startswith("| codec |")]
    assert len(table) == 1
    start = text.splitlines().index(table[0])
    rows = text.splitlines()[start:start + 2 + len(suite.results)]
    assert len({row.count(" |") for row in rows}) == 1 and rows[1].startswith("| :--- | ---: |")
    assert any(row.startswith("| json+zlib-9 |") and "±28%†" in row and "unstable (enc)" in row for row in rows)
    assert "**Smallest:** **json+zlibstream-6**, 61.7 B/call" in text


def test_md_escape() -> None:
    assert md_escape("a|b") == "a\\|b" and md_escape("x\ny") == "x y" and md_escape(None) == ""
    assert md_escape("[l](u) <b>") == "\\[l\\](u) \\<b>"


def test_codec_names_are_escaped_in_charts_and_table(tmp_path: Path) -> None:
    hostile = "<script>alert(2)</script>"
    suite = make_suite()
    results = tuple(dataclasses.replace(r, codec=hostile) if r.codec == "bson" else r for r in suite.results)
    text = Path(build(decide(dataclasses.replace(suite, results=results)), str(tmp_path))).read_text(encoding="utf-8")
    assert "<script>alert(2)" not in text and "&lt;script&gt;alert(2)&lt;/script&gt;" in text
    assert text.count("<script>") == 1  # the page's own sorting script, nothing else
    assert all(u[2].startswith(("#", "data:")) for u in parse(text).urls)
