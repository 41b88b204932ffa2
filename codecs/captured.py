"""``captured``: the bytes the game server sends today, as a packet capture recorded them (docs/capture.md).

A trace imported from a capture (``run_bench.py import``) keeps each call's payload as captured
(``Call.wire``); a run on it measures this row first and compares every codec with it by default.
"""

from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from rpc_capture import Call
from rpcbench.captured import SERVER_DEFLATE
from rpcbench.codec import Codec, Compressed, Compressor, Received
from rpcbench.errors import BenchError


class Captured(Codec):
    """Encode gives the call's captured payload (``call.wire``), byte for byte; decode reads a captured payload
    with the codec the game uses (the capture's ``decode``), after inflating it where the capture had
    permessage-deflate (one stream per connection and direction: the compression context carries over from
    message to message, so it needs ordered delivery, as the game's own link had).

    Its CPU is what the server does today (:meth:`timed_work`): the game's codec encoding each call of the timing
    sample and decoding it back, behind a raw deflate stream per connection and direction where the capture had
    permessage-deflate (at the zlib level and window that give back the captured bytes, when one does:
    :func:`rpcbench.captured.server_deflate`), run over the sample in order as any ``+zlibstream`` codec. Its own
    encode hands back recorded bytes, and the sample's captured messages cannot be inflated out of their stream.
    """

    id = "captured"

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
        settings = capture.get(SERVER_DEFLATE) or {}
        self.deflate_level = settings.get("level") if self.deflate else None  #: the level timed
        self.deflate_window_bits = settings.get("window_bits") if self.deflate else None
        #: the levels that gave back the server's first messages byte for byte ([]: none did, the level is a guess)
        self.deflate_levels_reproduced = list(settings.get("reproduced", [])) if self.deflate else None
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

    def pass_over(self, call: Call) -> None:
        """Inflate a message the run does not measure: the next ones of its stream refer to it."""
        if self._inflater is not None and call.wire is not None:
            self._inflater.decompress(call.wire)

    def timed_work(self) -> Codec:
        """The game's codec, behind a deflate stream of the captured level and window for permessage-deflate."""
        return self._game if self._inflater is None else Compressed(self._game, self._inflater.connection())

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
                "deflate": self.deflate, "timed_as": self.timed_work().name, "deflate_level": self.deflate_level,
                "deflate_window_bits": self.deflate_window_bits,
                "deflate_levels_reproduced": self.deflate_levels_reproduced}
