"""``run_benchmark(config) -> Suite``: the whole data path of one run, as a library call.

traces -> index -> dictionaries -> size pass (every call of every trace, as tasks on the
run's executor: bytes, fidelity, trace statistics, the floor, the timing sample) -> timing
(the sample, in fresh processes or in this one) -> results (a Suite).
Nothing here prints: progress goes to a callback, warnings to the ``rpcbench`` logger.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
import tempfile
import time
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

from rpc_capture import Call, TraceWriter

from . import budget, inference, worker
from .budget import Plan
from .codec import Codec
from .packet_timing import PacketPlan
from .config import RunConfig
from .environment import environment, library_version
from .executors import open_executor
from .floor import floor_figures
from .progress import Progress, quiet
from .registry import Registry
from .results import SCHEMA_VERSION, CodecResult, Suite, Timing, TraceResults
from .captured import use_capture, with_capture
from .pieces import use_registry
from .size_pass import PassFigures, SizePass, TracePass
from .tally import CodecTally
from .trace_index import index_traces
from .timing import PACKET_OPS, TimingAnswer, TimingJob, run_jobs
from .training import Training, train_dictionaries, wanted

log = logging.getLogger("rpcbench")

MEMORY_CALLS = 2000  #: calls of the sample replayed under tracemalloc (it is slow)
STAGE_ROUNDS = 2  #: timed rounds (per process) that also time each stage of multi-stage codecs
TimingAnswers = Dict[str, TimingAnswer]  #: codec name -> its timing


def run_benchmark(config: RunConfig, progress: Progress = quiet, registry: Optional[Registry] = None) -> Suite:
    """Run the benchmark ``config`` describes; its codecs come from ``registry`` (default: the config's). A trace
    imported from a packet capture adds the ``captured`` row (:mod:`rpcbench.captured`)."""
    config = with_capture(config)
    if registry is None:
        registry = config.registry()
    else:
        use_capture(registry, config.capture, config.proto)
    started = time.perf_counter()
    config, training, codecs, size_pass = _size_phase(config, registry, progress)
    trace = size_pass.record(training.summary() if training else None)
    size_pass_s = time.perf_counter() - started
    plan = Plan(config.sample, config.min_time, config.repeat, config.processes if worker.available() else 0,
                config.warmup)
    if config.budget:
        plan = _fit_budget(plan, size_pass, config.budget - (time.perf_counter() - started),
                           any(p.batched for p in config.wire))
        size_pass.sample_size = plan.sample
    progress("timing sample", "drawing it from the trace")
    sample = [] if config.sizes_only else size_pass.sample()
    packets = None if config.sizes_only else size_pass.packet_plan()
    timing_started = time.perf_counter()
    failed: TimingAnswers = {t.codec.name: TimingAnswer(error=t.error) for t in size_pass.tallies if t.error}
    timed = [] if config.sizes_only else [c for c in codecs if c.name not in failed]
    timings, interrupted = time_sample(config, plan, timed, sample, progress, packets)
    timings.update(failed)
    durations = {"size_pass_s": round(size_pass_s, 2), "timing_s": round(time.perf_counter() - timing_started, 2)}
    return Suite(
        schema_version=SCHEMA_VERSION,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        command=["run_bench.py", *config.command],
        environment=environment(lib for c in codecs for lib in c.libraries()),
        settings={**_settings(config, plan, sample, size_pass, durations), **size_pass.settings()},
        trace=trace,
        results=tuple(_codec_result(t, size_pass.figures(t), timings.get(t.codec.name, {}), registry,
                                    _dictionary(t, registry, training, size_pass), trace["floor"], untimed(config))
                      for t in size_pass.tallies),
        partial="interrupted (Ctrl-C) during timing" if interrupted else None,
        traces=tuple(_per_trace(size_pass, trace, registry) for trace in size_pass.per_trace),
    )


def _size_phase(config: RunConfig, registry: Registry, progress: Progress) -> Tuple[
        RunConfig, Optional[Training], List[Codec], SizePass]:
    """Index the traces, train the dictionaries, make the codecs and run the size pass on the run's
    executor (a Dask cluster is closed before timing starts): the config with the dictionaries, the
    training, the codecs and the merged pass."""
    with open_executor(config.dask, config.jobs, config.codec_timeout, progress) as executor:
        progress("size pass", "indexing the traces")
        index = index_traces(config, count=config.sample_calls is not None or bool(wanted(config, registry)))
        training = train_dictionaries(config, registry, [t.calls for t in index], progress)
        if training is not None:  # the config carries the dictionaries: every task builds the same codecs
            registry.dictionaries.update(training.dictionaries)
            config = dataclasses.replace(config, dictionaries=tuple(sorted(training.dictionaries.items())))
        if training is not None and training.schema is not None:  # ...and the inferred schema
            config = inference.use_schema(config, registry, training.schema)
        codecs, skipped = config.create_codecs(registry)
        for line in skipped:
            log.warning("%s", line)
        use_registry(config, registry)  # the run's registry, settled: every task of this process and its forks uses it
        size_pass = SizePass(config, codecs, index, training.held if training else ())
        size_pass.run(executor)
    return config, training, codecs, size_pass


def _per_trace(size_pass: SizePass, trace: TracePass, registry: Registry) -> TraceResults:
    """One trace's own figures (no timing: the run's sample is timed once, in the merged rows)."""
    return TraceResults(trace.entry(), tuple(
        _codec_result(tally, size_pass.figures(tally, trace), {}, registry, floor=floor_figures([trace.floor]),
                      not_timed="timed on the fleet's sample (the merged row)")
        for tally in trace.tallies))


def _dictionary(tally: CodecTally, registry: Registry, training: Optional[Training],
                size_pass: SizePass) -> Optional[Dict[str, Any]]:
    """A trained codec's dictionary figures (size, training time, shipping cost per call); None for others."""
    found = registry.trained_compressor(tally.codec.name)
    if training is None or found is None:
        return None
    inner = registry.create(found[0]).name
    return training.figures(inner, len(size_pass.stats.connections), size_pass.stats.calls)


