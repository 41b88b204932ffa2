"""``run_benchmark(config) -> Suite``: the whole data path of one run, as a library call.

Each stage is called once, in order, and hands the next a frozen value it only reads:

    plan (rpcbench/plan.py: traces indexed, dictionaries and schema trained on the held-out calls, codecs made)
    -> size and fidelity pass, with the floor (rpcbench/size_pass.py, on the run's executor: every call of
       every trace; the timing sample's calls and tick windows drawn in the same read) -> SizePass
    -> timing (rpcbench/timing_stage.py: the budget fitted, the sample timed) -> Timed
    -> results (here, build_suite: each codec's CodecResult, made in one function) -> Suite.

Nothing here prints: progress goes to a callback, warnings to the ``rpcbench`` logger.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from dataclasses import replace
from typing import Any, Dict, List, Optional, Tuple

from .config import RunConfig
from .environment import environment, library_version
from .executors import open_executor
from .floor import FloorFigures, floor_figures
from .meanwhile import NOTHING, Meanwhile
from .plan import Plan, make_plan
from .progress import Progress, quiet
from .registry import Registry
from .results import SCHEMA_VERSION, CodecResult, Suite, Timing, TraceResults
from .results_wire import PacketCpu, WireFigures
from .captured import use_capture
from .size_pass import run_size_pass
from .size_result import PassFigures, SizePass, TracePass
from .tally import CodecTally
from .timing import PACKET_OPS, TimingAnswer
from .timing_stage import Timed, run_timing


def run_benchmark(config: RunConfig, progress: Progress = quiet, registry: Optional[Registry] = None,
                  meanwhile: Meanwhile = NOTHING) -> Suite:
    """Run the benchmark ``config`` describes; its codecs come from ``registry`` (default: the config's). A trace
    imported from a packet capture adds the ``captured`` row (:mod:`rpcbench.captured`). ``meanwhile``: the
    caller's own work, done while the run would wait: for the schema inference, then while it looks at the CPUs
    before timing (if it does either)."""
    config = config.with_capture()
    if registry is None:
        registry = config.registry()
    else:
        use_capture(registry, config.capture, config.proto)
    plan = make_plan(config, registry, progress, meanwhile)
    with open_executor(config.dask, config.jobs, config.codec_timeout, progress) as executor:
        size_pass = run_size_pass(plan, executor)  # a Dask cluster is closed before timing starts
    size_pass_s = time.perf_counter() - plan.started
    timed = run_timing(plan, size_pass, progress, meanwhile)
    return build_suite(plan, size_pass, timed, size_pass_s)


def build_suite(plan: Plan, size_pass: SizePass, timed: Timed, size_pass_s: float) -> Suite:
    """The run's Suite: every codec's row (merged, and per trace in a fleet), the trace record, the settings."""
    config, training = plan.config, plan.training
    trace = size_pass.record(training.summary() if training else None)
    return Suite(
        schema_version=SCHEMA_VERSION,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        command=["run_bench.py", *config.command],
        environment=environment(lib for c in plan.codecs for lib in c.libraries()),
        settings={**_settings(plan, size_pass, timed, size_pass_s), **size_pass.settings()},
        trace=trace,
        results=tuple(_codec_result(t, size_pass.figures(t), timed.answers.get(t.codec.name, {}), plan.registry,
                                    _dictionary(t, plan, size_pass), size_pass.floor, untimed(config))
                      for t in size_pass.tallies),
        partial="interrupted (Ctrl-C) during timing" if timed.interrupted else None,
        traces=tuple(_per_trace(size_pass, one, plan.registry) for one in size_pass.per_trace),
    )


def _per_trace(size_pass: SizePass, trace: TracePass, registry: Registry) -> TraceResults:
    """One trace's own figures (no timing: the run's sample is timed once, in the merged rows)."""
    return TraceResults(trace.entry(), tuple(
        _codec_result(tally, size_pass.figures(tally, trace), {}, registry, floor=floor_figures([trace.floor]),
                      not_timed="timed on the fleet's sample (the merged row)")
        for tally in trace.tallies))


def _dictionary(tally: CodecTally, plan: Plan, size_pass: SizePass) -> Optional[Dict[str, Any]]:
    """A trained codec's dictionary figures (size, training time, shipping cost per call); None for others."""
    found = plan.registry.trained_compressor(tally.codec.name)
    if plan.training is None or found is None:
        return None
    inner = plan.registry.create(found[0]).name
    return plan.training.figures(inner, len(size_pass.stats.connections), size_pass.stats.calls)


