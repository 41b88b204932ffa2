"""The decision: made once per run from the results, for the user's options (``--goal``, ``--baseline``, ``--ccu``,
...), and handed to every output. The reference codec, each codec's figures and ratios, the stability of each
timing, the headlines and rankings, the Pareto front, the warnings, the verdict, the capacity plan, where the
bytes go, the study re-tested and a fleet's spread are all in one :class:`Decision`; the terminal text, report.html,
report.md and the charts only format it.

The rules live in :mod:`reports.reference` (which codec is the reference), :mod:`reports.analysis` (figures,
stability, rankings, front, warnings), :mod:`reports.verdict`, :mod:`reports.capacity`, :mod:`reports.study` and
:mod:`reports.fleet`; :func:`decide` is the only caller that turns them into a judgment.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Dict, FrozenSet, Mapping, Optional, Tuple

from rpcbench.results import CodecResult, Suite

from . import analysis, capacity, captured, coverage, fleet, loss, measured, precision, reference, study, wire
from .analysis import CodecFigures
from .breakdown import Breakdown, MethodBytes, breakdown, method_bytes
from .capacity import DEFAULT_OPTIONS, Plan, ReportOptions
from .loss import NO_LOSS, LossView
from .verdict import Verdict, recommend

TOP_METHODS = 12  #: rows of the "where the bytes go" table
LOSS_CODECS = 6  #: codecs of the terminal's loss tables and the loss charts: the pick, the baseline, the fewest bytes


@dataclass(frozen=True)
class Headline:
    """One headline ("Smallest", "Fastest encode", ...): the best codec and its figure."""

    label: str
    codec: str
    value: float
    text: str  #: the figure as written (``47.3 B/call``)
    failed: str  #: the codec's declared failures in words, or ""


@dataclass(frozen=True)
class CapacityRow:
    """One codec's capacity figures at the user's CCU and egress price, and per player (which the page rescales)."""

    codec: str
    role: str  #: ``recommended``, ``baseline`` or ""
    figures: capacity.Figures  #: at ``--ccu`` and ``--egress-price``
    per_player: capacity.Figures  #: at 1 CCU and $1/GB
    state_bytes: int  #: per connection


@dataclass(frozen=True)
class Decision:
    """Everything every output shows that is judged or computed from the results (see the module's docstring)."""

    suite: Suite  #: the results themselves (measured figures the outputs only write down)
    options: ReportOptions
    reference: Optional[str]  #: the codec every ratio is to (the verdict's baseline); None: nothing measured
    reference_note: str  #: where it came from
    timed_reference: bool  #: the reference has both timings: CPU ratios (``enc/json``) exist
    figures: Mapping[str, CodecFigures]  #: codec -> its figures, ratios and stability
    headlines: Tuple[Headline, ...]
    rankings: Mapping[str, Tuple[str, ...]]  #: headline label -> the codecs ranked by it, best first
    front: Tuple[str, ...]  #: the Pareto front, smallest first
    dominated: Mapping[str, str]  #: codec -> a codec that beats it on bytes and CPU
    front_axes: analysis.Axes  #: bytes and CPU per call as sent under the decided --wire policy, else per message
    comparisons: Tuple[str, ...]  #: notable codecs against the study's formats, in sentences
    warnings: Tuple[str, ...]
    timing_notes: Tuple[Tuple[str, str], ...]  #: (name, text): partial, unstable, speed states
    verdict: Verdict
    plan: Plan
    capacity_rows: Tuple[CapacityRow, ...]  #: the top table: recommendation, baseline, the Pareto front
    other_rows: Tuple[CapacityRow, ...]  #: every other codec with figures
    transport_text: str
    prices: Mapping[str, str]
    bytes_codecs: Tuple[str, ...]  #: where the bytes go: under the baseline, then the pick
    bytes_methods: Tuple[MethodBytes, ...]  #: the methods carrying the most bytes under the first of those
    findings: Tuple[study.Finding, ...]
    fleet: fleet.Fleet
    breakdown: Breakdown  #: method, sample, stage and tail shares
    wire: wire.WireView  #: packets per --wire policy, the ranking under each
    calls_line: str = ""  #: the calls measured, of the trace's, and what the held-out ones were for
    schema_line: Optional[str] = None  #: where the typed codecs' schema came from, when inferred
    precision: precision.PrecisionView = precision.PrecisionView(None, (), (), None)  #: profile, lossy codecs
    loss: LossView = NO_LOSS  #: each codec per --loss rate, the rate decided at
    loss_codecs: Tuple[str, ...] = ()  #: the codecs the terminal's loss tables and the loss charts show
    capture: Optional[captured.CaptureCheck] = None  #: an imported trace: the wire model against the capture

    @property
    def failing(self) -> FrozenSet[str]:
        """The codecs with calls that failed or came back different without the codec declaring why."""
        return frozenset(c for c, f in self.figures.items() if f.undeclared_failures + f.undeclared_mismatches)

    def ratio_title(self, prefix: str) -> str:
        """A ratio column's title: ``x json``, ``enc/json``."""
        return f"{prefix}{self.reference}"


def decide(suite: Suite, options: ReportOptions = DEFAULT_OPTIONS) -> Decision:
    """The whole decision for ``options``; BenchError for a ``--baseline`` this run did not measure. Made once per
    run: the planner's bootstrap is not free, and every output must show the same answer."""
    ref, note = reference.baseline(suite, options.baseline)
    figures = {r.codec: analysis.codec_figures(r, ref, _same_calls(r, ref)) for r in suite.results}
    compared = coverage.comparable(suite, options.min_coverage)  # every comparison: codecs over the same calls
    wire_view = wire.view(suite, options.transport, options.packet_overhead, options.wire)
    link = loss.view(suite, options.loss, wire_view.chosen)
    axes = loss.front_axes(link, wire.front_axes(wire_view, suite) or analysis.message_axes(suite))
    front = analysis.pareto_front(compared, axes)

    def verdict_at(view: LossView) -> Tuple[Plan, Verdict]:  # the plan and verdict on the link at view's rate
        at = capacity.plan(compared, options.transport, options.packet_overhead, wire_view.chosen, ref, view)
        return at, recommend(suite, options, at, (ref, note), figures, [r.codec for r in front], view)

    plan, verdict = verdict_at(link)
    picks = {rate: verdict_at(loss.at_rate(link, rate))[1].pick for rate in link.rates if rate != link.chosen}
    if picks:  # would the pick change at the run's other loss rates?
        verdict = replace(verdict, caveats=[*verdict.caveats, loss.other_rates(verdict.pick, picks)])
    ranked = analysis.rankings(compared)
    headlines = tuple(_headline(label, ranking[0]) for label, ranking in ranked.items() if ranking)
    notable = [*front, *(suite.result(h.codec) for h in headlines)]
    studied = [r for name in study.FORMATS if (r := compared.find(name)) is not None]
    lead, others = _capacity_rows(compared, plan, verdict, options)
    shown = tuple({r.codec: r for r in (verdict.baseline, verdict.pick) if r is not None}.values())
    return Decision(
        suite=suite, options=options, reference=ref.codec if ref else None, reference_note=note,
        timed_reference=analysis.timed_both(ref), figures=MappingProxyType(figures), headlines=headlines,
        rankings=MappingProxyType({label: tuple(r.codec for _, r in ranking) for label, ranking in ranked.items()}),
        front=tuple(r.codec for r in front), dominated=MappingProxyType(analysis.dominated(compared, axes)),
        front_axes=axes,
        comparisons=tuple(analysis.comparisons(notable, studied)), warnings=tuple(analysis.warnings(suite, ref)),
        timing_notes=tuple(analysis.timing_notes(suite, ref)), verdict=verdict, plan=plan,
        capacity_rows=lead, other_rows=others, transport_text=plan.transport.text, prices=MappingProxyType(_prices()),
        bytes_codecs=tuple(r.codec for r in shown), bytes_methods=method_bytes(shown, TOP_METHODS),
        findings=tuple(study.retest(compared)),
        fleet=fleet.judge(suite, ref.codec if ref else None), breakdown=breakdown(suite, ref), wire=wire_view,
        calls_line=measured.calls_line(suite), schema_line=measured.schema_line(suite),
        precision=precision.view(suite, plan), loss=link,
        loss_codecs=loss.leading(link, [r.codec for r in shown], LOSS_CODECS),
        capture=captured.check(suite, wire_view.chosen))


def _same_calls(r: CodecResult, ref: Optional[CodecResult]) -> Optional[coverage.SameCalls]:
    """For a codec that does not carry every call: its figures on its calls beside the reference's on the same
    calls; None for one that does (its figures are over every call already), and for the reference itself."""
    if ref is None or r.codec == ref.codec or coverage.coverage(r).full:
        return None
    return coverage.same_calls(r, ref)


def _headline(label: str, best: Tuple[float, CodecResult]) -> Headline:
    """A headline from the top of its ranking."""
    value, r = best
    return Headline(label, r.codec, value, analysis.HEADLINES[label][1](value),
                    analysis.failed_text(r) if r.failures else "")


def _capacity_rows(suite: Suite, plan: Plan, verdict: Verdict,
                   options: ReportOptions) -> Tuple[Tuple[CapacityRow, ...], Tuple[CapacityRow, ...]]:
    """The capacity table: the recommendation, the baseline and the front first; then every other codec."""
    lead = [r for r in (verdict.pick, verdict.baseline) if r] + [suite.result(c) for c in verdict.front]
    lead_names = list(dict.fromkeys(r.codec for r in lead if r.codec in plan.rows))
    others = sorted((c for c in plan.rows if c not in lead_names), key=lambda c: plan.rows[c].down.value)
    rows = tuple(_capacity_row(plan.rows[c], c, verdict, options) for c in (*lead_names, *others))
    return rows[:len(lead_names)], rows[len(lead_names):]


def _capacity_row(row: capacity.Capacity, codec: str, verdict: Verdict, options: ReportOptions) -> CapacityRow:
    """One codec's row: its figures at the user's CCU and price, and per player."""
    role = ("recommended" if verdict.pick and codec == verdict.pick.codec else
            "baseline" if verdict.baseline and codec == verdict.baseline.codec else "")
    return CapacityRow(codec, role, capacity.figures(row, options.ccu, options.egress_price),
                       capacity.figures(row, 1, 1.0), row.state_bytes)


def _prices() -> Dict[str, str]:
    """The assumed prices of the balanced rule, for the page."""
    return {"core": f"${capacity.CORE_MONTH_PRICE:g} per vCPU-month", "ram": f"${capacity.RAM_GB_MONTH_PRICE:g} per "
            "GB-month", "month": f"{capacity.SECONDS_PER_MONTH / 3600:,.0f} hours"}
