"""The protobuf codecs: schemas from real .proto files, method mapping, round trips, declared
changes, failures as fidelity problems, the envelope's byte count, the compile cache."""

from __future__ import annotations

import csv
import importlib
import json
import subprocess
import sys
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpc_capture import Call, open_trace, write_jsonl
from rpcbench import fidelity as F
from rpcbench import protobuf
from rpcbench.protobuf import compile as proto_compile
from rpcbench.codec import received_call
from rpcbench.errors import BenchError
from rpcbench.tally import CodecTally
from rpcbench.registry import Registry

REPO = Path(__file__).resolve().parent.parent
REGISTRY = Registry.default()


UNITS = """
syntax = "proto3";
package shared.units;
message Vec3 { double x = 1; double y = 2; double z = 3; }
"""
LEGACY = """
syntax = "proto2";
package legacy.lobby;
message Login {
  enum Platform { PC = 0; MOBILE = 1; CONSOLE = 2; }
  required string account = 1;
  optional int32 zone = 2 [default = 1];
  optional bytes token = 3;
  repeated int64 friends = 4;
  optional Platform platform = 5;
  map<string, int32> flags = 6;
  oneof auth { string password = 7; bytes key = 8; }
}
message Trade {
  message Offer { required int64 item = 1; optional uint32 qty = 2; }
  repeated Offer offers = 1;
  optional sint64 gold = 2;
}
"""
ARENA = """
syntax = "proto3";
package game.v3;
import "units.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "google/protobuf/struct.proto";
enum Team { TEAM_NONE = 0; RED = 1; BLUE = 2; }
message Move {
  shared.units.Vec3 to = 1;
  uint32 frame = 2;
  bool run = 3;
  optional int32 target = 4;
  google.protobuf.Timestamp at = 5;
}
message Spawn {
  message Item { int32 id = 1; string name = 2; repeated string tags = 3; }
  repeated Item items = 1;
  map<int32, Item> by_slot = 2;
  map<string, double> stats = 3;
  Team team = 4;
  repeated Team allies = 5;
  oneof source { int64 npc = 6; string player = 7; }
  google.protobuf.Int64Value owner = 8;
  google.protobuf.StringValue label = 9;
  google.protobuf.Struct extra = 10;
  google.protobuf.Value note = 11;
  uint64 big = 12;
  sint32 delta = 13;
  fixed64 seed = 14;
  float ratio = 15;
  bytes blob = 16;
  repeated google.protobuf.Value any = 17;
}
message Node { string name = 1; repeated Node children = 2; }
message Scalars {
  int32 i32 = 1; int64 i64 = 2; uint32 u32 = 3; uint64 u64 = 4; sint32 s32 = 5; sint64 s64 = 6;
  fixed32 f32 = 7; sfixed64 sf64 = 8; double d = 9; bool b = 10; string s = 11; bytes raw = 12;
  Team team = 13; optional int32 opt = 14; repeated double ds = 15; map<string, int64> m = 16;
}
"""
LOBBY = """
syntax = "proto3";
package game.svc;
import "google/protobuf/empty.proto";
message JoinRequest { string room = 1; repeated int32 party = 2; }
message LeaveRequest { string room = 1; }
service Lobby {
  rpc join(JoinRequest) returns (google.protobuf.Empty);
  rpc leave(LeaveRequest) returns (google.protobuf.Empty);
}
"""

