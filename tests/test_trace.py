"""The trace file format: lossless round trips, streaming, damage handling, JSON Lines."""

from __future__ import annotations

import json
import logging
import marshal
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rpc_capture import Call, JsonlReader, TraceError, TraceReader, TraceWriter, open_trace, trace_header, write_jsonl
from rpc_capture import C2S
from rpc_capture import keys as K
from rpc_capture import trace as T
from rpc_capture import values as V
from strategies import calls, values


def beyond_json(children: st.SearchStrategy) -> st.SearchStrategy:
    """Containers the trace keeps although no codec here does: sets, frozensets, any hashable keys."""
    keys = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(max_size=8) \
        | st.tuples(st.integers(), st.text())
    return st.sets(keys, max_size=4) | st.frozensets(keys, max_size=4) | st.dictionaries(keys, children, max_size=4)


TRACE_VALUES = st.recursive(values() | st.complex_numbers() | st.just(...), beyond_json, max_leaves=30)


def same(a, b) -> bool:
    """Equal including exact types, dict order, NaN and -0.0 (sets: as sets, their order is arbitrary)."""
    if type(a) is not type(b):
        return False
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return same(list(a), list(b)) and same(list(a.values()), list(b.values()))
    if type(a) in (set, frozenset):
        return sorted(map(repr, a)) == sorted(map(repr, b))
    return repr(a) == repr(b)


@given(TRACE_VALUES)
def test_value_round_trip_agrees_with_marshal(value):
    """The pure-Python reader decodes what marshal writes, exactly as marshal itself would."""
    data = V.dump(value)
    decoded, end = V.load(data)
    assert end == len(data)
    assert same(decoded, value) and same(decoded, marshal.loads(data))


def test_shared_objects_and_back_references_decode_as_marshal_does():
    pos, name = [1.5, 2.5], "shared-string"
    value = [{"a": pos, "b": pos, name: (name, pos)}, pos, (), (), 1 << 70, 1 << 70]
    data = V.dump(value)
    assert b"r" in data  # marshal wrote back-references
    assert V.load(data)[0] == marshal.loads(data) == value


def test_deepest_value_marshal_writes_is_read_and_deeper_is_refused():
    value: list = []
    for _ in range(V.MAX_DEPTH - 1):
        value = [value]
    decoded, depth = V.load(V.dump(value))[0], 1
    while decoded:
        decoded, depth = decoded[0], depth + 1
    assert decoded == [] and depth == V.MAX_DEPTH
    with pytest.raises(ValueError, match="too deeply"):
        V.dump([value])
    with pytest.raises(ValueError, match=f"nested deeper than {V.MAX_DEPTH}"):
        V.load(b"[\x01\x00\x00\x00" * (V.MAX_DEPTH + 1) + b"N")


@pytest.mark.parametrize("data, message", [
    (V.dump(compile("1", "x", "eval")), "unsupported marshal type code 0x63"),
    (b"[\xff\xff\xff\x7f", "container claims 2147483647 items"),
    (b"[\x00\x00\x00\x80", "negative length"),
    (b"r\x00\x00\x00\x00", "back-reference 0 to a value not read yet"),
    (b"\xdb\x01\x00\x00\x00r\x00\x00\x00\x00", "or to a container from inside it"),  # a list holding itself
    (b"{[\x00\x00\x00\x00N0", "unhashable type: 'list'"),
    (b"l\x01\x00\x00\x00\x00\x00", "leading zero digit"),
    (b"z\x05ab", "runs past the end"),
    (b"i\x01\x00", "runs past the end"),
])
def test_hostile_or_broken_values_are_refused(data, message):
    with pytest.raises(ValueError, match=message):
        V.load(data)


def use_key(monkeypatch, hex_key: str) -> None:
    """Make ``hex_key`` this process's trace key, for writers and readers."""
    monkeypatch.setenv(K.ENV, hex_key)
    K.forget()
    monkeypatch.setattr(K, "_cache", {})  # looked up afresh, and forgotten after the test


