"""``ujson``: UltraJSON with the same choices as ``json`` (compact, UTF-8, bytes as base64)."""

import ujson

from rpc_capture import Call
from rpcbench.codec import JSON_CHANGES, Codec, bytes_to_base64


class Ujson(Codec):
    """ujson has no hook for bytes, so a call carrying bytes is retried with them converted.

    ``reject_bytes=True`` makes ujson raise on bytes instead of writing them as raw text;
    only those calls pay for the conversion, as a server using ujson would do it.
    """

    id = "ujson"
    library = "ujson"
    changes = JSON_CHANGES

    def __init__(self) -> None:
        self.ensure_ascii = False
        self.escape_forward_slashes = False

    def encode(self, call: Call) -> bytes:
        envelope = {"method": call.method, "args": call.args}
        try:
            text = ujson.dumps(envelope, ensure_ascii=False, escape_forward_slashes=False, reject_bytes=True)
        except TypeError:
            envelope["args"] = bytes_to_base64(call.args)
            text = ujson.dumps(envelope, ensure_ascii=False, escape_forward_slashes=False, reject_bytes=True)
        return text.encode("utf-8")

    def decode(self, data: bytes) -> Call:
        obj = ujson.loads(data)
        return Call(obj["method"], obj["args"])