def _settings(config: RunConfig, plan: Plan, sample: Sequence[Call], size_pass: SizePass,
              durations: Dict[str, float]) -> Dict[str, Any]:
    """What results.json records of how the run was made."""
    return {
        "codecs": [t.codec.name for t in size_pass.tallies], "repeat": plan.repeat, "warmup": plan.warmup,
        "budget_s": config.budget, "processes": plan.processes, "sample": len(sample), "sample_seed": config.seed,
        "min_time_s": plan.min_time,
        "sample_method": _sample_method(config, sample, size_pass),
        "sample_by_method": dict(Counter(call.method for call in sample).most_common()), "jobs": config.jobs,
        "gc": f"{'on' if config.gc else 'off'} inside timed loops", "timer": "perf_counter_ns around whole batches",
        "tails": config.tails, "memory": config.memory, "codec_timeout_s": config.codec_timeout, **durations,
        **({"precision": config.precision.summary()} if config.precision.name else {}),
    }


def _sample_method(config: RunConfig, sample: Sequence[Call], size_pass: SizePass) -> str:
    """How the timing sample was drawn, in words."""
    if config.sizes_only:
        return "none"
    if len(sample) == size_pass.stats.calls:
        return "all calls"
    return "stratified by method, seeded" if len(size_pass.traces) == 1 else "stratified by trace and method, seeded"


def _fit_budget(plan: Plan, size_pass: SizePass, seconds_left: float, packets: bool) -> Plan:
    """Shrink the timing plan to the time left, from each codec's cost in the size pass (``packets``: the
    rounds time the packets of a batched --wire policy too, about one replay more)."""
    calls = max(size_pass.measured, 1)  # the calls the codecs' cost was measured over
    costs = [(t.ns / calls, 1 + (len(t.codec.encode_stages()) > 1 and not t.codec.per_connection) + packets)
             for t in size_pass.tallies]
    fitted = budget.fit(plan, costs, seconds_left, MEMORY_CALLS)
    cut = budget.cuts(plan, fitted)
    if cut:  # never quietly: the user asked for one plan and gets another
        log.warning("--budget: %.0f s left after the size pass; timing cut to fit: %s", seconds_left, cut)
    if fitted.cost_s(costs, MEMORY_CALLS) > seconds_left:
        log.warning("--budget leaves %.0f s after the size pass; timing will need about %.0f s even with the "
                    "smallest plan", seconds_left, fitted.cost_s(costs, MEMORY_CALLS))
    return fitted


