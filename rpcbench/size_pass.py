"""The size and fidelity pass: every call of a run's traces (one or many) through every codec.

Each call goes through each codec: exact ``len()`` of the bytes, decode, compare with the
original (fidelity). A :class:`CodecTally` keeps one codec's figures; memory stays bounded
(sizes are a histogram, the timing sample a fixed number of candidate indices), so any
trace length works. :class:`SizePass` splits the run into tasks (a trace's byte range
through some codecs, and a floor task per trace), runs them on an executor
(:mod:`rpcbench.executors`: here, watched forked processes, or Dask workers) and merges
their summaries exactly. A single trace is a fleet of one: the same tasks, sampler,
hold-out and floor. Timing happens afterwards, on the sample (:mod:`rpcbench.timing`).
"""

from __future__ import annotations

import dataclasses
import glob
import heapq
import itertools
import logging
import math
import os
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple, TypeVar, cast

from rpc_capture import C2S, Call, TraceReader, damage_note, open_trace

from .codec import Codec, Compressed, Streams, received_call, stream_key
from .config import RunConfig
from .environment import file_sha256
from .errors import BenchError
from .executors import Executor, Task
from .fidelity import OTHER, Limit, compare, features_of
from .floor import Floor, floor_figures
from .histogram import nearest_rank
from .registry import Registry
from .results import CONFIDENCE, PER_CONNECTION_COLUMNS, CodecResult, Problem, Sizes
from .packet_timing import PacketPlan, tick_windows
from .wire import (DETECT_CALLS, TRANSPORTS, Batcher, Closed, TickGuess, WirePolicy, WireTally, detect_tick, resolve,
                   wire_figures)
from rpc_capture.stats import TraceStats

log = logging.getLogger("rpcbench")

Stratum = TypeVar("Stratum", str, Tuple[int, str])  #: a method, or (trace, method)
TRACE_SUFFIXES = (".rpct", ".rpct.gz", ".jsonl", ".jsonl.gz", ".gz")  #: files a folder's traces are told by
_TIMING_SALT, _SIZE_SALT = 1, 2  #: keep the samples (timing, size pass) independent
_MASK = (1 << 64) - 1


class Outcome(NamedTuple):
    """One call through one codec: wire bytes (None if encoding failed), the problem if any, and its cost."""

    data: Optional[bytes]
    problem: Optional[Tuple[str, str, bool, str, str]]  #: kind, feature, declared, path, detail
    ns: int  #: encode + decode time, for planning the timing phase


def round_trip(codec: Codec, call: Call, declared: frozenset) -> Outcome:
    """Encode, decode and compare one call, catching whatever the codec raises."""
    timer = time.perf_counter_ns
    t0 = timer()
    try:
        data = codec.encode(call)
        if type(data) is not bytes:
            raise TypeError(f"encode returned {type(data).__name__}, not bytes")
    except Exception as e:
        if isinstance(e, Limit):  # the codec named the limit it hit
            return Outcome(None, ("encode", e.feature, e.feature in declared, e.path, _error_text(e)), timer() - t0)
        found = sorted(features_of(call.args) & declared)
        return Outcome(None, ("encode", found[0] if found else OTHER, bool(found), "", _error_text(e)), timer() - t0)
    try:
        back = received_call(codec.decode(data))
    except Exception as e:
        return Outcome(data, ("decode", OTHER, False, "", _error_text(e)), timer() - t0)
    ns = timer() - t0
    try:
        diff = compare(call, back, declared)
    except Exception as e:  # a decoded value no comparison copes with (a plugin's odd type): the codec's failure
        return Outcome(data, ("mismatch", OTHER, False, "", f"cannot compare the decoded call: {_error_text(e)}"), ns)
    if diff:
        return Outcome(data, ("mismatch", diff.feature, diff.feature in declared, diff.path, diff.detail), ns)
    return Outcome(data, None, ns)


def _compressed(compressor: Any, base: Outcome) -> Outcome:
    """The outcome of ``inner+compressor`` from the inner codec's outcome: compress, decompress, same bytes?"""
    if base.data is None:
        return base
    timer = time.perf_counter_ns
    t0 = timer()
    try:
        packed = compressor.compress(base.data)
        if type(packed) is not bytes:
            raise TypeError(f"compress returned {type(packed).__name__}, not bytes")
    except Exception as e:
        return Outcome(None, ("encode", OTHER, False, "", _error_text(e)), base.ns + timer() - t0)
    try:
        same = compressor.decompress(packed) == base.data
    except Exception as e:
        return Outcome(packed, ("decode", OTHER, False, "", _error_text(e)), base.ns + timer() - t0)
    ns = base.ns + timer() - t0
    if not same:
        return Outcome(packed, ("decode", OTHER, False, "", "decompressed bytes differ from the compressed ones"), ns)
    return Outcome(packed, base.problem, ns)


