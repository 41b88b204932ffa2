"""The size and fidelity pass: every call of the trace through every codec, streaming.

:class:`SizePass` reads the trace once. Each call goes through each codec: exact
``len()`` of the bytes, decode, compare with the original (fidelity). Memory stays
bounded (sizes are a histogram, the timing sample a fixed-size reservoir), so any
trace length works. Timing happens afterwards, on the sample (:mod:`rpcbench.timing`).
"""

from __future__ import annotations

import logging
import math
import mmap
import os
import pickle
import random
import select
import time
from collections import Counter
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple, TypeVar

from rpc_capture import C2S, Call
from rpc_capture.stats import TraceStats

from .codec import Codec, Compressed, received_call, stream_key
from .errors import BenchError
from .fidelity import OTHER, Limit, compare, features_of
from .floor import Floor
from .isolation import reap, silence_stdout
from .progress import Progress, quiet
from .results import Problem, Sizes

Stratum = TypeVar("Stratum", str, Tuple[int, str])  #: a method, or (trace, method) in a fleet


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

    def __init__(self, codec: Codec) -> None:
        self.codec = codec
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
        self._sessions: Dict[Any, Codec] = {}

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
        self.error = reason

    def export(self) -> Dict[str, Any]:
        """The figures (no codec objects), to send from a forked process."""
        return {name: getattr(self, name) for name in self._STATE}

    def absorb(self, state: Dict[str, Any]) -> None:
        """Take the figures another process computed for this codec."""
        for name in self._STATE:
            setattr(self, name, state[name])

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
        codec = self._session(stream_key(call)) if self.codec.per_connection else self.codec
        stateful_inner = codec.inner.per_connection if isinstance(codec, Compressed) else codec.per_connection
        if shared is None or stateful_inner:  # state of its own: the shared outcome is another tally's stream
            outcome = round_trip(codec, call, self.declared)
        elif not isinstance(codec, Compressed):
            outcome = shared.get(codec.name) or shared.setdefault(codec.name, round_trip(codec, call, self.declared))
        else:
            inner = codec.inner
            base = shared.get(inner.name) or shared.setdefault(inner.name, round_trip(inner, call, self.declared))
            outcome = _compressed(codec.compressor, base)
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

    def _session(self, key: Any) -> Codec:
        session = self._sessions.get(key)
        if session is None:
            session = self._sessions[key] = self.codec.connection()
        return session

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
        ordered = sorted(self.sizes.items())
        return Sizes(total, total / count, _percentile(ordered, count, 50), _percentile(ordered, count, 99),
                     ordered[0][0], ordered[-1][0])

    def problem_list(self) -> Tuple[Problem, ...]:
        """Problem groups, undeclared first, then by count."""
        groups = [Problem(kind, feature, g[1], g[0], g[2], g[3], g[4], g[5])
                  for (kind, feature), g in self.problems.items()]
        return tuple(sorted(groups, key=lambda p: (p.declared, -p.count)))


def _percentile(ordered: List[Tuple[int, int]], count: int, pct: float) -> int:
    """Nearest-rank percentile over a sorted (value, count) histogram."""
    rank = max(1, math.ceil(pct / 100 * count))
    seen = 0
    for value, k in ordered:
        seen += k
        if seen >= rank:
            return value
    return ordered[-1][0]


