"""``jsonbuild``: compact JSON like the built-in ``json``, standing for "the build under test" in
tests/test_compare.py and bench/compare_gate.py, which make slower or wider builds of it with
:func:`write_build`: a copy of this file with other values of the two settings below.

EXTRA_CPU: extra busy time per call, as a fraction of the call's own work (0.25: each encode
and decode spins for a quarter of the time it took, 14 to 20 % of what the harness measures
per call on the bundled sample once its own loop overhead is counted). EXTRA_ENCODE_NS: a further busy
wait of that many ns in every encode (2000: "2 µs slower per encode", the change bench/compare_gate.py
plants). SEPARATORS: as ``json.dumps`` takes them.
"""

import json
import re
import time
from pathlib import Path
from typing import Tuple

from rpc_capture import Call
from rpcbench.codec import JSON_CHANGES, Codec, Received, base64_default

EXTRA_CPU = 0.0
EXTRA_ENCODE_NS = 0
SEPARATORS = (",", ":")


def _burn(start: int, extra_ns: int = 0) -> None:
    """Spin until the time since ``start`` has grown by EXTRA_CPU of itself, and ``extra_ns`` more."""
    end = start + (time.perf_counter_ns() - start) * (1 + EXTRA_CPU) + extra_ns
    while time.perf_counter_ns() < end:
        pass


class JsonBuild(Codec):
    """``{"method": m, "args": a}`` as JSON with SEPARATORS, UTF-8, bytes as base64 text."""

    id = "jsonbuild"
    changes = JSON_CHANGES

    def __init__(self) -> None:
        self._encode = json.JSONEncoder(separators=SEPARATORS, ensure_ascii=False, default=base64_default).encode
        self._decode = json.JSONDecoder().decode

    def encode(self, call: Call) -> bytes:
        start = time.perf_counter_ns()
        data = self._encode({"method": call.method, "args": call.args}).encode("utf-8")
        _burn(start, EXTRA_ENCODE_NS)
        return data

    def decode(self, data: bytes) -> Received:
        start = time.perf_counter_ns()
        obj = self._decode(data.decode("utf-8"))
        _burn(start)
        return obj["method"], obj["args"]


def write_build(folder: Path, extra_cpu: float, separators: Tuple[str, str], extra_encode_ns: int = 0) -> Path:
    """A copy of this plugin with these settings, as ``folder/jsonbuild.py`` (``folder`` is created)."""
    text = Path(__file__).read_text(encoding="utf-8")
    for name, value in (("EXTRA_CPU", extra_cpu), ("SEPARATORS", separators), ("EXTRA_ENCODE_NS", extra_encode_ns)):
        text, found = re.subn(rf"^{name} = .*$", f"{name} = {value!r}", text, count=1, flags=re.M)
        assert found, f"jsonbuild.py has no {name} line"
    folder.mkdir(parents=True)
    (folder / "jsonbuild.py").write_text(text, encoding="utf-8")
    return folder / "jsonbuild.py"
