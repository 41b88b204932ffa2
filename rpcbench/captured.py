"""The ``captured`` row (``codecs/captured.py``): a run on a trace imported from a packet capture measures what
the server sends today beside every codec, and this module says when and with which settings (docs/capture.md)."""

from __future__ import annotations

import dataclasses
import contextlib
import zlib
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional

from rpc_capture import S2C, open_trace, trace_header

from . import protobuf
from .codec import Compressor
from .errors import BenchError
from .registry import Registry

if TYPE_CHECKING:  # config.py builds its registries with use_capture
    from .config import RunConfig

CAPTURED = "captured"  #: the row's codec id
CAPTURE_KEY = "capture"  #: the trace header's key an imported trace keeps its capture's facts under
SERVER_DEFLATE = "server_deflate"  #: the capture facts' key for the deflate settings the row times (found at run time)
SEARCHED_MESSAGES = 50  #: the server's first messages the deflate settings must give back byte for byte
DEFAULT_LEVEL = 6  #: zlib's Z_DEFAULT_COMPRESSION: what wsproto and websockets compress with unless told otherwise


def capture_of(trace: str) -> Optional[Dict[str, Any]]:
    """The ``capture`` facts of an imported trace's header (None: not imported from a capture)."""
    capture = trace_header(trace).get(CAPTURE_KEY)
    return dict(capture) if isinstance(capture, Mapping) else None


def with_capture(config: "RunConfig") -> "RunConfig":
    """The run with the ``captured`` row first when its (first) trace was imported from a capture."""
    capture = config.capture if config.capture is not None else capture_of(config.trace)
    if capture is None:
        return config
    if capture.get("deflate") and SERVER_DEFLATE not in capture:
        capture = {**capture, SERVER_DEFLATE: server_deflate(config.trace)}
    codecs = config.codecs if CAPTURED in config.codecs else (CAPTURED, *config.codecs)
    return dataclasses.replace(config, capture=capture, codecs=codecs)


def server_deflate(trace: str) -> Dict[str, Any]:
    """The zlib level and window with which a raw deflate stream (sync flush, tail dropped: RFC 7692) gives back
    byte for byte the first messages the server sent on its first connection of ``trace`` (permessage-deflate):
    ``level`` (zlib's default 6 when it is among those that do, else the lowest), ``window_bits``, ``reproduced``
    (every level that does, at that window; empty: none does, and ``level`` 6 at 2**15 is the one timed) and
    ``messages`` compared."""
    wires: List[bytes] = []
    first: Any = None  #: the server's first connection
    with contextlib.closing(open_trace(trace)) as calls:
        for call in calls:
            if call.dir == S2C and call.wire is not None and (first is None or call.conn == first):
                first = call.conn
                wires.append(call.wire)
                if len(wires) == SEARCHED_MESSAGES:
                    break
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)
    try:
        payloads = [inflater.decompress(wire + b"\x00\x00\xff\xff") for wire in wires]
    except zlib.error:  # the capture started inside the stream: nothing to compare with
        payloads = []
    for window in range(zlib.MAX_WBITS, 8, -1) if payloads else ():
        levels = [level for level in range(10) if _deflated(payloads, level, window) == wires]
        if levels:
            return {"level": DEFAULT_LEVEL if DEFAULT_LEVEL in levels else levels[0], "window_bits": window,
                    "reproduced": levels, "messages": len(wires)}
    return {"level": DEFAULT_LEVEL, "window_bits": zlib.MAX_WBITS, "reproduced": [], "messages": len(wires)}


def _deflated(payloads: List[bytes], level: int, window: int) -> List[bytes]:
    """``payloads`` through one raw deflate stream, each message sync-flushed with its 4-byte tail dropped."""
    stream = zlib.compressobj(level, zlib.DEFLATED, -window)
    return [(stream.compress(p) + stream.flush(zlib.Z_SYNC_FLUSH))[:-4] for p in payloads]


def use_capture(registry: Registry, capture: Optional[Mapping[str, Any]], proto: protobuf.Settings) -> None:
    """``registry`` (in place) making the ``captured`` row for ``capture``: its messages read as the import read
    them (the capture's ``decode`` codec, fields and protobuf ``message``; ``proto``: the run's schemas) and,
    for permessage-deflate, inflated by a deflate stream per connection and direction."""
    if capture is None:
        return
    from .capture_import import Envelope, payload_decoder  # here: a run on any other trace does not load it

    decode = str(capture.get("decode") or "")
    if not decode:
        raise BenchError("captured: the trace's capture names no codec to decode with (its 'decode')")
    envelope = Envelope(str(capture.get("method_field", "method")), str(capture.get("args_field", "args")))
    message = capture.get("message")
    try:
        read = payload_decoder(decode, envelope, registry.create,
                               (proto.files, proto.include, str(message)) if message else None)
    except BenchError as e:
        raise BenchError(f"captured: {e}") from None
    deflate = capture.get(SERVER_DEFLATE) or {"level": DEFAULT_LEVEL, "window_bits": zlib.MAX_WBITS}
    #: RFC 7692's raw deflate, one stream per connection and direction (a compressor takes its options as keywords)
    stream: Callable[..., Compressor] = registry.compressors["zlibstream"]
    inflater = stream(deflate["level"], window_bits=deflate["window_bits"]) if capture.get("deflate") else None
    registry.codec_options = {**registry.codec_options, CAPTURED: {
        "capture": capture, "game": registry.create(decode), "read": read, "inflater": inflater}}
