"""Every judgment ``run_bench.py compare OLD NEW`` makes: what changed per codec between two runs,
whether a CPU change is significant, and whether a change breaks a ``--fail-above`` gate.

Bytes are exact (``len()`` of every encoded call), so any change in them is real, when both runs measured the
same calls (:func:`calls_differ`: the trace, the held-out calls, the size pass's sample); otherwise the comparison
says so and claims no exact byte change. CPU times
are not: on a shared host the machine's speed drifts between runs, so each codec's time is
judged as its ratio to a reference codec measured in the same run (the drift cancels in the
ratio). Rounds share their process's speed state, so the unit of the test is the *process set*,
not the round: each process set gives one ratio, the median of its turns' ratios to the reference
(:func:`set_ratios`; no round is set aside), and the two runs' sets are compared with a pooled two-sample
t-test on their logarithms, whose variance is the between-process noise the runs themselves show
(:func:`_shift`). A change is called only when the test shows it exceeds ``min_effect`` percent. The absolute
times get the same treatment, for information: they move with the machine. A gate fails closed: a timing it
guards that the runs could not test makes it *inconclusive* (:attr:`Comparison.untested`), not passed.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from functools import cached_property
from typing import List, Optional, Sequence, Tuple


from rpcbench.results import SLOW_STATE_FACTOR, CodecResult, Suite, Timing

from . import wire
from .analysis import OPS, timed_both
from .reference import DEFAULT_REFERENCE, choose_reference

#: the significance test, as it is named in the output
TEST = "two-sample t-test on the process sets' log ratios (pooled variance, two-sided)"
ALPHA = 0.01  #: a CPU change is significant when the test's p-value is below this
MIN_EFFECT_PCT = 1.0  #: default ``--min-effect``: a change is called when the test shows it is larger than this
#: process sets a run needs before per-process speed modes stop deciding a comparison (docs/compare.md)
MIN_PROCESSES = 3
MIN_SETS = 2  #: process sets each run needs for the test: the between-process noise is measured from them
MIN_SET_ROUNDS = 3  #: rounds a process set needs to give a figure
#: the run settings docs/compare.md recommends for runs a gate compares (measured by bench/compare_gate.py)
GATE_RUN_SETTINGS = "--processes 6 --repeat 8 --warmup 3 --min-time 0.05 --timing-lanes 1"
__all__ = ["ALPHA", "DEFAULT_REFERENCE", "GATE_RUN_SETTINGS", "MIN_EFFECT_PCT", "TEST", "Comparison", "CpuChange",
           "Shift", "Violation", "compare", "gate", "unseen"]
#: the percentile of a process set's rounds taken as its absolute time (its fast end: the codec when least crowded)
FAST_END_PERCENTILE = 10


@dataclass(frozen=True)
class Shift:
    """One figure in both runs and, for timings, the test's p-value (None: exact figure, not tested), the
    process sets each run gave, and the smallest change (%) the test could call significant with this noise
    and these sets (None: not tested, or too few sets to test)."""

    old: float
    new: float
    p: Optional[float] = None
    sets: Tuple[int, int] = (0, 0)
    detectable_pct: Optional[float] = None

    @property
    def change_pct(self) -> float:
        """The new figure relative to the old one, in percent (+20.0: 20 % more)."""
        return (self.new / self.old - 1) * 100 if self.old else (0.0 if not self.new else math.inf)


@dataclass(frozen=True)
class CpuChange:
    """One codec's encode or decode time in both runs: absolute (µs per call, the fast end of each process set)
    and as its ratio to the reference codec (per set, the codec's fast end over the reference's); ``ratio`` is
    None for the reference itself and when there is no reference."""

    op: str
    absolute: Shift
    ratio: Optional[Shift]
    alpha: float
    reference: bool = False  #: this is the reference codec's own timing (its ratio is 1 by construction)
    min_effect: float = MIN_EFFECT_PCT  #: percent; the change the test must show to be exceeded

    @property
    def tested(self) -> bool:
        """Both runs gave at least MIN_SETS process sets: the between-process noise could be measured."""
        return self.ratio is not None and self.ratio.p is not None

    @property
    def significant(self) -> bool:
        """The ratio to the reference changed by more than ``min_effect`` percent, by the test on the process
        sets at ``alpha`` (:func:`_shift`)."""
        r = self.ratio
        return r is not None and r.p is not None and r.p < self.alpha

    @property
    def verdict(self) -> str:
        """``slower``, ``faster``, ``n.s.`` (not shown to exceed ``min_effect``), ``few sets`` (too few process
        sets to test), ``reference`` or ``-`` (no reference)."""
        if self.ratio is None:
            return "reference" if self.reference else "-"
        if not self.tested:
            return "few sets"
        if not self.significant:
            return "n.s."
        return "slower" if self.ratio.new > self.ratio.old else "faster"


@dataclass(frozen=True)
class CodecChange:
    """A codec run in both: its mean bytes per call, its CPU changes, and what one run lacks."""

    codec: str
    bytes: Optional[Shift]
    cpu: Tuple[CpuChange, ...]
    missing: Tuple[str, ...]  #: e.g. ``decode not timed in NEW (timing failed: ...)``
    same_calls: bool = True  #: both runs measured the same calls (:func:`calls_differ`): bytes compare exactly

    @property
    def bytes_verdict(self) -> str:
        """``larger``, ``smaller`` or ``same`` (bytes are exact over the same calls: any change is real);
        ``other calls`` when the runs measured different calls, whose bytes no one can compare exactly."""
        if self.bytes is not None and not self.same_calls:
            return "other calls"
        if self.bytes is None or self.bytes.new == self.bytes.old:
            return "same" if self.bytes else "-"
        return "larger" if self.bytes.new > self.bytes.old else "smaller"


@dataclass(frozen=True)
class Comparison:
    """Two runs compared: per common codec, what changed; codecs only in one run; reasons for care."""

    reference: Optional[str]  #: codec the CPU ratios are to; None when no codec was timed in both runs
    reference_note: str  #: how the reference was chosen, in words
    codecs: Tuple[CodecChange, ...]
    added: Tuple[str, ...]  #: only in NEW
    removed: Tuple[str, ...]  #: only in OLD
    warnings: Tuple[str, ...]
    alpha: float = ALPHA
    min_effect: float = MIN_EFFECT_PCT  #: percent: the smallest change called slower or faster
    fail_above: Optional[float] = None  #: the ``--fail-above`` gate, percent (None: no gate)
    violations: Tuple["Violation", ...] = ()  #: the changes that fail it
    calls_differ: Tuple[str, ...] = ()  #: how the runs' measured calls differ (:func:`calls_differ`); () = the same
    allow_untested: bool = False  #: ``--allow-untested``: a gate passes despite timings it could not test

    @property
    def same_calls(self) -> bool:
        """Both runs measured the same calls: byte changes are exact."""
        return not self.calls_differ

    @cached_property
    def untested(self) -> Tuple[str, ...]:
        """The CPU timings (``codec op``) a gate guards but these runs could not test, so a pass could not vouch
        for them: a ratio with too few process sets, a codec's timing without a reference, a timing one run
        lacks (found once: the comparison is frozen)."""
        out = [f"{c.codec} {t.op}" for c in self.codecs for t in c.cpu if not t.reference and not t.tested]
        return tuple(out + [f"{c.codec} {m.split(' ', 1)[0]}" for c in self.codecs for m in c.missing
                            if m.split(" ", 1)[0] in OPS])

    @property
    def outcome(self) -> str:
        """The gate's outcome: ``failed`` (a change over ``fail_above``), ``inconclusive`` (none, but a timing it
        guards was not tested, and ``allow_untested`` is off), ``passed``, or ``""`` without a gate."""
        if self.fail_above is None:
            return ""
        if self.violations:
            return "failed"
        return "inconclusive" if self.untested and not self.allow_untested else "passed"


@dataclass(frozen=True)
class Violation:
    """A change a ``--fail-above`` gate fails on: a bytes increase, or a significant CPU ratio increase."""

    codec: str
    figure: str  #: ``bytes``, ``encode`` or ``decode``
    change_pct: float
    text: str


def compare(old: Suite, new: Suite, reference: str = DEFAULT_REFERENCE, alpha: float = ALPHA,
            fail_above: Optional[float] = None, min_effect: float = MIN_EFFECT_PCT,
            allow_untested: bool = False) -> Comparison:
    """What changed from ``old`` to ``new``; CPU judged by each codec's ratio to ``reference``
    (or, when it is not timed in both runs, to the first codec of NEW that is, said in ``reference_note``);
    a change is called when the test on the process sets shows, at ``alpha``, that it exceeds ``min_effect``
    percent; with ``fail_above``, the changes that fail that gate (:func:`gate`) and its outcome
    (:attr:`Comparison.outcome`; ``allow_untested``: untested timings do not make it inconclusive)."""
    ref, note = _reference(old, new, reference)
    old_ref, new_ref = (old.find(ref), new.find(ref)) if ref else (None, None)
    test = _Test(_repeat(old), _repeat(new), alpha, min_effect)
    policy = wire.shared_policy(old, new)
    differ = tuple(calls_differ(old, new))
    changes = []
    for r_new in new.results:
        r_old = old.find(r_new.codec)
        if r_old is not None:
            changes.append(replace(_codec_change(r_old, r_new, old_ref, new_ref, test, policy), same_calls=not differ))
    old_ids, new_ids = {r.codec for r in old.results}, {r.codec for r in new.results}
    found = Comparison(
        reference=ref, reference_note=note, codecs=tuple(changes),
        added=tuple(r.codec for r in new.results if r.codec not in old_ids),
        removed=tuple(r.codec for r in old.results if r.codec not in new_ids),
        warnings=tuple(comparison_warnings(old, new, ref, changes)), alpha=alpha, min_effect=min_effect,
        calls_differ=differ, allow_untested=allow_untested)
    if fail_above is None:
        return found
    return replace(found, fail_above=fail_above, violations=tuple(gate(found, fail_above)))


@dataclass(frozen=True)
class _Test:
    """What judging a timing needs besides its rounds: each run's rounds per process set, alpha, the effect."""

    old_repeat: int
    new_repeat: int
    alpha: float
    min_effect: float