def _settings(plan: Plan, size_pass: SizePass, timed: Timed, size_pass_s: float) -> Dict[str, Any]:
    """What results.json records of how the run was made."""
    config, timing, sample = plan.config, timed.plan, timed.sample
    return {
        "codecs": [t.codec.name for t in size_pass.tallies], "repeat": timing.repeat, "warmup": timing.warmup,
        "budget_s": config.budget, "processes": timing.processes, "sample": len(sample), "sample_seed": config.seed,
        "min_time_s": timing.min_time, "timing_lanes": timing.lanes,
        **({"busy_cpus_before_timing": round(timed.busy_cpus, 2)} if timed.busy_cpus is not None else {}),
        "sample_method": _sample_method(config, sample, size_pass),
        "sample_by_method": dict(Counter(call.method for call in sample).most_common()), "jobs": config.jobs,
        "gc": f"{'on' if config.gc else 'off'} inside timed loops", "timer": "perf_counter_ns around whole batches",
        "tails": config.tails, "memory": config.memory, "codec_timeout_s": config.codec_timeout,
        "size_pass_s": round(size_pass_s, 2), "timing_s": round(timed.seconds, 2),
        **({"precision": config.precision.summary()} if config.precision.name else {}),
    }


def _sample_method(config: RunConfig, sample: Tuple[Any, ...], size_pass: SizePass) -> str:
    """How the timing sample was drawn, in words."""
    if config.sizes_only:
        return "none"
    if len(sample) == size_pass.stats.calls:
        return "all calls"
    return "stratified by method, seeded" if len(size_pass.traces) == 1 else "stratified by trace and method, seeded"


def packet_cpu(wire: Tuple[WireFigures, ...], timing: TimingAnswer) -> Tuple[WireFigures, ...]:
    """A codec's wire rows with the CPU per call of whole packets (encode + frame + compress; decompress + unframe +
    decode) under the timed batched policy, as ``cpu`` of that policy's row (only the error when its packets could
    not be prepared; no ``cpu`` when the codec's timing did not run)."""
    shape, rounds = timing.get("packets"), timing.get("rounds", {})
    if not shape:
        return wire
    if "error" in shape:
        cpu = PacketCpu(error=shape["error"])
    elif all(rounds.get(op) for op in PACKET_OPS):
        encode, decode = (Timing(tuple(rounds[op]), shape["calls"], shape["loops"]) for op in PACKET_OPS)
        cpu = PacketCpu(shape["calls"], shape["packets"], encode, decode)
    else:
        return wire
    return tuple(replace(w, cpu=cpu) if w.wire == shape["policy"] else w for w in wire)


def untimed(config: RunConfig) -> str:
    """Why a codec that ran the size pass has no timing."""
    return "not timed: --sizes-only" if config.sizes_only else "not timed: the run was interrupted first"


def _codec_result(tally: CodecTally, added: PassFigures, timing: TimingAnswer, registry: Registry,
                  dictionary: Optional[Dict[str, Any]] = None, floor: Optional[FloorFigures] = None,
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


def _floor_ratio(tally: CodecTally, floor: Optional[FloorFigures]) -> Optional[float]:
    """The codec's bytes per call as a multiple of the trace's floor (None without either)."""
    sizes = tally.size_stats()
    if sizes is None or not floor or not floor.bytes_per_call:
        return None
    return sizes.mean / floor.bytes_per_call


def _jsonable(config: Dict[str, Any]) -> Dict[str, Any]:
    """A codec's configuration with anything JSON cannot hold written as its repr."""
    plain = (str, int, float, bool, type(None), list, tuple)
    return {k: v if isinstance(v, plain) else repr(v) for k, v in config.items()}
