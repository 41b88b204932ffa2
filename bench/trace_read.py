"""How fast traces are read, against the C parser of the same bytes, side by side.

For each trace (default: simulated ones of the dict and the study profile), interleaved
in each round, and the median over rounds:

* ``marshal.loads`` over the trace's own batch records (128 calls each, as stored): the
  reference of the binary format;
* ``open_trace`` yielding every call, the fast path: records tagged under this machine's
  key (see ``rpc_capture/keys.py``), decoded by ``marshal`` after the tag is checked;
* ``open_trace`` with ``use_key=False``: every record by the pure-Python decoder, what a
  trace from anyone else (no valid tag) costs;
* ``json.loads`` over the lines of a JSON Lines copy, and ``open_trace`` of that copy.

The readers are driven to their end by ``collections.deque(maxlen=0)``, a C loop, as
``marshal.loads`` and ``json.loads`` are timed without a Python loop over what they return.

Prints calls/s of each and the ratios (target: open_trace >= 0.5x marshal.loads; JSON
Lines near 1x json.loads). The machine's speed swings: only the ratios, measured in the
same rounds, mean anything.

Usage: python bench/trace_read.py [TRACE ...] [--calls 300000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import marshal
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Callable, Dict, List

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rpc_capture import TraceReader, open_trace, write_jsonl  # noqa: E402
from rpc_capture import trace as T  # noqa: E402


def batch_bodies(path: str) -> List[bytes]:
    """The marshal bytes of each batch record of a plain binary trace (tags stripped)."""
    data = Path(path).read_bytes()
    version, header = T._FILE_HEAD.unpack_from(data)[1:]
    skip = 16 if version >= 3 else 0
    at, bodies = T._FILE_HEAD.size + header, []
    while at < len(data):
        kind, n = T._REC_HEAD.unpack_from(data, at)
        if kind == T.KIND_BATCH:
            bodies.append(data[at + T._REC_HEAD.size + skip:at + T._REC_HEAD.size + n])
        at += T._REC_HEAD.size + n + 4
    return bodies


def count(iterable) -> int:
    """Drive a reader to its end by a C consumer (as ``marshal.loads`` hands its list over, with
    no Python loop per call on either side); the calls are counted once, at warm-up."""
    deque(iterable, maxlen=0)
    return 0


def marshal_batches(bodies: List[bytes]) -> int:
    return sum(len(marshal.loads(b)) for b in bodies)


def json_lines(lines: List[bytes]) -> int:
    loads = json.loads
    for line in lines:
        loads(line)
    return len(lines)


def measure(path: str, rounds: int) -> Dict[str, float]:
    """Median seconds of each way of reading ``path``, rounds interleaved."""
    bodies = batch_bodies(path)
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = os.path.join(tmp, "copy.jsonl")
        write_jsonl(open_trace(path), jsonl)
        lines = Path(jsonl).read_bytes().splitlines(keepends=True)
        ways: Dict[str, Callable[[], int]] = {
            "marshal.loads, batches of 128": lambda: marshal_batches(bodies),
            "open_trace (tagged: marshal)": lambda: count(open_trace(path)),
            "open_trace (safe decoder)": lambda: count(TraceReader(path, use_key=False)),
            "json.loads, one per line": lambda: json_lines(lines),
            "open_trace (JSON Lines)": lambda: count(open_trace(jsonl)),
        }
        times: Dict[str, List[float]] = {name: [] for name in ways}
        for way in ways.values():
            way()  # warm-up
        calls = {"marshal": marshal_batches(bodies), "json": len(lines), "binary": sum(1 for _ in open_trace(path)),
                 "jsonl": sum(1 for _ in open_trace(jsonl))}
        assert len(set(calls.values())) == 1, calls
        for _ in range(rounds):
            for name, way in ways.items():
                t0 = time.perf_counter_ns()
                way()
                times[name].append((time.perf_counter_ns() - t0) / 1e9)
    n = next(iter(calls.values()))
    return {"calls": n, **{name: statistics.median(ts) for name, ts in times.items()}}


def report(path: str, result: Dict[str, float], rounds: int) -> None:
    n = result.pop("calls")
    print(f"{path}: {n:,} calls, {os.path.getsize(path):,} bytes; median of {rounds} interleaved rounds")
    for name, seconds in result.items():
        print(f"  {name:<32} {n / seconds:>12,.0f} calls/s")
    base_b, base_j = result["marshal.loads, batches of 128"], result["json.loads, one per line"]
    print(f"  open_trace / marshal.loads:  tagged {base_b / result['open_trace (tagged: marshal)']:.2f}x, "
          f"safe decoder {base_b / result['open_trace (safe decoder)']:.2f}x (target >= 0.5x)")
    print(f"  open_trace (JSON Lines) / json.loads: {base_j / result['open_trace (JSON Lines)']:.2f}x")


def simulated(folder: str, profile: str, calls: int) -> str:
    out = os.path.join(folder, f"{profile}-{calls}.rpct")
    subprocess.run([sys.executable, str(REPO / "run_bench.py"), "simulate", "--profile", profile,
                    "--calls", str(calls), "--out", out], check=True, capture_output=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", help="binary traces (default: simulated dict and study profiles)")
    parser.add_argument("--calls", type=int, default=300_000, help="calls of each simulated trace")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print("(ratios within a trace come from the same interleaved rounds; the machine may be shared)")
    with tempfile.TemporaryDirectory() as tmp:
        traces = args.traces or [simulated(tmp, profile, args.calls) for profile in ("dict", "study")]
        for path in traces:
            report(path, measure(path, args.rounds), args.rounds)


if __name__ == "__main__":
    main()
