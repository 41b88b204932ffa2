"""argparse ``type`` functions shared by the commands: one-line errors for bad numbers."""

from __future__ import annotations

import argparse
from typing import Callable, Optional


def whole_number(minimum: int, maximum: Optional[int] = None) -> Callable[[str], int]:
    """An argparse ``type`` accepting whole numbers from ``minimum`` to ``maximum``, with a one-line error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum:,}, not {value:,}")
        return value

    return parse


def seconds(maximum: float) -> Callable[[str], float]:
    """An argparse ``type`` accepting a finite number of seconds above 0 and at most ``maximum``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds") from None
        if not 0 < value <= maximum:  # NaN fails both comparisons
            raise argparse.ArgumentTypeError(f"must be above 0 and at most {maximum:g} seconds, not {text[:40]}")
        return value

    return parse


def fraction(text: str) -> float:
    """An argparse ``type`` accepting a number strictly between 0 and 1 (a share of a trace)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number") from None
    if not 0 < value < 1:  # NaN fails both comparisons
        raise argparse.ArgumentTypeError(f"must be above 0 and below 1, not {text[:40]}")
    return value


def dask_address(text: str) -> str:
    """An argparse ``type`` for ``--dask``: ``local``, ``local:N`` or a scheduler address."""
    from rpcbench.fleet import parse_dask

    try:
        return parse_dask(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
