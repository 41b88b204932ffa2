"""The run's trace files (:func:`resolve_traces`: files, folders, patterns), where each can be split into
tasks (:class:`TraceIndex`: batch records' offsets, read from record headers without decoding a call), and a
run of a trace's calls between two of them (:class:`CallRange`; :func:`halves`: the run's calls in two)."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence, Tuple, Union

from rpc_capture import Call, JsonlReader, TraceReader, open_trace

from .config import RunConfig
from .errors import BenchError

TRACE_SUFFIXES = (".rpct", ".rpct.gz", ".jsonl", ".jsonl.gz", ".gz")  #: files a folder's traces are told by


def resolve_traces(specs: Sequence[str]) -> List[str]:
    """The trace files that files, folders (their trace files, sorted) and glob patterns name, in order."""
    found: List[str] = []
    for spec in specs:
        if os.path.isdir(spec):
            names = sorted(n for n in os.listdir(spec) if n.endswith(TRACE_SUFFIXES) and not n.startswith("."))
            paths = [os.path.join(spec, n) for n in names]
            what = f"{spec}: no trace files (*.rpct, *.jsonl, .gz) in the folder"
        elif glob.has_magic(spec) and not os.path.exists(spec):
            paths = sorted(p for p in glob.glob(spec) if os.path.isfile(p))
            what = f"{spec}: no file matches the pattern"
        else:
            paths, what = [spec], ""
        if not paths:
            raise BenchError(what)
        found.extend(p for p in paths if p not in found)
    return found


@dataclass(frozen=True)
class TraceIndex:
    """Where a trace can be split: ``(byte offset, calls before)`` of a batch record every ``chunk_calls``
    calls (empty when it cannot be split: gzip, JSON Lines, ``--salvage``), and its number of calls
    (-1 when not counted)."""

    path: str
    cuts: Tuple[Tuple[int, int], ...]
    calls: int


def index_trace(path: str, salvage: bool, chunk_calls: int, count: bool) -> TraceIndex:
    """The :class:`TraceIndex` of one trace: record headers and checksums only, no call decoded (a binary
    trace that cannot be split has its calls counted from its record headers, for the progress line; JSON
    Lines are read whole to count theirs, and only if ``count``)."""
    reader = open_trace(path, salvage)
    if not isinstance(reader, TraceReader) or salvage or not reader.seekable:
        counted = reader.count_calls() if isinstance(reader, TraceReader) else sum(1 for _ in reader) if count else -1
        reader.close()
        return TraceIndex(path, (), counted)
    cuts: List[Tuple[int, int]] = []
    for offset, before in reader.batch_starts():
        if not cuts or before - cuts[-1][1] >= chunk_calls:
            cuts.append((offset, before))
    return TraceIndex(path, tuple(cuts), reader.calls_read)


def index_traces(config: RunConfig, count: bool) -> List[TraceIndex]:
    """The index pass over every trace of the run, here (see :func:`index_trace`)."""
    return [index_trace(p, config.salvage, config.chunk_calls, count) for p in config.trace_files]


@dataclass(frozen=True)
class CallRange:
    """Calls of one trace: from the batch record at byte ``start`` (None: the file's start), whose first call is
    the trace's ``first_call``-th, to the batch record at byte ``stop`` (None: the file's end)."""

    path: str
    start: Optional[int] = None
    first_call: int = 0
    stop: Optional[int] = None

    def open(self, salvage: bool) -> Tuple[Union[TraceReader, JsonlReader], Iterator[Call]]:
        """The trace's reader, and the range's calls read from it."""
        reader = open_trace(self.path, salvage)
        if not isinstance(reader, TraceReader):
            return reader, iter(reader)
        if self.start is not None:
            reader.seek(self.start, self.first_call)
        return reader, reader.calls(stop=self.stop)


Halves = Tuple[Tuple[CallRange, ...], Tuple[CallRange, ...]]


def halves(traces: Sequence[TraceIndex]) -> Optional[Halves]:
    """The run's calls (its traces' one after the other) in two runs of about as many calls each, cut at a batch
    record of a trace's index (:attr:`TraceIndex.cuts`) or between two traces; None when there is no such cut
    (one trace that cannot be split) or a trace's calls were not counted."""
    if any(t.calls < 0 for t in traces):
        return None
    total = sum(t.calls for t in traces)
    best: Optional[Tuple[int, int, Optional[int], int]] = None  #: distance from the middle, trace, offset, calls before
    before = 0
    for number, trace in enumerate(traces):
        for offset, calls in [(None, 0), *trace.cuts[1:]]:  # None: the trace's start
            at = before + calls
            if 0 < at < total and (best is None or abs(2 * at - total) < best[0]):
                best = (abs(2 * at - total), number, offset, calls)
        before += trace.calls
    if best is None:
        return None
    _, number, offset, calls = best
    whole = [CallRange(t.path) for t in traces]
    if offset is None:
        return tuple(whole[:number]), tuple(whole[number:])
    path = traces[number].path
    return (*whole[:number], CallRange(path, stop=offset)), (CallRange(path, offset, calls), *whole[number + 1:])
