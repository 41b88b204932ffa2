"""Mutation fuzzing of the files rpcbench reads: traces (binary, gzip, JSON Lines) and results.json.

Shared by the test suite (a few hundred inputs) and ``bench/fuzz.py`` (a long campaign).
Each ``check_*`` function feeds one input to the real reader and returns ``"ok"`` (read,
and what was read is well formed) or ``"refused"`` (a clean one-line error); anything
else propagates, and is a crash.
"""

from __future__ import annotations

import copy
import json
import os
import random
import struct
from typing import Any, Callable, Dict, List

from rpc_capture import Call, TraceError, open_trace
from rpc_capture import keys as K
from rpc_capture import trace as T
from rpcbench.errors import BenchError
from rpcbench.results import load


def _record_starts(data: bytes) -> List[int]:
    """Offsets of the records of a binary trace (uncompressed); none if its header is cut or mangled."""
    if not data.startswith(T.MAGIC) or len(data) < T._FILE_HEAD.size:
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
    new = rng.choice((0, n + 1, max(n - 1, 0), n ^ (1 << rng.randrange(32)),
                      T.MAX_RECORD, T.MAX_RECORD + 1, 2 ** 32 - 1))
    return data[:at] + struct.pack("<I", new & 0xFFFFFFFF) + data[at + 4:]


def _splice(data: bytes, rng: random.Random) -> bytes:
    """A stretch of the file repeated, dropped or moved: records spliced together wrongly."""
    a, b = sorted(rng.randrange(len(data) + 1) for _ in range(2))
    c = rng.randrange(len(data) + 1)
    piece = data[a:b]
    return rng.choice((data[:c] + piece + data[c:], data[:a] + data[b:], data[:a] + piece * 3 + data[b:]))


#: marshal that C ``marshal.loads`` must never see (a segfault, a 2 GB tuple, code objects) and other codes
CRAFTED_MARSHAL = (b"\xa9\x01<\x01\x00\x00\x00r\x00\x00\x00\x00", b"\xa9\x02{r\x00\x00\x00\x00N0N",
                   b"(\x00\x00\x00\x10", b"c", b"\xe3", b"r\x00\x00\x00\x00", b"\xdb\xff\xff\xff\x7f", b"?")


def _reframed(data: bytes, rng: random.Random) -> bytes:
    """A batch record's marshal data changed, its length and CRC made to match and its tag
    kept (now wrong): crafted bytes that reach a decoder, as a hostile writer makes them."""
    starts = [at for at in _record_starts(data) if data[at] == T.KIND_BATCH
              and at + 9 + T._REC_HEAD.unpack_from(data, at)[1] <= len(data)]
    if not starts:
        return _set_bytes(data, rng)
    at = rng.choice(starts)
    n = T._REC_HEAD.unpack_from(data, at)[1]
    tag_size = K.TAG_SIZE if T._FILE_HEAD.unpack_from(data)[1] >= 3 else 0
    tag, body = data[at + 5:at + 5 + tag_size], data[at + 5 + tag_size:at + 5 + n]
    if body and rng.random() < 0.5:
        body = rng.choice((_flip_bits, _set_bytes))(body, rng)
    else:
        i = rng.randrange(len(body) + 1)
        body = body[:i] + rng.choice(CRAFTED_MARSHAL) + body[i + rng.choice((0, 1, 5)):]
    return data[:at] + T._frame(T.KIND_BATCH, tag + body) + data[at + 9 + n:]


BYTE_MUTATORS: List[Callable[[bytes, random.Random], bytes]] = [
    _truncate, _flip_bits, _set_bytes, _length_field, _splice, _reframed]


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
    from rpcbench.reports import decide, terminal_text, write_report

    try:
        suite = load(path)
    except BenchError as e:
        assert "\n" not in str(e), str(e)
        return "refused"
    decided = decide(suite)
    terminal_text(decided)
    write_report(decided, out_dir, {})
    return "ok"


def hostile_calls() -> List[Call]:
    """Legal but unusual calls: deep nesting, odd keys, huge ints, surrogates, NaN, shared values."""
    deep: Any = 0
    for _ in range(300):
        deep = [deep]
    shared = {"pos": [1.5, -0.0], "name": "\u00e9"}
    calls = [
        Call("deep", {"v": deep}), Call("keys", {b"raw": 1, 2.5: 2, None: 3, True: 4, (1, "a"): 5, 7: 6}),
        Call("ints", [2 ** 64, -(2 ** 200), 10 ** 300, 0]), Call("text\ud800", {"s": "\udc00x\x00", "e": ""}),
        Call("floats", (float("nan"), float("inf"), -0.0, 5e-324)), Call("shared", [shared, shared, {"x": shared}]),
        Call("misc", {"b": b"\x00\xff" * 20, "set": {1, 2}, "fs": frozenset({"a"}), "c": 1 + 2j, "none": None}),
    ]
    return [c._replace(t=1_700_000_000_000_000_000 + i * 1000, conn=i % 3) for i, c in enumerate(calls * 20)]


def seed_files(folder: str, calls: List[Call], results_json: str) -> Dict[str, bytes]:
    """The intact inputs the mutations start from: binary, gzip and JSON Lines traces, a results.json."""
    from rpc_capture import TraceWriter, write_jsonl

    binary, gz, jsonl = (os.path.join(folder, name) for name in ("seed.rpct", "seed.rpct.gz", "seed.jsonl"))
    for path, level in ((binary, None), (gz, 6)):
        with TraceWriter(path, {"game": "fuzz"}, level) as w:
            for call in calls:
                w.write(call)
    write_jsonl([c for c in calls if _has_json_form(c)], jsonl)
    with open(results_json, "rb") as f:
        results = f.read()
    return {"binary": _read(binary), "gzip": _read(gz), "jsonl": _read(jsonl), "results": results}


def _has_json_form(call: Call) -> bool:
    from rpc_capture.jsonl import json_line

    try:
        json_line(call)
    except (TypeError, ValueError):
        return False
    return True


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def mutate(kind: str, seed: bytes, rng: random.Random) -> bytes:
    """One mutated input of a kind: bytes mutations, and for results.json also a tampered field."""
    if kind == "results" and rng.random() < 0.5:
        return json.dumps(tamper_json(json.loads(seed), rng)).encode("utf-8", "backslashreplace")
    return mutate_bytes(seed, rng)


def check(kind: str, path: str, out_dir: str, salvage: bool) -> str:
    """Feed one input file of a kind to its reader: ``"ok"`` or ``"refused"``; anything else raises."""
    if kind == "results":
        return check_results(path, out_dir)
    return check_trace(path, salvage)


def write_json(path: str, obj: Any) -> None:
    """``obj`` as JSON text, lone surrogates escaped as JSON allows."""
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as f:
        json.dump(obj, f)