def refuse_marshal(monkeypatch) -> None:
    def refuse(*a):
        raise AssertionError("marshal.loads is not safe on files from anyone")
    monkeypatch.setattr(marshal, "loads", refuse)


def test_reader_never_calls_marshal_loads_without_the_writers_key(tmp_path, monkeypatch):
    use_key(monkeypatch, "11" * 32)
    sample = write_sample(tmp_path / "t.rpct")
    use_key(monkeypatch, "22" * 32)  # a reader holding another key: a file from anyone else
    refuse_marshal(monkeypatch)
    assert list(TraceReader(tmp_path / "t.rpct")) == sample
    assert list(open_trace(tmp_path / "t.rpct")) == sample


def test_no_key_and_use_key_false_read_by_the_safe_decoder(tmp_path, monkeypatch):
    use_key(monkeypatch, "11" * 32)
    sample = write_sample(tmp_path / "t.rpct")
    refuse_marshal(monkeypatch)
    assert list(TraceReader(tmp_path / "t.rpct", use_key=False)) == sample
    monkeypatch.setenv(K.ENV, "not hex")  # a malformed key is no key
    K.forget()
    assert list(TraceReader(tmp_path / "t.rpct")) == sample


def test_the_writers_own_key_reads_through_marshal(tmp_path, monkeypatch):
    use_key(monkeypatch, "33" * 32)
    sample = write_sample(tmp_path / "t.rpct")
    seen = []
    real = marshal.loads
    monkeypatch.setattr(marshal, "loads", lambda data: seen.append(len(data)) or real(data))
    back = list(TraceReader(tmp_path / "t.rpct"))
    assert back == sample and all(type(c) is Call and c.dir is C2S for c in back)
    assert len(seen) == 5  # 600 calls: 4 batches of 128 and one of 88


def test_a_forged_tag_is_not_trusted(tmp_path, monkeypatch):
    """A record whose body changed after tagging (its CRC fixed up) goes to the safe decoder."""
    use_key(monkeypatch, "44" * 32)
    body = V.dump([("m", compile("1", "x", "eval"), 0, "c2s", 0)])  # a code object, as marshal writes it
    record = T._frame(T.KIND_BATCH, K.tag(b"something else", K.reader_key()) + body)
    write_records(tmp_path / "t.rpct", record)
    refuse_marshal(monkeypatch)
    refused = r"byte offset 16: malformed batch record \(unsupported marshal type code 0x63"
    with pytest.raises(TraceError, match=refused):
        list(TraceReader(tmp_path / "t.rpct"))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(st.lists(TRACE_VALUES, min_size=1, max_size=20))
def test_tagged_and_safe_reads_agree(tmp_path, monkeypatch, args):
    """The fast path (C marshal behind the tag) and the safe decoder yield the same calls, exactly."""
    use_key(monkeypatch, "55" * 32)
    path = tmp_path / "t.rpct"
    with TraceWriter(path) as w:
        for i, arg in enumerate(args):
            w.write(("m", arg, i, "s2c", i))
    fast, safe = list(TraceReader(path)), list(TraceReader(path, use_key=False))
    assert same(fast, safe) and same([c.args for c in fast], args)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=50)
@given(st.lists(calls(), max_size=600))
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


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=40)
@given(st.lists(calls(wires=True), max_size=100))
def test_wire_reads_back_by_both_paths_and_jsonl(tmp_path, monkeypatch, sample):
    """A call's ``wire`` (6-tuple) and its absence (5-tuple, wire None) read back through the tagged path,
    the safe decoder and JSON Lines alike, in batches of all-5, all-6 and mixed tuples."""
    use_key(monkeypatch, "58" * 32)
    path, lines = tmp_path / "t.rpct", tmp_path / "t.jsonl"
    with TraceWriter(path) as w:
        for call in sample:
            w.write(call)
    fast, safe = list(TraceReader(path)), list(TraceReader(path, use_key=False))
    write_jsonl(sample, lines)
    assert repr(fast) == repr(safe) == repr(sample)
    assert [c.wire for c in open_trace(lines)] == [c.wire for c in sample]
    assert [len(c) for c in fast] == [5 if c.wire is None else 6 for c in sample]  # as stored


