"""The size pass's tasks: a run split into pieces (a trace's byte range through some codecs:
:func:`plan_pieces`), a piece's calls through its codecs (:func:`tally_piece`, in whatever process the
executor gives it, giving back a :class:`PieceSummary`), a trace's floor (:class:`FloorTask`) and its replay
over the lossy link (:class:`LinkTask`, giving back a :class:`rpcbench.link_replay.LinkReplays`)."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from rpc_capture import Call, open_trace
from rpc_capture.stats import TraceStats

from .batch import BATCH, CallBatch
from .codec import Codec
from .config import RunConfig
from .floor import Floor, FloorTotals
from .link_replay import LinkReplays, replay_trace
from .reader_info import ReaderInfo, reader_info
from .registry import Registry
from .sampling import SIZE_SALT, TIMING_SALT, Candidates, Drawn, SamplePlan, priorities
from .span import SPAN_CALLS, Span
from .tally import CodecTally, check_batch, check_call, send_rest, sum_span
from .trace_index import CallRange, TraceIndex
from .tick import TraceWire
from .wire import TRANSPORTS, Batcher, WirePolicy


@dataclass(frozen=True)
class Piece:
    """Calls of one trace (a byte range starting at a batch record, or the whole file) through some of
    the run's codecs."""

    trace: int  #: position of the trace in the run's list
    path: str
    codecs: Tuple[str, ...]
    start: Optional[int] = None  #: byte offset of the first batch record (None: the file's start)
    stop: Optional[int] = None  #: byte offset where the next piece starts (None: the file's end)
    first_call: int = 0  #: index of the piece's first call in its trace
    calls: int = 0  #: calls it reads (0: not counted), for the progress line
    count: bool = True  #: count trace statistics and sample candidates (one piece per call does)
    failed: Tuple[Tuple[str, str], ...] = ()  #: (codec, why) of codecs stopped by the watch: skipped
    wire: TraceWire = TraceWire(())  #: its trace's --wire policies, resolved

    @property
    def live(self) -> Tuple[str, ...]:
        """The codecs it still runs."""
        failed = dict(self.failed)
        return tuple(name for name in self.codecs if name not in failed)


