"""Agreement: rpcbench's encode/decode us per call against pyperf's, same codec, same calls.

    python bench/agreement.py [--trace FILE] [--calls N] [--codecs LIST] [--pyperf="OPTIONS"] [--harness="OPTIONS"]

The first N calls of the trace (default 5,000 of the bundled sample) are written to a
temporary trace, so both tools replay exactly the same calls in the same order:

1. harness: ``run_bench.py --trace T --sample N --no-tails --no-memory`` plus ``--harness``
   options (its defaults otherwise: fresh worker processes, calibrated batches, median of
   the rounds);
2. pyperf: ``bench/_pyperf_codec.py`` run by pyperf's own Runner (worker processes,
   loop calibration, warm-ups; ``--pyperf`` options, default ``--processes 3 --values 3``),
   timing a bare ``for m in msgs: enc(m)`` loop over the calls the codec can encode;
3. harness again, so that drift of a shared machine during the pyperf run shows.

Printed per codec and op: the harness figure (median of the rounds of both harness runs),
pyperf's median, and harness/pyperf - 1 in %. The issue's target is within 5 %.
"drift" is run 2 / run 1 - 1 of the harness: when it is large, the machine, not the
tool, decides the difference.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import pyperf

import _common

TARGET = 5.0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", default=_common.BUNDLED_TRACE, help="trace (default: the bundled sample)")
    p.add_argument("--calls", type=int, default=5000, help="first N calls of the trace (default: 5000)")
    p.add_argument("--codecs", default=_common.DEFAULT_IDS, help="codec ids (default: run_bench.py's default set)")
    p.add_argument("--pyperf", default="--processes 3 --values 3", help="options for pyperf (default: %(default)s)")
    p.add_argument("--harness", default="", help="extra run_bench.py options, e.g. --harness='--repeat 40'")
    args = p.parse_args()
    print(f"{_common.cpu_note()}; pyperf {pyperf.__version__}")
    with tempfile.TemporaryDirectory() as tmp:
        trace = _common.write_trace(_common.first_calls(args.trace, args.calls), os.path.join(tmp, "calls.rpct"))
        harness_args = ["--trace", trace, "--codecs", args.codecs, "--sample", str(args.calls),
                        "--no-tails", "--no-memory", "--no-report", "--quiet", *shlex.split(args.harness)]
        t0 = time.perf_counter()
        first, wall1 = _common.run_bench(harness_args, os.path.join(tmp, "h1"))
        print(f"harness run 1: {wall1:.0f} s", flush=True)
        ids = [r.codec for r in first.results if r.encode]
        counts = ",".join(f"{r.codec}={r.encode.calls}" for r in first.results if r.encode)
        out = os.path.join(tmp, "pyperf.json")
        cmd = [sys.executable, os.path.join(os.path.dirname(__file__), "_pyperf_codec.py"), "--trace", trace,
               "--codec-ids", ",".join(ids), "--counts", counts, "--quiet", "-o", out, *shlex.split(args.pyperf)]
        t1 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        print(f"pyperf: {time.perf_counter() - t1:.0f} s", flush=True)
        second, wall2 = _common.run_bench(harness_args, os.path.join(tmp, "h2"))
        print(f"harness run 2: {wall2:.0f} s; total {time.perf_counter() - t0:.0f} s\n", flush=True)
        suite = pyperf.BenchmarkSuite.load(out)
    pyperf_us = {b.get_name(): b.median() * 1e6 for b in suite.get_benchmarks()}
    rows, worst = [], (0.0, "")
    for cid in ids:
        row = [cid, first.result(cid).encode.calls]
        for op in ("encode", "decode"):
            t1, t2 = getattr(first.result(cid), op), getattr(second.result(cid), op)
            harness = statistics.median(t1.rounds_ns + t2.rounds_ns) / 1000
            ref = pyperf_us[f"{cid} {op}"]
            diff = (harness / ref - 1) * 100
            worst = max(worst, (abs(diff), f"{cid} {op} {diff:+.1f} %"))
            row += [f"{harness:.3f}", f"{ref:.3f}", f"{diff:+.1f}", f"{(t2.median_us / t1.median_us - 1) * 100:+.1f}"]
        rows.append(row)
    print(f"harness options: {args.harness or 'defaults'}; pyperf options: {args.pyperf}")
    print(f"same {args.calls:,} calls for both (first calls of {args.trace}); us per call")
    print(_common.table(["codec", "calls", "enc harness", "enc pyperf", "enc diff %", "enc drift %",
                         "dec harness", "dec pyperf", "dec diff %", "dec drift %"], rows))
    outside = [r[0] + " " + op for r in rows for op, i in (("encode", 4), ("decode", 8)) if abs(float(r[i])) > TARGET]
    print(f"\ndiff = harness/pyperf - 1 (target within {TARGET:.0f} %); worst: {worst[1]}")
    print("outside target: " + (", ".join(outside) if outside else "none"))


if __name__ == "__main__":
    main()