VEC = {"x": 1.5, "y": -2.0, "z": 0.25}
EXACT = [  # calls that must come back exactly: every feature of the schemas above
    Call("Login", {"account": "kim", "zone": 3, "token": b"\x00\xff", "friends": [1, 1 << 40], "platform": "MOBILE",
                   "flags": {"pvp": 1}, "password": "pw"}),
    Call("Login", {"account": "한글", "friends": [], "flags": {}, "key": b"k"}),
    Call("Trade", {"offers": [{"item": 5, "qty": 2}, {"item": -7}], "gold": -500}),
    Call("Move", {"to": VEC, "frame": 7, "run": True, "target": 0, "at": {"seconds": 1_700_000_000, "nanos": 5}}),
    Call("Move", {"to": VEC, "frame": 0, "run": False}),
    Call("Spawn", {"items": [{"id": 1, "name": "剣", "tags": ["rare"]}],
                   "by_slot": {3: {"id": 2, "name": "", "tags": []}},
                   "stats": {"atk": 1.5}, "team": "RED", "allies": ["BLUE", "RED"], "npc": 12, "owner": 5,
                   "label": None,
                   "extra": {"a": 1.5, "b": [True, None, "x"], "c": {"d": 2.0}}, "note": "hi", "big": (1 << 64) - 1,
                   "delta": -5, "seed": (1 << 64) - 1, "ratio": 0.5, "blob": b"\x01",
                   "any": [1.0, "x", None, {"k": [2.0]}]}),
    Call("Spawn", {"items": [], "by_slot": {}, "stats": {}, "team": "TEAM_NONE", "allies": [], "player": "p1",
                   "owner": None, "label": "boss", "note": None, "big": 0, "delta": 0, "seed": 0, "ratio": 0.0,
                   "blob": b"", "any": []}),
    Call("Node", {"name": "root", "children": [{"name": "a", "children": []},
                                                {"name": "b", "children": [{"name": "c", "children": []}]}]}),
    Call("join", {"room": "r1", "party": [1, 2]}),
    Call("leave", {"room": "r1"}),
]


@pytest.fixture(scope="module")
def schemas(tmp_path_factory):
    """The .proto files above on disk: units.proto in an include folder, the others in one folder."""
    root = tmp_path_factory.mktemp("protos")
    (root / "inc").mkdir()
    (root / "inc" / "units.proto").write_text(UNITS)
    files = {name: root / f"{name}.proto" for name in ("legacy_lobby", "arena", "lobby")}
    for name, text in zip(files, (LEGACY, ARENA, LOBBY)):
        files[name].write_text(text)
    return root, files


@pytest.fixture(scope="module")
def settings_all(schemas):
    root, files = schemas
    return protobuf.Settings(tuple(map(str, files.values())), (str(root / "inc"),))


@pytest.fixture(scope="module")
def schema(settings_all):
    return protobuf.load(settings_all)


@pytest.fixture
def use():
    """Configure the codecs' schemas for one test only."""
    def configure(chosen):
        return REGISTRY.codecs["protobuf"](chosen)
    return configure


def test_methods_map_to_messages_by_rpc_and_by_name(schema):
    table = {m.name: (m.id, m.message) for m in schema.methods.values()}
    assert table["join"] == (1, "game.svc.JoinRequest") and table["leave"] == (2, "game.svc.LeaveRequest")
    assert table["Login"] == (3, "legacy.lobby.Login") and table["Trade"] == (4, "legacy.lobby.Trade")  # then by name
    assert "JoinRequest" not in table  # a file with a service maps through its rpcs only
    assert {"Move", "Spawn", "Node", "Scalars"} <= table.keys()
    assert len({i for i, _ in table.values()}) == len(table)


@pytest.mark.parametrize("index", range(len(EXACT)))
def test_every_schema_feature_round_trips_exactly(schema, index):
    call = EXACT[index]
    assert F.compare(call, Call(*schema.decode(schema.encode(call.method, call.args)))) is None


def test_bytes_are_message_bytes_plus_a_oneof_envelope(schemas, schema, tmp_path):
    """Done-when: len = len(Message(**args).SerializeToString()) + tag + length varint, and the whole
    encoding is byte for byte the oneof envelope message of docs/protobuf.md."""
    root, files = schemas
    methods = [m for m in schema.methods.values() if m.name not in ("Spawn", "Scalars")]  # no wrappers/Value
    oneof = "\n".join(f"    {m.message} {m.name} = {m.id};" for m in methods)
    (tmp_path / "envelope.proto").write_text(
        f'syntax = "proto3";\nimport "legacy_lobby.proto";\nimport "arena.proto";\nimport "lobby.proto";\n'
        f'import "units.proto";\n'
        f"message Call {{\n  oneof method {{\n{oneof}\n  }}\n}}\n")
    proto_files = [*files.values(), tmp_path / "envelope.proto"]
    generated = _python_out(proto_files, [root / "inc", root, tmp_path], tmp_path / "gen")
    envelope = generated["envelope_pb2"].Call
    classes = {m.name: _generated_class(generated, m.message) for m in methods}
    for call in (c for c in EXACT if c.method in classes):
        payload = classes[call.method](**call.args).SerializeToString()
        encoded = schema.encode(call.method, call.args)
        tag = 1 if schema.methods[call.method].id < 16 else 2
        assert len(encoded) == len(payload) + tag + (1 if len(payload) < 128 else 2)
        assert encoded == envelope(**{call.method: call.args}).SerializeToString()


