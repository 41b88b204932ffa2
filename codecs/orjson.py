"""``orjson``: the Rust-backed JSON library; compact UTF-8 like ``json``, bytes as base64."""

import base64

import orjson

from rpc_capture import Call
from rpcbench.codec import Codec
from rpcbench.fidelity import BIG_INTS, BYTES, INT_KEYS, NON_FINITE, SURROGATES, TUPLES


def _base64(value):
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class Orjson(Codec):
    """``{"method": m, "args": a}`` with ``orjson.dumps`` (``OPT_NON_STR_KEYS`` so int keys work).

    orjson writes standard JSON only: NaN and infinities become ``null``, and ints must
    fit in 64 bits (signed or unsigned).
    """

    id = "orjson"
    library = "orjson"
    changes = {
        BYTES: "bytes -> base64 str",
        INT_KEYS: "int key -> str key",
        TUPLES: "tuple -> list",
        NON_FINITE: "nan/inf -> null",
        BIG_INTS: "fails to encode (over 64 bits)",
        SURROGATES: "fails to encode (not valid UTF-8)",
    }

    def __init__(self) -> None:
        self.option = "OPT_NON_STR_KEYS"
        self._option = orjson.OPT_NON_STR_KEYS

    def encode(self, call: Call) -> bytes:
        return orjson.dumps({"method": call.method, "args": call.args}, default=_base64, option=self._option)

    def decode(self, data: bytes) -> Call:
        obj = orjson.loads(data)
        return Call(obj["method"], obj["args"])
