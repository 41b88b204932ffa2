"""The wire model's cost and effect: a batched size pass against a per-call one, and per-packet against
per-message bytes for the default codecs.

    python bench/wire.py [--calls 100000] [--rounds 3] [--policy tick:50+mtu:1200] [--cache DIR]

On the bundled sample and on a simulated ``--calls``-call trace (``run_bench.py simulate --seed 2``,
cached in ``--cache``, default /tmp/rpcbench-wire/):

1. **Cost**: the CPU seconds of the size pass (``--sizes-only``, no floor, in this process: ``--jobs 0``,
   so other processes' load does not count) of the default codecs with ``--wire per-call`` and with
   ``--wire POLICY``, in interleaved rounds (A, B, A, B...) so that a shared machine's drift hits both
   alike; the median round of each and their ratio.
2. **Effect**: per codec, payload bytes per call sent one call per packet and batched under POLICY
   (framed with LEB128 lengths, compressors on each packet's whole payload), and their ratio.

Also printed: the 1-minute load average (other processes compete for the same CPUs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import _common  # noqa: F401  (puts the repository on sys.path)
from rpcbench.config import DEFAULT_CODECS, DEFAULT_TRACE, RunConfig
from rpcbench.pipeline import run_benchmark
from rpcbench.simulate import simulate_profile
from rpcbench.wire import parse_policies


def simulated(calls: int, cache: Path) -> str:
    """A study battle of ``calls`` calls, seed 2, written once into ``cache``."""
    from rpc_capture import TraceWriter

    path = cache / f"study-{calls}-seed2.rpct"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        with TraceWriter(str(path), {"generator": "bench/wire.py"}) as writer:
            for call in simulate_profile("study", calls, 2):
                writer.write(call)
    return str(path)


def size_pass(trace: str, wire: str) -> Tuple[float, Any]:
    """CPU seconds of this process for one size pass of the default codecs under ``wire`` (the pass runs
    here, --jobs 0, so that is all its work, whatever else the machine runs), and its results."""
    config = RunConfig(trace=trace, codecs=DEFAULT_CODECS, jobs=0, sizes_only=True, floor=False,
                       wire=parse_policies(wire))
    started = time.process_time()
    suite = run_benchmark(config)
    return time.process_time() - started, suite


def cost(trace: str, policy: str, rounds: int) -> Any:
    """Interleaved rounds of per-call and batched size passes; the last batched run's results."""
    times: Dict[str, List[float]] = {"per-call": [], policy: []}
    suite = None
    for _ in range(rounds):
        for wire in times:
            seconds, suite = size_pass(trace, wire)
            times[wire].append(seconds)
    per_call, batched = (statistics.median(times[w]) for w in times)
    print(f"  size pass CPU, median of {rounds}: per-call {per_call:.2f} s, {policy} {batched:.2f} s: "
          f"{batched / per_call:.2f}x (rounds: {', '.join(f'{t:.2f}' for t in times['per-call'])} | "
          f"{', '.join(f'{t:.2f}' for t in times[policy])}); load {os.getloadavg()[0]:.1f}")
    return suite


def effect(trace: str, policy: str) -> None:
    """Per codec: payload bytes per call per message and per packet under ``policy``."""
    _, suite = size_pass(trace, f"per-call,{policy}")
    print(f"  {'codec':<20} {'per message':>12} {'per packet':>11} {'ratio':>6} {'packets':>8}")
    for r in suite.results:
        rows = {w.wire: w for w in r.wire}
        if len(rows) < 2:
            print(f"  {r.codec:<20} no figures ({r.error or 'failed'})")
            continue
        one, batched = rows["per-call"], rows[policy]
        a, b = one.payload_bytes / one.calls, batched.payload_bytes / batched.calls
        print(f"  {r.codec:<20} {a:>10.1f} B {b:>9.1f} B {b / a:>5.2f}x {batched.packets:>8,}")


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--policy", default="tick:50+mtu:1200")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/rpcbench-wire"))
    args = parser.parse_args(argv)
    for name, trace in (("bundled sample", str(DEFAULT_TRACE)),
                        (f"simulated {args.calls:,} calls", simulated(args.calls, args.cache))):
        print(f"{name} ({trace}):")
        cost(trace, args.policy, args.rounds)
        effect(trace, args.policy)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
