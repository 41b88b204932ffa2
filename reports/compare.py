"""Every judgment ``run_bench.py compare OLD NEW`` makes: what changed per codec between two runs,
whether a CPU change is significant, and whether a change breaks a ``--fail-above`` gate.

Bytes are exact (``len()`` of every encoded call), so any change in them is real, when both runs measured the
same calls (:func:`calls_differ`: the trace, the held-out calls, the size pass's sample); otherwise the comparison
says so and claims no exact byte change. CPU times
are not: on a shared host the machine's speed drifts between runs, so each codec's time is
judged as its ratio to a reference codec measured in the same run (the drift cancels in the
ratio), and the two runs' ratio distributions are compared with a Mann-Whitney U test on the
rounds. Rounds crowded out by other work are set aside first (:func:`kept_rounds`), and the
figure compared is the 10th percentile of the rest (:func:`_shift` says why). The absolute times
get the same treatment, for information: they move with the machine.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import List, Optional, Sequence, Tuple

from scipy.stats import mannwhitneyu

from rpcbench.results import SLOW_STATE_FACTOR, CodecResult, Suite, Timing

from .analysis import MIN_KEPT_SHARE, OPS, Stability, stability, timed_both
from .reference import DEFAULT_REFERENCE, choose_reference

TEST = "Mann-Whitney U, two-sided"  #: the significance test on the rounds, as it is named in the output
ALPHA = 0.01  #: a CPU change is significant when the test's p-value is below this
#: process sets a run needs before per-process speed modes stop deciding a comparison (docs/compare.md)
MIN_PROCESSES = 3
__all__ = ["ALPHA", "DEFAULT_REFERENCE", "MIN_KEPT_SHARE", "TEST", "Comparison", "CpuChange", "Shift", "Violation",
           "compare", "gate"]
#: the percentile of the kept rounds compared (the median follows per-process speed modes; see _shift)
FAST_END_PERCENTILE = 10


@dataclass(frozen=True)
class Shift:
    """One figure in both runs and, for timings, the test's p-value (None: exact figure, not tested)."""

    old: float
    new: float
    p: Optional[float] = None

    @property
    def change_pct(self) -> float:
        """The new figure relative to the old one, in percent (+20.0: 20 % more)."""
        return (self.new / self.old - 1) * 100 if self.old else (0.0 if not self.new else math.inf)


@dataclass(frozen=True)
class CpuChange:
    """One codec's encode or decode time in both runs, over the kept rounds: absolute (µs per call, 10th
    percentile) and as its ratio to the reference codec (10th percentile of the per-round ratios);
    ``ratio`` is None for the reference itself and when there is no reference."""

    op: str
    absolute: Shift
    ratio: Optional[Shift]
    stability: Tuple[Stability, Stability]  #: of the timing in OLD, NEW
    alpha: float
    reference: bool = False  #: this is the reference codec's own timing (its ratio is 1 by construction)

    @property
    def rounds(self) -> Tuple[Tuple[int, int], ...]:
        """(kept, all) rounds in OLD, NEW."""
        return tuple((s.kept, s.rounds) for s in self.stability)

    @property
    def judged(self) -> bool:
        """Both runs' timings are judged by the stability rule (:func:`reports.analysis.stability`: at least
        MIN_KEPT_SHARE of their rounds kept): when fewer ran near the fastest, the machine was so busy that the
        fastest round itself was likely crowded out, and its figure with it."""
        return all(s.judged for s in self.stability)

    @property
    def significant(self) -> bool:
        """The ratio to the reference changed, by the test on the rounds at ``alpha``, in a judged timing."""
        return self.judged and self.ratio is not None and self.ratio.p is not None and self.ratio.p < self.alpha

    @property
    def verdict(self) -> str:
        """``slower``, ``faster``, ``n.s.`` (not significant), ``noisy`` (not judged), ``reference`` or ``-``
        (no reference)."""
        if self.ratio is None:
            return "reference" if self.reference else "-"
        if not self.judged:
            return "noisy"
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
    kept: Tuple[Tuple[int, int], ...] = ((0, 0), (0, 0))  #: (kept, all) rounds over every CPU change, in OLD, NEW
    fail_above: Optional[float] = None  #: the ``--fail-above`` gate, percent (None: no gate)
    violations: Tuple["Violation", ...] = ()  #: the changes that fail it
    calls_differ: Tuple[str, ...] = ()  #: how the runs' measured calls differ (:func:`calls_differ`); () = the same

    @property
    def same_calls(self) -> bool:
        """Both runs measured the same calls: byte changes are exact."""
        return not self.calls_differ


