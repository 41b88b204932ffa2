"""Calls as lines of text: a readable line per call, or its JSON Lines line (``trace cat``)."""

from __future__ import annotations

import reprlib
from typing import Any, Iterable, Iterator, Optional

from .call import Call
from .jsonl import json_line
from .trace import TraceError

_DEEP_REPR = reprlib.Repr()  #: for args nested deeper than repr() can go: the outer 100 levels
_DEEP_REPR.maxlevel, _DEEP_REPR.maxstring, _DEEP_REPR.maxother = 100, 10_000, 10_000
_DEEP_REPR.maxlist = _DEEP_REPR.maxtuple = _DEEP_REPR.maxdict = _DEEP_REPR.maxset = _DEEP_REPR.maxfrozenset = 10_000


def args_text(value: Any) -> str:
    """``repr`` of a call's args; args nested too deeply for ``repr`` show their outer 100 levels."""
    try:
        return repr(value)
    except RecursionError:
        return _DEEP_REPR.repr(value)


def call_text(call: Call, t0: int) -> str:
    """One readable line (with newline): seconds since ``t0``, direction, connection, method, args."""
    return f"{(call.t - t0) / 1e9:>12.6f}  {call.dir}  {str(call.conn):>8}  {call.method}  {args_text(call.args)}\n"


def jsonl_text(call: Call, source: str, n: int) -> str:
    """The JSON Lines line of the ``n``-th call (0-based) read from ``source``; TraceError if it has none."""
    try:
        return json_line(call)
    except (TypeError, ValueError) as e:
        raise TraceError(f"{source}: call {n + 1} ({call.method!r}) has no JSON Lines form: {e}") from None


def call_lines(calls: Iterable[Call], source: str, jsonl: bool = False) -> Iterator[str]:
    """Each call of ``calls`` (read from ``source``) as a line: readable, timed from the first, or JSON Lines."""
    t0: Optional[int] = None
    for n, call in enumerate(calls):
        if jsonl:
            yield jsonl_text(call, source, n)
            continue
        if t0 is None:
            t0 = call.t
        yield call_text(call, t0)
