"""``rpcbench.testing.check_codec``: passes the built-in codecs, catches broken ones."""

from __future__ import annotations

import json
import os
import random
import zlib

import pytest

from rpc_capture import Call, open_trace
from rpcbench.codec import Codec, JSON_CHANGES, Received, base64_default
from rpcbench.registry import Registry
from rpcbench.testing import check_codec

REGISTRY = Registry.default()
SAMPLE = [call for call, _ in zip(open_trace(os.path.join(os.path.dirname(__file__), "..", "samples",
                                                         "battle_dict.rpct")), range(400))]


@pytest.mark.parametrize("codec_id", ["json", "ujson", "orjson", "msgpack", "bson", "protobuf", "protobuf-struct",
                                      "json+zlib-1", "json+zstd-3", "json+zlibstream-1"])
def test_built_in_codecs_pass(codec_id):
    check_codec(REGISTRY.create(codec_id), SAMPLE)


class SmallJson(Codec):
    """A plugin as a user would write it: JSON of [method, args]."""

    id = "smalljson"
    changes = JSON_CHANGES

    def encode(self, call: Call) -> bytes:
        return json.dumps([call.method, call.args], default=base64_default).encode()

    def decode(self, data: bytes) -> Received:
        method, args = json.loads(data)
        return method, args


class DropsKeys(SmallJson):
    def encode(self, call: Call) -> bytes:
        args = {k: v for k, v in call.args.items() if k != "id"} if isinstance(call.args, dict) else call.args
        return super().encode(Call(call.method, args))


class Salted(SmallJson):
    def encode(self, call: Call) -> bytes:
        return super().encode(call) + b" " * random.randrange(2)


class ReturnsCall(SmallJson):
    def decode(self, data: bytes) -> Received:
        return Call(*json.loads(data))


class SharedStream(SmallJson):
    """Claims one stream per connection, but every connection shares one deflate context."""

    per_connection = True
    _shared = {"c": zlib.compressobj(), "d": zlib.decompressobj()}

    def connection(self) -> "SharedStream":
        return self

    def encode(self, call: Call) -> bytes:
        c = self._shared["c"]
        return c.compress(super().encode(call)) + c.flush(zlib.Z_SYNC_FLUSH)

    def decode(self, data: bytes) -> Received:
        return super().decode(self._shared["d"].decompress(data))


def test_a_correct_plugin_passes():
    check_codec(SmallJson(), SAMPLE)


@pytest.mark.parametrize("codec, message", [
    (DropsKeys(), r"undeclared mismatch"),
    (Salted(), r"not deterministic: call \d+"),
    (ReturnsCall(), r"decode returned Call, not a \(method, args\) tuple"),
    (SharedStream(), r"stream started at call 50, call 0 \(damage\): undeclared decode"),
])
def test_broken_plugins_are_caught(codec, message):
    with pytest.raises(AssertionError, match=message):
        check_codec(codec, SAMPLE)


def test_no_calls_is_an_error():
    with pytest.raises(ValueError):
        check_codec(SmallJson(), [])
