"""How the pipeline reports progress: a callback taking the phase, what it is at, and how far.

``progress(phase, detail, done, total, unit)``: ``phase`` names one step of the run ("size
pass", "floor", "training", "timing"...), ``done`` of ``total`` units of it are finished
(``total`` 0: unknown, the display shows elapsed time only); ``unit`` names what they count
("calls": the display shows calls/s; "": steps). A display may draw one bar per phase with
its ETA (``commands/progress.py``); nothing in ``rpcbench`` prints.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """The progress callback's signature."""

    def __call__(self, phase: str, detail: str = "", done: float = 0, total: float = 0, unit: str = "") -> None: ...


def quiet(phase: str, detail: str = "", done: float = 0, total: float = 0, unit: str = "") -> None:
    """The progress callback that shows nothing."""
