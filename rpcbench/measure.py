"""Replaying calls through codecs: what is measured, and how.

1. :class:`SizePass` streams once over the whole trace. Every call goes through every
   codec: exact ``len()`` of the bytes, decode, compare with the original (fidelity).
   Memory stays bounded (sizes are kept as a histogram), so any trace length works.
2. :func:`time_codecs` times encode and decode on a sample of calls held in memory:
   whole batches between two ``perf_counter_ns`` reads (no per-call timer), loops
   calibrated so one measurement lasts at least ``min_time`` seconds, warm-up rounds
   first, then ``repeat`` rounds with codecs interleaved round-robin so that machine
   drift hits all of them alike. The garbage collector is off inside timed loops, as
   ``timeit`` does, so one codec's garbage is not collected on another's clock.
"""

from __future__ import annotations

import gc
import math
import random
import time
from collections import Counter
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from rpc_capture import Call

from .codec import Codec
from .fidelity import OTHER, compare, features_of
from .results import Problem, Sizes, Timing

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


class CodecTally:
    """Running size and fidelity figures of one codec over the full pass."""

    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        self.declared = frozenset(codec.changes)
        self.sizes: Counter = Counter()
        self.by_method: Dict[str, List[int]] = {}
        self.failures = 0
        self.mismatches = 0
        self.problems: Dict[Tuple[str, str], list] = {}
        self._sessions: Dict[Any, Codec] = {}

    def check(self, index: int, call: Call) -> Optional[bytes]:
        """Encode, measure, decode and compare one call; return the bytes, or None on failure."""
        codec = self._session(call.conn) if self.codec.per_connection else self.codec
        try:
            data = codec.encode(call)
            if type(data) is not bytes:
                raise TypeError(f"encode returned {type(data).__name__}, not bytes")
        except Exception as e:
            self.failures += 1
            declared = sorted(features_of(call.args) & self.declared)
            feature = declared[0] if declared else OTHER
            self._problem("encode", feature, bool(declared), index, call, "", _error_text(e))
            return None
        n = len(data)
        self.sizes[n] += 1
        tally = self.by_method.get(call.method)
        if tally is None:
            tally = self.by_method[call.method] = [0, 0]
        tally[0] += 1
        tally[1] += n
        try:
            back = codec.decode(data)
        except Exception as e:
            self.mismatches += 1
            self._problem("decode", OTHER, False, index, call, "", _error_text(e))
            return data
        diff = compare(call, back, self.declared)
        if diff:
            self.mismatches += 1
            self._problem("mismatch", diff.feature, diff.feature in self.declared, index, call, diff.path, diff.detail)
        return data

    def _session(self, conn: Any) -> Codec:
        session = self._sessions.get(conn)
        if session is None:
            session = self._sessions[conn] = self.codec.connection()
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
    """The streaming pass: tallies per codec, trace statistics and a seeded sample of calls."""

    def __init__(self, codecs: List[Codec], sample_size: int, seed: int) -> None:
        self.tallies = [CodecTally(c) for c in codecs]
        self.sample_size = sample_size
        self.calls = 0
        self.methods: Counter = Counter()
        self.directions: Counter = Counter()
        self.connections: set = set()
        self.t_min: Optional[int] = None
        self.t_max: Optional[int] = None
        self._sample: List[Tuple[int, Call]] = []
        self._rng = random.Random(seed)

    def run(self, calls: Iterable[Call], progress: Progress = _quiet, every: int = 5000) -> None:
        """Consume the calls (any iterable, e.g. a streaming trace reader)."""
        tallies, methods, directions, conns = self.tallies, self.methods, self.directions, self.connections
        for index, call in enumerate(calls):
            methods[call.method] += 1
            directions[call.dir] += 1
            conns.add(call.conn)
            self._track_time(call.t)
            self._offer_sample(index, call)
            for tally in tallies:
                tally.check(index, call)
            if index % every == every - 1:
                progress(f"size and fidelity pass: {index + 1:,} calls")
            self.calls = index + 1

    def _track_time(self, t: int) -> None:
        if self.t_min is None or t < self.t_min:
            self.t_min = t
        if self.t_max is None or t > self.t_max:
            self.t_max = t

    def _offer_sample(self, index: int, call: Call) -> None:
        """Reservoir sampling (algorithm R): a uniform seeded sample, kept in trace order later."""
        if index < self.sample_size:
            self._sample.append((index, call))
        else:
            j = self._rng.randrange(index + 1)
            if j < self.sample_size:
                self._sample[j] = (index, call)

    def sample(self) -> List[Call]:
        """The sampled calls in trace order (all calls when the trace is no larger than the sample)."""
        return [call for _, call in sorted(self._sample, key=lambda pair: pair[0])]


