"""``report.md``: the run in Markdown, for a pull request or a design doc: the verdict, the summary, the results
table (the columns a reviewer needs, the same figures as the terminal table and report.html), the
notes, and the trace's busiest methods.

Rendered from ``templates/report.md`` by Jinja2 with every ``{{ value }}`` passed through
:func:`md_escape`, so a method or codec name can neither break a table row (``|``) nor inject
HTML or Markdown.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict

import jinja2


from . import loss
from .decision import Decision
from .formatting import fmt_count, fmt_share, fmt_us, shown
from .html import TEMPLATES, page_title, summary_section
from .table import columns, footnotes

#: the results table's columns kept in report.md (by title): the ones a reviewer decides with
MD_COLUMNS = ("codec", "failures", "mismatches", "bytes mean", "x ref", "encode µs", "±CI", "enc/ref", "decode µs",
              "dec/ref", "note")
TOP_METHODS = 10  #: methods listed, busiest first
_SPECIAL = re.compile(r"([\\`*_\[\]|~<$])")  #: backslash-escaped (CommonMark); ``\<`` opens no HTML tag, ``\$`` no math


def md_escape(value: Any) -> str:
    """``value`` as literal Markdown text on one line: the characters that make emphasis, code, links, table
    cells or HTML tags backslash-escaped, line breaks as spaces (a table row is one line)."""
    return " ".join(_SPECIAL.sub(r"\\\1", "" if value is None else str(value)).splitlines())


def write_markdown(d: Decision, folder: str) -> str:
    """Write ``report.md`` into ``folder``; return its path."""
    path = os.path.join(folder, "report.md")
    with open(path, "w", encoding="utf-8", errors="replace") as f:  # lone surrogates: shown as "?"
        f.write(render_markdown(d))
    return path


def render_markdown(d: Decision) -> str:
    """report.md as text: every figure and judgment from ``d``, the run's :class:`Decision`, as in report.html."""
    suite = d.suite
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False, finalize=md_escape,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True)
    cols = [c for c in columns(d) if c.kind in MD_COLUMNS]
    return env.get_template("report.md").render(
        title=page_title(suite), suite=suite, calls_line=d.calls_line, schema_line=d.schema_line,
        capture_line=d.capture.line if d.capture else None, precision=d.precision, verdict=d.verdict,
        front_axes=d.front_axes, summary=summary_section(d).facts,
        head=[(c.title, c.numeric) for c in cols],
        rows=[[c.cell(r) for c in cols] for r in suite.results], warnings=d.warnings,
        notes=footnotes(d), methods=[(m.method, fmt_count(m.calls), fmt_share(m.call_share))
                                     for m in d.breakdown.methods[:TOP_METHODS]],
        more_methods=max(0, len(d.breakdown.methods) - TOP_METHODS), **wire_part(d), **loss_part(d))


def loss_part(d: Decision) -> Dict[str, Any]:
    """The loss section's values (none without --loss): every codec at every rate, as report.html's table."""
    v = d.loss
    return {"loss_head": ("loss %", *loss.COLUMNS), "loss_rows": [(f"{rate:g}", *loss.cells(r)) for rate in v.rates
                                                                 for r in v.at(rate)],
            "loss_link": v.link, "loss_policy": v.policy, "loss_rate": v.rate_text, "loss_flags": v.flags}


def wire_part(d: Decision) -> Dict[str, Any]:
    """The wire section's values (none when the run sent per call only): each codec under each policy."""
    w = d.wire
    rows = [[r.codec, r.policy, f"{r.bytes_per_call:.1f}", f"{r.packets_up:.1f}", f"{r.packets_down:.1f}",
             f"{r.kbps_up:.2f}", f"{r.kbps_down:.2f}", shown(r.encode_us, fmt_us),
             shown(r.decode_us, fmt_us)]
            for policy in w.policies for codec in w.rankings.get(policy, ()) if (r := w.row(codec, policy))]
    return {"wire_rows": rows if w.compared else [], "wire_transport": w.transport, "wire_chosen": w.chosen,
            "wire_notes": w.notes}