def _repeat(run: Suite) -> int:
    """Rounds per process set in ``run`` (its ``--repeat``); 0 when the run does not say (one set then)."""
    repeat = run.settings.get("repeat")
    return repeat if isinstance(repeat, int) and repeat > 0 else 0


def _reference(old: Suite, new: Suite, wanted: str) -> Tuple[Optional[str], str]:
    """The reference codec and how it was chosen: ``wanted`` if both runs timed it (encode and decode),
    else the first codec of NEW that both runs timed, else None (CPU compared in absolute terms only)."""
    chosen, matched = choose_reference(new.results, (wanted,), lambda r: _timed_in_both(old, new, r.codec))
    if chosen is None:
        return None, (f"none: no codec was timed in both runs ({wanted} included), so CPU is compared "
                      "in absolute terms only and no CPU change is gated")
    if matched:
        default = " (the default; --reference CODEC to change)" if wanted == DEFAULT_REFERENCE else ""
        return wanted, f"{wanted}{default}"
    return chosen.codec, (f"{chosen.codec}: {wanted} was not timed in both runs, so the first codec both runs "
                          f"timed is the reference")


def _timed_in_both(old: Suite, new: Suite, codec: str) -> bool:
    return all(timed_both(run.find(codec)) for run in (old, new))


def _codec_change(old: CodecResult, new: CodecResult, old_ref: Optional[CodecResult],
                  new_ref: Optional[CodecResult], test: _Test, policy: Optional[str] = None) -> CodecChange:
    """One codec's change; ratios only when both runs have the reference and this is not it; bytes on the
    wire under ``policy`` (a batched --wire policy of both runs) when the runs have it."""
    sizes = Shift(old.sizes.mean, new.sizes.mean) if old.sizes and new.sizes else None
    on_wire = [wire.bytes_per_call(r, policy) for r in (old, new)] if policy else []
    if sizes is not None and on_wire and None not in on_wire:
        sizes = Shift(*on_wire)  # type: ignore[arg-type]
    cpu, missing = [], []
    if sizes is None:
        missing.append(f"bytes not measured in {'OLD' if old.sizes is None else 'NEW'}")
    for op in OPS:
        t_old, t_new = getattr(old, op), getattr(new, op)
        if t_old is None or t_new is None:
            run, r = ("OLD", old) if t_old is None else ("NEW", new)
            missing.append(f"{op} not timed in {run}" + (f" ({r.error})" if r.error else ""))
            continue
        is_reference = old_ref is not None and old.codec == old_ref.codec
        ratio = None
        if old_ref and new_ref and not is_reference:
            ratio = _shift(set_ratios(t_old, getattr(old_ref, op), test.old_repeat),
                           set_ratios(t_new, getattr(new_ref, op), test.new_repeat), test.alpha, test.min_effect)
        absolute = _shift(set_times(t_old, test.old_repeat), set_times(t_new, test.new_repeat), test.alpha,
                          test.min_effect, 1e-3)
        cpu.append(CpuChange(op, absolute, ratio, test.alpha, is_reference, test.min_effect))
    return CodecChange(new.codec, sizes, tuple(cpu), tuple(missing))


