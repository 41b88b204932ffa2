"""Reports from benchmark results: a terminal table, PNG charts and one self-contained report.html.

``build(suite, folder)`` writes the charts and the report into a folder; the commands
(``run_bench.py`` and ``run_bench.py report``) call it after a run or on a saved results.json.
"""

from __future__ import annotations

import os
from typing import List

from rpcbench.results import Suite

from .capacity import DEFAULT_OPTIONS, ReportOptions
from .charts import write_charts
from .decision import decision
from .html import write_report
from .table import fit_lines, format_table

__all__ = ["ReportOptions", "build", "fit_lines", "format_table", "verdict_lines", "write_charts", "write_report"]


def build(suite: Suite, folder: str, options: ReportOptions = DEFAULT_OPTIONS) -> str:
    """Write the charts and report.html into ``folder`` (created if needed); return the report's path."""
    os.makedirs(folder, exist_ok=True)
    return write_report(suite, folder, write_charts(suite, folder), options)


def verdict_lines(suite: Suite, options: ReportOptions = DEFAULT_OPTIONS) -> List[str]:
    """The verdict for the terminal's last lines (rule, recommendation, caveats)."""
    return decision(suite, options).verdict.lines()
