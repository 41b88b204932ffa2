"""Dictionaries for ``trained`` compressors (``X+zstddict-N``), made before the size pass.

A dictionary is trained on calls the run never measures: the first ``--train-fraction``
of the trace (traces are in time order, as the recorder writes them), which the size
pass and the timing sample then skip for every codec alike, or all calls of a separate
``--train-trace``. One dictionary per inner codec (``json``, ``msgpack``...), trained on
that codec's bytes: it is what a server would build from its own traffic and ship once
to each client.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, Type

from rpc_capture import Call, open_trace

from .codec import Codec, Compressor, stream_key
from .config import RunConfig
from .errors import BenchError
from .registry import Registry
from .progress import Progress, quiet


@dataclass(frozen=True)
class Training:
    """The trained dictionaries of a run and where their calls came from."""

    held_out: int  #: calls at the start of the trace used for training and not measured
    source: str  #: what the dictionaries were trained on, in words
    calls: int  #: calls trained on
    dictionaries: Dict[str, bytes] = field(default_factory=dict)  #: inner codec id -> dictionary
    seconds: Dict[str, float] = field(default_factory=dict)  #: inner codec id -> training time
    compressors: Dict[str, Type[Compressor]] = field(default_factory=dict)  #: inner codec id -> who trained it

    def summary(self) -> Dict[str, Any]:
        """What results.json keeps under ``trace.training``."""
        return {"source": self.source, "calls": self.calls, "held_out_calls": self.held_out}

    def figures(self, inner: str, connections: int, calls: int) -> Dict[str, Any]:
        """A dictionary's size, training time and shipping cost (once per client, amortized over ``calls``)."""
        data = self.dictionaries[inner]
        ship = self.compressors[inner].ship_bytes(data)
        return {"bytes": len(data), "train_s": round(self.seconds[inner], 4), "train_calls": self.calls,
                "ship_bytes": ship, "ship_bytes_per_call": ship * connections / max(calls, 1)}


CallSource = Callable[[], Tuple[List[Call], int, str]]  #: -> calls to train on, calls held out, source in words


def train_dictionaries(config: RunConfig, registry: Registry, progress: Progress = quiet,
                       source: Optional[CallSource] = None) -> Optional[Training]:
    """Train one dictionary per inner codec the run's trained codecs need (None if none does), on the
    calls ``source`` gives (default: the trace's first ``train_fraction``, or ``--train-trace``)."""
    wanted: Dict[str, Type[Compressor]] = {}
    for codec_id in registry.expand(config.codecs):
        found = registry.trained_compressor(codec_id)
        if found and found[0].split("+")[0] in registry.codecs:
            wanted.setdefault(*found)
    if not wanted:
        return None
    progress("training", "reading the training calls")
    calls, held_out, where = (source or (lambda: _training_calls(config)))()
    training = Training(held_out, where, len(calls))
    for done, (inner_id, compressor) in enumerate(wanted.items()):
        progress("training", f"dictionary for {inner_id}", done, len(wanted))
        codec = registry.create(inner_id)
        inner = codec.name  # what the registry looks the dictionary up by
        samples = _encoded(codec, calls)
        started = time.perf_counter()
        try:
            training.dictionaries[inner] = compressor.train(samples, config.dict_size)
        except Exception as e:
            raise BenchError(f"cannot train a {compressor.name} dictionary of {config.dict_size} bytes on "
                             f"{len(samples)} {inner} messages ({where}): {e}") from None
        training.seconds[inner] = time.perf_counter() - started
        training.compressors[inner] = compressor
    return training


def _training_calls(config: RunConfig) -> Tuple[List[Call], int, str]:
    """The calls to train on, how many calls of the trace they hold out, and their source in words."""
    if config.train_trace:
        calls = list(open_trace(config.train_trace, config.salvage))
        if not calls:
            raise BenchError(f"{config.train_trace}: the training trace holds no calls")
        return calls, 0, f"all {len(calls):,} calls of {config.train_trace}"
    total = sum(1 for _ in open_trace(config.trace, config.salvage))
    count = int(total * config.train_fraction)
    if count < 1 or count >= total:
        raise BenchError(f"--train-fraction {config.train_fraction:g} of {total:,} calls leaves "
                         f"{'nothing to train on' if count < 1 else 'nothing to measure'}")
    calls = list(itertools.islice(open_trace(config.trace, config.salvage), count))
    return calls, count, f"the first {config.train_fraction:.0%} of the trace ({count:,} calls)"


def _encoded(codec: Codec, calls: Iterable[Call]) -> List[bytes]:
    """Each call as ``codec`` puts it on the wire (a stream per connection and direction); failures left out."""
    streams: Dict[Any, Codec] = {}
    out = []
    for call in calls:
        key = stream_key(call)
        session = streams.get(key) or streams.setdefault(key, codec.connection())
        try:
            out.append(session.encode(call))
        except Exception:
            continue  # the size pass reports what the codec cannot encode
    return out


class HeldOut:
    """A trace reader without its first ``skip`` calls (the ones dictionaries were trained on).

    Iterates like the reader, maps ``calls(wanted)`` positions past the skipped calls, and
    passes every other attribute (metadata, damage counters) through.
    """

    def __init__(self, reader: Any, skip: int) -> None:
        self._reader = reader
        self.skip = skip

    def __iter__(self) -> Iterator[Call]:
        return itertools.islice(iter(self._reader), self.skip, None)

    def calls(self, wanted: Iterable[int]) -> Iterator[Call]:
        """The calls at these positions of the measured part, in trace order."""
        shifted = {index + self.skip for index in wanted}
        return self._reader.calls(shifted)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)
