"""``run_bench.py proto infer``: the inferred .proto compiles and carries the trace it came from."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpc_capture import Call, TraceWriter, open_trace, write_jsonl
from rpcbench import fidelity as F
from rpcbench.commands import main as cli_main
from rpcbench import protobuf
from rpcbench.protobuf import infer
from rpcbench.protobuf.infer import MAX_NESTING, TraceShapes
from rpcbench.protobuf.shape import MAX_DEPTH
from rpcbench.tally import CodecTally
from rpcbench.registry import Registry

REPO = Path(__file__).resolve().parent.parent
REGISTRY = Registry.default()



def unseen_calls(n=400, seed=3):
    """A trade/guild game's traffic: nothing like the battle sample, with every shape infer must handle."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = rng.choice(["market.buy", "guild_roster", "Emote", "loot", "set_profile"])
        if kind == "market.buy":
            args = {"item": rng.randrange(1 << 40, 1 << 41), "qty": rng.randrange(1, 99), "price": rng.choice([5, 7.5]),
                    "gold_delta": -rng.randrange(10**6), "coupon": rng.choice([None, "SALE10"]),
                    "seller": {"id": rng.randrange(10**6), "name": rng.choice(["Łucja", "某人"]), "rep": rng.random()}}
        elif kind == "guild_roster":
            args = {"guild": rng.randrange(100), "members": {str(rng.randrange(10**6)): {"rank": rng.randrange(5)}
                                                             for _ in range(rng.randrange(5))},
                    "slots": {rng.randrange(40): rng.randrange(1 << 63, 1 << 64) for _ in range(3)}}
        elif kind == "Emote":
            args = [rng.choice(["wave", "dance"]), rng.randrange(3)] + ([rng.random()] if rng.random() < 0.5 else [])
        elif kind == "loot":
            drops = [{"id": rng.randrange(500), "rarity": rng.choice(["common", "epic"])}
                     for _ in range(rng.randrange(4))]
            args = {"drops": drops,
                    "seed": bytes(rng.randrange(256) for _ in range(8)), "bonus": rng.choice([None, [1, 2]]),
                    "meta": rng.choice([1, "x", True]), "unused": None}
        else:
            args = {"bio": "héllo 👋", "tags": []}
            if rng.random() < 0.5:
                args["avatar"] = rng.randrange(100)
        out.append(Call(kind, args, i, "c2s", 1))
    return out


@pytest.fixture
def tally_for():
    """Run every call of a trace through the protobuf codec with the given schema; return the tally."""
    def run(proto, trace, mapping=None):
        chosen = protobuf.Settings((str(proto),), (), mapping and str(mapping))
        tally = CodecTally(REGISTRY.codecs["protobuf"](chosen))
        for i, call in enumerate(open_trace(trace)):
            tally.check(i, call)
        return tally
    return run


def test_infer_on_an_unseen_trace_compiles_and_encodes_it(tmp_path, capsys, tally_for):
    with TraceWriter(tmp_path / "trade.rpct", {}) as writer:  # binary: keeps int keys (JSON Lines cannot)
        for call in unseen_calls():
            writer.write(call)
    mapping = tmp_path / "map.json"
    assert cli_main(["proto", "infer", "--trace", str(tmp_path / "trade.rpct"), "--mapping-out", str(mapping)]) == 0
    source = capsys.readouterr().out
    (tmp_path / "trade.proto").write_text(source)
    assert json.loads(mapping.read_text()) == {"market.buy": "trade.MarketBuy"}
    for expected in ["package trade;", "rpc market_buy(MarketBuy)", "int64 item", "sint32 gold_delta",
                     "double price = ", "google.protobuf.StringValue coupon", "map<string, MembersValue> members",
                     "map<int32, uint64> slots", "repeated Drop drops", "bytes seed", "repeated int32 bonus",
                     "google.protobuf.Value meta", "google.protobuf.Value unused", "optional int32 avatar",
                     "repeated google.protobuf.Value tags", "string arg0", "int32 arg1", "optional double arg2"]:
        assert expected in source, expected
    for guess in ["ints and floats seen", "None comes back as []", "mixed types", "only None seen", "only empty lists"]:
        assert re.search(rf"// guess: .*{re.escape(guess)}", source), guess
    tally = tally_for(tmp_path / "trade.proto", tmp_path / "trade.rpct", mapping)
    assert tally.failures == 0
    assert {p.feature for p in tally.problem_list()} <= {F.NULLS, F.INT_AS_FLOAT}
    assert all(p.declared for p in tally.problem_list())


