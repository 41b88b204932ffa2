"""``run_benchmark(config) -> Suite``: the whole data path of one run, as a library call.

trace -> calls -> size pass (every call: bytes, fidelity, trace statistics, the timing
sample) -> timing (the sample, in fresh processes or in this one) -> results (a Suite).
Nothing here prints: progress goes to a callback, warnings to the ``rpcbench`` logger.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import os
import tempfile
import time
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union, cast

from rpc_capture import Call, TraceWriter, damage_note, open_trace

from . import budget, worker
from .budget import Plan
from .codec import Codec
from .config import RunConfig
from .environment import environment, file_sha256, library_version
from .errors import BenchError
from .fleet import Executor, FleetPass, fleet_row, fleet_settings, fleet_trace_info, trace_entry, train_across
from .floor import Floor
from .progress import Progress, quiet
from .registry import Registry
from .results import PER_CONNECTION_COLUMNS, SCHEMA_VERSION, CodecResult, Suite, Timing, TraceResults
from .size_pass import CodecTally, SizePass
from .timing import TimingAnswer, TimingJob, run_jobs
from .training import HeldOut, Training, train_dictionaries

log = logging.getLogger("rpcbench")

MEMORY_CALLS = 2000  #: calls of the sample replayed under tracemalloc (it is slow)
STAGE_ROUNDS = 2  #: timed rounds (per process) that also time each stage of multi-stage codecs
TimingAnswers = Dict[str, TimingAnswer]  #: codec name -> its timing
AnyPass = Union[SizePass, FleetPass]  #: one trace's size pass, or a fleet's


def run_benchmark(config: RunConfig, progress: Progress = quiet, registry: Optional[Registry] = None) -> Suite:
    """Run the benchmark ``config`` describes; its codecs come from ``registry`` (default: the config's)."""
    registry = registry or config.registry()
    started = time.perf_counter()
    config, training, codecs, (size_pass, trace, reopen) = _size_phase(config, registry, progress)
    floor = trace["floor"]
    size_pass_s = time.perf_counter() - started
    plan = Plan(config.sample, config.min_time, config.repeat, config.processes if worker.available() else 0,
                config.warmup)
    if config.budget:
        plan = _fit_budget(plan, size_pass, config.budget - (time.perf_counter() - started))
        size_pass.sample_size = plan.sample
    progress("timing sample", "drawing it from the trace")
    sample = [] if config.sizes_only else size_pass.sample(reopen)
    timing_started = time.perf_counter()
    failed: TimingAnswers = {t.codec.name: TimingAnswer(error=t.error) for t in size_pass.tallies if t.error}
    timed = [] if config.sizes_only else [c for c in codecs if c.name not in failed]
    timings, interrupted = time_sample(config, plan, timed, sample, progress)
    timings.update(failed)
    durations = {"size_pass_s": round(size_pass_s, 2), "timing_s": round(time.perf_counter() - timing_started, 2)}
    return Suite(
        schema_version=SCHEMA_VERSION,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        command=["run_bench.py", *config.command],
        environment=environment(lib for c in codecs for lib in c.libraries()),
        settings={**_settings(config, plan, sample, size_pass, durations), **fleet_settings(config, size_pass)},
        trace=trace,
        results=tuple(fleet_row(size_pass, _codec_result(t, timings.get(t.codec.name, {}), registry,
                                                         _dictionary(t, registry, training, size_pass), floor,
                                                         untimed(config)))
                      for t in size_pass.tallies),
        partial="interrupted (Ctrl-C) during timing" if interrupted else None,
        traces=trace_results(size_pass, registry),
    )


def _size_phase(config: RunConfig, registry: Registry, progress: Progress) -> Tuple[
        RunConfig, Optional[Training], List[Codec], Tuple[AnyPass, Dict[str, Any], Callable[[], Any]]]:
    """Dictionaries, codecs and the size pass (a fleet's on its Dask cluster, closed before timing starts):
    the config with the dictionaries, the training, the codecs, and the pass with its trace record and
    how to reopen the trace."""
    with Executor(config.dask, progress) if config.fleet else contextlib.nullcontext() as executor:
        config, training = _train(config, registry, executor, progress)
        codecs, skipped = config.create_codecs(registry)
        for line in skipped:
            log.warning("%s", line)
        if executor is not None:
            return config, training, codecs, _fleet_pass(config, codecs, training, executor)
        return config, training, codecs, _single_pass(config, registry, codecs, training, progress)


def _single_pass(config: RunConfig, registry: Registry, codecs: List[Codec], training: Optional[Training],
                 progress: Progress) -> Tuple[SizePass, Dict[str, Any], Callable[[], Any]]:
    """The size pass over one trace in this machine's forked processes, what results.json records
    of the trace (its floor included), and how to reopen it for the timing sample."""
    skip = training.held_out if training else 0

    def reopen() -> Any:
        reader = open_trace(config.trace, config.salvage)
        return HeldOut(reader, skip) if skip else reader

    reader = reopen()
    size_pass = SizePass(codecs, config.sample, config.seed, Floor(registry.create("json")) if config.floor else None)
    size_pass.run_split(reader, reopen, config.jobs, progress, config.codec_timeout)
    if damage_note(reader):
        log.warning("%s", damage_note(reader))
    if not size_pass.stats.calls:
        raise BenchError(f"{config.trace}: the trace holds no calls")
    floor = None
    if size_pass.floor:
        floor = size_pass.floor.result(progress)
    return size_pass, {**_trace_info(config.trace, reader, size_pass, codecs, training), "floor": floor}, reopen


def _fleet_pass(config: RunConfig, codecs: List[Codec], training: Optional[Training],
                executor: Executor) -> Tuple[FleetPass, Dict[str, Any], Callable[[], Any]]:
    """The size pass over every trace of a fleet (on Dask with ``--dask``), merged, and what results.json
    records of the fleet."""
    size_pass = FleetPass(config, codecs, config.trace_files)
    size_pass.run(executor, train=bool(training and training.held_out))
    reference = next((c.name for c in codecs if c.name == "json"), codecs[0].name)
    trace = {**fleet_trace_info(config, size_pass), "bytes_reference": reference,
             "training": training.summary() if training else None, "floor": None,
             "per_connection": _per_connection(size_pass, reference)}
    return size_pass, trace, lambda: None


def _train(config: RunConfig, registry: Registry, executor: Optional[Executor],
           progress: Progress) -> Tuple[RunConfig, Optional[Training]]:
    """Train the dictionaries the run's codecs need (before the size pass; a fleet's on a sample across
    its traces); the config then carries them, so timing and fleet workers build the same codecs."""
    if executor is not None and not config.train_trace:
        training = train_across(config, registry, executor, progress)
    else:
        training = train_dictionaries(config, registry, progress)
    if training is None:
        return config, None
    registry.dictionaries.update(training.dictionaries)
    return dataclasses.replace(config, dictionaries=tuple(sorted(training.dictionaries.items()))), training


def _dictionary(tally: CodecTally, registry: Registry, training: Optional[Training],
                size_pass: AnyPass) -> Optional[Dict[str, Any]]:
    """A trained codec's dictionary figures (size, training time, shipping cost per call); None for others."""
    found = registry.trained_compressor(tally.codec.name)
    if training is None or found is None:
        return None
    inner = registry.create(found[0]).name
    return training.figures(inner, len(size_pass.stats.connections), size_pass.stats.calls)


def _settings(config: RunConfig, plan: Plan, sample: Sequence[Call], size_pass: AnyPass,
              durations: Dict[str, float]) -> Dict[str, Any]:
    """What results.json records of how the run was made."""
    return {
        "codecs": [t.codec.name for t in size_pass.tallies], "repeat": plan.repeat, "warmup": plan.warmup,
        "budget_s": config.budget, "processes": plan.processes, "sample": len(sample), "sample_seed": config.seed,
        "min_time_s": plan.min_time,
        "sample_method": "all calls" if len(sample) == size_pass.stats.calls else "stratified by method, seeded",
        "sample_by_method": dict(Counter(call.method for call in sample).most_common()), "jobs": config.jobs,
        "gc": f"{'on' if config.gc else 'off'} inside timed loops", "timer": "perf_counter_ns around whole batches",
        "tails": config.tails, "memory": config.memory, "codec_timeout_s": config.codec_timeout, **durations,
    }


def _fit_budget(plan: Plan, size_pass: AnyPass, seconds_left: float) -> Plan:
    """Shrink the timing plan to the time left, from each codec's cost in the size pass."""
    calls = max(size_pass.measured, 1)  # the calls the codecs' cost was measured over
    costs = [(t.ns / calls, len(t.codec.encode_stages()) > 1 and not t.codec.per_connection) for t in size_pass.tallies]
    fitted = budget.fit(plan, costs, seconds_left, MEMORY_CALLS)
    if fitted.cost_s(costs, MEMORY_CALLS) > seconds_left:
        log.warning("--budget leaves %.0f s after the size pass; timing will need about %.0f s even with the "
                    "smallest plan", seconds_left, fitted.cost_s(costs, MEMORY_CALLS))
    return fitted


def time_sample(config: RunConfig, plan: Plan, codecs: List[Codec], sample: List[Call],
                progress: Progress) -> Tuple[TimingAnswers, bool]:
    """Timing answers per codec name (in fresh worker processes, or interleaved in this one),
    and whether Ctrl-C cut the timing short."""
    if not codecs:
        return {}, False
    if plan.processes == 0:
        return _time_here(config, plan, codecs, sample, progress)
    job_plan = {"codecs": [c.name for c in codecs], "repeat": plan.repeat, "warmup": plan.warmup,
                "min_time": plan.min_time, "processes": plan.processes, "gc": config.gc,
                "stage_rounds": STAGE_ROUNDS, "tails": config.tails, "memory": config.memory,
                "memory_calls": MEMORY_CALLS, "codec_timeout": config.codec_timeout}
    with tempfile.TemporaryDirectory() as tmp:
        sample_path = os.path.join(tmp, "sample.rpct")
        with TraceWriter(sample_path) as w:
            for call in sample:
                w.write(call)
        generations, interrupted = worker.time_in_processes(sample_path, config, job_plan, progress)
    merged: TimingAnswers = {}
    for answers in generations:
        for name, answer in answers.items():
            _merge(merged.setdefault(name, TimingAnswer()), cast(TimingAnswer, answer))
    return merged, interrupted


def _time_here(config: RunConfig, plan: Plan, codecs: List[Codec], sample: List[Call],
               progress: Progress) -> Tuple[TimingAnswers, bool]:
    """``--processes 0``: every codec timed in this process, interleaved round by round."""
    jobs = [TimingJob(codec, sample, gc_enabled=config.gc) for codec in codecs]
    interrupted = run_jobs(jobs, plan.repeat, plan.warmup, plan.min_time, STAGE_ROUNDS, progress)
    out: TimingAnswers = {}
    for done, j in enumerate(jobs):
        if interrupted:
            out[j.codec.name] = j.result()
        else:
            progress("tails and allocations", j.codec.name, done, len(jobs))
            out[j.codec.name] = j.finish(config.tails, config.memory, MEMORY_CALLS)
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
    into.setdefault("calls", answer["calls"])
    into.setdefault("loops", answer["loops"])
    if "latency" in answer:  # tails and allocations come from the first process set only
        into.setdefault("latency", answer["latency"])
    if "memory" in answer:
        into.setdefault("memory", answer["memory"])


def trace_results(size_pass: Any, registry: Registry) -> Tuple[TraceResults, ...]:
    """A fleet's figures per trace (no timing: the fleet's sample is timed once, in the merged rows)."""
    if not isinstance(size_pass, FleetPass):
        return ()
    return tuple(TraceResults(trace_entry(t), tuple(fleet_row(size_pass, _codec_result(
        tally, {}, registry, not_timed="timed on the fleet's sample (the merged row)"), t) for tally in t.tallies))
        for t in size_pass.traces)


def untimed(config: RunConfig) -> str:
    """Why a codec that ran the size pass has no timing."""
    return "not timed: --sizes-only" if config.sizes_only else "not timed: the run was interrupted first"


def _codec_result(tally: CodecTally, timing: TimingAnswer, registry: Registry,
                  dictionary: Optional[Dict[str, Any]] = None, floor: Optional[Dict[str, Any]] = None,
                  not_timed: str = "not timed: the run was interrupted first") -> CodecResult:
    """One codec's row of the results: the size pass's tally plus its timing answer."""
    codec = tally.codec
    rounds = timing.get("rounds", {})

    def as_timing(values: Optional[List[float]]) -> Optional[Timing]:
        return Timing(tuple(values), timing["calls"], timing["loops"]) if values else None

    return CodecResult(
        codec=codec.name, config=_jsonable(codec.config()), library=codec.library,
        library_version=library_version(codec.library) if codec.library else None,
        origin=registry.origin(codec.base.id) or "", calls=sum(tally.sizes.values()), failures=tally.failures,
        mismatches=tally.mismatches, sizes=tally.size_stats(),
        encode=as_timing(rounds.get("encode")), decode=as_timing(rounds.get("decode")),
        problems=tally.problem_list(),
        by_method={m: {"calls": c, "bytes": b} for m, (c, b) in sorted(tally.by_method.items())},
        error=timing.get("error") or (None if rounds.get("encode") else not_timed),
        stages={op: {name: t for name, v in stages.items() if (t := as_timing(v))}
                for op, stages in timing.get("stage_rounds", {}).items() if stages},
        latency=timing.get("latency", {}), memory=timing.get("memory", {}), dictionary=dictionary,
        state_bytes_per_conn=tally.state_bytes, shared_state_bytes=tally.shared_state_bytes,
        ordered_delivery=codec.ordered_delivery, floor_ratio=_floor_ratio(tally, floor),
        by_direction={d: {"calls": c, "bytes": b} for d, (c, b) in sorted(tally.by_direction.items())},
    )


def _floor_ratio(tally: CodecTally, floor: Optional[Dict[str, Any]]) -> Optional[float]:
    """The codec's bytes per call as a multiple of the trace's floor (None without either)."""
    sizes = tally.size_stats()
    if sizes is None or not floor or not floor["bytes_per_call"]:
        return None
    return sizes.mean / floor["bytes_per_call"]


def _jsonable(config: Dict[str, Any]) -> Dict[str, Any]:
    """A codec's configuration with anything JSON cannot hold written as its repr."""
    plain = (str, int, float, bool, type(None), list, tuple)
    return {k: v if isinstance(v, plain) else repr(v) for k, v in config.items()}


def _trace_info(path: str, reader: Any, size_pass: SizePass, codecs: List[Codec],
                training: Optional[Training]) -> Dict[str, Any]:
    """What results.json records of the trace: file, format, statistics, damage, recorder counters."""
    reference = next((c.name for c in codecs if c.name == "json"), codecs[0].name)
    return {
        "path": path,
        "format": "jsonl" if reader.version is None else f"rpctrace v{reader.version}",
        "sha256": file_sha256(path),
        "file_bytes": os.path.getsize(path),
        "metadata": reader.metadata,
        **size_pass.stats.summary(),
        "truncated_bytes": reader.truncated_bytes,
        "salvaged": damage_note(reader),
        "recorder": reader.end or reader.stats,
        "bytes_reference": reference,
        "training": training.summary() if training else None,
        "per_connection": _per_connection(size_pass, reference),
    }


def _per_connection(size_pass: AnyPass, reference: str) -> Optional[Dict[str, Any]]:
    """Each connection's time span, calls and ``reference``'s bytes per direction, as columns: the
    capacity planner's confidence intervals come from their spread (None if the reference has no figures)."""
    tally = next(t for t in size_pass.tallies if t.codec.name == reference)
    if tally.error:
        return None
    spans = size_pass.stats.spans
    rows = [((last - first) // 1_000_000, c2s, s2c, *tally.by_connection.get(conn, (0, 0)))
            for conn, (first, last, c2s, s2c) in spans.items()]
    return {"codec": reference, **{name: [row[i] for row in rows] for i, name in enumerate(PER_CONNECTION_COLUMNS)}}
