"""The verdict: which codec to use for the user's goal, against their baseline, with the rule stated.

Goals (``--goal``):

* ``bandwidth``: fewest bytes per player on the wire (both directions, transport headers
  included); ties go to less encode + decode CPU.
* ``cpu``: least encode + decode CPU per call; ties go to fewer bytes.
* ``balanced`` (default): least money per month at the user's CCU: server egress at their
  $/GB, plus server cores for serialization at ``CORE_MONTH_PRICE``, plus per-connection
  state memory of stream codecs at ``RAM_GB_MONTH_PRICE``. Bandwidth and CPU are priced in
  the same unit, so the trade-off is the user's prices, not a weight picked here.

Only codecs whose every failure is declared, that carry at least ``--min-coverage`` of the calls
(:mod:`reports.coverage`), with bytes and both timings, compete; with ``--transport udp`` a codec that
needs ordered delivery does not. When the best candidates' cost intervals overlap, the verdict says they
are tied within this run's precision, names them and what would separate them (:func:`tie`). This module
judges; templates and the terminal only print its sentences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

from rpcbench.results import CodecResult, Suite, Timing
from rpcbench.wire import PER_CALL

from . import analysis, coverage, loss, precision
from .loss import NO_LOSS, LossView
from .capacity import CORE_MONTH_PRICE, RAM_GB_MONTH_PRICE, Capacity, Plan, ReportOptions, figures
from .wire import cpu_timing, priced_bytes_per_call
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
    tied: List[str] = field(default_factory=list)  #: the candidates tied with the pick (the pick first); [] if none
    partial: List[Tuple[str, str]] = field(default_factory=list)  #: (codec, coverage and same-call figures)

    def lines(self) -> List[str]:
        """The verdict for the terminal: rule, recommendation, caveats, codecs left out for their coverage."""
        return [f"verdict ({self.goal}: {self.rule})", f"  {self.sentence}", *(f"  {c}" for c in self.caveats),
                *(f"  not compared: {codec} {why}" for codec, why in self.partial)]


def rule_text(goal: str, options: ReportOptions) -> str:
    """The stated rule of ``goal`` at the user's figures."""
    if goal == "bandwidth":
        headers = "no transport headers" if options.transport == "none" else f"{options.transport} headers included"
        return f"fewest bytes per player on the wire, both directions, {headers}"
    if goal == "cpu":
        return "least encode + decode CPU per call"
    return (f"least $ per month at {options.ccu:,} CCU: server egress at ${options.egress_price:g}/GB + serialization "
            f"cores at ${CORE_MONTH_PRICE:g}/vCPU-month + stream state memory at ${RAM_GB_MONTH_PRICE:g}/GB-month")


def excluded(suite: Suite, options: ReportOptions, link: LossView = NO_LOSS) -> List[Tuple[str, str]]:
    """Codecs that may not be recommended, with the reason. On a lossy ``link`` a codec needing ordered delivery
    competes under --transport udp when the run priced it behind the link's reliable layer at the decided rate."""
    out = []
    for r in suite.results:
        if analysis.undeclared_calls(r):
            out.append((r.codec, f"{analysis.undeclared_calls(r):,} calls failed or came back different, undeclared"))
        elif why := loss.broken(r, link):
            out.append((r.codec, why))
        elif not r.sizes or (options.goal != "bandwidth" and (r.error or analysis.cpu_us(r) is None)):
            # bytes alone decide the bandwidth goal, so a run without timing (--sizes-only) can still answer it
            out.append((r.codec, "not fully measured" + (f" ({r.error})" if r.error else "")))
        elif not coverage.meets(r, options.min_coverage):
            out.append((r.codec, coverage.partial_text(r, None, options.min_coverage)))
        elif precision.is_lossy(r) and precision.profile_label(suite) is None:
            out.append((r.codec, "sends values at a precision nobody declared: a lossy codec competes only with "
                                 "the team's precision profile (--precision FILE)"))
        elif options.transport == "udp" and r.ordered_delivery and not loss.figures(r, link.policy, link.chosen):
            out.append((r.codec, "needs reliable, ordered delivery, which --transport udp does not give"))
    return out


