"""msgspec (MessagePack and JSON), CBOR, and the LZ4 and Brotli compressors: round trips on the
bundled sample and on generated values, and declared changes that really happen."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from rpc_capture import open_trace
from rpcbench import fidelity as F
from rpcbench.codec import received_call
from rpcbench.config import DEFAULT_TRACE, DICT_TRACE
from rpcbench.registry import Registry
from rpcbench.testing import check_codec
from strategies import assert_declared_changes_happen, calls

REGISTRY = Registry.default()
SAMPLE = list(open_trace(str(DEFAULT_TRACE)))
DICT_SAMPLE = list(open_trace(str(DICT_TRACE)))  #: 100-4000 B messages; the study sample's are ~60 B
BASE_IDS = ["msgspec", "msgspec-json", "cbor"]
WRAPPED_IDS = ["json+lz4-0", "msgpack+lz4-9", "json+brotli-5", "msgspec+brotli-11", "cbor+zstdstream-3"]


@pytest.mark.parametrize("codec_id", BASE_IDS + WRAPPED_IDS)
def test_every_call_of_the_bundled_sample_round_trips(codec_id):
    check_codec(REGISTRY.create(codec_id), SAMPLE[:10000] + DICT_SAMPLE[:10000])


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
    assert_declared_changes_happen(codec)


def test_compressors_shrink_json_and_levels_are_checked():
    json_size = sum(len(REGISTRY.create("json").encode(c)) for c in DICT_SAMPLE[:2000])
    for codec_id in ("json+lz4-9", "json+brotli-5"):
        codec = REGISTRY.create(codec_id)
        assert sum(len(codec.encode(c)) for c in DICT_SAMPLE[:2000]) < json_size
    with pytest.raises(Exception, match="brotli levels are 0..11"):
        REGISTRY.create("json+brotli-12")