def plan_pieces(traces: Sequence[TraceIndex], codecs: Sequence[Codec], slots: int,
                wire: Sequence[TraceWire] = ()) -> List[Piece]:
    """The tasks of a run: a trace split in chunks goes through its stateless codecs chunk by chunk and
    whole through its codecs with per-connection state (a chunk would cut their streams); a trace not
    split goes whole through all. With fewer such parts than ``slots``, the codecs are shared among
    tasks as well, so every slot has work. Whole traces first: they take longest.

    ``wire``: each trace's policies, resolved; a trace with a batched one goes whole through every codec (a
    connection's tick window may straddle any chunk boundary)."""
    wire = list(wire) or [TraceWire(())] * len(traces)
    traces = [dataclasses.replace(t, cuts=()) if any(p.batched for p in w.policies) else t
              for t, w in zip(traces, wire)]
    parts = sum(max(1, len(t.cuts)) for t in traces)
    groups = -(-slots // parts)
    pieces = [dataclasses.replace(p, wire=wire[number]) for number, t in enumerate(traces)
              for p in _trace_pieces(number, t, codecs, groups)]
    return sorted(pieces, key=lambda p: p.start is not None)


def _trace_pieces(number: int, trace: TraceIndex, codecs: Sequence[Codec], groups: int) -> List[Piece]:
    """One trace's pieces; in each chunk (or the whole trace) the first group of codecs counts the calls."""
    whole = max(trace.calls, 0)
    if len(trace.cuts) < 2:
        return [Piece(number, trace.path, _names(group), calls=whole, count=g == 0)
                for g, group in enumerate(split_codecs(codecs, groups))]
    cuts = list(trace.cuts)
    stateless = split_codecs([c for c in codecs if not c.per_connection], groups)
    pieces = [Piece(number, trace.path, _names(group), start, stop, before, max(after - before, 0), count=g == 0)
              for (start, before), (stop, after) in zip(cuts, [*cuts[1:], (None, whole)])
              for g, group in enumerate(stateless)]
    return pieces + [Piece(number, trace.path, _names(group), calls=whole, count=not pieces and g == 0)
                     for g, group in enumerate(split_codecs([c for c in codecs if c.per_connection], groups))]


def split_codecs(codecs: Sequence[Codec], parts: int) -> List[List[Codec]]:
    """Share codecs among ``parts`` tasks, lightest share first, keeping codecs on one inner codec together
    (they encode, decode and compare a call once between them).

    Weights: a family of codecs on one inner codec counts 2 plus one per codec; families go largest
    first to the least loaded share.
    """
    families: Dict[str, List[Codec]] = {}
    for codec in codecs:
        families.setdefault(codec.base.name, []).append(codec)
    groups: List[List[Codec]] = [[] for _ in range(max(1, parts))]
    loads = [0] * len(groups)
    for family in sorted(families.values(), key=len, reverse=True):
        i = loads.index(min(loads))
        groups[i].extend(family)
        loads[i] += 2 + len(family)
    order = sorted(range(len(groups)), key=loads.__getitem__)  # lightest first: it also counts the trace
    return [groups[i] for i in order if groups[i]]


def _names(codecs: Sequence[Codec]) -> Tuple[str, ...]:
    return tuple(c.name for c in codecs)


_REGISTRIES: Dict[RunConfig, Registry] = {}  #: this process's registry for the run it serves (one at a time)


def use_registry(config: RunConfig, registry: Registry) -> None:
    """Let this process's tasks of ``config`` use ``registry``, the run's own, already built (and forked
    processes inherit it) instead of building the same again: the registry is entered once per run."""
    _REGISTRIES.clear()
    _REGISTRIES[config] = registry


def _registry(config: RunConfig) -> Registry:
    """The run's registry in this process: the one :func:`use_registry` gave, else built once (a Dask worker,
    or a library caller that runs tasks alone: plugins loaded, schemas compiled)."""
    found = _REGISTRIES.get(config)
    if found is None:
        found = config.registry()
        use_registry(config, found)
    return found


@dataclass(frozen=True)
class PieceTask:
    """A piece as an executor's task (:class:`rpcbench.executors.Task`)."""

    config: RunConfig
    piece: Piece
    plan: SamplePlan

    @property
    def codecs(self) -> Tuple[str, ...]:
        return self.piece.live

    @property
    def span(self) -> Tuple[int, int]:
        return self.piece.first_call, self.piece.calls

    def prepare(self) -> None:
        _registry(self.config)

    def run(self, beat: Any) -> PieceSummary:
        return tally_piece(self.config, self.piece, self.plan, beat)

    def blame(self, position: int, reason: str) -> "PieceTask":
        failed = (*self.piece.failed, (self.piece.live[position], reason))
        return dataclasses.replace(self, piece=dataclasses.replace(self.piece, failed=failed))


@dataclass(frozen=True)
class PieceCount:
    """What the piece that counts its calls (:attr:`Piece.count`) gives beside the tallies."""

    stats: TraceStats  #: the statistics of its calls
    measured: int  #: its calls measured (all but those --size-fraction leaves out)
    drawn: Drawn  #: its timing-sample candidates, their calls and windows


@dataclass(frozen=True)
class PieceSummary:
    """What a piece's task gives back (:func:`tally_piece`), for the size pass to merge in call order."""

    piece: Piece
    tallies: Tuple[Dict[str, Any], ...]  #: per codec of the piece: its :meth:`CodecTally.export`, or ``{"error": why}``
    count: Optional[PieceCount]  #: None unless the piece counts its calls
    reader: Optional[ReaderInfo]  #: None unless the piece reads to the file's end


def tally_piece(config: RunConfig, piece: Piece, plan: SamplePlan, beat: Any = None) -> PieceSummary:
    """One piece's calls through its live codecs: a summary that :class:`SizePass` merges."""
    reader, calls = CallRange(piece.path, piece.start, piece.first_call, piece.stop).open(config.salvage)
    wire = piece.wire.policies
    registry = _registry(config)
    tallies = []
    for position, name in enumerate(piece.live):
        if beat is not None:
            beat[1] = position
        tallies.append(CodecTally(registry.create(name), wire))
    stats = TraceStats()
    drawing = piece.count and plan.timing_calls > 0  #: this piece draws the timing sample's candidates
    candidates = Candidates(plan.timing_calls, piece.wire.timed if drawing else None)
    batchers = {p.text: Batcher(p) for p in wire if p.batched}
    origins = [*batchers.values(), *([candidates.batcher] if candidates.batcher is not None else [])]
    followers = [tally for tally in tallies if tally.follows_skipped]

    def pass_over(indices: Sequence[int], chunk: Sequence[Call]) -> None:
        for tally in followers:
            for index, call in zip(indices, chunk):
                tally.pass_over(index, call)

    every = not batchers and plan.size_fraction >= 1  #: every call measured, none alone: the span counts the trace
    span_stats = stats if piece.count and every else None
    measured, span = 0, Span(times=span_stats is not None)
    for indices, chunk in _chunks(piece, plan, calls, origins, pass_over):
        if piece.count and not every:
            stats.add_all(chunk)
        if drawing:
            candidates.offer_all(chunk, priorities(plan.seed, piece.trace, np.array(indices, np.uint64), TIMING_SALT),
                                 indices)
        if every:
            check_batch(tallies, CallBatch(indices, chunk), span, beat)
            measured += len(chunk)
        else:
            measured += _measure_runs(tallies, plan, piece.trace, indices, chunk, batchers, pass_over,
                                      bool(followers), span, beat)
        if len(span) >= SPAN_CALLS:
            sum_span(tallies, span, span_stats)
    sum_span(tallies, span, span_stats)
    send_rest(tallies, batchers, beat)
    for position, tally in enumerate(tallies):
        if beat is not None:
            beat[1] = position
        if not tally.error:
            tally.measure_state()
    states = {t.codec.name: t.export() for t in tallies}
    failed = dict(piece.failed)
    return PieceSummary(piece, tuple(states.get(name) or {"error": failed[name]} for name in piece.codecs),
                        PieceCount(stats, measured, candidates.export()) if piece.count else None,
                        reader_info(reader) if piece.stop is None else None)


def _measure_runs(tallies: List[CodecTally], plan: SamplePlan, trace: int, indices: List[int], chunk: List[Call],
                  batchers: Dict[str, Batcher], pass_over: Callable[[Sequence[int], Sequence[Call]], None],
                  in_order: bool, span: Span, beat: Any) -> int:
    """A chunk's calls that ``--size-fraction`` keeps through the tallies (one at a time with a batched --wire
    policy: each call's messages join their batches), the others to ``pass_over`` (in the chunk's order when
    ``in_order``: a tally follows the calls it skips); the calls measured."""
    measured = 0
    for keep, run in _size_runs(plan, trace, indices, in_order):
        sub = [chunk[i] for i in run] if len(run) < len(chunk) else chunk
        ids = [indices[i] for i in run] if len(run) < len(chunk) else indices
        if not keep:
            pass_over(ids, sub)
            continue
        measured += len(sub)
        if batchers:  # a batched policy's rows: each call with every codec's message
            for index, call in zip(ids, sub):
                check_call(tallies, index, call, beat, batchers)
        elif sub:
            check_batch(tallies, CallBatch(ids, sub), span, beat)
    return measured


def _size_runs(plan: SamplePlan, trace: int, indices: List[int],
               in_order: bool) -> Iterator[Tuple[bool, List[int]]]:
    """A chunk's positions split by ``--size-fraction``: (measured or not, positions). Without ``in_order`` (no
    codec reads the skipped calls) the measured ones come as one run and the skipped ones not at all; with it,
    the chunk's order, run by run."""
    if plan.size_fraction >= 1:
        yield True, list(range(len(indices)))
        return
    kept = priorities(plan.seed, trace, np.array(indices, np.uint64), SIZE_SALT) < plan.size_fraction
    if not in_order:
        yield True, np.flatnonzero(kept).tolist()
        return
    for keep, run in itertools.groupby(range(len(indices)), key=lambda i: bool(kept[i])):
        yield keep, list(run)


def _chunks(piece: Piece, plan: SamplePlan, calls: Iterator[Call], origins: Sequence[Batcher],
            pass_over: Callable[[Sequence[int], Sequence[Call]], None]) -> Iterator[Tuple[List[int], List[Call]]]:
    """The piece's calls not held out, :data:`BATCH` at a time with their indices in the trace; the held-out
    ones go to ``pass_over`` (a stream replaying a recording reads them to stay in step); the windows of
    ``origins`` (the batched policies' batchers) start at the trace's first timestamp (held out or not)."""
    first = piece.first_call
    held = plan.held[piece.trace] if piece.trace < len(plan.held) else 0
    for chunk in iter(lambda: list(itertools.islice(calls, BATCH)), []):
        if first == 0:
            for batcher in origins:
                batcher.origin = chunk[0].t
        start, first = first, first + len(chunk)
        skip = min(max(held - start, 0), len(chunk))
        if skip:
            pass_over(list(range(start, start + skip)), chunk[:skip])
        if skip < len(chunk):
            yield list(range(start + skip, first)), chunk[skip:]


@dataclass(frozen=True)
class FloorTask:
    """One trace's floor (:mod:`rpcbench.floor`) as an executor's task: it reads the whole trace."""

    config: RunConfig
    trace: int
    path: str
    plan: SamplePlan
    codecs: Tuple[str, ...] = ()  #: none of the run's codecs: compact JSON and lzma only
    span: Tuple[int, int] = (0, 0)  #: its calls are not counted in the progress line

    def prepare(self) -> None:
        _registry(self.config)

    def run(self, beat: Any) -> Optional[FloorTotals]:
        floor = Floor(_registry(self.config).create("json"))
        for index, call in enumerate(open_trace(self.path, self.config.salvage)):
            if not self.plan.held_out(self.trace, index):
                floor.add(call)
        return floor.totals()

    def blame(self, position: int, reason: str) -> "FloorTask":
        return self


@dataclass(frozen=True)
class LinkTask:
    """One trace replayed over the lossy link (``--loss``, :mod:`rpcbench.link_replay`) as an executor's task:
    it reads the whole trace once, then replays it through every codec, --wire policy and loss rate."""

    config: RunConfig
    trace: int
    path: str
    plan: SamplePlan
    policies: Tuple[WirePolicy, ...]  #: the trace's --wire policies, resolved by its tick (the run's plan)
    codecs: Tuple[str, ...] = ()
    span: Tuple[int, int] = (0, 0)  #: its calls are not counted in the progress line
    failed: Tuple[Tuple[str, str], ...] = ()  #: (codec, why) of codecs stopped by the watch: skipped

    def prepare(self) -> None:
        _registry(self.config)

    def run(self, beat: Any) -> LinkReplays:
        every = list(open_trace(self.path, self.config.salvage))
        calls = [call for index, call in enumerate(every) if not self.plan.held_out(self.trace, index)]
        failed = dict(self.failed)
        live = [name for name in self.codecs if name not in failed]
        replays = replay_trace(_registry(self.config).create, live, calls, every[0].t if every else 0, self.policies,
                               self.config.link, TRANSPORTS[self.config.transport], self.config.packet_overhead,
                               beat)
        return dataclasses.replace(replays, errors={**replays.errors, **failed})

    def blame(self, position: int, reason: str) -> "LinkTask":
        live = [name for name in self.codecs if name not in dict(self.failed)]
        return dataclasses.replace(self, failed=(*self.failed, (live[position], reason)))

