"""The verdict: which codec to use for the user's goal, against their baseline, with the rule stated.

Goals (``--goal``):

* ``bandwidth``: fewest bytes per player on the wire (both directions, transport headers
  included); ties go to less encode + decode CPU.
* ``cpu``: least encode + decode CPU per call; ties go to fewer bytes.
* ``balanced`` (default): least money per month at the user's CCU: server egress at their
  $/GB, plus server cores for serialization at ``CORE_MONTH_PRICE``, plus per-connection
  state memory of stream codecs at ``RAM_GB_MONTH_PRICE``. Bandwidth and CPU are priced in
  the same unit, so the trade-off is the user's prices, not a weight picked here.

Only codecs whose every failure is declared, with bytes and both timings, compete; with
``--transport udp`` a codec that needs ordered delivery does not. This module judges;
templates and the terminal only print its sentences.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

from rpcbench.results import CodecResult, Suite

from . import analysis
from .capacity import CORE_MONTH_PRICE, RAM_GB_MONTH_PRICE, Capacity, Plan, ReportOptions, figures
from .formatting import fmt_bytes, fmt_ratio


@dataclass(frozen=True)
class Verdict:
    """The recommendation and everything said about it."""

    goal: str
    rule: str  #: the rule, in words
    baseline: Optional[CodecResult]
    baseline_note: str  #: where the baseline came from
    pick: Optional[CodecResult]
    sentence: str  #: the recommendation against the baseline, with the savings
    caveats: List[str] = field(default_factory=list)  #: ordered delivery and state memory, declared failures
    excluded: List[Tuple[str, str]] = field(default_factory=list)  #: (codec, why it may not be recommended)
    front: List[str] = field(default_factory=list)  #: the Pareto front, smallest first

    def lines(self) -> List[str]:
        """The verdict for the terminal: rule, recommendation, caveats."""
        return [f"verdict ({self.goal}: {self.rule})", f"  {self.sentence}", *(f"  {c}" for c in self.caveats)]


def rule_text(goal: str, options: ReportOptions) -> str:
    """The stated rule of ``goal`` at the user's figures."""
    if goal == "bandwidth":
        headers = "no transport headers" if options.transport == "none" else f"{options.transport} headers included"
        return f"fewest bytes per player on the wire, both directions, {headers}"
    if goal == "cpu":
        return "least encode + decode CPU per call"
    return (f"least $ per month at {options.ccu:,} CCU: server egress at ${options.egress_price:g}/GB + serialization "
            f"cores at ${CORE_MONTH_PRICE:g}/vCPU-month + stream state memory at ${RAM_GB_MONTH_PRICE:g}/GB-month")


def excluded(suite: Suite, options: ReportOptions) -> List[Tuple[str, str]]:
    """Codecs that may not be recommended, with the reason."""
    out = []
    for r in suite.results:
        if analysis.undeclared_calls(r):
            out.append((r.codec, f"{analysis.undeclared_calls(r):,} calls failed or came back different, undeclared"))
        elif not r.sizes or (options.goal != "bandwidth" and (r.error or analysis.cpu_us(r) is None)):
            # bytes alone decide the bandwidth goal, so a run without timing (--sizes-only) can still answer it
            out.append((r.codec, "not fully measured" + (f" ({r.error})" if r.error else "")))
        elif options.transport == "udp" and r.ordered_delivery:
            out.append((r.codec, "needs reliable, ordered delivery, which --transport udp does not give"))
    return out


def _score(goal: str, options: ReportOptions, plan: Plan) -> Optional[Callable[[CodecResult], Tuple[float, float]]]:
    """The sort key of ``goal`` (lowest wins); None if the figures it needs are not available."""
    def cpu(r: CodecResult) -> float:
        return analysis.cpu_us(r) or 0.0

    def wire(r: CodecResult) -> float:
        row = plan.find(r.codec)
        return row.down.value + row.up.value if row else (r.sizes.mean if r.sizes else 0.0)

    if goal == "cpu":
        return lambda r: (cpu(r), wire(r))
    if goal == "bandwidth":
        return lambda r: (wire(r), cpu(r))
    if plan.missing:
        return None
    return lambda r: (plan.rows[r.codec].month_cost(options.ccu, options.egress_price) if r.codec in plan.rows
                      else float("inf"), cpu(r))