def fast_end(values: Sequence[float]) -> float:
    """The FAST_END_PERCENTILE-th percentile (inclusive method; the value itself for one value)."""
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[FAST_END_PERCENTILE - 1]


def process_sets(timing: Timing, repeat: int) -> List[range]:
    """The indexes of ``timing``'s rounds per process set: the worker runs ``repeat`` rounds in each set, one set
    after the other, and results.json keeps them in that order (``repeat`` 0: one set)."""
    n = len(timing.rounds_ns)
    size = repeat or n
    return [range(start, min(start + size, n)) for start in range(0, n, size)]


def set_times(timing: Timing, repeat: int) -> List[float]:
    """Each process set's absolute figure, ns per call: the fast end (:func:`fast_end`) of its rounds.

    No round is set aside: other work on a shared machine only ever adds time (whole scheduler slices lost, a
    slow state of the host lasting seconds), so a set's fast end is the codec's time when it was least crowded,
    and a set spent wholly in a slow state still gives its figure (setting such rounds aside emptied whole
    sets on a busy machine, and the test with them). Sets cut short under MIN_SET_ROUNDS rounds give none."""
    out = [fast_end([timing.rounds_ns[i] for i in rounds]) for rounds in process_sets(timing, repeat)
           if len(rounds) >= MIN_SET_ROUNDS]
    return out or [fast_end(timing.rounds_ns)]  # no set with enough rounds: one figure, untested


