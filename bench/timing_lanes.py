"""Timing lanes: the same timing with one lane (one codec at a time) and with two (two at once, each pinned to a
CPU of its own), taking turns, round after round.

    python bench/timing_lanes.py [--rounds 3] [--codecs LIST] [--trace FILE ...]

Per trace (default: the bundled sample and the bundled dict-profile sample) the plan and the size pass are made
once (``--no-floor``), then ``rpcbench.timing_stage.run_timing`` runs with ``--timing-lanes 1`` and ``2`` in
turns (``_common.side_by_side``). Printed per trace:

* the timing phase's seconds each way (medians of the rounds) and their ratio (target about 0.5x);
* per codec and operation, the median us per call of each way over all its timed rounds pooled, its ``±CI``
  (half the 95 % interval of the median, % of it), and the ratio 2 lanes / 1 lane; ``*`` marks a ratio more than
  2 % from 1, ``!`` one whose difference exceeds the two intervals' half-widths together; the count of timings
  more than 2 % apart; "runs": max/min of the codec's medians over the runs of one way (how far runs made the
  same way agree, the yardstick for the ratio);
* each codec's ratio to json (the report's: median of round-by-round ratios, per run, then the median over
  runs) each way, and their ratio;
* with two lanes, each codec's median on one CPU over its median on the other (its rounds split by the CPU each
  ran on), to show the CPUs alike.

Speed figures are ratios measured in one run, in turns: on a shared machine the absolute seconds swing.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from typing import Any, Dict, List, Tuple

import _common
from rpcbench.config import DICT_TRACE, RunConfig
from rpcbench.executors import open_executor
from rpcbench.plan import make_plan
from rpcbench.progress import quiet
from rpcbench.results import Timing
from rpcbench.size_pass import run_size_pass
from rpcbench.timing_stage import run_timing

WAYS = {"1 lane": 1, "2 lanes": 2}
OPS = ("encode", "decode")
CLOSE = 0.02  #: timings more than 2 % apart are counted


def timed_ways(trace: str, codecs: Tuple[str, ...], rounds: int) -> Tuple[Dict[str, Any], Dict[str, List[Dict]]]:
    """The timing stage of one plan and size pass, each way in turn: side_by_side's summary, and every run's answers."""
    config = RunConfig(trace=trace, codecs=codecs, floor=False)
    plan = make_plan(config, config.registry(), quiet)
    with open_executor(None, config.jobs, config.codec_timeout, quiet) as executor:
        size_pass = run_size_pass(plan, executor)
    runs: Dict[str, List[Dict]] = {way: [] for way in WAYS}

    def way(name: str) -> Any:
        def run() -> Tuple[float, Any]:
            lanes_plan = dataclasses.replace(plan, timing=dataclasses.replace(plan.timing, lanes=WAYS[name]))
            timed = run_timing(lanes_plan, size_pass, quiet)
            runs[name].append(timed.answers)
            return timed.seconds, None
        return run

    return _common.side_by_side({name: way(name) for name in WAYS}, rounds), runs


def pooled(runs: List[Dict], codec: str, op: str) -> Timing:
    """A codec's rounds of every run, as one timing."""
    rounds = [ns for answers in runs for ns in answers[codec]["rounds"][op]]
    return Timing(tuple(rounds), 0, 0)


def ci_pct(t: Timing) -> float:
    lo, hi, _ = t.ci_us
    return (hi - lo) / 2 / t.median_us * 100


def run_spread(runs: List[Dict], codec: str, op: str) -> str:
    """max/min of the codec's median over the runs of one way: how far runs of the same way agree."""
    medians = [statistics.median(answers[codec]["rounds"][op]) for answers in runs]
    return f"{max(medians) / min(medians):.3f}"


