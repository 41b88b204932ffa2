"""The floor: each connection's whole stream compressed at once, and every codec's ratio to it."""

from __future__ import annotations

import csv
import dataclasses
import html
import lzma
import re
from array import array
from pathlib import Path

import pytest
import zstandard

from rpc_capture import open_trace
from rpcbench.codec import stream_key
from rpcbench.config import DEFAULT_TRACE, RunConfig
from rpcbench import floor as floor_module
from rpcbench.floor import Floor, compressed_size, floor_figures
from rpcbench.pipeline import run_benchmark
from rpcbench.registry import Registry
from rpcbench.reports import decide
from rpcbench.reports.html import render_report
from rpcbench.reports.markdown import render_markdown
from rpcbench.reports.terminal import terminal_text
from rpcbench.reports.table import format_table
from rpcbench.results import load

SAMPLE = list(open_trace(str(DEFAULT_TRACE)))[:3000]
DICT_TRACE = Path(__file__).resolve().parent.parent / "samples" / "battle_dict.rpct"
MINECRAFT = Path(__file__).resolve().parent / "data" / "minecraft_packets.jsonl"


def streams_of(calls):
    """Each connection and direction's calls as compact JSON, joined."""
    json_codec = Registry.default().create("json")
    streams = {}
    for call in calls:
        streams[stream_key(call)] = streams.get(stream_key(call), b"") + json_codec.encode(call)
    return list(streams.values())


def lzma_9(stream):
    """A stream's bytes compressed by lzma -9 (``.lzma`` format, preset 9's own 64 MiB dictionary)."""
    return len(lzma.compress(stream, format=lzma.FORMAT_ALONE, preset=9))


def independent_floor(calls):
    """The floor computed here with the library directly: each stream compressed whole by lzma -9."""
    return sum(lzma_9(s) for s in streams_of(calls)) / len(calls)


def floor_before(calls):
    """The floor as it was until 2026-11-27: per stream the smaller of xz -9 and, on streams up to 512 KiB,
    zstd-19 with long matching."""
    params = zstandard.ZstdCompressionParameters.from_level(19, enable_ldm=True, window_log=27)
    zstd = zstandard.ZstdCompressor(compression_params=params)
    sizes = [min(len(lzma.compress(s, preset=9)), len(zstd.compress(s)) if len(s) <= 512 << 10 else 1 << 62)
             for s in streams_of(calls)]
    return sum(sizes) / len(calls)


def test_floor_is_lzma_9_over_each_connection_and_direction_s_whole_stream():
    floor = Floor(Registry.default().create("json"))
    for call in SAMPLE:
        floor.add(call)
    result = floor_figures([floor.totals()])
    assert result.bytes_per_call == pytest.approx(independent_floor(SAMPLE))
    assert result.compressor == "lzma -9" and result.json_bytes_per_call > 5 * result.bytes_per_call
    assert result.streams == len({stream_key(c) for c in SAMPLE}) and result.calls == result.of_calls == 3000
    assert not result.estimated and result.compressed_share == 1.0 and result.ci_half_width == 0.0


@pytest.mark.parametrize("path", [DEFAULT_TRACE, DICT_TRACE, MINECRAFT])
def test_lzma_with_its_dictionary_cut_to_the_stream_gives_preset_9_s_bytes(path):
    """The floor's lzma sets up a dictionary of the stream's size, not preset 9's 64 MiB: the same number of
    bytes, on every stream of the bundled samples and of real Minecraft traffic."""
    for stream in streams_of(list(open_trace(str(path)))[:4000]):
        assert compressed_size(stream) == lzma_9(stream)


@pytest.mark.parametrize("path", [DEFAULT_TRACE, DICT_TRACE, MINECRAFT])
def test_the_one_compressor_floor_is_within_1_percent_of_the_best_of_xz_and_zstd(path):
    """Issue 28 let the floor get cheaper if it stays within 1 % of the figure before, on the bundled samples
    and the Minecraft example: lzma alone in its light container against per stream the best of two."""
    calls = list(open_trace(str(path)))
    floor = Floor(Registry.default().create("json"))
    for call in calls:
        floor.add(call)
    figures = floor_figures([floor.totals()])
    assert figures.bytes_per_call == pytest.approx(floor_before(calls), rel=0.01)


def test_floor_keeps_bounded_memory_and_says_what_it_covered():
    floor = Floor(Registry.default().create("json"), max_bytes=50_000)
    for call in SAMPLE:
        floor.add(call)
    result = floor_figures([floor.totals()])
    assert result.of_calls == 3000 and 0 < result.calls < 3000
    assert result.bytes_per_call == pytest.approx(independent_floor(SAMPLE[:result.calls]))
    assert Floor(Registry.default().create("json")).totals() is None


