"""``ujson``: UltraJSON with the same choices as ``json`` (compact, UTF-8, bytes as base64)."""

import ujson

from rpc_capture import Call
from rpcbench.codec import Codec, JSON_CHANGES, Received, bytes_to_base64


class Ujson(Codec):
    """ujson has no hook for bytes, so the args of methods that carry bytes are converted first.

    ujson raises TypeError on bytes (``reject_bytes`` is on by default). The first call of a
    method that carries bytes fails and is retried with them converted to base64; from
    then on that method's calls are converted up front (one set look-up per call decides),
    as a server that knows which of its messages carry bytes would do, instead of paying
    a failed encode on each of them. The bytes written are the same either way.
    """

    id = "ujson"
    library = "ujson"
    changes = JSON_CHANGES

    def __init__(self) -> None:
        self.ensure_ascii = False
        self.escape_forward_slashes = False
        self._bytes_methods: set = set()  # methods seen carrying bytes

    def encode(self, call: Call) -> bytes:
        method, args = call.method, call.args
        if method in self._bytes_methods:
            args = bytes_to_base64(args)
        try:
            text = ujson.dumps({"method": method, "args": args}, ensure_ascii=False, escape_forward_slashes=False)
        except TypeError:
            if args is not call.args:
                raise
            self._bytes_methods.add(method)
            text = ujson.dumps({"method": method, "args": bytes_to_base64(args)},
                               ensure_ascii=False, escape_forward_slashes=False)
        return text.encode("utf-8")

    def decode(self, data: bytes) -> Received:
        obj = ujson.loads(data)
        return obj["method"], obj["args"]
