"""The floor: how few bytes per call a trace's calls take when a strong compressor sees each
connection's whole stream at once, so a team sees how much any codec leaves on the table.

Each connection and direction's calls, as compact JSON (the ``json`` codec), are joined and
compressed whole by lzma -9 in the ``.lzma`` format (LZMA1 at preset 9, its dictionary cut to
the stream's size; a 13-byte header says how to decode it), and the streams' bytes are summed.
No real-time codec can do this (it needs the whole stream before sending anything): it is a
bound to compare against, not a candidate. The streams are kept in memory up to
``FLOOR_MAX_BYTES`` of JSON; a longer trace has its floor computed on the calls up to there.

Why this one compressor (measured in docs/codecs.md): lzma alone gives within 1 % of the best of
xz -9 and zstd-19 per stream (the floor until 2026-11-27) at half the cost.

Bounded work (issue 28): LZMA's cost per byte rises on long streams, so a trace of more than
``FLOOR_BUDGET`` bytes of JSON is not compressed whole. The budget is spread over the streams (each
the same share, a short stream taking only its length); a stream over twice its share is estimated:
its first ``WINDOW_BYTES`` compressed whole, then windows of that length at seeded places, one in
each of as many equal stretches of the rest as its share holds (at least ``WINDOWS_MIN``), each
compressed on its own, of which the bytes out for the last ``1 - CONTEXT`` of the window (the first
part being its context, so that LZMA has learnt the stream again) per JSON byte stand for that
stretch; each stream's windows are placed by its own seed (its place and length). The estimate is the
prefix's bytes plus the windows' mean rate times the rest's JSON bytes, with a 95 % interval from the
windows' spread (successive differences, as for a systematic sample), by Student's t at the
Welch-Satterthwaite degrees of freedom of the streams' spreads (two windows a stream give few).
Its error against the exact floor on long simulated traces is in docs/codecs.md. A trace within the
budget (the bundled samples, the Minecraft example) gets the exact floor, as before.
"""

from __future__ import annotations

import bisect
import lzma
import random
import time
from array import array
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from rpc_capture import Call

from .codec import Codec, stream_key

FLOOR_MAX_BYTES = 64 << 20  #: JSON bytes kept for the floor (about 370,000 calls of the bundled kind)
FLOOR_BUDGET = 8 << 20  #: JSON bytes compressed per trace; a longer trace's long streams are estimated
WINDOW_BYTES = 160 << 10  #: JSON bytes of a window of an estimated stream, and of its prefix
CONTEXT = 0.8  #: of a window, the context before its mark; the rest is rated
WINDOWS_MIN = 2  #: windows per estimated stream at the least (more as its share of the budget allows)
CONFIDENCE = 0.95  #: of the estimate's interval (Student's t, its degrees of freedom by Welch-Satterthwaite)
COMPRESSOR = "lzma -9"  #: what the floor compresses each stream with, as results and reports name it
LZMA_PRESET = 9
LZMA_DICT_MAX = 64 << 20  #: preset 9's dictionary
FEED_BYTES = 16 << 10  #: input per call to the compressor, so that its output fits one buffer (:func:`fed`)
THREADS = 2  #: streams compressed at once (lzma releases the GIL)


@dataclass(frozen=True)
class FloorTotals:
    """One trace's floor as sums (:meth:`Floor.totals`): the sums of several traces add up to the floor of
    them together (:func:`floor_figures`)."""

    bytes: float  #: compressed bytes of every stream: exact, or the exact part plus the estimated
    json: int  #: JSON bytes of the calls the floor is over
    compressed_json: int  #: JSON bytes the compressor read (``json`` when exact; windows' contexts counted)
    streams: int
    estimated_streams: int  #: streams over twice their share of the budget, estimated
    variance: float  #: of the estimated bytes (0 when exact)
    calls: int  #: calls the floor is over
    of_calls: int  #: calls offered
    seconds: float
    codec: str
    variance_squares: float  #: sum over the variance's parts of part² / its degrees of freedom


@dataclass(frozen=True)
class FloorFigures:
    """The floor of one trace or of several together, per call, and what it covered: ``trace.floor`` of
    results.json (:meth:`record`; docs/results-format.md)."""

    bytes_per_call: float
    compressor: str
    json_bytes_per_call: float
    codec: str
    streams: int
    calls: int
    of_calls: int
    seconds: float
    estimated: bool  #: some stream's bytes were estimated from its prefix and windows
    compressed_share: float  #: of the JSON, the share the compressor read (1.0 when exact)
    ci_half_width: float  #: B/call either side of ``bytes_per_call``, 95 % (0.0 when exact)

    def record(self) -> Dict[str, Any]:
        """What results.json keeps of it."""
        return asdict(self)


