"""``X+ackdelta``: bitmask deltas against the newest acknowledged call of a key, exact under any ack pattern."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rpc_capture import Call, open_trace
from rpcbench import fidelity as F
from rpcbench.codec import received_call, stream_key
from rpcbench.config import DEFAULT_TRACE, DICT_TRACE
from rpcbench.registry import Registry
from rpcbench.testing import check_codec
from strategies import values

REPO = Path(__file__).resolve().parent.parent
MINECRAFT = REPO / "tests" / "data" / "minecraft_packets.jsonl"
REGISTRY = Registry.default()
STUDY = list(open_trace(str(DEFAULT_TRACE)))  #: positional args
DICTS = list(open_trace(str(DICT_TRACE)))  #: named args, snapshots with entity lists
ackdelta = sys.modules[type(REGISTRY.create("json+ackdelta")).__module__]  # codecs/ is loaded by path


def held_alike(a: Call, b: Call) -> bool:
    """The same call down to types, float bits and dict key order (what both ends must agree on)."""
    return a.method == b.method and ackdelta.same(a.args, b.args) and repr(a.args) == repr(b.args)


def lined_up_pair(draw, without) -> tuple:
    """Two values of the same shape (what a delta node carries), drawn from arbitrary nested values."""
    old = draw(values(without=without))

    def change(value):
        if type(value) is dict:
            return {k: change(v) if draw(st.booleans()) else v for k, v in value.items()}
        if type(value) in (list, tuple):
            return type(value)(change(v) if draw(st.booleans()) else v for v in value)
        return draw(values(without=without)) if draw(st.booleans()) else value

    return old, change(old)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_node_rebuilds_the_new_value_exactly_and_in_its_key_order(data):
    old, new = lined_up_pair(data.draw, ())
    assume(ackdelta._lined_up(old, new))  # a dict or list: what a node is made for
    node = ackdelta.changes(old, new)
    assert (node is None) == ackdelta.same(old, new)
    rebuilt = ackdelta.apply(old, node or [0])
    assert held_alike(Call("m", rebuilt), Call("m", new)), (old, new, node)


def test_a_node_is_a_bitmask_per_level_and_unchanged_fields_cost_no_value():
    old = {"id": 7, "pos": [1.0, 2.0, 3.0], "hp": 100, "tags": ["a"]}
    new = {"id": 7, "pos": [1.0, 2.5, 3.0], "hp": 100.0, "tags": ["a"]}
    assert ackdelta.changes(old, new) == [~0b0110, 0b01, [0b010, 2.5], 100.0]  # pos is a node, hp whole
    assert ackdelta.changes(old, dict(old)) is None
    everything = {"id": 8, "pos": [0.0, 0.0, 0.0], "hp": 1, "tags": ["b"]}
    assert ackdelta.changes(old, everything) == [0b1111, 8, [0.0, 0.0, 0.0], 1, ["b"]]  # whole lists: no mask
    with pytest.raises(ValueError, match="does not fit its baseline's 4 fields"):
        ackdelta.apply(old, [0b10000, 1])


def test_a_dict_whose_keys_came_in_another_order_stays_lined_up_with_the_receivers_copy():
    """``same`` ignores key order, so the receiver keeps an unchanged dict in its old order: the sender must take
    its next baseline as the receiver holds it, or a later mask would name the wrong fields."""
    calls = [Call("move", {"id": 1, "p": {"x": 1, "y": 2}}), Call("move", {"id": 1, "p": {"y": 2, "x": 1}}),
             Call("move", {"id": 1, "p": {"y": 5, "x": 1}}), Call("move", {"p": {"y": 5, "x": 1}, "id": 1}),
             Call("move", {"p": {"y": 5, "x": 2}, "id": 1})]
    codec = REGISTRY.create("msgpack+ackdelta")
    sender, receiver = codec.connection(), codec.connection()
    for call in calls:
        assert F.compare(call, received_call(receiver.decode(sender.encode(call)))) is None, call


def messages(without):
    """Calls of a few keys (dict args with an ``id``, some positional) whose fields often repeat."""
    field = st.sampled_from([0, 1.5, "x", [1, 2], {"hp": 3, "pos": [0.5, 0.5]}]) | values(without=without)
    named = st.builds(lambda i, a, b, snap: {"id": i, "a": a, "b": b, "snap": snap}, st.integers(0, 2), field,
                      field, st.lists(st.fixed_dictionaries({"id": st.integers(0, 3), "hp": field}), max_size=3))
    return st.lists(st.tuples(st.sampled_from(["move", "snap"]), named | st.lists(field, max_size=3)),
                    min_size=1, max_size=30)


WINDOW = 4  #: a small reorder window, so that drops and caps happen within a short example
LATEST = WINDOW - 1  #: the most steps a message is delayed: it is never overtaken by WINDOW message ids


@pytest.mark.parametrize("inner", ["msgpack", "json"])
def test_every_delivered_message_decodes_exactly_and_each_ack_finds_both_ends_agreeing(inner):
    """Messages lost, delayed and overtaken (within the reorder window); acks lost, late and out of order: the
    receiver rebuilds every message it gets, and when an ack reaches the sender, the sender's view of that key is
    the message acked as the receiver holds it (its newest of the key, unless a later one overtook it)."""
    codec = Registry.default(codec_options={"ackdelta": {"reorder_window": WINDOW}}).create(f"{inner}+ackdelta")
    without = set(codec.changes) | {F.BYTES}
    key_of = ackdelta.key_rule(ackdelta.ID_FIELDS, None)

    @settings(max_examples=150, deadline=None)
    @given(messages(without), st.data())
    def check(sent, data):
        sender, receiver = codec.sender(), codec.receiver()
        arrivals: dict = {}  # step -> messages arriving then: (msg_id, call, wire)
        acks: dict = {}  # step -> acks arriving then: (msg_id, key, the receiver's newest id of the key, its call)
        keys_sent: list = []  # each message's key
        for step in range(len(sent) + 2 * LATEST + 2):
            for msg_id, call, wire in arrivals.pop(step, ()):
                got_id, received = receiver.decode(wire)
                assert got_id == msg_id and F.compare(call, received_call(received)) is None
                key = key_of(call.method, received[1])
                if data.draw(st.integers(0, 3), "ack lost") != 0:
                    at = step + data.draw(st.integers(0, LATEST), "ack delay")
                    acks.setdefault(at, []).append((msg_id, key, receiver.state()[key][0], Call(*received)))
            for msg_id, key, newest, held in data.draw(st.permutations(acks.pop(step, [])), "ack order"):
                before = sender.view().get(key, (-1, None))
                sender.acked(msg_id)
                view = sender.view().get(key, (-1, None))
                waited = keys_sent[msg_id + 1:].count(key) < WINDOW  # the sender awaits WINDOW acks per key at most
                assert view == ((msg_id, view[1]) if msg_id > before[0] and waited else before) and newest >= msg_id
                if view[0] == msg_id:
                    assert held_alike(view[1], held)
            if step < len(sent):
                call = Call(*sent[step])
                keys_sent.append(key_of(*sent[step]))
                wire = sender.encode(call, step)
                if data.draw(st.integers(0, 4), "message lost") != 0:
                    at = step + data.draw(st.integers(1, LATEST), "delay")
                    arrivals.setdefault(at, []).append((step, call, wire))
        assert not arrivals and not acks

    check()


def test_without_acks_messages_go_whole_and_memory_stays_bounded_with_acks_or_without():
    codec = Registry.default(codec_options={"ackdelta": {"reorder_window": WINDOW}}).create("msgpack+ackdelta")
    calls = [c for c in DICTS if c.method == "sync_position"][:400]
    keys = len({call.args["id"] for call in calls})
    sender, receiver = codec.sender(), codec.receiver()
    for i, call in enumerate(calls):  # acks never come
        assert len(sender.encode(call, i)) == len(codec.inner.encode(Call(call.method, [i, call.args])))
        receiver.decode(sender.encode(call, i))
    assert sender.view() == {} and len(receiver.state()) == keys
    assert max(map(len, sender._unacked.values())) == WINDOW
    assert max(map(len, receiver._held.values())) == 2 * WINDOW + 1
    acked_sender, acked_receiver = codec.sender(), codec.receiver()
    for i, call in enumerate(calls):
        assert F.compare(call, received_call(acked_receiver.decode(acked_sender.encode(call, i))[1])) is None
        acked_sender.acked(i)
        assert sum(map(len, acked_sender._unacked.values())) == 0
        assert sum(map(len, acked_receiver._held.values())) <= 2 * keys + WINDOW  # superseded: WINDOW ids more
    assert len(acked_sender.view()) == len(acked_receiver.state()) == keys


def test_a_message_overtaken_by_a_later_one_naming_a_newer_baseline_still_decodes_within_the_window():
    """Message 1 (against 0) is overtaken by 2 and 3; 3 names baseline 2, so 0 retires: message 1 still finds
    it until ``reorder_window`` newer ids have arrived (here 1: message 4), and a clear error comes after that."""
    codec = Registry.default(codec_options={"ackdelta": {"reorder_window": 1}}).create("msgpack+ackdelta")
    calls = [Call("move", {"id": 1, "x": float(i)}) for i in range(5)]
    sender, receiver, late = codec.sender(), codec.receiver(), codec.receiver()
    wires = []
    for i, call in enumerate(calls):
        wires.append(sender.encode(call, i))
        if i != 1:  # message 1 is late: no ack for it yet
            sender.acked(i)
    assert [ackdelta_body(codec, w)[:2] for w in wires] == [[0, calls[0].args], [1, 1], [2, 2], [3, 1], [4, 1]]
    for order, receiving in (([0, 2, 3, 1, 4], receiver), ([0, 2, 3, 4], late)):
        for i in order:
            assert receiving.decode(wires[i]) == (i, ("move", calls[i].args))
    with pytest.raises(ValueError, match="baseline message 0 is not held .* over 1 message ids late"):
        late.decode(wires[1])


def ackdelta_body(codec, wire):
    """The message's body as sent: ``[msg_id, distance, node]`` or ``[msg_id, args]``."""
    return codec.inner.decode(wire)[1]


