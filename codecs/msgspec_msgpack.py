"""``msgspec``: MessagePack through msgspec's C encoder and decoder (untyped: any value)."""

import msgspec

from rpc_capture import Call
from rpcbench.codec import Codec, Received
from rpcbench.fidelity import BIG_INTS, SURROGATES, TUPLES


class MsgspecMsgpack(Codec):
    """``{"method": m, "args": a}`` as MessagePack with ``msgspec.msgpack``; encoder and decoder built once."""

    id = "msgspec"
    library = "msgspec"
    changes = {
        TUPLES: "tuple -> list",
        BIG_INTS: "fails to encode (over 64 bits)",
        SURROGATES: "fails to encode (not valid UTF-8)",
    }

    def __init__(self) -> None:
        self._encode = msgspec.msgpack.Encoder().encode
        self._decode = msgspec.msgpack.Decoder().decode

    def encode(self, call: Call) -> bytes:
        return self._encode({"method": call.method, "args": call.args})

    def decode(self, data: bytes) -> Received:
        obj = self._decode(data)
        return obj["method"], obj["args"]
