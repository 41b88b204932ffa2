"""Where the size pass's tasks run: here, in watched forked processes, or on a Dask cluster.

Every executor offers ``run_all(tasks, what)``: each task's ``run`` result, in order. A task
(:class:`Task`) names the codecs it runs; while it runs it writes into a shared ``beat``
which call and which codec it is at. The forks executor runs ``--jobs`` tasks at a time,
each in a forked process watched by :class:`rpcbench.watch.Watch`; the Dask executor runs each task on a
worker, where the same watch forks and watches it (``--dask local:N``: N worker threads of this
process, each forking its task's process as the forks executor does). So on either, a codec that
hangs (no progress for ``--codec-timeout`` seconds), aborts, segfaults or ``os._exit``\\ s
fails alone, with the reason, and its task starts over without it; the other codecs, the
worker and the run carry on. The in-process executor (``--jobs 0``, tests, no ``fork``)
runs tasks one after another in this process, with no watch. dask is imported only when a
run asks for it (``--dask``).
"""

from __future__ import annotations

import gc
import logging
import os
import queue
import signal
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Protocol, Sequence, Tuple

from .errors import BenchError
from .watch import Arrived, Task, as_is, calls_of, run_watched, share_done
from .progress import Progress

log = logging.getLogger("rpcbench")
@dataclass(frozen=True)
class ClusterInfo:
    """The Dask cluster a size pass ran on (results.json's ``settings.dask``)."""

    scheduler: str  #: its address (``inproc://...`` for --dask local:N)
    workers: int
    dashboard: Optional[str]  #: the dashboard's address


class Executor(Protocol):
    """Runs tasks; ``slots`` of them at a time; ``info`` says where (None: here or in forks)."""

    info: Optional[ClusterInfo]

    @property
    def slots(self) -> int:
        """How many tasks run at the same time."""

    def run_all(self, tasks: Sequence[Task], what: str, calls: int = 0, arrived: Arrived = as_is) -> List[Any]:
        """Each task's result, in order, as ``arrived`` leaves it when it comes in (the size pass folds a piece's
        timing candidates into its trace's at once, so a long trace's pieces do not pile them up); ``what``
        names them in progress, which counts ``calls`` (the run's calls, 0: unknown) done at the pace of the
        tasks' calls (:func:`share_done`)."""

    def __enter__(self) -> "Executor": ...

    def __exit__(self, *exc: Any) -> None: ...


class InProcess:
    """Tasks one after another in this process, unwatched (``--jobs 0``, tests, a system without fork)."""

    info: Optional[ClusterInfo] = None
    slots = 1

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def run_all(self, tasks: Sequence[Task], what: str, calls: int = 0, arrived: Arrived = as_is) -> List[Any]:
        out, done, total = [], 0, calls_of(tasks)
        ours = not gc.get_freeze_count()  # a caller's own freeze (a pre-fork server's) is left as it is
        if ours:
            gc.freeze()  # what exists before the tasks (modules, the plan) stays out of their collections, as in a fork
        try:
            for n, task in enumerate(tasks, 1):
                out.append(arrived(task.run(None)))
                done += task.span[1]
                report(self.progress, what, (n, len(tasks), ""), share_done(done, [], total), calls)
        finally:
            if ours:
                gc.unfreeze()
        return out

    def __enter__(self) -> "InProcess":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


class Forks(InProcess):
    """``jobs`` tasks at a time, each in a forked process of this machine, watched."""

    def __init__(self, jobs: int, timeout: float, progress: Progress) -> None:
        super().__init__(progress)
        self.slots, self.timeout = jobs, timeout

    def run_all(self, tasks: Sequence[Task], what: str, calls: int = 0, arrived: Arrived = as_is) -> List[Any]:
        def tick(done: int, share: Optional[float]) -> None:
            report(self.progress, what, (done, len(tasks), ""), share, calls)

        return run_watched(tasks, self.slots, self.timeout, tick, arrived=arrived)


def report(progress: Progress, what: str, tasks: Tuple[int, int, str], share: Optional[float], calls: int) -> None:
    """Progress in calls when both the share done and the run's ``calls`` are known, else in ``tasks``
    (done, of, where); once every call is through and a task still runs (a floor compressing), neither:
    no share or ETA to give."""
    done, total, where = tasks
    detail = f"{done} of {total} tasks{where}"
    if share is not None and share >= 1 and done < total:
        progress(what, f"{detail}, every call read")
    elif share is not None and calls > 0:
        progress(what, detail, share * calls, calls, "calls")
    else:
        progress(what, detail, done, total)


