"""What a trace holds, counted in one streaming pass: calls, methods, directions,
connections and time span. The size pass, ``trace info`` and results.json all use this
one tally, so they always agree.
"""

from __future__ import annotations

import operator
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, Hashable, List, Optional, Sequence

from .call import C2S, Call


@dataclass
class TraceStats:
    """Counts over the calls seen so far; ``add`` one call, ``merge`` another tally of other calls."""

    calls: int = 0
    methods: Counter[str] = field(default_factory=Counter)
    directions: Counter[str] = field(default_factory=Counter)
    connections: Counter[Hashable] = field(default_factory=Counter)  #: calls per connection
    #: per connection: [first t, last t, c2s calls, s2c calls] (the capacity planner's rates and their spread)
    spans: Dict[Hashable, List[int]] = field(default_factory=dict)
    t_min: Optional[int] = None
    t_max: Optional[int] = None

    def add(self, call: Call) -> None:
        """Count one call."""
        self.calls += 1
        self.methods[call.method] += 1
        self.directions[call.dir] += 1
        self.connections[call.conn] += 1
        t = call.t
        span = self.spans.get(call.conn)
        if span is None:
            span = self.spans[call.conn] = [t, t, 0, 0]
        elif t < span[0]:
            span[0] = t
        elif t > span[1]:
            span[1] = t
        span[2 if call.dir == C2S else 3] += 1
        if self.t_min is None or t < self.t_min:
            self.t_min = t
        if self.t_max is None or t > self.t_max:
            self.t_max = t

    def add_all(self, calls: Sequence[Call]) -> None:
        """Count calls in trace order, as :meth:`add` each would: counted by C loops (``Counter``, ``dict``)
        instead of per call, folded once per connection; out-of-order timestamps go through :meth:`add`."""
        if not calls:
            return
        methods, _, times, dirs, conns, *_ = zip(*calls)
        if any(map(operator.gt, times, times[1:])):
            for call in calls:
                self.add(call)
            return
        self.calls += len(calls)
        self.methods.update(methods)
        self.directions.update(dirs)
        self.connections.update(conns)
        first, last = dict(zip(reversed(conns), reversed(times))), dict(zip(conns, times))
        ways = Counter(zip(conns, map(C2S.__eq__, dirs)))  #: (conn, c2s?) -> calls
        for conn, t in last.items():  # in order of first appearance, as add() makes them
            span = self.spans.get(conn)
            if span is None:
                span = self.spans[conn] = [first[conn], t, 0, 0]
            span[0], span[1] = min(span[0], first[conn]), max(span[1], t)
            span[2] += ways[conn, True]
            span[3] += ways[conn, False]
        self.t_min = times[0] if self.t_min is None else min(self.t_min, times[0])
        self.t_max = times[-1] if self.t_max is None else max(self.t_max, times[-1])

    def merge(self, other: "TraceStats") -> None:
        """Add the counts of ``other`` (a tally of different calls) to these."""
        self.calls += other.calls
        self.methods.update(other.methods)
        self.directions.update(other.directions)
        self.connections.update(other.connections)
        for conn, (first, last, c2s, s2c) in other.spans.items():
            mine = self.spans.setdefault(conn, [first, last, 0, 0])
            mine[:] = [min(mine[0], first), max(mine[1], last), mine[2] + c2s, mine[3] + s2c]
        self.t_min = min((t for t in (self.t_min, other.t_min) if t is not None), default=None)
        self.t_max = max((t for t in (self.t_max, other.t_max) if t is not None), default=None)

    @property
    def duration_s(self) -> float:
        """Seconds from the first call's timestamp to the last's (0 without timestamps)."""
        return ((self.t_max or 0) - (self.t_min or 0)) / 1e9

    def summary(self) -> Dict[str, Any]:
        """The figures results.json keeps under ``trace``."""
        return {
            "calls": self.calls,
            "methods": dict(self.methods.most_common()),
            "directions": dict(self.directions),
            "connections": len(self.connections),
            "duration_s": self.duration_s,
        }