def test_a_baseline_the_receiver_dropped_is_a_clear_error_not_a_wrong_call():
    codec = REGISTRY.create("msgpack+ackdelta")
    sender, receiver = codec.sender(), codec.receiver()
    first, second = Call("move", {"id": 1, "x": 1.0}), Call("move", {"id": 1, "x": 2.0})
    sender.encode(first, 0)  # lost
    sender.acked(0)  # an ack that cannot have happened: the receiver never held message 0
    with pytest.raises(ValueError, match="baseline message 0 is not held"):
        receiver.decode(sender.encode(second, 1))


def test_the_key_rule_is_the_method_plus_an_id_field_and_the_registry_configures_it():
    key_of = ackdelta.key_rule(ackdelta.ID_FIELDS, None)
    assert key_of("sync_position", {"x": 1.0, "id": 5}) == ("sync_position", "id", 5)
    assert key_of("entity_look", {"entityId": 9, "yaw": 3}) == ("entity_look", "entityId", 9)
    assert key_of("hp", {"id": True}) == key_of("hp", [5, 6]) == ("hp",)  # a bool is no id; list args: method
    configured = Registry.default(codec_options={"ackdelta": {"id_fields": ("src",), "id_index": 0}})
    codec = configured.create("msgpack+ackdelta")
    assert codec.config()["id_fields"] == ["src"] and codec.config()["id_index"] == 0
    sender = codec.sender()
    for i, call in enumerate([Call("damage", {"id": 1, "src": 4}), Call("obj_move", [18, 1.5]),
                              Call("obj_move", [19, 1.5])]):
        sender.encode(call, i)
        sender.acked(i)
    assert sorted(sender.view(), key=repr) == [("damage", "src", 4), ("obj_move", 0, 18), ("obj_move", 0, 19)]


