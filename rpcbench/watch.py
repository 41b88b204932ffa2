"""A task in a forked process of its own, watched (:class:`Watch`): the tasks of the size pass
(:func:`run_watched`, ``jobs`` at a time: the forks executor, and each Dask worker's task) and a task started
beside the caller's own work (:func:`started`: the schema inference while dictionaries train).

A task (:class:`Task`) names the codecs it runs; while it runs it writes into a shared ``beat``
which call and which codec it is at. A codec that hangs (no progress for ``--codec-timeout``
seconds), aborts, segfaults or ``os._exit``\\ s fails alone, with the reason, and its task starts
over without it.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import mmap
import os
import pickle
import select
import signal
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from .errors import BenchError
from .isolation import reap, silence_stdout

Arrived = Callable[[Any], Any]  #: what becomes of a task's result as it comes in (:meth:`Executor.run_all`)


def as_is(result: Any) -> Any:
    """A task's result kept as it came."""
    return result


class Task(Protocol):
    """One unit of the size pass, runnable in any process."""

    @property
    def codecs(self) -> Tuple[str, ...]:
        """The codecs it runs, by their position in ``beat[1]`` (empty: nothing to watch for)."""

    def prepare(self) -> None:
        """In the process that forks: build what every task's process shares (the registry)."""

    @property
    def span(self) -> Tuple[int, int]:
        """The index of the first call it goes through and how many (0: not counted), so that ``beat[0]``
        shows how far it is: the run's progress in calls."""

    def run(self, beat: Any) -> Any:
        """Do the work; ``beat`` (a shared ``[call, codec position]`` array, or None) shows progress."""

    def blame(self, position: int, reason: str) -> "Task":
        """The same task with the codec at ``position`` failed for ``reason`` (it then skips it)."""


def run_watched(tasks: Sequence[Task], jobs: int, timeout: float, tick: Any = None,
                stop: Callable[[], bool] = lambda: False, arrived: Arrived = as_is) -> List[Any]:
    """Each task's result (as ``arrived`` leaves it), ``jobs`` of them at a time in watched forked processes;
    ``tick(done, share)`` about once a second (progress: tasks done, and the share of their calls done,
    :func:`share_done`). When ``stop()`` turns true (checked as often), the processes are killed and a BenchError
    raised."""
    for task in tasks:
        task.prepare()
    waiting = list(enumerate(tasks))
    running: Dict[int, Watch] = {}
    out: List[Any] = [None] * len(tasks)
    finished = done = 0  #: tasks finished, and their calls
    total = calls_of(tasks)
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                i, task = waiting.pop(0)
                running[i] = Watch(task, timeout)
            select.select([w.fd for w in running.values()], [], [], 1.0)
            if stop():
                raise BenchError("stopped: the Dask worker that ran it closed")
            for i, watch in list(running.items()):
                if watch.check():
                    out[i] = arrived(watch.answer)
                    finished, done = finished + 1, done + tasks[i].span[1]
                    del running[i]
            if tick is not None:
                tick(finished, share_done(done, [(w.task, w.beat[0]) for w in running.values()], total))
    finally:
        for watch in running.values():
            watch.stop()
    return out


@dataclass(frozen=True)
class _Aside:
    """A function run as a task of its own (:func:`started`): no codec to watch for a stall, no call counted."""

    work: Callable[[], Any]
    codecs: Tuple[str, ...] = ()
    span: Tuple[int, int] = (0, 0)

    def prepare(self) -> None:
        return None

    def run(self, beat: Any) -> Any:
        return self.work()

    def blame(self, position: int, reason: str) -> "_Aside":
        return self


def started(work: Callable[[], Any]) -> "Watch":
    """``work()`` started now in a forked process, beside this one's work: :meth:`Watch.result` gives what it
    returned (or raises what it raised; a process that died is a BenchError)."""
    return Watch(_Aside(work), timeout=0)  # (no codec: never timed out)


def calls_of(tasks: Sequence[Task]) -> int:
    """The calls the tasks go through (those that count theirs)."""
    return sum(t.span[1] for t in tasks)


