"""The one record type everything in rpcbench passes around: a recorded RPC call."""

from __future__ import annotations

from typing import Any, Dict, Iterable, NamedTuple, Optional, Union

C2S = "c2s"  #: client to server
S2C = "s2c"  #: server to client
DIRECTIONS = (C2S, S2C)

ConnId = Union[int, str]
FIELDS = ("method", "args", "t", "dir", "conn", "wire")


class _Recorded(NamedTuple):
    method: str
    args: Any
    t: int = 0  #: wall-clock time of the call in integer nanoseconds since the epoch
    dir: str = C2S  #: ``"c2s"`` or ``"s2c"``
    conn: ConnId = 0  #: connection id, int or str


class Call(_Recorded):
    """One RPC call as recorded: what was called, with what, when, which way, on which connection.

    Only ``method`` and ``args`` travel on the wire; ``t``, ``dir`` and ``conn`` are
    transport context kept by the trace (codecs see them, e.g. to keep one compression
    stream per connection, but a decoded call carries the defaults). ``wire``, the sixth
    field, is set only in traces imported from a packet capture: the payload bytes the game
    really sent (compressed where the link compressed it).

    A call without ``wire`` is a 5-tuple, one with it a 6-tuple: as the trace stores them,
    so a reader builds either straight from the tuple it read (``tuple.__new__(Call, item)``,
    in C), and code that unpacks a recorded call into five names keeps working.
    """

    __slots__ = ()
    _fields = FIELDS  # type: ignore[assignment]

    def __new__(cls, method: str, args: Any, t: int = 0, dir: str = C2S, conn: ConnId = 0,
                wire: Optional[bytes] = None) -> "Call":
        items = (method, args, t, dir, conn) if wire is None else (method, args, t, dir, conn, wire)
        return tuple.__new__(cls, items)

    @property
    def wire(self) -> Optional[bytes]:
        """The payload as captured, or None (a call recorded in the server, or decoded by a codec)."""
        return self[5] if len(self) > 5 else None

    @classmethod
    def _make(cls, iterable: Iterable[Any]) -> "Call":  # type: ignore[override]
        return cls(*iterable)

    def _replace(self, **changes: Any) -> "Call":
        unknown = changes.keys() - set(FIELDS)
        if unknown:
            raise ValueError(f"Call has no field(s) {sorted(unknown)}")
        return Call(**{**self._asdict(), **changes})

    def _asdict(self) -> Dict[str, Any]:
        return dict(zip(FIELDS, (*self[:5], self.wire)))

    def __repr__(self) -> str:
        shown = FIELDS if len(self) > 5 else FIELDS[:5]
        return "Call(" + ", ".join(f"{name}={value!r}" for name, value in zip(shown, self)) + ")"
