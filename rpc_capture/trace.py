"""The binary trace format (version 3, reads 2): streaming writer and reader.

The byte-level specification is ``docs/trace-format.md``; this module is its reference
implementation. In short::

    file    := magic "RPCTRACE" | version u16 | header_len u32 | header (UTF-8 JSON object)
               | record*
    record  := kind u8 | body_len u32 | body | crc32(kind, body_len, body) u32
    kinds   := "B" batch of calls | "S" stats (JSON object) | "E" end (JSON object, last record)
    batch   := tag (16 bytes, version 3) | a list of calls in marshal format 4
    call    := (method, args, t, dir, conn) | (method, args, t, dir, conn, wire): wire only when set

All integers are little-endian. Values are stored as CPython's ``marshal`` writes them
(format 4, data types only; see :mod:`rpc_capture.values`), so writing a batch is one
call into C, which is what lets the recorder keep up with a busy server.

Safe for files from anyone: nothing is evaluated, and ``marshal.loads`` only sees the
bytes of a batch whose tag is an HMAC under the reader's own key (:mod:`rpc_capture.keys`),
which only a writer holding that key, writing checked data, makes; every other batch is
read by a pure-Python decoder that checks every length against the bytes actually present.
Records are capped at ``MAX_RECORD`` bytes. A damaged file raises :class:`TraceError` naming the
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
import marshal
import os
import re
import struct
import zlib
from itertools import chain, repeat
from typing import IO, Any, Container, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from . import keys, values
from .call import C2S, DIRECTIONS, S2C, Call

log = logging.getLogger("rpc_capture")

MAGIC = b"RPCTRACE"
VERSION = 3  #: written; 3 added the tag of each batch record (see :mod:`rpc_capture.keys`)
READABLE_VERSIONS = (2, 3)
MAX_HEADER = 1 << 20  #: largest header JSON accepted, bytes
MAX_RECORD = 16 << 20  #: largest record body accepted or written, bytes
BATCH_CALLS = 128  #: most calls per batch record: ~20 KB, ~0.1 ms in marshal. Bodies of 512
#: calls (~80 KB) fragmented glibc's heap: a recorder's RSS crept up by 20 MB under overload.

MAX_GZIP_RATIO = 32  #: most a gzip trace may expand (x its compressed size, plus MAX_RECORD); real ones: ~4x

KIND_BATCH = ord("B")
KIND_STATS = ord("S")
KIND_END = ord("E")

_FILE_HEAD = struct.Struct("<8sHI")
_REC_HEAD = struct.Struct("<BI")
_CRC = struct.Struct("<I")
_LIST_HEAD = struct.Struct("<Bi")  #: marshal's list code and item count, the start of a batch body
_DIRS = {C2S: C2S, S2C: S2C}  #: valid directions, mapped to the shared constants
_new_tuple = tuple.__new__  #: builds a Call from a call tuple (5 or 6 items) in C: ``_new_tuple(Call, item)``


class TraceError(Exception):
    """A trace file that cannot be read: the message names the file and byte offset."""


# ---------------------------------------------------------------------------- calls


def encode_batch(calls: Sequence[tuple]) -> bytes:
    """The batch record(s) for ``(method, args, t, dir, conn)`` tuples of exact types (or
    6-tuples ending with ``wire``, bytes).

    The fast path of every writer: a type check per call, two ``marshal`` calls (one
    writes, one proves the reader will take it: no cycle, expansion bounded) and the
    record's tag under the writer's key (:mod:`rpc_capture.keys`). Raises
    ValueError/TypeError if any call can't be written so (then :func:`recordable` tells
    which and why). A batch over ``MAX_RECORD`` bytes is split in two, recursively.
    """
    _check_types(calls)
    batch = calls if type(calls) is list else list(calls)
    body = values.dump(batch)
    expanded = values.expanded_size(batch)  # what the reader will refuse must fail here, not there
    if len(body) + keys.TAG_SIZE <= MAX_RECORD and expanded <= values.MAX_EXPANDED:
        return _frame(KIND_BATCH, keys.tag(body, keys.writer_key()) + body)
    if len(calls) == 1:
        raise ValueError(f"call of {len(body)} bytes ({expanded} with back-references written out) exceeds the "
                         f"{MAX_RECORD}-byte record limit or the {values.MAX_EXPANDED}-byte expansion limit")
    half = len(calls) // 2
    return encode_batch(calls[:half]) + encode_batch(calls[half:])


def _check_types(calls: Sequence[tuple]) -> None:
    """ValueError/TypeError unless every call is a 5-tuple with exact method/t/dir/conn types
    or a 6-tuple of those and ``wire`` bytes."""
    for call in calls:
        if len(call) == 5:
            method, _, t, direction, conn = call
        else:
            method, _, t, direction, conn, wire = call
            if type(wire) is not bytes:
                raise ValueError("a call needs checking")
        if (type(method) is not str or type(t) is not int or direction not in _DIRS
                or (type(conn) is not int and type(conn) is not str)):
            raise ValueError("a call needs checking")


def recordable(call: Any) -> tuple:
    """``call`` (a :class:`Call` or ``(method, args, t, dir, conn[, wire])`` tuple) as a tuple that
    :func:`encode_batch` takes: values made exact types (see :func:`values.plain`), a None
    ``wire`` left out (a 5-tuple).

    Raises TypeError/ValueError naming what can't be recorded.
    """
    if len(call) not in (5, 6):
        raise ValueError(f"a call has {len(call)} items, not (method, args, t, dir, conn[, wire])")
    method, args, t, direction, conn = call[:5]
    wire = call[5] if len(call) == 6 else None
    if not isinstance(method, str):
        raise TypeError(f"method is {type(method).__name__}, not str")
    if not isinstance(t, int) or isinstance(t, bool):
        raise TypeError(f"call time is {type(t).__name__}, not an int count of nanoseconds")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r} is neither {C2S!r} nor {S2C!r}")
    if isinstance(conn, bool) or not isinstance(conn, (int, str)):
        raise TypeError(f"connection id is {type(conn).__name__}; only int and str are recorded")
    if wire is not None and not isinstance(wire, (bytes, bytearray, memoryview)):
        raise TypeError(f"wire is {type(wire).__name__}, not bytes")
    stored_wire = () if wire is None else (bytes(wire),)
    item = (method, args, t, _DIRS[direction], conn) + stored_wire
    try:  # exact types already (at any depth marshal writes): nothing to convert
        encode_batch([item])
        return item
    except (TypeError, ValueError):
        pass
    item = (values.plain(method), values.plain(args), values.plain(t), _DIRS[direction], values.plain(conn),
            *stored_wire)
    encode_batch([item])
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
        self._file: io.BufferedIOBase = raw  # a GzipFile over raw when compressing
        if compresslevel:
            self._file = gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=compresslevel, mtime=0)
        self._raw = raw
        header = json.dumps(metadata or {}, ensure_ascii=False, default=str).encode("utf-8")
        if len(header) > MAX_HEADER:
            raise ValueError(f"trace metadata is {len(header)} bytes, more than {MAX_HEADER}")
        self._file.write(_FILE_HEAD.pack(MAGIC, VERSION, len(header)) + header)

    def write(self, call: Any) -> None:
        """Append one call (a :class:`Call` or ``(method, args, t, dir, conn[, wire])`` tuple).

        Raises TypeError/ValueError, and writes nothing, if it can't be recorded.
        """
        item = tuple(call)
        if len(item) == 6 and item[5] is None:  # a Call without wire is stored as a 5-tuple
            item = item[:5]
        try:  # the fast check; the slow one converts odd types, or explains a failure
            encode_batch([item])
        except (TypeError, ValueError):  # a call no record can hold must fail here, not later with the part batch
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

    A damaged record (bad checksum, a length that runs past the end while complete
    records follow, a malformed batch) raises :class:`TraceError` naming the file and the
    offset. With ``salvage=True`` it is skipped instead: the reader looks for the next
    record whose checksum holds, logs a warning, and adds the stretch to ``skipped``;
    :meth:`dropped_calls` then says how many calls were lost, when the end record tells.

    A batch record whose tag verifies under the reader's key (:mod:`rpc_capture.keys`) is
    decoded by C ``marshal`` (about 10x faster); any other by the pure-Python decoder, safe
    on bytes from anyone. ``use_key=False`` decodes every record the safe way.
    """

    def __init__(self, path: Union[str, os.PathLike], salvage: bool = False, use_key: bool = True) -> None:
        self.path = os.fspath(path)
        self.salvage = salvage
        self.stats: Optional[Dict[str, Any]] = None
        self.end: Optional[Dict[str, Any]] = None
        self.truncated_bytes = 0
        self.skipped: List[Tuple[int, int]] = []  #: (byte offset, bytes) of each damaged stretch skipped
        self.calls_read = 0  #: calls in the batch records read so far, decoded or not
        self._back = b""  # bytes read ahead while looking for a record, to be read again
        self._raw, self._file = _open_maybe_gzip(self.path)
        try:
            self.version, self.metadata = self._read_header()
        except BaseException:
            self.close()
            raise
        self._offset = _FILE_HEAD.size + self._header_len
        self._tag_size = keys.TAG_SIZE if self.version >= 3 else 0  #: bytes before a batch's marshal data
        self._key = keys.reader_key() if self._tag_size and use_key else None

    def _error(self, offset: int, what: str) -> TraceError:
        hint = "" if self.salvage else " (--salvage skips damaged records)"
        return TraceError(f"{self.path}: byte offset {offset}: {what}{hint}")

    def _read_header(self) -> tuple:
        head = self._read(_FILE_HEAD.size, 0)
        if len(head) < _FILE_HEAD.size or head[:8] != MAGIC:
            raise TraceError(f"{self.path}: byte offset 0: not an rpcbench trace (no RPCTRACE magic)")
        _, version, n = _FILE_HEAD.unpack(head)
        if version not in READABLE_VERSIONS:
            raise TraceError(f"{self.path}: byte offset 8: trace format version {version}; "
                             f"this reader knows versions {', '.join(map(str, READABLE_VERSIONS))}")
        if n > MAX_HEADER:
            raise TraceError(f"{self.path}: byte offset 10: header length {n} exceeds the {MAX_HEADER}-byte limit")
        raw = self._read(n, _FILE_HEAD.size)
        if len(raw) < n:
            raise TraceError(f"{self.path}: byte offset {_FILE_HEAD.size}: header cut off: {len(raw)} of {n} bytes")
        try:
            meta = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as e:
            what = "nested too deeply" if isinstance(e, RecursionError) else e
            raise TraceError(f"{self.path}: byte offset {_FILE_HEAD.size}: header is not UTF-8 JSON ({what})") from None
        if not isinstance(meta, dict):
            raise TraceError(f"{self.path}: byte offset {_FILE_HEAD.size}: header JSON is not an object")
        self._header_len = n
        return version, meta

    def _read(self, n: int, offset: int) -> bytes:
        if self._back:
            data, self._back = self._back[:n], self._back[n:]
            return data + self._read(n - len(data), offset) if len(data) < n else data
        try:
            return self._file.read(n)
        except EOFError:  # a gzip stream cut off (crashed writer): read as end of data
            return b""
        except (zlib.error, gzip.BadGzipFile) as e:
            raise TraceError(f"{self.path}: byte offset {offset}: compressed stream refused: {e}") from None

    def __iter__(self) -> Iterator[Call]:
        return self.calls()

    def calls(self, wanted: Optional[Container[int]] = None, stop: Optional[int] = None) -> Iterator[Call]:
        """The calls in file order; with ``wanted``, only the calls at those 0-based positions;
        with ``stop``, only the records that start before that byte offset.

        Batches holding no wanted call are framed and checksummed but not decoded, which
        makes fetching a sample from a large trace several times faster. The calls of a
        batch are handed out by C iterators (no Python frame resumed per call).
        """
        return chain.from_iterable(self._batches(wanted, stop))

    def _batches(self, wanted: Optional[Container[int]], stop: Optional[int]) -> Iterator[Iterable[Call]]:
        """The wanted calls of each batch record in turn (see :meth:`calls`)."""
        offset = self._offset
        try:
            while stop is None or offset < stop:
                record = self._next_record(offset, trust=wanted is None)
                if record is None:
                    return
                kind, body, size, tagged = record
                if kind == KIND_BATCH:
                    yield self._batch_calls(body, offset, wanted, tagged)
                elif kind == KIND_STATS or kind == KIND_END:
                    info = self._json(body, offset)
                    if kind == KIND_STATS:
                        self.stats = info
                    else:
                        self.end = info
                # other kinds: written by a newer version, skipped (the checksum vouched for them)
                offset += size
        finally:
            self._offset = offset
            self.close()

    def batch_starts(self) -> Iterator[Tuple[int, int]]:
        """``(byte offset, calls before it)`` of each batch record, decoding no call: the places
        where a reader can start with :meth:`seek` (an index pass over a plain file)."""
        offset = self._offset
        try:
            while True:
                record = self._next_record(offset)
                if record is None:
                    return
                kind, body, size, _ = record
                if kind == KIND_BATCH:
                    yield offset, self.calls_read
                    self.calls_read += self._batch_size(body, offset)
                offset += size
        finally:
            self.close()

    @property
    def seekable(self) -> bool:
        """Can :meth:`seek` start elsewhere than at the first record (a plain file, not gzip)?"""
        return self._file is self._raw

    def seek(self, offset: int, calls_before: int) -> None:
        """Start reading at the record at byte ``offset`` (one :meth:`batch_starts` gave), whose first
        call is call number ``calls_before`` of the trace. Plain (not gzip) files only."""
        if not self.seekable:
            raise TraceError(f"{self.path}: a gzip trace can only be read from its start")
        self._file.seek(offset)
        self._back = b""
        self._offset = offset
        self.calls_read = calls_before

    def count_calls(self) -> int:
        """Read to the end, decoding no call; the number of calls in the batch records."""
        for _ in self.calls(wanted=()):
            pass
        return self.calls_read

    def dropped_calls(self) -> Optional[int]:
        """Calls lost in skipped stretches, from the end record's count; None if it can't tell."""
        if self.end is None or type(self.end.get("calls")) is not int:
            return None if self.skipped else 0
        return max(self.end["calls"] - self.calls_read, 0)

    def _next_record(self, offset: int, trust: bool = False) -> Optional[tuple]:
        """``(kind, body, record size, tagged)`` of the next intact record (skipping damage when
        salvaging); None at the end of the file or of a cut-off file.

        With ``trust``, a batch record whose tag verifies under the reader's key comes back
        with ``tagged`` True and its CRC not computed: the tag proves the body intact too."""
        while True:
            head = self._read(_REC_HEAD.size, offset)
            if len(head) < _REC_HEAD.size:
                if head:
                    self._truncated(offset, len(head))
                return None
            kind, n = _REC_HEAD.unpack(head)
            if n > MAX_RECORD:
                damage, data = f"record length {n} exceeds the {MAX_RECORD}-byte limit", head
            else:
                rest = self._read(n + 4, offset)
                body = memoryview(rest)[:n]  # no copy: records are read whole, then sliced
                if len(rest) < n + 4:
                    data = head + rest
                    if find_record(data, 1, tagged=self._tag_size > 0) is None:  # a clean cut inside the last record
                        self._truncated(offset, len(data))
                        return None
                    damage = f"record length {n} runs past the end of the file but intact records follow"
                elif trust and kind == KIND_BATCH and self._tagged(body):
                    return kind, body, n + 9, True
                elif zlib.crc32(body, zlib.crc32(head)) != _CRC.unpack_from(rest, n)[0]:
                    data, damage = head + rest, "record checksum mismatch (file is corrupt)"
                else:
                    return kind, body, n + 9, False
            skipped = self._skip_damage(offset, data, damage)
            if skipped is None:
                return None
            offset += skipped

    def _skip_damage(self, offset: int, data: bytes, damage: str) -> Optional[int]:
        """Raise, or when salvaging, skip to the next intact record: the bytes skipped, None if none is left."""
        if not self.salvage:
            raise self._error(offset, damage)
        window = 2 * (MAX_RECORD + 9)
        buf, skipped = data[1:], 1
        while True:
            buf += self._read(max(window - len(buf), 0), offset + skipped)
            at_end = len(buf) < window
            found = find_record(buf, 0, len(buf) if at_end else len(buf) - MAX_RECORD - 9, self._tag_size > 0)
            if found is not None or at_end:
                skipped += len(buf) if found is None else found
                self._back = b"" if found is None else buf[found:]
                self.skipped.append((offset, skipped))
                log.warning("%s: byte offset %d: %s; skipped %d damaged bytes", self.path, offset, damage, skipped)
                return None if found is None else skipped
            keep = len(buf) - MAX_RECORD - 9
            skipped += keep
            buf = buf[keep:]

    def _tagged(self, body: Union[bytes, memoryview]) -> bool:
        """Does the batch body carry a valid tag under the reader's key?"""
        size = self._tag_size
        return self._key is not None and len(body) >= size and keys.verify(body[size:], body[:size], self._key)

    def _batch_calls(self, body: bytes, offset: int, wanted: Optional[Container[int]],
                     tagged: bool = False) -> Iterable[Call]:
        """The wanted calls of one batch record, counting them all (a malformed batch is damage).

        Not a generator: one generator fewer per call read is a fifth of the fast path."""
        index = self.calls_read
        try:
            count = self._batch_size(body, offset)
            if wanted is None:
                found = self._batch(body, offset, tagged)
            elif any(i in wanted for i in range(index, index + count)):
                found = [c for i, c in enumerate(self._batch(body, offset, self._tagged(body)), index)
                         if i in wanted]
            else:
                found = []
        except TraceError as e:
            if not self.salvage:
                raise
            self.skipped.append((offset, _REC_HEAD.size + len(body) + 4))
            log.warning("%s; skipped", e)
            return []
        self.calls_read += count
        return found

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
            code, n = _LIST_HEAD.unpack_from(body, self._tag_size)
        except struct.error:
            code, n = -1, 0
        if code & 0x7F != values.LIST or n < 0:
            raise self._error(offset, "malformed batch record (not a list)")
        return n

    def _batch(self, body: bytes, offset: int, tagged: bool) -> Iterable[Call]:
        """The calls of a batch record: by C ``marshal`` when its tag proved that a writer
        holding our key made it (the fast path), else by the pure-Python decoder, which is
        safe on any bytes."""
        if tagged:  # built as they are handed out: no list of them (an eighth of the fast path)
            return map(_new_tuple, repeat(Call), marshal.loads(body[self._tag_size:]))  # 5- and 6-tuples alike
        data = bytes(body[self._tag_size:])
        try:
            items, end = values.load(data)
            if end != len(data):
                raise ValueError(f"{len(data) - end} stray bytes after the calls")
            return [_call(item) for item in items]
        except ValueError as e:
            raise self._error(offset, f"malformed batch record ({e})") from None

    def _json(self, body: bytes, offset: int) -> Dict[str, Any]:
        try:
            info = json.loads(bytes(body).decode("utf-8"))
        except (ValueError, RecursionError) as e:
            raise self._error(offset, f"malformed info record ({str(e) or type(e).__name__})") from None
        if not isinstance(info, dict):
            raise self._error(offset, "info record is not a JSON object")
        return info


