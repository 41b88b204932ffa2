"""What the page's decision sections show (verdict, capacity, where the bytes go, the study
re-tested), gathered into plain values for the templates ``_verdict.html``, ``_capacity.html``,
``_bytes.html`` and ``_study.html``. The judgments come from :mod:`reports.verdict`,
:mod:`reports.capacity` and :mod:`reports.study`; this module only formats.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from rpcbench.results import CodecResult, Suite

from . import capacity, study
from .capacity import DEFAULT_OPTIONS, Estimate, Plan, ReportOptions
from .formatting import MISSING, fmt_bytes, fmt_share
from .verdict import Verdict, decide

TOP_METHODS = 12  #: rows of the "where the bytes go" table


@dataclass(frozen=True)
class Decision:
    """Everything the decision sections and the terminal's last lines need."""

    options: ReportOptions
    verdict: Verdict
    plan: Plan
    capacity_rows: List[Dict[str, Any]]  #: the top table: recommendation, baseline, the Pareto front
    other_rows: List[Dict[str, Any]]  #: every other codec with figures
    transport_text: str
    prices: Dict[str, str]
    bytes_rows: List[Tuple[str, List[str]]]
    bytes_head: List[str]
    findings: List[study.Finding]


def decision(suite: Suite, options: ReportOptions = DEFAULT_OPTIONS) -> Decision:
    """The verdict, the capacity plan, the byte shares and the study findings for ``options``; BenchError for a
    ``--baseline`` this run did not measure. Made once per report: the planner's bootstrap is not free."""
    plan = capacity.plan(suite, options.transport)
    verdict = decide(suite, options, plan)
    lead = [r for r in (verdict.pick, verdict.baseline) if r] + [suite.result(c) for c in verdict.front]
    lead_names = list(dict.fromkeys(r.codec for r in lead if r.codec in plan.rows))
    others = sorted((c for c in plan.rows if c not in lead_names), key=lambda c: plan.rows[c].down.value)
    rows = [_capacity_row(plan.rows[c], c, verdict, options) for c in (*lead_names, *others)]
    head, body = bytes_table(verdict)
    return Decision(options, verdict, plan, rows[:len(lead_names)], rows[len(lead_names):],
                    plan.transport.text, _prices(), body, head, study.retest(suite))


def _prices() -> Dict[str, str]:
    """The assumed prices of the balanced rule, for the page."""
    return {"core": f"${capacity.CORE_MONTH_PRICE:g} per vCPU-month", "ram": f"${capacity.RAM_GB_MONTH_PRICE:g} per "
            "GB-month", "month": f"{capacity.SECONDS_PER_MONTH / 3600:,.0f} hours"}


def ci_text(e: Optional[Estimate], digits: int = 1) -> str:
    """``47.4 [43.6-50.9]``; the interval left out when there is none."""
    if e is None:
        return MISSING
    if math.isnan(e.low) or math.isnan(e.high):
        return f"{e.value:,.{digits}f}"
    return f"{e.value:,.{digits}f} [{e.low:,.{digits}f}-{e.high:,.{digits}f}]"


def _capacity_row(row: capacity.Capacity, codec: str, verdict: Verdict, options: ReportOptions) -> Dict[str, Any]:
    """One codec's row: the cells at the user's CCU and price, and per-CCU figures the page's script rescales."""
    f = capacity.figures(row, options.ccu, options.egress_price)
    per_player = capacity.figures(row, 1, 1.0)
    role = ("recommended" if verdict.pick and codec == verdict.pick.codec else
            "baseline" if verdict.baseline and codec == verdict.baseline.codec else "")
    return {
        "codec": codec, "role": role, "down": ci_text(f.down_kbps), "up": ci_text(f.up_kbps),
        "gb": ci_text(f.gb_month, 0), "usd": ci_text(f.egress_usd, 0), "cores": ci_text(f.server_cores, 2),
        "client": ci_text(f.client_ms_per_s, 3), "state": fmt_bytes(f.state_bytes) if f.state_bytes else "0",
        "scale": {"gb": _triple(per_player.gb_month), "usd": _triple(per_player.egress_usd),
                  "cores": _triple(per_player.server_cores), "state": row.state_bytes},
    }


def _triple(e: Optional[Estimate]) -> str:
    """An estimate as ``value low high`` for a data attribute (the script multiplies each)."""
    return "" if e is None else " ".join(repr(x) for x in (e.value, e.low, e.high))


def bytes_table(verdict: Verdict) -> Tuple[List[str], List[Tuple[str, List[str]]]]:
    """Per method, top first: share of calls, and share of bytes and bytes per call under the baseline and the pick."""
    codecs = [r for r in (verdict.baseline, verdict.pick) if r is not None]
    codecs = list({r.codec: r for r in codecs}.values())
    if not codecs or not codecs[0].by_method:
        return [], []
    first = codecs[0]
    calls_total = sum(m["calls"] for m in first.by_method.values()) or 1
    order = sorted(first.by_method, key=lambda m: -first.by_method[m]["bytes"])
    head = ["method", "calls", "% of calls"]
    for r in codecs:
        head += [f"% of bytes ({r.codec})", f"bytes/call ({r.codec})"]
    rows = []
    for method in order[:TOP_METHODS]:
        calls = first.by_method[method]["calls"]
        cells = [method, f"{calls:,}", fmt_share(calls / calls_total)]
        for r in codecs:
            cells += _method_cells(r, method)
        rows.append(("", cells))
    return head, rows


def _method_cells(r: CodecResult, method: str) -> List[str]:
    """A method's share of the codec's bytes and its bytes per call."""
    total = sum(m["bytes"] for m in r.by_method.values()) or 1
    figures = r.by_method.get(method)
    if not figures or not figures["calls"]:
        return [MISSING, MISSING]
    return [fmt_share(figures["bytes"] / total), f"{figures['bytes'] / figures['calls']:.1f}"]