@dataclass(frozen=True)
class Violation:
    """A change a ``--fail-above`` gate fails on: a bytes increase, or a significant CPU ratio increase."""

    codec: str
    figure: str  #: ``bytes``, ``encode`` or ``decode``
    change_pct: float
    text: str


def compare(old: Suite, new: Suite, reference: str = DEFAULT_REFERENCE, alpha: float = ALPHA,
            fail_above: Optional[float] = None) -> Comparison:
    """What changed from ``old`` to ``new``; CPU judged by each codec's ratio to ``reference``
    (or, when it is not timed in both runs, to the first codec of NEW that is, said in ``reference_note``);
    with ``fail_above``, the changes that fail that gate (:func:`gate`)."""
    ref, note = _reference(old, new, reference)
    old_ref, new_ref = (old.find(ref), new.find(ref)) if ref else (None, None)
    differ = tuple(calls_differ(old, new))
    changes = []
    for r_new in new.results:
        r_old = old.find(r_new.codec)
        if r_old is not None:
            changes.append(replace(_codec_change(r_old, r_new, old_ref, new_ref, alpha), same_calls=not differ))
    old_ids, new_ids = {r.codec for r in old.results}, {r.codec for r in new.results}
    found = Comparison(
        reference=ref, reference_note=note, codecs=tuple(changes),
        added=tuple(r.codec for r in new.results if r.codec not in old_ids),
        removed=tuple(r.codec for r in old.results if r.codec not in new_ids),
        warnings=tuple(comparison_warnings(old, new, ref, changes, alpha)), alpha=alpha,
        kept=_kept(changes), calls_differ=differ)
    if fail_above is None:
        return found
    return replace(found, fail_above=fail_above, violations=tuple(gate(found, fail_above)))


def _kept(changes: Sequence[CodecChange]) -> Tuple[Tuple[int, int], ...]:
    """(kept, all) rounds over every CPU change, in OLD and in NEW."""
    counts = [t.rounds for c in changes for t in c.cpu]
    return tuple((sum(r[i][0] for r in counts), sum(r[i][1] for r in counts)) for i in (0, 1))


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
                  new_ref: Optional[CodecResult], alpha: float) -> CodecChange:
    """One codec's change; ratios only when both runs have the reference and this is not it."""
    sizes = Shift(old.sizes.mean, new.sizes.mean) if old.sizes and new.sizes else None
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
            ratio = _shift(ratio_rounds(t_old, getattr(old_ref, op)), ratio_rounds(t_new, getattr(new_ref, op)))
        cpu.append(CpuChange(op, _shift(kept_rounds(t_old), kept_rounds(t_new), scale=1e-3), ratio,
                             (stability(t_old), stability(t_new)), alpha, is_reference))
    return CodecChange(new.codec, sizes, tuple(cpu), tuple(missing))


def kept_rounds(timing: Timing) -> List[float]:
    """The rounds of ``timing`` within SLOW_STATE_FACTOR x its fastest round.

    Other work on a shared machine only ever adds time, in bursts and by process: with more
    processes than cores, a round is crowded out for whole scheduler slices while the next codec's
    round runs free, so pairing rounds of the same turn does not cancel it. Such rounds sit well
    above the fastest (the same rule as the run's speed-state notes) and are set aside. A real
    change of the codec moves its fastest round too, so it stays in view."""
    return [x for x, slow in zip(timing.rounds_ns, timing.slow_rounds) if not slow]


def fast_end(values: Sequence[float]) -> float:
    """The FAST_END_PERCENTILE-th percentile (inclusive method; the value itself for one value)."""
    if len(values) < 2:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[FAST_END_PERCENTILE - 1]


