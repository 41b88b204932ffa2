"""The recorder's writer thread: the half of a :class:`~rpc_capture.recorder.Recorder` that does the work.

Split as ``logging.handlers`` splits ``QueueHandler`` from ``QueueListener``: the front
end (``recorder.py``) only appends ``(method, args, t, dir, conn)`` tuples to a bounded
queue; one :class:`WriterThread` per recorder takes up to ``BATCH_CALLS`` of them at a
time, encodes them with one ``marshal`` call and writes them, one write per batch,
through a :class:`~rpc_capture.trace.TraceWriter` (the file format, ``trace.py``). It
flushes at least every ``flush_interval`` seconds and on request, starts a new numbered
file when rotation is due, and stops on the :data:`STOP` sentinel request after writing
everything queued. It counts exactly what it writes and what it loses (unrecordable
calls with their reasons, write errors); a write error stops it for good with one
logged error.
"""

from __future__ import annotations

import collections
import datetime as _dt
import logging
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from .trace import BATCH_CALLS, TraceError, TraceReader, TraceWriter, encode_batch, recordable

log = logging.getLogger("rpc_capture")

STOP = None  #: the request that stops the writer once everything queued is written (QueueListener's sentinel)
_LOGGED_UNRECORDABLE = 5  #: unrecordable calls logged individually, then only counted

Request = Optional[threading.Event]  #: a flush() caller's event, or the STOP sentinel


def part_path(path: str, part: int) -> str:
    """``battle.rpct`` -> ``battle.0001.rpct`` (``x.rpct.gz`` -> ``x.0001.rpct.gz``)."""
    head, gz = (path[:-3], path[-3:]) if path.endswith(".gz") else (path, "")
    stem, ext = os.path.splitext(head)
    return f"{stem}.{part:04d}{ext}{gz}"