def watched(task: Task, timeout: float) -> Any:
    """Run on a Dask worker: one task in a watched forked process (so a codec cannot take the worker);
    on a worker without ``fork``, in the worker itself. It stops (its process killed) as soon as the worker
    closes: a run that ends early (Ctrl-C, a task that failed) closes its local cluster without waiting for
    the tasks under way. Ctrl-C in the task's process (the terminal's whole process group) ends the task
    with a BenchError: Dask would take a KeyboardInterrupt from a task for its worker's own and fail hard."""
    if not hasattr(os, "fork"):
        return task.run(None)
    from distributed import get_worker
    from distributed.core import Status

    worker = get_worker()
    try:
        return run_watched([task], 1, timeout, stop=lambda: worker.status in (Status.closing, Status.closed,
                                                                               Status.failed))[0]
    except KeyboardInterrupt:
        raise BenchError("interrupted (Ctrl-C)") from None


class OnDask:
    """Tasks on a Dask cluster (``local[:N]`` starts a LocalCluster, else the scheduler's address), each
    watched on its worker."""

    def __init__(self, spec: str, timeout: float, progress: Progress) -> None:
        self.spec, self.timeout, self.progress = spec, timeout, progress
        self.client: Any = None
        self.cluster: Any = None
        self.threads = 0  #: the cluster's worker threads
        self.info: Optional[ClusterInfo] = None
        self.ctrl_c = CtrlC()

    def __enter__(self) -> "OnDask":
        self.client, self.cluster = connect(self.spec)
        self.ctrl_c.__enter__()
        workers = self.client.scheduler_info().get("workers", {})
        self.threads = sum(w.get("nthreads", 1) for w in workers.values())
        self.info = ClusterInfo(self.client.scheduler.address, len(workers), self.client.dashboard_link)
        log.info("dask: %d workers, scheduler %s, dashboard %s", len(workers), self.client.scheduler.address,
                 self.client.dashboard_link)
        return self

    @property
    def slots(self) -> int:
        """The cluster's threads: each runs one task (its forked process) at a time."""
        return max(1, self.threads)

    def run_all(self, tasks: Sequence[Task], what: str, calls: int = 0, arrived: Arrived = as_is) -> List[Any]:
        """As the forks executor does: ``slots`` tasks in flight, the next one sent as one ends. Dask itself
        would hand every task out at once (fewer than twice the threads) or two per thread: a task queued
        behind a slow one on a busy worker while another worker sits idle."""
        waiting = list(enumerate(tasks))
        position: Dict[str, int] = {}
        finished: "queue.Queue[Any]" = queue.Queue()

        def send() -> None:
            i, task = waiting.pop(0)
            future = self.client.submit(watched, task, self.timeout, pure=False, retries=1, priority=-i)
            position[future.key] = i
            future.add_done_callback(finished.put)

        for _ in range(min(self.slots, len(waiting))):
            send()
        out: List[Any] = [None] * len(tasks)
        done, total = 0, calls_of(tasks)
        for n in range(1, len(tasks) + 1):
            future = _next(finished, self.ctrl_c)
            if waiting:
                send()
            out[position[future.key]] = arrived(_result(future))
            done += tasks[position[future.key]].span[1]
            report(self.progress, what, (n, len(tasks), " on dask"), share_done(done, [], total), calls)
        return out

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.client is not None:
                self.client.close()
            if self.cluster is not None:
                self.cluster.close()
        finally:
            self.ctrl_c.__exit__(*exc)


class CtrlC:
    """While a Dask client (and a local cluster) runs in this process, Ctrl-C is noted by a handler and raised as
    KeyboardInterrupt where the run waits (:meth:`check`) or as the cluster closes: raised wherever the main thread
    happens to be, it can land in one of Dask's callbacks on that thread (its garbage-collection diagnosis), which
    prints a traceback and drops it. Only in the main thread, and only where Ctrl-C raises KeyboardInterrupt (a
    run started with SIGINT ignored keeps ignoring it)."""

    def __init__(self) -> None:
        self.seen = False
        self.previous: Any = None

    def __enter__(self) -> "CtrlC":
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.previous = signal.signal(signal.SIGINT, self._note)
        return self

    def _note(self, *_: Any) -> None:
        self.seen = True

    def check(self) -> None:
        """Raise KeyboardInterrupt if Ctrl-C was pressed."""
        if self.seen:
            raise KeyboardInterrupt

    def __exit__(self, *exc: Any) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            self.previous = None
        if exc[0] is None:
            self.check()


