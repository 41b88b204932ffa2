"""``msgspec-struct``: typed Structs built from the protobuf schemas round-trip the bundled sample."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpc_capture import Call, open_trace
from rpcbench import fidelity as F
from rpcbench.codec import received_call
from rpcbench.config import DEFAULT_TRACE, DICT_TRACE, RunConfig
from rpcbench.registry import Registry
from rpcbench.testing import check_codec

SAMPLE = list(open_trace(str(DICT_TRACE)))  #: named args: the dict-shaped fields these tests vary
POSITIONAL = list(open_trace(str(DEFAULT_TRACE)))  #: positional args (messages arg0, arg1...)
CODEC = Registry.default().create("msgspec-struct")


@pytest.mark.parametrize("calls", [SAMPLE, POSITIONAL], ids=["dict", "positional"])
def test_every_call_of_the_bundled_samples_round_trips(calls):
    check_codec(CODEC, calls)
    for call in calls:
        assert F.compare(call, received_call(CODEC.decode(CODEC.encode(call)))) is None


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(POSITIONAL), st.data())
def test_positional_args_come_back_as_a_list_also_when_trailing_ones_are_left_out(call, data):
    kept = data.draw(st.integers(0, len(call.args)))
    short = Call(call.method, call.args[:kept])
    assert received_call(CODEC.decode(CODEC.encode(short))) == short
    with pytest.raises(F.Limit, match="positional args") as refused:  # the schema and the call disagree
        CODEC.encode(Call(call.method, call.args + [1]))
    assert refused.value.feature == F.OTHER and F.OTHER not in CODEC.changes


def test_typed_wire_is_smaller_than_untyped_messagepack():
    untyped = Registry.default().create("msgspec")
    assert sum(map(len, map(CODEC.encode, SAMPLE[:3000]))) < 0.8 * sum(map(len, map(untyped.encode, SAMPLE[:3000])))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SAMPLE), st.data())
def test_fields_left_out_or_none_come_back_as_they_were(call, data):
    args = dict(call.args)
    for key in list(args):
        change = data.draw(st.sampled_from(["keep", "drop", "none"]), label=key)
        if change == "drop":
            del args[key]
        elif change == "none":
            args[key] = None
    edited = Call(call.method, args)
    assert F.compare(edited, received_call(CODEC.decode(CODEC.encode(edited)))) is None


def test_what_the_schema_cannot_hold_fails_at_encode_named():
    """A method or a value type the schema lacks is a declared failure; a key it lacks is the schema's and the
    trace's disagreement (undeclared); none is left for the typed decoder to refuse or to change."""
    hp = next(c for c in SAMPLE if c.method == "hp_update")  # hp: int32
    for call, feature in ((Call("no_such_method", {}), F.METHOD), (Call("heartbeat", {"zzz": 1}), F.OTHER),
                          (Call("hp_update", {**hp.args, "hp": "lots"}), F.WRONG_TYPE),
                          (Call("hp_update", {**hp.args, "hp": True}), F.WRONG_TYPE),
                          (Call("hp_update", {**hp.args, "hp": 2.5}), F.FLOAT_IN_INT),
                          (Call("hp_update", {**hp.args, "hp": float("nan")}), F.NON_FINITE),
                          (Call("hp_update", "not a dict"), F.WRONG_TYPE)):
        with pytest.raises(F.Limit) as raised:
            CODEC.encode(call)
        assert raised.value.feature == feature and (feature in CODEC.changes) == (feature != F.OTHER)


def test_the_run_gives_it_the_run_s_schemas():
    assert RunConfig().registry().codec_options["msgspec-struct"] == {"settings": RunConfig().proto}
