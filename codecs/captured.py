"""``captured``: the bytes the game server sends today, as a packet capture recorded them (docs/capture.md).

A trace imported from a capture (``run_bench.py import``) keeps each call's payload as captured
(``Call.wire``); a run on it measures this row first and compares every codec with it by default.
"""

from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from rpc_capture import Call
from rpcbench.codec import Codec, Compressor, Received
from rpcbench.errors import BenchError


class Captured(Codec):
    """Encode gives the call's captured payload (``call.wire``), byte for byte; decode reads a captured payload
    with the codec the game uses (the capture's ``decode``), after inflating it where the capture had
    permessage-deflate (one stream per connection and direction: the compression context carries over from
    message to message, so it needs ordered delivery, as the game's own link had).

    Not timed: its encode hands back recorded bytes (no work), and a permessage-deflate capture decodes only
    whole streams, not the timing's sample of calls. Its bytes and fidelity are the figures; the CPU of
    today's format is the game codec's own row (``json``...), which the run measures as usual.
    """

    id = "captured"
    timed = False

    def __init__(self, capture: Optional[Mapping[str, Any]] = None, game: Optional[Codec] = None,
                 read: Optional[Callable[[bytes], Received]] = None, inflater: Optional[Compressor] = None) -> None:
        """``capture``: the trace header's capture facts; ``game``: the codec it was decoded with; ``read``: a
        message to ``(method, args)`` as the import read it; ``inflater``: a deflate stream (permessage-deflate)."""
        if capture is None or game is None or read is None:
            raise BenchError("captured: this trace was not imported from a packet capture (run_bench.py import "
                             "makes one; docs/capture.md)")
        self.decode_with = game.name
        self.method_field = str(capture.get("method_field", "method"))
        self.args_field = str(capture.get("args_field", "args"))
        self.deflate = inflater is not None
        self.per_connection = self.ordered_delivery = self.deflate  # type: ignore[misc]
        self.changes = game.changes  # type: ignore[misc]
        self.library = game.library  # type: ignore[misc]
        self._capture, self._game, self._read, self._inflater = capture, game, read, inflater

    def encode(self, call: Call) -> bytes:
        wire = call.wire
        if wire is None:
            raise ValueError("this call has no captured bytes")
        return wire

    def decode(self, data: bytes) -> Received:
        if self._inflater is not None:
            data = self._inflater.decompress(data)
        return self._read(data)

    def connection(self) -> "Captured":
        if self._inflater is None:
            return self
        return Captured(self._capture, self._game, self._read, self._inflater.connection())

    def state_bytes(self) -> int:
        """The game codec's, plus the deflate contexts of a permessage-deflate link (both ends)."""
        return self._game.state_bytes() + (self._inflater.state_bytes() if self._inflater is not None else 0)

    def libraries(self) -> Tuple[str, ...]:
        return self._game.libraries()

    def config(self) -> Dict[str, Any]:
        return {"decode_with": self.decode_with, "method_field": self.method_field, "args_field": self.args_field,
                "deflate": self.deflate}
