"""``X+delta``: calls sent as patches against the previous call of their method on their stream."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpc_capture import Call, open_trace
from rpcbench import fidelity as F
from rpcbench.codec import received_call, stream_key
from rpcbench.config import DEFAULT_TRACE, DICT_TRACE
from rpcbench.errors import BenchError
from rpcbench.registry import Registry
from rpcbench.testing import check_codec
from strategies import values

REGISTRY = Registry.default()
SAMPLE = list(open_trace(str(DEFAULT_TRACE))) + list(open_trace(str(DICT_TRACE)))  #: list args, then dicts
delta = sys.modules[type(REGISTRY.create("json+delta")).__module__]  # codecs/ is loaded by path


@settings(max_examples=400, deadline=None)
@given(values(), values())
def test_patch_of_diff_rebuilds_the_new_value_exactly(old, new):
    rebuilt = delta.patch(old, delta.diff(old, new))
    assert delta.same(rebuilt, new), (old, new, rebuilt)


def test_diff_omits_what_did_not_change_and_respects_types():
    old = {"id": 7, "pos": [1.0, 2.0, 3.0], "hp": 100, "tags": ["a"]}
    new = {"id": 7, "pos": [1.0, 2.5, 3.0], "hp": 100.0, "tags": ["a"]}
    assert delta.diff(old, new) == [delta.DICT, [["pos", [delta.LIST, 3, [[1, [delta.FULL, 2.5]]]]],
                                                 ["hp", [delta.FULL, 100.0]]], []]
    assert delta.diff(old, old) == [delta.SAME]
    assert delta.diff({"a": 1, "b": 2}, {"b": 2, "a": 1}) == [delta.SAME]  # key order never counts (fidelity)
    assert delta.diff(0.0, -0.0) == [delta.FULL, -0.0] and delta.diff(1, True) == [delta.FULL, True]


def test_msgpack_delta_zstdstream_round_trips_every_call_of_the_bundled_sample_exactly():
    codec = REGISTRY.create("msgpack+delta+zstdstream-3")
    assert codec.per_connection and codec.ordered_delivery
    senders, receivers = {}, {}
    for call in SAMPLE:
        key = stream_key(call)
        data = senders.setdefault(key, codec.connection()).encode(call)
        back = received_call(receivers.setdefault(key, codec.connection()).decode(data))
        assert F.compare(call, back) is None, call
    assert max(s.state_bytes() for s in senders.values()) > 0


@pytest.mark.parametrize("codec_id", ["msgpack+delta", "json+delta+zlib-1", "msgpack+delta+zstdstream-3"])
def test_delta_codecs_pass_check_codec_on_the_bundled_sample(codec_id):
    check_codec(REGISTRY.create(codec_id), SAMPLE[:2000] + SAMPLE[-2000:])


@pytest.mark.parametrize("codec_id", ["msgpack+delta", "json+delta+zstdstream-3"])
def test_delta_round_trips_generated_sequences_of_one_method(codec_id):
    codec = REGISTRY.create(codec_id)

    @settings(max_examples=100, deadline=None)
    @given(st.lists(values(without=set(codec.changes)), min_size=1, max_size=8))
    def check(args_list):
        sender, receiver = codec.connection(), codec.connection()
        for args in args_list:
            call = Call("m", args)
            assert F.compare(call, received_call(receiver.decode(sender.encode(call)))) is None

    check()


def test_the_id_grammar_takes_a_chain_of_stages_and_refuses_bad_orders():
    assert REGISTRY.create("msgpack+delta+zstdstream-3").name == "msgpack+delta+zstdstream-3"
    assert REGISTRY.trained_compressor("msgpack+delta+zstddict-3")[0] == "msgpack+delta"
    with pytest.raises(BenchError, match="delta works on calls: put it before any compressor"):
        REGISTRY.create("json+zlib-1+delta")
    with pytest.raises(BenchError,
                       match="unknown compressor 'nope' in 'json\\+nope'; known: .*; call stages: ackdelta, delta"):
        REGISTRY.create("json+nope")
