"""Timing one codec on a sample of calls: batches, stages, per-call tails, allocations.

Everything here runs wherever the codec lives: in the main process (``--processes 0``)
or in a fresh worker process (:mod:`rpcbench.worker`). Results travel as plain JSON
(:meth:`TimingJob.result`).

* Rounds: one ``perf_counter_ns`` pair around ``loops`` replays of the sample (never a
  timer per call); ``loops`` is calibrated in the warm-up so a round lasts ``min_time``.
* Stages: a codec with several steps (encode, then compress) has each step timed the
  same way on the previous step's outputs, so users see where the time goes.
* Tails: one extra replay with a timer pair around each call, minus the timer's own
  cost, grouped by method: the p99 a frame budget cares about.
* Memory: a replay under ``tracemalloc`` (separate, as it slows everything down):
  peak bytes allocated while handling one call, and bytes and blocks the result keeps.
* Packets: under a batched ``--wire`` policy, the sample's tick windows sent as whole packets
  (:mod:`rpcbench.packet_timing`: encode + frame + compress each packet whole; decompress + unframe +
  decode), timed in the same rounds with loops calibrated of their own, reported per call.
* Turns: the codecs take turns round by round (:func:`round_robin` in one process); worker processes play them
  in lanes, one lane per CPU (:func:`lane_turns`, :class:`LaneSchedule`; ``--timing-lanes``).
"""

from __future__ import annotations

import gc
import math
import statistics
import sys
import time
import tracemalloc
from collections import Counter
from contextlib import contextmanager
from typing import Any, Callable, Dict, Generic, Iterator, List, Optional, Sequence, Set, Tuple, TypedDict, TypeVar

from rpc_capture import Call

from .codec import Codec, Streams, encoded_or_none, stream_key
from .histogram import nearest_ranks
from .packet_timing import PacketOps, PacketPlan
from .progress import Progress, quiet

PACKET_OPS = ("encode_packet", "decode_packet")  #: the rounds of the packets' timing (beside encode and decode)


def stopped(e: BaseException) -> str:
    """Why a codec's timing stopped, as its results say: what it raised (in a worker process or here)."""
    return f"timing stopped: {type(e).__name__}: {e}"


