"""What the size and fidelity pass gives (:class:`SizePass`, per trace :class:`TracePass`): frozen values that
later stages only read.

Everything timing needs was taken in the pass itself: the timing sample's candidate calls and the tick windows
they start (:class:`rpcbench.sampling.Drawn`), so :meth:`SizePass.sample` and :meth:`SizePass.packet_plan`
read no trace again. The codecs' tallies (:class:`rpcbench.tally.CodecTally`) are complete when the pass
returns and nothing changes them afterwards.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Set, Tuple

from rpc_capture import Call
from rpc_capture.stats import TraceStats

from .config import RunConfig
from .environment import file_sha256
from .executors import ClusterInfo
from .floor import FloorFigures, FloorTotals, floor_figures
from .link import link_figures, merged
from .link_replay import LinkReplays
from .packet_timing import PacketPlan
from .reader_info import ReaderInfo, reader_record
from .results import Estimate, Problem
from .results_check import CONNECTION_BYTES, CONNECTION_COLUMNS
from .results_wire import LinkFigures, WireFigures
from .sampling import Drawn, SamplePlan, proportional_quotas, sampled_estimate
from .tally import CodecTally
from .tick import TraceWire
from .wire import TRANSPORTS, wire_figures

log = logging.getLogger("rpcbench")
ProblemKey = Tuple[str, Tuple[str, str]]  #: (codec, (problem kind, feature))


@dataclass(frozen=True)
class PassFigures:
    """What the size pass adds to a codec's tally for its row of the results (:meth:`SizePass.figures`)."""

    problems: Tuple[Problem, ...]  #: each with the trace its example came from
    estimate: Optional[Estimate]  #: a sampled pass's estimates with their intervals (None: every call)
    wire: Tuple[WireFigures, ...]  #: its packets per --wire policy (none once the codec failed)
    link: Tuple[LinkFigures, ...] = ()  #: its replays over the lossy link per policy and loss rate (--loss)


@dataclass(frozen=True)
class TracePass:
    """One trace's merged figures."""

    path: str
    tallies: Tuple[CodecTally, ...]
    stats: TraceStats
    measured: int  #: calls the size pass measured (all, unless --sample-calls)
    drawn: Drawn  #: the timing sample's candidates, their calls and windows
    reader: Optional[ReaderInfo]  #: what only the reader of the file's end knows (None: no task read to it)
    floor: Optional[FloorTotals]  #: the floor's sums (None: --no-floor)
    wire: TraceWire  #: its --wire policies, resolved by the tick its timestamps show (from the plan)
    link: Optional[LinkReplays]  #: its lossy link replays (None without --loss; :class:`rpcbench.pieces.LinkTask`)

    def entry(self) -> Dict[str, Any]:
        """What results.json records of this trace."""
        reader = reader_record(self.reader)
        return {"path": self.path, "format": reader["format"], "sha256": file_sha256(self.path),
                "file_bytes": _file_bytes(self.path), "metadata": reader["metadata"],
                **self.stats.summary(), "truncated_bytes": reader["truncated_bytes"],
                "salvaged": reader["salvaged"], "recorder": reader["recorder"],
                "measured_calls": self.measured, "floor": floor_record(floor_figures([self.floor]))}


