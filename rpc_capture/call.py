"""The one record type everything in rpcbench passes around: a recorded RPC call."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Union

C2S = "c2s"  #: client to server
S2C = "s2c"  #: server to client
DIRECTIONS = (C2S, S2C)

ConnId = Union[int, str]


class Call(NamedTuple):
    """One RPC call as recorded: what was called, with what, when, which way, on which connection.

    Only ``method`` and ``args`` travel on the wire; ``t``, ``dir`` and ``conn`` are
    transport context kept by the trace (codecs see them, e.g. to keep one compression
    stream per connection, but a decoded call carries the defaults). ``wire`` is set only
    in traces imported from a packet capture: the payload bytes the game really sent.
    """

    method: str
    args: Any
    t: int = 0  #: wall-clock time of the call in integer nanoseconds since the epoch
    dir: str = C2S  #: ``"c2s"`` or ``"s2c"``
    conn: ConnId = 0  #: connection id, int or str
    wire: Optional[bytes] = None  #: the payload as captured (compressed if the link compressed it), or None