def _error_text(e: BaseException, limit: int = 160) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class SizePass:
    """The streaming pass: tallies per codec, trace statistics and the timing sample.

    The sample is stratified by method: each method gets its share of ``sample_size``
    (largest-remainder rounding, at least one call each while room allows), and within
    a method calls are drawn uniformly (seeded). During the pass only call *indices* are
    kept (one reservoir per method), so memory does not grow with the trace; the chosen
    calls are fetched afterwards in a second, decode-only-what's-needed read.
    """

    def __init__(self, codecs: List[Codec], sample_size: int, seed: int, floor: Optional[Floor] = None) -> None:
        self.tallies = [CodecTally(c) for c in codecs]
        self.floor = floor  #: collects the streams for the floor, in the process that reads the trace
        self.sample_size = sample_size
        self.seed = seed
        self.stats = TraceStats()
        self._first: List[Call] = []  # kept while the trace is no larger than the sample
        self._strata: Dict[str, List[int]] = {}
        self._rng = random.Random(seed)

    @property
    def measured(self) -> int:
        """Calls the codecs went through (every call of the trace)."""
        return self.stats.calls

    def run(self, calls: Iterable[Call], progress: Progress = quiet, every: int = 2000,
            tallies: Optional[List[CodecTally]] = None) -> None:
        """Consume the calls (any iterable, e.g. a streaming trace reader) through ``tallies`` (default all)."""
        tallies = self.tallies if tallies is None else tallies
        stats = self.stats
        methods = stats.methods
        for index, call in enumerate(calls):
            stats.add(call)
            if self.floor is not None:
                self.floor.add(call)
            self._offer_sample(index, call, methods[call.method])
            check_call(tallies, index, call)
            if index % every == every - 1:
                progress("size pass: reading", f"{index + 1:,} calls", *_read_so_far(calls, index + 1))
        for tally in tallies:
            tally.measure_state()

    def run_split(self, reader: Any, reopen: Callable[[], Iterable[Call]], processes: int,
                  progress: Progress = quiet, codec_timeout: float = 120.0) -> None:
        """:meth:`run` with the codecs in ``processes`` forked processes (each reads the trace).

        No codec runs in this process: it reads the trace for the statistics and the
        sample while the codec processes work, then watches them. A codec that stalls on
        one call for ``codec_timeout`` seconds, or kills its process (abort, segfault,
        ``os._exit``), is failed with the reason, and its process mates start over without it.
        """
        if not hasattr(os, "fork"):
            self.run(reader, progress)
            return
        workers = [_TallyProcess(reopen, group) for group in split_tallies(self.tallies, max(1, processes))]
        try:
            self.run(reader, progress, tallies=[])
            calls = self.stats.calls

            def codecs_at() -> None:
                at = min(w.at() for w in workers)
                progress("size pass: codecs", f"{at:,} of {calls:,} calls", at, calls)

            for w in workers:
                w.finish(codec_timeout, codecs_at)
        finally:
            for w in workers:
                w.stop()

    def _offer_sample(self, index: int, call: Call, seen: int) -> None:
        """Keep the first calls, and a reservoir of indices per method (algorithm R)."""
        if index < self.sample_size:
            self._first.append(call)
        elif self._first:
            self._first = []  # the trace is larger than the sample: fetched later by index
        stratum = self._strata.setdefault(call.method, [])
        if len(stratum) < self.sample_size:
            stratum.append(index)
        else:
            j = self._rng.randrange(seen)
            if j < self.sample_size:
                stratum[j] = index

    def sample_indices(self) -> Set[int]:
        """Positions of the sampled calls: each method's quota drawn from its reservoir."""
        rng = random.Random(self.seed + 1)
        wanted: Set[int] = set()
        for method, quota in proportional_quotas(self.stats.methods, self.sample_size).items():
            wanted.update(rng.sample(self._strata[method], quota))
        return wanted

    def sample(self, reopen: Callable[[], Any]) -> List[Call]:
        """The sampled calls in trace order (every call when the trace is no larger than the sample)."""
        if self.stats.calls <= self.sample_size:
            return list(self._first)
        return list(reopen().calls(self.sample_indices()))


def split_tallies(tallies: List[CodecTally], parts: int) -> List[List[CodecTally]]:
    """Share tallies among processes, lightest share first, keeping codecs on one inner codec together.

    Weights: a codec that encodes, decodes and compares counts 3, a compressor over a shared
    inner codec 1; families go largest first to the least loaded process.
    """
    families: Dict[str, List[CodecTally]] = {}
    for tally in tallies:
        families.setdefault(tally.codec.base.name, []).append(tally)

    def weight(family: List[CodecTally]) -> int:
        return 2 + len(family)

    groups: List[List[CodecTally]] = [[] for _ in range(parts)]
    loads = [0] * parts
    for family in sorted(families.values(), key=weight, reverse=True):
        i = loads.index(min(loads))
        groups[i].extend(family)
        loads[i] += weight(family)
    order = sorted(range(parts), key=loads.__getitem__)  # lightest first: the caller's own share
    return [groups[i] for i in order if groups[i]]


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