def test_every_codec_carries_its_floor_ratio_in_results_json_and_csv(tmp_path):
    trace = tmp_path / "t.rpct"
    from rpc_capture import TraceWriter
    with TraceWriter(str(trace)) as w:
        for call in SAMPLE:
            w.write(call)
    codecs = ("json", "msgpack", "json+zlib-1", "json+zstdstream-3")
    suite = run_benchmark(RunConfig(trace=str(trace), codecs=codecs, repeat=1, sample=50, tails=False,
                                    memory=False, processes=0, jobs=1))
    floor = suite.trace["floor"]["bytes_per_call"]
    assert floor == pytest.approx(independent_floor(SAMPLE))
    for r in suite.results:
        assert r.floor_ratio == pytest.approx(r.sizes.mean / floor) and r.floor_ratio > 1
    suite.save(str(tmp_path))
    rows = list(csv.DictReader(open(tmp_path / "results.csv", encoding="utf-8")))
    expected = [pytest.approx(r.floor_ratio, abs=1e-3) for r in suite.results]
    assert [float(row["floor_ratio"]) for row in rows] == expected
    assert [r.floor_ratio for r in load(str(tmp_path)).results] == [r.floor_ratio for r in suite.results]
    without = run_benchmark(RunConfig(trace=str(trace), codecs=("json",), floor=False, repeat=1, sample=50,
                                      tails=False, memory=False, processes=0, jobs=1))
    assert without.trace["floor"] is None and without.results[0].floor_ratio is None


def test_the_floor_saves_loads_and_the_table_says_what_it_took(tmp_path):
    suite = run_benchmark(RunConfig(trace=str(MINECRAFT), codecs=("json", "msgpack"), sizes_only=True, memory=False,
                                    tails=False, processes=0, jobs=0))
    figures = suite.trace["floor"]
    suite.save(str(tmp_path))
    loaded = load(str(tmp_path))
    assert loaded.trace["floor"] == figures
    text = " ".join(format_table(decide(loaded)).split())
    assert (f"the trace's floor, {figures['bytes_per_call']:.1f} B/call: each connection's whole stream of compact "
            f"JSON compressed at once (lzma -9; over 500 of 500 calls)") in text


def test_a_floor_of_results_written_before_loads_and_says_what_it_took():
    """Files from before the floor named its compressor hold xz's and zstd's figures: the table quotes them."""
    loaded = load(str(Path(__file__).resolve().parent / "data" / "results" / "quiet.json"))
    assert "compressor" not in loaded.trace["floor"]
    text = " ".join(format_table(decide(loaded)).split())
    assert ("the trace's floor, 27.5 B/call: each connection's whole stream of compact JSON compressed at once (best "
            "of zstd-19 with long matching, 27.9, and xz -9, 27.5, per stream; over 20,000 of 20,000 calls)") in text


@pytest.mark.parametrize("path", [DEFAULT_TRACE, DICT_TRACE, MINECRAFT])
def test_the_bundled_samples_and_minecraft_are_within_the_budget_so_their_floor_is_exact(path):
    """A default floor compresses every stream of the bundled samples and real Minecraft traffic whole: the
    figure of the library itself, every byte compressed, no interval."""
    calls = list(open_trace(str(path)))
    floor = Floor(Registry.default().create("json"))
    for call in calls:
        floor.add(call)
    figures = floor_figures([floor.totals()])
    assert figures.bytes_per_call == pytest.approx(independent_floor(calls), rel=1e-5)  # preset 9's own dictionary
    assert (figures.estimated, figures.compressed_share, figures.ci_half_width) == (False, 1.0, 0.0)


def one_connection(calls):
    """The calls of the dict sample as one connection's (their order kept): two long streams, c2s and s2c."""
    return [call._replace(conn=1) for call in calls]


