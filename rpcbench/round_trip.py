"""One call through one codec (:func:`round_trip`): encode, exact bytes, decode, compare with the original,
catching whatever the codec raises; the outcome is what the size pass counts (:class:`Outcome`)."""

from __future__ import annotations

import time
from typing import Any, NamedTuple, Optional, Tuple

from rpc_capture import Call

from .codec import Codec, received_call
from .fidelity import OTHER, PRECISION, QUANTIZED, Limit, compare, features_of


CallProblem = Tuple[str, str, bool, str, str]  #: an outcome's problem: kind, feature, declared, path, detail


class Outcome(NamedTuple):
    """One call through one codec: wire bytes (None if encoding failed), the problem if any, and its cost."""

    data: Optional[bytes]
    problem: Optional[CallProblem]  #: kind, feature, declared, path, detail
    ns: int  #: encode + decode time, for planning the timing phase
    lossy: Tuple[Tuple[str, float, float], ...] = ()  #: (field path, error, step) of values back within their step


def round_trip(codec: Codec, call: Call, declared: frozenset) -> Outcome:
    """Encode, decode and compare one call, catching whatever the codec raises."""
    timer = time.perf_counter_ns
    t0 = timer()
    try:
        data = codec.encode(call)
    except Exception as e:
        return encode_failed(call, e, declared, timer() - t0)
    if type(data) is not bytes:
        return encode_failed(call, not_bytes(data), declared, timer() - t0)
    try:
        decoded = codec.decode(data)
    except Exception as e:
        return Outcome(data, ("decode", OTHER, False, "", error_text(e)), timer() - t0)
    return judged(codec, call, data, decoded, timer() - t0, declared)


def not_bytes(data: Any) -> TypeError:
    return TypeError(f"encode returned {type(data).__name__}, not bytes")


def encode_failed(call: Call, e: BaseException, declared: frozenset, ns: int) -> Outcome:
    """The outcome of a call the codec failed to encode, under the limit it named or the declared feature found."""
    if isinstance(e, Limit):  # the codec named the limit it hit
        return Outcome(None, ("encode", e.feature, e.feature in declared, e.path, error_text(e)), ns)
    found = sorted(features_of(call.args) & declared)
    return Outcome(None, ("encode", found[0] if found else OTHER, bool(found), "", error_text(e)), ns)


def judged(codec: Codec, call: Call, data: bytes, decoded: Any, ns: int, declared: frozenset,
           differs: bool = False) -> Outcome:
    """The outcome of ``call``, whose bytes ``data`` decoded to ``decoded``: the same call back, or its problem
    (``differs``: the caller found them not the same already, see :func:`rpcbench.fidelity.compare`)."""
    try:
        back = received_call(decoded)
    except Exception as e:
        return Outcome(data, ("decode", OTHER, False, "", error_text(e)), ns)
    try:
        back, lossy, beyond = codec.within_steps(call, back)
        if beyond:
            return Outcome(data, ("mismatch", PRECISION, False, *beyond), ns, lossy)
        diff = compare(call, back, declared, differs)
    except Exception as e:  # a decoded value no comparison copes with (a plugin's odd type): the codec's failure
        return Outcome(data, ("mismatch", OTHER, False, "", f"cannot compare the decoded call: {error_text(e)}"), ns)
    if diff:
        return Outcome(data, ("mismatch", diff.feature, diff.feature in declared, diff.path, diff.detail), ns, lossy)
    if lossy:
        path, error, step = lossy[0]
        return Outcome(data, ("mismatch", QUANTIZED, QUANTIZED in declared, path,
                              f"{len(lossy)} values within their step (first: off by {error:.3g}, step {step:g})"), ns,
                       lossy)
    return Outcome(data, None, ns)


def compressed(compressor: Any, base: Outcome) -> Outcome:
    """The outcome of ``inner+compressor`` from the inner codec's outcome: compress, decompress, same bytes?"""
    if base.data is None:
        return base
    timer = time.perf_counter_ns
    t0 = timer()
    packed, problem = compress_checked(compressor, base.data)
    ns = base.ns + timer() - t0
    return base._replace(data=packed, ns=ns) if problem is None else Outcome(packed, problem, ns)


def compress_checked(compressor: Any, data: bytes) -> Tuple[Optional[bytes], Optional[CallProblem]]:
    """``data`` compressed, then decompressed by ``compressor``: (the compressed bytes, None) when it gave
    ``data`` back; else what went wrong: (None, the encode problem) or (the compressed bytes, the decode problem)."""
    try:
        packed = compressor.compress(data)
        if type(packed) is not bytes:
            raise TypeError(f"compress returned {type(packed).__name__}, not bytes")
    except Exception as e:
        return None, ("encode", OTHER, False, "", error_text(e))
    try:
        same = compressor.decompress(packed) == data
    except Exception as e:
        return packed, ("decode", OTHER, False, "", error_text(e))
    return packed, None if same else ("decode", OTHER, False, "", "decompressed bytes differ from the compressed ones")


def error_text(e: BaseException, limit: int = 160) -> str:
    """What a codec raised, on one line of at most ``limit`` characters."""
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
