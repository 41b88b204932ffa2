"""``run_bench.py compare OLD NEW``: what changed between two runs, per codec, and an optional CI gate."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import List

from rpcbench.reports.compare import ALPHA, DEFAULT_REFERENCE, MIN_EFFECT_PCT, TEST, compare
from rpcbench.reports.compare_report import (Runs, format_comparison, inconclusive_line, write_compare_html,
                                             write_compare_markdown)
from rpcbench.results import load
from .naming import program

#: exit status per gate outcome (docs/compare.md); 2 is bad input
EXIT = {"": 0, "passed": 0, "failed": 1, "inconclusive": 3}


def percent(text: str) -> float:
    """An argparse ``type`` for ``--fail-above``: a finite percentage of at least 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a percentage of at least 0, not {text[:40]}")
    return value


def main(argv: List[str]) -> int:
    """Print the comparison, write compare.html; exit 1 when ``--fail-above`` finds a change over it, 3 when it
    finds none but could not test a timing it guards (unless ``--allow-untested``), else 0."""
    parser = argparse.ArgumentParser(
        prog=program("compare"),
        description=f"Compare two runs per codec: bytes (exact) and encode/decode CPU, judged by each codec's "
                    f"ratio to a reference codec of the same run, with a {TEST} (alpha {ALPHA:g}). "
                    "Writes compare.html and compare.md (a pull-request comment).")
    parser.add_argument("old", metavar="OLD", help="the baseline run: its folder or its results.json")
    parser.add_argument("new", metavar="NEW", help="the run to judge: its folder or its results.json")
    parser.add_argument("--reference", metavar="CODEC", default=DEFAULT_REFERENCE,
                        help=f"codec the CPU ratios are to (default {DEFAULT_REFERENCE}; if a run lacks it, "
                             "the first codec both runs timed)")
    parser.add_argument("--fail-above", metavar="PCT", type=percent,
                        help="exit 1 when a codec's bytes, or its CPU ratio to the reference (significantly), "
                             "grew by more than PCT percent; exit 3 (inconclusive) when none did but a timing "
                             "could not be tested")
    parser.add_argument("--allow-untested", action="store_true",
                        help="with --fail-above: pass although some timings could not be tested (runs with "
                             "fewer than 2 process sets, a codec not timed in one run)")
    parser.add_argument("--min-effect", metavar="PCT", type=percent, default=MIN_EFFECT_PCT,
                        help=f"a CPU ratio change is called only when the test shows it exceeds PCT percent "
                             f"(default {MIN_EFFECT_PCT:g})")
    parser.add_argument("--out", metavar="DIR",
                        help="where to write compare.html and compare.md (default: NEW's folder)")
    args = parser.parse_args(argv)
    runs = Runs(args.old, args.new, load(args.old), load(args.new))
    comparison = compare(runs.old, runs.new, args.reference, fail_above=args.fail_above,
                         min_effect=args.min_effect, allow_untested=args.allow_untested)
    folder = args.out or (args.new if os.path.isdir(args.new) else os.path.dirname(args.new) or ".")
    print(format_comparison(runs, comparison))
    print(f"\ncompare.html: {write_compare_html(runs, comparison, folder)}")
    print(f"compare.md: {write_compare_markdown(runs, comparison, folder)}")
    if comparison.outcome == "inconclusive":
        print(inconclusive_line(comparison), file=sys.stderr)
    return EXIT[comparison.outcome]