class TimingJob:
    """One codec's timing: inputs prepared once, then rounds, tails and memory on demand."""

    def __init__(self, codec: Codec, sample: List[Call], gc_enabled: bool = False,
                 packets: Optional[PacketPlan] = None) -> None:
        self.name = codec.name  #: the row's (``codec`` may hand the work to another: :meth:`Codec.timed_work`)
        self.codec = codec.timed_work()
        self.gc_enabled = gc_enabled
        self.calls, self.payloads = _encodable(self.codec, sample)
        self.error: Optional[str] = None if self.calls else "no call of the sample could be encoded, nothing to time"
        self.loops = 1
        self.rounds: Dict[str, List[float]] = {"encode": [], "decode": []}
        self.stage_rounds: Dict[str, Dict[str, List[float]]] = {"encode": {}, "decode": {}}
        self._stage_inputs: Dict[str, list] = {}
        if not (self.codec.per_connection or self.error):
            try:
                self._stage_inputs = self._prepare_stages()
            except Exception as e:  # a stage that breaks on the sample stops this codec's timing, as a round would
                self.error = stopped(e)
        self._warm_ns = math.inf  #: the fastest warm-up replay, ns (the fastest: one crowded out would cut the loops)
        self.packets, self.packet_error = self._prepare_packets(packets)
        self.packet_policy = packets.policy if packets else None
        self.packet_loops = 1
        self._warm_packet_ns = math.inf
        if self.packets is not None:
            self.rounds.update({op: [] for op in PACKET_OPS})

    def _prepare_packets(self, plan: Optional[PacketPlan]) -> Tuple[Optional[PacketOps], Optional[str]]:
        """The sample's packets under the batched policy (None without one), or why they cannot be timed."""
        if plan is None or self.error:
            return None, None
        try:
            ops = PacketOps(self.codec, plan)
        except Exception as e:  # the per-message timing goes on; the packets' figures are missing, with the reason
            return None, f"packets not timed: {type(e).__name__}: {e}"
        return (ops, None) if ops.calls else (None, "packets not timed: no call of the sample's windows encodes")

    def _prepare_stages(self) -> Dict[str, list]:
        """Each stage's inputs, by running the pipelines once (only for codecs with >1 stage)."""
        out: Dict[str, list] = {}
        for op, inputs in (("encode", self.calls), ("decode", self.payloads)):
            stages = self.codec.encode_stages() if op == "encode" else self.codec.decode_stages()
            if len(stages) < 2:
                continue
            chain = []
            for name, func in stages:
                chain.append((name, func, inputs))
                inputs = [func(item) for item in inputs]
            out[op] = chain
            self.stage_rounds[op] = {name: [] for name, _, _ in chain}
        return out

    def run_round(self, record: bool, stages: bool = True) -> None:
        """Encode and decode (and, if ``stages``, their stages), ``loops`` replays each, then the packets'
        encode and decode (batched --wire policy); kept if ``record``."""
        per_call = self.loops * len(self.calls)
        if self.codec.per_connection:
            enc = _time_per_connection(self.codec, self.calls, self.loops, "encode", self.gc_enabled)
            dec = _time_per_connection(self.codec, self.payloads, self.loops, "decode", self.gc_enabled)
        else:
            enc = time_batch(self.codec.encode, self.calls, self.loops, self.gc_enabled)
            dec = time_batch(self.codec.decode, self.payloads, self.loops, self.gc_enabled)
        self._packet_round(record)
        if not record:
            self._warm_ns = min(self._warm_ns, max(enc, dec) / self.loops)
            return
        self.rounds["encode"].append(enc / per_call)
        self.rounds["decode"].append(dec / per_call)
        for op, chain in (self._stage_inputs.items() if stages else ()):
            for name, func, inputs in chain:
                self.stage_rounds[op][name].append(time_batch(func, inputs, self.loops, self.gc_enabled) / per_call)

    def _packet_round(self, record: bool) -> None:
        """The packets' encode and decode, ``packet_loops`` replays each, per call (kept if ``record``)."""
        if self.packets is None:
            return
        times = [time_packets(self.packets, op, self.packet_loops, self.gc_enabled) for op in ("encode", "decode")]
        if not record:
            self._warm_packet_ns = min(self._warm_packet_ns, max(times) / self.packet_loops)
            return
        for op, ns in zip(PACKET_OPS, times):
            self.rounds[op].append(ns / (self.packet_loops * self.packets.calls))

    def calibrate(self, min_time: float) -> None:
        """Choose loops (the packets' apart) from the fastest warm-up round so that a timed batch lasts ``min_time``
        (a warm-up round crowded out by other work would otherwise give batches a fraction of ``min_time``)."""
        self.loops = max(1, math.ceil(min_time * 1e9 / max(self._warm_ns, 1.0)))
        self.packet_loops = max(1, math.ceil(min_time * 1e9 / max(self._warm_packet_ns, 1.0)))

    def tails(self) -> Dict[str, Dict[str, Dict[str, float]]]:
        """Per-call time percentiles by method (and ``*`` for all), encode and decode, in ns."""
        if self.codec.per_connection:
            return {}  # per-call timers around a stream would need per-connection bookkeeping in the loop
        overhead = timer_overhead_ns()
        methods = [call.method for call in self.calls]
        return {
            "encode": _percentiles_by_method(_per_call_ns(self.codec.encode, self.calls, overhead), methods),
            "decode": _percentiles_by_method(_per_call_ns(self.codec.decode, self.payloads, overhead), methods),
        }

    def memory(self, max_calls: int) -> Dict[str, Dict[str, float]]:
        """Allocation figures per call under tracemalloc, encode and decode, on an even subset of the sample."""
        if self.codec.per_connection:
            return {}
        step = max(1, math.ceil(len(self.calls) / max_calls))
        return {"encode": _memory_per_call(self.codec.encode, self.calls[::step]),
                "decode": _memory_per_call(self.codec.decode, self.payloads[::step])}

    def result(self) -> "TimingAnswer":
        """Plain-JSON result (what a worker process sends back): rounds so far, no tails or allocations."""
        answer: TimingAnswer = {"calls": len(self.calls), "loops": self.loops, "rounds": self.rounds,
                                "stage_rounds": self.stage_rounds, "error": self.error}
        if self.packets is not None:
            answer["packets"] = {"policy": self.packets.policy, "calls": self.packets.calls,
                                 "packets": self.packets.packets, "loops": self.packet_loops}
        elif self.packet_error:
            answer["packets"] = {"policy": self.packet_policy, "error": self.packet_error}
        return answer

    def finish(self, tails: bool, memory: bool, memory_calls: int) -> "TimingAnswer":
        """The result with the per-call tails and the allocations passes (each unless switched off)."""
        answer = self.result()
        answer["latency"] = self.tails() if tails and not self.error else {}
        answer["memory"] = self.memory(memory_calls) if memory and not self.error else {}
        return answer