def _next(finished: "queue.Queue[Any]", ctrl_c: CtrlC) -> Any:
    """The next future done, waited for a second at a time (a wait without a timeout is not woken by Ctrl-C when
    the signal lands on one of Dask's threads), Ctrl-C checked in between."""
    while True:
        ctrl_c.check()
        try:
            return finished.get(timeout=1.0)
        except queue.Empty:
            pass


def _result(future: Any) -> Any:
    """A task's result; a task that killed worker after worker as a BenchError (a trace that cannot be
    read raises its TraceError, as in a run without Dask)."""
    from dask.distributed import KilledWorker

    try:
        return future.result()
    except KilledWorker as e:
        raise BenchError(f"dask: {e}") from None


#: The Dask settings of a cluster that ``--dask local[:N]`` starts. Its workers are threads of this process (each
#: waits for the forked process that runs its task, as the forks executor does), so its statistical profiler (100
#: samples a second of that wait) and 50 event-loop health checks a second only take CPU from the tasks
#: (docs/fleet.md, "How it scales").
LOCAL_CLUSTER = {"distributed.worker.profile.enabled": False, "distributed.admin.tick.interval": "1s"}


def connect(spec: str) -> Tuple[Any, Any]:
    """A Dask client (and the LocalCluster it started, if any) for ``--dask``: ``local``, ``local:N``
    (N workers of one thread each, in this process) or a scheduler address such as ``tcp://host:8786``."""
    try:
        from dask.distributed import Client
    except ImportError:
        raise BenchError("--dask needs the dask[distributed] package (in a clone: pip install -r requirements.txt; "
                         "else: pip install 'rpcbench[dask]')") from None
    logging.getLogger("distributed").setLevel(logging.WARNING)  # its start-up chatter is not the run's news
    if spec == "local" or spec.startswith("local:"):
        cluster = local_cluster(int(spec.partition(":")[2] or os.cpu_count() or 1))
        return Client(cluster), cluster
    try:
        return Client(spec, timeout="20s"), None
    except (OSError, TimeoutError) as e:
        raise BenchError(f"--dask {spec}: cannot reach the scheduler ({e})") from None


def local_cluster(workers: int) -> Any:
    """A LocalCluster of ``workers`` single-threaded workers in this process, started in about 0.01 s (worker
    processes forked from this one took 0.1-0.3 s, and each task's result crossed a socket to come back): a worker
    only waits for the process its task forks, which holds the codecs, so threads lose no parallelism. No memory
    limit: a worker's memory is its forked processes', which Dask does not see."""
    import dask
    from dask.distributed import LocalCluster

    # the cluster's logs are this process's now, and stay quiet: a task's failure comes back through its future
    # (reported per codec), a heartbeat that misses a scheduler closing under load (dask/distributed#7105) is no news
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    try:
        with dask.config.set(LOCAL_CLUSTER):
            return LocalCluster(n_workers=workers, threads_per_worker=1, processes=False, memory_limit=0,
                                dashboard_address=":0")
    except Exception as e:  # Dask's own configuration (a preload, a comm setting) can stop it: its reason in one line
        raise BenchError(f"--dask local:{workers}: the cluster did not start ({e.__cause__ or e})") from None


def parse_dask(spec: str) -> str:
    """Check a ``--dask`` value: ``local``, ``local:N`` with 1 <= N <= 256, or ``scheme://host:port``."""
    if spec == "local":
        return spec
    if spec.startswith("local:"):
        n = spec.partition(":")[2]
        if n.isdigit() and 1 <= int(n) <= 256:
            return spec
        raise ValueError(f"local:N needs 1 <= N <= 256, got {n!r}")
    if "://" in spec and spec.rpartition(":")[2].isdigit():
        return spec
    raise ValueError(f"expected local, local:N or a scheduler address such as tcp://host:8786, got {spec!r}")


def open_executor(dask: Optional[str], jobs: int, timeout: float, progress: Progress) -> Executor:
    """The executor a run asks for: Dask with ``dask``, else ``jobs`` watched forks (0, or no fork: here)."""
    if dask is not None:
        return OnDask(dask, timeout, progress)
    if jobs > 0 and hasattr(os, "fork"):
        return Forks(jobs, timeout, progress)
    return InProcess(progress)