def test_infer_on_the_bundled_trace_encodes_every_call(tmp_path, tally_for):
    source, mapping = infer(str(REPO / "samples" / "battle_dict.rpct"), "battle_inferred")
    assert not mapping
    (tmp_path / "battle_inferred.proto").write_text(source)
    tally = tally_for(tmp_path / "battle_inferred.proto", REPO / "samples" / "battle_dict.rpct")
    assert tally.failures == 0
    for problem in tally.problem_list():  # only what the schema's comments announce
        assert problem.declared and problem.example_path == "args.assist", problem
    assert "repeated int32 assist = 7;  // guess: None comes back as []" in source


def test_positional_sample_round_trips_with_its_schema_and_an_inferred_one(tmp_path, tally_for):
    """The study-like sample (positional args): proto/study_battle.proto and a schema inferred from it
    carry every call back exactly."""
    sample = REPO / "samples" / "battle.rpct"
    assert tally_for(protobuf.PROTO_DIR / "study_battle.proto", sample).problem_list() == ()
    source, mapping = infer(str(sample), "study_inferred")
    (tmp_path / "study_inferred.proto").write_text(source)
    assert not mapping and "int32 arg0 = 1;" in source
    assert tally_for(tmp_path / "study_inferred.proto", sample).problem_list() == ()


def test_fields_are_numbered_by_frequency_and_non_identifier_keys_become_maps(tmp_path):
    calls = [Call("m", {"rare": 1, "common": 2, "often": 3})] + [Call("m", {"common": 2, "often": 3})] * 3
    calls += [Call("m", {"often": 1, "common": 1, "by_name": {"a-b": 1, "c d": 2}})]
    write_jsonl(calls, tmp_path / "t.jsonl")
    source = infer(str(tmp_path / "t.jsonl"), "t")[0]
    numbers = {name: int(n) for name, n in re.findall(r"(\w+) = (\d+);", source)}
    assert numbers["often"] < numbers["rare"] and numbers["common"] < numbers["rare"]
    assert "map<string, int32> by_name" in source and "keys that are not field names" in source


KEY = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
FIELD_VALUES = [  # (strategy of values, may it be missing from a call)
    (st.integers(-(1 << 63), (1 << 63) - 1), True), (st.integers(0, (1 << 64) - 1), True), (st.floats(), True),
    (st.text(st.characters(codec="utf-8"), max_size=5), True), (st.binary(max_size=5), True), (st.booleans(), True),
    (st.lists(st.integers(-1000, 1000), max_size=3), False),
    (st.fixed_dictionaries({"a": st.integers(0, 9), "b": st.text(max_size=2, alphabet="xy")}), True),
]


@st.composite
def traces(draw):
    """Calls of a few methods, each with its own keys; every key has one type, maybe None, maybe missing."""
    calls = []
    for m in range(draw(st.integers(1, 3))):
        keys = draw(st.lists(st.tuples(KEY, st.sampled_from(range(len(FIELD_VALUES))), st.booleans(), st.booleans()),
                             min_size=1, max_size=5, unique_by=lambda t: t[0]))
        for _ in range(draw(st.integers(1, 6))):
            args = {}
            for key, kind, nullable, missable in keys:
                values, may_miss = FIELD_VALUES[kind]
                if may_miss and missable and draw(st.booleans()):
                    continue
                args[key] = None if nullable and draw(st.booleans()) else draw(values)
            calls.append(Call(f"method_{m}", args))
    return calls


@settings(max_examples=12, deadline=None)
@given(traces())
def test_inferred_schemas_carry_random_traces(tmp_path_factory, calls):
    folder = tmp_path_factory.mktemp("infer")
    write_jsonl(calls, folder / "t.jsonl")
    (folder / "t.proto").write_text(infer(str(folder / "t.jsonl"), "t")[0])
    codec_settings = protobuf.Settings((str(folder / "t.proto"),))
    schema = protobuf.load(codec_settings)
    for call in calls:
        diff = F.compare(call, Call(*schema.decode(schema.encode(call.method, call.args))), {F.NULLS})
        assert diff is None or diff.feature == F.NULLS, (call, diff)


