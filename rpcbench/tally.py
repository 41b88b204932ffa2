"""One codec's running figures over the size pass (:class:`CodecTally`), and one call through every live
codec of a task (:func:`check_call`): exact ``len()`` of the bytes, decode, compare with the original
(fidelity), the call into each --wire policy's packets. Memory stays bounded: sizes are a histogram, problems
are groups with their first example. Tallies of the same codec over successive calls merge exactly."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, cast

import numpy as np

from rpc_capture import C2S, Call

from .batch import CallBatch, Inner
from .codec import Codec, Compressed, Streams, received_call, stream_key
from .fidelity import OTHER, PRECISION, QUANTIZED, Limit, compare, features_of
from .histogram import nearest_rank
from .results import Problem, Sizes
from .wire import Batcher, Closed, WirePolicy, WireTally


class Outcome(NamedTuple):
    """One call through one codec: wire bytes (None if encoding failed), the problem if any, and its cost."""

    data: Optional[bytes]
    problem: Optional[Tuple[str, str, bool, str, str]]  #: kind, feature, declared, path, detail
    ns: int  #: encode + decode time, for planning the timing phase
    lossy: Tuple[Tuple[str, float, float], ...] = ()  #: (field path, error, step) of values back within their step


def round_trip(codec: Codec, call: Call, declared: frozenset) -> Outcome:
    """Encode, decode and compare one call, catching whatever the codec raises."""
    timer = time.perf_counter_ns
    t0 = timer()
    try:
        data = codec.encode(call)
    except Exception as e:
        return _encode_failed(call, e, declared, timer() - t0)
    if type(data) is not bytes:
        return _encode_failed(call, _not_bytes(data), declared, timer() - t0)
    try:
        decoded = codec.decode(data)
    except Exception as e:
        return Outcome(data, ("decode", OTHER, False, "", _error_text(e)), timer() - t0)
    return judged(codec, call, data, decoded, timer() - t0, declared)


def _not_bytes(data: Any) -> TypeError:
    return TypeError(f"encode returned {type(data).__name__}, not bytes")


def _encode_failed(call: Call, e: BaseException, declared: frozenset, ns: int) -> Outcome:
    """The outcome of a call the codec failed to encode, under the limit it named or the declared feature found."""
    if isinstance(e, Limit):  # the codec named the limit it hit
        return Outcome(None, ("encode", e.feature, e.feature in declared, e.path, _error_text(e)), ns)
    found = sorted(features_of(call.args) & declared)
    return Outcome(None, ("encode", found[0] if found else OTHER, bool(found), "", _error_text(e)), ns)


def judged(codec: Codec, call: Call, data: bytes, decoded: Any, ns: int, declared: frozenset) -> Outcome:
    """The outcome of ``call``, whose bytes ``data`` decoded to ``decoded``: the same call back, or its problem."""
    try:
        back = received_call(decoded)
    except Exception as e:
        return Outcome(data, ("decode", OTHER, False, "", _error_text(e)), ns)
    try:
        back, lossy, beyond = codec.within_steps(call, back)
        if beyond:
            return Outcome(data, ("mismatch", PRECISION, False, *beyond), ns, lossy)
        diff = compare(call, back, declared)
    except Exception as e:  # a decoded value no comparison copes with (a plugin's odd type): the codec's failure
        return Outcome(data, ("mismatch", OTHER, False, "", f"cannot compare the decoded call: {_error_text(e)}"), ns)
    if diff:
        return Outcome(data, ("mismatch", diff.feature, diff.feature in declared, diff.path, diff.detail), ns, lossy)
    if lossy:
        path, error, step = lossy[0]
        return Outcome(data, ("mismatch", QUANTIZED, QUANTIZED in declared, path,
                              f"{len(lossy)} values within their step (first: off by {error:.3g}, step {step:g})"), ns,
                       lossy)
    return Outcome(data, None, ns)


class _Raised(NamedTuple):
    """What a codec raised instead of giving a value (in a batch's list of values)."""

    error: BaseException


def round_trip_all(codec: Codec, batch: CallBatch, declared: frozenset, beat: Any) -> Inner:
    """:func:`round_trip` of each call of ``batch`` through a stateless codec, encoding all, then decoding all,
    each call once (what a call raised is its outcome). Each call is judged only when the batch did not come
    back exactly as sent; a ``SystemExit`` stops the codec at its call (:attr:`Inner.stop`)."""
    timer = time.perf_counter_ns
    t0 = timer()
    data = _each(codec.encode, batch.calls, batch.indices, beat)
    clean = len(data) == len(batch.calls) and {*map(type, data)} == {bytes}
    back = _each(codec.decode if clean else _decoder(codec), data, batch.indices, beat)
    ns = timer() - t0
    stop = _exit(data) or _exit(back)
    if stop is not None:
        return Inner([], ns, stop=stop)
    if clean and _Raised not in map(type, back) and batch.same_as_sent(back):
        return Inner(data, ns)
    each = ns // len(data)
    same = batch.same_each(back) if clean else [False] * len(data)
    outcomes = [None if ok else _outcome(codec, call, d, b, each, declared)
                for call, d, b, ok in zip(batch.calls, data, back, same)]
    return Inner([o.data if o else d for o, d in zip(outcomes, data)], ns, outcomes)


def _exit(values: List[Any]) -> Optional[Tuple[int, str]]:
    """(position, why) of the value that is a ``SystemExit`` raised (the last: :func:`_each` stops there)."""
    last = values[-1] if values else None
    if type(last) is _Raised and not isinstance(last.error, Exception):
        return len(values) - 1, _error_text(last.error)
    return None


def _decoder(codec: Codec) -> Any:
    """``codec.decode`` of what encoded to bytes (the rest left as it is: they failed already)."""
    return lambda data: codec.decode(data) if type(data) is bytes else data


def _outcome(codec: Codec, call: Call, data: Any, back: Any, ns: int, declared: frozenset) -> Outcome:
    """The outcome of one call of a batch from what its encode and decode gave or raised."""
    if type(data) is _Raised:
        return _encode_failed(call, data.error, declared, ns)
    if type(data) is not bytes:
        return _encode_failed(call, _not_bytes(data), declared, ns)
    if type(back) is _Raised:
        return Outcome(data, ("decode", OTHER, False, "", _error_text(back.error)), ns)
    return judged(codec, call, data, back, ns, declared)


def _each(func: Any, items: Sequence[Any], indices: Sequence[int], beat: Any) -> List[Any]:
    """``func`` of each item, in order, each once; an item whose call raised gets :class:`_Raised`, and a
    ``SystemExit`` ends the list. With a watcher, ``beat[0]`` names the call at work, as call by call it does."""
    out: List[Any] = []
    append = out.append
    while len(out) < len(items):
        try:
            if beat is None:
                for item in itertools.islice(items, len(out), None):
                    append(func(item))
            else:
                for index, item in itertools.islice(zip(indices, items), len(out), None):
                    beat[0] = index
                    append(func(item))
        except Exception as e:
            append(_Raised(e))
        except SystemExit as e:
            append(_Raised(e))
            break
    return out


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
    return base._replace(data=packed, ns=ns)


def _compressed_all(compressor: Any, base: Inner, batch: CallBatch, beat: Any) -> Inner:
    """The batch of ``inner+compressor`` from the inner codec's: compressed and checked at once when every call
    came back the same, else :func:`_compressed` of each call's outcome (a stateless compressor, so a call
    compressed again gives the same)."""
    if base.stop is not None:
        return base
    timer = time.perf_counter_ns
    t0 = timer()
    if base.outcomes is None:
        packed = _each(compressor.compress, base.data, batch.indices, beat)
        if {*map(type, packed)} == {bytes} and len(packed) == len(base.data) and \
                _each(compressor.decompress, packed, batch.indices, beat) == base.data:
            return Inner(packed, base.ns + timer() - t0)
    each = base.ns // len(base.data)
    outcomes = [_compressed(compressor, o or Outcome(d, None, each)) for o, d in
                zip(base.outcomes or [None] * len(base.data), base.data)]
    return Inner([o.data for o in outcomes], base.ns + timer() - t0, outcomes)


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
        #: a batch at a time (:meth:`check_all`): no state across calls, and exact (no precision profile)
        self.batched = not codec.per_connection and type(inner).within_steps is Codec.within_steps

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
        outcome = _compressed(codec.compressor, base) if self._compresses else base
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
                    self.fail(f"size pass stopped at call {index}: {_error_text(e)}")
                    return
            return
        if done.stop is not None:
            self.fail(f"size pass stopped at call {batch.indices[done.stop[0]]}: {done.stop[1]}")
        elif None not in done.data:  # every call encoded: counted per batch, problems (if any) call by call
            self._absorb_all(batch, cast(List[bytes], done.data), done.ns)
            for index, call, outcome in zip(batch.indices, batch.calls, done.outcomes or ()):
                if outcome is not None:
                    self._judgement(index, call, outcome)
        else:
            inner = batch.shared[self._inner_name].data
            each = done.ns // len(batch.calls)
            for index, call, outcome, data, message in zip(batch.indices, batch.calls, cast(list, done.outcomes),
                                                           done.data, inner):
                outcome = outcome or Outcome(data, None, each)
                self._absorb(index, call, outcome)
                if self.wire:
                    self._wire(call, outcome.data, message)

    def _absorb_all(self, batch: CallBatch, data: List[bytes], ns: int) -> None:
        """Count a batch of calls that every one came back the same: their time and bytes, grouped."""
        self.ns += ns
        sizes = list(map(len, data))
        self.sizes.update(sizes)
        weights = np.array(sizes, np.float64)
        per_direction = batch.directions.sums(weights)
        _fold(self.by_method, batch.methods.keys, batch.methods.counts, batch.methods.sums(weights))
        _fold(self.by_direction, batch.directions.keys, batch.directions.counts, per_direction)
        for (conn, c2s), n in zip(batch.streams.keys, batch.streams.sums(weights)):
            pair = self.by_connection.get(conn)
            if pair is None:
                pair = self.by_connection[conn] = [0, 0]
            pair[0 if c2s else 1] += n
        for wire in self._per_call:
            wire.add_all(batch.directions, per_direction, sizes, weights)

    def _batch(self, batch: CallBatch, beat: Any) -> Inner:
        """The batch through this codec (its inner codec's batch shared with the codecs on it)."""
        codec: Any = self.codec  # Compressed if it compresses
        inner = codec.inner if self._compresses else codec
        base = batch.shared.get(self._inner_name)
        if base is None:
            base = batch.shared[self._inner_name] = round_trip_all(inner, batch, self.declared, beat)
        return _compressed_all(codec.compressor, base, batch, beat) if self._compresses else base

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
        return Sizes(total, total / count, int(nearest_rank(self.sizes, 50)), int(nearest_rank(self.sizes, 99)),
                     min(self.sizes), max(self.sizes))

    def problem_list(self) -> Tuple[Problem, ...]:
        """Problem groups, undeclared first, then by count."""
        groups = [Problem(kind, feature, g[1], g[0], g[2], g[3], g[4], g[5])
                  for (kind, feature), g in self.problems.items()]
        return tuple(sorted(groups, key=lambda p: (p.declared, -p.count)))


def _fold(into: Dict[Any, List[int]], keys: List[Any], calls: List[int], sizes: List[int]) -> None:
    """Add a batch's calls and bytes per key to ``into`` (key -> [calls, bytes]), new keys in the batch's order."""
    for key, count, n in zip(keys, calls, sizes):
        pair = into.get(key)
        if pair is None:
            pair = into[key] = [0, 0]
        pair[0] += count
        pair[1] += n


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


def check_batch(tallies: List[CodecTally], batch: CallBatch, beat: Any = None) -> None:
    """:func:`check_call` of each call of ``batch`` (no batched --wire policy: calls go alone), the codecs that
    take a batch at once first (the others then reuse their inner codecs' outcomes)."""
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