def recommend(suite: Suite, options: ReportOptions, plan: Plan, reference: Tuple[Optional[CodecResult], str],
              figures: Mapping[str, analysis.CodecFigures], front: Sequence[str]) -> Verdict:
    """The recommended codec for ``options.goal`` against the baseline (``reference``: the run's reference codec
    and where it came from, from :func:`reports.reference.baseline`), with the rule, caveats and exclusions;
    ``figures`` holds each codec's ratios to that reference; ``front`` is the Pareto front, said with it."""
    baseline, where = reference
    barred = excluded(suite, options)
    front = list(front)
    rule = rule_text(options.goal, options)
    score = _score(options.goal, options, plan)
    names = {name for name, _ in barred}
    pool = [r for r in suite.results if r.codec not in names]
    if score is None or not pool:
        why = plan.missing if score is None else _nothing_to_pick(suite)
        return Verdict(options.goal, rule, baseline, where, None, f"no recommendation: {why}", [], barred, front)
    pick = min(pool, key=score)
    return Verdict(options.goal, rule, baseline, where, pick, _sentence(figures[pick.codec], baseline, options, plan),
                   _caveats(pick, options), barred, front)


def _nothing_to_pick(suite: Suite) -> str:
    """Why no codec could be recommended: no timing at all (bytes can still decide --goal bandwidth), or none clean."""
    if any(r.sizes for r in suite.results) and not any(analysis.cpu_us(r) for r in suite.results):
        return "no codec of this run was timed (--sizes-only?); --goal bandwidth decides on bytes alone"
    return "no codec of this run is fully measured with every failure declared"


def _sentence(pick: analysis.CodecFigures, baseline: Optional[CodecResult], options: ReportOptions,
              plan: Plan) -> str:
    """``X: 0.31x the bytes of json at 1.40x its encode CPU (0.90x decode); saves 41 GB/month of egress
    ($3/month)...``: the pick against the baseline (the ratios of the pick's ``figures``, savings: :func:`_savings`)."""
    if baseline is None or pick.bytes_ratio is None:
        return f"{pick.codec} (no baseline measured to compare with)"
    if pick.codec == baseline.codec:
        return f"{pick.codec}: keep the baseline; no codec of this run does better by this rule"
    text = f"{pick.codec}: {fmt_ratio(pick.bytes_ratio)} the bytes of {baseline.codec}"
    encode, decode = (f.ratio if (f := pick.op(op)) else None for op in analysis.OPS)
    if encode is not None:
        text += f" at {fmt_ratio(encode)} its encode CPU" + (f" ({fmt_ratio(decode)} decode)" if decode else "")
    mine, theirs = plan.find(pick.codec), plan.find(baseline.codec)
    if mine and theirs:
        text += _savings(mine, theirs, options)
    return text


def _savings(mine: Capacity, theirs: Capacity, options: ReportOptions) -> str:
    """``; saves 41 GB/month of egress ($3/month), $5/month in all at 10,000 CCU``: the capacity table's egress GB,
    egress $ and total $ columns of the baseline less the pick's (and, with a transport, the wire ratio of its
    kbit/s columns), so every figure is one the table beside it shows."""
    now, then = (figures(row, options.ccu, options.egress_price) for row in (mine, theirs))
    saved_gb, saved_usd = then.egress_gb.value - now.egress_gb.value, then.egress_usd.value - now.egress_usd.value
    text = ""
    if options.transport != "none":
        wire = (now.down_kbps.value + now.up_kbps.value) / (then.down_kbps.value + then.up_kbps.value)
        text += f", {fmt_ratio(wire)} on the wire with {options.transport} headers"
    verb = "saves" if saved_gb >= 0 else "costs"
    text += f"; {verb} {_gb(abs(saved_gb))}/month of egress (${abs(saved_usd):,.0f}/month)"
    if options.goal == "balanced":
        total = then.total_usd.value - now.total_usd.value
        text += f", {'saves' if total >= 0 else 'costs'} ${abs(total):,.0f}/month in all (egress + cores + state)"
    return text + f" at {options.ccu:,} CCU"


def _caveats(pick: CodecResult, options: ReportOptions) -> List[str]:
    """What the recommendation costs besides bytes and CPU: ordered delivery, state memory, declared failures."""
    notes = []
    if pick.ordered_delivery:
        notes.append(f"{pick.codec} keeps one stream per connection: it needs reliable, ordered delivery (TCP or "
                     f"WebSocket) and keeps {fmt_bytes(pick.state_bytes_per_conn)} of state per connection "
                     f"({fmt_bytes(pick.state_bytes_for(options.ccu))} at {options.ccu:,} CCU).")
    if pick.failures:
        notes.append(f"{pick.codec}: {analysis.failed_text(pick)}.")
    if pick.mismatches:
        features = ", ".join(sorted({p.feature for p in pick.problems if p.kind != "encode"}))
        notes.append(f"{pick.codec}: {pick.mismatches:,} calls come back changed, in ways it declares ({features}; "
                     f"see Fidelity).")
    return notes


def _gb(value: float) -> str:
    """GB with thousands separators (``41 GB``, ``12,300 GB``)."""
    return f"{value:,.0f} GB" if value >= 10 else f"{value:.1f} GB"

