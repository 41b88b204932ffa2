"""How long a codec takes per call, as results.json records it (:class:`Timing`: each measured round, its median
and spread, the machine's slow state told apart), and the constants its figures follow. Part of
:class:`rpcbench.results.CodecResult` (``encode``, ``decode``) and of the packets' CPU
(:class:`rpcbench.results_wire.PacketCpu`), in a module of its own so that both import it one way.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Dict, Tuple

CONFIDENCE = 0.95  #: of every interval the results give (a median's rounds, a sampled size pass's estimates)
#: A round more than this factor above the fastest round of its timing ran while the machine
#: was in a slow state. Shared VMs switch between a fast and a slow state for a second or
#: more at a time (on the 2-vCPU KVM rpcbench was built on: invisible from inside, no steal
#: time, thread CPU time = wall time), and the slow state costs codecs 1.4-2.1x, not alike
#: (msgpack 2.0x, json 1.7x), so a ratio between codecs differs between the states. Rounds
#: fall clearly on one side of 1.25.
SLOW_STATE_FACTOR = 1.25
MIN_STATE_PAIRS = 5  #: round pairs needed in a state before a ratio is given for it


@dataclass(frozen=True)
class Timing:
    """Per-call time of each measured round, in ns (each round = ``loops`` replays of ``calls`` calls)."""

    rounds_ns: Tuple[float, ...]
    calls: int
    loops: int

    @property
    def median_us(self) -> float:
        """The headline figure: median over rounds, microseconds per call."""
        return statistics.median(self.rounds_ns) / 1000

    @property
    def spread_pct(self) -> float:
        """Half the min-max range of the rounds, as a percentage of the median."""
        med = statistics.median(self.rounds_ns)
        return 0.0 if not med else (max(self.rounds_ns) - min(self.rounds_ns)) / 2 / med * 100

    @property
    def stdev_pct(self) -> float:
        """Sample standard deviation of the rounds as a percentage of their mean."""
        if len(self.rounds_ns) < 2:
            return 0.0
        return statistics.stdev(self.rounds_ns) / statistics.fmean(self.rounds_ns) * 100

    @property
    def iqr_us(self) -> float:
        """Interquartile range of the rounds, microseconds per call."""
        if len(self.rounds_ns) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.rounds_ns, n=4, method="inclusive")
        return (q3 - q1) / 1000

    @property
    def mad_us(self) -> float:
        """Median absolute deviation of the rounds, microseconds per call."""
        med = statistics.median(self.rounds_ns)
        return statistics.median(abs(x - med) for x in self.rounds_ns) / 1000

    @property
    def ci_us(self) -> Tuple[float, float, float]:
        """Distribution-free confidence interval of the median: (low, high, confidence).

        Order statistics around the median with binomial coverage (no normality
        assumed): the narrowest symmetric pair covering at least 95 %, or, with too few
        rounds for that, the min-max range and the confidence it does have.
        """
        ordered = sorted(self.rounds_ns)
        n = len(ordered)
        for k in range(n // 2, -1, -1):  # pair (k-th smallest, k-th largest), widening
            coverage = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n if k else 1.0
            if coverage >= CONFIDENCE or k == 0:
                lo, hi = (ordered[k - 1], ordered[n - k]) if k else (ordered[0], ordered[-1])
                cover = coverage if k else 1 - 2 / 2 ** n
                return lo / 1000, hi / 1000, cover
        raise AssertionError("unreachable")

    def ratio_to(self, reference: "Timing") -> float:
        """This timing relative to another measured in the same run: the median of round-by-round ratios.

        Codecs take turns round by round, so round i of both ran at nearly the same moment;
        pairing them cancels the machine's drift, which a ratio of two medians does not.
        """
        if len(self.rounds_ns) != len(reference.rounds_ns):
            return self.median_us / reference.median_us
        return statistics.median(a / b for a, b in zip(self.rounds_ns, reference.rounds_ns))

    @property
    def slow_rounds(self) -> Tuple[bool, ...]:
        """Per round: did it run in a slow state of the machine (over SLOW_STATE_FACTOR x the fastest)?

        Only a run that saw both states tells them apart: in a run spent all in one, the
        rounds sit together and none is slow.
        """
        limit = min(self.rounds_ns, default=0) * SLOW_STATE_FACTOR
        return tuple(x > limit for x in self.rounds_ns)

    def ratio_by_state(self, reference: "Timing") -> Dict[str, Tuple[float, int]]:
        """:meth:`ratio_to` apart for the two machine states: ``{"fast": (ratio, pairs), "slow": ...}``.

        A pair counts where both rounds of a turn ran in the same state; a state with fewer
        than MIN_STATE_PAIRS such pairs is left out (so an empty dict: the run saw one state).
        """
        if len(self.rounds_ns) != len(reference.rounds_ns):
            return {}
        out = {}
        pairs = list(zip(self.rounds_ns, reference.rounds_ns, self.slow_rounds, reference.slow_rounds))
        for state, slow in (("fast", False), ("slow", True)):
            ratios = [a / b for a, b, sa, sb in pairs if sa is slow and sb is slow]
            if len(ratios) >= MIN_STATE_PAIRS:
                out[state] = (statistics.median(ratios), len(ratios))
        return out if len(out) == 2 else {}