def set_ratios(timing: Timing, reference: Timing, repeat: int) -> List[float]:
    """Each process set's ratio to the reference timed in the same process set: the median, over the set's
    turns, of the codec's round over the reference's round of the same turn (codecs take turns round by round,
    so a turn's two rounds ran moments apart and the machine's speed cancels; the median passes over the turns
    in which other work crowded out one of the two). No turn is set aside, for the reason :func:`set_times`
    gives. Runs whose codecs have different round counts (an interrupted timing) fall back to the ratio of the
    sets' fast ends."""
    if len(timing.rounds_ns) != len(reference.rounds_ns):
        return [a / b for a, b in zip(set_times(timing, repeat), set_times(reference, repeat))]
    out = [statistics.median(timing.rounds_ns[i] / reference.rounds_ns[i] for i in rounds)
           for rounds in process_sets(timing, repeat) if len(rounds) >= MIN_SET_ROUNDS]
    return out or [timing.ratio_to(reference)]  # no set with enough rounds: one figure, untested


def _shift(old: Sequence[float], new: Sequence[float], alpha: float, min_effect: float,
           scale: float = 1.0) -> Shift:
    """Two runs' process-set figures compared: each run's figure is the geometric mean of its sets (times
    ``scale``); the test is a pooled two-sample t-test on the logarithms of the null hypothesis "the change is at
    most ``min_effect`` percent either way" (with ``min_effect`` 0, the usual two-sided test of no change).

    The process set is the unit because rounds are not independent: a process keeps its speed mode (up to
    1.3x between processes on a shared host) for its whole life, so every round of a set moves together, and a
    test on rounds mistakes one process's mode for a change. The pooled variance is the between-set spread
    both runs show (assumed the same in both: runs meant for comparing share settings and machine). Fewer than
    MIN_SETS sets in a run: no test (p None); every list holds at least one figure (:func:`set_ratios`)."""
    logs = [[math.log(x) for x in side] for side in (old, new)]
    means = [statistics.fmean(side) for side in logs]
    figures = (math.exp(means[0]) * scale, math.exp(means[1]) * scale)
    if min(len(old), len(new)) < MIN_SETS:
        return Shift(*figures, None, (len(old), len(new)))
    from scipy.stats import t as student_t  # 0.5 s to import: only a comparison needs it
    df = len(old) + len(new) - 2
    pooled = sum((x - m) ** 2 for side, m in zip(logs, means) for x in side) / df
    se = math.sqrt(pooled * (1 / len(old) + 1 / len(new)))
    beyond = abs(means[1] - means[0]) - math.log1p(min_effect / 100)  # how far the change goes past min_effect
    if se == 0:
        p = 0.0 if beyond > 0 else 1.0
    else:
        p = min(1.0, float(2 * student_t.sf(beyond / se, df)))
    detectable = math.expm1(math.log1p(min_effect / 100) + float(student_t.ppf(1 - alpha / 2, df)) * se) * 100
    return Shift(*figures, p, (len(old), len(new)), detectable)


