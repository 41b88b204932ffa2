"""A run resolved once (:class:`Plan`), before any call is measured: later stages only read it.

The traces indexed, the dictionaries trained and the schema inferred on the held-out calls
(:mod:`rpcbench.training`), the config carrying both (so every task and timing process builds the same
codecs), the codecs made from the registry once, how the size pass samples (:class:`SamplePlan`: seed,
hold-out, share of calls measured), each trace's --wire policies resolved by the tick its first calls show
(read once, only when a policy is batched), and the timing plan asked for, with the moment the run started,
from which ``--budget`` counts.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from rpc_capture import open_trace

from . import inference, worker
from .budget import TimingPlan
from .codec import Codec
from .config import RunConfig
from .errors import BenchError
from .meanwhile import NOTHING, Meanwhile
from .pieces import use_registry
from .progress import Progress
from .registry import Registry
from .sampling import SamplePlan
from .trace_index import TraceIndex, index_traces
from .training import Training, train_dictionaries, wanted
from .tick import DETECT_CALLS, MIN_GAPS, TraceWire, trace_wire

log = logging.getLogger("rpcbench")


@dataclass(frozen=True)
class Plan:
    """Everything about a run settled before the size pass."""

    config: RunConfig  #: as given, plus the trained dictionaries and the inferred schema
    registry: Registry  #: the run's codecs, plugins and dictionaries (entered here, then only read)
    codecs: Tuple[Codec, ...]  #: the run's codecs, made once (skipped ones told as warnings)
    index: Tuple[TraceIndex, ...]  #: each trace and where it splits into tasks
    training: Optional[Training]  #: the dictionaries and schema, and the calls they held out
    sampling: SamplePlan  #: how the size pass samples, and each trace's held-out calls
    wire: Tuple[TraceWire, ...]  #: per trace, its --wire policies resolved by its tick
    timing: TimingPlan  #: the timing asked for (``--budget`` may shrink it after the size pass)
    started: float  #: ``time.perf_counter()`` when the run started

    @property
    def held(self) -> Tuple[int, ...]:
        """Per trace: its first calls, held out for training and never measured."""
        return self.sampling.held


def make_plan(config: RunConfig, registry: Registry, progress: Progress, meanwhile: Meanwhile = NOTHING
              ) -> Plan:
    """Index the traces, train the dictionaries and infer the schema, make the codecs: the run's :class:`Plan`
    (``meanwhile``: the caller's work, done while the schema inference reads, if it reads aside)."""
    started = time.perf_counter()
    progress("size pass", "indexing the traces")
    ids = config.codec_ids(registry)  # the codec list, expanded once
    index = index_traces(config, count=config.sample_calls is not None or bool(wanted(ids, registry)))
    training = train_dictionaries(config, registry, ids, index, progress, meanwhile)
    if training is not None:  # the config carries the dictionaries: every task builds the same codecs
        registry.dictionaries.update(training.dictionaries)
        config = dataclasses.replace(config, dictionaries=tuple(sorted(training.dictionaries.items())))
    if training is not None and training.schema is not None:  # ...and the inferred schema
        config = inference.use_schema(config, registry, training.schema)
    codecs, skipped = config.create_codecs(registry, ids)
    for line in skipped:
        log.warning("%s", line)
    use_registry(config, registry)  # the run's registry, settled: every task of this process and its forks uses it
    sampling = _sampling(config, index, training.held if training else ())
    if any(p.batched for p in config.wire) and sampling.size_fraction < 1:
        raise BenchError("--wire: batching by tick needs every call of a connection: not with --sample-calls")
    if config.link.loss and sampling.size_fraction < 1:
        raise BenchError("--loss: the lossy link replays every call of a connection: not with --sample-calls")
    timing = _timing_plan(config)
    wire = tuple(_trace_wire(config, t.path) for t in index)
    return Plan(config, registry, tuple(codecs), tuple(index), training, sampling, wire, timing, started)


def _timing_plan(config: RunConfig) -> TimingPlan:
    """The timing asked for, its lanes settled: ``--timing-lanes``, or 2 when the run may use 2 CPUs and ``--jobs``
    is 2 or more (else 1); one with ``--processes 0`` (every codec in this process, one at a time)."""
    processes = config.processes if worker.available() else 0
    lanes, cpus = config.timing_lanes, worker.usable_cpus()
    if lanes is None:
        lanes = 2 if processes and cpus >= 2 and config.jobs >= 2 else 1
    elif lanes > 1 and not processes:
        raise BenchError(f"--timing-lanes {lanes}: codecs timed in this process (--processes 0) take turns, one "
                         "at a time")
    elif lanes > cpus:
        raise BenchError(f"--timing-lanes {lanes}: this process may use {cpus} CPU{'s' * (cpus != 1)} "
                         "(one lane each)")
    return TimingPlan(config.sample, config.min_time, config.repeat, processes, config.warmup, lanes)


def _trace_wire(config: RunConfig, path: str) -> TraceWire:
    """A trace's --wire policies, resolved by the tick its first calls show (told when found, or why not)."""
    batched = any(p.batched for p in config.wire)
    head = itertools.islice(open_trace(path, config.salvage), DETECT_CALLS) if batched else iter(())
    wire = trace_wire(config.wire, head)
    tick, auto = wire.tick, any(p.auto for p in config.wire)
    if tick is None:
        return wire
    if tick.tick_ms is None and tick.gaps < MIN_GAPS:
        log.warning("%s: too few server-to-client calls with distinct timestamps to batch by tick: "
                    "per-call only", path)
    elif tick.tick_ms is None:
        if auto:
            log.warning("%s: no server tick in the gaps between %d server flushes: tick:auto left out",
                        path, tick.gaps)
    elif auto:
        log.info("%s: server tick %.2f ms (%.1f Hz), phase coherence %.3f over %d flushes", path,
                 tick.tick_ms, 1000 / tick.tick_ms, tick.confidence, tick.gaps)
    return wire


def _sampling(config: RunConfig, index: Sequence[TraceIndex], held: Tuple[int, ...]) -> SamplePlan:
    """How pieces sample, given the run's number of calls (counted when ``--sample-calls`` asks)."""
    total = sum(t.calls for t in index) - sum(held)
    size_fraction = 1.0
    if config.sample_calls is not None and total > 0:
        size_fraction = min(1.0, config.sample_calls / total)
    timing_calls = 0 if config.sizes_only else config.sample  # --sizes-only times nothing: no candidates to draw
    return SamplePlan(config.seed, timing_calls, size_fraction, held)