def share_done(done: int, running: Sequence[Tuple[Task, int]], total: int) -> Optional[float]:
    """The share of ``total`` calls gone through: ``done`` (the calls of the tasks finished), and each running
    task's up to the call its beat is at (None when no task counts its calls)."""
    if not total:
        return None
    at = sum(min(task.span[1], max(0, call + 1 - task.span[0])) for task, call in running)
    return min(1.0, (done + at) / total)


class Watch:
    """A task in a forked process, watched through its beat: a codec that makes no progress for
    ``timeout`` seconds, or that ends the process, is failed with the reason, and the task starts
    over in a new process without it. :meth:`check` says when the answer is in ``answer``."""

    def __init__(self, task: Task, timeout: float) -> None:
        self.task, self.timeout = task, timeout
        self.pid, self.fd = 0, -1
        self.answer: Any = None
        self._start()

    def _start(self) -> None:
        self.beat = memoryview(mmap.mmap(-1, 16)).cast("q")  # shared with the child: [call, codec position]
        self.beat[0] = self.beat[1] = -1
        self.seen, self.since = (-1, -1), time.monotonic()
        self.fd, write_fd = os.pipe()
        parent = os.getpid()
        self.pid = os.fork()
        if self.pid:
            os.close(write_fd)
            return
        try:  # whatever happens, the child never returns into the parent's code
            os.close(self.fd)
            gc.freeze()  # what the parent made stays out of this process's collections (and its pages unwritten)
            _die_with(parent)
            silence_stdout()
            logging.getLogger("rpc_capture").disabled = True  # the parent reports the trace's warnings once
            _answer(write_fd, self.task, self.beat)
        finally:
            os._exit(0)

    def check(self) -> bool:
        """Is the answer in? Fails the codec at work (and starts over) when it stalled or ended the process."""
        if select.select([self.fd], [], [], 0)[0]:
            return self._read()
        now = (self.beat[0], self.beat[1])
        if now != self.seen:
            self.seen, self.since = now, time.monotonic()
        elif self.task.codecs and time.monotonic() - self.since >= self.timeout:
            reap(self.pid, kill=True)
            self.pid = 0
            self._blame(f"timed out: no progress on call {now[0]} within {self.timeout:g} s (--codec-timeout)")
        return False

    def _read(self) -> bool:
        with os.fdopen(self.fd, "rb") as inp:
            data = inp.read()
        self.fd = -1
        how = reap(self.pid)
        self.pid = 0
        if not data:
            if not self.task.codecs:
                raise BenchError(f"a task of the run died: {how}")
            self._blame(f"size pass stopped at call {self.beat[0]}: {how}")
            return False
        ok, self.answer = pickle.loads(data)
        if not ok:
            raise self.answer
        return True

    def _blame(self, reason: str) -> None:
        """Fail the codec the process was at, and start the task over without it."""
        self.stop()
        self.task = self.task.blame(max(self.beat[1], 0), reason)
        self._start()

    def answered(self) -> bool:
        """Has the task's process answered, or ended? (Its answer is read by :meth:`check` or :meth:`result`.)"""
        return self.fd < 0 or bool(select.select([self.fd], [], [], 0)[0])

    def result(self) -> Any:
        """Wait for the task's result (its process stopped whatever happens)."""
        try:
            while not self.check():
                select.select([self.fd], [], [], 1.0)
            return self.answer
        finally:
            self.stop()

    def stop(self) -> None:
        """Kill and reap the process if it is still there; close its pipe."""
        if self.pid:
            reap(self.pid, kill=True)
            self.pid = 0
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _die_with(parent: int) -> None:
    """In a task's process: be killed when ``parent``, which watches it, dies (Linux), so that no orphan
    runs on (a hanging codec on a Dask worker that was killed)."""
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it died before that
        os._exit(1)


def _answer(fd: int, task: Task, beat: Any) -> None:
    """In a forked process: run the task; ``(True, result)`` or ``(False, the exception)`` pickled to ``fd``."""
    try:
        answer: Tuple[bool, Any] = (True, task.run(beat))
    except BaseException as e:
        answer = (False, e)
    with os.fdopen(fd, "wb") as out:
        try:
            pickle.dump(answer, out)
        except Exception as e:  # an exception that does not pickle
            pickle.dump((False, BenchError(f"{type(answer[1]).__name__}: {e}")), out)