class CodecTally:
    """Running size and fidelity figures of one codec over the full pass."""

    def __init__(self, codec: Codec, wire: Sequence[WirePolicy] = ()) -> None:
        self.codec = codec
        compressor = codec.compressor if isinstance(codec, Compressed) else None
        self.wire = {p.text: WireTally(p, compressor) for p in wire}  #: policy -> its packets (--wire)
        self._per_call = [w for w in self.wire.values() if not w.policy.batched]
        self._compresses = compressor is not None
        self.message: Optional[bytes] = None  #: what the last call puts in its batches (batched --wire)
        self.declared = frozenset(codec.changes)
        self.sizes: Counter = Counter()
        self.by_method: Dict[str, List[int]] = {}
        self.by_direction: Dict[str, List[int]] = {}  #: "c2s"/"s2c" -> [calls, bytes]
        self.by_connection: Dict[Any, List[int]] = {}  #: connection -> [c2s bytes, s2c bytes]
        self.failures = 0
        self.mismatches = 0
        self.problems: Dict[Tuple[str, str], list] = {}
        self.ns = 0  #: encode + decode time over the pass, for planning the timing phase
        self.error: Optional[str] = None  #: why this codec was stopped (it hung, died, exited); no figures then
        self.state_bytes = 0  #: memory per stream's state, mean over the trace's streams (per-connection codecs)
        self.shared_state_bytes = 0  #: memory kept once for all connections (a dictionary)
        self.streams = 0  #: connections and directions the state was measured over
        self._sessions = Streams(codec.connection)

    _STATE = ("sizes", "by_method", "by_direction", "by_connection", "failures", "mismatches", "problems", "ns",
              "error", "state_bytes", "shared_state_bytes", "streams")

    def measure_state(self) -> None:
        """Take the memory the codec's state keeps, after the trace went through it: per stream
        (mean over the trace's connections and directions) and shared."""
        streams = list(self._sessions.values())
        self.streams = len(streams)
        self.state_bytes = round(sum(s.state_bytes() for s in streams) / len(streams)) if streams else 0
        self.shared_state_bytes = self.codec.shared_state_bytes()

    def fail(self, reason: str) -> None:
        """Stop this codec: its figures so far are dropped (they would cover part of the trace only)."""
        self.sizes, self.by_method, self.by_direction, self.by_connection, self.problems = Counter(), {}, {}, {}, {}
        self.failures = self.mismatches = 0
        self.wire, self._per_call, self.message = {}, [], None
        self.error = reason

    def export(self) -> Dict[str, Any]:
        """The figures (no codec objects), to send from a forked process."""
        return {**{name: getattr(self, name) for name in self._STATE},
                "wire": {text: (w.policy, w.export()) for text, w in self.wire.items()}}

    def merge_wire(self, states: Dict[str, Tuple[WirePolicy, Dict[str, Any]]]) -> None:
        """Add the packets of another share of the calls, policy by policy (a policy new here is added)."""
        for text, (policy, state) in states.items():
            if text not in self.wire:
                self.wire[text] = WireTally(policy)
            self.wire[text].merge(state)

    def merge(self, state: Dict[str, Any]) -> List[Tuple[str, str]]:
        """Add the figures of another share of the calls (:meth:`export` of a tally of the same codec over
        calls that come after these); returns the problem groups new to this tally.

        Exact: the size histogram and counts add up, each problem group keeps its earliest example,
        and the state per stream is the mean over both shares' streams.
        """
        if state["error"] or self.error:
            self.fail(self.error or state["error"])
            return []
        self.sizes.update(state["sizes"])
        for mine, theirs in ((self.by_method, state["by_method"]), (self.by_direction, state["by_direction"]),
                             (self.by_connection, state["by_connection"])):
            for key, pair in theirs.items():
                into = mine.setdefault(key, [0, 0])
                into[0] += pair[0]
                into[1] += pair[1]
        self.failures += state["failures"]
        self.mismatches += state["mismatches"]
        self.ns += state["ns"]
        streams = self.streams + state["streams"]
        if streams:
            self.state_bytes = round((self.state_bytes * self.streams + state["state_bytes"] * state["streams"])
                                     / streams)
        self.streams = streams
        self.shared_state_bytes = max(self.shared_state_bytes, state["shared_state_bytes"])
        self.merge_wire(state.get("wire", {}))
        new = [key for key in state["problems"] if key not in self.problems]
        for key, group in state["problems"].items():
            if key in self.problems:
                self.problems[key][0] += group[0]
            else:
                self.problems[key] = list(group)
        return new

    def check(self, index: int, call: Call, shared: Optional[Dict[str, "Outcome"]] = None) -> None:
        """Encode, measure, decode and compare one call.

        ``shared`` (one dict per call, passed to every tally) lets codecs built on the same
        stateless inner codec (json, json+zlib-1, json+zstd-3...) encode, decode and compare
        the call once; each compressor then only has to give the inner bytes back exactly.
        """
        codec = self._sessions[stream_key(call)] if self.codec.per_connection else self.codec
        stateful_inner = codec.inner.per_connection if isinstance(codec, Compressed) else codec.per_connection
        inner = codec.inner if isinstance(codec, Compressed) else codec
        if shared is None or stateful_inner:  # state of its own: the shared outcome is another tally's stream
            base = round_trip(inner, call, self.declared)
        else:
            base = shared.get(inner.name) or shared.setdefault(inner.name, round_trip(inner, call, self.declared))
        outcome = _compressed(codec.compressor, base) if isinstance(codec, Compressed) else base
        self.ns += outcome.ns
        if outcome.problem:
            kind, feature, declared, path, detail = outcome.problem
            if kind == "encode":
                self.failures += 1
            else:
                self.mismatches += 1
            self._problem(kind, feature, declared, index, call, path, detail)
        if outcome.data is not None:
            n = len(outcome.data)
            self.sizes[n] += 1
            tally = self.by_method.get(call.method)
            if tally is None:
                tally = self.by_method[call.method] = [0, 0]
            tally[0] += 1
            tally[1] += n
            self._count_traffic(call, n)
        if self.wire:
            self._wire(call, outcome.data, base.data)

    def _wire(self, call: Call, data: Optional[bytes], inner: Optional[bytes]) -> None:
        """The call into each --wire policy's packets: alone under per-call; under a batched policy, its
        :attr:`message` waits in its batch (:func:`check_call`): the inner codec's bytes when the codec
        compresses (a packet is compressed whole), None when it failed to encode."""
        self.message = data if data is None or not self._compresses else inner
        if data is not None:
            for wire in self._per_call:
                wire.add(call, data)

    def _count_traffic(self, call: Call, n: int) -> None:
        """Add ``n`` wire bytes of ``call`` to its direction's and its connection's sums (the capacity planner's)."""
        direction = self.by_direction.get(call.dir)
        if direction is None:
            direction = self.by_direction[call.dir] = [0, 0]
        direction[0] += 1
        direction[1] += n
        conn = self.by_connection.get(call.conn)
        if conn is None:
            conn = self.by_connection[call.conn] = [0, 0]
        conn[0 if call.dir == C2S else 1] += n

    def _problem(self, kind: str, feature: str, declared: bool, index: int, call: Call, path: str, detail: str) -> None:
        group = self.problems.get((kind, feature))
        if group is None:
            self.problems[(kind, feature)] = [1, declared, index, call.method, path, detail]
        else:
            group[0] += 1

    def size_stats(self) -> Optional[Sizes]:
        """Exact mean and percentiles from the histogram (None if nothing encoded)."""
        count = sum(self.sizes.values())
        if not count:
            return None
        total = sum(n * k for n, k in self.sizes.items())
        return Sizes(total, total / count, int(nearest_rank(self.sizes, 50)), int(nearest_rank(self.sizes, 99)),
                     min(self.sizes), max(self.sizes))

    def problem_list(self) -> Tuple[Problem, ...]:
        """Problem groups, undeclared first, then by count."""
        groups = [Problem(kind, feature, g[1], g[0], g[2], g[3], g[4], g[5])
                  for (kind, feature), g in self.problems.items()]
        return tuple(sorted(groups, key=lambda p: (p.declared, -p.count)))


