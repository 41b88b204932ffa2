"""No silent type change: a value whose type the schema does not carry is a declared failure or a declared change.

Python's bool is an int, so a typed field can take one for the other (protobuf's int32 takes True and gives 1
back; its bool field takes 2 and gives True). Through ``protobuf`` and ``msgspec-struct``, with a hand-written
schema of every kind of field and with one inferred from calls whose fields mix bool, int and float, every
difference and every failure must be one the codec declares; and the Minecraft packets' ``hideParticles`` (True
in one game version, 2 or 6 in the others) must come back as it went.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpc_capture import Call
from rpcbench import fidelity as F
from rpcbench import protobuf
from rpcbench.codec import Codec
from rpcbench.registry import Registry
from rpcbench.tally import CodecTally

REPO = Path(__file__).resolve().parent.parent
REGISTRY = Registry.default()
TYPED = ("protobuf", "msgspec-struct")

SCHEMA = """syntax = "proto3";
package mixed;
import "google/protobuf/struct.proto";
import "google/protobuf/wrappers.proto";
enum Kind { ZERO = 0; ONE = 1; TWO = 2; }
message Inner { int32 n = 1; }
message Mixed {
  int32 i32 = 1; int64 i64 = 2; uint64 u64 = 3; sint32 s32 = 4; double dbl = 5; float flt = 6; bool flag = 7;
  string text = 8; bytes raw = 9; Kind kind = 10; repeated int32 ints = 11; repeated double dbls = 12;
  repeated bool flags = 13; map<string, int32> counts = 14; google.protobuf.Value any = 15;
  google.protobuf.Int32Value maybe = 16; optional int32 opt = 17; Inner inner = 18;
}
"""
FIELDS = ("i32", "i64", "u64", "s32", "dbl", "flt", "flag", "text", "raw", "kind", "any", "maybe", "opt")
NUMBERS = st.one_of(st.booleans(), st.integers(-(1 << 70), 1 << 70), st.floats())  #: bool, int and float mixed
VALUES = st.one_of(NUMBERS, st.none(), st.text(alphabet="ab", max_size=2), st.binary(max_size=2))


def tally(codec: Codec, calls: list) -> CodecTally:
    """Every call through the codec, as the size pass checks it."""
    checked = CodecTally(codec)
    for index, call in enumerate(calls):
        checked.check(index, call)
    return checked


def undeclared(checked: CodecTally) -> list:
    return [(p.kind, p.feature, p.example_path, p.detail) for p in checked.problem_list() if not p.declared]


@pytest.fixture(scope="module")
def mixed_codecs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """protobuf and msgspec-struct reading the hand-written schema."""
    path = tmp_path_factory.mktemp("mixed") / "mixed.proto"
    path.write_text(SCHEMA)
    chosen = protobuf.Settings((str(path),))
    return {cid: REGISTRY.codecs[cid](chosen) for cid in TYPED}


@st.composite
def mixed_args(draw: st.DrawFn) -> dict:
    """A Mixed message's args, each field given a bool, int, float, None, str or bytes whatever its type (every
    field present: a key left out is another matter, the field's presence, docs/protobuf.md)."""
    args = {name: draw(VALUES) for name in FIELDS}
    for name in ("ints", "dbls", "flags"):
        args[name] = draw(st.lists(NUMBERS, max_size=3))
    args["counts"] = draw(st.dictionaries(st.sampled_from(("a", "b")), NUMBERS, max_size=2))
    args["inner"] = draw(st.one_of(st.fixed_dictionaries({"n": NUMBERS}), NUMBERS))
    return args


@settings(max_examples=300, deadline=None)
@given(mixed_args())
def test_a_value_of_a_type_its_field_does_not_carry_is_never_an_undeclared_change(mixed_codecs, args):
    call = Call("Mixed", args)
    for codec in mixed_codecs.values():
        assert undeclared(tally(codec, [call])) == [], (codec.name, args)