def _python_out(protos, includes, out):
    """Compile with protoc's own Python generator and import the modules: an independent reference."""
    out.mkdir()
    wkt = protobuf.well_known_include()
    cmd = [sys.executable, "-m", "grpc_tools.protoc", *(f"-I{d}" for d in includes), f"-I{wkt}", f"--python_out={out}",
           *map(str, protos), str(includes[0] / "units.proto")]
    subprocess.run(cmd, check=True, capture_output=True)
    sys.path.insert(0, str(out))
    try:
        return {p.stem: importlib.import_module(p.stem) for p in out.glob("*_pb2.py")}
    finally:
        sys.path.remove(str(out))


def _generated_class(modules, full_name):
    package, _, name = full_name.rpartition(".")
    return next(getattr(m, name) for m in modules.values() if m.DESCRIPTOR.package == package and hasattr(m, name))


def test_declared_changes_show_as_declared_and_absence_of_proto3_scalars_is_reported(use, settings_all):
    codec = use(settings_all)
    spawn = EXACT[6].args
    cases = [
        (Call("Spawn", dict(spawn, ratio=0.1)), F.FLOAT32),
        (Call("Move", {"to": VEC, "frame": None, "run": False}), F.NULLS),  # None -> 0
        (Call("Spawn", dict(spawn, items=None)), F.NULLS),  # None -> []
        (Call("Spawn", dict(spawn, stats={"atk": 2})), F.INT_AS_FLOAT),
        (Call("Spawn", dict(spawn, extra={"n": 3})), F.INT_AS_FLOAT),
        (Call("Trade", {"offers": (), "gold": 1}), F.TUPLES),
    ]
    for call, feature in cases:
        diff = F.compare(call, received_call(codec.decode(codec.encode(call))), codec.changes)
        assert diff and diff.feature == feature and feature in codec.changes, (call, diff)
    missing = F.compare(Call("Move", {"to": VEC}), received_call(codec.decode(codec.encode(Call("Move", {"to": VEC})))),
                        codec.changes)
    assert missing.feature == F.DEFAULTS and "unexpected key" in missing.detail  # proto3: unset = 0, declared


def test_calls_that_do_not_fit_are_fidelity_failures_with_the_reason(use, settings_all):
    tally = CodecTally(use(settings_all))
    bad = [
        (Call("no_such_method", {}), "no message for method"),
        (Call("Move", {"to": VEC, "bogus": 1}), 'no "bogus" field'),
        (Call("Move", {"frame": "7"}), "str"),
        (Call("Login", {"zone": 2}), "missing required fields: account"),
        (Call("Spawn", {"team": "PURPLE"}), "PURPLE"),
        (Call("Move", [1, 2]), "list .* where message Move goes"),
    ]
    for i, (call, _) in enumerate(bad):
        assert tally.check(i, call) is None
    assert tally.failures == len(bad)
    undeclared, wrong_type, method = tally.problem_list()  # undeclared first
    # a key or a required field the schema and the call disagree on, an enum name the schema lacks: undeclared
    assert undeclared.kind == "encode" and not undeclared.declared and undeclared.count == 3
    # a value of a type its field cannot hold (a str in an int field, a list where a message goes): declared
    assert (wrong_type.kind, wrong_type.feature, wrong_type.declared, wrong_type.count) == (
        "encode", F.WRONG_TYPE, True, 2)
    # the one rule every schema codec follows (msgspec-struct too): a method without a message is a declared
    # METHOD limit, which still counts against the codec's coverage (docs/decide.md)
    assert (method.kind, method.feature, method.declared, method.count) == ("encode", F.METHOD, True, 1)
    assert "no_such_method" in method.detail
    for call, reason in bad:
        with pytest.raises(Exception, match=reason):
            tally.codec.encode(call)