def test_a_trace_over_its_budget_gets_an_estimate_that_says_what_it_compressed_and_holds_its_bound():
    """Beyond its budget, a stream's floor is its prefix compressed whole plus the rest at the rate of windows
    spread over it: the figure is within its stated 95 % bound of the exact floor computed here, and the
    share it says it compressed is what it did (the budget, a stream taking more than that only for its
    fewest windows)."""
    calls = one_connection(list(open_trace(str(DICT_TRACE))))
    streams = streams_of(calls)
    exact = independent_floor(calls)
    floor = Floor(Registry.default().create("json"), budget=1 << 20)
    for call in calls:
        floor.add(call)
    totals = floor.totals()
    figures = floor_figures([totals])
    assert figures.estimated and totals.estimated_streams == 1 and figures.streams == len(streams) == 2
    short, long = sorted(map(len, streams))
    window = floor_module.WINDOW_BYTES
    rated = window * (1 - floor_module.CONTEXT)
    windows = max(floor_module.WINDOWS_MIN, int(((1 << 20) - short) // window) - 1)
    assert totals.compressed_json == pytest.approx(short + window * (1 + windows), rel=0.02)
    assert figures.compressed_share == pytest.approx(totals.compressed_json / (short + long))
    assert figures.compressed_share < 0.5 and rated * windows < long / 4
    assert 0 < figures.ci_half_width < 0.25 * exact  # one stream of a few windows: few degrees of freedom
    assert abs(figures.bytes_per_call - exact) <= figures.ci_half_width
    assert figures.calls == figures.of_calls == len(calls)


def test_the_floor_s_sums_add_up_over_traces_exact_or_estimated():
    """A fleet's floor is its traces' sums together: bytes, calls, the share compressed and the variance."""
    calls = one_connection(list(open_trace(str(DICT_TRACE))))
    totals = []
    for part, budget in ((calls[:8000], 8 << 20), (calls[8000:], 1 << 20)):
        floor = Floor(Registry.default().create("json"), budget=budget)
        for call in part:
            floor.add(call)
        totals.append(floor.totals())
    alone = [floor_figures([t]) for t in totals]
    together = floor_figures(totals)
    assert [f.estimated for f in alone] == [False, True] and together.estimated
    assert together.calls == len(calls) and together.bytes_per_call == pytest.approx(
        sum(f.bytes_per_call * f.calls for f in alone) / len(calls))
    assert together.ci_half_width == pytest.approx(alone[1].ci_half_width * alone[1].calls / len(calls))
    assert together.compressed_share == pytest.approx(
        sum(t.compressed_json for t in totals) / sum(t.json for t in totals))


def test_an_estimated_floor_is_marked_alike_in_the_terminal_report_md_and_report_html(tmp_path):
    """A floor estimated beyond its budget titles the column x floor~ and says how it was taken, with its interval,
    in the terminal, report.md and report.html alike, from results.json as saved and loaded."""
    suite = run_benchmark(RunConfig(trace=str(MINECRAFT), codecs=("json", "msgpack"), sizes_only=True, memory=False,
                                    tails=False, processes=0, jobs=0))
    assert suite.trace["floor"]["estimated"] is False and "x floor~" not in format_table(decide(suite))
    floor = {**suite.trace["floor"], "estimated": True, "compressed_share": 0.25, "ci_half_width": 0.43}
    dataclasses.replace(suite, trace={**suite.trace, "floor": floor}).save(str(tmp_path))
    d = decide(load(str(tmp_path)))
    said = (f"the trace's floor, {floor['bytes_per_call']:.1f} B/call (x floor~: estimated, ± 0.4 B/call at 95 %: 25% "
            "of the JSON compressed, each long stream's start whole and the rest at the rate of windows spread over "
            "it)")
    pages = {"terminal": terminal_text(d, 200), "report.md": re.sub(r"\\(.)", r"\1", render_markdown(d)),  # escapes
             "report.html": html.unescape(re.sub(r"<[^>]+>", " ", render_report(d, {})))}
    for name, text in pages.items():
        assert said in " ".join(text.split()), name
    assert "x floor~" in pages["terminal"] and "x floor~" in pages["report.html"]


def test_streams_alike_in_length_are_sampled_at_different_places():
    """Streams of one battle are often of one length: each stream's windows are seeded by its place as well, so
    that their errors do not add up."""
    data = bytearray(max(streams_of(one_connection(list(open_trace(str(DICT_TRACE))))), key=len))
    ends = array("q", range(100, len(data) + 1, 100))  # calls of 100 bytes
    first, second = (floor_module.Stream(data, ends, index).jobs(1 << 18) for index in (0, 1))
    assert [j.data for j in first[1:]] != [j.data for j in second[1:]]


def test_a_window_s_bytes_after_its_mark_are_its_own_after_a_long_context():
    """liblzma gives out only Python's first 32 KiB buffer for one input whose output is more: the rest came out
    with the rated calls. Fed in pieces, the bytes out after the mark are the rated calls', however long the
    context, and all of them together are the whole's."""
    stream = max(streams_of(one_connection(list(open_trace(str(DICT_TRACE))))), key=len)[:(1 << 20) + (32 << 10)]
    job = floor_module.Job(stream, 1 << 20)
    total, after = job.compressed()
    assert total == compressed_size(stream) and 0 < after < 0.5 * job.rated


def test_the_interval_is_student_s_t_at_the_welch_satterthwaite_degrees_of_freedom():
    """Two windows a stream give its spread one degree of freedom: the interval of one such stream is t(1) wide
    (12.7 standard errors), of ten alike t(10), and of parts with many degrees the normal's 1.96."""
    assert floor_module.half_width(4.0, 4.0 ** 2 / 1) == pytest.approx(12.706 * 2, rel=1e-3)
    assert floor_module.half_width(10 * 0.4, 10 * 0.4 ** 2 / 1) == pytest.approx(2.228 * 4.0 ** 0.5, rel=1e-3)
    assert floor_module.half_width(4.0, 4.0 ** 2 / 1e6) == pytest.approx(1.960 * 2, rel=1e-3)
    assert floor_module.half_width(0.0, 0.0) == 0.0
