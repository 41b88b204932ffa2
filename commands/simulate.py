"""``run_bench.py simulate``: write a simulated battle trace (see :mod:`rpcbench.simulate`)."""

from __future__ import annotations

import argparse
import os
from typing import Iterator, List, Optional

from rpc_capture import Call, TraceWriter, write_jsonl
from rpcbench.errors import BenchError
from rpcbench.simulate import DEFAULT_PROFILE, PROFILES, TICKS_PER_S, capture_start, json_size, simulate_profile

from .options import whole_number
from .naming import program


def main(argv: Optional[List[str]] = None) -> int:
    """``run_bench.py simulate``: write a simulated battle trace and print a one-line summary."""
    parser = argparse.ArgumentParser(
        prog=program("simulate"),
        description="Write a trace of simulated real-time battle RPC traffic (5v5 on a 10 Hz server tick). "
                    "The same --profile, --calls and --seed always give the same bytes.")
    parser.add_argument("--profile", choices=sorted(PROFILES), default=DEFAULT_PROFILE,
                        help="study: positional args of small ints, short strings and quantized floats, every "
                        "event broadcast to the room, like the 2015 study's traffic (samples/battle.rpct); dict: "
                        "named args with full-precision floats, creeps and towers, area-of-interest fan-out "
                        "(samples/battle_dict.rpct). See docs/simulate.md (default: %(default)s)")
    parser.add_argument("--calls", type=whole_number(0), default=20000, help="number of calls to write (default 20000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed: players, fights, start time (default 1)")
    parser.add_argument("--tick-hz", type=whole_number(1), default=TICKS_PER_S,
                        help="the server's tick: it sends each tick's calls together, at this rate; the battle's "
                        "rates are per tick, so its pace follows (default %(default)s, the bundled samples')")
    parser.add_argument("--out", default="battle.rpct",
                        help="file to write (default battle.rpct); a name ending in .jsonl implies --jsonl")
    parser.add_argument("--gzip", action="store_true", help="gzip the binary trace (readers detect it)")
    parser.add_argument("--jsonl", action="store_true", help="write JSON Lines instead of the binary trace format")
    args = parser.parse_args(argv)
    jsonl = args.jsonl or args.out.endswith(".jsonl")
    if jsonl and args.gzip:
        raise BenchError("--gzip applies to binary traces only, not JSON Lines")
    total = 0

    def measured() -> Iterator[Call]:
        nonlocal total
        for call in simulate_profile(args.profile, args.calls, args.seed, args.tick_hz):
            total += json_size(call)
            yield call

    try:
        if jsonl:
            write_jsonl(measured(), args.out)
        else:
            meta = {"game": "rpcbench battle simulator", "build": PROFILES[args.profile].version, "seed": args.seed,
                    "calls": args.calls, "capture_start": capture_start(args.seed), "generator": "rpcbench.simulate",
                    "profile": args.profile,
                    **({"tick_hz": args.tick_hz} if args.tick_hz != TICKS_PER_S else {})}
            with TraceWriter(args.out, meta, compresslevel=6 if args.gzip else None) as writer:
                for call in measured():
                    writer.write(call)
    except OSError as e:
        raise BenchError(f"cannot write {args.out}: {e.strerror or e}") from None
    mean = total / args.calls if args.calls else 0.0
    print(f"wrote {args.calls} calls to {args.out} ({os.path.getsize(args.out)} bytes); "
          f"mean {mean:.1f} B compact JSON per call")
    return 0
