"""Dictionaries for ``trained`` compressors (``X+zstddict-N``) and an inferred schema for the typed
codecs (rpcbench/inference.py), made before the size pass.

A dictionary is trained on calls the run never measures: the first ``--train-fraction``
of each trace (traces are in time order, as the recorder writes them: the dictionary is
made from earlier traffic and measured on later traffic), lowered so that about
``TRAIN_CALLS`` calls at most are trained on, which the size pass and the timing sample
then skip for every codec alike; or all calls of a separate ``--train-trace``. One
dictionary per inner codec (``json``, ``msgpack``...), trained on that codec's bytes: it
is what a server would build from its own traffic and ship once to each client.

When the run infers the typed codecs' schema (rpcbench/inference.py) from every call of the
traces, watched processes of their own read them for it while this one trains (``--jobs`` 1 or
more): two, each through half the calls (cut at a batch record or between traces), when the run
may use 2 CPUs and ``--jobs`` is 2 or more; their shapes merge into exactly those of one read in
order (rpcbench/protobuf/shape.py; where they cannot tell, the calls are read again here, in
order). With ``--jobs 0`` the read that takes the held-out calls goes on to the end of each
trace and gives every call to the inference: one read, not two. Reads give the inference 4,096
calls at a time (``TraceShapes.add_all``: a key's values at a time).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Type, cast

from rpc_capture import Call, open_trace

from . import inference
from .codec import Codec, Compressor, Streams, encoded_or_none, stream_key
from .config import RunConfig
from .errors import BenchError
from .inference import Inference, InferredSchema, infer_from
from .meanwhile import NOTHING, Meanwhile
from .protobuf import TraceShapes
from .registry import Registry
from .trace_index import CallRange, TraceIndex, halves
from .watch import Watch, started
from .worker import usable_cpus
from .progress import Progress, quiet

log = logging.getLogger("rpcbench")


@dataclass(frozen=True)
class Training:
    """The trained dictionaries of a run and where their calls came from."""

    held: Tuple[int, ...]  #: per trace of the run: its first calls, used for training and not measured
    source: str  #: what the dictionaries were trained on, in words
    calls: int  #: calls trained on
    dictionaries: Dict[str, bytes] = field(default_factory=dict)  #: inner codec id -> dictionary
    seconds: Dict[str, float] = field(default_factory=dict)  #: inner codec id -> training time
    compressors: Dict[str, Type[Compressor]] = field(default_factory=dict)  #: inner codec id -> who trained it
    schema: Optional[InferredSchema] = None  #: the typed codecs' schema, inferred from the same calls

    @property
    def held_out(self) -> int:
        """Calls held out of the measured ones, over every trace."""
        return sum(self.held)

    def summary(self) -> Dict[str, Any]:
        """What results.json keeps under ``trace.training``."""
        out: Dict[str, Any] = {"source": self.source, "calls": self.calls, "held_out_calls": self.held_out}
        if self.schema is not None:
            out["schema"] = self.schema.summary()
        return out

    def figures(self, inner: str, connections: int, calls: int) -> Dict[str, Any]:
        """A dictionary's size, training time and shipping cost (once per client, amortized over ``calls``)."""
        data = self.dictionaries[inner]
        ship = self.compressors[inner].ship_bytes(data)
        return {"bytes": len(data), "train_s": round(self.seconds[inner], 4), "train_calls": self.calls,
                "ship_bytes": ship, "ship_bytes_per_call": ship * connections / max(calls, 1)}


TRAIN_CALLS = 20_000  #: about how many calls, at most, dictionaries are trained on


def wanted(ids: Sequence[str], registry: Registry) -> Dict[str, Type[Compressor]]:
    """The inner codecs the run's trained codecs (of ``ids``) need a dictionary for, and the compressor that
    trains each."""
    found: Dict[str, Type[Compressor]] = {}
    for codec_id in ids:
        trained = registry.trained_compressor(codec_id)
        if trained and trained[0].split("+")[0] in registry.codecs:
            found.setdefault(*trained)
    return found


def train_dictionaries(config: RunConfig, registry: Registry, ids: Sequence[str], index: Sequence[TraceIndex],
                       progress: Progress = quiet, meanwhile: Meanwhile = NOTHING) -> Optional[Training]:
    """Train one dictionary per inner codec the run's trained codecs (of ``ids``) need, on the first calls of
    each trace (``index``: the traces, their calls counted) or on ``--train-trace``, and infer a schema for the
    typed codecs from every call of the traces when the run has none for them (rpcbench/inference.py); None if
    neither is needed. With processes allowed (``--jobs``), the inference reads in watched processes of its own
    (two, each through half the calls, with ``--jobs`` 2 or more and 2 CPUs) while this one trains, then does
    ``meanwhile`` (the caller's work) until the reads are done: the plan takes the longer, not the sum."""
    needed = wanted(ids, registry)
    inferring = inference.Inference(config) if inference.wanted(config, ids) else None
    if not needed and inferring is None:
        return None
    progress("training", "reading the training calls" if inferring is None else
             "reading every call (schema inference) and the training calls")
    aside = config.jobs > 0 and hasattr(os, "fork")
    parts = _inference_reads(config, index) if aside and inferring is not None else []
    here = None if parts else inferring  #: the inference, when it reads here
    reads: List[Watch] = []
    try:
        reads += (started(functools.partial(_shapes_of, part, config.salvage)) for part in parts)
        if needed:
            training = _dictionaries(config, registry, needed, index, here, progress)
        else:
            if here is not None:
                _read(config, (), here)
            training = Training((), "nothing: no codec of the run trains a dictionary", 0)
        if reads:
            meanwhile.until(lambda: all(read.answered() for read in reads))
            _merge_reads(config, cast(Inference, inferring), [read.result() for read in reads])
        schema = inferring.schema() if inferring is not None else None
    finally:
        for read in reads:
            read.stop()
    if not needed and schema is None:  # the bundled schemas do
        return None
    return dataclasses.replace(training, schema=schema)