#: where a record could start: a known kind, a length of at most MAX_RECORD (its top byte 0
#: or 1) and the body's first byte (a batch is a list, stats and end are JSON objects); a
#: tagged batch (version 3) starts with its tag, any bytes
_RECORD_START = re.compile(rb"(?=B...[\x00\x01][\x5b\xdb]|[SE]...[\x00\x01]\{)", re.DOTALL)
_TAGGED_RECORD_START = re.compile(rb"(?=B...[\x00\x01]|[SE]...[\x00\x01]\{)", re.DOTALL)


def find_record(data: bytes, start: int, stop: Optional[int] = None, tagged: bool = False) -> Optional[int]:
    """The offset in ``data`` of the first complete record at ``start`` or later (and
    before ``stop``) whose checksum holds, or None.

    Tells a length field damaged in the middle of a file (intact records follow) from a
    file cut short (the tail is part of one record), and finds where to resume when
    salvaging. Bounded: checksums over at most 4x ``data`` plus 1 MiB are computed.
    """
    budget = 4 * len(data) + (1 << 20)
    starts = _TAGGED_RECORD_START if tagged else _RECORD_START
    for match in starts.finditer(data, start, len(data) if stop is None else stop):
        at = match.start()
        n = _REC_HEAD.unpack_from(data, at)[1]
        end = at + _REC_HEAD.size + n
        if n > MAX_RECORD or end + 4 > len(data):
            continue
        budget -= n
        if budget < 0:
            return None
        crc = zlib.crc32(data[at + _REC_HEAD.size:end], zlib.crc32(data[at:at + _REC_HEAD.size]))
        if crc == _CRC.unpack_from(data, end)[0]:
            return at
    return None


