"""The trace file format: lossless round trips, streaming, damage handling, JSON Lines."""

from __future__ import annotations

import json
import logging
import math
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rpc_capture import Call, JsonlReader, TraceError, TraceReader, TraceWriter, open_trace, write_jsonl
from rpc_capture import trace as T
from strategies import calls, values


def same(a, b) -> bool:
    """Equal including types, tuples vs lists and NaN (repr keeps all of that)."""
    return repr(a) == repr(b) or (isinstance(a, float) and math.isnan(a) and math.isnan(b))


@given(values())
def test_value_round_trip(value):
    decoded, end = T.decode_value(T.encode_value(value))
    assert repr(decoded) == repr(value)
    assert end == len(T.encode_value(value))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=50)
@given(st.lists(calls(), max_size=20))
def test_file_round_trip(tmp_path, sample):
    path = tmp_path / "t.rpct"
    with TraceWriter(path, {"game": "test", "build": "1.2.3"}) as w:
        for call in sample:
            w.write(call)
    reader = TraceReader(path)
    assert reader.metadata == {"game": "test", "build": "1.2.3"}
    back = list(reader)
    assert repr(back) == repr(sample)
    assert reader.end == {"calls": len(sample)}
    assert reader.truncated_bytes == 0


def write_sample(path, n=50, **kw):
    sample = [Call("move", {"id": i, "pos": [i * 0.5, -1.25], "raw": bytes([i % 256])}, i, "c2s", i % 3) for i in range(n)]
    with TraceWriter(path, {"game": "g"}, **kw) as w:
        for call in sample:
            w.write(call)
    return sample


def test_gzip_trace_reads_back(tmp_path):
    path = tmp_path / "t.rpct.gz"
    sample = write_sample(path, compresslevel=6)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert list(open_trace(path)) == sample


def test_truncated_file_keeps_complete_calls_and_warns(tmp_path, caplog):
    path = tmp_path / "t.rpct"
    sample = write_sample(path)
    data = path.read_bytes()
    record = len(TraceWriter.encode_call(sample[0]))
    end_record = len(T._frame(T.KIND_END, json.dumps({"calls": 50}).encode()))
    cut = len(data) - end_record - record // 2  # half of the last call record survives
    path.write_bytes(data[:cut])
    with caplog.at_level(logging.WARNING, logger="rpc_capture"):
        reader = TraceReader(path)
        back = list(reader)
    assert back == sample[:-1]
    assert reader.truncated_bytes == record - record // 2
    assert reader.end is None
    [message] = [r.getMessage() for r in caplog.records]
    assert str(path) in message and f"dropped {reader.truncated_bytes} bytes" in message


def test_corrupt_byte_names_file_and_offset(tmp_path):
    path = tmp_path / "t.rpct"
    write_sample(path)
    data = bytearray(path.read_bytes())
    header_end = T._FILE_HEAD.size + len(b'{"game": "g"}')
    first = len(TraceWriter.encode_call(Call("move", {"id": 0, "pos": [0.0, -1.25], "raw": b"\0"}, 0, "c2s", 0)))
    data[header_end + first + 20] ^= 0xFF  # inside the second record
    path.write_bytes(bytes(data))
    with pytest.raises(TraceError) as err:
        list(TraceReader(path))
    assert str(err.value) == f"{path}: byte offset {header_end + first}: record checksum mismatch (file is corrupt)"


def test_hostile_length_is_refused_before_allocating(tmp_path):
    path = tmp_path / "t.rpct"
    header = T._FILE_HEAD.pack(T.MAGIC, T.VERSION, 2) + b"{}"
    path.write_bytes(header + struct.pack("<BI", T.KIND_CALL, 0xFFFFFFF0) + b"xx")
    with pytest.raises(TraceError, match=r"byte offset 16: record length 4294967280 exceeds"):
        list(TraceReader(path))


def test_hostile_count_inside_a_valid_record(tmp_path):
    """A list claiming 2**32-1 items in a 20-byte record: refused, not allocated."""
    path = tmp_path / "t.rpct"
    body = struct.pack("<qB", 0, 0) + T.encode_value(1) + T.encode_value("m") + struct.pack("<BI", T.T_LIST, 0xFFFFFFFF)
    header = T._FILE_HEAD.pack(T.MAGIC, T.VERSION, 2) + b"{}"
    path.write_bytes(header + T._frame(T.KIND_CALL, body))
    with pytest.raises(TraceError, match="container claims 4294967295 items"):
        list(TraceReader(path))