class Floor:
    """Collects each stream's compact-JSON calls of one trace; :meth:`totals` compresses them."""

    def __init__(self, codec: Codec, max_bytes: int = FLOOR_MAX_BYTES, budget: int = FLOOR_BUDGET) -> None:
        self._encode = codec.encode
        self.codec = codec.name
        self.max_bytes = max_bytes
        self.budget = budget
        self.calls = 0  #: calls kept
        self.seen = 0  #: calls offered
        self._bytes = 0
        self._streams: Dict[Any, Tuple[bytearray, "array[int]"]] = {}  #: stream -> its JSON, each call's end in it

    def add(self, call: Call) -> None:
        """Keep one call of the trace (until ``max_bytes``; calls JSON cannot carry are left out). A stream is
        kept as one buffer and its calls' ends (8 bytes a call), not a bytes object per call (about 50 more)."""
        self.seen += 1
        if self._bytes >= self.max_bytes:
            return
        try:
            data = self._encode(call)
        except Exception:
            return
        stream = self._streams.get(stream_key(call))
        if stream is None:
            stream = self._streams[stream_key(call)] = (bytearray(), array("q"))
        stream[0].extend(data)
        stream[1].append(len(stream[0]))
        self.calls += 1
        self._bytes += len(data)

    def totals(self) -> Optional[FloorTotals]:
        """The floor's sums over this trace's streams (None without calls): each stream compressed whole, or
        estimated when it is over twice its share of the budget."""
        if not self.calls:
            return None
        started = time.perf_counter()
        streams = [Stream(data, ends, index) for index, (data, ends) in enumerate(self._streams.values())]
        share = budget_share([s.size for s in streams], self.budget)
        planned = [s.jobs(share) for s in streams]
        jobs = sorted((job for each in planned for job in each), key=lambda job: -job.size)
        with ThreadPoolExecutor(THREADS) as pool:
            sizes = dict(zip(jobs, pool.map(Job.compressed, jobs)))
        parts = [s.estimate(each, [sizes[job] for job in each]) for s, each in zip(streams, planned)]
        return FloorTotals(sum(p.bytes for p in parts), self._bytes, sum(job.size for job in jobs), len(streams),
                           sum(len(each) > 1 for each in planned), sum(p.variance for p in parts), self.calls,
                           self.seen, time.perf_counter() - started, self.codec,
                           sum(p.variance ** 2 / p.df for p in parts if p.df))


Sizes = Tuple[int, int]  #: a job's compressed bytes, and the bytes out after its mark (before the flush)


@dataclass(frozen=True, eq=False)
class Job:
    """Some of a stream's calls through one compressor, their first ``mark`` JSON bytes before the mark."""

    data: bytes  #: the calls' compact JSON, one after another
    mark: int = 0

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def rated(self) -> int:
        """JSON bytes after the mark."""
        return len(self.data) - self.mark

    def compressed(self) -> Sizes:
        """The job's compressed bytes, and those out after the mark. The bytes out at the mark and at the end
        before the flush both fall short by the input the encoder holds back (its lookahead, under 1 KiB), so
        their difference is that of the part after the mark, shifted by it."""
        if not self.mark:
            return compressed_size(self.data), 0
        compressor = lzma.LZMACompressor(format=lzma.FORMAT_ALONE, filters=_filters(self.size))
        data = memoryview(self.data)
        before, after = fed(compressor, data[:self.mark]), fed(compressor, data[self.mark:])
        return before + after + len(compressor.flush()), after


