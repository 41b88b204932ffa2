"""Record a live server's RPC calls into trace files without slowing the server down: the front end.

The calling (game) thread only takes a timestamp and appends a tuple to a bounded
queue; one background writer thread (``writer.py``, :class:`~rpc_capture.writer.WriterThread`)
encodes the calls in batches of up to 128 (one ``marshal`` call each, in C) and writes
them, one write per batch, flushing at least every ``flush_interval`` seconds: the split
of ``logging.handlers``' ``QueueHandler`` and ``QueueListener``. The file format is
``trace.py``. A full queue drops the call and counts it, it never blocks and never
grows. Nothing raises into the game code (only bad options, from the constructor): a
file that cannot be created or written (disk full...) stops recording with one logged
error and every lost call counted. See ``docs/capture.md``.

Quick start::

    from rpc_capture import recorder

    rec = recorder("battle-1234.rpct", metadata={"battle": 1234})  # recorder(None): a no-op
    rec.record("move", {"unit": 7, "to": [3.5, 9.0]}, direction="c2s", conn=conn_id)
    ...
    rec.close()  # drains the queue, writes the end record with the counters

Args are captured by reference: the writer encodes them a few milliseconds later, so
the caller must not mutate them after handing them over. ``copy_args=True`` snapshots
them on the calling thread instead (dicts, lists and bytearrays copied; immutable
values shared), at a cost measured by ``bench/capture_overhead.py``.

Standard library only, like the rest of ``rpc_capture``.
"""

from __future__ import annotations

import atexit
import collections
import copy
import fnmatch
import functools
import inspect
import itertools
import os
import random
import time
import zlib
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Union

from .call import C2S, DIRECTIONS
from .writer import WriterThread

__all__ = ["Recorder", "NullRecorder", "recorder", "MethodFilter", "COUNTERS"]


#: The counters a recorder keeps, in the order they are written to stats and end records.
#: At the end ``offered`` equals the sum of all the others (``pending`` is then 0).
COUNTERS = (
    "offered",  # record() calls on an open recorder
    "recorded",  # written to the trace
    "pending",  # still queued or being written (0 in the end record)
    "filtered_out",  # excluded by the method include/exclude filters
    "sampled_out",  # not picked by call sampling
    "dropped_queue_full",  # queue full: dropped instead of blocking the caller
    "dropped_unrecordable",  # refused: the reader could not take it back (a cycle, a type...); see unrecordable_reasons
    "dropped_write_error",  # lost because writing failed (in the failed batch, queued, or offered afterwards)
)

_ATOMIC = frozenset((int, float, str, bytes, bool, type(None)))  #: immutable leaves copy_args shares
_LOGGED_UNRECORDABLE = 5  #: unrecordable calls logged individually, then only counted


def _count(counter: "itertools.count[int]") -> int:
    """The next value of an ``itertools.count`` without advancing it (its repr is ``count(N)``)."""
    return int(repr(counter)[6:-1])


def _snapshot(value: Any) -> Any:
    """A copy of ``value`` that later mutation by the caller cannot change (immutable parts shared)."""
    t = type(value)
    if t is dict:
        return {k: v if type(v) in _ATOMIC else _snapshot(v) for k, v in value.items()}
    if t is list:
        return [v if type(v) in _ATOMIC else _snapshot(v) for v in value]
    if t is tuple:
        return tuple(v if type(v) in _ATOMIC else _snapshot(v) for v in value)
    if t is bytearray or t is memoryview:
        return bytes(value)
    if t in _ATOMIC:
        return value
    return copy.deepcopy(value)


class MethodFilter:
    """``filter(method) -> bool``: include/exclude method names by exact name or glob
    (``buff_*``; ``include=None``: all), decided once per name and cached."""

    _MAX_CACHED = 10_000

    def __init__(self, include: Optional[Iterable[str]], exclude: Optional[Iterable[str]]) -> None:
        self.include = None if include is None else tuple(include)
        self.exclude = tuple(exclude or ())
        self._cache: Dict[Any, bool] = {}

    def __call__(self, method: Any) -> bool:
        try:
            ok = self._cache.get(method)
        except TypeError:  # unhashable: not a method name; let the writer count it as unrecordable
            return self._decide(str(method))
        if ok is None:
            ok = self._decide(method if isinstance(method, str) else str(method))
            if len(self._cache) < self._MAX_CACHED:
                self._cache[method] = ok
        return ok

    def _decide(self, name: str) -> bool:
        return (self.include is None or any(fnmatch.fnmatchcase(name, p) for p in self.include)) and not any(
            fnmatch.fnmatchcase(name, p) for p in self.exclude
        )


