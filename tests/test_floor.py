"""The floor: each connection's whole stream compressed at once, and every codec's ratio to it."""

from __future__ import annotations

import csv
import lzma

import pytest
import zstandard

from rpc_capture import open_trace
from rpcbench.codec import stream_key
from rpcbench.config import DEFAULT_TRACE, RunConfig
from rpcbench.floor import Floor, floor_figures
from rpcbench.pipeline import run_benchmark
from rpcbench.registry import Registry
from rpcbench.results import load

SAMPLE = list(open_trace(str(DEFAULT_TRACE)))[:3000]


def independent_floor(calls):
    """The floor computed here with the libraries directly: per stream, the smaller of zstd-19 long and xz -9."""
    json_codec = Registry.default().create("json")
    streams = {}
    for call in calls:
        streams[stream_key(call)] = streams.get(stream_key(call), b"") + json_codec.encode(call)
    params = zstandard.ZstdCompressionParameters.from_level(19, enable_ldm=True, window_log=27)
    zstd = zstandard.ZstdCompressor(compression_params=params)
    return sum(min(len(zstd.compress(s)), len(lzma.compress(s, preset=9))) for s in streams.values()) / len(calls)


def test_floor_is_the_best_whole_stream_compression_per_connection_and_direction():
    floor = Floor(Registry.default().create("json"))
    for call in SAMPLE:
        floor.add(call)
    result = floor_figures([floor.totals()])
    assert result["bytes_per_call"] == pytest.approx(independent_floor(SAMPLE))
    assert result["bytes_per_call"] <= min(result["zstd19_long_bytes_per_call"], result["xz9_bytes_per_call"])
    assert result["streams"] == len({stream_key(c) for c in SAMPLE}) and result["calls"] == result["of_calls"] == 3000


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
