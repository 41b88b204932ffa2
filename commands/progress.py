"""The run's progress on stderr, phase by phase, with an ETA (the pipeline's ``progress`` callback).

On a terminal: one rich bar per phase (size pass, floor, training, timing...) with elapsed
time, time left and, for a phase counted in calls (the size pass), calls per second; all
cleared when the run ends so that only the results remain. When stderr is not a terminal (a
log file, CI): one plain line when a phase starts and one every ``interval`` seconds with its
share done, calls/s and ETA. ``--quiet``: nothing.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import IO, Any, Dict, Optional, Tuple

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TaskProgressColumn, TextColumn, TimeElapsedColumn


class ProgressDisplay:
    """The progress callback of a command-line run; use as a context manager (closed on Ctrl-C too)."""

    def __init__(self, enabled: bool = True, stream: Optional[IO[str]] = None, interval: float = 5.0) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.interval = interval
        self._bars: Optional[Progress] = None
        self._tasks: Dict[str, TaskID] = {}
        self._started: Dict[str, float] = {}  # phase -> when it started
        self._last_line = 0.0
        self._rerouted: list = []  # log handlers writing to the stream, sent above the bars while they show
        if enabled and self.stream.isatty():
            self._bars = Progress(
                TextColumn("{task.description:<22}"), BarColumn(bar_width=24), TaskProgressColumn(),
                TimeElapsedColumn(), TextColumn("ETA {task.fields[eta]}", style="progress.remaining"),
                TextColumn("{task.fields[rate]}"), TextColumn("{task.fields[detail]}"),
                console=Console(file=self.stream), transient=True, refresh_per_second=4, redirect_stdout=False)

    def __enter__(self) -> "ProgressDisplay":
        if self._bars is not None:
            self._bars.start()  # sys.stderr is now rich's proxy, which prints above the bars
            for handler in logging.getLogger().handlers:
                if isinstance(handler, logging.StreamHandler) and handler.stream is self.stream:
                    self._rerouted.append(handler)
                    handler.setStream(sys.stderr)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __call__(self, phase: str, detail: str = "", done: float = 0, total: float = 0, unit: str = "") -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        first = phase not in self._started
        elapsed = now - self._started.setdefault(phase, now)
        if self._bars is not None:
            pace = rate_of(done, unit, elapsed), clock(eta_of(done, total, elapsed)[1])
            self._bar(phase, detail, (done, total), pace)
        elif first or now - self._last_line >= self.interval:
            self._last_line = now
            print(plain_line(phase, detail, (done, total, unit), elapsed), file=self.stream, flush=True)

    def _bar(self, phase: str, detail: str, progress: Tuple[float, float], pace: Tuple[str, str]) -> None:
        """Update the phase's bar (``pace``: its rate and ETA, as the plain lines give them); a new phase
        completes the bars before it."""
        assert self._bars is not None
        done, total = progress
        rate, eta = pace
        task = self._tasks.get(phase)
        if task is None:
            for earlier in self._tasks.values():
                self._bars.update(earlier, completed=1, total=1, detail="", rate="", eta=clock(0))
            task = self._tasks[phase] = self._bars.add_task(phase, total=total or None, detail=detail, rate=rate,
                                                            eta=eta)
        self._bars.update(task, completed=done, total=total or None, detail=detail, rate=rate, eta=eta)

    def close(self) -> None:
        """Clear the bars (idempotent): what follows on the terminal is the results only."""
        if self._bars is not None:
            self._bars.stop()
            self._bars = None
        for handler in self._rerouted:
            handler.setStream(self.stream)
        self._rerouted = []


def plain_line(phase: str, detail: str, progress: Tuple[float, float, str], elapsed: float) -> str:
    """One line of progress without a terminal: ``size pass: reading: 37%, 52,310 calls/s, ETA 41 s 2 of 4
    tasks`` (share, rate and ETA when known)."""
    done, total, unit = progress
    share, eta = eta_of(done, total, elapsed)
    rate = rate_of(done, unit, elapsed)
    figures = f" {share:.0%}" if share is not None else ""
    figures += f", {rate}" if rate else ""
    figures += f", ETA {eta:.0f} s" if eta is not None else ""
    return f"{phase}:{figures} {detail}".rstrip()


def clock(seconds: Optional[float]) -> str:
    """``0:00:41`` (``-:--:--`` when unknown), as rich shows elapsed time beside it."""
    if seconds is None:
        return "-:--:--"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"


def rate_of(done: float, unit: str, elapsed: float) -> str:
    """``52,310 calls/s``: the phase's pace so far in ``unit`` ("" when it counts steps or has not begun)."""
    if not unit or done <= 0 or elapsed <= 0:
        return ""
    return f"{done / elapsed:,.0f} {unit}/s"


def eta_of(done: float, total: float, elapsed: float) -> Tuple[Optional[float], Optional[float]]:
    """Share done and seconds left, at the pace so far (None when the total is unknown, or the pace: nothing
    done yet or the phase in its first second)."""
    if total <= 0:
        return None, None
    share = min(done / total, 1.0)
    return share, (elapsed * (1 - share) / share if share > 0 and elapsed >= 1 else None)