def comparison_warnings(old: Suite, new: Suite, reference: Optional[str],
                        changes: Sequence[CodecChange]) -> List[str]:
    """Reasons to read the comparison with care: different traces or timing samples, partial runs,
    too few rounds for the test, a different machine speed between the runs."""
    notes = []
    differ = calls_differ(old, new)
    if differ:
        notes.append(f"the runs measured different calls ({'; '.join(differ)}): bytes per call average other "
                     "calls, so their changes are not exact and the gate does not judge them")
    sample_keys = ("sample", "sample_seed", "sample_by_method", "gc")
    differ = [k for k in sample_keys if old.settings.get(k) != new.settings.get(k)]
    differ += ["timing_lanes"] * ((old.settings.get("timing_lanes") or 1) != (new.settings.get("timing_lanes") or 1))
    if differ:
        notes.append(f"timing settings differ ({', '.join(differ)}): CPU per call averages different calls "
                     "or conditions")
    runs = (("OLD", old), ("NEW", new))
    notes += [f"{name} is a partial run ({run.partial})" for name, run in runs if run.partial]
    single = [name for name, run in runs if (run.settings.get("processes") or 0) < MIN_PROCESSES]
    if single:
        notes.append(f"{' and '.join(single)} timed each codec in fewer than {MIN_PROCESSES} process sets: on a "
                     "shared host a codec can run up to 1.3x slower in one process than in the next for the "
                     "process's whole life, which no test on one process's rounds can see; runs meant for a "
                     f"gate want {GATE_RUN_SETTINGS} (docs/compare.md)")
    untested = [f"{c.codec} {t.op}" for c in changes for t in c.cpu if t.ratio and not t.tested]
    if untested:
        notes.append(f"not tested (few sets): {len(untested)} timing(s) ({', '.join(untested[:4])}"
                     f"{', ...' if len(untested) > 4 else ''}): a run gave fewer than {MIN_SETS} process sets of "
                     f"{MIN_SET_ROUNDS} rounds or more, so the noise between processes, the test's yardstick, is "
                     f"unknown; make both runs with {GATE_RUN_SETTINGS}")
    sight = _sight(changes)
    if sight:
        notes.append(sight)
    speed = machine_speed(old, new, reference)
    return notes + ([speed] if speed else [])


def _sight(changes: Sequence[CodecChange]) -> Optional[str]:
    """How small a change these runs can see: the median and the worst of the tested ratios' smallest
    significant change (the test's critical value times its standard error, as a ratio change)."""
    seen = sorted((t.ratio.detectable_pct, f"{c.codec} {t.op}") for c in changes for t in c.cpu
                  if t.ratio and t.ratio.detectable_pct is not None)
    if not seen:
        return None
    median = statistics.median(pct for pct, _ in seen)
    return (f"with the noise between these runs' process sets, the test can call a ratio change of about "
            f"{median:.1f}% or more (median over {len(seen)} timings; least sensitive: {seen[-1][1]}, "
            f"{seen[-1][0]:.1f}%); smaller real changes go unseen: more --processes narrow it")