@pytest.mark.parametrize("codec_id", ["msgpack+ackdelta", "json+ackdelta", "cbor+ackdelta"])
@pytest.mark.parametrize("trace", ["study", "dict", "minecraft"])
def test_ackdelta_codecs_pass_check_codec_on_real_traces(codec_id, trace):
    codec = REGISTRY.create(codec_id)
    assert codec.per_connection and codec.ack_baselines and not codec.ordered_delivery
    calls = {"study": STUDY[:1500] + STUDY[-1500:], "dict": DICTS[:1500] + DICTS[-1500:],
             "minecraft": list(open_trace(str(MINECRAFT)))}[trace]
    check_codec(codec, calls)


def bytes_per_call(codec_id: str, calls: list) -> float:
    """Mean bytes per call through one stream per connection and direction (the size pass's replay)."""
    codec, streams = REGISTRY.create(codec_id), {}
    return sum(len(streams.setdefault(stream_key(c), codec.connection()).encode(c)) for c in calls) / len(calls)


@pytest.mark.parametrize("calls", [STUDY, DICTS], ids=["study", "dict"])
def test_on_traffic_whose_fields_repeat_msgpack_ackdelta_sends_fewer_bytes_than_msgpack(calls):
    assert bytes_per_call("msgpack+ackdelta", calls) < bytes_per_call("msgpack", calls)
    assert bytes_per_call("msgpack+ackdelta", calls) < bytes_per_call("msgpack+delta", calls)


def test_acks_reach_ackdelta_through_a_compressor_but_not_through_a_stream():
    alone = REGISTRY.create("msgpack+ackdelta+zstd-3")  # each message compressed alone: acks still drive the stage
    assert alone.ack_baselines and not alone.ordered_delivery and alone.connection().ack_baselines
    stream = REGISTRY.create("msgpack+ackdelta+zstdstream-3")
    assert stream.ordered_delivery and not stream.ack_baselines


def test_the_cli_measures_ackdelta_beside_msgpack_and_delta_end_to_end(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "--trace", str(DICT_TRACE), "--codecs",
                           "msgpack,msgpack+ackdelta,msgpack+delta", "--sizes-only", "--out", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    results = {r["codec"]: r for r in json.loads((tmp_path / "results.json").read_text())["results"]}
    ack, plain = results["msgpack+ackdelta"], results["msgpack"]
    assert ack["failures"] == ack["mismatches"] == 0 and not [p for p in ack["problems"] if not p["declared"]]
    mean = ack["sizes"]["mean"]
    assert mean < 0.8 * plain["sizes"]["mean"] and mean < results["msgpack+delta"]["sizes"]["mean"]
    assert mean == pytest.approx(bytes_per_call("msgpack+ackdelta", DICTS))  # the CLI's replay is the plain one
    assert not ack["ordered_delivery"] and results["msgpack+delta"]["ordered_delivery"]
    row = next(line for line in done.stdout.splitlines() if line.startswith("msgpack+ackdelta "))
    assert f" {mean:.1f} " in row and "ordered" not in row  # the terminal's figure is the results'

