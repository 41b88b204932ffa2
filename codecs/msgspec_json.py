"""``msgspec-json``: JSON through msgspec's C encoder and decoder (untyped: any value)."""

import msgspec

from rpc_capture import Call
from rpcbench.codec import JSON_CHANGES, Codec, Received
from rpcbench.fidelity import NON_FINITE


class MsgspecJson(Codec):
    """``{"method": m, "args": a}`` as compact UTF-8 JSON with ``msgspec.json``; bytes as base64 text.

    msgspec writes standard JSON only: NaN and infinities become ``null``; ints of any size
    go through as JSON numbers.
    """

    id = "msgspec-json"
    library = "msgspec"
    changes = {**JSON_CHANGES, NON_FINITE: "nan/inf -> null"}

    def __init__(self) -> None:
        self._encode = msgspec.json.Encoder().encode
        self._decode = msgspec.json.Decoder().decode

    def encode(self, call: Call) -> bytes:
        return self._encode({"method": call.method, "args": call.args})

    def decode(self, data: bytes) -> Received:
        obj = self._decode(data)
        return obj["method"], obj["args"]
