"""How often does ``run_bench.py compare --fail-above PCT`` fail two runs of the same build, and
does it catch a build whose codec got slower?

    python bench/compare_gate.py [--same 4] [--slower 2] [--fail-above 10] [-- RUN_BENCH_OPTIONS]

Runs ``run_bench.py`` on the bundled sample ``--same`` times with the ``jsonbuild`` plugin
(tests/data/jsonbuild.py: compact JSON like ``json``) and ``--slower`` times with a build of it
that spins 25 % of each call's own time more (14 to 20 % of what the harness measures), each
with json, msgpack and json+zlib-1 beside it (default timing: ``--repeat 15 --processes 3
--min-time 0.002 --sample 300``; options after ``--`` replace it). Then compares every ordered
pair of same-build runs (false alarms: the gate must pass) and every same -> slower pair (the
gate must fail on jsonbuild), printing each pair's largest CPU ratio change and the gate's
outcome, and a summary line for each.
"""

from __future__ import annotations

import argparse
import itertools
import runpy
import sys
import tempfile
from pathlib import Path
from typing import List, Sequence, Tuple

import _common
from rpcbench.reports.compare import Comparison, compare, gate
from rpcbench.results import Suite

CODECS = "json,msgpack,json+zlib-1,jsonbuild"
TIMING = ["--repeat", "15", "--processes", "3", "--min-time", "0.002", "--sample", "300"]
QUICK = ["--no-floor", "--no-tails", "--no-memory", "--no-report", "--quiet"]
write_build = runpy.run_path(str(_common.REPO / "tests" / "data" / "jsonbuild.py"))["write_build"]


def runs(folder: Path, build: str, extra_cpu: float, count: int, timing: List[str]) -> List[Suite]:
    """``count`` runs of one jsonbuild build, one after the other."""
    plugin = write_build(folder / build, extra_cpu, (",", ":"))
    return [_common.run_bench(["--codecs", CODECS, "--codec-path", str(plugin), *timing, *QUICK],
                              str(folder / f"{build}-{i}"))[0] for i in range(count)]


def worst_change(c: Comparison) -> Tuple[float, str]:
    """The largest CPU ratio change of a comparison, in %, and where (``msgpack decode``)."""
    return max(((t.ratio.change_pct, f"{ch.codec} {t.op}") for ch in c.codecs for t in ch.cpu if t.ratio),
               key=lambda pair: abs(pair[0]))


def judge(pairs: Sequence[Tuple[int, int, Suite, Suite]], fail_above: float) -> Tuple[List[List[str]], int]:
    """A table row per pair (runs, worst change, jsonbuild's changes, gate outcome) and how many failed."""
    rows, failed = [], 0
    for i, j, old, new in pairs:
        c = compare(old, new)
        violations = gate(c, fail_above)
        failed += bool(violations)
        change, where = worst_change(c)
        mine = next(ch for ch in c.codecs if ch.codec == "jsonbuild")
        rows.append([f"{i} -> {j}", f"{change:+.1f}% {where}",
                     " ".join(f"{t.op} {t.ratio.change_pct:+.1f}%" for t in mine.cpu if t.ratio),
                     "FAILED: " + "; ".join(f"{v.codec} {v.figure}" for v in violations) if violations else "passed"])
    return rows, failed


def main() -> None:
    argv = sys.argv[1:]
    timing = argv[argv.index("--") + 1:] if "--" in argv else TIMING
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--same", type=int, default=4, help="runs of the unchanged build (default 4)")
    p.add_argument("--slower", type=int, default=2, help="runs of the slower build (default 2)")
    p.add_argument("--fail-above", type=float, default=10.0, help="the gate's threshold, %% (default 10)")
    p.add_argument("--keep", metavar="DIR", help="keep the run folders in DIR (new) instead of a temporary one")
    args = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    print(_common.cpu_note())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.keep or tmp)
        same = runs(folder, "same", 0.0, args.same, timing)
        slower = runs(folder, "slower", 0.25, args.slower, timing)
    head = ("runs", "largest CPU ratio change", "jsonbuild", f"gate --fail-above {args.fail_above:g}")
    honest = [(i, j, same[i], same[j]) for i, j in itertools.permutations(range(len(same)), 2)]
    rows, false_alarms = judge(honest, args.fail_above)
    print(f"\nsame build twice (run_bench.py {' '.join(timing)}):\n{_common.table(head, rows)}")
    print(f"false alarms: {false_alarms} of {len(honest)} pairs")
    injected = [(i, j, same[i], s) for i in range(len(same)) for j, s in enumerate(slower)]
    rows, caught = judge(injected, args.fail_above)
    print(f"\nsame -> slower build (jsonbuild spins 25 % of each call's time more):\n{_common.table(head, rows)}")
    print(f"caught: {caught} of {len(injected)} pairs")


if __name__ == "__main__":
    main()