class TimingAnswer(TypedDict, total=False):
    """One codec's timing as plain JSON, from this process or a worker: ns per call of each
    timed round (and of each stage's rounds), the batch shape, and the optional passes."""

    calls: int  #: calls in the timed sample
    loops: int  #: replays of the sample per round
    rounds: Dict[str, List[float]]  #: "encode"/"decode" -> ns per call, one value per round
    stage_rounds: Dict[str, Dict[str, List[float]]]  #: op -> stage -> ns per call per round
    latency: Dict[str, Dict[str, Dict[str, float]]]  #: op -> method -> percentile -> ns
    memory: Dict[str, Dict[str, float]]  #: op -> allocation figure
    error: Optional[str]  #: why timing stopped for this codec
    cpus: List[Optional[int]]  #: the CPU each timed round ran on, as its worker process saw it (not with --processes 0)
    #: the packets timed (rounds "encode_packet"/"decode_packet"): policy, calls, packets, loops; or {"error": why}
    packets: Dict[str, Any]


def _encodable(codec: Codec, sample: List[Call]) -> tuple:
    """The sample calls the codec can encode, and their encodings (``(conn, data)`` if stateful)."""
    calls, payloads = [], []
    sessions = Streams(codec.connection)
    for call in sample:
        data = encoded_or_none(sessions[stream_key(call)].encode, call)
        if data is not None:  # a call it fails to encode is counted as a failure by the size pass; not timed
            calls.append(call)
            payloads.append((stream_key(call), data) if codec.per_connection else data)
    return calls, payloads


@contextmanager
def _gc_paused(keep_gc: bool = False) -> Iterator[None]:
    """The garbage collector off for a timed region (unless ``keep_gc``), as it was afterwards."""
    was_on = gc.isenabled()
    if not keep_gc:
        gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def time_batch(func: Callable[[Any], Any], items: List[Any], loops: int, gc_enabled: bool = False) -> int:
    """ns for ``loops`` replays of ``func`` over ``items``: one timer pair around the lot."""
    timer = time.perf_counter_ns
    with _gc_paused(gc_enabled):
        t0 = timer()
        for _ in range(loops):
            for item in items:
                func(item)
        return timer() - t0


def time_packets(ops: PacketOps, op: str, loops: int, gc_enabled: bool = False) -> int:
    """ns for ``loops`` replays of the packets' ``op`` (encode: whole windows; decode: each packet), fresh
    per-stream state each replay, made before its timer starts (as :func:`_time_per_connection`)."""
    timer = time.perf_counter_ns
    items, step = ops.items(op), ops.step(op)
    total = 0
    with _gc_paused(gc_enabled):
        for _ in range(loops):
            sessions = ops.sessions()
            t0 = timer()
            for key, item in items:
                step(sessions[key], item)
            total += timer() - t0
    return total


