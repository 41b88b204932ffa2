"""Reports from benchmark results: a terminal table, one self-contained report.html (charts inline
as SVG) and report.md, a Markdown summary for a pull request or design doc.

``decide(suite, options)`` makes the run's decision once; ``terminal_text(decision)`` is what the commands
print and ``build(decision, folder)`` writes report.html and report.md into a folder; the commands
(``run_bench.py`` and ``run_bench.py report``) call them after a run or on a saved results.json.
"""

from __future__ import annotations

import os
from typing import Callable, Optional, Tuple

from .capacity import ReportOptions, load_bootstrap
from .decision import Decision, decide
from .html import write_report
from .markdown import write_markdown
from .terminal import terminal_text

__all__ = ["Decision", "ReportOptions", "build", "decide", "imports_ahead", "terminal_text", "write_markdown",
           "write_report"]


def imports_ahead(charts: bool) -> Tuple[Callable[[], None], ...]:
    """What the outputs need imported, in pieces a run does while it would wait (its ``meanwhile``:
    :class:`rpcbench.meanwhile.Meanwhile`), not after its timing: scipy.stats for the traffic intervals (0.5 s)
    and, when the run draws ``charts``, matplotlib (0.4 s)."""
    return (load_bootstrap, _import_charts) if charts else (load_bootstrap,)


def _import_charts() -> None:
    from . import charts as _  # noqa: F401


def build(d: Decision, folder: str, charts: Optional[str] = None) -> str:
    """Write report.html (charts inline) and report.md into ``folder`` (created if needed), and with ``charts`` (a
    folder) each chart as PNG and SVG there; return report.html's path. ``d``: the run's :func:`decide` for the
    user's options, made once by the caller, whose terminal text shows the same decision."""
    from .charts import render_charts  # matplotlib is imported by the runs that draw (0.4 s of CPU otherwise)

    os.makedirs(folder, exist_ok=True)
    write_markdown(d, folder)
    return write_report(d, folder, render_charts(d, charts))
