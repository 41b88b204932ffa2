"""The size and fidelity pass: every call of the trace through every codec, streaming.

:class:`SizePass` reads the trace once. Each call goes through each codec: exact
``len()`` of the bytes, decode, compare with the original (fidelity). Memory stays
bounded (sizes are a histogram, the timing sample a fixed-size reservoir), so any
trace length works. Timing happens afterwards, on the sample (:mod:`rpcbench.timing`).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from rpc_capture import Call

from .codec import Codec
from .fidelity import OTHER, compare, features_of
from .results import Problem, Sizes

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
