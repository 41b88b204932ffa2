"""The binary trace format (version 1): streaming writer and reader.

The byte-level specification is ``docs/trace-format.md``; this module is its reference
implementation. In short::

    file    := magic "RPCTRACE" | version u16 | header_len u32 | header (UTF-8 JSON object)
               | record*
    record  := kind u8 | body_len u32 | body | crc32(kind, body_len, body) u32
    kinds   := "C" call | "S" stats (JSON object) | "E" end (JSON object, last record)
    call    := t i64 | dir u8 (0 c2s, 1 s2c) | conn value | method value | args value

All integers are little-endian. ``value`` is a tagged, self-delimiting encoding of None,
bool, int (any size), float, str, bytes, list, tuple and dict (str or int keys).

Safe for files from anyone: nothing is evaluated, every length is checked against the
bytes actually present before use, records are capped at ``MAX_RECORD`` bytes and values
at ``MAX_DEPTH`` nesting. A damaged file raises :class:`TraceError` naming the file and
the byte offset. A file cut off inside its last record (a crashed writer) yields every
complete call and logs one warning with the number of bytes dropped.

Files may be gzip-compressed as a whole; the reader detects that by magic number, and
offsets in errors then count bytes of the uncompressed stream.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import struct
import zlib
from typing import Container, IO, Any, Dict, Iterator, Optional, Union

from .call import C2S, S2C, Call

log = logging.getLogger("rpc_capture")

MAGIC = b"RPCTRACE"
VERSION = 1
MAX_HEADER = 1 << 20  #: largest header JSON accepted, bytes
MAX_RECORD = 16 << 20  #: largest record body accepted or written, bytes
MAX_DEPTH = 100  #: deepest nesting of lists/dicts accepted or written

KIND_CALL = ord("C")
KIND_STATS = ord("S")
KIND_END = ord("E")

_FILE_HEAD = struct.Struct("<8sHI")
_REC_HEAD = struct.Struct("<BI")
_CRC = struct.Struct("<I")
_CALL_HEAD = struct.Struct("<qB")
_CALL_REC_HEAD = struct.Struct("<BIqB")  #: record head (body_len patched in later) + call head
_DIR_CODE = {C2S: 0, S2C: 1}
_DIR_NAME = (C2S, S2C)

# Value tags: one ASCII byte each, so a hex dump stays readable.
T_NONE, T_FALSE, T_TRUE = b"N"[0], b"F"[0], b"T"[0]
T_INT, T_BIGINT, T_FLOAT = b"i"[0], b"n"[0], b"d"[0]
T_STR, T_BYTES = b"s"[0], b"b"[0]
T_LIST, T_TUPLE, T_DICT = b"l"[0], b"t"[0], b"m"[0]

_TAG_LEN = struct.Struct("<BI")
_TAG_I64 = struct.Struct("<Bq")
_TAG_F64 = struct.Struct("<Bd")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_F64 = struct.Struct("<d")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class TraceError(Exception):
    """A trace file that cannot be read: the message names the file and byte offset."""


# ---------------------------------------------------------------------------- values


def encode_value(value: Any) -> bytes:
    """Encode one value in the trace's tagged value format."""
    out = bytearray()
    _encode_into(value, out, 0)
    return bytes(out)


# Strings repeat a lot in RPC traffic (method names, dict keys, enum-like values), so the
# encoded form of short ones is cached. Bounded: at most _STR_CACHE_MAX entries of up to
# _STR_CACHE_CHARS characters; the cache is emptied when full. Dict operations are atomic
# under the GIL, so encoding from several threads is safe.
_STR_CACHE: Dict[str, bytes] = {}
_STR_CACHE_MAX = 4096
_STR_CACHE_CHARS = 64


def _str_value(v: str) -> bytes:
    """The tagged encoding of an exact ``str`` (cached when short)."""
    b = v.encode("utf-8", "surrogatepass")
    b = _TAG_LEN.pack(T_STR, len(b)) + b
    if len(v) <= _STR_CACHE_CHARS:
        if len(_STR_CACHE) >= _STR_CACHE_MAX:
            _STR_CACHE.clear()
        _STR_CACHE[v] = b
    return b