def _error_text(e: BaseException, limit: int = 160) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_call(tallies: List[CodecTally], index: int, call: Call, beat: Any = None,
               batchers: Optional[Dict[str, Batcher]] = None) -> None:
    """One call through every live tally; ``beat`` (a shared array) shows a watcher who is at work;
    ``batchers``: the tick windows of the batched --wire policies, shared by the tallies.

    ``sys.exit`` in a codec stops that codec only.
    """
    if beat is not None:
        beat[0] = index
    shared: Dict[str, Outcome] = {}
    for position, tally in enumerate(tallies):
        if tally.error:
            continue
        if beat is not None:
            beat[1] = position
        try:
            tally.check(index, call, shared)
        except (Exception, SystemExit) as e:
            tally.fail(f"size pass stopped at call {index}: {_error_text(e)}")
    if batchers:  # the call's messages (one per codec) join its batches; a batch it closes is sent
        row = [tally.message for tally in tallies]
        for text, batcher in batchers.items():
            closed = batcher.step(call, row)
            if closed is not None:
                _send(tallies, text, closed, beat, f"at call {index}")


def _send(tallies: List[CodecTally], text: str, batch: Closed, beat: Any, where: str) -> None:
    """A closed batch to each live tally's policy ``text``, each tally taking its own messages from the batch's
    rows; a codec that raises is stopped (``where``: the call the pass is at)."""
    key = batch[0]
    for position, (tally, column) in enumerate(zip(tallies, zip(*batch[3]))):  # column: the codec's messages
        wire = tally.wire.get(text)  # none once the codec failed
        if wire is None:
            continue
        if beat is not None:
            beat[1] = position
        try:
            wire.send(key, [m for m in column if m is not None] if None in column else
                      cast(Tuple[bytes, ...], column))
        except (Exception, SystemExit) as e:
            tally.fail(f"size pass stopped {where}: {_error_text(e)}")


def send_rest(tallies: List[CodecTally], batchers: Dict[str, Batcher], beat: Any = None) -> None:
    """At the end of the calls: send every batch still open and the batches held, and give each tally its
    policy's added latency."""
    for text, batcher in batchers.items():
        for batch in batcher.rest():
            _send(tallies, text, batch, beat, "at the end of the calls")
        for position, tally in enumerate(tallies):
            wire = tally.wire.get(text)
            if wire is None:
                continue
            if beat is not None:
                beat[1] = position
            try:
                wire.flush()
            except (Exception, SystemExit) as e:
                tally.fail(f"size pass stopped at the end of the calls: {_error_text(e)}")
                continue
            wire.latency = Counter(batcher.latency)


def proportional_quotas(counts: Dict[Stratum, int], size: int) -> Dict[Stratum, int]:
    """Split ``size`` among methods in proportion to ``counts`` (largest remainder, >= 1 each if room)."""
    total = sum(counts.values())
    if total <= size:
        return dict(counts)
    floor = 1 if len(counts) <= size else 0
    exact = {m: max(floor, size * c / total) for m, c in counts.items()}
    quotas = {m: min(counts[m], int(q)) for m, q in exact.items()}
    left = size - sum(quotas.values())
    for m in sorted(exact, key=lambda m: (int(exact[m]) - exact[m], m)):
        if left <= 0:
            break
        if quotas[m] < counts[m]:
            quotas[m] += 1
            left -= 1
    return {m: q for m, q in quotas.items() if q}


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


