"""The ``captured`` row (``codecs/captured.py``): a run on a trace imported from a packet capture measures what
the server sends today beside every codec, and this module says when and with which settings (docs/capture.md)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from rpc_capture import trace_header

from . import protobuf
from .errors import BenchError
from .registry import Registry

if TYPE_CHECKING:  # config.py builds its registries with use_capture
    from .config import RunConfig

CAPTURED = "captured"  #: the row's codec id
CAPTURE_KEY = "capture"  #: the trace header's key an imported trace keeps its capture's facts under


def capture_of(trace: str) -> Optional[Dict[str, Any]]:
    """The ``capture`` facts of an imported trace's header (None: not imported from a capture)."""
    capture = trace_header(trace).get(CAPTURE_KEY)
    return dict(capture) if isinstance(capture, Mapping) else None


def with_capture(config: "RunConfig") -> "RunConfig":
    """The run with the ``captured`` row first when its (first) trace was imported from a capture."""
    capture = config.capture if config.capture is not None else capture_of(config.trace)
    if capture is None:
        return config
    codecs = config.codecs if CAPTURED in config.codecs else (CAPTURED, *config.codecs)
    return dataclasses.replace(config, capture=capture, codecs=codecs)


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
    inflater = registry.compressors["zlibstream"]() if capture.get("deflate") else None  # RFC 7692's raw deflate
    registry.codec_options = {**registry.codec_options, CAPTURED: {
        "capture": capture, "game": registry.create(decode), "read": read, "inflater": inflater}}
