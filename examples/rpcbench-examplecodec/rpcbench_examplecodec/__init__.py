"""An rpcbench codec plugin: each call as the compact JSON array ``[method, args]``.

The envelope ``{"method": ..., "args": ...}`` of the ``json`` codec spends 19 bytes per call
on its two key names; an array spends 2. Standard library only.
"""

import json

from rpc_capture import Call
from rpcbench.codec import JSON_CHANGES, Codec, Received, base64_default

__version__ = "0.1.0"


class ExampleCodec(Codec):
    """``[method, args]`` as compact UTF-8 JSON; bytes as base64 text (declared, as for ``json``)."""

    id = "examplecodec"
    changes = JSON_CHANGES  # what JSON cannot carry: tuples, bytes, int keys, lone surrogates

    def __init__(self) -> None:
        self._encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=base64_default).encode
        self._decode = json.JSONDecoder().decode

    def encode(self, call: Call) -> bytes:
        return self._encode([call.method, call.args]).encode("utf-8")

    def decode(self, data: bytes) -> Received:
        method, args = self._decode(data.decode("utf-8"))
        return method, args