def test_a_call_without_wire_is_stored_as_a_five_tuple(tmp_path, monkeypatch):
    """Traces without captured bytes stay byte for byte what older readers take; one with them holds 6-tuples,
    and a call is the tuple stored (a recorded call still unpacks into five names)."""
    use_key(monkeypatch, "59" * 32)
    path = tmp_path / "t.rpct"
    with TraceWriter(path) as w:
        w.write(Call("m", [1], 2, "s2c", 3))
        w.write(Call("m", [1], 2, "s2c", 3, b"\x93\x01"))
        w.write(("m", [1], 2, "s2c", 3, bytearray(b"ab")))
    data = path.read_bytes()
    at, batches = T._FILE_HEAD.size + T._FILE_HEAD.unpack_from(data)[2], []
    while at < len(data):
        kind, n = T._REC_HEAD.unpack_from(data, at)
        if kind == T.KIND_BATCH:
            batches.append(V.load(data[at + T._REC_HEAD.size + K.TAG_SIZE:at + T._REC_HEAD.size + n])[0])
        at += T._REC_HEAD.size + n + 4
    assert batches == [[("m", [1], 2, "s2c", 3), ("m", [1], 2, "s2c", 3, b"\x93\x01"), ("m", [1], 2, "s2c", 3, b"ab")]]
    assert [c.wire for c in TraceReader(path)] == [None, b"\x93\x01", b"ab"]
    with pytest.raises(TypeError, match="wire is str"):
        TraceWriter(tmp_path / "u.rpct").write(("m", [1], 2, "s2c", 3, "text"))


def test_jsonl_wire_is_base64(tmp_path):
    path = tmp_path / "w.jsonl"
    write_jsonl([Call("m", 1, 5, "s2c", 3, b"\x00\xff")], path)
    assert '"wire":"AP8="' in path.read_text(encoding="utf-8")
    path.write_text('{"method": "m", "args": 1, "wire": "!!"}\n', encoding="utf-8")
    with pytest.raises(TraceError, match='bad base64 in "wire"'):
        list(JsonlReader(path))


def test_trace_header_reads_the_metadata_alone(tmp_path):
    path = tmp_path / "t.rpct"
    with TraceWriter(path, {"capture": {"framing": "u16"}}) as w:
        w.write(Call("m", 1))
    assert trace_header(path) == {"capture": {"framing": "u16"}}
    write_jsonl([Call("m", 1)], tmp_path / "t.jsonl")
    assert trace_header(tmp_path / "t.jsonl") == {}


def write_sample(path, n=600, **kw):
    """``n`` calls written through TraceWriter: batch records of BATCH_CALLS (128) calls."""
    sample = [Call("move", {"id": i, "pos": [i * 0.5, -1.25], "raw": bytes([i % 256])}, i, "c2s", i % 3)
              for i in range(n)]
    with TraceWriter(path, {"game": "g"}, **kw) as w:
        for call in sample:
            w.write(call)
    return sample


def record_size(calls) -> int:
    return len(T.encode_batch([T.recordable(c) for c in calls]))


HEADER_END = T._FILE_HEAD.size + len(b'{"game": "g"}')


def test_wanted_positions_are_fetched_across_batches(tmp_path):
    sample = write_sample(tmp_path / "t.rpct")
    assert list(TraceReader(tmp_path / "t.rpct").calls({0, 127, 128, 599})) == [sample[i] for i in (0, 127, 128, 599)]


def test_gzip_trace_reads_back(tmp_path):
    path = tmp_path / "t.rpct.gz"
    sample = write_sample(path, compresslevel=6)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert list(open_trace(path)) == sample


