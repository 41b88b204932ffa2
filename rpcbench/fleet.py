"""Fleet runs: the size and fidelity pass over many traces, and over chunks of large ones, on Dask.

Bytes and fidelity are per call, so they split by trace and by chunk of a trace and merge
exactly: each task (:func:`tally_piece`) returns a small summary (the exact size histogram,
counts per method, failure groups with their earliest example, trace statistics, sample
candidates) and :class:`FleetPass` adds them up in trace and call order, so the figures are
those of one process reading every trace in turn. What is sent to a worker: the run's
``RunConfig`` (codec ids and settings) and a :class:`Piece` (a file path and a byte range);
the worker opens the file itself, so the traces must be readable from every worker.

A chunk starts at a batch record (found by an index pass, :func:`index_trace`). Codecs with
per-connection state (``zlibstream``, ``zstdstream``, ``delta``) are split by trace only:
their streams run through a trace in order, and the connections of a trace interleave
through the whole file, so a split by connection would make every task read the whole
file anyway. Timing is not distributed (it wants one quiet machine); dask is imported
only when a run asks for it (``--dask``).
"""

from __future__ import annotations

import dataclasses
import glob
import heapq
import logging
import math
import os
import statistics
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from rpc_capture import Call, TraceError, TraceReader, damage_note, open_trace
from rpc_capture.stats import TraceStats

from .codec import Codec
from .config import RunConfig
from .environment import file_sha256
from .errors import BenchError
from .progress import Progress
from .registry import Registry
from .results import CodecResult
from .size_pass import CodecTally, check_call, proportional_quotas
from .training import Training, train_dictionaries

log = logging.getLogger("rpcbench")

TRACE_SUFFIXES = (".rpct", ".rpct.gz", ".jsonl", ".jsonl.gz", ".gz")  #: files a folder's traces are told by
CONFIDENCE = 0.95  #: of the intervals on the figures of a sampled size pass
_TIMING_SALT, _SIZE_SALT, _TRAIN_SALT = 1, 2, 3  #: keep the samples (timing, size pass, training) independent
TRAIN_CALLS = 20_000  #: about how many calls, at most, a fleet's dictionaries are trained on
_MASK = (1 << 64) - 1


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


def priority(seed: int, trace: int, index: int, salt: int) -> float:
    """A seeded pseudo-random number in [0, 1) for one call (splitmix64): the same for a call
    whichever task, chunk or worker sees it, so samples drawn by it merge exactly."""
    z = (seed * 0x9E3779B97F4A7C15 + trace * 0xD1B54A32D192ED03 + index * 0xBF58476D1CE4E5B9 + salt) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return (z ^ (z >> 31)) / 2.0 ** 64


@dataclass(frozen=True)
class Piece:
    """One task: calls of one trace (a byte range starting at a batch record, or the whole file)
    through some of the run's codecs."""

    trace: int  #: position of the trace in the run's list
    path: str
    codecs: Tuple[str, ...]
    start: Optional[int] = None  #: byte offset of the first batch record (None: the file's start)
    stop: Optional[int] = None  #: byte offset where the next piece starts (None: the file's end)
    first_call: int = 0  #: index of the piece's first call in its trace
    count: bool = True  #: count trace statistics and sample candidates (one piece per call does)


@dataclass(frozen=True)
class SamplePlan:
    """How a piece samples: the timing sample's candidates kept per method, and the share of calls
    the size pass measures (1.0: every call)."""

    seed: int
    timing_calls: int
    size_fraction: float = 1.0
    train_share: float = 0.0  #: share of calls held out to train dictionaries (never measured)

    def held_out(self, trace: int, index: int) -> bool:
        """Is this call one the dictionaries are trained on (so no codec is measured on it)?"""
        return self.train_share > 0 and priority(self.seed, trace, index, _TRAIN_SALT) < self.train_share


