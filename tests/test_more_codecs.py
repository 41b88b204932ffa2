"""msgspec (MessagePack and JSON), CBOR, and the LZ4 and Brotli compressors: round trips on the
bundled sample and on generated values, and declared changes that really happen."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from rpc_capture import Call, open_trace
from rpcbench import fidelity as F
from rpcbench.codec import received_call
from rpcbench.config import DEFAULT_TRACE
from rpcbench.registry import Registry
from rpcbench.testing import check_codec
from strategies import calls

REGISTRY = Registry.default()
SAMPLE = list(open_trace(str(DEFAULT_TRACE)))
BASE_IDS = ["msgspec", "msgspec-json", "cbor"]
WRAPPED_IDS = ["json+lz4-0", "msgpack+lz4-9", "json+brotli-5", "msgspec+brotli-11", "cbor+zstdstream-3"]
EXAMPLES = {
    F.BYTES: {"b": b"\x00\xff"}, F.TUPLES: {"t": (1, 2)}, F.INT_KEYS: {5: "x"}, F.UINT64: {"u": 1 << 63},
    F.BIG_INTS: {"n": 1 << 70}, F.SURROGATES: {"s": "\udc80"}, F.NUL_KEYS: {"a\x00b": 1},
    F.NON_FINITE: {"f": float("inf")},
}


@pytest.mark.parametrize("codec_id", BASE_IDS + WRAPPED_IDS)
def test_every_call_of_the_bundled_sample_round_trips(codec_id):
    check_codec(REGISTRY.create(codec_id), SAMPLE)


@pytest.mark.parametrize("codec_id", BASE_IDS + WRAPPED_IDS)
def test_round_trip_of_generated_calls_within_declared_capabilities(codec_id):
    codec = REGISTRY.create(codec_id)

    @settings(max_examples=150, deadline=None)
    @given(calls(without=set(codec.changes)))
    def check(call):
        session = codec.connection()
        assert F.compare(call, received_call(session.decode(session.encode(call)))) is None

    check()


@pytest.mark.parametrize("codec_id", BASE_IDS)
def test_declared_features_really_change(codec_id):
    codec = REGISTRY.create(codec_id)
    assert codec.changes
    for feature in codec.changes:
        call = Call("m", EXAMPLES[feature])
        try:
            back = received_call(codec.decode(codec.encode(call)))
        except Exception:
            continue  # declared as failing
        assert F.compare(call, back, codec.changes).feature == feature


def test_compressors_shrink_json_and_levels_are_checked():
    json_size = sum(len(REGISTRY.create("json").encode(c)) for c in SAMPLE[:2000])
    for codec_id in ("json+lz4-9", "json+brotli-5"):
        codec = REGISTRY.create(codec_id)
        assert sum(len(codec.encode(c)) for c in SAMPLE[:2000]) < json_size
    with pytest.raises(Exception, match="brotli levels are 0..11"):
        REGISTRY.create("json+brotli-12")
