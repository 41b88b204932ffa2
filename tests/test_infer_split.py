"""The run's schema inference read in two halves (rpcbench/training.py, two watched processes): on real traces its
.proto equals the one read in order, to the byte, and a run's results.json says the same with any --jobs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List, Sequence

import pytest

from rpc_capture import Call, TraceWriter, open_trace
from rpcbench import training
from rpcbench.commands import main as cli_main
from rpcbench.commands.bench import build_parser, config_from
from rpcbench.inference import Inference
from rpcbench.protobuf import TraceShapes
from rpcbench.registry import Registry
from rpcbench.trace_index import CallRange, TraceIndex, halves, index_traces

REPO = Path(__file__).resolve().parent.parent
MINECRAFT = REPO / "tests" / "data" / "minecraft_packets.jsonl"


def in_order(paths: Sequence[Path], name: str = "t", package: str = "t") -> str:
    shapes = TraceShapes()
    for path in paths:
        for call in open_trace(path):
            shapes.add(call)
    return shapes.schema(name, package)[0]


def split(argv: List[str], monkeypatch) -> str:
    """The schema the run's two reads give (each half read as its watched task would, here), merged."""
    monkeypatch.setattr(training, "usable_cpus", lambda: 2)
    config = config_from(build_parser().parse_args(argv), argv)
    inferring = Inference(config)
    reads = training._inference_reads(config, index_traces(config, True))
    assert len(reads) == 2 and all(reads)
    assert inferring.merge([training._shapes_of(part, config.salvage) for part in reads])  # exact: no read again
    return inferring.shapes.schema("t", "t")[0]


def write(calls: Sequence[Call], path: Path) -> Path:
    with TraceWriter(path, {}) as writer:
        for call in calls:
            writer.write(call)
    return path


@pytest.fixture(scope="module")
def minecraft_sessions(tmp_path_factory) -> List[Path]:
    """The Minecraft capture as binary traces: one per half of its game versions (oldest first, as a server that
    upgraded records them: methods first appear late), and all of it four times over, each time from another
    call (3,000 calls: cut inside the trace at --chunk-calls 1000)."""
    folder = tmp_path_factory.mktemp("minecraft")
    calls = list(open_trace(MINECRAFT))
    by_version = sorted(calls, key=lambda c: tuple(int(p) for p in str(c.conn).split(".")))
    rounds = [c for k in range(6) for c in calls[k * 83:] + calls[:k * 83]]
    return [write(by_version[:250], folder / "old.rpct"), write(by_version[250:], folder / "new.rpct"),
            write(rounds, folder / "rounds.rpct")]


@pytest.fixture(scope="module")
def simulated(tmp_path_factory) -> List[Path]:
    """Simulated traces of both profiles, seeds other than the samples'."""
    folder = tmp_path_factory.mktemp("simulated")
    paths = []
    for profile, seed in (("dict", 3), ("study", 8)):
        paths.append(folder / f"{profile}-{seed}.rpct")
        assert cli_main(["simulate", "--profile", profile, "--seed", str(seed), "--calls", "6000",
                         "--out", str(paths[-1])]) == 0
    return paths


def test_minecraft_read_in_halves_gives_the_in_order_schema(minecraft_sessions, monkeypatch):
    old, new, rounds = minecraft_sessions
    assert split(["--trace", str(old), str(new)], monkeypatch) == in_order([old, new])  # cut between the traces
    assert split(["--trace", str(rounds), "--chunk-calls", "1000"], monkeypatch) == in_order([rounds])


def test_simulated_traces_read_in_halves_give_the_in_order_schema(simulated, monkeypatch):
    for path in simulated:
        assert split(["--trace", str(path), "--chunk-calls", "1000"], monkeypatch) == in_order([path])
    assert split(["--trace", *map(str, simulated)], monkeypatch) == in_order(simulated)