def _encode_into(v: Any, out: bytearray, depth: int) -> None:
    t = type(v)
    if t is str:
        out += _STR_CACHE.get(v) or _str_value(v)
    elif t is int:
        if _INT64_MIN <= v <= _INT64_MAX:
            out += _TAG_I64.pack(T_INT, v)
        else:
            b = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
            out += _TAG_LEN.pack(T_BIGINT, len(b))
            out += b
    elif t is float:
        out += _TAG_F64.pack(T_FLOAT, v)
    elif t is dict:
        if depth >= MAX_DEPTH:
            raise ValueError(f"value nested deeper than {MAX_DEPTH} levels")
        out += _TAG_LEN.pack(T_DICT, len(v))
        _encode_dict_items(v, out, depth + 1)
    elif t is list or t is tuple:
        if depth >= MAX_DEPTH:
            raise ValueError(f"value nested deeper than {MAX_DEPTH} levels")
        out += _TAG_LEN.pack(T_LIST if t is list else T_TUPLE, len(v))
        _encode_items(v, out, depth + 1)
    elif v is None:
        out.append(T_NONE)
    elif t is bool:
        out.append(T_TRUE if v else T_FALSE)
    elif t is bytes or t is bytearray or t is memoryview:
        b = bytes(v)
        out += _TAG_LEN.pack(T_BYTES, len(b))
        out += b
    elif isinstance(v, bool):
        _encode_into(bool(v), out, depth)
    elif isinstance(v, int):  # IntEnum and other int subclasses record as their value
        _encode_into(int(v), out, depth)
    elif isinstance(v, float):
        _encode_into(float(v), out, depth)
    elif isinstance(v, str):
        _encode_into(str(v), out, depth)
    else:
        raise TypeError(f"cannot record a value of type {t.__name__}")


# The two container loops below encode the common leaves (float, int64, str) inline rather
# than through a call of _encode_into per item: that is most of the encoder's speed. Their
# output is exactly _encode_into's; ``depth`` is the depth of the items.


def _encode_items(items: Any, out: bytearray, depth: int) -> None:
    cache, pack_i64, pack_f64, int_error = _STR_CACHE, _TAG_I64.pack, _TAG_F64.pack, struct.error
    for item in items:
        t = type(item)
        if t is float:
            out += pack_f64(T_FLOAT, item)
        elif t is int:
            try:
                out += pack_i64(T_INT, item)
            except int_error:  # beyond 64 bits
                _encode_into(item, out, depth)
        elif t is str:
            out += cache.get(item) or _str_value(item)
        elif item is None:
            out.append(T_NONE)
        elif t is bool:
            out.append(T_TRUE if item else T_FALSE)
        else:
            _encode_into(item, out, depth)


def _encode_dict_items(d: dict, out: bytearray, depth: int) -> None:
    cache, pack_i64, pack_f64, int_error = _STR_CACHE, _TAG_I64.pack, _TAG_F64.pack, struct.error
    for k, item in d.items():
        t = type(k)
        if t is str:
            out += cache.get(k) or _str_value(k)
        elif t is int:
            _encode_into(k, out, depth)
        else:
            raise TypeError(f"dict key {k!r} is {t.__name__}; only str and int keys are recorded")
        t = type(item)
        if t is float:
            out += pack_f64(T_FLOAT, item)
        elif t is int:
            try:
                out += pack_i64(T_INT, item)
            except int_error:
                _encode_into(item, out, depth)
        elif t is str:
            out += cache.get(item) or _str_value(item)
        elif item is None:
            out.append(T_NONE)
        elif t is bool:
            out.append(T_TRUE if item else T_FALSE)
        elif t is list and depth < MAX_DEPTH:
            out += _TAG_LEN.pack(T_LIST, len(item))
            _encode_items(item, out, depth + 1)
        else:
            _encode_into(item, out, depth)


