"""A piece's calls a span at a time (:class:`Span`): each call's method, connection and direction as one
integer, the id of that triple (a *key*), and its timestamp, kept over up to :data:`SPAN_CALLS` calls. The
tallies' batches wait there (:meth:`rpcbench.tally.CodecTally.sum_runs`) and are summed at once: one
``bincount`` per figure over the span's calls gives each key's sums, and the few keys fold into per method,
per direction and per connection figures (:func:`fold`); the span's trace statistics come the same way
(:meth:`Span.stats`).

Per batch of 128 calls, numpy's fixed cost (a few µs a call to it) outweighs the work it saves; over 8,192
calls it is amortized, and one span's columns serve every tally. Per call, the span costs one dict lookup
of a tuple. The figures are those of counting call by call, each name in its order of first appearance
(tests/test_batch.py)."""

from __future__ import annotations

import itertools
from array import array
from collections import Counter
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Union

import numpy as np

from rpc_capture import C2S, Call
from rpc_capture.stats import TraceStats

SPAN_CALLS = 8192  #: calls summed at once (64 batches of a binary trace)
_LATEST, _EARLIEST = np.iinfo(np.int64).max, np.iinfo(np.int64).min


class Interner(Dict[Any, int]):
    """Keys numbered 0, 1, 2... in the order they are first looked up."""

    def __missing__(self, key: Any) -> int:
        number = self[key] = len(self)
        return number


@dataclass(frozen=True)
class Names:
    """What the keys of a span stand for: per key, the number of its method, connection and direction among the
    piece's (each list of names in order of first appearance, as the keys are)."""

    methods: List[Any]
    conns: List[Any]
    dirs: List[Any]
    method_of: np.ndarray  #: per key: its method's number
    conn_of: np.ndarray
    dir_of: np.ndarray
    s2c: np.ndarray  #: per key: server to client? (any direction but C2S, as the tallies split them)


@dataclass(frozen=True)
class Columns:
    """A span's calls as arrays, made once for every tally: each call's key, and the names of the keys."""

    keys: np.ndarray
    names: Names


class Span:
    """The calls of a piece since the last sum, as keys (the keys and names kept for the whole piece).
    ``times``: keep each call's timestamp, for :meth:`stats`."""

    def __init__(self, times: bool = True) -> None:
        self._keys = Interner()  #: (method, connection, direction) -> key
        self._methods, self._conns, self._dirs = Interner(), Interner(), Interner()
        self._of: List[List[int]] = [[], [], []]  #: per key: its method's, connection's and direction's number
        self._with_times = times
        self.clear()

    def clear(self) -> None:
        """Forget the span's calls (not the keys: a key keeps its number over the piece)."""
        self._calls: List[int] = []  #: each call's key
        self._times: Union[array, List[int]] = array("q")  #: each call's timestamp (a list once one is beyond 64 bits)

    def __len__(self) -> int:
        return len(self._calls)

    def add(self, methods: Sequence[Any], conns: Sequence[Any], dirs: Sequence[Any], times: Sequence[int]) -> int:
        """Add a batch's calls (their columns; not the calls: the batch's memory is reused by the next's); their
        offset in the span."""
        offset = len(self._calls)
        self._calls.extend(map(self._keys.__getitem__, zip(methods, conns, dirs)))
        if self._with_times:
            self._add_times(times)
        return offset

    def _add_times(self, times: Sequence[int]) -> None:
        """Keep a batch's timestamps: in one array of 64-bit ints, :meth:`stats` reads it without a copy."""
        kept = self._times
        if isinstance(kept, array):
            try:
                kept.extend(array("q", times))
                return
            except OverflowError:  # a timestamp beyond 64 bits (no clock gives one): Python ints from then on
                kept = self._times = kept.tolist()
        kept.extend(times)

    def columns(self) -> Columns:
        """The span's calls as arrays."""
        method_of, conn_of, dir_of = self._of
        for method, conn, direction in itertools.islice(self._keys, len(method_of), None):
            method_of.append(self._methods[method])
            conn_of.append(self._conns[conn])
            dir_of.append(self._dirs[direction])
        dirs = np.array(dir_of, np.intp)
        names = Names(list(self._methods), list(self._conns), list(self._dirs), np.array(method_of, np.intp),
                      np.array(conn_of, np.intp), dirs, np.array([d != C2S for d in self._dirs], bool)[dirs])
        return Columns(np.array(self._calls, np.intp), names)

    def stats(self, columns: Columns) -> TraceStats:
        """The span's trace statistics, as :meth:`TraceStats.add` of each call counts them (merged into the piece's
        by :meth:`TraceStats.merge`: names new to the piece come in order of first appearance)."""
        keys, names = columns.keys, columns.names
        if not isinstance(self._times, array):
            return self._stats_by_call(columns)
        times = np.frombuffer(self._times, np.int64)
        calls = np.bincount(keys, minlength=len(names.conn_of))
        conn_lows, conn_highs = np.full(len(names.conns), _LATEST), np.full(len(names.conns), _EARLIEST)
        conn_at = names.conn_of[keys]  # each call's connection: its earliest and latest call
        np.minimum.at(conn_lows, conn_at, times)
        np.maximum.at(conn_highs, conn_at, times)
        present = np.flatnonzero(calls)
        conns = names.conn_of[present]
        ways = np.bincount(conns * 2 + names.s2c[present], calls[present], 2 * len(names.conns)).astype(np.int64)
        per_conn = _per_name(calls, names.conn_of, names.conns)
        spans = {names.conns[c]: [conn_lows[c].item(), conn_highs[c].item(), ways[2 * c].item(),
                                  ways[2 * c + 1].item()] for c in np.flatnonzero(per_conn).tolist()}
        return TraceStats(len(times), _counter(calls, names.method_of, names.methods),
                          _counter(calls, names.dir_of, names.dirs), _counter(calls, names.conn_of, names.conns),
                          spans, int(times.min()), int(times.max()))

    def _stats_by_call(self, columns: Columns) -> TraceStats:
        """:meth:`stats` counted call by call (a timestamp beyond 64 bits)."""
        names, stats = columns.names, TraceStats()
        for key, t in zip(columns.keys.tolist(), self._times):
            stats.add(Call(names.methods[names.method_of[key]], (), t, names.dirs[names.dir_of[key]],
                           names.conns[names.conn_of[key]]))
        return stats


