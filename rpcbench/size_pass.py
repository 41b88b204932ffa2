"""The size and fidelity pass: every call of a run's traces (one or many) through every codec, merged.

:func:`run_size_pass` splits the run into tasks (:mod:`rpcbench.pieces`: a trace's byte range through some
codecs, a floor task per trace, and with ``--loss`` a lossy-link replay task per trace), runs them on an
executor (:mod:`rpcbench.executors`: here, watched forked processes, or Dask workers) and merges their
summaries exactly (:mod:`rpcbench.tally`, :mod:`rpcbench.sampling`), per trace and over every trace, into one
frozen :class:`~rpcbench.size_result.SizePass`. A single trace is a fleet of one: the same tasks, sampler,
hold-out and floor. Timing happens afterwards, on the sample the pass drew (:mod:`rpcbench.timing`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from rpc_capture.stats import TraceStats

from .errors import BenchError
from .executors import Executor, Task
from .floor import FloorTotals, floor_figures
from .link_replay import LinkReplays
from .pieces import FloorTask, LinkTask, PieceSummary, PieceTask, plan_pieces
from .plan import Plan
from .reader_info import ReaderInfo
from .sampling import NOTHING_DRAWN, Drawn
from .size_result import ProblemKey, SizePass, TracePass
from .tally import CodecTally
from .tick import TraceWire

log = logging.getLogger("rpcbench")


def run_size_pass(plan: Plan, executor: Executor) -> SizePass:
    """Every task of the pass on ``executor``, the summaries merged per trace in call order, then over all:
    the figures are those of one process reading every trace in turn, whatever the executor, chunks or
    workers."""
    config = plan.config
    pieces = plan_pieces(plan.index, plan.codecs, executor.slots, plan.wire)
    floors: List[Task] = [FloorTask(config, i, t.path, plan.sampling)
                          for i, t in enumerate(plan.index)] if config.floor else []
    names = tuple(c.name for c in plan.codecs)
    links: List[Task] = [LinkTask(config, i, t.path, plan.sampling, plan.wire[i].policies, names)
                         for i, t in enumerate(plan.index)] if config.link.loss else []
    # the floors (and link replays) after the whole-trace pieces, the longest, before the chunks: a floor
    # compresses on both cores (rpcbench.floor.THREADS), so it packs well once those end, and the chunks fill
    # in around it; first, it kept a whole-trace piece waiting for its slot and that piece ran alone at the end
    whole = sum(p.start is None for p in pieces)
    tasks = [PieceTask(config, p, plan.sampling) for p in pieces]
    merges = [_TraceMerge(t.path, [CodecTally(c) for c in plan.codecs], config.sample) for t in plan.index]
    answers = executor.run_all([*tasks[:whole], *floors, *links, *tasks[whole:]], "size pass: reading",
                               sum(max(t.calls, 0) for t in plan.index),
                               arrived=lambda answer: _draw(merges, answer))
    for merge, totals in zip(merges, answers[whole:whole + len(floors)]):
        merge.floor = totals
    for merge, replays in zip(merges, answers[whole + len(floors):whole + len(floors) + len(links)]):
        merge.link = replays
    summaries: List[PieceSummary] = answers[:whole] + answers[whole + len(floors) + len(links):]
    for summary in sorted(summaries, key=lambda s: (s.piece.trace, s.piece.first_call)):
        merges[summary.piece.trace].absorb(summary)
    traces = tuple(m.result(wire) for m, wire in zip(merges, plan.wire))
    tallies, stats, examples = _merge_traces(plan, traces)
    return SizePass(config, plan.sampling, traces, tallies, stats, examples,
                    floor_figures([t.floor for t in traces]), executor.info)


@dataclass
class _TraceMerge:
    """One trace's figures while its pieces' summaries arrive (in call order)."""

    path: str
    tallies: List[CodecTally]
    keep: int  #: sample candidates kept per method
    stats: TraceStats = field(default_factory=TraceStats)
    measured: int = 0
    drawn: Drawn = NOTHING_DRAWN
    reader: Optional[ReaderInfo] = None
    floor: Optional[FloorTotals] = None
    link: Optional[LinkReplays] = None  #: its lossy link replays (--loss; :class:`LinkTask`)

    def absorb(self, summary: PieceSummary) -> None:
        """Add one piece's summary (its timing candidates went in as it arrived: :func:`_draw`)."""
        by_name = {t.codec.name: t for t in self.tallies}
        for name, state in zip(summary.piece.codecs, summary.tallies):
            by_name[name].merge(state)
        if summary.count is not None:
            self.stats.merge(summary.count.stats)
            self.measured += summary.count.measured
        self.reader = summary.reader or self.reader

    def result(self, wire: TraceWire) -> TracePass:
        """The trace's figures, complete (``wire``: its policies, as the plan resolved them)."""
        return TracePass(self.path, tuple(self.tallies), self.stats, self.measured, self.drawn, self.reader,
                         self.floor, wire, self.link)


def _draw(merges: List[_TraceMerge], answer: Any) -> Any:
    """A piece's timing candidates folded into its trace's as the piece's summary arrives, and left out of the
    summary kept: a bottom-k sample merges exactly in any order, and a long trace's pieces do not each hold
    their thousand calls per method until the last one ends (a 1,000,000-call trace's 266,000 calls, 33 MB)."""
    if not isinstance(answer, PieceSummary) or answer.count is None:
        return answer
    merge = merges[answer.piece.trace]
    merge.drawn = merge.drawn.merge(answer.count.drawn, merge.keep)
    return dataclasses.replace(answer, count=dataclasses.replace(answer.count, drawn=NOTHING_DRAWN))


def _merge_traces(plan: Plan, traces: Tuple[TracePass, ...]) -> Tuple[
        Tuple[CodecTally, ...], TraceStats, Dict[ProblemKey, str]]:
    """Every trace's tallies and statistics together, and the trace each problem's example came from (its
    damage told first)."""
    tallies = tuple(CodecTally(c) for c in plan.codecs)
    stats = TraceStats()
    examples: Dict[ProblemKey, str] = {}
    for number, trace in enumerate(traces):
        if trace.reader and trace.reader.salvaged:
            log.warning("%s", trace.reader.salvaged)
        if trace.reader and trace.reader.truncated_bytes:
            log.warning("%s: file ends inside a record: dropped %d bytes of an incomplete final record; "
                        "all complete calls were read", trace.path, trace.reader.truncated_bytes)
        stats.merge(dataclasses.replace(  # connection 7 of two servers is two connections
            trace.stats, connections=Counter(_by_trace(number, trace.stats.connections)),
            spans=_by_trace(number, trace.stats.spans)))
        for into, tally in zip(tallies, trace.tallies):
            state = tally.export()
            for key in into.merge({**state, "by_connection": _by_trace(number, state["by_connection"])}):
                examples[(into.codec.name, key)] = trace.path
    if not stats.calls:
        raise BenchError(f"{traces[0].path}: the trace holds no calls" if len(traces) == 1
                         else "the traces hold no calls")
    return tallies, stats, examples


def _by_trace(number: int, by_connection: Dict[Any, Any]) -> Dict[Any, Any]:
    """A trace's per-connection figures keyed by (trace number, connection), apart from other traces'."""
    return {(number, conn): value for conn, value in by_connection.items()}
