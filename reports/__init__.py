"""Reports from benchmark results: a terminal table, PNG charts and one self-contained report.html.

``build(suite, folder)`` is what the benchmark runner calls after a run; ``main`` is the
``run_bench.py report RESULTS`` subcommand, which rebuilds them from a saved results.json.
"""

from __future__ import annotations

import argparse
import os
from typing import List

from rpcbench.results import Suite, load

from .charts import write_charts
from .html import write_report
from .table import format_table

__all__ = ["build", "format_table", "main", "write_charts", "write_report"]


def build(suite: Suite, folder: str) -> str:
    """Write the charts and report.html into ``folder`` (created if needed); return the report's path."""
    os.makedirs(folder, exist_ok=True)
    return write_report(suite, folder, write_charts(suite, folder))


def main(argv: List[str]) -> int:
    """``report RESULTS_DIR_OR_JSON [--out DIR]``: print the table and rebuild charts + report.html."""
    parser = argparse.ArgumentParser(
        prog="run_bench.py report", description="Rebuild the charts and report.html from a saved results.json.")
    parser.add_argument("results", metavar="RESULTS_DIR_OR_JSON", help="a results.json or the folder holding one")
    parser.add_argument("--out", metavar="DIR", help="where to write the report (default: next to results.json)")
    args = parser.parse_args(argv)
    suite = load(args.results)
    folder = args.out or (args.results if os.path.isdir(args.results) else os.path.dirname(args.results) or ".")
    print(format_table(suite))
    print(f"\nreport: {build(suite, folder)}")
    return 0
