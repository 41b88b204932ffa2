"""Mutation fuzzing of the files rpcbench reads: traces (binary, gzip, JSON Lines) and results.json.

Shared by the test suite (a few hundred inputs) and ``bench/fuzz.py`` (a long campaign).
Each ``check_*`` function feeds one input to the real reader and returns ``"ok"`` (read,
and what was read is well formed) or ``"refused"`` (a clean one-line error); anything
else propagates, and is a crash.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import random
import struct
from typing import Any, Callable, List

from rpc_capture import Call, TraceError, open_trace
from rpc_capture import trace as T
from rpcbench.errors import BenchError
from rpcbench.results import load

logging.getLogger("rpc_capture").setLevel(logging.ERROR)  # cut-off tails warn; thousands of them here


def _record_starts(data: bytes) -> List[int]:
    """Offsets of the records of an intact binary trace (uncompressed)."""
    if not data.startswith(T.MAGIC):
        return []
    at = T._FILE_HEAD.size + T._FILE_HEAD.unpack_from(data)[2]
    starts = []
    while at + T._REC_HEAD.size <= len(data):
        starts.append(at)
        at += T._REC_HEAD.size + T._REC_HEAD.unpack_from(data, at)[1] + 4
    return starts


def _truncate(data: bytes, rng: random.Random) -> bytes:
    return data[:rng.randrange(len(data) + 1)]


def _flip_bits(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 8))):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def _set_bytes(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    i = rng.randrange(len(out))
    out[i:i + 4] = rng.choice((b"\xff\xff\xff\x7f", b"\x00\x00\x00\x80", b"\x00\x00\x00\x00", b"r\x00\x00\x00",
                               b"\xdb\xff\xff", bytes([rng.randrange(256)]), b"\x7b\x7b\x7b\x7b", b"\\ud800"))
    return bytes(out[:len(data) + 3])


def _length_field(data: bytes, rng: random.Random) -> bytes:
    """A record's length (or the header's) set to a nearby, huge, or zero value."""
    starts = _record_starts(data)
    if not starts:
        return _set_bytes(data, rng)
    at = rng.choice(starts) + 1
    n = struct.unpack_from("<I", data, at)[0]
    new = rng.choice((0, n + 1, max(n - 1, 0), n ^ (1 << rng.randrange(32)), T.MAX_RECORD, T.MAX_RECORD + 1, 2 ** 32 - 1))
    return data[:at] + struct.pack("<I", new) + data[at + 4:]


def _splice(data: bytes, rng: random.Random) -> bytes:
    """A stretch of the file repeated, dropped or moved: records spliced together wrongly."""
    a, b = sorted(rng.randrange(len(data) + 1) for _ in range(2))
    c = rng.randrange(len(data) + 1)
    piece = data[a:b]
    return rng.choice((data[:c] + piece + data[c:], data[:a] + data[b:], data[:a] + piece * 3 + data[b:]))


BYTE_MUTATORS: List[Callable[[bytes, random.Random], bytes]] = [_truncate, _flip_bits, _set_bytes, _length_field, _splice]


def mutate_bytes(data: bytes, rng: random.Random) -> bytes:
    """``data`` with one to three random mutations applied."""
    for _ in range(rng.choice((1, 1, 2, 3))):
        if data:
            data = rng.choice(BYTE_MUTATORS)(data, rng)
    return data


_ODD_VALUES = (None, "", "x", -1, 0, 1e308, float("nan"), True, [], {}, [1, "a"], {"a": None}, 10 ** 30, "\ud800")


def tamper_json(obj: Any, rng: random.Random) -> Any:
    """A deep copy of ``obj`` with one field somewhere deleted or given a value of another type."""
    obj = copy.deepcopy(obj)
    parent, key, node = None, None, obj
    while isinstance(node, (dict, list)) and node and rng.random() < 0.8:
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        parent, node = node, node[key]
    if parent is None:
        return rng.choice(_ODD_VALUES)
    if isinstance(parent, dict) and rng.random() < 0.3:
        del parent[key]
    else:
        parent[key] = rng.choice(_ODD_VALUES)
    return obj


def check_trace(path: str, salvage: bool = False) -> str:
    """Read every call of a trace: ``"ok"`` or ``"refused"`` (TraceError); anything else is a crash."""
    try:
        reader = open_trace(path)
        if salvage and hasattr(reader, "salvage"):
            reader.salvage = True
        for call in reader:
            assert type(call) is Call and type(call.method) is str and type(call.t) is int
    except TraceError as e:
        assert "\n" not in str(e) and str(e).startswith(path), str(e)
        return "refused"
    return "ok"


def check_results(path: str, out_dir: str) -> str:
    """Load a results.json and build its table and HTML page: ``"ok"`` or ``"refused"`` (BenchError)."""
    from reports import format_table, write_report

    try:
        suite = load(path)
    except BenchError as e:
        assert "\n" not in str(e), str(e)
        return "refused"
    format_table(suite)
    write_report(suite, out_dir, {})
    return "ok"


def write_json(path: str, obj: Any) -> None:
    """``obj`` as JSON text, lone surrogates escaped as JSON allows."""
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
        json.dump(obj, f)
