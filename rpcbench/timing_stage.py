"""The timing stage of a run: the sample the size pass drew, timed per codec (:func:`run_timing` -> :class:`Timed`).

The default two lanes are kept only on CPUs nothing else keeps busy (:func:`rpcbench.worker.busy_cpus`), then
``--budget`` shrinks the timing plan (:func:`rpcbench.budget.fit_to_budget`); the sample and the tick
windows of a batched --wire policy come from the size pass's result, read no trace again; the codecs are
timed in fresh worker processes (:mod:`rpcbench.worker`) or interleaved in this one (``--processes 0``), by
:mod:`rpcbench.timing`'s loops. A codec the size pass stopped is not timed (its answer is its error).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, cast

from rpc_capture import Call, TraceWriter

from . import worker
from .budget import MEMORY_CALLS, TimingPlan, fit_to_budget
from .codec import Codec
from .config import RunConfig
from .meanwhile import NOTHING, Meanwhile
from .packet_timing import PacketPlan
from .plan import Plan
from .progress import Progress
from .size_result import SizePass
from .timing import TimingAnswer, TimingJob, run_jobs

STAGE_ROUNDS = 2  #: timed rounds (per process) that also time each stage of multi-stage codecs
TimingAnswers = Dict[str, TimingAnswer]  #: codec name -> its timing
log = logging.getLogger("rpcbench")


@dataclass(frozen=True)
class Timed:
    """What the timing stage gives: the plan it ran (after ``--budget``), the sample, each codec's answer."""

    plan: TimingPlan
    sample: Tuple[Call, ...]  #: the calls timed (none with --sizes-only)
    answers: TimingAnswers  #: codec name -> its timing, or its error (the size pass's, when it stopped it)
    interrupted: bool  #: Ctrl-C cut the timing short
    seconds: float  #: how long the stage took
    busy_cpus: Optional[float] = None  #: CPUs' worth of other work just before timing (looked at for default lanes)


def run_timing(plan: Plan, size_pass: SizePass, progress: Progress, meanwhile: Meanwhile = NOTHING) -> Timed:
    """Settle the lanes on this machine, fit the timing plan to the budget left, then time the sample of every
    codec the size pass kept (``meanwhile``: the caller's work left, done while this process looks at the CPUs,
    if it looks)."""
    config, started = plan.config, time.perf_counter()
    failed: TimingAnswers = {t.codec.name: TimingAnswer(error=t.error) for t in size_pass.tallies if t.error}
    codecs = [] if config.sizes_only else [c for c in plan.codecs if c.name not in failed]
    timing, busy = plan.timing, None
    zygote = worker.Zygote(config, [c.name for c in codecs]) if codecs and timing.processes else None
    try:  # the zygote makes its codecs while this process looks at the CPUs and draws the sample
        if codecs and timing.lanes > 1 and config.timing_lanes is None:
            timing, busy = _lanes_for_the_machine(timing, progress, zygote, meanwhile)
        if config.budget:
            timing = fit_to_budget(timing, size_pass, config.budget - (time.perf_counter() - plan.started))
        progress("timing sample", "taking it from the size pass")
        sample = [] if config.sizes_only else size_pass.sample(timing.sample)
        packets = None if config.sizes_only else size_pass.packet_plan(timing.sample)
        answers, interrupted = time_sample(config, timing, codecs, sample, progress, packets, zygote)
    finally:
        if zygote is not None:
            zygote.close()
    return Timed(timing, tuple(sample), {**answers, **failed}, interrupted, time.perf_counter() - started, busy)


def _lanes_for_the_machine(timing: TimingPlan, progress: Progress, zygote: Optional[worker.Zygote],
                           meanwhile: Meanwhile) -> Tuple[TimingPlan, Optional[float]]:
    """The default lanes kept only on CPUs nothing else keeps busy: beside other work a pinned lane shares its
    CPU with it and reads codecs up to 2x slow (docs/methodology.md), so the run times one codec at a time.
    The zygote's work and ``meanwhile`` are the run's own, not counted."""
    progress("timing sample", "looking at what else the CPUs do")
    busy = worker.busy_cpus(ours=zygote.cpu_seconds if zygote is not None else lambda: 0.0,
                            meanwhile=meanwhile.rest)
    if busy is None or busy < worker.BUSY_LIMIT:
        return timing, busy
    log.warning("timing: one codec at a time: other work kept %.2f CPUs busy, and two lanes need the CPUs to "
                "themselves (--timing-lanes 2 times two at once anyway)", busy)
    return dataclasses.replace(timing, lanes=1), busy