def codec_rows(runs: Dict[str, List[Dict]], codecs: List[str]) -> Tuple[List[List[str]], int, int]:
    """Per codec and op: each way's median and ±CI, the ratio, marks; how many differ > 2 % and beyond the CIs."""
    rows, apart, beyond = [], 0, 0
    for codec in codecs:
        for op in OPS:
            one, two = (pooled(runs[way], codec, op) for way in WAYS)
            ratio = two.median_us / one.median_us
            far = abs(ratio - 1) > CLOSE
            outside = abs(ratio - 1) * 100 > ci_pct(one) + ci_pct(two)
            apart, beyond = apart + far, beyond + outside
            rows.append([f"{codec} {op}", f"{one.median_us:.3f}", f"±{ci_pct(one):.1f}%",
                         run_spread(runs["1 lane"], codec, op), f"{two.median_us:.3f}", f"±{ci_pct(two):.1f}%",
                         run_spread(runs["2 lanes"], codec, op),
                         f"{ratio:.3f}{'*' if far else ''}{'!' if outside else ''}"])
    return rows, apart, beyond


def json_ratios(runs: Dict[str, List[Dict]], codecs: List[str]) -> List[List[str]]:
    """Each codec's ratio to json each way (per run the round-by-round median, then the median of runs)."""
    rows = []
    for codec in codecs:
        if codec == "json":
            continue
        cells = [codec]
        for op in OPS:
            each = [statistics.median(Timing(tuple(a[codec]["rounds"][op]), 0, 0).ratio_to(
                Timing(tuple(a["json"]["rounds"][op]), 0, 0)) for a in runs[way]) for way in WAYS]
            cells += [f"{each[0]:.3f}", f"{each[1]:.3f}", f"{each[1] / each[0]:.3f}"]
        rows.append(cells)
    return rows


def cpu_rows(runs: List[Dict], codecs: List[str]) -> List[List[str]]:
    """With two lanes: each codec's median on its first CPU over that on its second, and the rounds on each."""
    rows = []
    for codec in codecs:
        cells = [codec]
        for op in OPS:
            by_cpu: Dict[Any, List[float]] = {}
            for answers in runs:
                for cpu, ns in zip(answers[codec]["cpus"], answers[codec]["rounds"][op]):
                    by_cpu.setdefault(cpu, []).append(ns)
            (a, first), (b, second) = sorted(by_cpu.items())
            cells.append(f"{statistics.median(first) / statistics.median(second):.3f}")
        rows.append(cells + [f"cpu {a}: {len(first)}, cpu {b}: {len(second)}"])
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="runs of each way, in turns (default: 3)")
    p.add_argument("--codecs", default=_common.DEFAULT_IDS, help="codec ids (default: run_bench.py's default set)")
    p.add_argument("--trace", nargs="+", default=[_common.BUNDLED_TRACE, str(DICT_TRACE)],
                   help="traces (default: the bundled sample and the bundled dict-profile sample)")
    args = p.parse_args()
    codecs = tuple(args.codecs.split(","))
    if "json" not in codecs:
        codecs = ("json", *codecs)
    print(_common.cpu_note(), flush=True)
    for trace in args.trace:
        print(f"\n{trace}", flush=True)
        summary, runs = timed_ways(trace, codecs, args.rounds)
        one, two = (summary[way] for way in WAYS)
        print(f"timing phase: 1 lane {one['wall']:.2f} s (load {one['load']:.1f}), 2 lanes {two['wall']:.2f} s "
              f"(load {two['load']:.1f}): {two['wall'] / one['wall']:.2f}x")
        names = [c for c in runs["1 lane"][0] if all(not a[c].get("error") for w in WAYS for a in runs[w])]
        rows, apart, beyond = codec_rows(runs, names)
        print(_common.table(["codec op (us/call)", "1 lane", "±CI", "runs", "2 lanes", "±CI", "runs", "2/1"], rows))
        print(f"{apart} of {len(rows)} timings more than {CLOSE:.0%} apart (*); {beyond} apart by more than their "
              "two ±CI together (!)")
        print(_common.table(["x json", "enc 1", "enc 2", "2/1", "dec 1", "dec 2", "2/1"], json_ratios(runs, names)))
        print(_common.table(["2 lanes: CPU a / CPU b", "encode", "decode", "rounds"], cpu_rows(runs["2 lanes"], names)))
    print(f"\n{_common.cpu_note()}")


if __name__ == "__main__":
    sys.exit(main())