def test_an_inferred_schema_alone_maps_dotted_method_names_and_infer_says_where_to_save_it(tmp_path, capsys, tally_for):
    """``player.move`` is no rpc name: the rpc's ``rpcbench-method`` comment maps it, no mapping file needed."""
    rng = random.Random(5)
    calls = [Call(rng.choice(["player.move", "player.chat", "guild/join", "ping"]),
                  {"x": rng.randint(0, 99), "text": "hi"}) for _ in range(300)]
    write_jsonl(calls, tmp_path / "dotted.jsonl")
    assert cli_main(["proto", "infer", "--trace", str(tmp_path / "dotted.jsonl")]) == 0
    out = capsys.readouterr()
    assert 'rpcbench-method: "player.move"' in out.out and "rpc player_move(PlayerMove)" in out.out
    (note,) = out.err.splitlines()
    assert f"save it as {protobuf.PROTO_DIR / 'dotted.proto'}" in note and "--proto FILE" in note
    (tmp_path / "dotted.proto").write_text(out.out)
    tally = tally_for(tmp_path / "dotted.proto", tmp_path / "dotted.jsonl")
    assert (tally.failures, tally.mismatches) == (0, 0), tally.problem_list()
    schema = protobuf.load(protobuf.Settings((str(tmp_path / "dotted.proto"),)))
    assert {"player.move", "player.chat", "guild/join", "ping"} == schema.methods.keys()
    assert cli_main(["proto", "infer", "--trace", str(REPO / "samples" / "battle.rpct")]) == 0
    # never over battle.proto
    assert f"save it as {protobuf.PROTO_DIR / 'battle_inferred.proto'} " in capsys.readouterr().err


def _nested(depth: int, alternate: bool) -> object:
    value: object = 1
    for level in range(depth):
        value = [value] if alternate and level % 2 else {"a": value}
    return value


@pytest.mark.parametrize("depth, alternate", [(300, False), (1900, True)])
def test_args_nested_as_deep_as_a_trace_holds_give_a_schema_not_a_traceback(tmp_path, capsys, depth, alternate):
    """A trace may nest args up to rpc_capture's MAX_DEPTH (2000): the inference stops walking at its own depth
    (a "deep" value) and the schema nests messages no deeper than protoc takes (a Struct below), so the default
    run ends with its figures; protobuf's trouble with such calls is that codec's, counted per call."""
    trace = tmp_path / "deep.rpct"
    with TraceWriter(str(trace)) as w:
        for i in range(40):
            w.write(Call("deep", {"x": _nested(depth, alternate), "n": i}, i * 1000, "c2s", 1))
            w.write(Call("flat", {"n": i}, i * 1000, "s2c", 1))
    for jobs in ("0", "2"):
        out = tmp_path / f"out{jobs}"
        assert cli_main(["--trace", str(trace), "--out", str(out), "--jobs", jobs, "--repeat", "2", "--quiet",
                         "--no-report", "--codecs", "json,protobuf,msgspec-struct"]) == 0
        assert "Traceback" not in capsys.readouterr().err
        proto = (out / "inferred.proto").read_text()
        assert (f"dicts nested deeper than {MAX_NESTING} messages: google.protobuf.Struct" if not alternate else
                f"lists and dicts nested more than {MAX_DEPTH} deep: google.protobuf.Value") in proto
        results = {r["codec"]: r for r in json.loads((out / "results.json").read_text())["results"]}
        assert results["json"]["calls"] + results["json"]["failures"] == 80  # json's own limit: its failures


def test_shapes_stop_walking_at_their_depth():
    shapes = TraceShapes()
    shapes.add(Call("m", {"x": _nested(200, True)}, 0, "c2s", 1))
    shape, depth = shapes.by_method["m"], 0
    while shape.fields or shape.items:
        shape = shape.items or next(iter(shape.fields.values()))
        depth += 1
    assert depth == MAX_DEPTH and dict(shape.kinds) == {"deep": 1}
