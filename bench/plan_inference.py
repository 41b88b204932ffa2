"""What a run's plan takes with its schema inference read in one watched process or in two halves.

    python bench/plan_inference.py [--trace FILE] [--codecs IDS] [--rounds N]

The plan (rpcbench.plan.make_plan: the traces indexed, the dictionaries trained, the schema
inferred from every call, the codecs made) with ``meanwhile`` the imports a default run does
while it waits (reports.imports_ahead: scipy.stats, matplotlib), then those the plan left (a
run does them in its look at the CPUs before timing, which lasts BUSY_WINDOW_S anyway). Two
sides, taking turns round by round, each in a fresh process: ``--jobs 1`` (the inference in one
watched read) and ``--jobs 2`` (two reads, each through half the calls, their shapes merged:
rpcbench/training.py). Printed, medians: the plan's wall seconds, the imports it left, what
the run spends on both (the plan, and the imports left past the look at the CPUs), and CPU
seconds of the process and its children (the work, whatever the machine's other load leaves).
"""

from __future__ import annotations

import argparse
import functools
import statistics
import subprocess
import sys
from typing import Dict, List, Tuple

from _common import REPO, side_by_side, table
from rpcbench.worker import BUSY_WINDOW_S

DEFAULT_TRACE = "/tmp/rpcbench-core/dict-300000-s1-v3.rpct"  #: `run_bench.py simulate --profile dict --calls 300000`


def child(argv: List[str]) -> None:
    """In a fresh process: time the plan of ``argv`` (run_bench options); print CPU and wall seconds."""
    import os
    import time

    from rpcbench.commands.bench import build_parser, config_from
    from rpcbench.meanwhile import Meanwhile
    from rpcbench.plan import make_plan
    from rpcbench.progress import quiet
    from rpcbench.reports import imports_ahead

    config = config_from(build_parser().parse_args(argv), argv)
    registry = config.registry()
    cpu, started = sum(os.times()[:4]), time.perf_counter()
    meanwhile = Meanwhile(imports_ahead(True))
    make_plan(config, registry, quiet, meanwhile)
    planned = time.perf_counter()
    meanwhile.rest()  # what the plan left (a run does it in its look at the CPUs before timing)
    print(sum(os.times()[:4]) - cpu, planned - started, time.perf_counter() - planned)


def side(argv: List[str], seen: List[Tuple[float, float, float]]) -> Tuple[float, None]:
    """One plan timed in a fresh process: what the run spends on it (its figures appended to ``seen``)."""
    out = subprocess.run([sys.executable, __file__, "--child", *argv], cwd=REPO, check=True, capture_output=True,
                         text=True).stdout.split()
    cpu, plan, rest = map(float, out[-3:])
    seen.append((cpu, plan, rest))
    return plan + max(0.0, rest - BUSY_WINDOW_S), None


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=DEFAULT_TRACE)
    parser.add_argument("--codecs", default=None, help="run_bench --codecs (default: the default codecs)")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    run = ["--trace", args.trace, *(["--codecs", args.codecs] if args.codecs else [])]
    seen: Dict[str, List[Tuple[float, float, float]]] = {"1": [], "2": []}
    sides = {f"--jobs {jobs}": functools.partial(side, [*run, "--jobs", jobs], seen[jobs]) for jobs in seen}
    found = side_by_side(sides, args.rounds)
    rows = [[name, *(f"{statistics.median(s[i] for s in seen[name[-1]]):.3f}" for i in (1, 2)),
             f"{found[name]['wall']:.3f}", f"{statistics.median(s[0] for s in seen[name[-1]]):.3f}",
             f"{found[name]['load']:.2f}"] for name in sides]
    print(table(["side", "plan s", "imports left s", "run spends s", "CPU s", "load"], rows))
    one, two = (found[name]["wall"] for name in sides)
    print(f"two reads / one read: {two / one:.3f} (what the run spends; medians of {args.rounds} rounds, interleaved)")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2:])
    else:
        sys.exit(main(sys.argv[1:]))
