"""Reports from benchmark results: a terminal table, one self-contained report.html (charts inline
as SVG) and report.md, a Markdown summary for a pull request or design doc.

``build(suite, folder)`` writes report.html and report.md into a folder; the commands
(``run_bench.py`` and ``run_bench.py report``) call it after a run or on a saved results.json.
"""

from __future__ import annotations

import os
from typing import Optional

from rpcbench.results import Suite

from .capacity import ReportOptions
from .charts import render_charts
from .decision import Decision, decision
from .html import write_report
from .markdown import write_markdown
from .table import fit_lines, format_table

__all__ = ["Decision", "ReportOptions", "build", "decision", "fit_lines", "format_table", "render_charts",
           "write_markdown", "write_report"]


def build(suite: Suite, folder: str, decided: Optional[Decision] = None) -> str:
    """Write report.html (charts inline) and report.md into ``folder`` (created if needed); return report.html's
    path. ``decided``: the run's :func:`decision` for the user's options, made once by the caller, which also
    prints its verdict (default: for the default options)."""
    os.makedirs(folder, exist_ok=True)
    decided = decided or decision(suite)
    write_markdown(suite, folder, decided)
    return write_report(suite, folder, render_charts(suite), decided)