def decode_value(buf: bytes, pos: int = 0, depth: int = 0) -> tuple:
    """Decode one value from ``buf`` at ``pos``; return ``(value, next_pos)``.

    Raises ValueError on anything malformed; never allocates more than ``buf`` holds.
    """
    tag = buf[pos]
    pos += 1
    if tag == T_INT:
        return _I64.unpack_from(buf, pos)[0], pos + 8
    if tag == T_FLOAT:
        return _F64.unpack_from(buf, pos)[0], pos + 8
    if tag == T_STR:
        n = _U32.unpack_from(buf, pos)[0]
        pos += 4
        end = pos + n
        if end > len(buf):
            raise ValueError("string runs past the end of the record")
        return buf[pos:end].decode("utf-8", "surrogatepass"), end
    if tag == T_DICT or tag == T_LIST or tag == T_TUPLE:
        n = _U32.unpack_from(buf, pos)[0]
        pos += 4
        if n > len(buf) - pos:
            raise ValueError(f"container claims {n} items but the record has {len(buf) - pos} bytes left")
        if depth >= MAX_DEPTH:
            raise ValueError(f"value nested deeper than {MAX_DEPTH} levels")
        depth += 1
        if tag == T_DICT:
            d = {}
            for _ in range(n):
                k, pos = decode_value(buf, pos, depth)
                if type(k) is not str and type(k) is not int:
                    raise ValueError(f"dict key of type {type(k).__name__}")
                d[k], pos = decode_value(buf, pos, depth)
            return d, pos
        items = []
        append = items.append
        for _ in range(n):
            item, pos = decode_value(buf, pos, depth)
            append(item)
        return (items if tag == T_LIST else tuple(items)), pos
    if tag == T_NONE:
        return None, pos
    if tag == T_TRUE:
        return True, pos
    if tag == T_FALSE:
        return False, pos
    if tag == T_BYTES or tag == T_BIGINT:
        n = _U32.unpack_from(buf, pos)[0]
        pos += 4
        end = pos + n
        if end > len(buf):
            raise ValueError("bytes run past the end of the record")
        raw = bytes(buf[pos:end])
        return (raw if tag == T_BYTES else int.from_bytes(raw, "little", signed=True)), end
    raise ValueError(f"unknown value tag 0x{tag:02x}")


# ---------------------------------------------------------------------------- writer


