"""Reports from benchmark results: a terminal table, one self-contained report.html (charts inline
as SVG) and report.md, a Markdown summary for a pull request or design doc.

``build(suite, folder)`` writes report.html and report.md into a folder; the commands
(``run_bench.py`` and ``run_bench.py report``) call it after a run or on a saved results.json.
"""

from __future__ import annotations

import os
from typing import List

from rpcbench.results import Suite

from .capacity import DEFAULT_OPTIONS, ReportOptions
from .charts import render_charts
from .decision import decision
from .html import write_report
from .markdown import write_markdown
from .table import fit_lines, format_table

__all__ = ["ReportOptions", "build", "fit_lines", "format_table", "render_charts", "verdict_lines", "write_markdown",
           "write_report"]


def build(suite: Suite, folder: str, options: ReportOptions = DEFAULT_OPTIONS) -> str:
    """Write report.html (charts inline) and report.md into ``folder`` (created if needed); return report.html's
    path."""
    os.makedirs(folder, exist_ok=True)
    write_markdown(suite, folder, options)
    return write_report(suite, folder, render_charts(suite), options)


def verdict_lines(suite: Suite, options: ReportOptions = DEFAULT_OPTIONS) -> List[str]:
    """The verdict for the terminal's last lines (rule, recommendation, caveats)."""
    return decision(suite, options).verdict.lines()