def index_trace(path: str, salvage: bool, chunk_calls: int, count: bool) -> Tuple[List[Tuple[int, int]], int]:
    """Where a trace can be split: ``(byte offset, calls before)`` of a batch record every
    ``chunk_calls`` calls (empty when it cannot be split: gzip, JSON Lines, ``--salvage``), and its
    number of calls (-1 when not counted: ``count`` False and not splittable)."""
    reader = open_trace(path, salvage)
    if not isinstance(reader, TraceReader) or salvage or not reader.seekable:
        counted = (sum(1 for _ in reader) if not isinstance(reader, TraceReader) else reader.count_calls()) \
            if count else -1
        reader.close()
        return [], counted
    cuts: List[Tuple[int, int]] = []
    for offset, before in reader.batch_starts():
        if not cuts or before - cuts[-1][1] >= chunk_calls:
            cuts.append((offset, before))
    return cuts, reader.calls_read


def plan_pieces(trace: int, path: str, cuts: List[Tuple[int, int]], codecs: Sequence[Codec]) -> List[Piece]:
    """The tasks of one trace: stateless codecs by chunk, codecs with per-connection state whole."""
    stateless = tuple(c.name for c in codecs if not c.per_connection)
    stateful = tuple(c.name for c in codecs if c.per_connection)
    if len(cuts) < 2 or not stateless:
        return [Piece(trace, path, tuple(c.name for c in codecs))]
    pieces = [Piece(trace, path, stateless, start, stop, before)
              for (start, before), (stop, _) in zip(cuts, [*cuts[1:], (None, 0)])]
    if stateful:
        pieces.append(Piece(trace, path, stateful, count=False))
    return pieces


@lru_cache(maxsize=4)
def _registry(config: RunConfig) -> Registry:
    """The run's registry, built once per worker process (plugins loaded, schemas compiled)."""
    return config.registry()


class _Candidates:
    """The ``keep`` calls with the smallest priority per method: a bottom-k sample, mergeable exactly."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.heaps: Dict[str, List[Tuple[float, int]]] = {}  #: method -> (-priority, index) max-heap

    def offer(self, method: str, rank: float, index: int) -> None:
        heap = self.heaps.setdefault(method, [])
        if len(heap) < self.keep:
            heapq.heappush(heap, (-rank, index))
        elif rank < -heap[0][0]:
            heapq.heapreplace(heap, (-rank, index))

    def export(self) -> Dict[str, List[Tuple[float, int]]]:
        return {m: sorted((-r, i) for r, i in heap) for m, heap in self.heaps.items()}


def tally_piece(config: RunConfig, piece: Piece, plan: SamplePlan) -> Dict[str, Any]:
    """Run on a worker: one piece's calls through its codecs; a summary that :class:`FleetPass` merges."""
    registry = _registry(config)
    tallies = [CodecTally(registry.create(cid)) for cid in piece.codecs]
    reader = open_trace(piece.path, config.salvage)
    if piece.start is not None and isinstance(reader, TraceReader):
        reader.seek(piece.start, piece.first_call)
    stats, candidates, measured = TraceStats(), _Candidates(plan.timing_calls), 0
    calls: Iterator[Call] = reader.calls(stop=piece.stop) if isinstance(reader, TraceReader) else iter(reader)
    for index, call in enumerate(calls, piece.first_call):
        if plan.held_out(piece.trace, index):
            continue
        if piece.count:
            stats.add(call)
            candidates.offer(call.method, priority(plan.seed, piece.trace, index, _TIMING_SALT), index)
        if plan.size_fraction < 1 and priority(plan.seed, piece.trace, index, _SIZE_SALT) >= plan.size_fraction:
            continue
        measured += 1
        check_call(tallies, index, call)
    for tally in tallies:
        tally.measure_state()
    last = piece.stop is None
    return {"piece": piece, "tallies": [t.export() for t in tallies], "measured": measured,
            "stats": stats if piece.count else None, "candidates": candidates.export() if piece.count else None,
            "reader": _reader_info(reader) if last else None}


