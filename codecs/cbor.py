"""``cbor``: CBOR (RFC 8949) with cbor2: binary, self-describing, bytes and int keys as they are."""

import cbor2

from rpc_capture import Call
from rpcbench.codec import Codec, Received
from rpcbench.fidelity import SURROGATES, TUPLES


class Cbor(Codec):
    """``{"method": m, "args": a}`` with ``cbor2.dumps`` / ``cbor2.loads``; ints beyond 64 bits as CBOR bignums."""

    id = "cbor"
    library = "cbor2"
    changes = {TUPLES: "tuple -> list", SURROGATES: "fails to encode (not valid UTF-8)"}

    def __init__(self) -> None:
        self._dumps = cbor2.dumps
        self._loads = cbor2.loads

    def encode(self, call: Call) -> bytes:
        return self._dumps({"method": call.method, "args": call.args})

    def decode(self, data: bytes) -> Received:
        obj = self._loads(data)
        return obj["method"], obj["args"]