def _score(goal: str, options: ReportOptions, plan: Plan) -> Optional[Callable[[CodecResult], Tuple[float, float]]]:
    """The sort key of ``goal`` (lowest wins); None if the figures it needs are not available."""
    def cpu(r: CodecResult) -> float:
        encode, decode = sent_cpu(r, plan)
        return encode.median_us + decode.median_us if encode and decode else 0.0

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
              figures: Mapping[str, analysis.CodecFigures], front: Sequence[str], link: LossView = NO_LOSS) -> Verdict:
    """The recommended codec for ``options.goal`` against the baseline (``reference``: the run's reference codec
    and where it came from, from :func:`reports.reference.baseline`), with the rule, caveats and exclusions;
    ``figures`` holds each codec's ratios to that reference; ``front`` is the Pareto front, said with it. When the
    pick's cost interval overlaps another candidate's, the sentence says they are tied (:func:`tie`). On a lossy
    ``link`` the plan's traffic is at the decided rate, and the rule says which rate that is."""
    baseline, where = reference
    barred = excluded(suite, options, link)
    front = list(front)
    rule = rule_text(options.goal, options) + (f"; on the lossy link at {link.rate_text}" if link.shown else "")
    score = _score(options.goal, options, plan)
    names = {name for name, _ in barred}
    pool = [r for r in suite.results if r.codec not in names]
    partial = [(r.codec, coverage.partial_text(r, baseline, options.min_coverage)) for r in suite.results
               if not coverage.meets(r, options.min_coverage) and not analysis.undeclared_calls(r)]
    if score is None or not pool:
        why = plan.missing if score is None else _nothing_to_pick(suite)
        return Verdict(options.goal, rule, baseline, where, None, f"no recommendation: {why}", [], barred, front,
                       partial=partial)
    ranked = sorted(pool, key=score)
    pick = ranked[0]
    sentence = _sentence(figures[pick.codec], pick, baseline, options, plan)
    tied = tie(ranked, _interval(options.goal, options, plan))
    if tied:
        note = _bytes_note(tied, plan, options, link)
        sentence = f"{_tie_text(tied, options.goal, note)} Lowest point estimate: {sentence}"
    lossy = [loss.caveat(row)] if link.chosen is not None and (row := link.row(pick.codec, link.chosen)) else []
    return Verdict(options.goal, rule, baseline, where, pick, sentence, [*lossy, *_caveats(pick, options, suite)],
                   barred, front, [r.codec for r, _ in tied], partial)


Interval = Callable[[CodecResult], Tuple[float, float, float]]  #: a candidate's cost: (low, point, high)


def _interval(goal: str, options: ReportOptions, plan: Plan) -> Interval:
    """The candidate's cost with its 95 % interval, in the goal's unit. Bytes are exact counts over the trace, and
    the traffic's bootstrap interval is shared by every codec (they carry the same connections), so neither
    separates codecs; the uncertain part is CPU: the timing medians' distribution-free intervals (``ci_us``)."""
    def cpu(r: CodecResult) -> Tuple[float, float, float]:
        encode, decode = sent_cpu(r, plan)
        assert encode and decode
        (e_lo, e_hi, _), (d_lo, d_hi, _) = encode.ci_us, decode.ci_us
        return e_lo + d_lo, encode.median_us + decode.median_us, e_hi + d_hi

    if goal == "cpu":
        return cpu
    if goal == "bandwidth":
        def wire(r: CodecResult) -> Tuple[float, float, float]:
            row = plan.find(r.codec)
            value = row.down.value + row.up.value if row else (r.sizes.mean if r.sizes else 0.0)
            return value, value, value
        return wire
    rates = (plan.calls_per_s["s2c"].value, plan.calls_per_s["c2s"].value)

    def cost(r: CodecResult) -> Tuple[float, float, float]:
        encode, decode = sent_cpu(r, plan)  # the CPU the plan's cores count
        if r.codec not in plan.rows or not (encode and decode):
            return math.inf, math.inf, math.inf
        point = plan.rows[r.codec].month_cost(options.ccu, options.egress_price)
        (e_lo, e_hi, _), (d_lo, d_hi, _) = encode.ci_us, decode.ci_us
        usd = options.ccu / 1e6 * CORE_MONTH_PRICE  # $ per month for one µs of serialization per second per player
        mid = (encode.median_us * rates[0] + decode.median_us * rates[1]) * usd
        return (point - mid + (e_lo * rates[0] + d_lo * rates[1]) * usd, point,
                point - mid + (e_hi * rates[0] + d_hi * rates[1]) * usd)
    return cost