def _per_name(per_key: np.ndarray, name_of: np.ndarray, names: List[Any]) -> np.ndarray:
    """``per_key`` (one figure per key) summed per name."""
    return np.bincount(name_of, per_key, len(names)).astype(np.int64)


def _counter(calls: np.ndarray, name_of: np.ndarray, names: List[Any]) -> Counter:
    """The calls per name, names with none left out, in order of first appearance."""
    counts = _per_name(calls, name_of, names).tolist()
    return Counter({names[i]: n for i, n in enumerate(counts) if n})


def fold(into: Dict[Any, List[int]], keys: np.ndarray, calls: np.ndarray, name_of: np.ndarray, names: List[Any],
         per_key: np.ndarray) -> None:
    """Add to ``into`` (name -> figures) each name's figures, the sums of the rows of ``per_key`` (a row of figures per
    key) over its keys, for the names with a call among ``keys`` (the calls counted, in order; ``calls``: per key,
    how many); a name new to ``into`` comes in the order of its first call, as call by call it would."""
    present = np.flatnonzero(calls)
    groups = name_of[present]
    rows = np.zeros((len(names), per_key.shape[1]), np.int64)
    np.add.at(rows, groups, per_key[present])
    found = np.flatnonzero(np.bincount(groups, minlength=len(names))).tolist()
    new = [g for g in found if names[g] not in into]
    if len(new) > 1:  # their order of first appearance in these calls
        new.sort(key=_first_calls(keys, name_of, new).__getitem__)
    for g in new:
        into[names[g]] = [0] * per_key.shape[1]
    figures = rows.tolist()
    for g in found:
        mine = into[names[g]]
        for position, n in enumerate(figures[g]):
            mine[position] += n


def _first_calls(keys: np.ndarray, name_of: np.ndarray, wanted: List[int]) -> Dict[int, int]:
    """Where each name of ``wanted`` (numbers) has its first call among ``keys``: a pass over the calls per name
    when they are few (a piece's first span finds every name new), else a sort of those names' calls."""
    if len(wanted) <= 16:
        name_at = name_of[keys]
        return {g: int(np.argmax(name_at == g)) for g in wanted}
    at = np.flatnonzero(np.isin(name_of, wanted)[keys])
    found, first = np.unique(name_of[keys[at]], return_index=True)
    return dict(zip(found.tolist(), at[first].tolist()))