def training_calls(config: RunConfig, trace: int, path: str, plan: SamplePlan) -> List[Call]:
    """Run on a worker: the calls of one trace held out to train the dictionaries, in trace order."""
    return [call for index, call in enumerate(open_trace(path, config.salvage)) if plan.held_out(trace, index)]


def train_across(config: RunConfig, registry: Registry, executor: "Executor",
                 progress: Progress) -> Optional[Training]:
    """A fleet's dictionaries, trained here on a seeded sample of every trace's calls (each call in with
    the same probability, so each trace and method has its share; about ``train_fraction`` of the calls,
    at most about TRAIN_CALLS), which the size pass and the timing sample then skip."""
    def source() -> Tuple[List[Call], int, str]:
        plan = _plan(config, sum(n for _, n in _index(config, executor, True)), True)
        parts = executor.run_all(training_calls, [(config, i, p, plan) for i, p in enumerate(config.trace_files)],
                                 "training sample")
        calls = [call for part in parts for call in part]
        if not calls:
            raise BenchError("the traces hold no calls to train the dictionaries on")
        return calls, len(calls), (f"a seeded sample of {len(calls):,} calls across {len(parts)} traces "
                                   f"({plan.train_share:.2%} of each)")

    return train_dictionaries(config, registry, progress, source)


def _index(config: RunConfig, executor: "Executor", counting: bool) -> List[Tuple[List[Tuple[int, int]], int]]:
    """The index pass over every trace of the run (see :func:`index_trace`)."""
    return executor.run_all(index_trace, [(p, config.salvage, config.chunk_calls, counting)
                                          for p in config.trace_files], "index")


def _plan(config: RunConfig, total: int, train: bool) -> SamplePlan:
    """How pieces sample, given the fleet's number of calls (-1: not counted)."""
    train_share = min(config.train_fraction, TRAIN_CALLS / total) if train and total > 0 else 0.0
    size_fraction = 1.0
    if config.sample_calls is not None and total > 0:
        size_fraction = min(1.0, config.sample_calls / (total * (1 - train_share)))
    return SamplePlan(config.seed, config.sample, size_fraction, train_share)


def _reader_info(reader: Any) -> Dict[str, Any]:
    """What results.json records of a trace file that only the reader of its end knows."""
    return {"format": "jsonl" if reader.version is None else f"rpctrace v{reader.version}",
            "metadata": reader.metadata, "truncated_bytes": reader.truncated_bytes,
            "salvaged": damage_note(reader), "recorder": reader.end or reader.stats}


@dataclass
class TracePass:
    """One trace's merged figures."""

    path: str
    tallies: List[CodecTally]
    keep: int  #: sample candidates kept per method
    stats: TraceStats = field(default_factory=TraceStats)
    measured: int = 0  #: calls the size pass measured (all, unless --sample-calls)
    candidates: Dict[str, List[Tuple[float, int]]] = field(default_factory=dict)
    reader: Dict[str, Any] = field(default_factory=dict)

    def absorb(self, summary: Dict[str, Any]) -> None:
        """Add one piece's summary (pieces of a trace arrive here in call order)."""
        piece: Piece = summary["piece"]
        by_name = {t.codec.name: t for t in self.tallies}
        for name, state in zip(piece.codecs, summary["tallies"]):
            by_name[name].merge(state)
        if summary["stats"] is not None:
            self.stats.merge(summary["stats"])
            self.measured += summary["measured"]
            for method, ranked in summary["candidates"].items():
                self.candidates[method] = heapq.nsmallest(self.keep, [*self.candidates.get(method, []), *ranked])
        self.reader.update(summary["reader"] or {})