def sent_cpu(r: CodecResult, plan: Plan) -> Tuple[Optional[Timing], Optional[Timing]]:
    """The codec's encode and decode CPU per call as sent under the plan's --wire policy: on whole packets where the
    run timed them, else per message (the CPU the capacity plan's cores count)."""
    return cpu_timing(r, plan.policy, "encode"), cpu_timing(r, plan.policy, "decode")


def tie(ranked: Sequence[CodecResult], interval: Interval) -> List[Tuple[CodecResult, Tuple[float, float, float]]]:
    """The candidates whose cost interval overlaps the best one's (the best first), with their intervals; [] when
    the best stands apart. ``ranked``: the candidates, best point estimate first."""
    best = interval(ranked[0])
    overlapping = [(r, iv) for r in ranked[1:] if (iv := interval(r))[0] <= best[2] and best[0] <= iv[2]]
    return [(ranked[0], best), *overlapping] if overlapping else []


def _tie_text(tied: Sequence[Tuple[CodecResult, Tuple[float, float, float]]], goal: str, bytes_note: str) -> str:
    """``tied within this run's precision: A $1,210/month (1,190-1,230), B ...: ... what would separate them``."""
    def money(v: float) -> str:
        return f"${v:,.0f}" if goal == "balanced" else f"{v:.2f}" if goal == "cpu" else f"{v:,.1f}"

    unit = {"balanced": "/month", "cpu": " µs/call", "bandwidth": " B/s per player"}[goal]
    named = ", ".join(f"{r.codec} {money(mid)}{unit} ({money(lo)} to {money(hi)})" for r, (lo, mid, hi) in tied)
    return (f"tied within this run's precision: {named}: their 95% intervals overlap, so this run cannot rank "
            f"them. What would separate them: narrower CPU intervals (more rounds: --repeat, --processes; an idle "
            f"machine), or your own weight on what differs between them (bytes are exact: {bytes_note}).")


def _bytes_note(tied: Sequence[Tuple[CodecResult, Tuple[float, float, float]]], plan: Plan,
                options: ReportOptions, link: LossView) -> str:
    """``B/call: json+zstddict-3 36.9, json+zlib-1 61.9``: the tied codecs' exact bytes per call, on the lossy link at
    the decided rate, else on the wire (with the plan's headers) under the plan's batched --wire policy, else their
    mean message."""
    if link.chosen is not None:
        rows = [(r.codec, row) for r, _ in tied if (row := link.row(r.codec, link.chosen))]
        return (f"B/call on the wire at {loss.pct(link.chosen)} loss: "
                + ", ".join(f"{codec} {row.bytes_per_call:.1f}" for codec, row in rows))
    policy = plan.policy if plan.policy not in (None, PER_CALL) else None
    sizes = [(r.codec, priced_bytes_per_call(r, policy, plan.transport.name, options.packet_overhead) if policy
              else r.sizes.mean if r.sizes else None) for r, _ in tied]
    unit = f"B/call on the wire ({policy}, {plan.transport.name})" if policy else "B/call"
    return f"{unit}: " + ", ".join(f"{codec} {value:.1f}" for codec, value in sizes if value is not None)