def priority(seed: int, trace: int, index: int, salt: int) -> float:
    """A seeded pseudo-random number in [0, 1) for one call (splitmix64): the same for a call
    whichever task, chunk or worker sees it, so samples drawn by it merge exactly."""
    z = (seed * 0x9E3779B97F4A7C15 + trace * 0xD1B54A32D192ED03 + index * 0xBF58476D1CE4E5B9 + salt) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return (z ^ (z >> 31)) / 2.0 ** 64


@dataclass(frozen=True)
class TraceIndex:
    """Where a trace can be split: ``(byte offset, calls before)`` of a batch record every ``chunk_calls``
    calls (empty when it cannot be split: gzip, JSON Lines, ``--salvage``), and its number of calls
    (-1 when not counted)."""

    path: str
    cuts: Tuple[Tuple[int, int], ...]
    calls: int


def index_trace(path: str, salvage: bool, chunk_calls: int, count: bool) -> TraceIndex:
    """The :class:`TraceIndex` of one trace: record headers and checksums only, no call decoded (a trace
    that cannot be split is read whole to count its calls, and only if ``count``)."""
    reader = open_trace(path, salvage)
    if not isinstance(reader, TraceReader) or salvage or not reader.seekable:
        counted = (sum(1 for _ in reader) if not isinstance(reader, TraceReader) else reader.count_calls()) \
            if count else -1
        reader.close()
        return TraceIndex(path, (), counted)
    cuts: List[Tuple[int, int]] = []
    for offset, before in reader.batch_starts():
        if not cuts or before - cuts[-1][1] >= chunk_calls:
            cuts.append((offset, before))
    return TraceIndex(path, tuple(cuts), reader.calls_read)


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
    count: bool = True  #: count trace statistics and sample candidates (one piece per call does)
    failed: Tuple[Tuple[str, str], ...] = ()  #: (codec, why) of codecs stopped by the watch: skipped
    wire: Tuple[WirePolicy, ...] = ()  #: the run's --wire policies (resolved by the piece for its trace)

    @property
    def live(self) -> Tuple[str, ...]:
        """The codecs it still runs."""
        failed = dict(self.failed)
        return tuple(name for name in self.codecs if name not in failed)