def test_a_bool_in_an_int_field_is_named_by_each_codec(mixed_codecs):
    """protobuf carries it and says it came back as 1; msgspec-struct refuses it, declared; an int in a string
    field fails in both, declared, naming the field."""
    exact = {"i32": 7, "i64": 1, "u64": 2, "s32": -3, "dbl": 0.5, "flt": 0.25, "flag": True, "text": "x", "raw": b"y",
             "kind": "ONE", "ints": [1], "dbls": [0.5], "flags": [False], "counts": {"a": 1}, "any": "z", "maybe": 4,
             "opt": 5, "inner": {"n": 6}}
    assert all(tally(codec, [Call("Mixed", exact)]).problem_list() == () for codec in mixed_codecs.values())
    carried = tally(mixed_codecs["protobuf"], [Call("Mixed", {**exact, "i32": True})]).problem_list()
    assert [(p.kind, p.feature, p.declared, p.detail) for p in carried] == [
        ("mismatch", "bool <-> number", True, "True -> 1")]
    refused = tally(mixed_codecs["msgspec-struct"], [Call("Mixed", {**exact, "i32": True})]).problem_list()
    assert [(p.kind, p.feature, p.declared) for p in refused] == [("encode", "type not in schema", True)]
    for codec in mixed_codecs.values():
        wrong = tally(codec, [Call("Mixed", {**exact, "text": 5})]).problem_list()
        assert [(p.feature, p.declared) for p in wrong] == [("type not in schema", True)]
        assert "int 5 in " in wrong[0].detail and "'text'" in wrong[0].detail


@st.composite
def mixed_traces(draw: st.DrawFn) -> list:
    """Calls of two methods whose fields each take bool, int and float values (and lists of them) at random."""
    values = st.one_of(NUMBERS, st.lists(NUMBERS, max_size=3))
    return [Call(draw(st.sampled_from(("m1", "m2"))), {k: draw(values) for k in draw(st.sets(st.sampled_from("abc")))})
            for _ in range(draw(st.integers(1, 12)))]


@settings(max_examples=40, deadline=None)
@given(mixed_traces())
def test_a_schema_inferred_from_fields_mixing_bool_int_and_float_carries_every_call(tmp_path_factory, calls):
    folder = tmp_path_factory.mktemp("inferred")
    source, _ = protobuf.infer_calls(calls, "mixed calls", "mixedinfer")
    (folder / "inferred.proto").write_text(source)
    chosen = protobuf.Settings((str(folder / "inferred.proto"),), inferred=True)
    for cid in TYPED:
        checked = tally(REGISTRY.codecs[cid](chosen), calls)
        assert undeclared(checked) == [], (cid, source)  # only ints no 64-bit type holds fail, as its comments say
        assert {p.feature for p in checked.problem_list() if p.kind == "encode"} <= {F.BIG_INTS, F.INT_RANGE}, (
            cid, source)


def test_minecraft_hide_particles_comes_back_as_it_went_or_declared(tmp_path):
    """``entity_effect``: ``hideParticles`` is True in 1.8.8 and 2 or 6 later. A schema inferred from the later
    calls alone types it int32: the True is then a declared change (protobuf: 1) or failure (msgspec-struct),
    never an undeclared 1. Inferred from every call, the field carries both (a google.protobuf.Value for protobuf,
    the ints coming back as float, declared) and the True comes back True."""
    calls = [Call(**{k: v for k, v in json.loads(line).items() if k in ("method", "args")})
             for line in (REPO / "tests" / "data" / "minecraft_packets.jsonl").read_text().splitlines()]
    effects = [c for c in calls if c.method == "entity_effect"]
    flagged = [c for c in effects if c.args["hideParticles"] is True]
    assert flagged and {type(c.args["hideParticles"]) for c in effects} == {bool, int}
    for name, seen in (("later", [c for c in calls if c not in flagged]), ("every", calls)):
        source, _ = protobuf.infer_calls(seen, f"{name} minecraft calls", name)
        (tmp_path / f"{name}.proto").write_text(source)
        chosen = protobuf.Settings((str(tmp_path / f"{name}.proto"),), inferred=True)
        for cid in TYPED:
            codec = REGISTRY.codecs[cid](chosen)
            checked = tally(codec, effects)
            assert undeclared(checked) == [], (name, cid)
            if name == "every":
                assert checked.failures == 0 and codec.decode(codec.encode(flagged[0]))[1]["hideParticles"] is True
            else:
                assert {p.feature for p in checked.problem_list()} == {
                    "protobuf": {F.BOOL_NUMBER}, "msgspec-struct": {F.WRONG_TYPE}}[cid]
