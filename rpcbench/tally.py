"""One codec's running figures over the size pass (:class:`CodecTally`), and one call (:func:`check_call`) or a
batch of calls (:func:`check_batch`) through every live codec of a task: exact ``len()`` of the bytes, decode,
compare with the original (fidelity), the call into each --wire policy's packets. Memory stays bounded: sizes
are a histogram, problems are groups with their first example. Tallies of the same codec over successive
calls merge exactly."""

from __future__ import annotations

from array import array
from collections import Counter
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, cast

import numpy as np

from rpc_capture import C2S, Call
from rpc_capture.stats import TraceStats

from .batch import CallBatch, Inner, compressed_all, round_trip_all, streamed_all
from .codec import Codec, Compressed, Streams, stream_key
from .histogram import histogram_of, nearest_ranks
from .results import Problem, Sizes
from .round_trip import Outcome, compressed, error_text, round_trip
from .span import Columns, Span, fold
from .wire import Batcher, Closed, WirePolicy, WireTally


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
        self.lossy: Dict[str, List[float]] = {}  #: field path -> [values back within their step, largest error, step]
        self.ns = 0  #: encode + decode time over the pass, for planning the timing phase
        self.error: Optional[str] = None  #: why this codec was stopped (it hung, died, exited); no figures then
        self.state_bytes = 0  #: memory per stream's state, mean over the trace's streams (per-connection codecs)
        self.shared_state_bytes = 0  #: memory kept once for all connections (a dictionary)
        self.streams = 0  #: connections and directions the state was measured over
        self._sessions = Streams(codec.connection)
        self._stateful = codec.per_connection  #: a session per stream (:meth:`check` asks per call: read once)
        inner = codec.inner if isinstance(codec, Compressed) else codec
        self._inner_stateful, self._inner_name = inner.per_connection, inner.name  #: the name: what shares its outcome
        #: a batch at a time (:meth:`check_all`): an inner codec with no state across calls, and exact (no precision
        #: profile), compressed per call or in a stream per connection
        self.batched = not inner.per_connection and type(inner).within_steps is Codec.within_steps
        self._runs: List[Tuple[int, array]] = []  #: (offset in the span, bytes per call) of batches to sum
        self._whole = True  #: the inner codec's last batch came back whole (so the next one's pickle is tried first)
        #: reads the calls the run does not measure, in order (a recorded stream: :meth:`Codec.pass_over`)
        self.follows_skipped = codec.per_connection and type(codec).pass_over is not Codec.pass_over

    _STATE = ("sizes", "by_method", "by_direction", "by_connection", "failures", "mismatches", "problems", "lossy",
              "ns", "error", "state_bytes", "shared_state_bytes", "streams")

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
        self.lossy = {}
        self.failures = self.mismatches = 0
        self.wire, self._per_call, self.message, self._runs = {}, [], None, []
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
        for path, (count, error, step) in state["lossy"].items():
            self._lossy(path, count, error, step)
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

    def pass_over(self, index: int, call: Call) -> None:
        """A call the run does not measure went by: the codec's stream reads it (:meth:`Codec.pass_over`); one that
        breaks on it is this codec's error."""
        if not self._stateful or self.error:
            return
        try:
            self._sessions[stream_key(call)].pass_over(call)
        except Exception as e:
            self.fail(f"size pass stopped at call {index} (not measured): {error_text(e)}")

    def check(self, index: int, call: Call, shared: Optional[Dict[str, "Outcome"]] = None) -> None:
        """Encode, measure, decode and compare one call.

        ``shared`` (one dict per call, passed to every tally) lets codecs built on the same
        stateless inner codec (json, json+zlib-1, json+zstd-3...) encode, decode and compare
        the call once; each compressor then only has to give the inner bytes back exactly.
        """
        codec: Any = self._sessions[stream_key(call)] if self._stateful else self.codec  # Compressed if it compresses
        inner = codec.inner if self._compresses else codec
        if shared is None or self._inner_stateful:  # state of its own: the shared outcome is another tally's stream
            base = round_trip(inner, call, self.declared)
        else:
            base = shared.get(self._inner_name) or shared.setdefault(self._inner_name,
                                                                       round_trip(inner, call, self.declared))
        outcome = compressed(codec.compressor, base) if self._compresses else base
        self._absorb(index, call, outcome)
        if self.wire:
            self._wire(call, outcome.data, base.data)

    def _absorb(self, index: int, call: Call, outcome: Outcome) -> None:
        """Count one call's outcome: its time, problem, values within their step and bytes."""
        self.ns += outcome.ns
        self._judgement(index, call, outcome)
        if outcome.data is not None:
            n = len(outcome.data)
            self.sizes[n] += 1
            tally = self.by_method.get(call.method)
            if tally is None:
                tally = self.by_method[call.method] = [0, 0]
            tally[0] += 1
            tally[1] += n
            self._count_traffic(call, n)

    def _judgement(self, index: int, call: Call, outcome: Outcome) -> None:
        """Count a call's problem and its values back within their step."""
        for path, error, step in outcome.lossy:
            self._lossy(path, 1, error, step)
        if outcome.problem:
            kind, feature, declared, path, detail = outcome.problem
            if kind == "encode":
                self.failures += 1
            else:
                self.mismatches += 1
            self._problem(kind, feature, declared, index, call, path, detail)

    def check_all(self, batch: CallBatch, beat: Any = None) -> None:
        """:meth:`check` each call of ``batch``: all at once when the codec is :attr:`batched` (counted per
        batch when every call came back the same), else call by call; the figures are the same either way."""
        done = self._batch(batch, beat) if self.batched else None
        if done is None:
            for position, (index, call) in enumerate(zip(batch.indices, batch.calls)):
                if beat is not None:
                    beat[0] = index
                try:
                    self.check(index, call, _call_shared(batch, position))
                except (Exception, SystemExit) as e:
                    self.fail(f"size pass stopped at call {index}: {error_text(e)}")
                    return
            return
        if done.stop is not None:
            self.fail(f"size pass stopped at call {batch.indices[done.stop[0]]}: {done.stop[1]}")
        elif None not in done.data:  # every call encoded: summed with the span, problems (if any) call by call
            self.ns += done.ns
            self._wait(batch, map(len, cast(List[bytes], done.data)))
            for index, call, outcome in zip(batch.indices, batch.calls, done.outcomes or ()):
                if outcome is not None:
                    self._judgement(index, call, outcome)
        else:
            each = done.ns // len(batch.calls)
            outcomes = [o or Outcome(d, None, each) for o, d in zip(cast(list, done.outcomes), done.data)]
            for index, call, outcome in zip(batch.indices, batch.calls, outcomes):
                self.ns += outcome.ns
                self._judgement(index, call, outcome)
            self._wait(batch, (-1 if d is None else len(d) for d in done.data))

    def _wait(self, batch: CallBatch, sizes: Iterable[int]) -> None:
        """A batch's bytes per call (-1: it did not encode), to sum with its span's (:meth:`sum_runs`)."""
        runs = self._runs
        if not runs or runs[-1][0] + len(runs[-1][1]) != batch.offset:
            runs.append((batch.offset, array("q")))
        runs[-1][1].extend(sizes)

    def sum_runs(self, columns: Columns) -> None:
        """Count the batches waiting (:meth:`_wait`) with their span's ``columns``: bytes per method, direction and
        connection, the size histogram and each per-call --wire policy's packets."""
        names = columns.names
        for start, sizes in self._runs:
            keys, nbytes = columns.keys[start:start + len(sizes)], np.frombuffer(sizes, np.int64)
            if nbytes.min() < 0:  # calls that did not encode count nowhere
                keys, nbytes = keys[nbytes >= 0], nbytes[nbytes >= 0]
                if not len(nbytes):
                    continue
            histogram = histogram_of(nbytes)
            self.sizes.update(histogram)
            weights = nbytes.astype(np.float64)
            calls = np.bincount(keys, minlength=len(names.method_of))
            payload = np.bincount(keys, weights, len(calls)).astype(np.int64)
            both = np.column_stack((calls, payload))
            fold(self.by_method, keys, calls, names.method_of, names.methods, both)
            fold(self.by_direction, keys, calls, names.dir_of, names.dirs, both)
            fold(self.by_connection, keys, calls, names.conn_of, names.conns,
                 np.column_stack((payload * ~names.s2c, payload * names.s2c)))
            for wire in self._per_call:
                wire.add_all(keys, calls, payload, names, weights, histogram)
        self._runs = []

    def _batch(self, batch: CallBatch, beat: Any) -> Inner:
        """The batch through this codec (its inner codec's batch shared with the codecs on it)."""
        base = self._inner_batch(batch, beat)
        if not self._compresses:
            return base
        if self._stateful:  # a stream per connection: each call through its own stream's compressor
            sessions = self._sessions
            return streamed_all([sessions[key].compressor for key in zip(batch.conns, batch.dirs)], base, batch, beat)
        return compressed_all(cast(Any, self.codec).compressor, base, batch, beat)

    def _inner_batch(self, batch: CallBatch, beat: Any) -> Inner:
        """The batch through the inner codec (the codec itself if it does not compress), shared by the codecs
        on it."""
        base = batch.shared.get(self._inner_name)
        if base is None:
            inner = cast(Any, self.codec).inner if self._compresses else self.codec
            base = batch.shared[self._inner_name] = round_trip_all(inner, batch, self.declared, beat, self._whole)
            self._whole = base.outcomes is None
        return base

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

    def _lossy(self, path: str, count: int, error: float, step: float) -> None:
        """Count ``count`` values of field ``path`` that came back within their step, the largest ``error``."""
        seen = self.lossy.get(path)
        if seen is None:
            self.lossy[path] = [count, error, step]
        else:
            seen[0] += count
            seen[1] = max(seen[1], error)

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
        p50, p99 = nearest_ranks(self.sizes, (50, 99))
        return Sizes(total, total / count, int(p50), int(p99), min(self.sizes), max(self.sizes))

    def problem_list(self) -> Tuple[Problem, ...]:
        """Problem groups, undeclared first, then by count."""
        groups = [Problem(kind, feature, g[1], g[0], g[2], g[3], g[4], g[5])
                  for (kind, feature), g in self.problems.items()]
        return tuple(sorted(groups, key=lambda p: (p.declared, -p.count)))


