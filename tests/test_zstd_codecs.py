"""zstd with context: ``+zstdstream-N`` (a stream per connection and direction) and ``+zstddict-N``
(a dictionary trained on held-out calls), in codecs, the registry, the pipeline and the CLI."""

from __future__ import annotations

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