def test_truncated_file_keeps_complete_calls_and_warns(tmp_path, caplog):
    path = tmp_path / "t.rpct"
    sample = write_sample(path)
    data = path.read_bytes()
    last = record_size(sample[512:])
    end_record = len(T._frame(T.KIND_END, json.dumps({"calls": 600}).encode()))
    cut = len(data) - end_record - last // 2  # half of the last batch record survives
    path.write_bytes(data[:cut])
    with caplog.at_level(logging.WARNING, logger="rpc_capture"):
        reader = TraceReader(path)
        back = list(reader)
    assert back == sample[:512]
    assert reader.truncated_bytes == last - last // 2
    assert reader.end is None
    [message] = [r.getMessage() for r in caplog.records]
    assert str(path) in message and f"dropped {reader.truncated_bytes} bytes" in message


def test_corrupt_byte_names_file_and_offset(tmp_path):
    path = tmp_path / "t.rpct"
    sample = write_sample(path)
    data = bytearray(path.read_bytes())
    second = HEADER_END + record_size(sample[:T.BATCH_CALLS])
    data[second + 20] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(TraceError) as err:
        list(TraceReader(path))
    assert str(err.value).startswith(f"{path}: byte offset {second}: record checksum mismatch (file is corrupt)")


def write_records(path, *records: bytes, version: int = T.VERSION) -> None:
    path.write_bytes(T._FILE_HEAD.pack(T.MAGIC, version, 2) + b"{}" + b"".join(records))


def test_hostile_length_is_refused_before_allocating(tmp_path):
    path = tmp_path / "t.rpct"
    write_records(path, struct.pack("<BI", T.KIND_BATCH, 0xFFFFFFF0) + b"xx")
    with pytest.raises(TraceError, match=r"byte offset 16: record length 4294967280 exceeds"):
        list(TraceReader(path))


@pytest.mark.parametrize("body, message", [
    (b"[\xff\xff\xff\x7f", "container claims 2147483647 items"),
    (b"N", "not a list"),
    (V.dump([("m", [], 0, "c2s", 0)]) + b"N", "1 stray bytes after the calls"),
    (V.dump([("m", [], 0, "up", 0)]), "direction is neither"),
    (V.dump([("m", [], 0, "c2s", None)]), "connection id is not an int or str"),
    (V.dump([("m", [], 0.5, "c2s", 0)]), "call time is not an int"),
    (V.dump([["m", [], 0, "c2s", 0]]), "neither a 5-tuple nor a 6-tuple"),
    (V.dump([("m", [], 0, "c2s", 0, b"w", 1)]), "neither a 5-tuple nor a 6-tuple"),
    (V.dump([("m", [], 0, "c2s", 0, "w")]), "wire .* is not bytes"),
    (V.dump([("m", [], 0, "c2s", 0, None)]), "wire .* is not bytes"),
    (V.dump([("m", compile("1", "x", "eval"), 0, "c2s", 0)]), "unsupported marshal type code"),
])
@pytest.mark.parametrize("version", [2, 3])
def test_malformed_batch_names_file_offset_and_problem(tmp_path, body, message, version):
    """Version 3 with a tag no key made (zeros): the safe decoder reads it, as any version 2 record."""
    path = tmp_path / "t.rpct"
    write_records(path, T._frame(T.KIND_BATCH, bytes(K.TAG_SIZE if version == 3 else 0) + body), version=version)
    with pytest.raises(TraceError, match=rf"t.rpct: byte offset 16: malformed batch record \(.*{message}"):
        list(TraceReader(path))


def test_not_a_trace(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"\x00\x01garbage")
    with pytest.raises(TraceError, match=r"x.bin: byte offset 0: not a trace"):
        open_trace(path)
    with pytest.raises(TraceError, match="cannot open"):
        open_trace(tmp_path / "missing.rpct")


