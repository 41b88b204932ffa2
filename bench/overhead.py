"""Harness overhead: rpcbench's timed rounds against a bare hand-written loop, per codec.

    python bench/overhead.py [--trace FILE] [--calls N] [--codecs LIST] [--repeat N] [--min-time S]

For each codec (default: ``DEFAULT_CODECS`` of run_bench.py), in this one process:

* harness: a ``TimingJob`` on the first N calls of the trace, warmed up and calibrated
  (``--min-time``) as run_bench.py does, one ``run_round`` per repetition; its figure is
  the ns per call that round recorded;
* bare: ``for m in msgs: enc(m)`` (and ``dec``) between two ``perf_counter_ns`` reads,
  GC off, over the very same encodable calls and payloads, with the same loop count
  (``bench/_common.py: bare_ns``).

The two alternate (harness first on even repetitions, bare first on odd ones). The
printed ratio is the median over repetitions of harness/bare measured back to back, so
machine drift cancels; medians of each side are shown too. A ratio of 1.00 is the
physical limit (the harness adds nothing to the loop); the issue's target is 0.97-1.05.
Per-connection streaming codecs (``+zlibstream``) are timed honestly on both sides:
fresh state per replay built outside the timer, one dict look-up per call to reach the
call's connection state.
"""

from __future__ import annotations

import argparse
import statistics
import time

import _common
from rpcbench.registry import Registry
from rpcbench.timing import TimingJob

LOW, HIGH = 0.97, 1.05


def measure(codec, calls, repeat: int, warmup: int, min_time: float) -> dict:
    """Interleaved harness and bare figures (ns per call) and back-to-back ratios, per op."""
    job = TimingJob(codec, calls)
    if job.error:
        return {"error": job.error}
    for _ in range(warmup):
        job.run_round(record=False)
    job.calibrate(min_time)
    n = job.loops * len(job.calls)
    items = {"encode": job.calls, "decode": job.payloads}
    for op in items:  # warm the bare loop too
        _common.bare_ns(codec, items[op], 1, op)
    out: dict = {op: {"harness": [], "bare": [], "ratio": []} for op in items}
    out["cpu"] = []  # wall/CPU time of the bare loops: 1.00 = it had a core to itself
    for r in range(repeat):
        bare = {}

        def bare_round() -> None:
            for op in items:
                c0 = time.thread_time_ns()
                bare[op] = _common.bare_ns(codec, items[op], job.loops, op) / n
                out["cpu"].append(bare[op] * n / max(time.thread_time_ns() - c0, 1))

        if r % 2:
            bare_round()
        job.run_round(record=True)
        if not r % 2:
            bare_round()
        for op in items:
            h = job.rounds[op][-1]
            out[op]["harness"].append(h)
            out[op]["bare"].append(bare[op])
            out[op]["ratio"].append(h / bare[op])
    out["loops"], out["calls"] = job.loops, len(job.calls)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", default=_common.BUNDLED_TRACE, help="trace (default: the bundled sample)")
    p.add_argument("--calls", type=int, default=20000, help="first N calls of the trace (default: 20000)")
    p.add_argument("--codecs", default=_common.DEFAULT_IDS, help="codec ids (default: run_bench.py's default set)")
    p.add_argument("--repeat", type=int, default=7, help="harness/bare pairs per codec (default: 7)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up rounds before calibration (default: 1)")
    p.add_argument("--min-time", type=float, default=0.05, help="calibrated batch length, s (default: 0.05)")
    args = p.parse_args()
    calls = _common.first_calls(args.trace, args.calls)
    registry = Registry.default()
    print(f"trace: {args.trace}, first {len(calls):,} calls; {args.repeat} interleaved pairs per codec, "
          f"min-time {args.min_time} s; {_common.cpu_note()}")
    rows, flagged, all_ratios = [], [], []
    started = time.perf_counter()
    for cid in args.codecs.split(","):
        m = measure(registry.create(cid), calls, args.repeat, args.warmup, args.min_time)
        if "error" in m:
            rows.append([cid, "-", "-", m["error"]] + [""] * 6)
            continue
        row = [cid, m["loops"], m["calls"]]
        for op in ("encode", "decode"):
            ratios = m[op]["ratio"]
            ratio = statistics.median(ratios)
            row += [f"{statistics.median(m[op]['harness']) / 1000:.3f}", f"{statistics.median(m[op]['bare']) / 1000:.3f}",
                    f"{ratio:.3f} [{min(ratios):.2f}-{max(ratios):.2f}]"]
            all_ratios.append(ratio)
            if not LOW <= ratio <= HIGH:
                flagged.append(f"{cid} {op} {ratio:.3f}")
        rows.append(row + [f"{statistics.median(m['cpu']):.2f}"])
        print(f"  done {cid} ({time.perf_counter() - started:.0f} s)", flush=True)
    print()
    print(_common.table(["codec", "loops", "calls", "enc harness us", "enc bare us", "enc ratio [min-max]",
                         "dec harness us", "dec bare us", "dec ratio [min-max]", "wall/cpu"], rows))
    print(f"\nratio = median over pairs of harness/bare (1.00 = no overhead; target {LOW}-{HIGH}); "
          f"{time.perf_counter() - started:.0f} s")
    print(f"median of all ratios: {statistics.median(all_ratios):.3f}; wall/cpu = bare loop's perf_counter time over its "
          "thread CPU time (1.00: it had a core to itself; above: other processes took the CPU mid-batch)")
    print("outside target: " + (", ".join(flagged) if flagged else "none"))


if __name__ == "__main__":
    main()
