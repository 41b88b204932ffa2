"""``quant``: bit-packed messages from a schema and a precision profile, checked on the bundled traces, real
Minecraft traffic and hypothesis values of every field kind; its bytes against a bit count made apart from it."""

from __future__ import annotations

import dataclasses
import math
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpc_capture import Call, TraceWriter, open_trace
from rpcbench import fidelity as F
from rpcbench import precision, protobuf
from rpcbench.codec import received_call
from rpcbench.config import DEFAULT_TRACE, DICT_TRACE, RunConfig
from rpcbench.errors import BenchError
from rpcbench.pipeline import run_benchmark
from rpcbench.precision_suggest import schema_settings, suggest
from rpcbench.quant import call_bits
from rpcbench.tally import round_trip
from rpcbench.testing import check_codec

DATA = Path(__file__).resolve().parent / "data"
MINECRAFT = DATA / "minecraft_packets.jsonl"  #: real Minecraft packets (PrismarineJS/minecraft-packets, MIT)


def quant_for(trace: Path, tmp_path: Path, text: str | None = None):
    """The quant codec a run would build for ``trace`` with the profile ``precision suggest`` gives (or ``text``),
    and the trace's calls."""
    calls = list(open_trace(str(trace)))
    settings_, _ = schema_settings(str(trace), calls, protobuf.Settings())
    profile = tmp_path / "profile.toml"
    profile.write_text(text if text is not None else suggest(str(trace), calls), encoding="utf-8")
    config = RunConfig(trace=str(trace), proto=settings_, precision=precision.load(str(profile)))
    return config.registry().create("quant"), calls


@pytest.mark.parametrize("trace", [DEFAULT_TRACE, DICT_TRACE, MINECRAFT], ids=["study", "dict", "minecraft"])
def test_suggested_profile_carries_every_call_declared_and_the_bit_count_is_the_bytes(trace, tmp_path):
    codec, calls = quant_for(trace, tmp_path)
    check_codec(codec, calls[:3000])
    declared = frozenset(codec.changes)
    layouts = codec.layout()
    for call in calls:
        outcome = round_trip(codec, call, declared)
        assert outcome.problem is None or outcome.problem[2], (call, outcome.problem)  # declared, or none
        index, message = layouts[call.method]
        assert len(outcome.data) == math.ceil(call_bits(codec.index_bits, message, call.args) / 8), call


def test_full_precision_floats_come_back_within_half_their_step_and_less_than_half_msgpack(tmp_path):
    codec, calls = quant_for(DICT_TRACE, tmp_path)
    msgpack = RunConfig().registry().create("msgpack")
    changed = {}
    for call in calls:
        back = received_call(codec.decode(codec.encode(call)))
        _, lossy, beyond = codec.within_steps(call, back)
        assert beyond is None
        for path, error, step in lossy:
            assert error <= step / 2 * (1 + 1e-9)
            changed[path] = changed.get(path, 0) + 1
    assert {"sync_position.args.x", "state_snapshot.args.entities.pos"} <= set(changed)
    ours = sum(len(codec.encode(c)) for c in calls)
    assert ours * 2 <= sum(len(msgpack.encode(c)) for c in calls)


def test_observed_decimals_come_back_exactly(tmp_path):
    """The study trace's coordinates carry one decimal: the suggested step 0.1 sends them without a change."""
    codec, calls = quant_for(DEFAULT_TRACE, tmp_path)
    assert not codec.lossy or all(not codec.within_steps(c, received_call(codec.decode(codec.encode(c))))[1]
                                  for c in calls)


def test_out_of_range_and_off_step_values_are_failures_never_declared(tmp_path):
    codec, calls = quant_for(DICT_TRACE, tmp_path, '[fields]\n"sync_position.args.x" = { step = 0.01, min = 0, '
                                                   'max = 100 }\n"sync_position.args.id" = { min = 0, max = 10 }\n')
    call = next(c for c in calls if c.method == "sync_position")
    fits = {**call.args, "id": 5, "x": 50.0}
    for bad in ({**fits, "x": 100.2}, {**fits, "x": math.nan}, {**fits, "id": 11}):
        outcome = round_trip(codec, Call("sync_position", bad), frozenset(codec.changes))
        assert outcome.problem[:3] == ("encode", F.PRECISION, False)
    moved = call._replace(args=fits)
    back = received_call(codec.decode(codec.encode(moved)))._replace(args={**fits, "x": 50.02})
    assert codec.within_steps(moved, back)[2][0] == "sync_position.args.x"


