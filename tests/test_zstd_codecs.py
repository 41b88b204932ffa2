"""zstd with context: ``+zstdstream-N`` (a stream per connection and direction) and ``+zstddict-N``
(a dictionary trained on held-out calls), in codecs, the registry, the pipeline and the CLI."""

from __future__ import annotations

import csv
import itertools
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from rpc_capture import TraceWriter, open_trace
from rpcbench import fidelity as F
from rpcbench.codec import received_call, stream_key
from rpcbench.config import DEFAULT_TRACE, RunConfig
from rpcbench.errors import BenchError
from rpcbench.pipeline import run_benchmark
from rpcbench.registry import Registry
from rpcbench.results import load
from rpcbench.testing import check_codec
from strategies import calls

REPO = Path(__file__).resolve().parent.parent
SAMPLE = list(open_trace(str(DEFAULT_TRACE)))


def trained_registry(inner: str = "json", calls_for_training=SAMPLE[:4000]) -> Registry:
    """The default registry with a dictionary trained on ``inner``'s bytes of the given calls."""
    registry = Registry.default()
    codec = registry.create(inner)
    registry.dictionaries[inner] = zstandard.train_dictionary(
        16384, [codec.encode(c) for c in calls_for_training]).as_bytes()
    return registry


@pytest.mark.parametrize("codec_id", ["json+zstdstream-3", "msgpack+zstdstream-1", "protobuf+zstdstream-3"])
def test_zstdstream_round_trips_the_bundled_sample(codec_id):
    check_codec(Registry.default().create(codec_id), SAMPLE[:3000])


@pytest.mark.parametrize("codec_id", ["json+zstddict-3", "msgpack+zstddict-19"])
def test_zstddict_round_trips_calls_it_never_saw(codec_id):
    registry = trained_registry(codec_id.split("+")[0])
    check_codec(registry.create(codec_id), SAMPLE[4000:8000])


@pytest.mark.parametrize("codec_id", ["json+zstdstream-3", "json+zstddict-3"])
def test_zstd_context_codecs_round_trip_generated_values(codec_id):
    codec = trained_registry().create(codec_id)

    @settings(max_examples=100, deadline=None)
    @given(st.lists(calls(without=set(codec.changes)), min_size=1, max_size=6))
    def check(generated):
        sender, receiver = codec.connection(), codec.connection()
        for call in generated:
            assert F.compare(call, received_call(receiver.decode(sender.encode(call)))) is None

    check()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 10_000), max_size=30), st.integers(0, 400))
def test_zstdstream_decodes_its_bytes_cut_anywhere(cuts, start):
    """TCP delivers bytes, not messages: the stream decodes the same however its bytes are cut."""
    codec = Registry.default().create("json+zstdstream-3")
    inner = Registry.default().create("json")
    key = stream_key(SAMPLE[start])
    calls_of_stream = [c for c in SAMPLE[start:start + 2000] if stream_key(c) == key][:60]
    sender = codec.connection()
    wire = b"".join(sender.encode(c) for c in calls_of_stream)
    expected = b"".join(inner.encode(c) for c in calls_of_stream)
    bounds = sorted({0, len(wire), *(cut % (len(wire) + 1) for cut in cuts)})
    receiver = codec.connection().compressor
    got = b"".join(receiver.decompress(wire[a:b]) for a, b in itertools.pairwise(bounds))
    assert got == expected


def test_zstdstream_is_smaller_than_per_message_compression_and_takes_a_window():
    registry = Registry(compressor_options={"zstdstream": {"window_log": 12}})
    registry.load_dir(REPO / "codecs")
    small_window = registry.create("json+zstdstream-3")
    assert small_window.config()["window_log"] == 12
    default = Registry.default().create("json+zstdstream-3")
    per_message = Registry.default().create("json+zstd-3")

    def total(codec):
        streams = {}
        return sum(len(streams.setdefault(stream_key(c), codec.connection()).encode(c)) for c in SAMPLE[:5000])

    assert total(default) < 0.6 * total(per_message)
    assert total(default) <= total(small_window)
    check_codec(small_window, SAMPLE[:1000])


def test_registry_refuses_a_dictionary_codec_without_a_dictionary_and_a_bad_window():
    with pytest.raises(BenchError, match="no dictionary trained on json"):
        Registry.default().create("json+zstddict-3")
    registry = Registry(compressor_options={"zstdstream": {"window_log": 40}})
    registry.load_dir(REPO / "codecs")
    with pytest.raises(BenchError, match="window_log must be 10..27"):
        registry.create("json+zstdstream-3")
    assert Registry.default().trained_compressor("msgpack+zstddict-3")[0] == "msgpack"
    assert Registry.default().trained_compressor("msgpack+zstd-3") is None


def test_run_benchmark_trains_on_the_first_calls_and_measures_only_the_rest():
    suite = run_benchmark(RunConfig(codecs=("json", "json+zlib-1", "json+zstddict-3", "msgpack+zstddict-3"),
                                    repeat=1, sample=100, tails=False, memory=False, processes=0, jobs=1))
    training = suite.trace["training"]
    assert training == {"source": "the first 20% of the trace (4,000 calls)", "calls": 4000, "held_out_calls": 4000}
    assert suite.trace["calls"] == 16000 and all(r.calls == 16000 for r in suite.results)
    inner = Registry.default().create("json")
    measured = sum(len(inner.encode(c)) for c in SAMPLE[4000:])
    assert suite.result("json").sizes.total == measured  # exactly the held-out calls, no training call
    zlib_1 = sum(len(zlib.compress(inner.encode(c), 1)) for c in SAMPLE[4000:])
    assert suite.result("json+zlib-1").sizes.total == zlib_1
    dictionary = suite.result("json+zstddict-3").dictionary
    assert 0 < dictionary["bytes"] <= 16384 and dictionary["train_calls"] == 4000
    clients = len({c.conn for c in SAMPLE[4000:]})
    assert dictionary["ship_bytes_per_call"] == pytest.approx(dictionary["ship_bytes"] * clients / 16000)
    assert suite.result("json+zstddict-3").sizes.total < 0.6 * zlib_1
    assert suite.result("json").dictionary is None
    assert suite.result("msgpack+zstddict-3").failures == suite.result("msgpack+zstddict-3").mismatches == 0


