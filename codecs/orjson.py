"""``orjson``: the Rust-backed JSON library; compact UTF-8 like ``json``, bytes as base64."""

import orjson

from rpc_capture import Call
from rpcbench.codec import Codec, JSON_CHANGES, Received, base64_default
from rpcbench.fidelity import BIG_INTS, NON_FINITE


class Orjson(Codec):
    """``{"method": m, "args": a}`` with ``orjson.dumps`` (``OPT_NON_STR_KEYS`` so int keys work).

    orjson writes standard JSON only: NaN and infinities become ``null``, and ints must
    fit in 64 bits (signed or unsigned).
    """

    id = "orjson"
    library = "orjson"
    changes = {**JSON_CHANGES, NON_FINITE: "nan/inf -> null", BIG_INTS: "fails to encode (over 64 bits)"}

    def __init__(self) -> None:
        self.option = "OPT_NON_STR_KEYS"
        self._option = orjson.OPT_NON_STR_KEYS

    def encode(self, call: Call) -> bytes:
        return orjson.dumps({"method": call.method, "args": call.args}, default=base64_default, option=self._option)

    def decode(self, data: bytes) -> Received:
        obj = orjson.loads(data)
        return obj["method"], obj["args"]
