"""The binary trace format (version 2): streaming writer and reader.

The byte-level specification is ``docs/trace-format.md``; this module is its reference
implementation. In short::

    file    := magic "RPCTRACE" | version u16 | header_len u32 | header (UTF-8 JSON object)
               | record*
    record  := kind u8 | body_len u32 | body | crc32(kind, body_len, body) u32
    kinds   := "B" batch of calls | "S" stats (JSON object) | "E" end (JSON object, last record)
    batch   := a list of (method, args, t, dir, conn) tuples in marshal format 4

All integers are little-endian. Values are stored as CPython's ``marshal`` writes them
(format 4, data types only; see :mod:`rpc_capture.values`), so writing a batch is one
call into C, which is what lets the recorder keep up with a busy server.

Safe for files from anyone: nothing is evaluated and ``marshal.loads`` is never called
(a pure-Python decoder checks every length against the bytes actually present), records
are capped at ``MAX_RECORD`` bytes. A damaged file raises :class:`TraceError` naming the
file and the byte offset. A file cut off inside its last record (a crashed writer)
yields every call of the complete records and logs one warning with the bytes dropped.

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
from typing import IO, Any, Container, Dict, Iterator, List, Optional, Sequence, Union

from . import values
from .call import C2S, DIRECTIONS, S2C, Call

log = logging.getLogger("rpc_capture")

MAGIC = b"RPCTRACE"
VERSION = 2
MAX_HEADER = 1 << 20  #: largest header JSON accepted, bytes
MAX_RECORD = 16 << 20  #: largest record body accepted or written, bytes
BATCH_CALLS = 128  #: most calls per batch record: ~20 KB, ~0.1 ms in marshal. Bodies of 512
#: calls (~80 KB) fragmented glibc's heap: a recorder's RSS crept up by 20 MB under overload.

KIND_BATCH = ord("B")
KIND_STATS = ord("S")
KIND_END = ord("E")

_FILE_HEAD = struct.Struct("<8sHI")
_REC_HEAD = struct.Struct("<BI")
_CRC = struct.Struct("<I")
_LIST_HEAD = struct.Struct("<Bi")  #: marshal's list code and item count, the start of a batch body
_DIRS = {C2S: C2S, S2C: S2C}  #: valid directions, mapped to the shared constants


class TraceError(Exception):
    """A trace file that cannot be read: the message names the file and byte offset."""


# ---------------------------------------------------------------------------- calls


def encode_batch(calls: Sequence[tuple]) -> bytes:
    """The batch record(s) for ``(method, args, t, dir, conn)`` tuples of exact types.

    The fast path of every writer: a type check per call and one ``marshal`` call. Raises
    ValueError/TypeError if any call can't be written so (then :func:`recordable` tells
    which and why). A batch over ``MAX_RECORD`` bytes is split in two, recursively.
    """
    _check_types(calls)
    body = values.dump(calls if type(calls) is list else list(calls))
    if len(body) <= MAX_RECORD:
        return _frame(KIND_BATCH, body)
    if len(calls) == 1:
        raise ValueError(f"call of {len(body)} bytes exceeds the {MAX_RECORD}-byte record limit")
    half = len(calls) // 2
    return encode_batch(calls[:half]) + encode_batch(calls[half:])


def _check_types(calls: Sequence[tuple]) -> None:
    """ValueError/TypeError unless every call is a 5-tuple with exact method/t/dir/conn types."""
    for method, _, t, direction, conn in calls:
        if type(method) is not str or type(t) is not int or direction not in _DIRS or (type(conn) is not int and type(conn) is not str):
            raise ValueError("a call needs checking")


def recordable(call: Any) -> tuple:
    """``call`` (a :class:`Call` or ``(method, args, t, dir, conn)`` tuple) as a tuple that
    :func:`encode_batch` takes: values made exact types (see :func:`values.plain`).

    Raises TypeError/ValueError naming what can't be recorded.
    """
    method, args, t, direction, conn = call
    if not isinstance(method, str):
        raise TypeError(f"method is {type(method).__name__}, not str")
    if not isinstance(t, int) or isinstance(t, bool):
        raise TypeError(f"call time is {type(t).__name__}, not an int count of nanoseconds")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r} is neither {C2S!r} nor {S2C!r}")
    if isinstance(conn, bool) or not isinstance(conn, (int, str)):
        raise TypeError(f"connection id is {type(conn).__name__}; only int and str are recorded")
    item = (values.plain(method), values.plain(args), values.plain(t), _DIRS[direction], values.plain(conn))
    size = len(values.dump([item]))
    if size > MAX_RECORD:
        raise ValueError(f"call of {size} bytes exceeds the {MAX_RECORD}-byte record limit")
    return item


def _frame(kind: int, body: Union[bytes, bytearray]) -> bytes:
    if len(body) > MAX_RECORD:
        raise ValueError(f"record of {len(body)} bytes exceeds the {MAX_RECORD}-byte limit")
    head = _REC_HEAD.pack(kind, len(body))
    return head + body + _CRC.pack(zlib.crc32(body, zlib.crc32(head)))


# ---------------------------------------------------------------------------- writer


class TraceWriter:
    """Append calls to a new trace file, streaming: memory does not grow with the trace.

    ``metadata`` is free JSON (game, build, capture start...) stored in the header.
    ``compresslevel`` (1-9) gzips the whole file. :meth:`write` collects calls into
    batch records of ``BATCH_CALLS``; :meth:`flush` and :meth:`close` write the part
    batch. ``close()`` writes the end record (with ``end_info``); a file without it was
    not closed cleanly.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike],
        metadata: Optional[Dict[str, Any]] = None,
        compresslevel: Optional[int] = None,
    ) -> None:
        self.path = os.fspath(path)
        self.calls = 0  #: calls written so far (some maybe still in the part batch)
        self._pending: List[tuple] = []
        raw = open(self.path, "wb")
        self._file: IO[bytes] = gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=compresslevel, mtime=0) if compresslevel else raw
        self._raw = raw
        header = json.dumps(metadata or {}, ensure_ascii=False, default=str).encode("utf-8")
        if len(header) > MAX_HEADER:
            raise ValueError(f"trace metadata is {len(header)} bytes, more than {MAX_HEADER}")
        self._file.write(_FILE_HEAD.pack(MAGIC, VERSION, len(header)) + header)

    def write(self, call: Any) -> None:
        """Append one call (a :class:`Call` or ``(method, args, t, dir, conn)`` tuple).

        Raises TypeError/ValueError, and writes nothing, if it can't be recorded.
        """
        item = tuple(call)
        try:  # the fast check; the slow one converts odd types, or explains a failure
            _check_types((item,))
            fits = len(values.dump([item])) <= MAX_RECORD
        except (TypeError, ValueError):
            fits = False
        if not fits:  # a call too big for any record must fail here, not later with the whole part batch
            item = recordable(item)
        self._pending.append(item)
        self.calls += 1
        if len(self._pending) >= BATCH_CALLS:
            self._write_pending()

    def write_records(self, data: bytes, calls: int) -> None:
        """Append batch records made by :func:`encode_batch` holding ``calls`` calls."""
        self._write_pending()
        self._file.write(data)
        self.calls += calls

    def write_stats(self, stats: Dict[str, Any]) -> None:
        """Append a stats record (e.g. the recorder's drop counters so far)."""
        self._write_pending()
        self._file.write(_frame(KIND_STATS, json.dumps(stats).encode("utf-8")))

    def _write_pending(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, []
            self._file.write(encode_batch(pending))

    def flush(self) -> None:
        """Push everything written so far to the operating system (survives a process kill)."""
        self._write_pending()
        self._file.flush()
        if self._file is not self._raw:
            self._raw.flush()

    def close(self, end_info: Optional[Dict[str, Any]] = None) -> None:
        """Write the end record and close the file. Safe to call twice."""
        if self._raw.closed:
            return
        self._write_pending()
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

        Batches holding no wanted call are framed and checksummed but not decoded, which
        makes fetching a sample from a large trace several times faster.
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
                if kind == KIND_BATCH:
                    count = self._batch_size(body, offset)
                    if wanted is None:
                        yield from self._batch(body, offset)
                    elif any(i in wanted for i in range(index, index + count)):
                        yield from (c for i, c in enumerate(self._batch(body, offset), index) if i in wanted)
                    index += count
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

    def _batch_size(self, body: bytes, offset: int) -> int:
        """The number of calls in a batch record, read from its first bytes without decoding."""
        try:
            code, n = _LIST_HEAD.unpack_from(body, 0)
        except struct.error:
            code, n = -1, 0
        if code & 0x7F != values.LIST or n < 0:
            raise self._error(offset, "malformed batch record (not a list)")
        return n

    def _batch(self, body: bytes, offset: int) -> List[Call]:
        try:
            items, end = values.load(body)
            if end != len(body):
                raise ValueError(f"{len(body) - end} stray bytes after the calls")
            return [_call(item) for item in items]
        except ValueError as e:
            raise self._error(offset, f"malformed batch record ({e})") from None

    def _json(self, body: bytes, offset: int) -> Dict[str, Any]:
        try:
            info = json.loads(body.decode("utf-8"))
        except ValueError as e:
            raise self._error(offset, f"malformed info record ({e})") from None
        if not isinstance(info, dict):
            raise self._error(offset, "info record is not a JSON object")
        return info


def _call(item: Any) -> Call:
    """One call tuple of a batch, checked: ValueError unless it is a well-formed call."""
    if type(item) is not tuple or len(item) != 5:
        raise ValueError("a call is not a 5-tuple")
    method, args, t, direction, conn = item
    if type(method) is not str:
        raise ValueError("method is not a str")
    if type(t) is not int:
        raise ValueError("call time is not an int")
    if (type(conn) is not int and type(conn) is not str):
        raise ValueError("connection id is not an int or str")
    direction = _DIRS.get(direction) if type(direction) is str else None
    if direction is None:
        raise ValueError("direction is neither 'c2s' nor 's2c'")
    return Call(method, args, t, direction, conn)


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