class FleetPass:
    """The size and fidelity pass over a fleet of traces: per trace and merged, with the timing sample.

    It offers what :func:`rpcbench.pipeline.run_benchmark` uses of a :class:`~rpcbench.size_pass.SizePass`:
    ``tallies`` (merged over every trace), ``stats``, ``floor`` (None: the floor needs each
    connection's whole stream in one place), ``sample_size`` and :meth:`sample`.
    """

    floor = None

    def __init__(self, config: RunConfig, codecs: List[Codec], paths: Sequence[str]) -> None:
        self.config = config
        self.codecs = codecs
        self.sample_size = config.sample
        self.traces = [TracePass(p, [CodecTally(c) for c in codecs], config.sample) for p in paths]
        self.tallies = [CodecTally(c) for c in codecs]
        self.stats = TraceStats()
        self.example_trace: Dict[Tuple[str, Tuple[str, str]], str] = {}  #: (codec, problem) -> trace of its example
        self.total_calls = -1  #: calls in all traces, counted before a sampled size pass
        self.plan = SamplePlan(config.seed, config.sample)
        self.dask: Optional[Dict[str, Any]] = None  #: the cluster the pass ran on

    def run(self, executor: "Executor", train: bool = False) -> None:
        """Index the traces, run every piece (on the executor: Dask or here), merge. ``train``: the calls
        :func:`train_across` trained the dictionaries on are held out."""
        self.dask = executor.info
        counting = self.config.sample_calls is not None or train
        indexes = _index(self.config, executor, counting)
        self.total_calls = sum(n for _, n in indexes) if counting else -1
        pieces = [p for i, (t, (cuts, _)) in enumerate(zip(self.traces, indexes))
                  for p in plan_pieces(i, t.path, cuts, self.codecs)]
        self.plan = _plan(self.config, self.total_calls, train)
        summaries = executor.run_all(tally_piece, [(self.config, p, self.plan) for p in pieces],
                                     "size and fidelity pass")
        for summary in sorted(summaries, key=lambda s: (s["piece"].trace, s["piece"].first_call)):
            self.traces[summary["piece"].trace].absorb(summary)
        self._merge_traces()

    def _merge_traces(self) -> None:
        for number, trace in enumerate(self.traces):
            if trace.reader.get("salvaged"):
                log.warning("%s", trace.reader["salvaged"])
            if trace.reader.get("truncated_bytes"):
                log.warning("%s: file ends inside a record: dropped %d bytes of an incomplete final record; "
                            "all complete calls were read", trace.path, trace.reader["truncated_bytes"])
            self.stats.merge(dataclasses.replace(  # connection 7 of two servers is two connections
                trace.stats, connections=Counter(_by_trace(number, trace.stats.connections)),
                spans=_by_trace(number, trace.stats.spans)))
            for into, tally in zip(self.tallies, trace.tallies):
                state = tally.export()
                for key in into.merge({**state, "by_connection": _by_trace(number, state["by_connection"])}):
                    self.example_trace[(into.codec.name, key)] = trace.path
        if not self.stats.calls:
            raise BenchError("the traces hold no calls")

    @property
    def measured(self) -> int:
        """Calls the size pass measured, over all traces."""
        return sum(t.measured for t in self.traces)

    def sample(self, _reopen: Any = None) -> List[Call]:
        """The timing sample: ``sample_size`` calls stratified by trace and method (each stratum its
        share, drawn by the seeded priority), fetched from the traces, in fleet order."""
        counts = {(i, m): n for i, t in enumerate(self.traces) for m, n in t.stats.methods.items()}
        wanted: Dict[int, Set[int]] = {}
        for (i, method), quota in proportional_quotas(counts, self.sample_size).items():
            wanted.setdefault(i, set()).update(index for _, index in self.traces[i].candidates[method][:quota])
        calls: List[Call] = []
        for i, indices in sorted(wanted.items()):
            calls.extend(open_trace(self.traces[i].path, self.config.salvage).calls(indices))
        return calls

    @property
    def sampled(self) -> bool:
        """Did the size pass measure a sample of the calls (``--sample-calls``) rather than all?"""
        return self.plan.size_fraction < 1