@dataclass(frozen=True)
class SizePass:
    """The size and fidelity pass over a run's traces (one or many), per trace and merged, with the floor and
    the timing sample's candidates (made by :func:`rpcbench.size_pass.run_size_pass`)."""

    config: RunConfig
    sampling: SamplePlan  #: how the pass sampled and which calls it held out
    traces: Tuple[TracePass, ...]
    tallies: Tuple[CodecTally, ...]  #: every trace's tallies merged
    stats: TraceStats  #: every trace's statistics merged (connections kept apart per trace)
    example_trace: Dict[ProblemKey, str]  #: the trace of each problem's example
    floor: Optional[FloorFigures]  #: the floor of every trace together (None: --no-floor)
    dask: Optional[ClusterInfo]  #: the cluster the pass ran on (None: here or in forks)

    @property
    def measured(self) -> int:
        """Calls the size pass measured, over all traces."""
        return sum(t.measured for t in self.traces)

    @property
    def sampled(self) -> bool:
        """Did the size pass measure a sample of the calls (``--sample-calls``) rather than all?"""
        return self.sampling.size_fraction < 1

    @property
    def per_trace(self) -> Tuple[TracePass, ...]:
        """The traces whose own figures results.json keeps beside the merged ones (none for one trace)."""
        return self.traces if len(self.traces) > 1 else ()

    def sample(self, size: int) -> List[Call]:
        """The timing sample of ``size`` calls, stratified by trace and method (each stratum its share, the
        calls of smallest seeded priority), in trace and call order."""
        calls: List[Call] = []
        for i, indices in sorted(self._sample_indices(size).items()):
            calls.extend(self.traces[i].drawn.call(index) for index in sorted(indices))
        return calls

    def _sample_indices(self, size: int) -> Dict[int, Set[int]]:
        """Per trace, the indices of its calls in the timing sample of ``size`` calls."""
        counts = {(i, m): n for i, t in enumerate(self.traces) for m, n in t.stats.methods.items()}
        wanted: Dict[int, Set[int]] = {}
        for (i, method), quota in proportional_quotas(counts, size).items():
            wanted.setdefault(i, set()).update(index for _, index in self.traces[i].drawn.ranked[method][:quota])
        return wanted

    def packet_plan(self, size: int) -> Optional[PacketPlan]:
        """What the timing of packets replays: under the run's first batched --wire policy (each trace's own
        tick for tick:auto), the tick windows whose first call is in the timing sample of ``size`` calls, every
        measured call of them, packed later per codec as the size pass packs them. Choosing windows by their
        first call times each window as likely whatever its size (windows holding any sampled call would favour
        big ones, cheaper per call). None without a batched policy."""
        batched = next((p for p in self.config.wire if p.batched), None)
        if batched is None:  # (a trace whose timestamps drop it has no windows)
            return None
        windows = [self.traces[i].drawn.window(first) for i, wanted in sorted(self._sample_indices(size).items())
                   for first in self.traces[i].drawn.windows if first in wanted]
        return PacketPlan(batched.text, batched.mtu, tuple(windows)) if windows else None

    def figures(self, tally: CodecTally, trace: Optional[TracePass] = None) -> PassFigures:
        """What the pass adds to a codec's tally (merged, or of one ``trace``) for its row of the results: the
        trace of each problem's example, the estimates of a sampled pass with their intervals, its packets."""
        measured, calls = (trace.measured, trace.stats.calls) if trace else (self.measured, self.stats.calls)
        estimate = sampled_estimate(tally.sizes, tally.failures, measured, calls) if self.sampled else None
        name = tally.codec.name
        problems = tuple(dataclasses.replace(p, example_trace=trace.path if trace else self.example_trace.get(
            (name, (p.kind, p.feature)))) for p in tally.problem_list())
        carrier = TRANSPORTS[self.config.transport]
        wire = tuple(wire_figures(w.policy, w.export(), carrier, self.config.packet_overhead)
                     for w in tally.wire.values()) if not tally.error else ()
        return PassFigures(problems, estimate, wire, () if tally.error else self._link(name, trace))

    def _link(self, name: str, trace: Optional[TracePass]) -> Tuple[LinkFigures, ...]:
        """A codec's lossy link figures, of one ``trace`` or merged over every trace (per policy and rate, in the
        order of --wire and --loss; none when a replay of it failed, which is logged)."""
        replays = [t.link for t in ([trace] if trace else self.traces) if t.link is not None]
        failed = next((r.errors[name] for r in replays if name in r.errors), None)
        if failed or not replays:
            if failed:
                log.warning("%s: %s", name, failed)
            return ()
        together: Dict[Tuple[str, float], List[Dict[str, Any]]] = {}
        for replayed in replays:
            for policy, rate, state in replayed.states.get(name, ()):
                together.setdefault((policy, rate), []).append(state)
        return tuple(link_figures(policy, rate, merged(states)) for (policy, rate), states in together.items())

    def settings(self) -> Dict[str, Any]:
        """What results.json records of how the size pass ran."""
        ticks = [{"path": t.path, **dataclasses.asdict(t.wire.tick)} for t in self.traces if t.wire.tick is not None]
        return {"sizes_only": self.config.sizes_only, "dask": dataclasses.asdict(self.dask) if self.dask else None,
                "traces": len(self.traces), "wire": [p.text for p in self.config.wire],
                "transport": self.config.transport, "packet_overhead": self.config.packet_overhead, "ticks": ticks,
                **self.config.link.summary(), "size_pass_calls": self.measured,
                "size_pass_method": "seeded sample, uniform over calls" if self.sampled else "every call"}

    def record(self, training: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        """What results.json records under ``trace``: the trace, or the traces together (``training``:
        the dictionaries' summary)."""
        entries = [t.entry() for t in self.traces]
        return {**(entries[0] if len(entries) == 1 else self._together(entries)), "traces": len(entries),
                "training": training, "floor": floor_record(self.floor), "per_connection": self._per_connection()}

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


def floor_record(floor: Optional[FloorFigures]) -> Optional[Dict[str, Any]]:
    """What results.json keeps of a floor (null with --no-floor)."""
    return floor.record() if floor else None


def _file_bytes(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