def _nothing_to_pick(suite: Suite) -> str:
    """Why no codec could be recommended: no timing at all (bytes can still decide --goal bandwidth), or none clean."""
    if any(r.sizes for r in suite.results) and not any(analysis.cpu_us(r) for r in suite.results):
        return "no codec of this run was timed (--sizes-only?); --goal bandwidth decides on bytes alone"
    return "no codec of this run is fully measured with every failure declared"


def _sentence(pick: analysis.CodecFigures, result: CodecResult, baseline: Optional[CodecResult],
              options: ReportOptions, plan: Plan) -> str:
    """``X: 0.31x the bytes of json at 1.40x its encode CPU (0.90x decode); saves 41 GB/month of egress
    ($3/month)...``: the pick against the baseline (the ratios of the pick's ``figures``, savings: :func:`_savings`)."""
    if baseline is None or pick.bytes_ratio is None:
        return f"{pick.codec} (no baseline measured to compare with)"
    if pick.codec == baseline.codec:
        return f"{pick.codec}: keep the baseline; no codec of this run does better by this rule"
    text = f"{pick.codec}: {fmt_ratio(pick.bytes_ratio)} the bytes of {baseline.codec}"
    mine, theirs = plan.find(pick.codec), plan.find(baseline.codec)
    on_wire = plan.policy not in (None, PER_CALL) or plan.loss_pct is not None
    if on_wire and mine and theirs and theirs.down.value + theirs.up.value:
        ratio = (mine.down.value + mine.up.value) / (theirs.down.value + theirs.up.value)
        at = f", at {loss.pct(plan.loss_pct)} loss" if plan.loss_pct is not None else ""
        text = (f"{pick.codec}: {fmt_ratio(ratio)} the wire bytes of {baseline.codec} "
                f"({plan.policy}, {plan.transport.name}{at})")
    text += _cpu_ratios(pick, result, baseline, plan)
    if mine and theirs:
        text += _savings(mine, theirs, options)
    return text


def _cpu_ratios(pick: analysis.CodecFigures, result: CodecResult, baseline: CodecResult, plan: Plan) -> str:
    """`` at 1.40x its encode CPU (0.90x decode)``: on whole packets when the plan's policy timed both codecs'
    (paired round by round, :meth:`~rpcbench.results.Timing.ratio_to`), else per message (the figures' ratios)."""
    (encode, decode), (base_encode, base_decode) = sent_cpu(result, plan), sent_cpu(baseline, plan)
    if encode and decode and base_encode and base_decode and encode is not result.encode \
            and base_encode is not baseline.encode:
        return (f" at {fmt_ratio(encode.ratio_to(base_encode))} its encode CPU "
                f"({fmt_ratio(decode.ratio_to(base_decode))} decode) on whole packets")
    ratio, decode_ratio = (f.ratio if (f := pick.op(op)) else None for op in analysis.OPS)
    if ratio is None:
        return ""
    return f" at {fmt_ratio(ratio)} its encode CPU" + (f" ({fmt_ratio(decode_ratio)} decode)" if decode_ratio else "")


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


def _caveats(pick: CodecResult, options: ReportOptions, suite: Suite) -> List[str]:
    """What the recommendation costs besides bytes and CPU: ordered delivery, state memory, declared failures,
    values sent at the precision profile's steps."""
    notes = []
    if precision.is_lossy(pick):
        changed = sum(int(f["changed"]) for f in pick.lossy.values())
        notes.append(f"{pick.codec} sends values at the steps of the precision profile {precision.profile_label(suite)}"
                     f": {changed:,} values came back within half their step, in {len(pick.lossy)} fields (see the "
                     "lossy table); its CPU is this implementation's, its bytes any implementation's of the layout.")
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