class Stream:
    """One connection and direction's calls, and how the floor takes its bytes within a share of the budget
    (whole, or its prefix and windows: the module's docstring)."""

    def __init__(self, data: bytearray, ends: "array[int]", index: int) -> None:
        self.data = data
        self.ends = ends  #: JSON bytes up to and including each call
        self.size = ends[-1]
        self.index = index  #: its place among the trace's streams (by first call), which seeds its windows

    def jobs(self, share: float) -> List[Job]:
        """What to compress: the whole stream, or its prefix and windows."""
        length = WINDOW_BYTES
        if self.size <= max(2 * share, 2 * (WINDOWS_MIN + 1) * length):
            return [Job(bytes(self.data))]
        prefix = max(2, self._call_at(length))
        end, rated = self.ends[prefix - 1], length * (1 - CONTEXT)
        jobs = [Job(bytes(self.data[:end]))]
        place = random.Random(f"{self.index}/{self.size}")  # each stream its own seed: the streams of one battle,
        count = max(WINDOWS_MIN, int(share // length) - 1)  # alike in time and often in length, not sampled alike
        for k in range(count):  # each window whole within the stream, after the prefix
            start = end + (self.size - length - end) * (k + place.random()) / count
            jobs.append(self._window(start, start + length - rated, self._call_at(start + length), prefix))
        return jobs

    def _window(self, start: float, mark: float, last: int, least: int) -> Job:
        """The calls from JSON byte ``start`` to call ``last``, marked at byte ``mark`` (at least a call each
        side of the mark; none before call ``least``)."""
        last = min(len(self.ends), max(last, least + 2))
        first = min(max(least, self._call_at(start)), last - 2)
        at = min(last - 1, max(first + 1, self._call_at(mark)))
        begin = self.ends[first - 1] if first else 0
        return Job(bytes(self.data[begin:self.ends[last - 1]]), self.ends[at - 1] - begin)

    def _call_at(self, offset: float) -> int:
        """How many calls end at or before JSON byte ``offset``."""
        return bisect.bisect_right(self.ends, offset)

    def estimate(self, jobs: Sequence[Job], sizes: Sequence[Sizes]) -> "Part":
        """The stream's bytes from its :meth:`jobs` and their sizes: compressed whole, or the prefix's bytes and
        the rest's JSON bytes at the windows' mean rate."""
        if len(jobs) == 1:
            return Part(float(sizes[0][0]))
        rates = [after / window.rated for window, (_, after) in zip(jobs[1:], sizes[1:])]
        rest = self.size - jobs[0].size
        mean = sum(rates) / len(rates)
        spread = sum((b - a) ** 2 for a, b in zip(rates, rates[1:])) / (2 * (len(rates) - 1))
        return Part(sizes[0][0] + mean * rest, spread / len(rates) * rest ** 2, len(rates) - 1)


@dataclass(frozen=True)
class Part:
    """One stream's bytes (exact, or its prefix's plus the rest at its windows' rate) and their variance (from
    the windows' successive differences), which has ``df`` degrees of freedom (0 when exact)."""

    bytes: float
    variance: float = 0.0
    df: int = 0


def fed(compressor: "lzma.LZMACompressor", data: memoryview) -> int:
    """The bytes out of ``compressor`` for ``data``, fed in pieces of ``FEED_BYTES``: liblzma encodes only while
    input is left to take in, so one call whose output fills Python's first buffer (32 KiB) after all its
    input is taken returns only that, the rest coming out at the next call (a window's mark misplaced)."""
    return sum(len(compressor.compress(data[at:at + FEED_BYTES])) for at in range(0, len(data), FEED_BYTES))


def budget_share(sizes: Sequence[int], budget: int) -> float:
    """The most JSON bytes a stream may have compressed so that all together take at most ``budget``, a
    stream shorter than that taking only its length (infinite when every stream fits)."""
    left, count = float(budget), len(sizes)
    for done, size in enumerate(sorted(sizes)):
        if size * (count - done) > left:
            return left / (count - done)
        left -= size
    return float("inf")


def _filters(stream_bytes: int) -> List[Dict[str, int]]:
    return [{"id": lzma.FILTER_LZMA1, "preset": LZMA_PRESET, "dict_size": dictionary_size(stream_bytes)}]


def compressed_size(stream: bytes) -> int:
    """One stream's bytes compressed whole by lzma -9 (``.lzma`` format), its dictionary the stream's size
    as a power of two: the same bytes as preset 9's 64 MiB on any stream up to that, without setting up a
    64 MiB dictionary and match finder per stream."""
    return len(lzma.compress(stream, format=lzma.FORMAT_ALONE, filters=_filters(len(stream))))


def dictionary_size(stream_bytes: int) -> int:
    """LZMA's dictionary for a stream: its size as a power of two, at least LZMA's least (4 KiB), at most
    preset 9's 64 MiB (a longer stream gets no bigger one)."""
    return min(LZMA_DICT_MAX, 1 << max(12, (stream_bytes - 1).bit_length()))


def floor_figures(totals: Sequence[Optional[FloorTotals]]) -> Optional[FloorFigures]:
    """The floor of one trace or of several together, from their :meth:`Floor.totals`: bytes per call of the
    whole-stream compression, and what it covered (None without any)."""
    parts = [t for t in totals if t]
    if not parts:
        return None
    calls, json = sum(p.calls for p in parts), sum(p.json for p in parts)
    estimated = any(p.estimated_streams for p in parts)
    return FloorFigures(
        bytes_per_call=sum(p.bytes for p in parts) / calls, compressor=COMPRESSOR, json_bytes_per_call=json / calls,
        codec=parts[0].codec, streams=sum(p.streams for p in parts), calls=calls,
        of_calls=sum(p.of_calls for p in parts), seconds=round(sum(p.seconds for p in parts), 2),
        estimated=estimated, compressed_share=sum(p.compressed_json for p in parts) / json if estimated else 1.0,
        ci_half_width=half_width(sum(p.variance for p in parts), sum(p.variance_squares for p in parts)) / calls)


def half_width(variance: float, squares: float) -> float:
    """Half the ``CONFIDENCE`` interval of an estimate of ``variance`` whose parts' squares over their degrees
    of freedom sum to ``squares``: Student's t at the Welch-Satterthwaite degrees of freedom (a few windows a
    stream give the variance few, and the normal's 1.96 would be too narrow)."""
    if not variance:
        return 0.0
    from scipy import stats  # only for an estimated floor: it takes about 0.5 s to import

    return float(stats.t.ppf(0.5 + CONFIDENCE / 2, variance ** 2 / squares)) * variance ** 0.5