def _dictionaries(config: RunConfig, registry: Registry, needed: Dict[str, Type[Compressor]],
                  index: Sequence[TraceIndex], inferring: Optional[Inference], progress: Progress) -> Training:
    """The ``needed`` dictionaries trained on the held-out calls (every call also to ``inferring``, if given)."""
    calls, held, where = _training_calls(config, [t.calls for t in index], inferring)
    training = Training(held, where, len(calls))
    for done, (inner_id, compressor) in enumerate(needed.items()):
        progress("training", f"dictionary for {inner_id}", done, len(needed))
        _train(training, registry.create(inner_id), compressor, calls, config.dict_size)
    return training


def _train(training: Training, codec: Codec, compressor: Type[Compressor], calls: List[Call], size: int) -> None:
    """Train ``compressor``'s dictionary for ``codec`` (an inner codec) on its bytes of ``calls``, into ``training``."""
    inner = codec.name  # what the registry looks the dictionary up by
    samples = _encoded(codec, calls)
    started = time.perf_counter()
    try:
        training.dictionaries[inner] = compressor.train(samples, size)
    except Exception as e:
        raise BenchError(f"cannot train a {compressor.name} dictionary of {size} bytes on "
                         f"{len(samples)} {inner} messages ({training.source}): {e}") from None
    training.seconds[inner] = time.perf_counter() - started
    training.compressors[inner] = compressor


def _shapes_of(calls: Tuple[CallRange, ...], salvage: bool) -> TraceShapes:
    """The shapes of ``calls``, read in order: one of the inference's watched reads (:func:`rpcbench.watch.started`).
    Its shapes are MAX_DEPTH places deep at most (rpcbench/protobuf/shape.py): they pickle at the usual limit."""
    shapes = TraceShapes()
    for part in calls:
        reader, read = part.open(salvage)
        infer_from(read, shapes)
        reader.close()
    return shapes


def _inference_reads(config: RunConfig, index: Sequence[TraceIndex]) -> List[Tuple[CallRange, ...]]:
    """The calls of the inference's reads: two, each half the calls (:func:`rpcbench.trace_index.halves`), when the
    run may use 2 CPUs and ``--jobs`` is 2 or more and the traces can be cut; else one with every call."""
    split = halves(index) if config.jobs >= 2 and usable_cpus() >= 2 else None
    return [tuple(CallRange(t.path) for t in index)] if split is None else list(split)


def _merge_reads(config: RunConfig, inferring: Inference, shapes: List[TraceShapes]) -> None:
    """Give ``inferring`` the shapes of the inference's reads, in call order; in the few cases where they cannot
    tell what adding the calls in order gives (:meth:`rpcbench.protobuf.shape.Shape.merge`), it reads every call
    here in order instead (logged)."""
    if not inferring.merge(shapes):
        log.info("schema inference: the two halves' shapes cannot tell the order of some values; every call read "
                 "again, in order (same schema, slower)")
        _read(config, (), inferring)


def _training_calls(config: RunConfig, counts: Sequence[int], inferring: Optional[Inference]) -> Tuple[
        List[Call], Tuple[int, ...], str]:
    """The calls to train on, how many calls of each trace they hold out, and their source in words (every
    call of the traces also goes to ``inferring`` when the run infers a schema)."""
    if config.train_trace:
        calls = list(open_trace(config.train_trace, config.salvage))
        if not calls:
            raise BenchError(f"{config.train_trace}: the training trace holds no calls")
        if inferring is not None:  # the schema still comes from every call of the measured traces
            _read(config, (), inferring)
        return calls, (), f"all {len(calls):,} calls of {config.train_trace}"
    total = sum(counts)
    share = min(config.train_fraction, TRAIN_CALLS / total) if total > 0 else config.train_fraction
    held = tuple(int(n * share) for n in counts)
    count = sum(held)
    if count < 1 or count >= total:
        raise BenchError(f"--train-fraction {config.train_fraction:g} of {total:,} calls leaves "
                         f"{'nothing to train on' if count < 1 else 'nothing to measure'}")
    calls = _read(config, held, inferring)
    where = "the trace" if len(counts) == 1 else f"each of {len(counts)} traces"
    return calls, held, f"the first {share:.2%} of {where} ({count:,} calls)".replace(".00%", "%")


def _read(config: RunConfig, held: Sequence[int], inferring: Optional[Inference]) -> List[Call]:
    """The first ``held[i]`` calls of each trace ``i``, read once; with ``inferring``, the read goes on to the end
    of every trace and gives each call to it."""
    kept: List[Call] = []
    for number, path in enumerate(config.trace_files):
        n = held[number] if number < len(held) else 0
        calls = iter(open_trace(path, config.salvage))
        kept += itertools.islice(calls, n) if inferring is None else infer_from(calls, inferring.shapes, n)
    return kept


def _encoded(codec: Codec, calls: Iterable[Call]) -> List[bytes]:
    """Each call as ``codec`` puts it on the wire (a stream per connection and direction); failures left out."""
    streams = Streams(codec.connection)
    found = (encoded_or_none(streams[stream_key(call)].encode, call) for call in calls)
    return [data for data in found if data is not None]  # the size pass reports what the codec cannot encode
