"""The size and fidelity pass: every call of a run's traces (one or many) through every codec, merged.

:class:`SizePass` splits the run into tasks (:mod:`rpcbench.pieces`: a trace's byte range through some
codecs, and a floor task per trace), runs them on an executor (:mod:`rpcbench.executors`: here, watched
forked processes, or Dask workers) and merges their summaries exactly (:mod:`rpcbench.tally`,
:mod:`rpcbench.sampling`), per trace (:class:`TracePass`) and over every trace. A single trace is a fleet of
one: the same tasks, sampler, hold-out and floor. Timing happens afterwards, on the sample
(:mod:`rpcbench.timing`).
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple

from rpc_capture import Call, open_trace
from rpc_capture.stats import TraceStats

from .codec import Codec
from .config import RunConfig
from .environment import file_sha256
from .errors import BenchError
from .executors import Executor, Task
from .floor import floor_figures
from .link import link_figures, merged
from .packet_timing import PacketPlan, tick_windows
from .pieces import FloorTask, LinkTask, Piece, PieceTask, plan_pieces
from .results import Problem
from .results_check import CONNECTION_BYTES, CONNECTION_COLUMNS
from .sampling import SamplePlan, proportional_quotas, sampled_estimate
from .tally import CodecTally
from .trace_index import TraceIndex
from .wire import MIN_GAPS, TRANSPORTS, TickGuess, WirePolicy, resolve, wire_figures

log = logging.getLogger("rpcbench")


@dataclass(frozen=True)
class PassFigures:
    """What the size pass adds to a codec's tally for its row of the results (:meth:`SizePass.figures`)."""

    problems: Tuple[Problem, ...]  #: each with the trace its example came from
    estimate: Optional[Dict[str, Any]]  #: a sampled pass's estimates with their intervals (None: every call)
    wire: Tuple[Dict[str, Any], ...]  #: its packets per --wire policy (none once the codec failed)
    link: Tuple[Dict[str, Any], ...] = ()  #: its replays over the lossy link per policy and loss rate (--loss)


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
    floor: Optional[Dict[str, Any]] = None  #: the floor's totals (see :func:`rpcbench.floor.floor_figures`)
    tick: Optional[TickGuess] = None  #: the tick its timestamps show (batched --wire only)
    link: Dict[str, Any] = field(default_factory=dict)  #: per codec, its lossy link replays (:class:`LinkTask`)

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
        self.tick = self.tick or summary["tick"]

    def entry(self) -> Dict[str, Any]:
        """What results.json records of this trace."""
        return {"path": self.path, "format": self.reader.get("format"), "sha256": file_sha256(self.path),
                "file_bytes": _file_bytes(self.path), "metadata": self.reader.get("metadata"),
                **self.stats.summary(), "truncated_bytes": self.reader.get("truncated_bytes"),
                "salvaged": self.reader.get("salvaged"), "recorder": self.reader.get("recorder"),
                "measured_calls": self.measured, "floor": floor_figures([self.floor])}


