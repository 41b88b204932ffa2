"""``--budget SECONDS``: fit the timing phase into what is left of a time budget.

The size and fidelity pass covers every call of the trace and is never cut short (exact
byte counts are the product). It also measures what one call costs each codec, and
from that a simple cost model predicts the timing phase for a given plan: sample size,
shortest batch, rounds and processes. The plan gives way in that order of preference,
keeping the most rounds and the most processes for as long as possible:

1. fewer calls in the timing sample (down to 500; still stratified by method),
2. shorter batches (down to 5 ms),
3. fewer processes (down to 1), then fewer rounds (down to 5),
4. a smaller sample again (down to 200).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Iterable, List, Tuple

from .size_result import SizePass

log = logging.getLogger("rpcbench")

#: wall seconds the model adds per worker process (fork, sample set-up) and for the report
PROCESS_OVERHEAD_S = 0.15
REPORT_S = 6.0
MEMORY_CALLS = 2000  #: calls of the sample replayed under tracemalloc (it is slow)


@dataclass(frozen=True)
class TimingPlan:
    """How the timing phase will run."""

    sample: int
    min_time: float
    repeat: int
    processes: int
    warmup: int
    lanes: int = 1  #: codecs timed at once, each on a CPU of its own (1 with ``processes`` 0)

    def cost_s(self, per_call_ns: Iterable[Tuple[float, int]]) -> float:
        """Predicted seconds for codecs with these per-call costs (encode+decode ns, replays of the sample per
        timed round: 1, one more for the stages of a multi-stage codec, one more for packets of a batched --wire);
        several lanes divide the rounds' seconds among them."""
        total = 0.0
        for ns, passes in per_call_ns:
            replay = self.sample * ns / 1e9
            loops = max(1, math.ceil(self.min_time / max(replay / 2, 1e-9)))
            rounds = self.repeat * loops * replay * passes / self.lanes  # the lanes play their rounds at once
            processes = max(1, self.processes)
            total += processes * (self.warmup * replay + rounds + PROCESS_OVERHEAD_S)
            total += replay + min(self.sample, MEMORY_CALLS) * ns / 1e9 * 6  # tails, tracemalloc pass
        return total


def fit_to_budget(plan: TimingPlan, size_pass: SizePass, seconds_left: float) -> TimingPlan:
    """``plan`` shrunk to the time left, from each codec's cost in the size pass (a batched --wire policy's
    packets are timed in the same rounds too: about one replay more), with a warning of what was cut."""
    calls = max(size_pass.measured, 1)  # the calls the codecs' cost was measured over
    packets = any(p.batched for p in size_pass.config.wire)
    costs = [(t.ns / calls, 1 + (len(t.codec.encode_stages()) > 1 and not t.codec.per_connection) + packets)
             for t in size_pass.tallies]
    fitted = fit(plan, costs, seconds_left)
    cut = cuts(plan, fitted)
    if cut:  # never quietly: the user asked for one plan and gets another
        log.warning("--budget: %.0f s left after the size pass; timing cut to fit: %s", seconds_left, cut)
    if fitted.cost_s(costs) > seconds_left:
        log.warning("--budget leaves %.0f s after the size pass; timing will need about %.0f s even with the "
                    "smallest plan", seconds_left, fitted.cost_s(costs))
    return fitted


def fit(plan: TimingPlan, per_call_ns: List[Tuple[float, int]], seconds_left: float) -> TimingPlan:
    """The best plan, in the order of the module docstring, whose predicted cost fits ``seconds_left``."""
    budget = seconds_left - REPORT_S

    def fits(p: TimingPlan) -> bool:
        return p.cost_s(per_call_ns) <= budget

    steps = [
        lambda p: replace(p, sample=max(500, p.sample * 3 // 4)) if p.sample > 500 else None,
        lambda p: replace(p, min_time=max(0.005, p.min_time / 2)) if p.min_time > 0.005 else None,
        lambda p: replace(p, processes=p.processes - 1) if p.processes > 1 else None,
        lambda p: replace(p, repeat=max(5, p.repeat * 3 // 4)) if p.repeat > 5 else None,
        lambda p: replace(p, sample=max(200, p.sample * 3 // 4)) if p.sample > 200 else None,
    ]
    for step in steps:
        while not fits(plan):
            smaller = step(plan)
            if smaller is None:
                break
            plan = smaller
    return plan


def cuts(before: TimingPlan, after: TimingPlan) -> str:
    """What fitting into a budget changed, in words (``timing sample 1,000 -> 300 calls, rounds 40 -> 12``), or ""."""
    changes = [f"{label} {old:,g} -> {new:,g}{unit}" for label, old, new, unit in (
        ("timing sample", before.sample, after.sample, " calls"), ("rounds", before.repeat, after.repeat, ""),
        ("process sets", before.processes, after.processes, ""), ("warmup", before.warmup, after.warmup, ""),
        ("min batch time", before.min_time, after.min_time, " s")) if old != new]
    return ", ".join(changes)