def time_sample(config: RunConfig, plan: TimingPlan, codecs: Sequence[Codec], sample: List[Call],
                progress: Progress, packets: Optional[PacketPlan] = None, zygote: Optional[worker.Zygote] = None
                ) -> Tuple[TimingAnswers, bool]:
    """Timing answers per codec name (in fresh worker processes, or interleaved in this one),
    and whether Ctrl-C cut the timing short. ``packets``: the sample's windows under the batched
    --wire policy, timed as whole packets in the same rounds; ``zygote``: the worker processes' zygote, started
    for ``codecs`` (else started here)."""
    if not codecs:
        return {}, False
    if plan.processes == 0:
        return _time_here(config, plan, codecs, sample, progress, packets)
    job_plan = {"codecs": [c.name for c in codecs], "repeat": plan.repeat, "warmup": plan.warmup,
                "min_time": plan.min_time, "processes": plan.processes, "lanes": plan.lanes, "gc": config.gc,
                "stage_rounds": STAGE_ROUNDS, "tails": config.tails, "memory": config.memory,
                "memory_calls": MEMORY_CALLS, "codec_timeout": config.codec_timeout, "packets": packets}
    with tempfile.TemporaryDirectory() as tmp:
        sample_path = os.path.join(tmp, "sample.rpct")
        with TraceWriter(sample_path) as w:
            for call in sample:
                w.write(call)
        if zygote is None:
            zygote = worker.Zygote(config, [c.name for c in codecs])
        try:
            generations, interrupted = zygote.time(sample_path, job_plan, progress)
        finally:
            zygote.close()
    merged: TimingAnswers = {}
    for answers in generations:
        for name, answer in answers.items():
            _merge(merged.setdefault(name, TimingAnswer()), cast(TimingAnswer, answer))
    return merged, interrupted


def _time_here(config: RunConfig, plan: TimingPlan, codecs: Sequence[Codec], sample: List[Call],
               progress: Progress, packets: Optional[PacketPlan]) -> Tuple[TimingAnswers, bool]:
    """``--processes 0``: every codec timed in this process, interleaved round by round."""
    jobs = [TimingJob(codec, sample, gc_enabled=config.gc, packets=packets) for codec in codecs]
    interrupted = run_jobs(jobs, plan.repeat, plan.warmup, plan.min_time, STAGE_ROUNDS, progress)
    out: TimingAnswers = {}
    for done, j in enumerate(jobs):
        if interrupted:
            out[j.name] = j.result()
        else:
            progress("tails and allocations", j.name, done, len(jobs))
            out[j.name] = j.finish(config.tails, config.memory, MEMORY_CALLS)
    return out, interrupted


def _merge(into: TimingAnswer, answer: TimingAnswer) -> None:
    """Add one worker's answer to a codec's results: rounds append, the rest is kept from the first."""
    if answer.get("error"):
        into["error"] = answer["error"]
        return
    for op, rounds in answer["rounds"].items():
        into.setdefault("rounds", {}).setdefault(op, []).extend(rounds)
    for op, stages in answer["stage_rounds"].items():
        for stage, rounds in stages.items():
            into.setdefault("stage_rounds", {}).setdefault(op, {}).setdefault(stage, []).extend(rounds)
    if "cpus" in answer:
        into.setdefault("cpus", []).extend(answer["cpus"])
    into.setdefault("calls", answer["calls"])
    into.setdefault("loops", answer["loops"])
    if "latency" in answer:  # tails and allocations come from the first process set only
        into.setdefault("latency", answer["latency"])
    if "memory" in answer:
        into.setdefault("memory", answer["memory"])
    if "packets" in answer:  # the same windows in every process set
        into.setdefault("packets", answer["packets"])