def test_other_version_is_a_clear_error(tmp_path):
    path = tmp_path / "t.rpct"
    for version in (1, 4, 99):
        path.write_bytes(T._FILE_HEAD.pack(T.MAGIC, version, 2) + b"{}")
        with pytest.raises(TraceError, match=f"version {version}; this reader knows versions 2, 3"):
            TraceReader(path)


def test_unknown_record_kind_is_skipped(tmp_path):
    """Forward compatibility: a future record kind with a valid checksum is passed over."""
    path = tmp_path / "t.rpct"
    sample = write_sample(path, n=3)
    data = path.read_bytes()
    path.write_bytes(data[:HEADER_END] + T._frame(ord("X"), b"future") + data[HEADER_END:])
    assert list(TraceReader(path)) == sample


def test_writer_refuses_an_unrecordable_call_and_keeps_the_rest(tmp_path):
    path = tmp_path / "t.rpct"
    with TraceWriter(path) as w:
        w.write(Call("a", 1))
        with pytest.raises(TypeError, match="cannot record a value of type object"):
            w.write(Call("b", [object()]))
        w.write(Call("c", {"k": bytearray(b"x")}))
    assert list(TraceReader(path)) == [Call("a", 1), Call("c", {"k": b"x"})]


def test_writer_refuses_a_call_too_big_for_a_record_when_it_is_written(tmp_path):
    """Refused by write() itself: not later, by the batch write, with the calls pending beside it."""
    path = tmp_path / "t.rpct"
    with TraceWriter(path) as w:
        w.write(Call("a", 1))
        with pytest.raises(ValueError, match="exceeds the 16777216-byte record limit"):
            w.write(Call("huge", b"x" * T.MAX_RECORD))
        w.write(Call("c", 2))
    assert list(TraceReader(path)) == [Call("a", 1), Call("c", 2)]


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
    assert back[0] == Call("input_frame", {"frame": 7, "data": b"\x00\x01\x02\xff"}, 1732250000000000000, "c2s",
                           "player-1")
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


FIELD_VALUES = st.none() | st.booleans() | st.integers() | st.floats() | st.sampled_from(["c2s", "s2c", "m", ""]) | \
    st.lists(st.integers(), max_size=2) | st.dictionaries(st.text(max_size=2), st.integers())
T_EDGES = st.sampled_from([1 << 63, (1 << 63) - 1, -(1 << 63), -(1 << 63) - 1])
RECORDED = st.fixed_dictionaries({"method": st.text(max_size=3), "args": FIELD_VALUES, "t": T_EDGES | st.integers(),
                                  "dir": st.sampled_from(["c2s", "s2c"]), "conn": st.integers() | st.text(max_size=2)})
# a recorder's line with one field any JSON value, or none
FIVE_FIELDS = st.builds(lambda line, name, value: {**line, name: value} if name else line,
                        RECORDED, st.sampled_from([None, "method", "t", "dir", "conn"]), FIELD_VALUES)
OTHER_FIELDS = st.dictionaries(st.sampled_from(["method", "args", "t", "dir", "conn", "wire", "extra"]), FIELD_VALUES,
                               min_size=4, max_size=6)


@settings(max_examples=500)
@given(FIVE_FIELDS | OTHER_FIELDS | FIELD_VALUES)
def test_a_json_lines_object_gives_the_same_call_or_error_by_the_five_field_path_and_field_by_field(obj):
    """A line of the five fields a recorder writes is taken at once; any object gives what checking it field
    by field gives: the same call, or the same error."""
    from rpc_capture.jsonl import _call_from, _checked_call

    def outcome(read):
        try:
            return read(obj)
        except ValueError as e:
            return str(e)
    assert outcome(_call_from) == outcome(_checked_call)


