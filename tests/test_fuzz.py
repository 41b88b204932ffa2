"""Fuzzing in the suite: hostile call values (hypothesis) and mutated traces and results files.

Short campaigns (a few hundred inputs); ``bench/fuzz.py`` runs the long one. Every input
must be read correctly or refused with a clean one-line error, within a generous time.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mutations as M
from rpc_capture import Call, Recorder, TraceWriter, open_trace
from rpc_capture import keys as K
from rpc_capture import trace as T
from rpc_capture import values as V
from rpcbench import fidelity
from rpcbench.tally import CodecTally, check_call
from rpcbench.registry import Registry
from rpcbench.results import SCHEMA_VERSION
from test_hostile import FAST, REPO

scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=1 << 60, max_value=1 << 4000)
           | st.floats() | st.text() | st.sampled_from(["\ud800", "a\udfffb", "\x00", ""]) | st.binary(max_size=20))
keys = scalars.filter(lambda k: not (type(k) is float and math.isnan(k))) | st.tuples(st.integers(), st.text())


def hostile_values(max_leaves=25):
    """Any value the trace format records, weighted to the odd corners: odd keys, huge ints, surrogates, NaN."""
    return st.recursive(scalars, lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(keys, children, max_size=5)
        | st.tuples(children, children) | st.frozensets(st.integers() | st.text(), max_size=3)), max_leaves=max_leaves)


def deep(value, depth):
    for _ in range(depth):
        value = [value]
    return value


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=hostile_values(), depth=st.sampled_from([0, 0, 1200]))
def test_hostile_values_round_trip_through_the_recorder_and_compare_equal(tmp_path, args, depth):
    args = deep(args, depth)
    path = tmp_path / "r.rpct"
    rec = Recorder(path)
    rec.record("m\udc00", args)
    looped = [args]
    looped.append(looped)
    rec.record("cycle", looped)  # refused, not written: the file must stay readable
    stats = rec.close()
    assert stats["recorded"] == 1 and stats["dropped_unrecordable"] == 1
    (back,) = list(open_trace(path))
    assert fidelity.compare(Call("m\udc00", args), back) is None


@settings(max_examples=25, deadline=None)
@given(calls=st.lists(st.builds(Call, method=st.text(max_size=5), args=hostile_values(10)), min_size=1, max_size=6))
def test_every_codec_counts_what_it_cannot_carry_and_the_pass_never_crashes(calls):
    registry = Registry.default([])
    tallies = [CodecTally(registry.create(c)) for c in ("json", "bson", "msgpack", "json+zlib-1")]
    for index, call in enumerate(calls):
        check_call(tallies, index, call)
    for tally in tallies:
        assert sum(tally.sizes.values()) + tally.failures == len(calls)


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    """Intact inputs: the hostile calls as binary, gzip and JSON Lines traces, and a real results.json."""
    folder = tmp_path_factory.mktemp("fuzz")
    results = folder / "results.json"
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "--trace", str(REPO / "samples" / "battle.rpct"),
                           "--codecs", "json,bson", "--sample", "50", "--out", str(folder / "run"), *FAST],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results.write_bytes((folder / "run" / "results.json").read_bytes())
    return folder, M.seed_files(str(folder), M.hostile_calls(), str(results))


@pytest.mark.parametrize("kind", ["binary", "gzip", "jsonl", "results"])
def test_mutated_inputs_are_read_or_refused_cleanly_in_bounded_time(seeds, kind):
    folder, intact = seeds
    rng = random.Random(f"suite-{kind}")
    path = str(folder / f"input-{kind}")
    (folder / "report").mkdir(exist_ok=True)
    outcomes = set()
    for i in range(150):
        data = M.mutate(kind, intact[kind], rng)
        with open(path, "wb") as f:
            f.write(data)
        started = time.perf_counter()
        outcomes.add(M.check(kind, path, str(folder / "report"), salvage=i % 3 == 0))
        assert time.perf_counter() - started < 20, f"input {i} of kind {kind} took too long"
    assert outcomes == {"ok", "refused"}


def test_the_intact_seeds_read_back_exactly(seeds):
    folder, intact = seeds
    expected = M.hostile_calls()
    for name in ("seed.rpct", "seed.rpct.gz"):
        back = list(open_trace(folder / name))
        assert len(back) == len(expected)
        assert all(fidelity.compare(a, b) is None for a, b in zip(expected, back))
    assert json.loads(intact["results"])["schema_version"] == SCHEMA_VERSION


def test_length_fields_and_spliced_records_are_never_read_as_other_calls(tmp_path):
    """Whatever a mutation does, a call that comes back is one that was written (checksums hold)."""
    path = tmp_path / "t.rpct"
    written = [Call("m", {"i": i}, i, "c2s", 0) for i in range(600)]
    with TraceWriter(path) as w:
        for call in written:
            w.write(call)
    data = path.read_bytes()
    rng = random.Random(5)
    for _ in range(200):
        path.write_bytes(rng.choice([M.BYTE_MUTATORS[3], M.BYTE_MUTATORS[4]])(data, rng))
        try:
            back = list(open_trace(path, salvage=True))
        except Exception as e:  # noqa: BLE001 - only a clean TraceError is acceptable
            assert type(e).__name__ == "TraceError", repr(e)
            continue
        assert all(call in written for call in back)


def test_whatever_the_writer_accepts_under_the_expansion_limit_reads_back(monkeypatch):
    """With the limit made small, random shared structures near it: accepted by the writer means readable."""
    monkeypatch.setattr(V, "MAX_EXPANDED", 20_000)
    rng = random.Random(3)
    accepted = refused = 0
    for _ in range(200):
        shared = [rng.random() for _ in range(rng.randrange(1, 30))] + ["s" * rng.randrange(300)]
        value = [[shared] * rng.randrange(1, 40), {"k": shared, "n": [shared, [shared]]}]
        try:
            body = T.encode_batch([("m", value, 0, "c2s", 0)])
        except ValueError:
            refused += 1
            continue
        accepted += 1
        assert V.load(body[5 + K.TAG_SIZE:-4])[0][0][1] == value
    assert accepted and refused