class TimingJob:
    """One codec's timing inputs: the sample calls it can encode, and their encodings."""

    def __init__(self, codec: Codec, sample: List[Call]) -> None:
        self.codec = codec
        self.calls: List[Call] = []
        self.payloads: List[Any] = []
        self.error: Optional[str] = None
        self.loops = 1
        self.encode_rounds: List[float] = []
        self.decode_rounds: List[float] = []
        sessions: Dict[Any, Codec] = {}
        for call in sample:
            session = sessions.setdefault(call.conn, codec.connection()) if codec.per_connection else codec
            try:
                data = session.encode(call)
            except Exception:
                continue  # counted as a failure by the size pass; not timed
            if type(data) is bytes:
                self.calls.append(call)
                self.payloads.append((call.conn, data) if codec.per_connection else data)
        if not self.calls:
            self.error = "no call of the sample could be encoded, nothing to time"

    def measure(self, record: bool) -> None:
        """One round: encode then decode, ``loops`` times each; ns per call kept if ``record``."""
        per_call = self.loops * len(self.calls)
        if self.codec.per_connection:
            enc_ns = _time_per_connection(self.codec, self.calls, self.loops, "encode")
            dec_ns = _time_per_connection(self.codec, self.payloads, self.loops, "decode")
        else:
            enc_ns = _time_batch(self.codec.encode, self.calls, self.loops)
            dec_ns = _time_batch(self.codec.decode, self.payloads, self.loops)
        if record:
            self.encode_rounds.append(enc_ns / per_call)
            self.decode_rounds.append(dec_ns / per_call)
        else:  # warm-up: calibrate loops so that the slower of the two lasts min_time
            self._last_ns = max(enc_ns, dec_ns) / self.loops

    def calibrate(self, min_time: float) -> None:
        """Choose loops from the last warm-up measurement of one replay of the sample."""
        self.loops = max(1, math.ceil(min_time * 1e9 / max(self._last_ns, 1)))

    def timings(self) -> Tuple[Optional[Timing], Optional[Timing]]:
        """Encode and decode timing, or (None, None) when nothing was timed."""
        if not self.encode_rounds:
            return None, None
        n = len(self.calls)
        return (Timing(tuple(self.encode_rounds), n, self.loops), Timing(tuple(self.decode_rounds), n, self.loops))


def _time_batch(func: Callable[[Any], Any], items: List[Any], loops: int) -> int:
    """ns for ``loops`` replays of ``func`` over ``items``: one timer pair around the lot."""
    timer = time.perf_counter_ns
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        t0 = timer()
        for _ in range(loops):
            for item in items:
                func(item)
        return timer() - t0
    finally:
        if gc_was_on:
            gc.enable()


def _time_per_connection(codec: Codec, items: List[Any], loops: int, op: str) -> int:
    """Like :func:`_time_batch` for stateful codecs: fresh per-connection state for each replay.

    ``items`` are calls (encode) or ``(conn, data)`` pairs (decode), in trace order.
    """
    timer = time.perf_counter_ns
    total = 0
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        for _ in range(loops):
            conns = {item.conn if op == "encode" else item[0] for item in items}
            funcs = {conn: getattr(codec.connection(), op) for conn in conns}
            if op == "encode":
                t0 = timer()
                for call in items:
                    funcs[call.conn](call)
            else:
                t0 = timer()
                for conn, data in items:
                    funcs[conn](data)
            total += timer() - t0
    finally:
        if gc_was_on:
            gc.enable()
    return total


def time_codecs(jobs: List[TimingJob], repeat: int, warmup: int, min_time: float, progress: Progress = _quiet) -> None:
    """Warm up and calibrate every job, then run ``repeat`` interleaved rounds (``warmup`` >= 1)."""
    live = [job for job in jobs if not job.error]
    rounds = warmup + repeat
    for r in range(rounds):
        start = r % len(live) if live else 0
        for i, job in enumerate(live[start:] + live[:start]):
            label = "warm-up" if r < warmup else f"round {r - warmup + 1}/{repeat}"
            progress(f"timing {label}: {job.codec.name} ({i + 1}/{len(live)})")
            try:
                job.measure(record=r >= warmup)
                if r == warmup - 1:
                    job.calibrate(min_time)
            except Exception as e:  # a codec that breaks under timing is reported, the rest go on
                job.error = f"timing stopped: {_error_text(e)}"
        live = [job for job in live if not job.error]