def test_the_worked_example_in_the_spec_reads_back(tmp_path, monkeypatch):
    """docs/trace-format.md's example bytes (hex before the two-space gap on each line) are a valid record."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "trace-format.md").read_text(encoding="utf-8")
    block = doc.split("### Example", 1)[1].split("```")[1]
    record = bytes.fromhex("".join(line.split("  ")[0] for line in block.strip().splitlines()))
    path = tmp_path / "example.rpct"
    write_records(path, record)
    expected = [Call(method="hp", args={"id": 7, "hp": 0.5}, t=1, dir="s2c", conn=3)]
    assert list(TraceReader(path, use_key=False)) == expected
    use_key(monkeypatch, "00" * 32)  # the example's key: its tag verifies, marshal decodes it
    reader = TraceReader(path)
    assert reader._tagged(memoryview(record)[5:-4]) and list(reader) == expected


def test_a_writer_creates_a_private_key_file_once_and_readers_never_create_one(tmp_path, monkeypatch):
    monkeypatch.delenv(K.ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(K, "_cache", {})
    path = tmp_path / "config" / "rpc_capture" / "trace.key"
    assert K.reader_key() is None and not path.exists()  # a reader alone creates nothing
    key = K.writer_key()
    assert path.read_text().strip() == key.hex() and path.stat().st_mode & 0o777 == 0o600
    assert K.reader_key() == key  # a key just created is the reader's too
    K.forget()
    assert K.writer_key() == key == K.reader_key()  # found again, not made anew
    monkeypatch.setenv(K.ENV, "ab" * 16)  # the environment comes first
    K.forget()
    assert K.reader_key() == K.writer_key() == bytes.fromhex("ab" * 16)


def test_a_trace_written_under_one_key_reads_the_same_under_another(tmp_path, monkeypatch):
    """Real data, both paths: the bundled sample's calls rewritten as version 3, read by the
    key that tagged them (marshal) and by a machine with another key (the safe decoder)."""
    sample = list(open_trace(Path(__file__).resolve().parent.parent / "samples" / "battle_dict.rpct"))
    use_key(monkeypatch, "66" * 32)
    path = tmp_path / "t.rpct"
    with TraceWriter(path) as w:
        for call in sample:
            w.write(call)
    fast = list(TraceReader(path))
    use_key(monkeypatch, "77" * 32)
    assert fast == list(TraceReader(path)) == sample


@pytest.mark.parametrize("key", ["$binary", "\\u0024binary", "\\u0024\\u0062inary"])
def test_jsonl_binary_is_bytes_however_its_key_is_escaped(tmp_path, key):
    """The reader skips the $binary hook on lines that cannot hold the key: escaped keys still can."""
    path = tmp_path / "b.jsonl"
    path.write_text('{"method": "m", "args": {"%s": {"base64": "AQI=", "subType": "00"}}}\n'
                    '{"method": "n", "args": {"binary": 1}}\n' % key, encoding="utf-8")
    assert list(JsonlReader(path)) == [Call("m", b"\x01\x02"), Call("n", {"binary": 1})]


def test_a_call_is_five_items_without_wire_and_six_with_it():
    import pickle

    plain, captured = Call("m", [1], 2, "s2c", 3), Call("m", [1], 2, "s2c", 3, b"\x93")
    assert plain == Call("m", [1], 2, "s2c", 3, None) == ("m", [1], 2, "s2c", 3) and len(captured) == 6
    method, args, t, direction, conn = plain  # a recorded call unpacks as it always did
    assert (plain.wire, captured.wire, captured.conn) == (None, b"\x93", 3)
    assert plain._replace(wire=b"x") == Call("m", [1], 2, "s2c", 3, b"x") and captured._replace(wire=None) == plain
    assert captured._replace(t=9).wire == b"\x93" and captured._asdict()["wire"] == b"\x93"
    assert pickle.loads(pickle.dumps(captured)) == captured and Call._make(tuple(captured)) == captured
    assert repr(captured) == "Call(method='m', args=[1], t=2, dir='s2c', conn=3, wire=b'\\x93')"
    with pytest.raises(ValueError, match="no field"):
        plain._replace(size=1)
