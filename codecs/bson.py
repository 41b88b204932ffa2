"""``bson``: MongoDB's BSON through pymongo's ``bson`` module (its C extension when built)."""

import bson

from rpc_capture import Call
from rpcbench.codec import Codec, Received
from rpcbench.fidelity import BIG_INTS, INT_KEYS, NUL_KEYS, SURROGATES, TUPLES, UINT64


class Bson(Codec):
    """``{"method": m, "args": a}`` as one BSON document; bytes travel as binary subtype 0.

    BSON documents need str keys without NUL and ints that fit in 64 signed bits; anything else
    fails to encode. Arrays come back as lists.
    """

    id = "bson"
    library = "pymongo"
    changes = {
        TUPLES: "tuple -> list",
        INT_KEYS: "fails to encode (BSON keys are strings)",
        UINT64: "fails to encode (BSON ints are signed 64-bit)",
        BIG_INTS: "fails to encode (BSON ints are signed 64-bit)",
        SURROGATES: "fails to encode (not valid UTF-8)",
        NUL_KEYS: "fails to encode (keys are C strings)",
    }

    def __init__(self) -> None:
        self.c_extension = bson.has_c()

    def encode(self, call: Call) -> bytes:
        return bson.encode({"method": call.method, "args": call.args})

    def decode(self, data: bytes) -> Received:
        doc = bson.decode(data)
        return doc["method"], doc["args"]