class Recorder:
    """Record RPC calls to a trace file from any thread, at the cost of a timestamp and an append.

    ``path``: the trace file (format: ``docs/trace-format.md``). With rotation the files
    are numbered: ``battle.rpct`` becomes ``battle.0001.rpct``, ``battle.0002.rpct``...,
    each a complete trace; :attr:`paths` lists them.

    Options:

    * ``metadata``: JSON-able dict stored in the trace header (game, build, battle id...).
    * ``max_queue``: most calls waiting for the writer; beyond it calls are dropped and
      counted. Under concurrent producers the bound may be exceeded by at most one call
      per producing thread (check-then-append without a lock).
    * ``flush_interval``: seconds between flushes to the operating system (default 1.0);
      a killed process loses at most this much, and the queue.
    * ``compresslevel``: gzip the file (1-9); None (default) writes it plain.
    * ``sample_calls``: record each call with probability 1/N (random, so periodic traffic
      does not alias); the rest are counted as ``sampled_out``. For 1 in N battles use
      :func:`recorder` with ``sample_battles``.
    * ``include`` / ``exclude``: method names or glob patterns to record / to skip.
    * ``rotate_bytes`` / ``rotate_seconds``: start a new numbered file after this many
      (uncompressed) bytes or seconds.
    * ``copy_args``: snapshot args on the calling thread (safe if the caller mutates them
      later, but costs a copy per call); default False: args are encoded by the writer a
      few milliseconds later, so the caller must not mutate them after ``record()``.
    * ``seed``: seed of the call sampling (default: random).
    * ``poll_interval``: how long the idle writer sleeps before looking at the queue again.

    Only bad options raise (ValueError, in the constructor). Nothing else raises into the
    caller: if the file cannot be created or written (disk full...), recording stops with
    one logged error, :attr:`error` says why and every call is counted as lost.
    """

    enabled = True

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        *,
        metadata: Optional[Dict[str, Any]] = None,
        max_queue: int = 65536,
        flush_interval: float = 1.0,
        compresslevel: Optional[int] = None,
        sample_calls: int = 1,
        include: Optional[Iterable[str]] = None,
        exclude: Optional[Iterable[str]] = None,
        rotate_bytes: Optional[int] = None,
        rotate_seconds: Optional[float] = None,
        copy_args: bool = False,
        seed: Optional[int] = None,
        poll_interval: float = 0.01,
    ) -> None:
        _check_options(max_queue, flush_interval, poll_interval, sample_calls, compresslevel, rotate_bytes,
                       rotate_seconds)
        include = (include,) if isinstance(include, str) else None if include is None else tuple(include)
        exclude = (exclude,) if isinstance(exclude, str) else tuple(exclude or ())
        self.path = os.fspath(path)
        self.max_queue = max_queue
        self.flush_interval = float(flush_interval)
        self.poll_interval = float(poll_interval)
        self.compresslevel = compresslevel or None
        self.rotate_bytes = rotate_bytes
        self.rotate_seconds = rotate_seconds
        self.copy_args = copy_args
        self.sample_calls = sample_calls
        self._seed = seed
        options = {  # the header's "recorder" entry (docs/capture.md)
            "max_queue": max_queue, "flush_interval": self.flush_interval, "compresslevel": self.compresslevel,
            "sample_calls": sample_calls, "include": None if include is None else list(include),
            "exclude": list(exclude), "rotate_bytes": rotate_bytes, "rotate_seconds": rotate_seconds,
            "copy_args": copy_args,
        }

        # the hot path's counters: itertools.count (next() is atomic under the GIL, so
        # concurrent producers never lose an increment); the writer thread keeps its own
        self._n_filtered = itertools.count()
        self._n_sampled = itertools.count()
        self._n_full = itertools.count()
        self._n_unrecordable_hot = itertools.count()
        self._n_refused = itertools.count()  # offered after a write error: lost
        self._n_after_close = itertools.count()  # offered after close(): ignored, not in any trace
        self._closed = False

        self._queue: "collections.deque[tuple]" = collections.deque()
        select = None if include is None and not exclude else MethodFilter(include, exclude)
        self.record, self._refuse = self._make_record(select)  # type: ignore[method-assign]
        self._writer = WriterThread(self._queue, self.path, metadata=dict(metadata or {}),
                                    options=options, poll_interval=self.poll_interval,
                                    stats=self.stats, refuse=self._refuse)
        self.paths = self._writer.paths  #: every file written so far, in order
        self._writer.start()
        _open_recorders.add(self)

    # ------------------------------------------------------------------ the hot path

    def record(self, method: str, args: Any = None, direction: str = C2S, conn: Any = 0) -> None:  # noqa: D401
        """Hand one call over to the writer: ``method`` and ``args`` as sent, ``direction``
        ``"c2s"`` or ``"s2c"``, ``conn`` an int or str connection id. Never blocks, never raises.

        (Each instance replaces this method with a closure built by ``_make_record`` for its
        options; this body only serves calls made through the class.)
        """
        vars(self)["record"](method, args, direction, conn)

    def _make_record(self, select: Optional[MethodFilter]) -> Tuple[Callable[..., None], Callable[[], None]]:
        """``record`` built once for these options (no checks it doesn't need), and ``refuse`` (closing it)."""
        q = self._queue
        append = q.append
        now = time.time_ns
        dropped = self._n_full.__next__
        limit = self.max_queue

        def refuse() -> None:
            """After a write error or close(): every later call takes the counting slow path."""
            nonlocal limit
            limit = 0

        def overflow() -> None:
            if limit:
                dropped()
            elif self._closed:
                next(self._n_after_close)
            else:
                next(self._n_refused)

        if select is None and self.sample_calls == 1 and not self.copy_args:

            def record_every(method: str, args: Any = None, direction: str = C2S, conn: Any = 0) -> None:
                if len(q) < limit:
                    append((method, args, now(), direction, conn))
                else:
                    overflow()

            return record_every, refuse

        filtered = self._n_filtered.__next__
        sampled = self._n_sampled.__next__
        chance = 1.0 / self.sample_calls
        rand = random.Random(self._seed).random if self.sample_calls > 1 else None
        snapshot = _snapshot if self.copy_args else None
        unrecordable = self._n_unrecordable_hot.__next__

        def record_chosen(method: str, args: Any = None, direction: str = C2S, conn: Any = 0) -> None:
            if not limit:  # closed or failed
                overflow()
                return
            if select is not None and not select(method):
                filtered()
                return
            if rand is not None and rand() >= chance:
                sampled()
                return
            if len(q) >= limit:
                overflow()
                return
            if snapshot is not None:
                try:
                    args = snapshot(args)
                except Exception:
                    unrecordable()
                    return
            append((method, args, now(), direction, conn))

        return record_chosen, refuse

    # ------------------------------------------------------------------ wrappers

    def wrap(
        self,
        func: Optional[Callable] = None,
        *,
        direction: str = C2S,
        method: str = "method",
        args: str = "args",
        conn: Optional[str] = "conn",
    ) -> Callable:
        """Record every call of a dispatch or send function, then call it.

        ``method``, ``args`` and ``conn`` name the wrapped function's parameters holding
        the RPC's method name, its args and the connection id (``conn=None``: none, 0 is
        recorded). Works on plain and ``async def`` functions and on methods; usable as
        ``rec.wrap(send)`` or as a decorator ``@rec.wrap(direction="s2c")``. Examples::

            dispatch = rec.wrap(dispatch)                       # def dispatch(conn, method, args)
            @rec.wrap(direction="s2c", conn="peer")             # async def send(self, peer, method, args)
        """
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
        if func is None:
            return functools.partial(self.wrap, direction=direction, method=method, args=args, conn=conn)
        names = list(inspect.signature(func).parameters)
        get_method, get_args = _param_getter(names, method, func), _param_getter(names, args, func)
        get_conn = _param_getter(names, conn, func) if conn is not None else (lambda a, kw: 0)
        record = self.record

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*a: Any, **kw: Any) -> Any:
                record(get_method(a, kw), get_args(a, kw), direction, get_conn(a, kw))
                return await func(*a, **kw)

            return async_wrapper

        @functools.wraps(func)
        def wrapper(*a: Any, **kw: Any) -> Any:
            record(get_method(a, kw), get_args(a, kw), direction, get_conn(a, kw))
            return func(*a, **kw)

        return wrapper

    def handler(
        self,
        name: Optional[str] = None,
        *,
        direction: str = C2S,
        conn: Optional[str] = "conn",
        skip: Iterable[str] = ("self", "cls"),
    ) -> Callable[[Callable], Callable]:
        """Decorator for one RPC handler: each call is recorded as method ``name`` (default:
        the function's name) with args a dict of the arguments passed, by parameter name,
        without ``conn`` and ``skip`` (defaults are not filled in: what arrived is recorded)::

            @rec.handler(conn="peer")
            def cast_skill(self, peer, skill, target=None): ...
            # cast_skill(peer=7, skill=5703) records ("cast_skill", {"skill": 5703}, conn=7)
        """
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, not {direction!r}")
        record = self.record

        def decorate(func: Callable) -> Callable:
            method = name or func.__name__
            names = list(inspect.signature(func).parameters)
            dropped = set(skip) | ({conn} if conn else set())
            keep = [(i, n) for i, n in enumerate(names) if n not in dropped]
            get_conn = _param_getter(names, conn, func) if conn is not None else (lambda a, kw: 0)

            def call_args(a: tuple, kw: Dict[str, Any]) -> Dict[str, Any]:
                out = {n: a[i] for i, n in keep if i < len(a)}
                for k, v in kw.items():
                    if k not in dropped:
                        out[k] = v
                return out

            if inspect.iscoroutinefunction(func):

                @functools.wraps(func)
                async def async_wrapper(*a: Any, **kw: Any) -> Any:
                    record(method, call_args(a, kw), direction, get_conn(a, kw))
                    return await func(*a, **kw)

                return async_wrapper

            @functools.wraps(func)
            def wrapper(*a: Any, **kw: Any) -> Any:
                record(method, call_args(a, kw), direction, get_conn(a, kw))
                return func(*a, **kw)

            return wrapper

        return decorate

    # ------------------------------------------------------------------ control

    def flush(self, timeout: Optional[float] = None) -> bool:
        """Wait until every call recorded before this call is written and flushed to the OS.

        Returns False on timeout or if the recorder is closed or failed. Not needed for
        crash safety (the writer flushes every ``flush_interval``); useful in tests and
        before a planned hand-over of the file.
        """
        return self._writer.flush(timeout)

    def close(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Drain the queue, write the end record with the final counters, close the file.

        Returns the final counters (see :data:`COUNTERS`). Safe to call twice; never raises.
        With ``timeout`` (seconds), gives up waiting for the writer after that long.
        """
        self._closed = True
        self._refuse()
        self._writer.stop()
        if self._writer.join(timeout):
            # calls appended by a producer that passed the length check just before close
            # or a write error: they are in no file, count them as lost
            self._writer.discard_queue()
        _open_recorders.discard(self)
        return self.stats()

    @property
    def error(self) -> Optional[str]:
        """Why recording stopped early (a write error), or None."""
        return self._writer.error

    def stats(self) -> Dict[str, Any]:
        """The counters so far (see :data:`COUNTERS`), exact once closed, plus a few gauges."""
        w = self._writer
        counts = {
            "recorded": w.recorded, "pending": len(self._queue) + w.in_flight,
            "filtered_out": _count(self._n_filtered), "sampled_out": _count(self._n_sampled),
            "dropped_queue_full": _count(self._n_full),
            "dropped_unrecordable": w.unrecordable + _count(self._n_unrecordable_hot),
            "dropped_write_error": w.write_lost + _count(self._n_refused),
        }
        out: Dict[str, Any] = {"offered": sum(counts.values()), **counts}
        if w.unrecordable_reasons:
            out["unrecordable_reasons"] = dict(w.unrecordable_reasons)
        out["queue_peak"] = w.queue_peak
        out["bytes"] = w.bytes_written
        out["files"] = len(w.paths)
        after_close = _count(self._n_after_close)
        if after_close:
            out["ignored_after_close"] = after_close
        if w.error is not None:
            out["error"] = w.error
        return out

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "failed" if self.error else "closed" if self._closed else "recording"
        return f"<Recorder {self.path!r} {state}>"

    @staticmethod
    def disabled() -> "NullRecorder":
        """The no-op recorder: same API, records nothing, costs next to nothing."""
        return NULL_RECORDER


def _check_options(max_queue: int, flush_interval: float, poll_interval: float, sample_calls: int,
                   compresslevel: Optional[int], rotate_bytes: Optional[int], rotate_seconds: Optional[float]) -> None:
    """ValueError naming the first of the recorder's options that is out of range."""
    if max_queue < 1:
        raise ValueError(f"max_queue must be at least 1, not {max_queue}")
    if not flush_interval > 0:
        raise ValueError(f"flush_interval must be positive, not {flush_interval}")
    if not poll_interval > 0:
        raise ValueError(f"poll_interval must be positive, not {poll_interval}")
    if sample_calls < 1:
        raise ValueError(f"sample_calls must be at least 1, not {sample_calls}")
    if compresslevel is not None and not 0 <= compresslevel <= 9:
        raise ValueError(f"compresslevel must be 0-9 or None, not {compresslevel}")
    if rotate_bytes is not None and rotate_bytes < 1:
        raise ValueError(f"rotate_bytes must be positive, not {rotate_bytes}")
    if rotate_seconds is not None and not rotate_seconds > 0:
        raise ValueError(f"rotate_seconds must be positive, not {rotate_seconds}")


def _param_getter(names: List[str], name: str, func: Callable) -> Callable[[tuple, Dict[str, Any]], Any]:
    """A fast accessor for parameter ``name`` of ``func`` in a call's ``(args, kwargs)``."""
    if name not in names:
        raise ValueError(f"{getattr(func, '__qualname__', func)!r} has no parameter {name!r} (it has {names})")
    i = names.index(name)

    def get(a: tuple, kw: Dict[str, Any]) -> Any:
        return a[i] if i < len(a) else kw.get(name)

    return get


class NullRecorder:
    """A recorder that records nothing: the same API, chosen once when recording is off.

    ``record`` is an empty method and ``wrap``/``handler`` return the function unchanged,
    so code written against a recorder pays (almost) nothing when recording is off.
    """

    enabled = False
    path = None
    error = None
    paths: tuple = ()

    def record(self, method: str, args: Any = None, direction: str = C2S, conn: Any = 0) -> None:
        """Do nothing."""

    def wrap(self, func: Optional[Callable] = None, **_: Any) -> Callable:
        """Return ``func`` itself (or, as a decorator factory, a decorator that does)."""
        return func if func is not None else (lambda f: f)

    def handler(self, name: Optional[str] = None, **_: Any) -> Callable[[Callable], Callable]:
        """A decorator that returns the handler unchanged."""
        return lambda f: f

    def flush(self, timeout: Optional[float] = None) -> bool:
        return True

    def close(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        return {}

    def stats(self) -> Dict[str, Any]:
        return {}

    def __enter__(self) -> "NullRecorder":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def __repr__(self) -> str:
        return "<NullRecorder>"


NULL_RECORDER = NullRecorder()


def recorder(
    path: Optional[Union[str, "os.PathLike[str]"]],
    *,
    enabled: bool = True,
    sample_battles: int = 1,
    battle: Any = None,
    **options: Any,
) -> Union[Recorder, NullRecorder]:
    """A :class:`Recorder`, or the no-op :class:`NullRecorder` when recording is off.

    Off when ``path`` is None or empty, when ``enabled`` is false, or when this battle is
    not picked by battle sampling: with ``sample_battles=N`` one battle in N is recorded,
    chosen by a stable hash of ``battle`` (any id; the same id always gets the same answer)
    or at random if ``battle`` is None. Other options go to :class:`Recorder`.
    """
    if sample_battles < 1:
        raise ValueError(f"sample_battles must be at least 1, not {sample_battles}")
    if not path or not enabled:
        return NULL_RECORDER
    if sample_battles > 1:
        if battle is None:
            picked = random.randrange(sample_battles) == 0
        else:
            picked = zlib.crc32(repr(battle).encode("utf-8", "surrogatepass")) % sample_battles == 0
        if not picked:
            return NULL_RECORDER
    return Recorder(path, **options)


# Recorders still open at interpreter exit are closed (queue drained, end record written).
# (An open recorder is kept alive by its writer thread anyway, so a plain set.)
_open_recorders: "set[Recorder]" = set()


@atexit.register
def _close_all() -> None:
    for rec in list(_open_recorders):
        rec.close(timeout=5.0)
