"""The floor: each connection's whole stream compressed at once, and every codec's ratio to it."""

from __future__ import annotations

import csv
import lzma
from pathlib import Path

import pytest
import zstandard

from rpc_capture import open_trace
from rpcbench.codec import stream_key
from rpcbench.config import DEFAULT_TRACE, RunConfig
from rpcbench.floor import Floor, compressed_size, floor_figures
from rpcbench.pipeline import run_benchmark
from rpcbench.registry import Registry
from rpcbench.reports import decide
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
    assert result["bytes_per_call"] == pytest.approx(independent_floor(SAMPLE))
    assert result["compressor"] == "lzma -9" and result["json_bytes_per_call"] > 5 * result["bytes_per_call"]
    assert result["streams"] == len({stream_key(c) for c in SAMPLE}) and result["calls"] == result["of_calls"] == 3000


@pytest.mark.parametrize("path", [DEFAULT_TRACE, DICT_TRACE, MINECRAFT])
def test_lzma_with_its_dictionary_cut_to_the_stream_gives_preset_9_s_bytes(path):
    """The floor's lzma sets up a dictionary of the stream's size, not preset 9's 64 MiB: the same number of
    bytes, on every stream of the bundled samples and of real Minecraft traffic."""
    for stream in streams_of(list(open_trace(str(path)))[:4000]):
        assert compressed_size([stream]) == lzma_9(stream)


@pytest.mark.parametrize("path", [DEFAULT_TRACE, DICT_TRACE, MINECRAFT])
def test_the_one_compressor_floor_is_within_1_percent_of_the_best_of_xz_and_zstd(path):
    """Issue 28 let the floor get cheaper if it stays within 1 % of the figure before, on the bundled samples
    and the Minecraft example: lzma alone in its light container against per stream the best of two."""
    calls = list(open_trace(str(path)))
    floor = Floor(Registry.default().create("json"))
    for call in calls:
        floor.add(call)
    assert floor_figures([floor.totals()])["bytes_per_call"] == pytest.approx(floor_before(calls), rel=0.01)


def test_floor_keeps_bounded_memory_and_says_what_it_covered():
    floor = Floor(Registry.default().create("json"), max_bytes=50_000)
    for call in SAMPLE:
        floor.add(call)
    result = floor_figures([floor.totals()])
    assert result["of_calls"] == 3000 and 0 < result["calls"] < 3000
    assert result["bytes_per_call"] == pytest.approx(independent_floor(SAMPLE[:result["calls"]]))
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
