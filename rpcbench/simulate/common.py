"""What both profiles share: a seed's start time, running a battle for exactly N calls, the JSON yardstick."""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone
from typing import Callable, Iterator, List

from rpc_capture import Call

from ..codec import base64_default
from .profiles import EPOCH_S


def start_ns(seed: int) -> int:
    """When a seed's capture starts (ns since the epoch): fixed per seed, never the wall clock."""
    r = random.Random(seed)
    return (EPOCH_S + r.randrange(365 * 86400)) * 10**9 + r.randrange(1000) * 10**6


def capture_start(seed: int) -> str:
    """:func:`start_ns` as ISO 8601 UTC with milliseconds, for the trace header."""
    ns = start_ns(seed)
    start = datetime.fromtimestamp(ns // 10**9, timezone.utc).replace(microsecond=ns // 1000 % 10**6)
    return start.isoformat(timespec="milliseconds")


def take(step: Callable[[], List[Call]], calls: int) -> Iterator[Call]:
    """Yield exactly ``calls`` calls from a battle's ``step`` (one tick's calls each), streaming."""
    left = calls
    while left > 0:
        for call in step()[:left]:
            yield call
            left -= 1


def json_size(call: Call) -> int:
    """Bytes of ``{"method": m, "args": a}`` as compact UTF-8 JSON, bytes as base64: the study's yardstick."""
    doc = {"method": call.method, "args": call.args}
    text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False, default=base64_default)
    return len(text.encode("utf-8"))