def _time_per_connection(codec: Codec, items: List[Any], loops: int, op: str, gc_enabled: bool) -> int:
    """:func:`time_batch` for stateful codecs: fresh per-stream state for each replay.

    ``items`` are calls (encode) or ``(stream key, data)`` pairs (decode), in trace order;
    each connection and direction is one stream (:func:`rpcbench.codec.stream_key`).
    """
    timer = time.perf_counter_ns
    keyed = [(stream_key(call), call) for call in items] if op == "encode" else items
    streams = list(dict.fromkeys(key for key, _ in keyed))
    total = 0
    with _gc_paused(gc_enabled):
        for _ in range(loops):
            funcs = Streams(lambda: getattr(codec.connection(), op), streams)
            t0 = timer()
            for key, item in keyed:
                funcs[key](item)
            total += timer() - t0
    return total


def timer_overhead_ns(samples: int = 20000) -> float:
    """Median cost of one ``t0 = timer(); t1 = timer()`` pair, to subtract from per-call times."""
    timer = time.perf_counter_ns
    costs = []
    for _ in range(samples):
        t0 = timer()
        t1 = timer()
        costs.append(t1 - t0)
    return statistics.median(costs)


def _per_call_ns(func: Callable[[Any], Any], items: List[Any], overhead: float) -> List[float]:
    timer = time.perf_counter_ns
    out: List[float] = []
    append = out.append
    with _gc_paused():
        for item in items:
            t0 = timer()
            func(item)
            t1 = timer()
            append(max(t1 - t0 - overhead, 0.0))
    return out


def _percentiles_by_method(times: List[float], methods: List[str]) -> Dict[str, Dict[str, float]]:
    groups: Dict[str, List[float]] = {"*": times}
    for t, method in zip(times, methods):
        groups.setdefault(method, []).append(t)
    return {method: _percentiles(values) for method, values in groups.items()}


def _percentiles(values: List[float]) -> Dict[str, float]:
    pcts = (50, 90, 99)
    return {"n": len(values), **{f"p{pct}": value for pct, value in zip(pcts, nearest_ranks(Counter(values), pcts))},
            "max": max(values)}


