"""How figures are written for people: the same text in the terminal table and the HTML report."""

from __future__ import annotations

from typing import Callable, Optional

from rpcbench.results import CodecResult

MISSING = "-"  #: a figure that was not measured


def fmt_us(value: float) -> str:
    """Microseconds with about three significant digits."""
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def fmt_ratio(value: float) -> str:
    """A ratio such as ``0.45x``."""
    return f"{value:.2f}x"


def fmt_count(n: object) -> str:
    """An int with thousands separators; anything else (a missing figure) as text."""
    return f"{n:,}" if isinstance(n, int) else "?" if n is None else str(n)


def fmt_bytes(value: float) -> str:
    """A byte count for people: ``207 B``, ``2.2 kB``, ``1.3 MB``, ``62.5 GB`` (powers of 1000)."""
    if value < 1e6:
        return f"{value:.0f} B" if value < 1000 else f"{value / 1e3:.1f} kB"
    return f"{value / 1e6:.1f} MB" if value < 1e9 else f"{value / 1e9:.1f} GB"


def fmt_share(share: float) -> str:
    """A share as a percentage; tiny non-zero shares show as ``<0.1%`` rather than a misleading 0.0%."""
    return "<0.1%" if 0 < share < 0.001 else f"{share * 100:.1f}%"


def fmt_part(part: int, whole: int) -> str:
    """``part`` of ``whole`` as a percentage, with as many decimals as it takes never to read 100% while a part is
    missing nor 0% while there is one (41,100 of 41,114: ``99.97%``, not ``100.0%``)."""
    if whole <= 0 or part in (0, whole):
        return "100%" if whole > 0 and part == whole else "0%"
    share = part / whole * 100
    decimals = 1
    while decimals < 12 and f"{share:.{decimals}f}" in (f"{100:.{decimals}f}", f"{0:.{decimals}f}"):
        decimals += 1
    return f"{share:.{decimals}f}%"


def shown(value: Optional[float], fmt: Callable[[float], str]) -> str:
    """``fmt(value)``, or the missing-figure mark for None."""
    return MISSING if value is None else fmt(value)


def latency_us(r: CodecResult, op: str, pct: str, method: str = "*") -> Optional[float]:
    """A per-call percentile (``p50``, ``p90``, ``p99``, ``max``) in µs, for all calls or one method;
    None if not measured."""
    value = (r.latency.get(op) or {}).get(method, {}).get(pct)
    return None if value is None else value / 1000


def memory_figure(r: CodecResult, op: str, key: str) -> Optional[float]:
    """One allocation figure per call (e.g. ``peak_bytes_mean``); None if not measured."""
    return (r.memory.get(op) or {}).get(key)