def test_the_bundled_samples_split_anywhere_give_the_in_order_schema():
    """The samples are gzip (not cut by the run): their calls cut at a few places, the shapes merged."""
    for sample in sorted((REPO / "samples").glob("*.rpct")):
        calls = list(open_trace(sample))
        expected = in_order([sample])
        for cuts in ([len(calls) // 2], [len(calls) // 3, len(calls) // 2], [1]):
            parts = [TraceShapes() for _ in range(len(cuts) + 1)]
            for number, call in enumerate(calls):
                parts[sum(number >= c for c in cuts)].add(call)
            for part in parts[1:]:
                parts[0].merge(part)
            assert parts[0].schema("t", "t")[0] == expected, (sample, cuts)


def test_the_halves_are_cut_nearest_the_middle_at_a_batch_record_or_between_traces():
    a = TraceIndex("a", ((10, 0), (500, 100), (900, 200), (1300, 300)), 350)
    b = TraceIndex("b", (), 300)
    assert halves([a]) == ((CallRange("a", stop=900),), (CallRange("a", 900, 200),))
    assert halves([a, b]) == ((CallRange("a", stop=1300),), (CallRange("a", 1300, 300), CallRange("b")))
    assert halves([b, a]) == ((CallRange("b"),), (CallRange("a"),))
    assert halves([b]) is None  # gzip, JSON Lines, --salvage: read whole
    assert halves([b, TraceIndex("c", (), -1)]) is None  # calls not counted


def test_halves_the_shapes_cannot_merge_are_read_again_in_order(tmp_path, monkeypatch):
    """A map in the first trace, two keys with dicts in the second: the merge cannot tell their order, so the
    calls are read again here, in order, and the schema is the in-order one."""
    head = write([Call("m", {"pos": {f"not a name {i}": {}}}) for i in range(50)], tmp_path / "head.rpct")
    tail = write([Call("m", {"pos": {"ab"[i % 2]: {"xyz"[i % 3]: i}}}) for i in range(150)], tmp_path / "tail.rpct")
    monkeypatch.setattr(training, "usable_cpus", lambda: 2)
    argv = ["--trace", str(head), str(tail), "--codecs", "protobuf,json+zstddict-3", "--train-fraction", "0.5"]
    config = config_from(build_parser().parse_args(argv), argv)
    assert len(training._inference_reads(config, index_traces(config, True))) == 2
    registry = Registry.default()
    got = training.train_dictionaries(config, registry, config.codec_ids(registry), index_traces(config, True))
    assert got is not None and got.schema is not None
    assert got.schema.source == in_order([head, tail], "every call of head.rpct, tail.rpct", "inferred")


def run_bench(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("codecs", ["json,protobuf,json+zstddict-3", "json,msgspec-struct"])
def test_a_runs_schema_is_the_same_with_any_jobs(minecraft_sessions, tmp_path, codecs):
    """results.json's ``trace.training.schema`` with --jobs 0 (read in this process), 1 (one watched read) and the
    default (two where the machine has 2 CPUs), and the inferred.proto beside it; with a dictionary to train
    meanwhile and without."""
    old, new, rounds = minecraft_sessions
    schemas = {}
    for jobs in ("0", "1", None):
        out = tmp_path / f"jobs-{jobs}"
        done = run_bench("--trace", old, new, rounds, "--codecs", codecs, "--sizes-only",
                         "--chunk-calls", "1000", "--quiet", "--out", out, *(["--jobs", jobs] if jobs else []))
        assert done.returncode == 0, done.stderr
        schema = json.loads((out / "results.json").read_text())["trace"]["training"]["schema"]
        assert schema["proto"] == (out / "inferred.proto").read_text() and schema["calls"] == 3500
        schemas[jobs] = schema
    assert schemas["0"] == schemas["1"] == schemas[None]


def test_args_nested_as_deep_as_one_read_infers_come_back_from_the_halves(tmp_path, monkeypatch):
    """Lists nested 400 deep: one read in order infers them (lists of lists are ``repeated Value``), so the halves'
    shapes, as deep, come back from their watched processes too (pickled under a higher recursion limit)."""
    deep: object = [1]
    for _ in range(400):
        deep = [deep, 2]
    traces = [write([Call("nested", {"v": deep, "n": i}) for i in range(k, k + 200)], tmp_path / f"{k}.rpct")
              for k in (0, 200)]
    monkeypatch.setattr(training, "usable_cpus", lambda: 2)
    registry = Registry.default()
    sources = []
    for jobs in ("0", "2"):
        argv = ["--trace", *map(str, traces), "--codecs", "protobuf,json+zstddict-3", "--jobs", jobs]
        config = config_from(build_parser().parse_args(argv), argv)
        got = training.train_dictionaries(config, registry, config.codec_ids(registry), index_traces(config, True))
        assert got is not None and got.schema is not None
        sources.append(got.schema.source)
    assert sources[0] == sources[1] and "repeated google.protobuf.Value v = " in sources[0]