def plan_pieces(traces: Sequence[TraceIndex], codecs: Sequence[Codec], slots: int,
                wire: Tuple[WirePolicy, ...] = ()) -> List[Piece]:
    """The tasks of a run: a trace split in chunks goes through its stateless codecs chunk by chunk and
    whole through its codecs with per-connection state (a chunk would cut their streams); a trace not
    split goes whole through all. With fewer such parts than ``slots``, the codecs are shared among
    tasks as well, so every slot has work. Whole traces first: they take longest.

    ``wire``: the run's policies; with a batched one, every trace goes whole through every codec (a
    connection's tick window may straddle any chunk boundary)."""
    if any(p.batched for p in wire):
        traces = [dataclasses.replace(t, cuts=()) for t in traces]
    parts = sum(max(1, len(t.cuts)) for t in traces)
    groups = -(-slots // parts)
    pieces = [dataclasses.replace(p, wire=wire) for number, t in enumerate(traces)
              for p in _trace_pieces(number, t, codecs, groups)]
    return sorted(pieces, key=lambda p: p.start is not None)


def _trace_pieces(number: int, trace: TraceIndex, codecs: Sequence[Codec], groups: int) -> List[Piece]:
    """One trace's pieces; in each chunk (or the whole trace) the first group of codecs counts the calls."""
    if len(trace.cuts) < 2:
        return [Piece(number, trace.path, _names(group), count=g == 0)
                for g, group in enumerate(split_codecs(codecs, groups))]
    cuts = list(trace.cuts)
    stateless = split_codecs([c for c in codecs if not c.per_connection], groups)
    pieces = [Piece(number, trace.path, _names(group), start, stop, before, count=g == 0)
              for (start, before), (stop, _) in zip(cuts, [*cuts[1:], (None, 0)])
              for g, group in enumerate(stateless)]
    return pieces + [Piece(number, trace.path, _names(group), count=not pieces and g == 0)
                     for g, group in enumerate(split_codecs([c for c in codecs if c.per_connection], groups))]


def _names(codecs: Sequence[Codec]) -> Tuple[str, ...]:
    return tuple(c.name for c in codecs)


@dataclass(frozen=True)
class SamplePlan:
    """How a piece samples: the timing sample's candidates kept per method, the share of calls the size
    pass measures (1.0: every call), and the calls held out at the start of each trace (trained on)."""

    seed: int
    timing_calls: int
    size_fraction: float = 1.0
    held: Tuple[int, ...] = ()  #: per trace: its first calls, which trained the dictionaries (never measured)

    def held_out(self, trace: int, index: int) -> bool:
        """Is this call one the dictionaries are trained on (so no codec is measured on it)?"""
        return trace < len(self.held) and index < self.held[trace]


@lru_cache(maxsize=4)
def _registry(config: RunConfig) -> Registry:
    """The run's registry, built once per process that forks tasks (plugins loaded, schemas compiled)."""
    return config.registry()


class _Candidates:
    """The ``keep`` calls with the smallest priority per method: a bottom-k sample, mergeable exactly."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.heaps: Dict[str, List[Tuple[float, int]]] = {}  #: method -> (-priority, index) max-heap

    def offer(self, method: str, rank: float, index: int) -> None:
        heap = self.heaps.setdefault(method, [])
        if len(heap) < self.keep:
            heapq.heappush(heap, (-rank, index))
        elif rank < -heap[0][0]:
            heapq.heapreplace(heap, (-rank, index))

    def export(self) -> Dict[str, List[Tuple[float, int]]]:
        return {m: sorted((-r, i) for r, i in heap) for m, heap in self.heaps.items()}


@dataclass(frozen=True)
class PieceTask:
    """A piece as an executor's task (:class:`rpcbench.executors.Task`)."""

    config: RunConfig
    piece: Piece
    plan: SamplePlan

    @property
    def codecs(self) -> Tuple[str, ...]:
        return self.piece.live

    def prepare(self) -> None:
        _registry(self.config)

    def run(self, beat: Any) -> Dict[str, Any]:
        return tally_piece(self.config, self.piece, self.plan, beat)

    def blame(self, position: int, reason: str) -> "PieceTask":
        failed = (*self.piece.failed, (self.piece.live[position], reason))
        return dataclasses.replace(self, piece=dataclasses.replace(self.piece, failed=failed))


def tally_piece(config: RunConfig, piece: Piece, plan: SamplePlan, beat: Any = None) -> Dict[str, Any]:
    """One piece's calls through its live codecs: a summary that :class:`SizePass` merges."""
    reader = open_trace(piece.path, config.salvage)
    if piece.start is not None and isinstance(reader, TraceReader):
        reader.seek(piece.start, piece.first_call)
    calls: Iterator[Call] = reader.calls(stop=piece.stop) if isinstance(reader, TraceReader) else iter(reader)
    wire, tick, calls = _wire_of(piece, calls)
    registry = _registry(config)
    tallies = []
    for position, name in enumerate(piece.live):
        if beat is not None:
            beat[1] = position
        tallies.append(CodecTally(registry.create(name), wire))
    stats, candidates, measured = TraceStats(), _Candidates(plan.timing_calls), 0
    batchers = {p.text: Batcher(p) for p in wire if p.batched}
    for index, call in enumerate(calls, piece.first_call):
        if index == 0:  # windows start at the trace's first timestamp, held out or not
            for batcher in batchers.values():
                batcher.origin = call.t
        if plan.held_out(piece.trace, index):
            continue
        if piece.count:
            stats.add(call)
            candidates.offer(call.method, priority(plan.seed, piece.trace, index, _TIMING_SALT), index)
        if plan.size_fraction < 1 and priority(plan.seed, piece.trace, index, _SIZE_SALT) >= plan.size_fraction:
            continue
        measured += 1
        check_call(tallies, index, call, beat, batchers)
    send_rest(tallies, batchers, beat)
    for position, tally in enumerate(tallies):
        if beat is not None:
            beat[1] = position
        if not tally.error:
            tally.measure_state()
    states = {t.codec.name: t.export() for t in tallies}
    failed = dict(piece.failed)
    return {"piece": piece, "tallies": [states.get(name) or {"error": failed[name]} for name in piece.codecs],
            "measured": measured, "stats": stats if piece.count else None, "tick": tick,
            "candidates": candidates.export() if piece.count else None,
            "reader": _reader_info(reader) if piece.stop is None else None}


def _wire_of(piece: Piece, calls: Iterator[Call]) -> Tuple[Tuple[WirePolicy, ...], Optional[TickGuess],
                                                          Iterator[Call]]:
    """The piece's --wire policies for its trace, the tick read from the trace (None without a batched policy)
    and its calls: a batched policy's piece holds a whole trace, whose first calls show its tick
    (:func:`rpcbench.wire.detect_tick`); they are read once, kept, and measured like the rest."""
    if not any(p.batched for p in piece.wire):
        return piece.wire, None, calls
    head = list(itertools.islice(calls, DETECT_CALLS))
    guess = detect_tick(head)
    return resolve(piece.wire, guess), guess, itertools.chain(head, calls)


@dataclass(frozen=True)
class FloorTask:
    """One trace's floor (:mod:`rpcbench.floor`) as an executor's task: it reads the whole trace."""

    config: RunConfig
    trace: int
    path: str
    plan: SamplePlan
    codecs: Tuple[str, ...] = ()  #: none of the run's codecs: compact JSON and zstd / xz only

    def prepare(self) -> None:
        _registry(self.config)

    def run(self, beat: Any) -> Optional[Dict[str, Any]]:
        floor = Floor(_registry(self.config).create("json"))
        for index, call in enumerate(open_trace(self.path, self.config.salvage)):
            if not self.plan.held_out(self.trace, index):
                floor.add(call)
        return floor.totals()

    def blame(self, position: int, reason: str) -> "FloorTask":
        return self


def _reader_info(reader: Any) -> Dict[str, Any]:
    """What results.json records of a trace file that only the reader of its end knows."""
    return {"format": "jsonl" if reader.version is None else f"rpctrace v{reader.version}",
            "metadata": reader.metadata, "truncated_bytes": reader.truncated_bytes,
            "salvaged": damage_note(reader), "recorder": reader.end or reader.stats}


@dataclass
class TracePass:
    """One trace's merged figures."""

    path: str
    tallies: List[CodecTally]
    keep: int  #: sample candidates kept per method
    stats: TraceStats = field(default_factory=TraceStats)
    measured: int = 0  #: calls the size pass measured (all, unless --sample-calls)
    candidates: Dict[str, List[Tuple[float, int]]] = field(default_factory=dict)
    reader: Dict[str, Any] = field(default_factory=dict)
    floor: Optional[Dict[str, Any]] = None  #: the floor's totals (see :func:`rpcbench.floor.floor_figures`)
    tick: Optional[TickGuess] = None  #: the tick its timestamps show (batched --wire only)

    def absorb(self, summary: Dict[str, Any]) -> None:
        """Add one piece's summary (pieces of a trace arrive here in call order)."""
        piece: Piece = summary["piece"]
        by_name = {t.codec.name: t for t in self.tallies}
        for name, state in zip(piece.codecs, summary["tallies"]):
            by_name[name].merge(state)
        if summary["stats"] is not None:
            self.stats.merge(summary["stats"])
            self.measured += summary["measured"]
            for method, ranked in summary["candidates"].items():
                self.candidates[method] = heapq.nsmallest(self.keep, [*self.candidates.get(method, []), *ranked])
        self.reader.update(summary["reader"] or {})
        self.tick = self.tick or summary["tick"]

    def entry(self) -> Dict[str, Any]:
        """What results.json records of this trace."""
        return {"path": self.path, "format": self.reader.get("format"), "sha256": file_sha256(self.path),
                "file_bytes": _file_bytes(self.path), "metadata": self.reader.get("metadata"),
                **self.stats.summary(), "truncated_bytes": self.reader.get("truncated_bytes"),
                "salvaged": self.reader.get("salvaged"), "recorder": self.reader.get("recorder"),
                "measured_calls": self.measured, "floor": floor_figures([self.floor])}


class SizePass:
    """The size and fidelity pass over a run's traces (one or many): per trace and merged, with the
    trace record, the floor and the timing sample.

    The pass is split into tasks (:func:`plan_pieces`; one floor task per trace) that run on an
    executor (:mod:`rpcbench.executors`: here, watched forks or Dask); each returns a summary that
    adds up exactly (size histogram, counts, problem groups with their earliest example, trace
    statistics, bottom-k sample candidates), merged in trace and call order: the figures are those
    of one process reading every trace in turn, whatever the executor, chunks or workers.
    """

    def __init__(self, config: RunConfig, codecs: List[Codec], index: Sequence[TraceIndex],
                 held: Tuple[int, ...] = ()) -> None:
        self.config, self.codecs, self.index = config, codecs, list(index)
        self.sample_size = config.sample
        self.traces = [TracePass(t.path, [CodecTally(c) for c in codecs], config.sample) for t in self.index]
        self.tallies = [CodecTally(c) for c in codecs]
        self.stats = TraceStats()
        self.example_trace: Dict[Tuple[str, Tuple[str, str]], str] = {}  #: (codec, problem) -> trace of its example
        self.plan = _plan(config, self.index, held)
        self.floor: Optional[Dict[str, Any]] = None  #: the floor of every trace together (None: --no-floor)
        self.dask: Optional[Dict[str, Any]] = None  #: the cluster the pass ran on
        self.ticks: List[Dict[str, Any]] = []  #: per trace, the tick its timestamps show (batched --wire only)
        self.policies: List[Tuple[WirePolicy, ...]] = []  #: per trace, its --wire policies resolved (tick:auto)

    def run(self, executor: Executor) -> None:
        """Run every task on ``executor`` and merge the summaries."""
        pieces = plan_pieces(self.index, self.codecs, executor.slots, self._wire())
        floors: List[Task] = [FloorTask(self.config, i, t.path, self.plan)
                              for i, t in enumerate(self.index)] if self.config.floor else []
        answers = executor.run_all([*floors, *(PieceTask(self.config, p, self.plan) for p in pieces)],
                                   "size pass: reading")
        self.dask = executor.info
        for trace, totals in zip(self.traces, answers[:len(floors)]):
            trace.floor = totals
        for summary in sorted(answers[len(floors):], key=lambda s: (s["piece"].trace, s["piece"].first_call)):
            self.traces[summary["piece"].trace].absorb(summary)
        self._note_ticks()
        self._merge_traces()
        self.floor = floor_figures([t.floor for t in self.traces])

    def _wire(self) -> Tuple[WirePolicy, ...]:
        """The run's --wire policies (each piece reads its trace's tick itself: :func:`_wire_of`)."""
        policies = self.config.wire
        if any(p.batched for p in policies) and self.sampled:
            raise BenchError("--wire: batching by tick needs every call of a connection: not with --sample-calls")
        return policies

    def _note_ticks(self) -> None:
        """Record and tell the tick each trace's timestamps showed (batched --wire only), and each trace's
        policies resolved by it, as its pieces resolved them."""
        self.policies = [self.config.wire if t.tick is None else resolve(self.config.wire, t.tick)
                         for t in self.traces]
        for trace in self.traces:
            if trace.tick is None:
                continue
            self.ticks.append({"path": trace.path, **dataclasses.asdict(trace.tick)})
            if trace.tick.tick_ms is None:
                log.warning("%s: too few server-to-client calls with distinct timestamps to batch by tick: "
                            "per-call only", trace.path)
            elif any(p.auto for p in self.config.wire):
                log.info("%s: server tick %.2f ms (%.1f Hz), phase coherence %.3f over %d flushes", trace.path,
                         trace.tick.tick_ms, 1000 / trace.tick.tick_ms, trace.tick.confidence, trace.tick.gaps)

    def _merge_traces(self) -> None:
        for number, trace in enumerate(self.traces):
            if trace.reader.get("salvaged"):
                log.warning("%s", trace.reader["salvaged"])
            if trace.reader.get("truncated_bytes"):
                log.warning("%s: file ends inside a record: dropped %d bytes of an incomplete final record; "
                            "all complete calls were read", trace.path, trace.reader["truncated_bytes"])
            self.stats.merge(dataclasses.replace(  # connection 7 of two servers is two connections
                trace.stats, connections=Counter(_by_trace(number, trace.stats.connections)),
                spans=_by_trace(number, trace.stats.spans)))
            for into, tally in zip(self.tallies, trace.tallies):
                state = tally.export()
                for key in into.merge({**state, "by_connection": _by_trace(number, state["by_connection"])}):
                    self.example_trace[(into.codec.name, key)] = trace.path
        if not self.stats.calls:
            raise BenchError(f"{self.traces[0].path}: the trace holds no calls" if len(self.traces) == 1
                             else "the traces hold no calls")

    @property
    def measured(self) -> int:
        """Calls the size pass measured, over all traces."""
        return sum(t.measured for t in self.traces)

    @property
    def sampled(self) -> bool:
        """Did the size pass measure a sample of the calls (``--sample-calls``) rather than all?"""
        return self.plan.size_fraction < 1

    def sample(self) -> List[Call]:
        """The timing sample: ``sample_size`` calls stratified by trace and method (each stratum its
        share, the calls of smallest seeded priority), fetched from the traces, in trace order."""
        calls: List[Call] = []
        for i, indices in sorted(self._sample_indices().items()):
            calls.extend(open_trace(self.traces[i].path, self.config.salvage).calls(indices))
        return calls

    def _sample_indices(self) -> Dict[int, Set[int]]:
        """Per trace, the indices of its calls in the timing sample."""
        counts = {(i, m): n for i, t in enumerate(self.traces) for m, n in t.stats.methods.items()}
        wanted: Dict[int, Set[int]] = {}
        for (i, method), quota in proportional_quotas(counts, self.sample_size).items():
            wanted.setdefault(i, set()).update(index for _, index in self.traces[i].candidates[method][:quota])
        return wanted

    def packet_plan(self) -> Optional[PacketPlan]:
        """What the timing of packets replays: under the run's first batched --wire policy (each trace's own
        tick for tick:auto), the tick windows whose first call is in the timing sample, every measured call
        of them, packed later per codec as the size pass packs them. Choosing windows by their first call
        times each window as likely whatever its size (windows holding any sampled call would favour big
        ones, cheaper per call). None without a batched policy. Reads each sampled trace once more."""
        batched = next((p for p in self.config.wire if p.batched), None)
        if batched is None:
            return None
        windows: List[Tuple[Call, ...]] = []
        for i, wanted in sorted(self._sample_indices().items()):
            policy = next((p for p in self.policies[i] if p.text == batched.text), None)
            if policy is not None:  # None: no usable timestamps, the trace is sent per call only
                windows.extend(tuple(calls) for first, calls in self._windows(i, policy) if first in wanted)
        return PacketPlan(batched.text, batched.mtu, tuple(windows)) if windows else None

    def _windows(self, trace: int, policy: WirePolicy) -> Iterator[Tuple[int, List[Call]]]:
        """A trace's measured calls in the tick windows of ``policy``, as the size pass sends them (windows start
        at the trace's first timestamp, held out or not): (index of the window's first call, its calls)."""
        calls = enumerate(open_trace(self.traces[trace].path, self.config.salvage))
        first = next(calls, None)
        if first is None:
            return iter(())
        kept = ((index, call) for index, call in itertools.chain([first], calls)
                if not self.plan.held_out(trace, index))
        return tick_windows(kept, policy, first[1].t)

    def row(self, result: CodecResult, trace: Optional[TracePass] = None) -> CodecResult:
        """A codec's row (merged, or of one ``trace``) with what the pass adds: the trace of each problem's
        example and, after a sampled size pass, the estimates with their intervals."""
        scope = trace or self
        tally = next(t for t in scope.tallies if t.codec.name == result.codec)
        estimate = sampled_estimate(tally, scope.measured, scope.stats.calls) if self.sampled else None
        problems = tuple(dataclasses.replace(p, example_trace=trace.path if trace else self.example_trace.get(
            (result.codec, (p.kind, p.feature)))) for p in result.problems)
        carrier = TRANSPORTS[self.config.transport]
        wire = tuple(wire_figures(w.policy, w.export(), carrier, self.config.packet_overhead)
                     for w in tally.wire.values()) if not tally.error else ()
        return dataclasses.replace(result, problems=problems, estimate=estimate, wire=wire)

    @property
    def per_trace(self) -> List[TracePass]:
        """The traces whose own figures results.json keeps beside the merged ones (none for one trace)."""
        return self.traces if len(self.traces) > 1 else []

    def settings(self) -> Dict[str, Any]:
        """What results.json records of how the size pass ran."""
        return {"sizes_only": self.config.sizes_only, "dask": self.dask, "traces": len(self.traces),
                "wire": [p.text for p in self.config.wire], "transport": self.config.transport,
                "packet_overhead": self.config.packet_overhead, "ticks": self.ticks,
                "size_pass_calls": self.measured,
                "size_pass_method": "seeded sample, uniform over calls" if self.sampled else "every call"}

    def record(self, training: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        """What results.json records under ``trace``: the trace, or the traces together (``training``:
        the dictionaries' summary)."""
        entries = [t.entry() for t in self.traces]
        reference = next((c.name for c in self.codecs if c.name == "json"), self.codecs[0].name)
        return {**(entries[0] if len(entries) == 1 else self._together(entries)), "traces": len(entries),
                "bytes_reference": reference, "training": training, "floor": self.floor,
                "per_connection": self._per_connection(reference)}

    def _together(self, entries: List[Dict[str, Any]]) -> Dict[str, Any]:
        """The record of several traces: sums, merged statistics, each trace's damage notes."""
        notes = [e["salvaged"] for e in entries if e["salvaged"]]
        return {"path": f"{len(entries)} traces", "format": "fleet", "sha256": None,
                "file_bytes": sum(e["file_bytes"] for e in entries), "metadata": {}, **self.stats.summary(),
                "truncated_bytes": sum(e["truncated_bytes"] or 0 for e in entries),
                "salvaged": "; ".join(notes) or None, "recorder": None, "measured_calls": self.measured}

    def _per_connection(self, reference: str) -> Optional[Dict[str, Any]]:
        """Each connection's time span, calls and ``reference``'s bytes per direction, as columns: the
        capacity planner's confidence intervals come from their spread (None if the reference has no figures)."""
        tally = next(t for t in self.tallies if t.codec.name == reference)
        if tally.error:
            return None
        rows = [((last - first) // 1_000_000, c2s, s2c, *tally.by_connection.get(conn, (0, 0)))
                for conn, (first, last, c2s, s2c) in self.stats.spans.items()]
        return {"codec": reference, **{name: [row[i] for row in rows] for i, name in enumerate(PER_CONNECTION_COLUMNS)}}


def index_traces(config: RunConfig, count: bool) -> List[TraceIndex]:
    """The index pass over every trace of the run, here (see :func:`index_trace`)."""
    return [index_trace(p, config.salvage, config.chunk_calls, count) for p in config.trace_files]


def _plan(config: RunConfig, index: Sequence[TraceIndex], held: Tuple[int, ...]) -> SamplePlan:
    """How pieces sample, given the run's number of calls (counted when ``--sample-calls`` asks)."""
    total = sum(t.calls for t in index) - sum(held)
    size_fraction = 1.0
    if config.sample_calls is not None and total > 0:
        size_fraction = min(1.0, config.sample_calls / total)
    return SamplePlan(config.seed, config.sample, size_fraction, held)


def _by_trace(number: int, by_connection: Dict[Any, Any]) -> Dict[Any, Any]:
    """A trace's per-connection figures keyed by (trace number, connection), apart from other traces'."""
    return {(number, conn): value for conn, value in by_connection.items()}


def _file_bytes(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def sampled_estimate(tally: CodecTally, measured: int, total: int) -> Optional[Dict[str, Any]]:
    """Byte total, bytes per call and failures estimated from a uniform sample of ``measured`` of
    ``total`` calls, each with a normal-approximation interval at CONFIDENCE (finite population
    correction included). Calls that failed to encode count 0 bytes in the total."""
    sizes = tally.sizes
    encoded = sum(sizes.values())
    if measured < 2 or not encoded:
        return None
    z = statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)
    fpc = math.sqrt(max(0.0, 1 - measured / total))
    sum1 = sum(n * k for n, k in sizes.items())
    sum2 = sum(n * n * k for n, k in sizes.items())

    def interval(mean: float, var: float, n: int, scale: float) -> List[float]:
        half = z * math.sqrt(max(var, 0.0) / n) * fpc
        return [(mean - half) * scale, mean * scale, (mean + half) * scale]

    per_call = sum1 / measured  # failed calls as 0 bytes: the total's estimator
    per_encoded = sum1 / encoded
    fail_rate = tally.failures / measured
    return {
        "measured_calls": measured, "of_calls": total, "confidence": CONFIDENCE,
        "bytes_total": interval(per_call, (sum2 - measured * per_call ** 2) / (measured - 1), measured, total),
        "bytes_mean": interval(per_encoded, (sum2 - encoded * per_encoded ** 2) / max(encoded - 1, 1), encoded, 1),
        "failures": interval(fail_rate, fail_rate * (1 - fail_rate) * measured / (measured - 1), measured, total),
    }


def resolve_traces(specs: Sequence[str]) -> List[str]:
    """The trace files that files, folders (their trace files, sorted) and glob patterns name, in order."""
    found: List[str] = []
    for spec in specs:
        if os.path.isdir(spec):
            names = sorted(n for n in os.listdir(spec) if n.endswith(TRACE_SUFFIXES) and not n.startswith("."))
            paths = [os.path.join(spec, n) for n in names]
            what = f"{spec}: no trace files (*.rpct, *.jsonl, .gz) in the folder"
        elif glob.has_magic(spec) and not os.path.exists(spec):
            paths = sorted(p for p in glob.glob(spec) if os.path.isfile(p))
            what = f"{spec}: no file matches the pattern"
        else:
            paths, what = [spec], ""
        if not paths:
            raise BenchError(what)
        found.extend(p for p in paths if p not in found)
    return found