def _call(item: Any) -> Call:
    """One call tuple of a batch, checked: ValueError unless it is a well-formed call."""
    if type(item) is not tuple or (len(item) != 5 and len(item) != 6):
        raise ValueError("a call is neither a 5-tuple nor a 6-tuple")
    method, args, t, direction, conn = item[:5]
    wire = item[5] if len(item) == 6 else None
    if len(item) == 6 and type(wire) is not bytes:
        raise ValueError("wire (a call's sixth item) is not bytes")
    if type(method) is not str:
        raise ValueError("method is not a str")
    if type(t) is not int:
        raise ValueError("call time is not an int")
    if (type(conn) is not int and type(conn) is not str):
        raise ValueError("connection id is not an int or str")
    direction = _DIRS.get(direction) if type(direction) is str else None
    if direction is None:
        raise ValueError("direction is neither 'c2s' nor 's2c'")
    return Call(method, args, t, direction, conn, wire)


def _open_maybe_gzip(path: str) -> tuple:
    """Return ``(raw_file, stream)``: the stream decompresses when the file is gzip."""
    try:
        raw = open(path, "rb", buffering=1 << 18)  # records (~10 KB) come from the buffer, not a system call each
    except OSError as e:
        raise TraceError(f"{path}: cannot open ({e.strerror or e})") from None
    gzipped = raw.read(2) == b"\x1f\x8b"
    raw.seek(0)
    if gzipped:
        return raw, io.BufferedReader(_GzipTail(gzip.GzipFile(fileobj=raw, mode="rb"), raw), 1 << 16)
    return raw, raw


class _GzipTail(io.RawIOBase):
    """A gzip stream as a raw stream whose cut-off end (a killed writer leaves no gzip
    trailer) reads as the end of data, with nothing read before the cut lost.

    A buffered read straight over GzipFile raises EOFError at the cut and discards what it
    had already decompressed in that call (up to a buffer's worth of calls); ``read1``
    raises it only when no data is left, so here it simply means end of data.
    """

    def __init__(self, gz: gzip.GzipFile, raw: IO[bytes]) -> None:
        self._gz = gz
        self._raw = raw
        self._out = 0  # bytes decompressed so far

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        try:
            data = self._gz.read1(len(b))
        except EOFError:
            return 0
        n = len(data)
        self._out += n
        if self._out > MAX_GZIP_RATIO * self._raw.tell() + MAX_RECORD:
            raise gzip.BadGzipFile(f"it expands more than {MAX_GZIP_RATIO}x (a decompression bomb?); "
                                   "if the trace is genuine, gunzip it and read the plain file")
        b[:n] = data
        return n

    def close(self) -> None:
        self._gz.close()
        super().close()

