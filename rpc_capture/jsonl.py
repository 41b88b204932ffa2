"""JSON Lines traces: the language-neutral way to hand calls to rpcbench.

One call per line, a JSON object::

    {"method": "move", "args": {...}, "t": 1732250000000000000, "dir": "c2s", "conn": 7}

``method`` (str) and ``args`` (any JSON) are required; ``t`` (int ns), ``dir``
(``"c2s"``/``"s2c"``), ``conn`` (int or str) and ``wire`` (the payload as captured, base64)
are optional. Bytes inside args are
MongoDB Extended JSON: ``{"$binary": {"base64": "...", "subType": "00"}}``. Blank lines
are skipped. JSON cannot express int dict keys or tuples: exporting a binary trace
writes them as str keys and arrays.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import logging
import os
from typing import IO, Any, Container, Dict, Iterable, Iterator, List, Optional, Tuple, Union

from .call import C2S, DIRECTIONS, S2C, Call
from .trace import TraceError, _new_tuple

log = logging.getLogger("rpc_capture")

_FIELDS = {"method", "args", "t", "dir", "conn", "wire"}
T_RANGE = (-(1 << 63), (1 << 63) - 1)  #: ``t`` as any language's signed 64-bit nanosecond clock holds it
_T_MIN, _T_MAX = T_RANGE
MAX_LINE = 16 << 20  #: longest line accepted, bytes (as a binary trace's record limit)
BOM = b"\xef\xbb\xbf"  #: a UTF-8 byte order mark, which some Windows editors put first


def _from_extended(obj: Dict[str, Any]) -> Any:
    """json object_hook: turn ``{"$binary": {...}}`` into bytes."""
    if len(obj) == 1 and "$binary" in obj:
        spec = obj["$binary"]
        if isinstance(spec, dict) and isinstance(spec.get("base64"), str):
            try:
                return base64.b64decode(spec["base64"], validate=True)
            except binascii.Error as e:
                raise ValueError(f"bad base64 in $binary ({e})") from None
    return obj


def _to_extended(value: Any) -> Any:
    """json default hook: bytes become ``{"$binary": ...}``."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$binary": {"base64": base64.b64encode(bytes(value)).decode("ascii"), "subType": "00"}}
    raise TypeError(f"cannot write a value of type {type(value).__name__} as JSON")


class JsonlReader:
    """Stream the calls of a JSON Lines trace; same interface as TraceReader."""

    version = None
    stats = None
    end = None

    def __init__(self, path: Union[str, os.PathLike], salvage: bool = False) -> None:
        self.path = os.fspath(path)
        self.salvage = salvage
        self.skipped: List[Tuple[int, int]] = []  #: (byte offset, bytes) of each damaged line skipped
        self.metadata: Dict[str, Any] = {}
        self.truncated_bytes = 0  #: bytes of a cut-off last line, dropped
        if not os.path.isfile(self.path):
            raise TraceError(f"{self.path}: cannot open (no such file)")

    def __iter__(self) -> Iterator[Call]:
        return self.calls()

    def calls(self, wanted: Optional[Container[int]] = None) -> Iterator[Call]:
        """The calls in file order; with ``wanted``, only the calls at those 0-based positions.

        A last line without its newline that does not parse is a file cut short (a writer
        that crashed): it is dropped with a warning, like a binary trace's cut-off record.
        """
        index = 0
        with open(self.path, "rb", buffering=1 << 18) as f:
            offset = len(BOM) if f.read(len(BOM)) == BOM else f.seek(0)  # a leading BOM skipped
            for lineno, line in enumerate(iter(functools.partial(f.readline, MAX_LINE + 1), b""), 1):
                at, offset = offset, offset + len(line)
                if len(line) > MAX_LINE:
                    raise TraceError(f"{self.path}: line {lineno} (byte offset {at}): longer than {MAX_LINE} bytes")
                if line[:1] != b"{" and not line.strip():
                    continue
                if wanted is None or index in wanted or self.salvage:  # salvaging: every line, so indices agree
                    try:
                        call = _call_from(_parse(line))
                    except (ValueError, TypeError, RecursionError) as e:
                        if not line.endswith(b"\n") and _cut_off(line):
                            self._truncated(at, len(line))
                            return
                        self._damaged(f"line {lineno} (byte offset {at}): {str(e) or type(e).__name__}", at, len(line))
                        continue
                    if wanted is None or index in wanted:
                        yield call
                index += 1

    def _damaged(self, what: str, offset: int, size: int) -> None:
        """A line that is not a call: TraceError, or when salvaging a warning and the line skipped."""
        if not self.salvage:
            raise TraceError(f"{self.path}: {what} (--salvage skips damaged lines)")
        self.skipped.append((offset, size))
        log.warning("%s: %s; skipped", self.path, what)

    def dropped_calls(self) -> int:
        """Calls lost in skipped lines: one per line."""
        return len(self.skipped)

    def _truncated(self, offset: int, dropped: int) -> None:
        self.truncated_bytes = dropped
        log.warning("%s: last line (byte offset %d) is cut off: dropped its %d bytes (writer crashed or file "
                    "cut short); all complete lines were read", self.path, offset, dropped)

    def close(self) -> None:
        """Nothing to release until iteration starts (kept for interface parity)."""


