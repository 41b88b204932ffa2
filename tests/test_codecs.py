"""Built-in codecs: round trips within declared capabilities, declared changes, wrappers, registry."""

from __future__ import annotations

import base64
import logging
import textwrap
import zlib

import pytest
from hypothesis import given, settings

from rpc_capture import Call
from rpcbench import fidelity as F
from rpcbench.codec import Compressed, received_call
from rpcbench.errors import BenchError
from rpcbench.registry import Registry
from strategies import assert_declared_changes_happen, calls

REGISTRY = Registry.default()
BASE_IDS = ["json", "ujson", "orjson", "msgpack", "bson"]
WRAPPED_IDS = ["json+zlib-1", "json+zlib-9", "bson+zlib-6", "ujson+zlib-0", "msgpack+zstd-1", "json+zstd-19"]


def round_trip_all(codec, sample):
    """Encode then decode each call through one connection's codec, in order."""
    session = codec.connection()
    return [received_call(session.decode(session.encode(call))) for call in sample]


@pytest.mark.parametrize("codec_id", BASE_IDS + WRAPPED_IDS + ["json+zlibstream-6"])
def test_round_trip_within_declared_capabilities(codec_id):
    codec = REGISTRY.create(codec_id)

    @settings(max_examples=150, deadline=None)
    @given(calls(without=set(codec.changes)))
    def check(call):
        data = codec.connection().encode(call)
        assert type(data) is bytes
        assert F.compare(call, received_call(codec.connection().decode(data))) is None

    check()


@pytest.mark.parametrize("codec_id", BASE_IDS)
def test_declared_features_really_change(codec_id):
    """Each declared feature shows up as a failure or a difference of that feature: no false claims."""
    assert_declared_changes_happen(REGISTRY.create(codec_id))


def test_json_wire_format_is_the_documented_envelope():
    codec = REGISTRY.create("json")
    data = codec.encode(Call("chat", {"text": "你好 ☺", "raw": b"\x01\x02", "hp": 1.5}))
    assert data == '{"method":"chat","args":{"text":"你好 ☺","raw":"AQI=","hp":1.5}}'.encode("utf-8")


def test_ujson_matches_json_bytes():
    call = Call("cast_skill", {"skill": 1042, "pos": [1.25, -3.5, 0.0], "name": "火球", "raw": b"\x00\x10"})
    assert REGISTRY.create("ujson").encode(call) == REGISTRY.create("json").encode(call)


def test_zlib_wrapper_is_the_standard_stream_over_inner_bytes():
    call = Call("sync_position", {"id": 123456, "x": 10.5, "y": -3.25})
    inner = REGISTRY.create("json").encode(call)
    for level in range(1, 10):
        codec = REGISTRY.create(f"json+zlib-{level}")
        assert isinstance(codec, Compressed) and codec.name == f"json+zlib-{level}"
        assert codec.encode(call) == zlib.compress(inner, level)
        assert codec.config()["level"] == level


def test_zlibstream_shrinks_repeated_messages_per_connection():
    codec = REGISTRY.create("json+zlibstream-6")
    call = Call("sync_position", {"id": 123456, "x": 10.5, "y": -3.25, "facing": 90})
    conn = codec.connection()
    first, second = conn.encode(call), conn.encode(call)
    assert len(second) < len(first) / 2
    receiver = codec.connection()
    assert received_call(receiver.decode(first)) == call and received_call(receiver.decode(second)) == call


def test_unknown_ids_list_the_known_ones():
    with pytest.raises(BenchError, match=r"unknown codec 'nope'; known: bson, captured, cbor, json, msgpack, .*orjson, "
                                         r".*ujson.*<codec>\+zlib-<level>"):
        REGISTRY.create("nope")
    with pytest.raises(BenchError, match=r"unknown compressor 'lz9' in 'json\+lz9-1'; did you mean 'lz4'\?; "
                                         r"known: brotli, lz4, zlib, zlibstream, zstd"):
        REGISTRY.create("json+lz9-1")
    with pytest.raises(BenchError, match=r"zlib levels are 0..9"):
        REGISTRY.create("json+zlib-12")


def test_codec_file_dropped_into_a_folder_is_found(tmp_path):
    (tmp_path / "upper.py").write_text(textwrap.dedent('''
        import json
        from rpc_capture import Call
        from rpcbench.codec import Codec

        class Base64Json(Codec):
            """JSON, then base64: a plugin written by a user."""
            id = "b64json"

            def encode(self, call):
                import base64
                return base64.b64encode(json.dumps([call.method, call.args]).encode())

            def decode(self, data):
                import base64
                method, args = json.loads(base64.b64decode(data))
                return Call(method, args)
    '''))
    registry = Registry.default([tmp_path])
    codec = registry.create("b64json+zlib-1")
    call = Call("m", {"a": 1})
    assert codec.decode(codec.encode(call)) == call
    assert registry.origin("b64json") == str(tmp_path / "upper.py")


def test_codec_with_missing_library_is_skipped_with_one_line(tmp_path, caplog):
    (tmp_path / "fancy.py").write_text("import not_a_real_library_xyz\n")
    with caplog.at_level(logging.INFO, logger="rpcbench"):
        registry = Registry.default([tmp_path])
    assert "json" in registry.codecs
    assert registry.skipped == {str(tmp_path / "fancy.py"): "needs not_a_real_library_xyz (not installed)"}
    assert [r.getMessage() for r in caplog.records if "fancy.py" in r.getMessage()] == [
        f"skipping codec file {tmp_path / 'fancy.py'}: not_a_real_library_xyz is not installed "
        "(in a clone: pip install -r requirements.txt; else: pip install 'rpcbench[all]')"
    ]


def test_duplicate_ids_are_an_error(tmp_path):
    (tmp_path / "again.py").write_text("from rpcbench.codec import Codec\nclass J(Codec):\n    id = 'json'\n")
    with pytest.raises(BenchError, match="'json' is defined twice"):
        Registry.default([tmp_path])


def test_module_class_spec(tmp_path, monkeypatch):
    (tmp_path / "mycodecs.py").write_text(
        "from rpcbench.codec import Codec\nclass Raw(Codec):\n    id = 'raw'\n"
        "    def encode(self, call): return call.method.encode()\n"
        "    def decode(self, data): return data.decode(), None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = Registry.default()
    registry.load_class("mycodecs:Raw")
    assert registry.create("raw").encode(Call("abc", None)) == b"abc"
    with pytest.raises(BenchError, match="expected module:Class"):
        registry.load_class("mycodecs")
    with pytest.raises(BenchError, match="has no attribute 'Nope'"):
        registry.load_class("mycodecs:Nope")


def test_codec_without_decode_is_refused_when_loaded(tmp_path):
    plugin = tmp_path / "half.py"
    plugin.write_text("from rpcbench.codec import Codec\nclass Half(Codec):\n    id = 'half'\n"
                      "    def encode(self, call): return b''\n")
    with pytest.raises(BenchError, match=r"half.py: Half does not define decode"):
        Registry.default().load_file(str(plugin))


def test_json_bytes_are_standard_padded_base64():
    back = received_call(REGISTRY.create("json").decode(REGISTRY.create("json").encode(Call("m", {"b": b"\xfb\xff"}))))
    assert back.args["b"] == base64.b64encode(b"\xfb\xff").decode() == "+/8="
