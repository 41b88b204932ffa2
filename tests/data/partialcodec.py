"""``partial``: a plugin codec that can send only the methods named in CARRIES and declares the failure to send
any other (``method``), as a schema codec whose schemas miss most methods does. On the calls it carries it is
small and fast (a one-byte method tag + MessagePack of the args), so only the coverage rule keeps it from winning:
tests/test_coverage.py writes copies with other CARRIES (:func:`write_build`).
"""

import re
from pathlib import Path
from typing import Sequence

import msgpack

from rpc_capture import Call
from rpcbench.codec import Codec, Received
from rpcbench.fidelity import METHOD, TUPLES, Limit

CARRIES = ("ping",)


class Partial(Codec):
    """A tag byte (the method's index in CARRIES), then the args packed by MessagePack."""

    id = "partial"
    library = "msgpack"
    changes = {TUPLES: "tuple -> list", METHOD: "only the methods in CARRIES can be sent"}

    def __init__(self) -> None:
        self._tags = {method: bytes([i]) for i, method in enumerate(CARRIES)}
        self._pack = msgpack.Packer(use_bin_type=True, autoreset=True).pack

    def encode(self, call: Call) -> bytes:
        tag = self._tags.get(call.method)
        if tag is None:
            raise Limit(METHOD, "method", f"no message for method {call.method!r}")
        return tag + self._pack(call.args)

    def decode(self, data: bytes) -> Received:
        return CARRIES[data[0]], msgpack.unpackb(data[1:], strict_map_key=False)


def write_build(folder: Path, carries: Sequence[str]) -> Path:
    """A copy of this plugin carrying ``carries``, as ``folder/partialcodec.py`` (``folder`` is created)."""
    text = Path(__file__).read_text(encoding="utf-8")
    text, found = re.subn(r"^CARRIES = .*$", f"CARRIES = {tuple(carries)!r}", text, count=1, flags=re.M)
    assert found, "partialcodec.py has no CARRIES line"
    folder.mkdir(parents=True)
    (folder / "partialcodec.py").write_text(text, encoding="utf-8")
    return folder / "partialcodec.py"
