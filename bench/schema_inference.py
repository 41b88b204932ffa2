"""What inferring the typed codecs' schema from every call of a trace costs a run.

    python bench/schema_inference.py [--trace FILE ...] [--rounds N]

A run that infers the schema (no --proto, bundled schemas lacking the trace's methods) reads
every call once (rpcbench/training.py: the read that takes the dictionaries' first 20 % goes on
to the end of each trace) and gives each to rpcbench.inference.Inference. For each trace, three
passes take turns (order rotating each round, so the machine's drift hits them alike), each
timed whole with perf_counter_ns:

* held: the dictionaries' read alone (the first 20 % of the calls), what a run without
  inference reads;
* read: every call read, nothing done with it;
* infer: every call read and added to the schema inference, what the run does.

Printed: medians over rounds in seconds, the inference pass's extra time over ``held`` and,
beside it, the run's size pass (``--sizes-only --no-floor``, default codecs, timed once after the
rounds, from results.json's ``size_pass_s``): the share of the run the inference adds.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

from _common import REPO  # noqa: F401  (first: it puts this checkout's rpcbench on the path)
from rpc_capture import open_trace
from rpcbench.config import DEFAULT_TRACE, RunConfig
from rpcbench.inference import Inference, infer_from

HELD = 0.2  #: the dictionaries' default --train-fraction


def passes(trace: str, calls: int) -> Dict[str, Callable[[], None]]:
    """The three passes over one trace (see the module's docstring)."""
    config = RunConfig(trace=trace)

    def held() -> None:
        for _ in itertools.islice(open_trace(trace), int(calls * HELD)):
            pass

    def read() -> None:
        for _ in open_trace(trace):
            pass

    def infer() -> None:
        inferring = Inference(config)
        infer_from(iter(open_trace(trace)), inferring.shapes)
        inferring.schema()

    return {"held": held, "read": read, "infer": infer}


def size_pass_s(trace: str) -> float:
    """The size pass of a default run with --sizes-only --no-floor, in seconds (its results.json)."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, str(REPO / "run_bench.py"), "--trace", trace, "--sizes-only", "--no-floor",
                        "--no-report", "--quiet", "--out", f"{tmp}/run"], cwd=REPO, check=True, capture_output=True)
        return json.loads(Path(f"{tmp}/run/results.json").read_text())["settings"]["size_pass_s"]


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", nargs="+", default=[str(DEFAULT_TRACE)])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    print(f"{'trace':<22} {'calls':>8} {'held s':>8} {'read s':>8} {'infer s':>8} {'added s':>8} "
          f"{'size pass s':>11} {'added/size pass':>15}")
    for trace in args.trace:
        calls = sum(1 for _ in open_trace(trace))
        jobs = passes(trace, calls)
        times: Dict[str, List[float]] = {name: [] for name in jobs}
        for r in range(args.rounds):
            names = list(jobs)
            for name in names[r % len(names):] + names[:r % len(names)]:
                started = time.perf_counter_ns()
                jobs[name]()
                times[name].append((time.perf_counter_ns() - started) / 1e9)
        med = {name: statistics.median(t) for name, t in times.items()}
        added = med["infer"] - med["held"]
        sized = size_pass_s(trace)
        print(f"{Path(trace).name:<22} {calls:>8,} {med['held']:>8.2f} {med['read']:>8.2f} {med['infer']:>8.2f} "
              f"{added:>8.2f} {sized:>11.1f} {added / sized:>15.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
