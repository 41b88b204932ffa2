"""Where the ``protobuf`` codec's time goes: converting Python values vs serializing/parsing.

    python bench/protobuf_split.py [--trace FILE] [--proto FILE ...] [--rounds N]

Encode = to message (``cls(**args)`` plus the Python conversions it needs) + serialize
(``SerializeToString`` and the envelope); decode = parse (``FromString``) + to python (the
generated converter back to dicts and lists). Each stage is timed over whole batches
between two ``perf_counter_ns`` reads, garbage collector off, and the median of the rounds
is printed in µs per call, for all calls and per method.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from google.protobuf.internal import api_implementation  # noqa: E402

from rpc_capture import open_trace  # noqa: E402
from rpcbench import protobuf  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
STAGES = ("to message", "serialize", "encode", "parse", "to python", "decode")


def batch_ns(func: Callable[[Any], Any], items: Sequence[Any], loops: int) -> int:
    """ns for ``loops`` passes of ``func`` over ``items``, one timer pair around the lot."""
    gc.disable()
    try:
        t0 = time.perf_counter_ns()
        for _ in range(loops):
            for item in items:
                func(item)
        return time.perf_counter_ns() - t0
    finally:
        gc.enable()


def stage_functions(schema: protobuf.Schema, calls: List[Any]) -> Dict[str, tuple]:
    """Each stage as (function of one item, its items): the items are prepared by the stage before."""
    convs = [schema.methods[c.method].converter for c in calls]
    msgs = [conv.to_message(c.args) for conv, c in zip(convs, calls)]
    tags = [schema.methods[c.method].tag for c in calls]
    wire = [schema.encode(c.method, c.args) for c in calls]
    payloads = [(conv, m.SerializeToString(deterministic=True)) for conv, m in zip(convs, msgs)]
    varint = protobuf.varint

    def serialize(pair: tuple) -> bytes:
        tag, msg = pair
        data = msg.SerializeToString(deterministic=True)
        return tag + varint(len(data)) + data

    return {
        "to message": (lambda pair: pair[0].to_message(pair[1].args), list(zip(convs, calls))),
        "serialize": (serialize, list(zip(tags, msgs))),
        "encode": (lambda c: schema.encode(c.method, c.args), calls),
        "parse": (lambda pair: pair[0].cls.FromString(pair[1]), payloads),
        "to python": (lambda pair: pair[0].to_args(pair[1]), list(zip(convs, msgs))),
        "decode": (schema.decode, wire),
    }


def measure(schema: protobuf.Schema, calls: List[Any], rounds: int, min_time: float) -> Dict[str, float]:
    """Median µs per call of each stage. Loops are calibrated so that a batch lasts ``min_time``;
    the rounds take the stages in turn, so that machine drift hits all of them alike."""
    stages = stage_functions(schema, calls)
    loops = {stage: max(1, int(min_time * 1e9 / max(batch_ns(func, items, 1), 1)))
             for stage, (func, items) in stages.items()}
    samples: Dict[str, List[float]] = {stage: [] for stage in stages}
    for _ in range(rounds):
        for stage, (func, items) in stages.items():
            samples[stage].append(batch_ns(func, items, loops[stage]) / loops[stage] / len(items) / 1000)
    return {stage: statistics.median(values) for stage, values in samples.items()}


def main(argv: Sequence[str] = ()) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trace", default=str(REPO / "samples" / "battle.rpct"))
    p.add_argument("--proto", action="append", default=[], help="schema (default: every .proto in proto/)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--min-time", type=float, default=0.05, help="seconds per timed batch")
    args = p.parse_args(argv)
    schema = protobuf.load(protobuf.Settings(tuple(args.proto)))
    calls = [c for c in open_trace(args.trace) if c.method in schema.methods]
    by_method: Dict[str, List[Any]] = {}
    for call in calls:
        by_method.setdefault(call.method, []).append(call)
    groups = [("all", calls)] + sorted(by_method.items(), key=lambda pair: -len(pair[1]))
    print(f"protobuf {api_implementation.Type()} backend, {Path(args.trace).name} ({len(calls):,} calls), "
          f"schemas {', '.join(schema.files)}; µs per call, median of {args.rounds} rounds")
    print(f"{'method':<16} {'calls':>6}" + "".join(f" {s:>10}" for s in STAGES) + f" {'conversion':>11}")
    for name, group in groups:
        r = measure(schema, group, args.rounds, args.min_time)
        share = (r["to message"] + r["to python"]) / (r["encode"] + r["decode"])
        print(f"{name:<16} {len(group):>6}" + "".join(f" {r[s]:>10.2f}" for s in STAGES) + f" {share:>10.0%}")
    print("conversion: share of encode + decode spent in 'to message' and 'to python' "
          "(the rest is upb and the envelope)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
