"""``run_bench.py report RESULTS``: rebuild the charts and report.html from a saved results.json."""

from __future__ import annotations

import argparse
import os
from typing import List

from rpcbench.reports import build, decide, terminal_text
from rpcbench.results import load

from .options import add_report_options, report_options, run_report_defaults, table_width
from .naming import program


def main(argv: List[str]) -> int:
    """``report RESULTS_DIR_OR_JSON [--out DIR]``: print the table and rebuild charts + report.html."""
    parser = argparse.ArgumentParser(
        prog=program("report"), description="Rebuild the charts and report.html from a saved results.json, with "
        "the run's own verdict and capacity options (--transport, --goal, --ccu...) unless given here.")
    parser.add_argument("results", metavar="RESULTS_DIR_OR_JSON", help="a results.json or the folder holding one")
    parser.add_argument("--out", metavar="DIR", help="where to write the report (default: next to results.json)")
    add_report_options(parser)
    suite = load(parser.parse_args(argv).results)
    parser.set_defaults(**run_report_defaults(suite.command))  # the run's own options, unless given here
    args = parser.parse_args(argv)
    options = report_options(args)
    decided = decide(suite, options)  # a bad --baseline stops here, before anything is written
    folder = args.out or (args.results if os.path.isdir(args.results) else os.path.dirname(args.results) or ".")
    path = build(decided, folder, args.charts)
    print(terminal_text(decided, table_width()))
    print(f"report: {path}")
    return 0
