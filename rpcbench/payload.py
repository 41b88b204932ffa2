"""A game message's bytes to ``(method, args)`` with the codec the game uses, wherever the method and args sit in
it: what ``run_bench.py import`` and the ``captured`` row both read a captured payload with (docs/capture.md)."""

from __future__ import annotations

import json
from typing import Any, Callable, Dict

from .codec import Codec, Received
from .errors import BenchError

ENVELOPE = ("method", "args")  #: the keys of the codecs' own envelope, ``{"method": m, "args": a}``

#: how a self-describing format reads a whole message, for messages whose method and args sit under other keys
#: than the envelope's (``--method-field``/``--args-field``); the envelope itself goes through the codec's decode
LOADS: Dict[str, Callable[[bytes], Any]] = {"json": json.loads}
try:
    import msgpack

    LOADS["msgpack"] = lambda data: msgpack.unpackb(data, raw=False, strict_map_key=False)
except ImportError:  # msgpack messages then need the envelope keys
    pass


def message_reader(game: Codec, method_field: str = ENVELOPE[0], args_field: str = ENVELOPE[1]
                   ) -> Callable[[bytes], Received]:
    """What turns one message of the game into ``(method, args)``: ``game``'s decode for the envelope, else the
    format's reader and the two keys (a message without ``args_field`` has args None). BenchError (one line)
    for keys other than the envelope's in a format with no reader here."""
    if (method_field, args_field) == ENVELOPE:
        return game.decode
    loads = LOADS.get(game.base.id)
    if loads is None:
        raise BenchError(f"method and args under {method_field!r}/{args_field!r} can be read from "
                         f"{', '.join(sorted(LOADS))} messages, not {game.name}")

    def read(data: bytes) -> Received:
        message = loads(data)
        return message[method_field], message.get(args_field)
    return read