class WriterThread:
    """The background thread that writes one recorder's queued calls to its trace file(s).

    ``calls``: the queue the front end appends to (only this thread takes from it while it
    runs). ``options``: the recorder's options as its header records them (flush interval,
    rotation, compression). ``stats``: the recorder's full counters, written into stats and end records.
    ``refuse``: turns the front end's ``record()`` into its counting slow path, called once
    when writing fails. The first file is created by the constructor, on the caller's
    thread, so the trace exists (a valid, empty one) as soon as the recorder does.

    The counters below are written by this thread only and read by ``Recorder.stats()``.
    """

    def __init__(
        self,
        calls: "collections.deque[tuple]",
        path: str,
        *,
        metadata: Dict[str, Any],
        options: Dict[str, Any],
        poll_interval: float,
        stats: Callable[[], Dict[str, Any]],
        refuse: Callable[[], None],
    ) -> None:
        self._queue = calls
        self.path = path
        self._metadata, self._options = metadata, options
        self._stats, self._refuse = stats, refuse
        self.flush_interval, self.poll_interval = options["flush_interval"], poll_interval
        self.rotate_bytes, self.rotate_seconds = options["rotate_bytes"], options["rotate_seconds"]
        self._rotating = self.rotate_bytes is not None or self.rotate_seconds is not None

        self.paths: List[str] = []  #: every file written so far, in order
        self.recorded = 0  #: calls written to the trace (what a reader gets back)
        self.unrecordable = 0  #: calls refused by the encoder (a cycle, a type...)
        self.unrecordable_reasons: "collections.Counter[str]" = collections.Counter()
        self.write_lost = 0  #: calls lost to a write error (in the failed batch, or queued then)
        self.in_flight = 0  #: calls taken from the queue and not yet counted
        self.bytes_written = 0
        self.queue_peak = 0  #: longest queue seen, in calls
        self.error: Optional[str] = None  #: why writing stopped for good, or None

        self._kick = threading.Event()  # wakes the idle thread: a request, or stop
        self._requests: List[Request] = []  # flush() events and the STOP sentinel, in order
        self._taking_requests = True  # False once STOP is queued or the thread has ended
        self._lock = threading.Lock()  # guards _requests and _taking_requests

        self._part = 0
        self._writer: Optional[TraceWriter] = None
        self._file_recorded = 0  # calls handed to the current file (on disk unless a write fails)
        try:
            self._open_next_file()
        except OSError as e:  # disk full, no such folder...: logged, and every call counted as lost
            self._fail(e)
        self._thread = threading.Thread(target=self._run, name=f"rpc_capture writer {os.path.basename(path)}",
                                        daemon=True)

    # ------------------------------------------------------------------ control, from other threads

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def flush(self, timeout: Optional[float]) -> bool:
        """Wait until every call queued before now is written and flushed; False on timeout or failure."""
        done = threading.Event()
        if self.error is not None or not self._request(done):
            return False
        return done.wait(timeout) and self.error is None

    def stop(self) -> None:
        """Ask the thread to write everything queued, close the file and end (idempotent)."""
        self._request(STOP)

    @property
    def ident(self) -> Optional[int]:
        """The thread's identifier (for ``time.pthread_getcpuclockid``), None before it starts."""
        return self._thread.ident

    def join(self, timeout: Optional[float]) -> bool:
        """Wait for the thread to end; True if it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def discard_queue(self) -> None:
        """Count every call still queued as lost and let it go: nothing will write it any more.

        Only this thread takes from the queue while it runs; others call this once it has ended.
        """
        popleft, n = self._queue.popleft, 0
        while True:
            try:
                popleft()
            except IndexError:  # empty (also when a second close() emptied it first)
                break
            n += 1
        self.write_lost += n

    def _request(self, request: Request) -> bool:
        """Queue a request for the thread; False if it takes no more (stopping or ended)."""
        with self._lock:
            if not self._taking_requests:
                return False
            self._requests.append(request)
            if request is STOP:
                self._taking_requests = False
        self._kick.set()
        return True

    # ------------------------------------------------------------------ the thread

    def _run(self) -> None:
        """The thread's body: write until stopped or failed, then release every waiting flush()."""
        try:
            if self.error is None:  # else the first file could not be created
                self._loop()
        except BaseException as e:  # noqa: BLE001 - the writer must never die silently
            self._fail(e)
        finally:
            self.in_flight = 0
            with self._lock:
                self._taking_requests = False
                requests, self._requests = self._requests, []
            _release(requests)

    def _loop(self) -> None:
        """Write batches as calls arrive, flush on time and on request, until STOP or a failure."""
        q = self._queue
        popleft = q.popleft
        monotonic = time.monotonic
        next_flush = monotonic() + self.flush_interval
        dirty = False  # written since the last flush
        while self.error is None:
            n = len(q)
            if n:
                if n > self.queue_peak:
                    self.queue_peak = n
                k = self._write_next(popleft)
                dirty = True
                if k == BATCH_CALLS and not self._requests and monotonic() < next_flush:
                    continue
            if self._requests:
                if self._serve_requests(popleft):
                    return
                dirty = False
                next_flush = monotonic() + self.flush_interval
                continue
            now = monotonic()
            if now >= next_flush:
                if dirty:
                    self._flush()
                    dirty = False
                next_flush = now + self.flush_interval
            if not q:
                self._kick.wait(min(self.poll_interval, max(next_flush - now, 0.0)))
                self._kick.clear()

    def _serve_requests(self, popleft: Callable[[], tuple]) -> bool:
        """Write what is queued, flush and release the flush() callers; on STOP, close the file.

        Returns True when the thread is to end (STOP served).
        """
        with self._lock:
            requests, self._requests = self._requests, []
        self._drain(popleft)
        waiters = [r for r in requests if r is not STOP]
        if waiters and self.error is None:
            self._flush()
        _release(waiters)  # flush() tells success from failure by looking at self.error
        if len(waiters) == len(requests):
            return False
        self._drain(popleft)  # calls of producers that passed the length check just before close()
        self._close_file()
        return True

    def _drain(self, popleft: Callable[[], tuple]) -> None:
        """Write everything queued now."""
        while self._queue and self.error is None:
            self._write_next(popleft)

    def _write_next(self, popleft: Callable[[], tuple]) -> int:
        """Write up to one batch of what is queued, rotating the file when due; returns the calls taken."""
        k = min(len(self._queue), BATCH_CALLS)
        self.in_flight = k
        self._write_batch([popleft() for _ in range(k)])
        if self._rotating and self.error is None and self._should_rotate():
            self._rotate()
        return k

    def _write_batch(self, batch: List[tuple]) -> None:
        data, ok = self._encode(batch)
        try:
            if ok:
                self._writer.write_records(data, ok)  # type: ignore[union-attr]
        except BaseException as e:  # noqa: BLE001
            self.in_flight = 0
            self.write_lost += ok
            self._fail(e)
            return
        self.in_flight = 0
        self.recorded += ok
        self._file_recorded += ok
        self.bytes_written += len(data)
        self._file_bytes += len(data)

    def _encode(self, batch: List[tuple]) -> Tuple[bytes, int]:
        """The records for a batch and how many calls they hold: one ``marshal`` call when
        every value is of an exact builtin type, else call by call (subclasses such as
        ``IntEnum`` converted, calls that can't be recorded counted and skipped)."""
        try:
            return encode_batch(batch), len(batch)
        except Exception:  # noqa: BLE001 - a user object may fail in any way
            pass
        good = []
        for call in batch:
            try:
                good.append(recordable(call))
            except Exception as e:  # noqa: BLE001
                self._count_unrecordable(call, e)
        return (encode_batch(good) if good else b""), len(good)

    def _count_unrecordable(self, call: Any, exc: Exception) -> None:
        self.unrecordable += 1
        self.unrecordable_reasons[_reason(exc)] += 1
        if self.unrecordable <= _LOGGED_UNRECORDABLE:
            last = self.unrecordable == _LOGGED_UNRECORDABLE
            log.warning("rpc_capture: call %r not recorded: %s%s", call[0], exc,
                        " (further unrecordable calls are only counted)" if last else "")

    # ------------------------------------------------------------------ files

    def _open_next_file(self) -> None:
        self._part += 1
        path = part_path(self.path, self._part) if self._rotating else self.path
        meta = {
            **self._metadata,
            "generator": "rpc_capture.Recorder",
            "capture_start": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
            "python": sys.version.split()[0],
            "pid": os.getpid(),
            "recorder": self._options,
        }
        if self._rotating:
            meta["part"] = self._part
        self._writer = TraceWriter(path, meta, self._options["compresslevel"])
        self._writer.flush()  # the header: from now on the file is a valid (empty) trace
        self.paths.append(path)
        self._file_recorded = 0
        self._file_bytes = 0
        self._file_started = time.monotonic()

    def _should_rotate(self) -> bool:
        return (self.rotate_bytes is not None and self._file_bytes >= self.rotate_bytes) or (
            self.rotate_seconds is not None and time.monotonic() - self._file_started >= self.rotate_seconds
        )

    def _rotate(self) -> None:
        self._close_file()
        if self.error is not None:
            return
        try:
            self._open_next_file()
        except BaseException as e:  # noqa: BLE001
            self._fail(e)

    def _flush(self) -> None:
        try:
            self._writer.write_stats(self._file_stats())  # type: ignore[union-attr]
            self._writer.flush()  # type: ignore[union-attr]
        except BaseException as e:  # noqa: BLE001
            self._fail(e)

    def _file_stats(self) -> Dict[str, Any]:
        info = self._stats()
        if self._rotating:
            info["part"] = self._part
        return info

    def _close_file(self) -> None:
        """Write the end record and close the current file; a failure is logged and counted, never raised."""
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:
            writer.close(self._file_stats())
        except BaseException as e:  # noqa: BLE001
            self._writer = writer  # for _fail: abandon it and count what reached the disk
            self._fail(e)

    def _fail(self, exc: BaseException) -> None:
        """Stop recording for good: one error logged, every call from now on counted as lost."""
        if self.error is not None:
            return
        self.error = f"{type(exc).__name__}: {exc}"
        self._refuse()
        self.discard_queue()
        log.error("rpc_capture: recording to %s stopped: %s; calls from now on are counted as dropped_write_error",
                  self.paths[-1] if self.paths else self.path, self.error)
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.abandon()  # nothing more is written after a failed write: the file stays readable
            # calls the writer took but the failure kept off the disk (buffered, in a cut record):
            # counted by reading the file back, so `recorded` is what a reader gets
            lost = max(self._file_recorded - _calls_on_disk(writer.path), 0)
            self.recorded -= lost
            self.write_lost += lost


def _release(requests: Sequence[Request]) -> None:
    """Wake the flush() callers among ``requests``."""
    for r in requests:
        if r is not STOP:
            r.set()


def _reason(exc: BaseException) -> str:
    """The short reason a call was refused, for the ``unrecordable_reasons`` counters."""
    text = str(exc)
    if isinstance(exc, TypeError):
        return "unsupported type"
    if "cycle" in text:
        return "cycle or nesting too deep"
    if "exceeds" in text:
        return "too big"
    return "malformed call"


def _calls_on_disk(path: str) -> int:
    """How many calls a reader gets from ``path`` (0 if it is not readable at all)."""
    try:
        reader = TraceReader(path)
    except (TraceError, OSError):
        return 0
    try:
        return reader.count_calls()
    except (TraceError, OSError):
        return reader.calls_read
