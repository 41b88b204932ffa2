"""``json``: the standard library's json, compact, UTF-8, bytes as base64 text."""

import json

from rpc_capture import Call
from rpcbench.codec import Codec, JSON_CHANGES, Received, base64_default


class Json(Codec):
    """``{"method": m, "args": a}`` as compact JSON (``separators=(",", ":")``, no ASCII escaping).

    The encoder and decoder objects are built once, as a server would, so the timing
    measures encoding rather than option parsing. NaN and infinities are written as the
    non-standard ``NaN``/``Infinity`` tokens that Python reads back.
    """

    id = "json"
    changes = JSON_CHANGES

    def __init__(self) -> None:
        self.separators = (",", ":")
        self.ensure_ascii = False
        self.sort_keys = False
        self._encode = json.JSONEncoder(
            separators=self.separators, ensure_ascii=self.ensure_ascii, sort_keys=self.sort_keys, default=base64_default
        ).encode
        self._decode = json.JSONDecoder().decode

    def encode(self, call: Call) -> bytes:
        return self._encode({"method": call.method, "args": call.args}).encode("utf-8")

    def decode(self, data: bytes) -> Received:
        obj = self._decode(data.decode("utf-8"))
        return obj["method"], obj["args"]
