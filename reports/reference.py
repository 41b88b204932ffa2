"""The reference codec: the one every ratio is to (``x json``, ``enc/json``, the verdict's "the bytes of json",
``compare``'s CPU ratios). Chosen here and nowhere else."""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

from rpcbench.captured import CAPTURE_KEY, CAPTURED
from rpcbench.errors import BenchError
from rpcbench.results import CodecResult, Suite

DEFAULT_REFERENCE = "json"  #: the reference when nothing names another
BASELINE_KEY = "current_format"  #: trace header key naming the codec the server ships today (a codec id)


def choose_reference(results: Sequence[CodecResult], wanted: Sequence[Optional[str]],
                     usable: Callable[[CodecResult], bool]) -> Tuple[Optional[CodecResult], Optional[str]]:
    """The reference codec: the first of ``wanted`` (in order; None entries skipped) that is in ``results`` and
    ``usable``, else the first usable codec of ``results``; with the wanted name it matched (None: the fallback).
    (None, None) when no codec is usable."""
    by_name = {r.codec: r for r in results}
    for name in wanted:
        found = by_name.get(name) if name else None
        if found is not None and usable(found):
            return found, name
    return next((r for r in results if usable(r)), None), None


def baseline(suite: Suite, requested: Optional[str]) -> Tuple[Optional[CodecResult], str]:
    """The run's reference codec, the verdict's baseline, and where it came from: ``--baseline`` (BenchError if this
    run did not measure it), else the ``captured`` row on a trace imported from a packet capture (what the server
    sends today, byte for byte), else the trace's ``current_format`` metadata when it names a measured codec, else
    json, else the first codec measured."""
    if requested and not ((found := suite.find(requested)) is not None and found.sizes is not None):
        measured = ", ".join(r.codec for r in suite.results if r.sizes)
        raise BenchError(f"--baseline {requested[:60]}: not measured in this run (measured: {measured[:300]})")
    metadata = suite.trace.get("metadata") or {}
    captured = CAPTURED if metadata.get(CAPTURE_KEY) else None
    current = metadata.get(BASELINE_KEY)
    current = str(current) if current else None
    chosen, matched = choose_reference(suite.results, (requested, captured, current, DEFAULT_REFERENCE),
                                       lambda r: r.sizes is not None)
    if requested:
        return chosen, "--baseline"
    if captured and matched == captured and chosen is not None:
        return chosen, f"the packet capture: the bytes the server sends today{captured_cpu(chosen)}"
    if current and matched == current:
        return chosen, f"the trace's {BASELINE_KEY} metadata"
    note = f"{BASELINE_KEY} {current[:40]!r} was not run; " if current else ""
    if matched == DEFAULT_REFERENCE:
        return chosen, f"{note}{DEFAULT_REFERENCE}, the default"
    return chosen, f"{note}{DEFAULT_REFERENCE} was not run: the first codec measured"


def captured_cpu(row: CodecResult) -> str:
    """What the ``captured`` row's CPU figures time (its config, codecs/captured.py): ``; its CPU: json + deflate
    level 6, window 2**12 (the server's first messages come back byte for byte at level 6, 7, 8, 9)``."""
    config = row.config
    work = f"; its CPU: {config.get('decode_with')}"
    if not config.get("deflate"):
        return work
    level, window, found = (config.get(k) for k in ("deflate_level", "deflate_window_bits",
                                                    "deflate_levels_reproduced"))
    work += f" + deflate level {level}, window 2**{window}"
    if not found:
        return work + " (the level is unknown: none gives back the captured bytes; zlib's default is timed)"
    return work + f" (the server's first messages come back byte for byte at level {', '.join(map(str, found))})"
