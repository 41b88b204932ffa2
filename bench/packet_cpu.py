"""Encode and decode CPU per call sent alone against sent batched in whole packets, for the default codecs.

    python bench/packet_cpu.py [--trace FILE] [--policy tick:50+mtu:1200] [--repeat 20] [--processes 1]

One run of the harness (``--wire per-call,POLICY``, timing as a normal run does it) on the bundled sample by
default. Per codec: the median µs per call of encode and decode per message, the same on whole packets of
POLICY (encode + LEB128 framing + one compress per packet; decompress + unframe + decode, docs/wire.md), and
batched / per message as the median of round-by-round ratios: both are timed in the same round of the same
codec, so a shared machine's drift cancels out of the ratio. Also printed: calls per packet of the windows
timed, and the 1-minute load average (other processes compete for the same CPUs).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import List

import _common  # noqa: F401  (puts the repository on sys.path)
from rpcbench.config import DEFAULT_CODECS, DEFAULT_TRACE, RunConfig
from rpcbench.pipeline import run_benchmark
from rpcbench.wire import parse_policies


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default=str(DEFAULT_TRACE))
    parser.add_argument("--policy", default="tick:50+mtu:1200")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--processes", type=int, default=1)
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    suite = run_benchmark(RunConfig(trace=args.trace, codecs=DEFAULT_CODECS, repeat=args.repeat, floor=False,
                                    processes=args.processes, tails=False, memory=False,
                                    wire=parse_policies(f"per-call,{args.policy}")))
    print(f"{args.trace}: CPU per call, per message against whole packets of {args.policy} "
          f"(load {load:.1f} before, {os.getloadavg()[0]:.1f} after)")
    print(f"  {'codec':<20} {'encode µs':>9} {'packets':>8} {'ratio':>6}   {'decode µs':>9} {'packets':>8} "
          f"{'ratio':>6}   calls/packet")
    for r in suite.results:
        cpu = next((w.cpu for w in r.wire if w.wire == args.policy), None)
        encode, decode = (cpu.encode, cpu.decode) if cpu else (None, None)
        if not (r.encode and r.decode and cpu and encode and decode):
            print(f"  {r.codec:<20} not timed ({r.error or (cpu and cpu.error) or 'failed'})")
            continue
        print(f"  {r.codec:<20} {r.encode.median_us:>9.2f} {encode.median_us:>8.2f} {encode.ratio_to(r.encode):>5.2f}x"
              f"   {r.decode.median_us:>9.2f} {decode.median_us:>8.2f} {decode.ratio_to(r.decode):>5.2f}x"
              f"   {cpu.calls / cpu.packets:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