def test_a_training_trace_leaves_the_whole_trace_measured(tmp_path):
    train = tmp_path / "train.rpct"
    with TraceWriter(str(train)) as w:
        for call in SAMPLE[:3000]:
            w.write(call)
    suite = run_benchmark(RunConfig(codecs=("json+zstddict-3",), train_trace=str(train), dict_size=4096,
                                    repeat=1, sample=100, tails=False, memory=False, jobs=1))
    assert suite.trace["calls"] == 20000 and suite.results[0].calls == 20000
    assert suite.trace["training"]["held_out_calls"] == 0 and suite.results[0].dictionary["bytes"] <= 4096
    assert suite.results[0].encode is not None  # timed in a worker built from the config: it got the dictionary
    (tmp_path / "out").mkdir()
    suite.save(str(tmp_path / "out"))
    assert load(str(tmp_path / "out")).results[0].dictionary == suite.results[0].dictionary


def run_bench(*args):
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *map(str, args)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def test_cli_refuses_bad_training_settings_in_one_line(tmp_path):
    tiny = tmp_path / "tiny.rpct"
    with TraceWriter(str(tiny)) as w:
        for call in SAMPLE[:3]:
            w.write(call)
    for args, message in ((["--train-fraction", "1"], "must be above 0 and below 1"),
                          (["--train-trace", str(tiny)], "cannot train a zstddict dictionary"),
                          (["--trace", str(tiny), "--train-fraction", "0.2"], "leaves nothing to train on")):
        done = run_bench("--codecs", "json+zstddict-3", "--out", tmp_path / "o", "--quiet", *args)
        assert done.returncode == 2, done.stderr
        last = done.stderr.strip().splitlines()[-1]  # argparse prints its usage above
        assert last.startswith("run_bench.py: error") and message in last, done.stderr
        assert "Traceback" not in done.stderr


def test_check_codec_wants_stateful_codecs_to_declare_ordered_delivery():
    from rpcbench.codec import Compressed, Compressor

    class Unordered(Compressor):
        name = "unordered"
        per_connection = True

        def compress(self, data):
            return data

        def decompress(self, data):
            return data

    with pytest.raises(AssertionError, match="does not declare ordered_delivery"):
        check_codec(Compressed(Registry.default().create("json"), Unordered()), SAMPLE[:50])


def test_state_memory_and_ordered_delivery_reach_the_results(tmp_path):
    """Stateless codecs keep 0 bytes per connection; streams keep what their contexts report, and a
    smaller window keeps less; a dictionary is shared, not per connection."""
    codecs = ("json", "json+zlib-1", "json+zlibstream-1", "json+zstdstream-3", "json+zstddict-3")
    suite = run_benchmark(RunConfig(codecs=codecs, repeat=1, sample=50, tails=False, memory=False, jobs=2))
    small = run_benchmark(RunConfig(codecs=("json+zstdstream-3",), zstd_window_log=14, repeat=1, sample=50,
                                    tails=False, memory=False, processes=0, jobs=1))
    by = {r.codec: r for r in suite.results}
    assert by["json"].state_bytes_per_conn == by["json+zlib-1"].state_bytes_per_conn == 0
    assert not by["json"].ordered_delivery and not by["json+zstddict-3"].ordered_delivery
    assert by["json+zlibstream-1"].state_bytes_per_conn == 128 * 1024 + 128 * 1024 + 32 * 1024 + 7 * 1024
    stream = Registry.default().create("json+zstdstream-3")
    streams = {}
    for call in SAMPLE[4000:]:
        session = streams.setdefault(stream_key(call), stream.connection())
        session.decode(session.encode(call))
    expected = round(sum(s.state_bytes() for s in streams.values()) / len(streams))
    assert by["json+zstdstream-3"].state_bytes_per_conn == expected > 1_000_000
    assert 0 < small.results[0].state_bytes_per_conn < expected / 4
    assert by["json+zstdstream-3"].ordered_delivery and by["json+zlibstream-1"].ordered_delivery
    dictionary = by["json+zstddict-3"]
    assert dictionary.state_bytes_per_conn == 0 and dictionary.shared_state_bytes == dictionary.dictionary["bytes"]
    suite.save(str(tmp_path))
    back = load(str(tmp_path))
    assert [(r.state_bytes_per_conn, r.ordered_delivery) for r in back.results] == [
        (r.state_bytes_per_conn, r.ordered_delivery) for r in suite.results]
    rows = list(csv.DictReader(open(tmp_path / "results.csv", encoding="utf-8")))
    assert [int(row["state_bytes_per_conn"]) for row in rows] == [r.state_bytes_per_conn for r in suite.results]
    assert [row["ordered_delivery"] for row in rows] == ["0", "0", "1", "1", "0"]