def test_methods_and_keys_the_schema_lacks_fail_declared(tmp_path):
    codec, calls = quant_for(MINECRAFT, tmp_path, "[fields]\n")
    declared = frozenset(codec.changes)
    some = calls[0]
    for call in (Call("no_such_packet", {}), Call(some.method, {**some.args, "not_a_field": 1})):
        outcome = round_trip(codec, call, declared)
        assert outcome.problem[0] == "encode" and outcome.problem[2], outcome.problem


KINDS_PROTO = """
syntax = "proto3";
package kinds;
import "google/protobuf/struct.proto";
import "google/protobuf/wrappers.proto";
enum Team { red = 0; blue = 1; green = 2; }
message Inner { double left = 1; sint64 count = 2; }
message Every {
  int32 hp = 1; int64 big = 2; double pos = 3; double free = 4; double exact = 5; float single = 6; bool on = 7;
  string name = 8; bytes blob = 9; Team team = 10; repeated double path = 11; map<string, int32> stats = 12;
  Inner inner = 13; optional int32 maybe = 14; google.protobuf.Int32Value nullable = 15;
  google.protobuf.Value loose = 16; repeated Inner inners = 17; int32 far = 18;
}
"""
KINDS_PROFILE = """
[fields]
"Every.args.hp" = { min = 0, max = 2000 }
"Every.args.pos" = { step = 0.01, min = -500.0, max = 500.0 }
"Every.args.free" = { step = 0.25 }
"Every.args.path" = { step = 0.001, min = -1.0, max = 1.0 }
"Every.args.inner*left" = { step = 0.1, min = 0, max = 60 }
"Every.args.stats.value" = { min = -5, max = 5 }
"Every.args.far" = { min = 100, max = 200 }
"""
FINITE = st.floats(allow_nan=False, allow_infinity=False)
EVERY = st.fixed_dictionaries({
    "hp": st.integers(0, 2000), "big": st.integers(-(1 << 63), (1 << 63) - 1), "pos": st.floats(-500, 500),
    "free": st.floats(-1e12, 1e12), "exact": FINITE, "single": st.floats(width=32, allow_nan=False),
    "on": st.booleans(), "name": st.text(st.characters(codec="utf-8"), max_size=20), "blob": st.binary(max_size=20),
    "team": st.sampled_from(["red", "blue", "green"]), "path": st.lists(st.floats(-1, 1), max_size=5),
    "stats": st.dictionaries(st.text(max_size=5).filter(lambda s: s.isprintable()), st.integers(-5, 5), max_size=4),
    "inner": st.fixed_dictionaries({"left": st.floats(0, 60), "count": st.integers(-(1 << 40), 1 << 40)}),
    "far": st.integers(100, 200) | st.just(0),
}, optional={"maybe": st.integers(-(1 << 31), (1 << 31) - 1), "nullable": st.none() | st.integers(-9, 9),
             "loose": st.none() | st.text(max_size=5) | st.lists(st.integers(-9, 9), max_size=3),
             "inners": st.lists(st.fixed_dictionaries({"left": st.floats(0, 60), "count": st.integers(-9, 9)}),
                                max_size=3)})
STEPS = {"pos": 0.01, "free": 0.25, "path": 0.001, "left": 0.1}


