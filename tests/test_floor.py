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
from rpcbench import floor
from rpcbench.floor import ZSTD_MAX_STREAM, Floor, compressed_sizes, floor_figures
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


def independent_floor(calls, zstd_max=1 << 30):
    """The floor computed here with the libraries directly: per stream, the smaller of zstd-19 long (on streams
    of up to ``zstd_max`` bytes) and xz -9."""
    params = zstandard.ZstdCompressionParameters.from_level(19, enable_ldm=True, window_log=27)
    zstd = zstandard.ZstdCompressor(compression_params=params)
    sizes = [(len(zstd.compress(s)) if len(s) <= zstd_max else None, len(lzma.compress(s, preset=9)))
             for s in streams_of(calls)]
    return sum(x if z is None else min(z, x) for z, x in sizes) / len(calls)


def test_floor_is_the_best_whole_stream_compression_per_connection_and_direction():
    floor = Floor(Registry.default().create("json"))
    for call in SAMPLE:
        floor.add(call)
    result = floor_figures([floor.totals()])
    assert result["bytes_per_call"] == pytest.approx(independent_floor(SAMPLE))
    assert result["bytes_per_call"] <= min(result["zstd19_long_bytes_per_call"], result["xz9_bytes_per_call"])
    assert result["streams"] == len({stream_key(c) for c in SAMPLE}) and result["calls"] == result["of_calls"] == 3000


@pytest.mark.parametrize("path", [DEFAULT_TRACE, DICT_TRACE, MINECRAFT])
def test_xz_with_its_dictionary_cut_to_the_stream_gives_preset_9_s_bytes(path):
    """The floor's xz sets up a dictionary of the stream's size, not preset 9's 64 MiB: the same bytes, on
    every stream of the bundled samples and of real Minecraft traffic."""
    for stream in streams_of(list(open_trace(str(path)))[:4000]):
        assert compressed_sizes([stream])[1] == len(lzma.compress(stream, preset=9))


def test_zstd_only_on_short_streams_and_its_figure_only_when_it_saw_them_all(monkeypatch):
    lengths = sorted(len(s) for s in streams_of(SAMPLE))
    cut = lengths[len(lengths) // 2]
    monkeypatch.setattr(floor, "ZSTD_MAX_STREAM", cut)
    counted = Floor(Registry.default().create("json"))
    for call in SAMPLE:
        counted.add(call)
    result = floor_figures([counted.totals()])
    assert result["bytes_per_call"] == pytest.approx(independent_floor(SAMPLE, zstd_max=cut))
    assert result["zstd19_long_bytes_per_call"] is None
    assert result["zstd_streams"] == sum(n <= cut for n in lengths) < result["streams"] == len(lengths)
    assert result["bytes_per_call"] <= result["xz9_bytes_per_call"] == pytest.approx(
        sum(len(lzma.compress(s, preset=9)) for s in streams_of(SAMPLE)) / len(SAMPLE))


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


def test_a_floor_without_zstd_on_every_stream_saves_loads_and_says_what_it_took(tmp_path, monkeypatch):
    monkeypatch.setattr(floor, "ZSTD_MAX_STREAM", 0)  # every stream too long for zstd: xz alone
    suite = run_benchmark(RunConfig(trace=str(MINECRAFT), codecs=("json", "msgpack"), sizes_only=True, memory=False,
                                    tails=False, processes=0, jobs=0))
    figures = suite.trace["floor"]
    assert figures["zstd19_long_bytes_per_call"] is None and figures["zstd_streams"] == 0
    assert figures["bytes_per_call"] == figures["xz9_bytes_per_call"]
    suite.save(str(tmp_path))
    loaded = load(str(tmp_path))
    assert loaded.trace["floor"] == suite.trace["floor"]
    text = " ".join(format_table(decide(loaded)).split())
    assert (f"the trace's floor, {figures['bytes_per_call']:.1f} B/call: each connection's whole stream of compact "
            f"JSON compressed at once (xz -9, {figures['xz9_bytes_per_call']:.1f}, or zstd-19 with long matching "
            f"where smaller on streams up to {ZSTD_MAX_STREAM >> 10} KiB; over 500 of 500 calls)") in text