def unseen(comparison: Comparison, pct: float) -> List[Tuple[str, float]]:
    """The tested timings (``codec op``, smallest significant change %) for which a change of ``pct`` percent
    could not be called significant with these runs' noise and process sets (untested ones:
    :attr:`Comparison.untested`)."""
    return [(f"{c.codec} {t.op}", t.ratio.detectable_pct) for c in comparison.codecs for t in c.cpu
            if t.ratio and t.ratio.detectable_pct is not None and t.ratio.detectable_pct > pct]


def calls_differ(old: Suite, new: Suite) -> List[str]:
    """How the calls the two runs measured differ, in words (empty: the same calls): the trace (its sha256),
    the calls held out to train dictionaries or infer a schema, and the size pass's sample."""
    def held(run: Suite) -> int:
        return int((run.trace.get("training") or {}).get("held_out_calls") or 0)

    found = []
    if old.trace.get("sha256") != new.trace.get("sha256"):
        found.append("different traces: sha256 differs")
    if held(old) != held(new):
        found.append(f"{held(old):,} calls held out for training in OLD, {held(new):,} in NEW")
    if old.trace.get("calls") != new.trace.get("calls"):
        found.append(f"{old.trace.get('calls') or 0:,} calls measured in OLD, {new.trace.get('calls') or 0:,} in NEW")
    sampled = any(run.settings.get("size_pass_method", "every call") != "every call" for run in (old, new))
    changed = [k for k in ("size_pass_method", "size_pass_calls", "sample_seed")
               if old.settings.get(k) != new.settings.get(k)]
    if sampled and changed:
        found.append(f"the size pass's sample differs ({', '.join(changed)})")
    return found


def machine_speed(old: Suite, new: Suite, reference: Optional[str]) -> Optional[str]:
    """A note when the reference codec ran over SLOW_STATE_FACTOR x faster or slower in NEW than in OLD:
    the host's speed states do not slow codecs alike, so even the ratios can shift between such runs."""
    if reference is None:
        return None
    r_old, r_new = old.result(reference), new.result(reference)
    assert r_old.encode and r_new.encode
    factor = fast_end(r_new.encode.rounds_ns) / fast_end(r_old.encode.rounds_ns)
    if 1 / SLOW_STATE_FACTOR < factor < SLOW_STATE_FACTOR:
        return None
    return (f"the machine ran at another speed: {reference} encode took {factor:.2f}x its OLD time in NEW. "
            f"Absolute times moved with it; the ratios cancel drift that hits codecs alike, but a shared "
            f"host's speed states slow some codecs more than others (docs/methodology.md, speed states), so "
            f"ratios can shift too: rerun both in the same conditions before trusting a CPU change")


def gate(comparison: Comparison, fail_above_pct: float) -> List[Violation]:
    """The changes over ``fail_above_pct`` percent that fail a gate: any bytes increase (exact), and any
    significant increase (at least ``min_effect``) of a CPU ratio to the reference. Absolute CPU changes never
    fail it, nor bytes of runs that measured different calls."""
    found = []
    for c in comparison.codecs:
        if c.bytes and c.same_calls and c.bytes.change_pct > fail_above_pct:
            found.append(Violation(c.codec, "bytes", c.bytes.change_pct,
                                   f"{c.codec}: bytes per call +{c.bytes.change_pct:.1f}% "
                                   f"({c.bytes.old:.1f} -> {c.bytes.new:.1f} B/call)"))
        for t in c.cpu:
            if t.ratio and t.significant and t.ratio.change_pct > fail_above_pct:
                found.append(Violation(c.codec, t.op, t.ratio.change_pct,
                                       f"{c.codec}: {t.op} CPU +{t.ratio.change_pct:.1f}% relative to "
                                       f"{comparison.reference} ({t.ratio.old:.3f}x -> {t.ratio.new:.3f}x, "
                                       f"p = {t.ratio.p:.2g} < {comparison.alpha:g})"))
    return found