def _call_shared(batch: CallBatch, position: int) -> Dict[str, Outcome]:
    """The ``shared`` dict of call ``position`` for a tally that goes call by call (:meth:`CodecTally.check`),
    holding the outcomes the batch already has of each inner codec."""
    if batch.per_call is None:
        batch.per_call = [{} for _ in batch.calls]
    found = batch.per_call[position]
    for name, inner in batch.shared.items():
        if name not in found and inner.stop is None:
            outcome = inner.outcomes[position] if inner.outcomes is not None else None
            found[name] = outcome or Outcome(inner.data[position], None, inner.ns // len(inner.data))
    return found


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
            tally.fail(f"size pass stopped at call {index}: {error_text(e)}")
    if batchers:  # the call's messages (one per codec) join its batches; a batch it closes is sent
        row = [tally.message for tally in tallies]
        for text, batcher in batchers.items():
            closed = batcher.step(call, row)
            if closed is not None:
                _send(tallies, text, closed, beat, f"at call {index}")


def check_batch(tallies: List[CodecTally], batch: CallBatch, span: Span, beat: Any = None) -> None:
    """:func:`check_call` of each call of ``batch`` (no batched --wire policy: calls go alone), the codecs that
    take a batch at once first (the others then reuse their inner codecs' outcomes); their sums wait in ``span``
    (:func:`sum_span`)."""
    batch.offset = span.add(batch.methods, batch.conns, batch.dirs, batch.times)
    if beat is not None:
        beat[0] = batch.indices[0]
    order = sorted(range(len(tallies)), key=lambda position: not tallies[position].batched)
    for position in order:
        tally = tallies[position]
        if tally.error:
            continue
        if beat is not None:
            beat[1] = position
        tally.check_all(batch, beat)


def sum_span(tallies: List[CodecTally], span: Span, stats: Optional[TraceStats] = None) -> None:
    """Count the batches waiting in ``span`` into each live tally (and the span's calls into ``stats``, if given),
    then empty it."""
    if not len(span):
        return
    columns = span.columns()
    for tally in tallies:
        if not tally.error:
            tally.sum_runs(columns)
    if stats is not None:
        stats.merge(span.stats(columns))
    span.clear()


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
            tally.fail(f"size pass stopped {where}: {error_text(e)}")


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
                tally.fail(f"size pass stopped at the end of the calls: {error_text(e)}")
                continue
            wire.latency = Counter(batcher.latency)