def _by_trace(number: int, by_connection: Dict[Any, Any]) -> Dict[Any, Any]:
    """A trace's per-connection figures keyed by (trace number, connection), apart from other traces'."""
    return {(number, conn): value for conn, value in by_connection.items()}


def fleet_row(fleet: Any, result: CodecResult, trace: Optional[TracePass] = None) -> CodecResult:
    """A codec's row with what a fleet adds: the trace of each problem's example (merged rows) and,
    after a sampled size pass, the estimates with their intervals. Other runs' rows pass unchanged."""
    if not isinstance(fleet, FleetPass):
        return result
    scope = trace or fleet
    tally = next(t for t in scope.tallies if t.codec.name == result.codec)
    estimate = sampled_estimate(tally, scope.measured, scope.stats.calls) if fleet.sampled else None
    problems = result.problems if trace else tuple(
        dataclasses.replace(p, example_trace=fleet.example_trace.get((result.codec, (p.kind, p.feature))))
        for p in result.problems)
    return dataclasses.replace(result, problems=problems, estimate=estimate)


def trace_entry(trace: TracePass) -> Dict[str, Any]:
    """What results.json records of one trace of a fleet."""
    return {"path": trace.path, "file_bytes": _file_bytes(trace.path), **trace.reader, **trace.stats.summary(),
            "measured_calls": trace.measured}


def fleet_trace_info(config: RunConfig, fleet: FleetPass) -> Dict[str, Any]:
    """What results.json records under ``trace`` for a fleet: the traces together."""
    if len(fleet.traces) == 1:
        return {**trace_entry(fleet.traces[0]), "sha256": file_sha256(config.trace), "traces": 1}
    notes = [t.reader["salvaged"] for t in fleet.traces if t.reader.get("salvaged")]
    return {"path": f"{len(fleet.traces)} traces",
            "format": "fleet", "sha256": None, "file_bytes": sum(_file_bytes(t.path) for t in fleet.traces),
            "metadata": {}, **fleet.stats.summary(),
            "truncated_bytes": sum(t.reader.get("truncated_bytes", 0) for t in fleet.traces),
            "salvaged": "; ".join(notes) or None, "recorder": None, "traces": len(fleet.traces)}


def fleet_settings(config: RunConfig, size_pass: Any) -> Dict[str, Any]:
    """What results.json records of how a fleet's size pass ran ({} for a one-trace run)."""
    if not isinstance(size_pass, FleetPass):
        return {"sizes_only": True, "sample_method": "none"} if config.sizes_only else {"sizes_only": False}
    return {"sizes_only": config.sizes_only, "dask": size_pass.dask, "traces": len(size_pass.traces),
            "size_pass_calls": size_pass.measured,
            "size_pass_method": "seeded sample, uniform over calls" if size_pass.sampled else "every call",
            "sample_method": "stratified by trace and method, seeded" if not config.sizes_only else "none"}


def _file_bytes(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def sampled_estimate(tally: CodecTally, measured: int, total: int) -> Optional[Dict[str, Any]]:
    """Fleet-wide byte total, bytes per call and failures estimated from a uniform sample of
    ``measured`` of ``total`` calls, each with a normal-approximation interval at CONFIDENCE
    (finite population correction included). Calls that failed to encode count 0 bytes in the total."""
    sizes = tally.sizes
    encoded = sum(sizes.values())
    if measured < 2 or not encoded:
        return None
    z = statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)
    fpc = math.sqrt(max(0.0, 1 - measured / total))
    sum1 = sum(n * k for n, k in sizes.items())
    sum2 = sum(n * n * k for n, k in sizes.items())

    def interval(mean: float, var: float, n: int, scale: float) -> List[float]:
        half = z * math.sqrt(max(var, 0.0) / n) * fpc
        return [(mean - half) * scale, mean * scale, (mean + half) * scale]

    per_call = sum1 / measured  # failed calls as 0 bytes: the total's estimator
    per_encoded = sum1 / encoded
    fail_rate = tally.failures / measured
    return {
        "measured_calls": measured, "of_calls": total, "confidence": CONFIDENCE,
        "bytes_total": interval(per_call, (sum2 - measured * per_call ** 2) / (measured - 1), measured, total),
        "bytes_mean": interval(per_encoded, (sum2 - encoded * per_encoded ** 2) / max(encoded - 1, 1), encoded, 1),
        "failures": interval(fail_rate, fail_rate * (1 - fail_rate) * measured / (measured - 1), measured, total),
    }