class TraceWriter:
    """Append calls to a new trace file, streaming: memory does not grow with the trace.

    ``metadata`` is free JSON (game, build, capture start...) stored in the header.
    ``compresslevel`` (1-9) gzips the whole file. ``close()`` writes the end record
    (with ``end_info``) and flushes; a file without it was not closed cleanly.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike],
        metadata: Optional[Dict[str, Any]] = None,
        compresslevel: Optional[int] = None,
    ) -> None:
        self.path = os.fspath(path)
        self.calls = 0
        raw = open(self.path, "wb")
        self._file: IO[bytes] = gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=compresslevel, mtime=0) if compresslevel else raw
        self._raw = raw
        header = json.dumps(metadata or {}, ensure_ascii=False, default=str).encode("utf-8")
        if len(header) > MAX_HEADER:
            raise ValueError(f"trace metadata is {len(header)} bytes, more than {MAX_HEADER}")
        self._file.write(_FILE_HEAD.pack(MAGIC, VERSION, len(header)) + header)

    @staticmethod
    def encode_call(call: Call) -> bytes:
        """Return the complete record for ``call`` (raises TypeError/ValueError if it can't be recorded)."""
        out = bytearray()
        encode_call_into(out, call)
        return bytes(out)

    def write(self, call: Call) -> None:
        """Append one call."""
        self._file.write(self.encode_call(call))
        self.calls += 1

    def write_records(self, data: bytes, calls: int) -> None:
        """Append pre-framed records (from :meth:`encode_call`) holding ``calls`` calls."""
        self._file.write(data)
        self.calls += calls

    def write_stats(self, stats: Dict[str, Any]) -> None:
        """Append a stats record (e.g. the recorder's drop counters so far)."""
        self._file.write(_frame(KIND_STATS, json.dumps(stats).encode("utf-8")))

    def flush(self) -> None:
        """Push everything written so far to the operating system (survives a process kill)."""
        self._file.flush()
        if self._file is not self._raw:
            self._raw.flush()

    def close(self, end_info: Optional[Dict[str, Any]] = None) -> None:
        """Write the end record and close the file. Safe to call twice."""
        if self._raw.closed:
            return
        info = {"calls": self.calls, **(end_info or {})}
        self._file.write(_frame(KIND_END, json.dumps(info).encode("utf-8")))
        self._file.close()
        self._raw.close()

    def abandon(self) -> None:
        """Close the file as it is, without an end record, writing nothing more; never raises.

        For a writer whose last write failed (disk full...): a record cut by the failure
        stays the file's cut-off tail, which readers skip with a warning, rather than
        being followed by more records, which would read as corruption.
        """
        if not self._raw.closed:
            try:
                self._raw.close()
            except (OSError, ValueError):
                pass

    def __enter__(self) -> "TraceWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_pack_call_rec_head = _CALL_REC_HEAD.pack
_pack_u32_into = _U32.pack_into
_pack_crc = _CRC.pack


def encode_call_into(out: bytearray, call: Any) -> None:
    """Append the complete record of one call to ``out``.

    ``call`` is a :class:`Call` or any ``(method, args, t, dir, conn)`` tuple. Raises
    TypeError/ValueError if it cannot be recorded, and then leaves ``out`` as it was, so
    a batch of records can be built in one buffer with the bad calls skipped.
    """
    method, args, t, direction, conn = call
    start = len(out)
    try:
        try:
            out += _pack_call_rec_head(KIND_CALL, 0, t, _DIR_CODE[direction])
        except KeyError:
            raise ValueError(f"direction {direction!r} is neither {C2S!r} nor {S2C!r}") from None
        except struct.error:
            raise ValueError(f"call time {t!r} is not an int64 count of nanoseconds") from None
        if type(conn) is int and _INT64_MIN <= conn <= _INT64_MAX:
            out += _TAG_I64.pack(T_INT, conn)
        elif type(conn) is str or (isinstance(conn, (int, str)) and not isinstance(conn, bool)):
            _encode_into(conn, out, 0)
        else:
            raise TypeError(f"connection id is {type(conn).__name__}; only int and str are recorded")
        if type(method) is str:
            out += _STR_CACHE.get(method) or _str_value(method)
        elif isinstance(method, str):
            _encode_into(method, out, 0)
        else:
            raise TypeError(f"method is {type(method).__name__}, not str")
        if type(args) is dict:
            out += _TAG_LEN.pack(T_DICT, len(args))
            _encode_dict_items(args, out, 1)
        else:
            _encode_into(args, out, 0)
        body_len = len(out) - start - _REC_HEAD.size
        if body_len > MAX_RECORD:
            raise ValueError(f"record of {body_len} bytes exceeds the {MAX_RECORD}-byte limit")
        _pack_u32_into(out, start + 1, body_len)
        out += _pack_crc(zlib.crc32(out[start:]))
    except BaseException:
        del out[start:]
        raise


def _frame(kind: int, body: Union[bytes, bytearray]) -> bytes:
    if len(body) > MAX_RECORD:
        raise ValueError(f"record of {len(body)} bytes exceeds the {MAX_RECORD}-byte limit")
    head = _REC_HEAD.pack(kind, len(body))
    return head + body + _CRC.pack(zlib.crc32(body, zlib.crc32(head)))


# ---------------------------------------------------------------------------- reader


class TraceReader:
    """Stream the calls of a binary trace file: ``for call in TraceReader(path)``.

    After the header is read, ``metadata`` and ``version`` are set. During and after
    iteration ``stats`` holds the latest stats record, ``end`` the end record (None if
    the writer never closed the file) and ``truncated_bytes`` the size of an incomplete
    final record, if any.
    """

    def __init__(self, path: Union[str, os.PathLike]) -> None:
        self.path = os.fspath(path)
        self.stats: Optional[Dict[str, Any]] = None
        self.end: Optional[Dict[str, Any]] = None
        self.truncated_bytes = 0
        self._raw, self._file = _open_maybe_gzip(self.path)
        try:
            self.version, self.metadata = self._read_header()
        except BaseException:
            self.close()
            raise
        self._offset = _FILE_HEAD.size + self._header_len

    def _error(self, offset: int, what: str) -> TraceError:
        return TraceError(f"{self.path}: byte offset {offset}: {what}")

    def _read_header(self) -> tuple:
        head = self._read(_FILE_HEAD.size, 0)
        if len(head) < _FILE_HEAD.size or head[:8] != MAGIC:
            raise self._error(0, "not an rpcbench trace (no RPCTRACE magic)")
        _, version, n = _FILE_HEAD.unpack(head)
        if version != VERSION:
            raise self._error(8, f"trace format version {version}; this reader knows version {VERSION}")
        if n > MAX_HEADER:
            raise self._error(10, f"header length {n} exceeds the {MAX_HEADER}-byte limit")
        raw = self._read(n, _FILE_HEAD.size)
        if len(raw) < n:
            raise self._error(_FILE_HEAD.size, f"header cut off: {len(raw)} of {n} bytes")
        try:
            meta = json.loads(raw.decode("utf-8"))
        except ValueError as e:
            raise self._error(_FILE_HEAD.size, f"header is not UTF-8 JSON ({e})") from None
        if not isinstance(meta, dict):
            raise self._error(_FILE_HEAD.size, "header JSON is not an object")
        self._header_len = n
        return version, meta

    def _read(self, n: int, offset: int) -> bytes:
        try:
            return self._file.read(n)
        except EOFError:  # a gzip stream cut off (crashed writer): read as end of data
            return b""
        except (zlib.error, gzip.BadGzipFile) as e:
            raise self._error(offset, f"compressed stream damaged ({e})") from None

    def __iter__(self) -> Iterator[Call]:
        return self.calls()

    def calls(self, wanted: Optional[Container[int]] = None) -> Iterator[Call]:
        """The calls in file order; with ``wanted``, only the calls at those 0-based positions.

        Records not wanted are framed and checksummed but their values not decoded,
        which makes fetching a sample from a large trace several times faster.
        """
        read, offset, head_size = self._read, self._offset, _REC_HEAD.size
        unpack_head, crc32 = _REC_HEAD.unpack, zlib.crc32
        index = 0
        try:
            while True:
                head = read(head_size, offset)
                if len(head) < head_size:
                    if head:
                        self._truncated(offset, len(head))
                    return
                kind, n = unpack_head(head)
                if n > MAX_RECORD:
                    raise self._error(offset, f"record length {n} exceeds the {MAX_RECORD}-byte limit")
                rest = read(n + 4, offset)
                if len(rest) < n + 4:
                    self._truncated(offset, head_size + len(rest))
                    return
                body = rest[:n]
                if crc32(body, crc32(head)) != _CRC.unpack_from(rest, n)[0]:
                    raise self._error(offset, "record checksum mismatch (file is corrupt)")
                if kind == KIND_CALL:
                    if wanted is None or index in wanted:
                        yield self._call(body, offset)
                    index += 1
                elif kind == KIND_STATS or kind == KIND_END:
                    info = self._json(body, offset)
                    if kind == KIND_STATS:
                        self.stats = info
                    else:
                        self.end = info
                # other kinds: written by a newer version, skipped (the checksum vouched for them)
                offset += head_size + n + 4
        finally:
            self._offset = offset
            self.close()

    def close(self) -> None:
        """Release the file (iteration does this by itself when it ends)."""
        self._file.close()
        self._raw.close()

    def _truncated(self, offset: int, dropped: int) -> None:
        self.truncated_bytes = dropped
        log.warning(
            "%s: file ends inside a record at byte offset %d: dropped %d bytes of an incomplete "
            "final record (writer crashed or file cut short); all complete calls were read",
            self.path, offset, dropped,
        )

    def _call(self, body: bytes, offset: int) -> Call:
        try:
            t, d = _CALL_HEAD.unpack_from(body, 0)
            conn, pos = decode_value(body, _CALL_HEAD.size)
            method, pos = decode_value(body, pos)
            args, pos = decode_value(body, pos)
            if pos != len(body):
                raise ValueError(f"{len(body) - pos} stray bytes after the args")
            if type(method) is not str:
                raise ValueError("method is not a string")
            if type(conn) is not int and type(conn) is not str:
                raise ValueError("connection id is not an int or str")
            return Call(method, args, t, _DIR_NAME[d], conn)
        except (ValueError, IndexError, struct.error, UnicodeDecodeError) as e:
            raise self._error(offset, f"malformed call record ({e})") from None

    def _json(self, body: bytes, offset: int) -> Dict[str, Any]:
        try:
            info = json.loads(body.decode("utf-8"))
        except ValueError as e:
            raise self._error(offset, f"malformed info record ({e})") from None
        if not isinstance(info, dict):
            raise self._error(offset, "info record is not a JSON object")
        return info


def _open_maybe_gzip(path: str) -> tuple:
    """Return ``(raw_file, stream)``: the stream decompresses when the file is gzip."""
    try:
        raw = open(path, "rb")
    except OSError as e:
        raise TraceError(f"{path}: cannot open ({e.strerror or e})") from None
    gzipped = raw.read(2) == b"\x1f\x8b"
    raw.seek(0)
    if gzipped:
        return raw, io.BufferedReader(_GzipTail(gzip.GzipFile(fileobj=raw, mode="rb")), 1 << 16)
    return raw, raw


class _GzipTail(io.RawIOBase):
    """A gzip stream as a raw stream whose cut-off end (a killed writer leaves no gzip
    trailer) reads as the end of data, with nothing read before the cut lost.

    A buffered read straight over GzipFile raises EOFError at the cut and discards what it
    had already decompressed in that call (up to a buffer's worth of calls); ``read1``
    raises it only when no data is left, so here it simply means end of data.
    """

    def __init__(self, gz: gzip.GzipFile) -> None:
        self._gz = gz

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        try:
            data = self._gz.read1(len(b))
        except EOFError:
            return 0
        n = len(data)
        b[:n] = data
        return n

    def close(self) -> None:
        self._gz.close()
        super().close()