def ratio_rounds(timing: Timing, reference: Timing) -> List[float]:
    """Each kept round of ``timing`` over the fast end (:func:`fast_end`) of the reference's kept rounds,
    timed in the same run: the machine's speed during that run cancels."""
    ref_level = fast_end(kept_rounds(reference))
    return [x / ref_level for x in kept_rounds(timing)]


def _shift(old: Sequence[float], new: Sequence[float], scale: float = 1.0) -> Shift:
    """The fast ends (:func:`fast_end`) of two samples of rounds (times ``scale``) and the two-sided
    Mann-Whitney U p-value (1 when every round is the same value, which leaves the test undefined).

    The fast end, not the median: on a shared host a process can run a codec up to 1.3x slower
    than another process does, for its whole life (sub-µs codecs most), so a run of several process
    sets mixes such speed modes in proportions that differ from run to run, and the median follows
    the mixture. The fast end moves least with it (it needs one fast process of the run), and
    fully with a real change."""
    p = float(mannwhitneyu(old, new, alternative="two-sided").pvalue)
    return Shift(fast_end(old) * scale, fast_end(new) * scale, p if math.isfinite(p) else 1.0)


def smallest_p(n_old: int, n_new: int) -> float:
    """The smallest two-sided p-value the exact Mann-Whitney U test can give for these round counts
    (the two samples completely apart): with too few rounds no change can be significant."""
    return min(1.0, 2 / math.comb(n_old + n_new, n_old))


def comparison_warnings(old: Suite, new: Suite, reference: Optional[str], changes: Sequence[CodecChange],
                        alpha: float) -> List[str]:
    """Reasons to read the comparison with care: different traces or timing samples, partial runs,
    too few rounds for the test, a different machine speed between the runs."""
    notes = []
    differ = calls_differ(old, new)
    if differ:
        notes.append(f"the runs measured different calls ({'; '.join(differ)}): bytes per call average other "
                     "calls, so their changes are not exact and the gate does not judge them")
    sample_keys = ("sample", "sample_seed", "sample_by_method", "gc")
    differ = [k for k in sample_keys if old.settings.get(k) != new.settings.get(k)]
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
                     f"gate want --processes {MIN_PROCESSES} or more")
    too_few = [f"{c.codec} {t.op}" for c in changes for t in c.cpu
               if smallest_p(t.rounds[0][0], t.rounds[1][0]) >= alpha]
    if too_few:
        notes.append(f"too few kept rounds for the test to reach p < {alpha:g} for {len(too_few)} timing(s) "
                     f"({', '.join(too_few[:4])}{', ...' if len(too_few) > 4 else ''}): their CPU changes "
                     "cannot be significant; run with more --repeat or --processes")
    noisy = [f"{c.codec} {t.op}" for c in changes for t in c.cpu if t.ratio and not t.judged]
    if noisy:
        notes.append(f"not judged (noisy): {', '.join(noisy)}: a run kept under {MIN_KEPT_SHARE:.0%} of the "
                     "rounds (the machine was too busy for even the fastest round to be trusted); no verdict "
                     "and no gate for them: rerun on a quieter machine")
    speed = machine_speed(old, new, reference)
    return notes + ([speed] if speed else [])


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
    factor = fast_end(kept_rounds(r_new.encode)) / fast_end(kept_rounds(r_old.encode))
    if 1 / SLOW_STATE_FACTOR < factor < SLOW_STATE_FACTOR:
        return None
    return (f"the machine ran at another speed: {reference} encode took {factor:.2f}x its OLD time in NEW. "
            f"Absolute times moved with it; the ratios cancel drift that hits codecs alike, but a shared "
            f"host's speed states slow some codecs more than others (docs/methodology.md, speed states), so "
            f"ratios can shift too: rerun both in the same conditions before trusting a CPU change")


def gate(comparison: Comparison, fail_above_pct: float) -> List[Violation]:
    """The changes over ``fail_above_pct`` percent that fail a gate: any bytes increase (exact), and any
    significant increase of a CPU ratio to the reference. Absolute CPU changes never fail it, nor bytes of runs
    that measured different calls."""
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