def _memory_per_call(func: Callable[[Any], Any], items: List[Any]) -> Dict[str, float]:
    """Under tracemalloc: peak bytes above the baseline while one call runs, and what its result keeps."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    peaks, kept, blocks = [], [], []
    try:
        for item in items:
            before_blocks = sys.getallocatedblocks()
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            result = func(item)
            current, peak = tracemalloc.get_traced_memory()
            peaks.append(peak - base)
            kept.append(current - base)
            blocks.append(sys.getallocatedblocks() - before_blocks)
            del result
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return {"peak_bytes_mean": statistics.fmean(peaks), "peak_bytes_max": max(peaks),
            "kept_bytes_mean": statistics.fmean(kept), "kept_blocks_mean": statistics.fmean(blocks)}


Player = TypeVar("Player")


def lane_turns(players: Sequence[Player], r: int, lanes: int = 1) -> List[List[Player]]:
    """Round ``r``'s turns, one list per lane: lane ``i`` runs on the ``i``-th CPU of the timing, its players one
    after another, the lanes at the same time.

    One lane: every player in turn, the first rotating each round, so drift of the machine's speed hits every
    codec alike. Several: the players seated as in a round-robin tournament (the circle method: the first stays,
    the others move one seat each cycle of ``lanes`` rounds, an empty seat in place of a missing player), each
    lane taking a block of seats, so a player meets other neighbours cycle after cycle (with two lanes every
    other player within ``len(players)`` cycles); within a cycle the lanes move to the next CPU each round, so
    every player spends as many rounds on each CPU."""
    if lanes <= 1 or not players:
        start = r % len(players) if players else 0
        return [list(players[start:]) + list(players[:start])] + [[] for _ in range(lanes - 1)]
    cycle, seats_per_lane = r // lanes, -(-len(players) // lanes)
    seats: List[Optional[Player]] = [*players, *[None] * (seats_per_lane * lanes - len(players))]
    turn = cycle % (len(seats) - 1)
    seats[1:] = seats[1 + turn:] + seats[1:1 + turn]
    blocks = [seats[i * seats_per_lane:(i + 1) * seats_per_lane] for i in range(lanes)]
    blocks = [block[::-1] if i % 2 else block for i, block in enumerate(blocks)]  # two lanes: seat k meets -k-1
    start = cycle % seats_per_lane
    slots = sorted(zip(*(block[start:] + block[:start] for block in blocks)), key=lambda slot: None in slot)
    by_lane = [[slot[i] for slot in slots if slot[i] is not None] for i in range(lanes)]  # empty seats last
    shift = r % lanes
    return by_lane[-shift:] + by_lane[:-shift] if shift else by_lane


class LaneSchedule(Generic[Player]):
    """Whose turn it is in each lane: ``rounds`` rounds of :func:`lane_turns`, the lanes flowing from one round into
    the next without waiting for each other (a lane whose round is done takes its next round's turns while the
    other finishes), a player never in two turns at once and never a round ahead of itself. The caller starts
    turns (:meth:`next_turn`) and reports them played (:meth:`played`, False: the player is out)."""

    def __init__(self, players: Sequence[Player], rounds: int, lanes: int) -> None:
        self.live = list(players)
        self.rounds, self.lanes = rounds, lanes
        self._at = [0] * lanes  #: the round each lane is in
        self._turns: Dict[int, List[List[Player]]] = {}  #: round -> each lane's turns not yet started
        self._played = {id(p): 0 for p in players}  #: rounds each player has played
        self._busy: Set[int] = set()  #: ids of the players in a turn

    def next_turn(self, lane: int) -> Optional[Tuple[Player, int]]:
        """The next (player, round) of ``lane`` that may start now, or None (the lane waits, or is done)."""
        while self._at[lane] < self.rounds:
            r = self._at[lane]
            queue = self._turns.setdefault(r, lane_turns(self.live, r, self.lanes))[lane]
            queue[:] = [p for p in queue if p in self.live]
            if not queue:
                self._at[lane] += 1
                continue
            for player in queue:
                if self._played[id(player)] == r and id(player) not in self._busy:
                    queue.remove(player)
                    self._busy.add(id(player))
                    return player, r
            return None
        return None

    def played(self, player: Player, ok: bool) -> None:
        """A turn ended: the player played its round, or (``ok`` False) is out of the rounds left."""
        self._busy.discard(id(player))
        self._played[id(player)] += 1
        if not ok:
            self.live.remove(player)


def round_robin(players: Sequence[Player], rounds: int, play: Callable[[Player, int, int], bool],
                stopped: Callable[[], bool] = lambda: False) -> None:
    """The in-process scheduler of timing: ``rounds`` rounds in which every live player plays once, one at a time
    (:func:`lane_turns`, one lane). ``play(player, round, position)`` returns False when the player is out (its
    codec failed); ``stopped()`` is asked before each turn (Ctrl-C)."""
    live = list(players)
    for r in range(rounds):
        for position, player in enumerate(lane_turns(live, r)[0]):
            if stopped():
                return
            if not play(player, r, position):
                live.remove(player)


def run_jobs(jobs: List[TimingJob], repeat: int, warmup: int, min_time: float, stage_rounds: int,
             progress: Progress = quiet) -> bool:
    """In one process: warm up and calibrate every job, then ``repeat`` interleaved rounds
    (:func:`round_robin`). Returns True when Ctrl-C cut the rounds short (the rounds done
    so far are kept)."""
    live = [job for job in jobs if not job.error]

    def play(job: TimingJob, r: int, position: int) -> bool:
        label = "warm-up" if r < warmup else f"round {r - warmup + 1}/{repeat}"
        progress("timing", f"{label}: {job.name}", r * len(live) + position, (warmup + repeat) * len(live))
        try:
            job.run_round(record=r >= warmup, stages=r - warmup < stage_rounds)
            if r == warmup - 1:
                job.calibrate(min_time)
        except Exception as e:  # a codec that breaks under timing is reported, the rest go on
            job.error = stopped(e)
            return False
        return True

    try:
        round_robin(live, warmup + repeat, play)
    except KeyboardInterrupt:
        return True
    return False