def _read_so_far(calls: Iterable[Call], count: int) -> Tuple[float, float]:
    """(done, total) of a read: the share of the trace file read when the reader tells, else calls of unknown."""
    fraction = getattr(calls, "fraction_read", None)
    return (fraction(), 1.0) if fraction is not None else (count, 0)


def check_call(tallies: List[CodecTally], index: int, call: Call, beat: Any = None) -> None:
    """One call through every live tally; ``beat`` (a shared array) shows a watcher who is at work.

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


def _answer(fd: int, reopen: Callable[[], Iterable[Call]], tallies: List[CodecTally], beat: Any) -> None:
    """In a forked process: run ``tallies`` over the trace; their figures (or the error) pickled to ``fd``."""
    try:
        for index, call in enumerate(reopen()):
            check_call(tallies, index, call, beat)
        for tally in tallies:
            tally.measure_state()
        answer: Any = [tally.export() for tally in tallies]
    except BaseException as e:
        answer = f"{type(e).__name__}: {e}"
    with os.fdopen(fd, "wb") as out:
        pickle.dump(answer, out)


class _TallyProcess:
    """A forked process running a group of tallies over its own read of the trace, watched.

    It writes which call and which codec it is at into shared memory; :meth:`finish`
    fails the codec it was at when it stalls or dies, and starts over without that codec.
    """

    def __init__(self, reopen: Callable[[], Iterable[Call]], group: List[CodecTally]) -> None:
        self.reopen, self.group = reopen, group
        self.pid, self.fd = 0, -1
        self._start()

    def _start(self) -> None:
        self.live = [t for t in self.group if not t.error]
        self.beat = memoryview(mmap.mmap(-1, 16)).cast("q")  # shared with the child: [call, codec position]
        self.beat[0] = self.beat[1] = -1
        self.fd, write_fd = os.pipe()
        self.pid = os.fork()
        if self.pid:
            os.close(write_fd)
            return
        try:  # whatever happens, the child never returns into the parent's code
            os.close(self.fd)
            silence_stdout()
            logging.getLogger("rpc_capture").disabled = True  # the parent reports the trace's warnings once
            _answer(write_fd, self.reopen, self.live, self.beat)
        finally:
            os._exit(0)

    def at(self) -> int:
        """Calls it has finished (all of them once it answered)."""
        return max(self.beat[0], 0) if self.pid else 1 << 62

    def finish(self, timeout: float, tick: Callable[[], None] = lambda: None) -> None:
        """Wait for the answer, failing and replacing what stalls or dies; absorb the figures.
        ``tick`` is called about once a second while waiting (progress)."""
        while True:
            answer = self._wait(timeout, tick)
            if isinstance(answer, str):
                raise BenchError(f"size pass worker failed: {answer}")
            if answer is not None:
                for tally, state in zip(self.live, answer):
                    tally.absorb(state)
                return
            if all(t.error for t in self.live):
                return
            self._start()

    def _wait(self, timeout: float, tick: Callable[[], None]) -> Any:
        """The process's answer; None if it stalled or died (the codec at work is failed)."""
        seen, since = (self.beat[0], self.beat[1]), time.monotonic()
        while not select.select([self.fd], [], [], min(1.0, timeout))[0]:
            tick()
            now = (self.beat[0], self.beat[1])
            if now != seen:
                seen, since = now, time.monotonic()
            elif time.monotonic() - since >= timeout:
                self._blame(f"timed out: no progress on call {seen[0]} within {timeout:g} s (--codec-timeout)", True)
                return None
        with os.fdopen(self.fd, "rb") as inp:
            data = inp.read()
        self.fd = -1
        if not data:
            self._blame(f"size pass stopped at call {self.beat[0]}: ", False)
            return None
        reap(self.pid)
        self.pid = 0
        return pickle.loads(data)

    def _blame(self, reason: str, kill: bool) -> None:
        """Fail the codec the process was at, with how the process ended (killed first if ``kill``)."""
        how = reap(self.pid, kill=kill)
        self.pid = 0
        self.stop()
        self.live[max(self.beat[1], 0)].fail(reason if kill else reason + how)

    def stop(self) -> None:
        """Kill and reap the process if it is still there; close its pipe."""
        if self.pid:
            reap(self.pid, kill=True)
            self.pid = 0
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