def time_sample(config: RunConfig, plan: Plan, codecs: List[Codec], sample: List[Call],
                progress: Progress, packets: Optional[PacketPlan] = None) -> Tuple[TimingAnswers, bool]:
    """Timing answers per codec name (in fresh worker processes, or interleaved in this one),
    and whether Ctrl-C cut the timing short. ``packets``: the sample's windows under the batched
    --wire policy, timed as whole packets in the same rounds."""
    if not codecs:
        return {}, False
    if plan.processes == 0:
        return _time_here(config, plan, codecs, sample, progress, packets)
    job_plan = {"codecs": [c.name for c in codecs], "repeat": plan.repeat, "warmup": plan.warmup,
                "min_time": plan.min_time, "processes": plan.processes, "gc": config.gc,
                "stage_rounds": STAGE_ROUNDS, "tails": config.tails, "memory": config.memory,
                "memory_calls": MEMORY_CALLS, "codec_timeout": config.codec_timeout, "packets": packets}
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
    into.setdefault("calls", answer["calls"])
    into.setdefault("loops", answer["loops"])
    if "latency" in answer:  # tails and allocations come from the first process set only
        into.setdefault("latency", answer["latency"])
    if "memory" in answer:
        into.setdefault("memory", answer["memory"])
    if "packets" in answer:  # the same windows in every process set
        into.setdefault("packets", answer["packets"])


def packet_cpu(wire: Tuple[Dict[str, Any], ...], timing: TimingAnswer) -> Tuple[Dict[str, Any], ...]:
    """A codec's wire rows with the CPU per call of whole packets (encode + frame + compress; decompress + unframe +
    decode) under the timed batched policy, as ``cpu`` of that policy's row (``{"error": why}`` when its
    packets could not be prepared; no ``cpu`` when the codec's timing did not run)."""
    shape, rounds = timing.get("packets"), timing.get("rounds", {})
    if not shape:
        return wire
    if "error" in shape:
        cpu: Dict[str, Any] = {"error": shape["error"]}
    elif all(rounds.get(op) for op in PACKET_OPS):
        cpu = {"calls": shape["calls"], "packets": shape["packets"],
               **{op.split("_")[0]: {"rounds_ns": list(rounds[op]), "calls": shape["calls"], "loops": shape["loops"]}
                  for op in PACKET_OPS}}
    else:
        return wire
    return tuple({**w, "cpu": cpu} if w["wire"] == shape["policy"] else w for w in wire)


def untimed(config: RunConfig) -> str:
    """Why a codec that ran the size pass has no timing."""
    return "not timed: --sizes-only" if config.sizes_only else "not timed: the run was interrupted first"


def _codec_result(tally: CodecTally, added: PassFigures, timing: TimingAnswer, registry: Registry,
                  dictionary: Optional[Dict[str, Any]] = None, floor: Optional[Dict[str, Any]] = None,
                  not_timed: str = "not timed: the run was interrupted first") -> CodecResult:
    """One codec's row of the results, made here only: the size pass's tally, what the pass adds to it
    (``added``) and its timing answer."""
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
        problems=added.problems, estimate=added.estimate, wire=packet_cpu(added.wire, timing), link=added.link,
        by_method={m: {"calls": c, "bytes": b} for m, (c, b) in sorted(tally.by_method.items())},
        error=timing.get("error") or (None if rounds.get("encode") else not_timed),
        stages={op: {name: t for name, v in stages.items() if (t := as_timing(v))}
                for op, stages in timing.get("stage_rounds", {}).items() if stages},
        latency=timing.get("latency", {}), memory=timing.get("memory", {}), dictionary=dictionary,
        state_bytes_per_conn=tally.state_bytes, shared_state_bytes=tally.shared_state_bytes,
        ordered_delivery=codec.ordered_delivery, floor_ratio=_floor_ratio(tally, floor),
        by_direction={d: {"calls": c, "bytes": b} for d, (c, b) in sorted(tally.by_direction.items())},
        lossy={path: {"changed": n, "max_error": error, "step": step}
               for path, (n, error, step) in sorted(tally.lossy.items())},
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
