"""How fast traces are read: calls per second, next to what the same records cost without decoding.

Prints, for a trace (default: the bundled sample), the median of several rounds of:

* full read: ``open_trace`` yielding every call with its args fully decoded;
* framing only: the same file read record by record with CRC checks, values not decoded
  (the floor set by I/O, gzip and framing);
* bare loop: a Python ``for`` over the same calls already in a list (the floor of any
  Python consumer);
* JSON Lines: the same calls read from a JSON Lines copy.

Usage: python bench/trace_read.py [TRACE] [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rpc_capture import open_trace, write_jsonl  # noqa: E402


def framing_only(path: str) -> int:
    """Read every record with its header, length and CRC checks, decoding no value; returns 0."""
    for _ in open_trace(path).calls(wanted=()):
        pass
    return 0


def full_read(path: str) -> int:
    calls = 0
    for _ in open_trace(path):
        calls += 1
    return calls


def bare_loop(calls: list) -> int:
    n = 0
    for _ in calls:
        n += 1
    return n


def best_of(func, arg, rounds: int) -> tuple:
    """(calls, median seconds) over rounds."""
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        n = func(arg)
        times.append((time.perf_counter_ns() - t0) / 1e9)
    return n, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", nargs="?",
                        default=str(Path(__file__).resolve().parent.parent / "samples" / "battle.rpct"))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    calls = list(open_trace(args.trace))
    with tempfile.TemporaryDirectory() as tmp:
        jsonl = str(Path(tmp) / "copy.jsonl")
        write_jsonl(calls, jsonl)
        rows = [
            ("full read (binary)", *best_of(full_read, args.trace, args.rounds)),
            ("framing only, no decode", len(calls), best_of(framing_only, args.trace, args.rounds)[1]),
            ("bare loop over a list", *best_of(bare_loop, calls, args.rounds)),
            ("full read (JSON Lines)", *best_of(full_read, jsonl, args.rounds)),
        ]
    print(f"trace: {args.trace} ({len(calls):,} calls), median of {args.rounds} rounds")
    for name, n, seconds in rows:
        print(f"  {name:<26} {n / seconds:>13,.0f} calls/s   {seconds * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