class SizePass:
    """The size and fidelity pass over a run's traces (one or many): per trace and merged, with the
    trace record, the floor and the timing sample.

    The pass is split into tasks (:func:`plan_pieces`; one floor task per trace) that run on an
    executor (:mod:`rpcbench.executors`: here, watched forks or Dask); each returns a summary that
    adds up exactly (size histogram, counts, problem groups with their earliest example, trace
    statistics, bottom-k sample candidates), merged in trace and call order: the figures are those
    of one process reading every trace in turn, whatever the executor, chunks or workers.
    """

    def __init__(self, config: RunConfig, codecs: List[Codec], index: Sequence[TraceIndex],
                 held: Tuple[int, ...] = ()) -> None:
        self.config, self.codecs, self.index = config, codecs, list(index)
        self.sample_size = config.sample
        self.traces = [TracePass(t.path, [CodecTally(c) for c in codecs], config.sample) for t in self.index]
        self.tallies = [CodecTally(c) for c in codecs]
        self.stats = TraceStats()
        self.example_trace: Dict[Tuple[str, Tuple[str, str]], str] = {}  #: (codec, problem) -> trace of its example
        self.plan = _plan(config, self.index, held)
        self.floor: Optional[Dict[str, Any]] = None  #: the floor of every trace together (None: --no-floor)
        self.dask: Optional[Dict[str, Any]] = None  #: the cluster the pass ran on
        self.ticks: List[Dict[str, Any]] = []  #: per trace, the tick its timestamps show (batched --wire only)
        self.policies: List[Tuple[WirePolicy, ...]] = []  #: per trace, its --wire policies resolved (tick:auto)

    def run(self, executor: Executor) -> None:
        """Run every task on ``executor`` and merge the summaries."""
        pieces = plan_pieces(self.index, self.codecs, executor.slots, self._wire())
        floors: List[Task] = [FloorTask(self.config, i, t.path, self.plan)
                              for i, t in enumerate(self.index)] if self.config.floor else []
        # the floors (and link replays) after the whole-trace pieces, the longest, before the chunks: a floor
        # compresses on both cores (rpcbench.floor.THREADS), so it packs well once those end, and the chunks fill
        # in around it; first, it kept a whole-trace piece waiting for its slot and that piece ran alone at the end
        names = tuple(c.name for c in self.codecs)
        links: List[Task] = [LinkTask(self.config, i, t.path, self.plan, names)
                             for i, t in enumerate(self.index)] if self.config.link.loss else []
        whole = sum(p.start is None for p in pieces)
        tasks = [PieceTask(self.config, p, self.plan) for p in pieces]
        answers = executor.run_all([*tasks[:whole], *floors, *links, *tasks[whole:]], "size pass: reading",
                                   sum(max(t.calls, 0) for t in self.index))
        self.dask = executor.info
        for trace, totals in zip(self.traces, answers[whole:whole + len(floors)]):
            trace.floor = totals
        for replays in answers[whole + len(floors):whole + len(floors) + len(links)]:
            self.traces[replays["trace"]].link = replays["states"]
        summaries = answers[:whole] + answers[whole + len(floors) + len(links):]
        for summary in sorted(summaries, key=lambda s: (s["piece"].trace, s["piece"].first_call)):
            self.traces[summary["piece"].trace].absorb(summary)
        self._note_ticks()
        self._merge_traces()
        self.floor = floor_figures([t.floor for t in self.traces])

    def _wire(self) -> Tuple[WirePolicy, ...]:
        """The run's --wire policies (each piece reads its trace's tick itself: :func:`_wire_of`)."""
        policies = self.config.wire
        if any(p.batched for p in policies) and self.sampled:
            raise BenchError("--wire: batching by tick needs every call of a connection: not with --sample-calls")
        if self.config.link.loss and self.sampled:
            raise BenchError("--loss: the lossy link replays every call of a connection: not with --sample-calls")
        return policies

    def _note_ticks(self) -> None:
        """Record and tell the tick each trace's timestamps showed (batched --wire only), and each trace's
        policies resolved by it, as its pieces resolved them."""
        self.policies = [self.config.wire if t.tick is None else resolve(self.config.wire, t.tick)
                         for t in self.traces]
        for trace in self.traces:
            if trace.tick is None:
                continue
            self.ticks.append({"path": trace.path, **dataclasses.asdict(trace.tick)})
            auto = any(p.auto for p in self.config.wire)
            if trace.tick.tick_ms is None and trace.tick.gaps < MIN_GAPS:
                log.warning("%s: too few server-to-client calls with distinct timestamps to batch by tick: "
                            "per-call only", trace.path)
            elif trace.tick.tick_ms is None:
                if auto:
                    log.warning("%s: no server tick in the gaps between %d server flushes: tick:auto left out",
                                trace.path, trace.tick.gaps)
            elif auto:
                log.info("%s: server tick %.2f ms (%.1f Hz), phase coherence %.3f over %d flushes", trace.path,
                         trace.tick.tick_ms, 1000 / trace.tick.tick_ms, trace.tick.confidence, trace.tick.gaps)

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
            raise BenchError(f"{self.traces[0].path}: the trace holds no calls" if len(self.traces) == 1
                             else "the traces hold no calls")

    @property
    def measured(self) -> int:
        """Calls the size pass measured, over all traces."""
        return sum(t.measured for t in self.traces)

    @property
    def sampled(self) -> bool:
        """Did the size pass measure a sample of the calls (``--sample-calls``) rather than all?"""
        return self.plan.size_fraction < 1

    def sample(self) -> List[Call]:
        """The timing sample: ``sample_size`` calls stratified by trace and method (each stratum its
        share, the calls of smallest seeded priority), fetched from the traces, in trace order."""
        calls: List[Call] = []
        for i, indices in sorted(self._sample_indices().items()):
            calls.extend(open_trace(self.traces[i].path, self.config.salvage).calls(indices))
        return calls

    def _sample_indices(self) -> Dict[int, Set[int]]:
        """Per trace, the indices of its calls in the timing sample."""
        counts = {(i, m): n for i, t in enumerate(self.traces) for m, n in t.stats.methods.items()}
        wanted: Dict[int, Set[int]] = {}
        for (i, method), quota in proportional_quotas(counts, self.sample_size).items():
            wanted.setdefault(i, set()).update(index for _, index in self.traces[i].candidates[method][:quota])
        return wanted

    def packet_plan(self) -> Optional[PacketPlan]:
        """What the timing of packets replays: under the run's first batched --wire policy (each trace's own
        tick for tick:auto), the tick windows whose first call is in the timing sample, every measured call
        of them, packed later per codec as the size pass packs them. Choosing windows by their first call
        times each window as likely whatever its size (windows holding any sampled call would favour big
        ones, cheaper per call). None without a batched policy. Reads each sampled trace once more."""
        batched = next((p for p in self.config.wire if p.batched), None)
        if batched is None:
            return None
        windows: List[Tuple[Call, ...]] = []
        for i, wanted in sorted(self._sample_indices().items()):
            policy = next((p for p in self.policies[i] if p.text == batched.text), None)
            if policy is not None:  # None: no usable timestamps, the trace is sent per call only
                windows.extend(tuple(calls) for first, calls in self._windows(i, policy) if first in wanted)
        return PacketPlan(batched.text, batched.mtu, tuple(windows)) if windows else None

    def _windows(self, trace: int, policy: WirePolicy) -> Iterator[Tuple[int, List[Call]]]:
        """A trace's measured calls in the tick windows of ``policy``, as the size pass sends them (windows start
        at the trace's first timestamp, held out or not): (index of the window's first call, its calls)."""
        calls = enumerate(open_trace(self.traces[trace].path, self.config.salvage))
        first = next(calls, None)
        if first is None:
            return iter(())
        kept = ((index, call) for index, call in itertools.chain([first], calls)
                if not self.plan.held_out(trace, index))
        return tick_windows(kept, policy, first[1].t)

    def figures(self, tally: CodecTally, trace: Optional[TracePass] = None) -> PassFigures:
        """What the pass adds to a codec's tally (merged, or of one ``trace``) for its row of the results: the
        trace of each problem's example, the estimates of a sampled pass with their intervals, its packets."""
        scope = trace or self
        estimate = (sampled_estimate(tally.sizes, tally.failures, scope.measured, scope.stats.calls)
                    if self.sampled else None)
        name = tally.codec.name
        problems = tuple(dataclasses.replace(p, example_trace=trace.path if trace else self.example_trace.get(
            (name, (p.kind, p.feature)))) for p in tally.problem_list())
        carrier = TRANSPORTS[self.config.transport]
        wire = tuple(wire_figures(w.policy, w.export(), carrier, self.config.packet_overhead)
                     for w in tally.wire.values()) if not tally.error else ()
        return PassFigures(problems, estimate, wire, () if tally.error else self._link(name, trace))

    def _link(self, name: str, trace: Optional[TracePass]) -> Tuple[Dict[str, Any], ...]:
        """A codec's lossy link figures, of one ``trace`` or merged over every trace (per policy and rate, in the
        order of --wire and --loss; none when a replay of it failed, which is logged)."""
        replays = [t.link.get(name) for t in ([trace] if trace else self.traces) if self.config.link.loss]
        failed = next((r["error"] for r in replays if isinstance(r, dict)), None)
        if failed or not replays:
            if failed:
                log.warning("%s: %s", name, failed)
            return ()
        together: Dict[Tuple[str, float], List[Dict[str, Any]]] = {}
        for states in replays:
            for policy, rate, state in states or ():
                together.setdefault((policy, rate), []).append(state)
        return tuple(link_figures(policy, rate, merged(states)) for (policy, rate), states in together.items())

    @property
    def per_trace(self) -> List[TracePass]:
        """The traces whose own figures results.json keeps beside the merged ones (none for one trace)."""
        return self.traces if len(self.traces) > 1 else []

    def settings(self) -> Dict[str, Any]:
        """What results.json records of how the size pass ran."""
        return {"sizes_only": self.config.sizes_only, "dask": self.dask, "traces": len(self.traces),
                "wire": [p.text for p in self.config.wire], "transport": self.config.transport,
                "packet_overhead": self.config.packet_overhead, "ticks": self.ticks,
                **self.config.link.summary(),
                "size_pass_calls": self.measured,
                "size_pass_method": "seeded sample, uniform over calls" if self.sampled else "every call"}

    def record(self, training: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        """What results.json records under ``trace``: the trace, or the traces together (``training``:
        the dictionaries' summary)."""
        entries = [t.entry() for t in self.traces]
        return {**(entries[0] if len(entries) == 1 else self._together(entries)), "traces": len(entries),
                "training": training, "floor": self.floor, "per_connection": self._per_connection()}

    def _together(self, entries: List[Dict[str, Any]]) -> Dict[str, Any]:
        """The record of several traces: sums, merged statistics, each trace's damage notes."""
        notes = [e["salvaged"] for e in entries if e["salvaged"]]
        return {"path": f"{len(entries)} traces", "format": "fleet", "sha256": None,
                "file_bytes": sum(e["file_bytes"] for e in entries), "metadata": {}, **self.stats.summary(),
                "truncated_bytes": sum(e["truncated_bytes"] or 0 for e in entries),
                "salvaged": "; ".join(notes) or None, "recorder": None, "measured_calls": self.measured}

    def _per_connection(self) -> Dict[str, Any]:
        """Each connection's time span and calls per direction, and each codec's bytes per direction (codecs
        stopped in the pass have none), as columns: the capacity planner's confidence intervals come from their
        spread, for whichever codec the report takes as its reference."""
        spans = self.stats.spans
        rows = [((last - first) // 1_000_000, c2s, s2c) for first, last, c2s, s2c in spans.values()]
        traffic = {name: [row[i] for row in rows] for i, name in enumerate(CONNECTION_COLUMNS)}
        by_codec = {}
        for tally in self.tallies:
            if not tally.error:
                pairs = [tally.by_connection.get(conn, (0, 0)) for conn in spans]
                by_codec[tally.codec.name] = {name: [p[i] for p in pairs] for i, name in enumerate(CONNECTION_BYTES)}
        return {**traffic, "bytes": by_codec}


def _plan(config: RunConfig, index: Sequence[TraceIndex], held: Tuple[int, ...]) -> SamplePlan:
    """How pieces sample, given the run's number of calls (counted when ``--sample-calls`` asks)."""
    total = sum(t.calls for t in index) - sum(held)
    size_fraction = 1.0
    if config.sample_calls is not None and total > 0:
        size_fraction = min(1.0, config.sample_calls / total)
    return SamplePlan(config.seed, config.sample, size_fraction, held)


def _by_trace(number: int, by_connection: Dict[Any, Any]) -> Dict[Any, Any]:
    """A trace's per-connection figures keyed by (trace number, connection), apart from other traces'."""
    return {(number, conn): value for conn, value in by_connection.items()}


def _file_bytes(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
