"""``msgpack``: MessagePack, the compact binary JSON; bytes and int keys travel as they are."""

import msgpack

from rpc_capture import Call
from rpcbench.codec import Codec, Received
from rpcbench.fidelity import BIG_INTS, SURROGATES, TUPLES


class Msgpack(Codec):
    """``{"method": m, "args": a}`` packed with ``use_bin_type=True`` (str and bytes stay distinct).

    Unpacked with ``strict_map_key=False`` so int keys come back as ints. The packer and
    unpacker options are fixed once, as a server would.
    """

    id = "msgpack"
    library = "msgpack"
    changes = {
        TUPLES: "tuple -> list",
        BIG_INTS: "fails to encode (over 64 bits)",
        SURROGATES: "fails to encode (not valid UTF-8)",
    }

    def __init__(self) -> None:
        self.use_bin_type = True
        self.strict_map_key = False
        self._packer = msgpack.Packer(use_bin_type=True, autoreset=True)
        self._unpackb = msgpack.unpackb  # raw=False is the default: not restated per call

    def encode(self, call: Call) -> bytes:
        return self._packer.pack({"method": call.method, "args": call.args})

    def decode(self, data: bytes) -> Received:
        obj = self._unpackb(data, strict_map_key=False)
        return obj["method"], obj["args"]
