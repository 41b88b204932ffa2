"""Seeded battle simulator: real-time battle RPC traffic to benchmark codecs on (``docs/simulate.md``).

Two profiles, each a generator of calls: ``study`` (the default, ``samples/battle.rpct``:
positional args, everything broadcast to the room, the 2015 study's kind of traffic) and
``dict`` (``samples/battle_dict.rpct``: named args, 17-digit floats, area-of-interest
fan-out). ``profiles.py`` holds what each sends and how often, as data;
``study_battle.py`` and ``dict_battle.py`` play the battles. The same profile, call count
and seed always give the same calls.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterator

from rpc_capture import Call

from .common import capture_start, json_size, start_ns
from .dict_battle import simulate
from .profiles import DEFAULT_PROFILE, PROFILES, TICKS_PER_S
from .study_battle import simulate_study

__all__ = ["DEFAULT_PROFILE", "PROFILES", "TICKS_PER_S", "capture_start", "json_size", "simulate", "simulate_profile",
           "simulate_study", "start_ns"]

_GENERATORS: Dict[str, Callable[[int, int, int], Iterator[Call]]] = {"study": simulate_study, "dict": simulate}


def simulate_profile(profile: str, calls: int, seed: int, tick_hz: int = TICKS_PER_S) -> Iterator[Call]:
    """The calls of one profile (``study``: positional args, the default sample; ``dict``: named args); the
    server sends at its tick, ``tick_hz`` (default 10 Hz, the bundled samples')."""
    return _GENERATORS[profile](calls, seed, tick_hz)