def test_deep_nesting_is_refused(tmp_path):
    body = struct.pack("<qB", 0, 0) + T.encode_value(1) + T.encode_value("m") + struct.pack("<BI", T.T_LIST, 1) * 5000
    path = tmp_path / "t.rpct"
    path.write_bytes(T._FILE_HEAD.pack(T.MAGIC, T.VERSION, 2) + b"{}" + T._frame(T.KIND_CALL, body))
    with pytest.raises(TraceError, match="nested deeper than 100"):
        list(TraceReader(path))


def test_not_a_trace(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"\x00\x01garbage")
    with pytest.raises(TraceError, match=r"x.bin: byte offset 0: not a trace"):
        open_trace(path)
    with pytest.raises(TraceError, match="cannot open"):
        open_trace(tmp_path / "missing.rpct")


def test_newer_version_is_a_clear_error(tmp_path):
    path = tmp_path / "t.rpct"
    path.write_bytes(T._FILE_HEAD.pack(T.MAGIC, 99, 2) + b"{}")
    with pytest.raises(TraceError, match="version 99; this reader knows version 1"):
        TraceReader(path)


def test_unknown_record_kind_is_skipped(tmp_path):
    """Forward compatibility: a future record kind with a valid checksum is passed over."""
    path = tmp_path / "t.rpct"
    sample = write_sample(path, n=3)
    data = path.read_bytes()
    start = T._FILE_HEAD.size + len(b'{"game": "g"}')
    path.write_bytes(data[:start] + T._frame(ord("X"), b"future") + data[start:])
    assert list(TraceReader(path)) == sample


def test_streaming_does_not_hold_the_trace(tmp_path):
    """Reading is lazy: the reader yields before it has seen the end of the file."""
    path = tmp_path / "t.rpct"
    write_sample(path, n=1000)
    reader = TraceReader(path)
    first = next(iter(reader))
    assert first.args["id"] == 0 and reader.end is None


def test_jsonl_import_with_bytes(tmp_path):
    path = tmp_path / "calls.jsonl"
    lines = [
        {"method": "input_frame", "args": {"frame": 7, "data": {"$binary": {"base64": "AAEC/w==", "subType": "00"}}},
         "t": 1732250000000000000, "dir": "c2s", "conn": "player-1"},
        {"method": "heartbeat", "args": [1, 2.5, None, True, "é"]},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")
    back = list(open_trace(path))
    assert back[0] == Call("input_frame", {"frame": 7, "data": b"\x00\x01\x02\xff"}, 1732250000000000000, "c2s", "player-1")
    assert back[1] == Call("heartbeat", [1, 2.5, None, True, "é"])


def test_jsonl_export_import_round_trip(tmp_path):
    sample = [Call("m", {"b": b"\x00\xff", "x": [1.5, None]}, 5, "s2c", 3), Call("n", "text", 6, "c2s", "c")]
    path = tmp_path / "out.jsonl"
    assert write_jsonl(sample, path) == 2
    assert '{"$binary":{"base64":"AP8=","subType":"00"}}' in path.read_text(encoding="utf-8")
    assert list(open_trace(path)) == sample


@pytest.mark.parametrize("line, message", [
    ('{"args": {}}', '"method" (a string) is required'),
    ('{"method": "m"}', '"args" is required'),
    ('{"method": "m", "args": 1, "dir": "up"}', '"dir" must be one of'),
    ('{"method": "m", "args": 1, "extra": 1}', "unknown field"),
    ('{"method": "m", "args": {"$binary": {"base64": "!!", "subType": "00"}}}', "bad base64"),
    ('{"method": "m", "args": ', "Expecting value"),
])
def test_jsonl_errors_name_line_and_offset(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"method": "ok", "args": 1}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(TraceError) as err:
        list(JsonlReader(path))
    assert f"{path}: line 2 (byte offset 28): " in str(err.value) and message in str(err.value)
