"""Harness bias and codec overhead, measured apart, interleaved in one process run.

    python bench/overhead.py [--trace FILE] [--calls N] [--codecs LIST] [--repeat N] [--min-time S]

For each codec (default: json, ujson, orjson, msgpack, bson, protobuf, json+zlib-1), on
the first N calls of the trace, three loops take turns (order rotating each repetition,
so drift of the machine's speed hits them alike), each one batch of ``loops`` replays:

* harness: one ``TimingJob.run_round`` (what run_bench.py records), ns per call;
* codec: a bare hand-written loop over THE SAME codec objects, ``for m in calls:
  codec.encode(m)`` (``bench/_common.py: bare_ns``);
* library: a bare loop over the library call the codec wraps, with the same options
  (``json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=...)``,
  ``ujson.dumps(..., ensure_ascii=False, escape_forward_slashes=False)``...), fed
  inputs prepared outside the timer: the envelope dict ``{"method", "args"}`` (with
  bytes already base64 for ujson, which has no hook for them) and the wire bytes.

Printed per codec and op: medians over repetitions of the back-to-back ratios
harness/codec (harness bias; target 0.95-1.05) and codec/library (codec overhead; target
<= 1.05, or the extra work named in the last column: it is work a server doing the
same job pays too, such as building the envelope dict or converting dicts to protobuf
messages).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import zlib
from typing import Any, Callable, Dict, List, Tuple

import _common
from rpcbench.codec import base64_default, bytes_to_base64
from rpcbench.registry import Registry
from rpcbench.timing import TimingJob, time_batch

BIAS = (0.95, 1.05)
OVERHEAD = 1.05
DEFAULT = "json,ujson,orjson,msgpack,bson,protobuf,json+zlib-1"
Bare = Tuple[Callable[[Any], Any], List[Any], Callable[[Any], Any], List[Any], Dict[str, str]]
PLAIN = {"encode": "envelope dict {method, args}; the method call",
         "decode": "(method, args) from the dict; the method call"}


def envelopes(calls: List[Any], convert: Callable[[Any], Any] = lambda a: a) -> List[Dict[str, Any]]:
    """The envelope dicts the codecs build, built here outside any timer (args through ``convert``)."""
    return [{"method": c.method, "args": convert(c.args)} for c in calls]


def library_loops(cid: str, codec: Any, calls: List[Any], payloads: List[bytes]) -> Bare:
    """(encode fn, its inputs, decode fn, its inputs, the extra work the codec does) for a codec id."""
    import bson
    import msgpack
    import orjson
    import ujson

    base, _, comp = cid.partition("+")
    if base == "json":
        dump = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=base64_default).encode
        if comp == "zlib-1":
            return (lambda e: zlib.compress(dump(e).encode("utf-8"), 1), envelopes(calls),
                    lambda d: json.loads(zlib.decompress(d)), payloads, PLAIN)
        return lambda e: dump(e).encode("utf-8"), envelopes(calls), json.loads, payloads, PLAIN
    if base == "ujson":
        return (lambda e: ujson.dumps(e, ensure_ascii=False, escape_forward_slashes=False).encode("utf-8"),
                envelopes(calls, bytes_to_base64), ujson.loads, payloads,
                {"encode": "envelope dict; base64 of bytes (no hook in ujson); the method call",
                 "decode": PLAIN["decode"]})
    if base == "orjson":
        return (lambda e: orjson.dumps(e, default=base64_default, option=orjson.OPT_NON_STR_KEYS), envelopes(calls),
                orjson.loads, payloads, PLAIN)
    if base == "msgpack":
        packer = msgpack.Packer(use_bin_type=True, autoreset=True)
        return packer.pack, envelopes(calls), lambda d: msgpack.unpackb(d, strict_map_key=False), payloads, PLAIN
    if base == "bson":
        return bson.encode, envelopes(calls), bson.decode, payloads, PLAIN
    if base == "protobuf":
        schema = codec._encode.__self__
        entries = [schema.methods[c.method] for c in calls]
        messages = [e.converter.to_message(c.args) for e, c in zip(entries, calls)]
        parsed = [(e.converter.cls, e.converter.cls.FromString(m.SerializeToString()).SerializeToString())
                  for e, m in zip(entries, messages)]
        return (lambda m: m.SerializeToString(), messages, lambda cp: cp[0].FromString(cp[1]), parsed,
                {"encode": "dict -> message conversion; envelope key + length (bench/protobuf_split.py)",
                 "decode": "envelope parse; message -> dict conversion (bench/protobuf_split.py)"})
    raise SystemExit(f"no bare library loop for {cid}")


def measure(cid: str, codec: Any, calls: List[Any], repeat: int, min_time: float) -> Dict[str, Any]:
    """Interleaved harness / codec / library figures (ns per call) per op, and their back-to-back ratios."""
    job = TimingJob(codec, calls)
    if job.error:
        return {"error": job.error}
    job.run_round(record=False)
    job.calibrate(min_time)
    enc, enc_items, dec, dec_items, extra = library_loops(cid, codec, job.calls, job.payloads)
    n = job.loops * len(job.calls)

    def harness() -> Dict[str, float]:
        job.run_round(record=True, stages=False)
        return {op: job.rounds[op][-1] for op in ("encode", "decode")}

    loops: Dict[str, Callable[[], Dict[str, float]]] = {
        "codec": lambda: {op: _common.bare_ns(codec, items, job.loops, op) / n
                          for op, items in (("encode", job.calls), ("decode", job.payloads))},
        "library": lambda: {"encode": time_batch(enc, enc_items, job.loops) / n,
                            "decode": time_batch(dec, dec_items, job.loops) / n},
        "harness": harness,
    }
    for run in loops.values():  # warm every loop once
        run()
    figures: Dict[str, Dict[str, List[float]]] = {op: {k: [] for k in loops} for op in ("encode", "decode")}
    names = list(loops)
    for r in range(repeat):
        for name in names[r % 3:] + names[:r % 3]:
            for op, ns in loops[name]().items():
                figures[op][name].append(ns)
    return {"figures": figures, "extra": extra, "loops": job.loops, "calls": len(job.calls)}


def ratio(a: List[float], b: List[float]) -> Tuple[float, float, float]:
    """Median, min and max of the back-to-back ratios a/b."""
    rs = [x / y for x, y in zip(a, b)]
    return statistics.median(rs), min(rs), max(rs)


def rows_for(cid: str, m: Dict[str, Any], flagged: List[str]) -> List[List[str]]:
    out = []
    for op in ("encode", "decode"):
        f = m["figures"][op]
        bias, over = ratio(f["harness"], f["codec"]), ratio(f["codec"], f["library"])
        if not BIAS[0] <= bias[0] <= BIAS[1]:
            flagged.append(f"{cid} {op} harness/codec {bias[0]:.3f}")
        us = [f"{statistics.median(f[name]) / 1000:.3f}" for name in ("harness", "codec", "library")]
        out.append([cid, op, *us, f"{bias[0]:.3f} [{bias[1]:.2f}-{bias[2]:.2f}]",
                    f"{over[0]:.3f} [{over[1]:.2f}-{over[2]:.2f}]", m["extra"][op] if over[0] > OVERHEAD else ""])
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", default=_common.BUNDLED_TRACE, help="trace (default: the bundled sample)")
    p.add_argument("--calls", type=int, default=2000, help="first N calls of the trace (default: 2000)")
    p.add_argument("--codecs", default=DEFAULT, help=f"codec ids (default: {DEFAULT})")
    p.add_argument("--repeat", type=int, default=31, help="interleaved repetitions per codec (default: 31)")
    p.add_argument("--min-time", type=float, default=0.01, help="calibrated batch length, s (default: 0.01)")
    args = p.parse_args()
    calls = _common.first_calls(args.trace, args.calls)
    registry = Registry.default()
    print(f"trace: {args.trace}, first {len(calls):,} calls; {args.repeat} interleaved repetitions of harness, "
          f"codec and library loops per codec, min-time {args.min_time} s; {_common.cpu_note()}")
    rows: List[List[str]] = []
    flagged: List[str] = []
    started = time.perf_counter()
    for cid in args.codecs.split(","):
        m = measure(cid, registry.create(cid), calls, args.repeat, args.min_time)
        if "error" in m:
            rows.append([cid, "-", "-", "-", "-", "-", "-", m["error"]])
            continue
        rows += rows_for(cid, m, flagged)
    print()
    print(_common.table(["codec", "op", "harness us", "codec us", "library us", "harness/codec [min-max]",
                         "codec/library [min-max]", "codec's extra work (where > 1.05)"], rows))
    print(f"\nharness/codec: harness bias (target {BIAS[0]}-{BIAS[1]}); codec/library: the codec class's cost over "
          f"its bare library call with the same options; medians of back-to-back ratios; "
          f"{time.perf_counter() - started:.0f} s")
    print("harness bias outside target: " + (", ".join(flagged) if flagged else "none"))


if __name__ == "__main__":
    main()
