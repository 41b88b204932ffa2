"""Checks for codec plugin authors: ``check_codec(MyCodec(), calls)`` in one line of a test.

It runs the same round trip and fidelity comparison as the benchmark's size pass
(:func:`rpcbench.round_trip.round_trip`), plus what the benchmark assumes without
checking on every call: that encoding is deterministic, that ``decode`` keeps the
``(method, args)`` contract, and that a per-connection (stream) codec works wherever
a connection's stream starts and however connections interleave.
"""

from __future__ import annotations

from typing import Any, Iterable, List

from rpc_capture import Call

from .codec import Codec
from .round_trip import round_trip

SPLITS = 8  #: stream start points tried for per-connection codecs


def check_codec(codec: Codec, calls: Iterable[Call]) -> None:
    """Raise AssertionError listing what is wrong with ``codec`` on ``calls`` (silent when all is well).

    * round trip: every call comes back equal, or differs / fails to encode only in a
      feature the codec declares in ``changes``;
    * ``decode`` returns a plain ``(method, args)`` tuple;
    * determinism: the same call (stream of calls) gives the same bytes twice;
    * per-connection codecs: a stream started at any of several points of ``calls``, and
      two connections interleaved call by call, still round trip; and the codec declares
      that it needs ordered delivery (``ordered_delivery``) or keeps its state by acks (``ack_baselines``).
    """
    calls = list(calls)
    if not calls:
        raise ValueError("check_codec needs at least one call")
    problems = _stream_problems(codec, calls, "in order")
    problems += _contract_problems(codec, calls[0])
    problems += _determinism_problems(codec, calls)
    if codec.per_connection:
        step = max(1, len(calls) // SPLITS)
        for start in range(step, len(calls), step):
            problems += _stream_problems(codec, calls[start:], f"stream started at call {start}")
        problems += _stream_problems(codec, calls, "two connections interleaved", connections=2)
        if not codec.ordered_delivery and not codec.ack_baselines:
            problems.append("keeps state per connection but does not declare ordered_delivery = True "
                            "(nor ack_baselines)")
    if problems:
        shown = "\n  ".join(problems[:10])
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise AssertionError(f"codec {codec.name}: {len(problems)} problem(s):\n  {shown}{more}")


def _stream_problems(codec: Codec, calls: List[Call], how: str, connections: int = 1) -> List[str]:
    """Round trip of ``calls`` in order, dealt in turn to ``connections`` (each a sender and a receiver)."""
    pairs = [_Pair(codec.connection(), codec.connection()) for _ in range(connections)]
    declared = frozenset(codec.changes)
    out = []
    for index, call in enumerate(calls):
        outcome = round_trip(pairs[index % connections], call, declared)
        if outcome.problem and not outcome.problem[2]:
            kind, feature, _, path, detail = outcome.problem
            out.append(f"{how}, call {index} ({call.method}): undeclared {kind} ({feature}) {path} {detail}".strip())
    return out


def _contract_problems(codec: Codec, call: Call) -> List[str]:
    session = codec.connection()
    try:
        decoded = session.decode(session.encode(call))
    except Exception:
        return []  # reported by the round trip
    if type(decoded) is not tuple or len(decoded) != 2:
        return [f"decode returned {type(decoded).__name__}, not a (method, args) tuple (rpcbench.codec.Codec)"]
    return []


def _determinism_problems(codec: Codec, calls: List[Call]) -> List[str]:
    """Two fresh connections fed the same calls must write the same bytes."""
    first, second = codec.connection(), codec.connection()
    for index, call in enumerate(calls):
        try:
            a, b = first.encode(call), second.encode(call)
        except Exception:
            return []  # encode failures are the round trip's business
        if a != b:
            return [f"not deterministic: call {index} ({call.method}) encoded to {a[:24]!r}... then {b[:24]!r}..."]
    return []


class _Pair(Codec):
    """A sender and a receiver of one connection seen as one codec (encode on one, decode on the other)."""

    def __init__(self, sender: Codec, receiver: Codec) -> None:
        self._sender, self._receiver = sender, receiver

    def encode(self, call: Call) -> bytes:
        return self._sender.encode(call)

    def decode(self, data: bytes) -> Any:
        return self._receiver.decode(data)
