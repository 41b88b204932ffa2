"""Dictionaries for ``trained`` compressors (``X+zstddict-N``) and an inferred schema for the typed
codecs (rpcbench/inference.py), made before the size pass.

A dictionary is trained on calls the run never measures: the first ``--train-fraction``
of each trace (traces are in time order, as the recorder writes them: the dictionary is
made from earlier traffic and measured on later traffic), lowered so that about
``TRAIN_CALLS`` calls at most are trained on, which the size pass and the timing sample
then skip for every codec alike; or all calls of a separate ``--train-trace``. One
dictionary per inner codec (``json``, ``msgpack``...), trained on that codec's bytes: it
is what a server would build from its own traffic and ship once to each client.

When the run infers the typed codecs' schema (rpcbench/inference.py), the same read goes on
to the end of each trace and gives every call to the inference: one read of the traces, not two.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Type, cast

from rpc_capture import Call, open_trace

from . import inference
from .codec import Codec, Compressor, Streams, encoded_or_none, stream_key
from .config import RunConfig
from .errors import BenchError
from .inference import Inference, InferredSchema
from .meanwhile import Meanwhile
from .registry import Registry
from .watch import started
from .progress import Progress, quiet


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


def train_dictionaries(config: RunConfig, registry: Registry, ids: Sequence[str], counts: Sequence[int],
                       progress: Progress = quiet, meanwhile: Optional[Meanwhile] = None) -> Optional[Training]:
    """Train one dictionary per inner codec the run's trained codecs (of ``ids``) need, on the first calls of
    each trace (``counts``: calls per trace) or on ``--train-trace``, and infer a schema for the typed codecs from
    every call of the traces when the run has none for them (rpcbench/inference.py); None if neither is
    needed. With both, and processes allowed (``--jobs``), the inference reads in a watched process of its own
    while this one trains, then does ``meanwhile`` (the caller's work) until the inference is done: the plan takes
    the longer, not the sum."""
    needed = wanted(ids, registry)
    inferring = inference.Inference(config) if inference.wanted(config, ids) else None
    if not needed and inferring is None:
        return None
    progress("training", "reading the training calls" if inferring is None else
             "reading every call (schema inference) and the training calls")
    if not needed:
        calls = _read(config, (), inferring)
        schema = cast(Inference, inferring).schema()
        where = "nothing: no codec of the run trains a dictionary"
        return None if schema is None else Training((), where, len(calls), schema=schema)  # None: bundled ones do
    aside = config.jobs > 0 and hasattr(os, "fork") and inferring is not None
    inferred = started(_InferenceTask(cast(Inference, inferring)), config.codec_timeout) if aside else None
    try:
        calls, held, where = _training_calls(config, counts, None if aside else inferring)
        training = Training(held, where, len(calls))
        for done, (inner_id, compressor) in enumerate(needed.items()):
            progress("training", f"dictionary for {inner_id}", done, len(needed))
            _train(training, registry.create(inner_id), compressor, calls, config.dict_size)
        if inferred is not None:
            if meanwhile is not None:
                meanwhile.until(inferred.answered)
            schema = inferred.result()
        else:
            schema = inferring.schema() if inferring is not None else None
    finally:
        if inferred is not None:
            inferred.stop()
    return dataclasses.replace(training, schema=schema)


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


@dataclass(frozen=True)
class _InferenceTask:
    """The schema inference over every call of the run's traces as a watched task (:func:`rpcbench.watch.started`):
    ``inferring`` was made here, so its bundled schemas loaded (or failed) before the read."""

    inferring: Inference
    codecs: Tuple[str, ...] = ()  #: no codec: nothing to blame for a stall
    span: Tuple[int, int] = (0, 0)

    def prepare(self) -> None:
        return None

    def run(self, beat: Any) -> Optional[InferredSchema]:
        _read(self.inferring.config, (), self.inferring)
        return self.inferring.schema()

    def blame(self, position: int, reason: str) -> "_InferenceTask":
        return self


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
        if inferring is None:
            kept += itertools.islice(open_trace(path, config.salvage), n)
            continue
        for index, call in enumerate(open_trace(path, config.salvage)):
            if index < n:
                kept.append(call)
            inferring.add(call)
    return kept


def _encoded(codec: Codec, calls: Iterable[Call]) -> List[bytes]:
    """Each call as ``codec`` puts it on the wire (a stream per connection and direction); failures left out."""
    streams = Streams(codec.connection)
    found = (encoded_or_none(streams[stream_key(call)].encode, call) for call in calls)
    return [data for data in found if data is not None]  # the size pass reports what the codec cannot encode