_PLAIN = json.JSONDecoder()
_EXTENDED = json.JSONDecoder(object_hook=_from_extended)


def _parse(line: bytes) -> Any:
    """One line's JSON, as ``json.loads`` reads it, with ``$binary`` objects made bytes.

    Decoders built once (``json.loads`` with a hook builds one per call), and the hook,
    a Python call per JSON object, only for a line that can hold ``$binary``: without a
    ``\\u`` escape that key can only be written out literally."""
    text = line.decode("utf-8")
    return (_EXTENDED if "$binary" in text or "\\u" in text else _PLAIN).decode(text)


def _cut_off(line: bytes) -> bool:
    """Whether a last line that does not parse is a prefix of JSON (cut short), not garbage."""
    try:
        json.loads(line)
    except json.JSONDecodeError as e:
        return e.pos >= len(line.rstrip()) or "Unterminated string" in e.msg
    except (ValueError, RecursionError):
        return False
    return False


def _call_from(obj: Any) -> Call:
    """The call one line's JSON object holds. The usual line, the five fields a recorder writes, is taken at once
    (a quarter less time per line than checking field by field); any other is checked field by field by
    :func:`_checked_call`, which names what is wrong."""
    if type(obj) is dict and len(obj) == 5:
        try:
            method, args, t, direction, conn = obj["method"], obj["args"], obj["t"], obj["dir"], obj["conn"]
        except KeyError:  # five fields, but not those five ("wire" among them, or a stray one)
            return _checked_call(obj)
        if type(method) is str and type(t) is int and _T_MIN <= t <= _T_MAX and \
                (direction == C2S or direction == S2C) and (type(conn) is int or type(conn) is str):
            return _new_tuple(Call, (method, args, t, direction, conn))
    return _checked_call(obj)


def _checked_call(obj: Any) -> Call:
    """The call ``obj`` holds, each field checked in turn: ValueError naming the first one wrong."""
    if type(obj) is not dict:
        raise ValueError("line is not a JSON object")
    if not obj.keys() <= _FIELDS:
        raise ValueError(f"unknown field(s) {sorted(obj.keys() - _FIELDS)}; expected {sorted(_FIELDS)}")
    method = obj.get("method")
    if type(method) is not str:
        raise ValueError('"method" (a string) is required')
    if "args" not in obj:
        raise ValueError('"args" is required')
    t = obj.get("t", 0)
    if type(t) is not int:
        raise ValueError('"t" must be an integer (nanoseconds)')
    if not _T_MIN <= t <= _T_MAX:
        raise ValueError(f'"t" must fit in 64 bits (nanoseconds; {len(str(abs(t)))} digits given)')
    direction = obj.get("dir", C2S)
    if direction != C2S and direction != S2C:
        raise ValueError(f'"dir" must be one of {list(DIRECTIONS)}')
    conn = obj.get("conn", 0)
    if type(conn) is not int and type(conn) is not str:
        raise ValueError('"conn" must be an integer or a string')
    if "wire" in obj:
        return _new_tuple(Call, (method, obj["args"], t, direction, conn, _wire_bytes(obj["wire"])))
    return _new_tuple(Call, (method, obj["args"], t, direction, conn))


def _wire_bytes(text: Any) -> bytes:
    """A line's ``"wire"``: standard base64 with padding, as bytes."""
    if type(text) is not str:
        raise ValueError('"wire" must be a base64 string')
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as e:
        raise ValueError(f'bad base64 in "wire" ({e})') from None



def write_jsonl(calls: Iterable[Call], out: Union[str, os.PathLike, IO[str]]) -> int:
    """Write calls as JSON Lines to a path or text stream; return how many were written."""
    if isinstance(out, (str, os.PathLike)):
        with open(out, "w", encoding="utf-8") as f:
            return write_jsonl(calls, f)
    n = 0
    for call in calls:
        out.write(json_line(call))
        n += 1
    return n


def json_line(call: Call) -> str:
    """One call as a JSON Lines line (with trailing newline)."""
    obj = {"t": call.t, "dir": call.dir, "conn": call.conn, "method": call.method, "args": call.args}
    if call.wire is not None:
        obj["wire"] = base64.b64encode(call.wire).decode("ascii")
    try:
        line = json.dumps(obj, ensure_ascii=False, default=_to_extended, separators=(",", ":")) + "\n"
    except RecursionError:
        raise ValueError("args nested too deeply for JSON (Python's json stops at about 1,000 levels)") from None
    if not line.isascii():
        try:
            line.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: only a \u escape writes them
            line = json.dumps(obj, default=_to_extended, separators=(",", ":")) + "\n"
    return line
