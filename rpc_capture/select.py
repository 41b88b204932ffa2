"""Choose calls from a trace by time range, method, connection and direction.

``Selection(start_s=2, end_s=4.5, methods=["buff_*"])(calls)`` streams the calls that
match every criterion given; times are seconds since the first call of the stream.
``run_bench.py trace cat`` and ``trace slice`` select with this.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Hashable, Iterable, Iterator, Optional, Sequence

from .call import DIRECTIONS, Call
from .recorder import MethodFilter


@dataclass(frozen=True)
class Selection:
    """Which calls to keep; every criterion left ``None`` keeps all calls."""

    start_s: Optional[float] = None  #: from this many seconds after the first call (inclusive)
    end_s: Optional[float] = None  #: up to this many seconds after the first call (exclusive)
    methods: Optional[Sequence[str]] = None  #: only these method names (exact or glob, ``buff_*``)
    exclude_methods: Optional[Sequence[str]] = None  #: not these method names (exact or glob)
    conns: Optional[Iterable[Hashable]] = None  #: only these connection ids (compared as text: 7 matches "7")
    direction: Optional[str] = None  #: only ``c2s`` or ``s2c``

    def __post_init__(self) -> None:
        if self.start_s is not None and self.end_s is not None and self.end_s <= self.start_s:
            raise ValueError(f"end {self.end_s:g} s is not after start {self.start_s:g} s: the selection is empty")
        if self.direction is not None and self.direction not in DIRECTIONS:
            raise ValueError(f"direction {self.direction!r} is none of {', '.join(DIRECTIONS)}")

    @property
    def given(self) -> bool:
        """Whether any criterion is set (a selection of none keeps every call)."""
        return any(getattr(self, f.name) is not None for f in fields(self))

    def __call__(self, calls: Iterable[Call]) -> Iterator[Call]:
        """The calls of ``calls`` that match every criterion, in their order, streaming."""
        method_ok = (None if self.methods is None and not self.exclude_methods
                     else MethodFilter(self.methods, self.exclude_methods))
        conns = None if self.conns is None else {str(c) for c in self.conns}
        direction = self.direction
        start_ns = None if self.start_s is None else round(self.start_s * 1e9)
        end_ns = None if self.end_s is None else round(self.end_s * 1e9)
        t0 = None
        for call in calls:
            if t0 is None:
                t0 = call.t
            if start_ns is not None and call.t - t0 < start_ns:
                continue
            if end_ns is not None and call.t - t0 >= end_ns:
                continue
            if direction is not None and call.dir != direction:
                continue
            if conns is not None and str(call.conn) not in conns:
                continue
            if method_ok is not None and not method_ok(call.method):
                continue
            yield call