class Executor:
    """Runs tasks with :meth:`run_all`: on a Dask cluster (``local[:N]`` starts a LocalCluster, else
    the scheduler's address), or without one here, one after another."""

    def __init__(self, spec: Optional[str], progress: Progress) -> None:
        self.spec, self.progress = spec, progress
        self.client: Any = None
        self.cluster: Any = None
        self.info: Optional[Dict[str, Any]] = None  #: the cluster: scheduler, workers, dashboard

    def __enter__(self) -> "Executor":
        if self.spec is None:
            return self
        self.client, self.cluster = connect(self.spec)
        workers = len(self.client.scheduler_info().get("workers", {}))
        self.info = {"scheduler": self.client.scheduler.address, "workers": workers,
                     "dashboard": self.client.dashboard_link}
        log.info("dask: %d workers, scheduler %s, dashboard %s", workers, self.client.scheduler.address,
                 self.client.dashboard_link)
        return self

    def run_all(self, function: Callable[..., Any], args: List[tuple], what: str) -> List[Any]:
        """``function(*a)`` for each ``a`` of ``args``, results in order; ``what`` names them in progress."""
        return self._on_dask(function, args, what) if self.client is not None else self._here(function, args, what)

    def __exit__(self, *exc: Any) -> None:
        if self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()

    def _here(self, function: Callable[..., Any], args: List[tuple], what: str) -> List[Any]:
        out = []
        for n, a in enumerate(args, 1):
            out.append(function(*a))
            self.progress(what, f"{n} of {len(args)} tasks", n, len(args))
        return out

    def _on_dask(self, function: Callable[..., Any], args: List[tuple], what: str) -> List[Any]:
        from dask.distributed import as_completed

        futures = [self.client.submit(function, *a, pure=False, retries=1) for a in args]
        position = {f.key: i for i, f in enumerate(futures)}
        out: List[Any] = [None] * len(futures)
        for n, future in enumerate(as_completed(futures), 1):
            out[position[future.key]] = _result(future)
            self.progress(what, f"{n} of {len(args)} tasks on dask", n, len(args))
        return out


def _result(future: Any) -> Any:
    """A task's result; a trace that cannot be read, or a task that killed worker after worker
    (a codec that crashes the process), as a BenchError."""
    from dask.distributed import KilledWorker

    try:
        return future.result()
    except TraceError as e:
        raise BenchError(str(e)) from None
    except KilledWorker as e:
        raise BenchError(f"dask: {e}") from None


def connect(spec: str) -> Tuple[Any, Any]:
    """A Dask client (and the LocalCluster it started, if any) for ``--dask``: ``local``, ``local:N``
    (N worker processes of one thread each) or a scheduler address such as ``tcp://host:8786``."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise BenchError("--dask needs the dask[distributed] package (pip install -r requirements.txt)") from None
    logging.getLogger("distributed").setLevel(logging.WARNING)  # its start-up chatter is not the run's news
    if spec == "local" or spec.startswith("local:"):
        workers = int(spec.partition(":")[2] or os.cpu_count() or 1)
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                               silence_logs=logging.ERROR)
        return Client(cluster), cluster
    try:
        return Client(spec, timeout="20s"), None
    except (OSError, TimeoutError) as e:
        raise BenchError(f"--dask {spec}: cannot reach the scheduler ({e})") from None


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