@pytest.fixture(scope="module")
def every_kind(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kinds")
    (folder / "kinds.proto").write_text(textwrap.dedent(KINDS_PROTO), encoding="utf-8")
    (folder / "kinds.toml").write_text(KINDS_PROFILE, encoding="utf-8")
    config = RunConfig(proto=protobuf.Settings((str(folder / "kinds.proto"),)),
                       precision=precision.load(str(folder / "kinds.toml")))
    return config.registry().create("quant")


def _within(a, b, key):
    """Same value, or within half a step for the quantized fields."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_within(a[k], b[k], k) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_within(x, y, key) for x, y in zip(a, b))
    if key in STEPS and isinstance(a, float):
        return type(b) is float and abs(a - b) <= STEPS[key] / 2 * (1 + 1e-9) + abs(a) * 1e-15
    return type(a) is type(b) and (a == b or (a != a and b != b))


@settings(max_examples=300, deadline=None)
@given(EVERY)
def test_every_field_kind_round_trips_within_its_step(every_kind, args):
    codec = every_kind
    data = codec.encode(Call("Every", args))
    method, back = codec.decode(data)
    assert method == "Every"
    expected = {**args, "nullable": args.get("nullable"), "inners": args.get("inners", [])}
    if expected.get("loose") is None:
        expected.pop("loose", None)
        back.pop("loose", None)
    assert _within(expected, back, ""), (args, back)
    index, message = codec.layout()["Every"]
    assert len(data) == math.ceil(call_bits(codec.index_bits, message, args) / 8)


def test_the_layout_takes_the_bits_the_profile_gives(every_kind):
    """2000 needs 11 bits, 1000 / 0.01 needs 17, a bool 1, an enum of 3 values 2; 100..200 has a code for 0."""
    leaves = {s.key: s.node for s in every_kind.layout()["Every"][1].slots}
    assert (leaves["hp"].bits, leaves["pos"].bits, leaves["on"].bits, leaves["team"].bits) == (11, 17, 1, 2)
    assert (leaves["far"].bits, leaves["far"].escape, leaves["exact"].bits, leaves["single"].bits) == (7, 101, 64, 32)


@pytest.mark.parametrize("text, message", [
    ("fields = 3", "expected a [fields] table"),
    ('[fields]\n"a.args.x" = { step = -1 }', "step must be above 0"),
    ('[fields]\n"a.args.x" = { min = 5, max = 1 }', "min 5 is above max 1"),
    ('[fields]\n"a.args.x" = { min = 5 }', "give both min and max"),
    ('[fields]\n"a.args.x" = { stpe = 1 }', "expected \"exact\""),
    ("[fields\n", "--precision"),
])
def test_a_malformed_profile_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(BenchError, match=message.replace("[", r"\[")):
        precision.load(str(path))


def test_an_exact_path_wins_over_globs_and_the_first_glob_over_later_ones(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('[fields]\n"*.x" = { step = 1.0 }\n"m.args.*" = { step = 2.0 }\n"m.args.x" = "exact"\n',
                    encoding="utf-8")
    profile = precision.load(str(path))
    assert profile.rule("m.args.x") == precision.EXACT_RULE
    assert profile.rule("n.args.x").step == 1.0 and profile.rule("m.args.y").step == 2.0
    assert profile.rule("q.args.y") == precision.EXACT_RULE
    assert profile.sha256 == __import__("hashlib").sha256(path.read_bytes()).hexdigest()[:12]


def test_the_lossy_table_is_the_same_from_one_piece_or_many(tmp_path):
    """Pieces of the size pass merge their per-field counts exactly: a trace cut into chunks of 700 calls gives the
    same table as one pass over it in this process."""
    calls = list(open_trace(str(DICT_TRACE)))[:3000]
    trace = tmp_path / "part.rpct"
    with TraceWriter(str(trace)) as writer:
        for call in calls:
            writer.write(call)
    profile = tmp_path / "profile.toml"
    profile.write_text(suggest(str(trace), calls), encoding="utf-8")
    base = RunConfig(trace=str(trace), codecs=("quant", "quant+zstd-3"), sizes_only=True, floor=False,
                     precision=precision.load(str(profile)))
    whole = run_benchmark(dataclasses.replace(base, jobs=0))
    pieces = run_benchmark(dataclasses.replace(base, jobs=2, chunk_calls=700))
    assert whole.result("quant").lossy and whole.result("quant").lossy == pieces.result("quant").lossy
    assert pieces.result("quant+zstd-3").lossy == pieces.result("quant").lossy
    assert whole.settings["precision"]["sha256"] == precision.load(str(profile)).sha256


def test_suggest_keeps_a_float_field_that_carried_nan_exact(tmp_path):
    """No step carries NaN: a field that showed one is suggested exact, and the run then carries it."""
    calls = [Call("sync_position", {"id": 7, "x": x, "y": 1.5, "z": 0.25, "facing": 10.0, "speed": 6.0})
             for x in (1.234567891, math.nan, 2.5)]
    text = suggest(str(DICT_TRACE), calls)
    assert '"sync_position.args.x" = "exact"' in text and '"sync_position.args.y" = { step = 0.1' in text
    path = tmp_path / "p.toml"
    path.write_text(text, encoding="utf-8")
    codec = RunConfig(precision=precision.load(str(path))).registry().create("quant")
    for call in calls:
        assert round_trip(codec, call, frozenset(codec.changes)).problem is None