def test_the_benchmark_runs_a_jsonl_trace_with_the_proto_options(schemas, tmp_path):
    root, files = schemas
    (tmp_path / "map.json").write_text(json.dumps({"player.move": {"message": "game.v3.Move", "id": 40}}))
    calls = [c for c in EXACT if c.method in ("Login", "Trade", "Move", "Node")] * 20
    calls += [Call("player.move", {"to": VEC, "frame": 1, "run": True}), Call("Unknown", {"x": 1})]
    write_jsonl(calls, tmp_path / "t.jsonl")
    cmd = [sys.executable, str(REPO / "run_bench.py"), "--trace", str(tmp_path / "t.jsonl"), "--codecs",
           "protobuf,protobuf+zlib-1,protobuf-struct,json", "--proto", str(files["legacy_lobby"]), "--proto",
           str(files["arena"]), "--proto-path", str(root / "inc"), "--proto-map", str(tmp_path / "map.json"),
           "--out", str(tmp_path / "out"), "--no-report", "--repeat", "1", "--min-time", "0.001", "--quiet"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {r["codec"]: r for r in csv.DictReader(open(tmp_path / "out" / "results.csv", encoding="utf-8"))}
    assert rows["protobuf"]["failures"] == rows["protobuf+zlib-1"]["failures"] == "1"  # Unknown
    assert rows["protobuf"]["mismatches"] == "0" and rows["protobuf-struct"]["failures"] == "0"
    schema = protobuf.load(protobuf.Settings((str(files["legacy_lobby"]), str(files["arena"])),
                                                   (str(root / "inc"),), str(tmp_path / "map.json")))
    assert schema.methods["player.move"].id == 40
    expected = sum(len(schema.encode(c.method, c.args)) for c in calls if c.method != "Unknown")
    assert int(rows["protobuf"]["bytes_total"]) == expected


def test_mapping_file_overrides_and_sets_ids(schemas, tmp_path):
    root, files = schemas
    mapping = tmp_path / "map.json"
    mapping.write_text(json.dumps({"player.move": {"message": "game.v3.Move", "id": 40}, "Login": "Node"}))
    schema = protobuf.load(protobuf.Settings((str(files["arena"]),), (str(root / "inc"),), str(mapping)))
    assert schema.methods["Login"].message == "game.v3.Node" and schema.methods["Login"].id == 1
    data = schema.encode("player.move", {"to": VEC})
    assert data[:2] == protobuf.varint(40 << 3 | 2) and schema.decode(data)[0] == "player.move"
    mapping.write_text(json.dumps({"x": "NoSuchMessage"}))
    with pytest.raises(BenchError, match="NoSuchMessage"):
        protobuf.load(protobuf.Settings((str(files["arena"]),), (str(root / "inc"),), str(mapping)))


def test_a_schema_that_does_not_compile_is_one_error_with_protocs_message(tmp_path):
    bad = tmp_path / "bad.proto"
    bad.write_text('syntax = "proto3";\nmessage Broken {\n  int32 x = 1\n}\n')
    with pytest.raises(BenchError) as info:
        protobuf.compile_descriptors([bad])
    message = str(info.value)
    assert "bad.proto:4:1" in message and "Expected" in message and "\n" not in message


def test_compile_cache_is_reused_and_rebuilt_when_a_proto_or_an_import_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(proto_compile, "CACHE_DIR", tmp_path / "cache")
    runs = []
    real = proto_compile._run_protoc
    monkeypatch.setattr(proto_compile, "_run_protoc", lambda *a: runs.append(1) or real(*a))
    main, dep = tmp_path / "main.proto", tmp_path / "dep.proto"
    dep.write_text('syntax = "proto3";\nmessage Dep { int32 a = 1; }\n')
    main.write_text('syntax = "proto3";\nimport "dep.proto";\nmessage M { Dep d = 1; }\n')
    first = protobuf.compile_descriptors([main])
    assert protobuf.compile_descriptors([main]) == first and len(runs) == 1
    main.write_text(main.read_text() + "message N { string s = 1; }\n")
    assert protobuf.compile_descriptors([main]) != first and len(runs) == 2
    dep.write_text('syntax = "proto3";\nmessage Dep { int32 a = 1; string b = 2; }\n')
    protobuf.compile_descriptors([main])
    assert len(runs) == 3 and len(list((tmp_path / "cache").iterdir())) == 2


def test_bundled_trace_round_trips_except_the_declared_schema_choices(use):
    codec = use(protobuf.Settings())
    assert codec.config()["backend"] == "upb" and sorted(codec.schemas) == ["battle.proto", "study_battle.proto"]
    tally = CodecTally(codec)
    for i, call in enumerate(open_trace(REPO / "samples" / "battle_dict.rpct")):
        tally.check(i, call)
    assert tally.failures == 0
    for problem in tally.problem_list():
        assert problem.declared and problem.feature == F.NULLS, problem
        assert problem.example_path in ("args.assist", "args.err")


def test_protobuf_struct_declares_its_losses():
    codec = REGISTRY.create("protobuf-struct")
    call = Call("m", {"n": 1, "b": b"\x00", "t": (1.5,), 7: "k"})
    back = received_call(codec.decode(codec.encode(call)))
    assert back.args == {"n": 1.0, "b": "AA==", "t": [1.5], "7": "k"}
    assert F.compare(call, back, codec.changes).feature in codec.changes


SAFE_INTS = st.integers(-(1 << 53), 1 << 53)  # exact as doubles
JSONISH = st.recursive(
    st.none() | st.booleans() | SAFE_INTS | st.floats() | st.text(st.characters(codec="utf-8")) | st.binary(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.tuples(kids) | st.dictionaries(st.text(st.characters(codec="utf-8")),
                                                                               kids, max_size=4),
    max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(st.text(st.characters(codec="utf-8"), min_size=1), JSONISH)
def test_protobuf_struct_round_trips_up_to_declared_changes(method, args):
    codec = REGISTRY.create("protobuf-struct")
    diff = F.compare(Call(method, args), received_call(codec.decode(codec.encode(Call(method, args)))), codec.changes)
    assert diff is None or diff.feature in codec.changes, diff


def _bits(n, signed=True):
    return st.integers(-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed else st.integers(0, (1 << n) - 1)


SCALARS = st.fixed_dictionaries(
    {"i32": _bits(32), "i64": _bits(64), "u32": _bits(32, False), "u64": _bits(64, False), "s32": _bits(32),
     "s64": _bits(64), "f32": _bits(32, False), "sf64": _bits(64), "d": st.floats(), "b": st.booleans(),
     "s": st.text(st.characters(codec="utf-8")), "raw": st.binary(),
     "team": st.sampled_from(["TEAM_NONE", "RED", "BLUE"]),
     "ds": st.lists(st.floats()), "m": st.dictionaries(st.text(st.characters(codec="utf-8")), _bits(64))},
    optional={"opt": _bits(32)})
NODES = st.recursive(
    st.fixed_dictionaries({"name": st.text(max_size=3), "children": st.just([])}),
    lambda kids: st.fixed_dictionaries({"name": st.text(max_size=3), "children": st.lists(kids, max_size=3)}),
    max_leaves=10)


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.builds(Call, st.just("Scalars"), SCALARS), st.builds(Call, st.just("Node"), NODES)))
def test_typed_messages_round_trip_exactly(schema, call):
    assert F.compare(call, Call(*schema.decode(schema.encode(call.method, call.args)))) is None


def test_proto_compile_prints_the_method_table(schemas, capsys):
    from rpcbench.commands.proto import main

    root, files = schemas
    assert main(["compile", "--proto", str(files["lobby"])]) == 0
    out = capsys.readouterr().out
    assert "lobby.proto; 2 methods" in out and re.search(r"^ +1  join +game\.svc\.JoinRequest$", out, re.M)
