"""The capacity and cost planner: what a codec costs a fleet, from the trace itself.

Per player (one connection of the trace = one concurrent user, CCU) and direction:
bytes per second = the codec's bytes per call in that direction x the trace's calls per
connection-second, plus each message's transport headers. From those: GB and $ per month
at ``ccu`` players, server cores spent on serialization (encode of s2c calls + decode of
c2s calls) and the client's decode time per second; under a batched --wire policy whose packets the
run timed, encode and decode are per call of whole packets (framed, compressed per packet).

Confidence intervals (95 %): traffic from a paired bootstrap over the trace's connections
(each connection's bytes, calls and time span, resampled together; the statistic is
total bytes / total connection-seconds, so players who stayed longer weigh more); CPU from
the distribution-free CI of the timing median the results hold. A product of the two
adds their relative half-widths in quadrature, a sum its terms' absolute half-widths:
the usual propagation for independent errors. Arithmetic only; the verdict that uses
these figures is made in :mod:`reports.verdict`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rpcbench.results import CodecResult, Suite, Timing
from rpcbench.wire import TRANSPORTS, Transport

from . import loss, wire
from .coverage import DEFAULT_MIN_COVERAGE
from .loss import NO_LOSS, LossView
from .reference import baseline

SECONDS_PER_MONTH = 730 * 3600  #: a month of 730 hours (8,760 h / 12), as cloud price lists count it
DEFAULT_CCU = 10_000
#: $ per GB of server egress: a typical first-tier cloud internet egress price (AWS, GCP: $0.08-0.09/GB); an assumption
DEFAULT_EGRESS_PRICE = 0.08
#: $ per vCPU-month for the balanced rule: AWS c7i.large on-demand, $0.08925/h for 2 vCPU, x 730 h; an assumption
CORE_MONTH_PRICE = 32.0
#: $ per GB-month of server RAM for the balanced rule (stream codecs' state): what AWS r7i.large ($0.1323/h, 16 GiB)
#: costs over c7i.large ($0.08925/h, 4 GiB, same 2 vCPU), per extra GiB: $0.0036/h x 730 h; an assumption
RAM_GB_MONTH_PRICE = 2.6
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 1  #: the bootstrap is seeded: the same results give the same intervals
C2S, S2C = "c2s", "s2c"
GOALS = ("balanced", "bandwidth", "cpu")


@dataclass(frozen=True)
class ReportOptions:
    """The user's situation, which the verdict and the planner answer for (``--goal``, ``--baseline``...)."""

    goal: str = "balanced"
    baseline: Optional[str] = None  #: None: the trace's ``current_format`` metadata if it names a run codec, else json
    ccu: int = DEFAULT_CCU
    egress_price: float = DEFAULT_EGRESS_PRICE
    transport: str = "none"
    min_coverage: float = DEFAULT_MIN_COVERAGE  #: share of the calls a codec must send to be compared (coverage.py)
    packet_overhead: int = 0  #: the game's own header bytes per packet (--packet-overhead)
    wire: Optional[str] = None  #: --wire policy decided on (None: the first batched, else per-call)
    loss: Optional[float] = None  #: --loss rate (%) decided at (None: the lowest nonzero the run measured)


DEFAULT_OPTIONS = ReportOptions()


@dataclass(frozen=True)
class Estimate:
    """A figure with its 95 % confidence interval (NaN bounds: no interval could be computed)."""

    value: float
    low: float
    high: float

    def scaled(self, factor: float) -> "Estimate":
        """The figure times an exact constant."""
        return Estimate(self.value * factor, self.low * factor, self.high * factor)

    def __add__(self, other: "Estimate") -> "Estimate":
        """Sum of independent figures: half-widths (each side apart) in quadrature."""
        value = self.value + other.value
        return Estimate(value, value - math.hypot(self.value - self.low, other.value - other.low),
                        value + math.hypot(self.high - self.value, other.high - other.value))

    def __mul__(self, other: "Estimate") -> "Estimate":
        """Product of independent figures: relative half-widths (each side apart) in quadrature."""
        value = self.value * other.value
        if not self.value or not other.value:
            return Estimate(value, self.low * other.low, self.high * other.high)
        low = math.hypot(1 - self.low / self.value, 1 - other.low / other.value)
        high = math.hypot(self.high / self.value - 1, other.high / other.value - 1)
        return Estimate(value, value * (1 - low), value * (1 + high))


@dataclass(frozen=True)
class Capacity:
    """One codec's cost per player (CCU): traffic in bytes/s, CPU in µs per second."""

    codec: str
    down: Estimate  #: s2c bytes per second per player, headers included
    up: Estimate  #: c2s bytes per second per player, headers included
    server_us: Optional[Estimate]  #: server CPU µs per second per player: encode s2c + decode c2s (None: not timed)
    client_decode_us: Optional[Estimate]  #: client CPU µs per second decoding its s2c calls
    state_bytes: int  #: memory per connection at one end (stream codecs)

    def month_cost(self, ccu: int, egress_price: float) -> float:
        """$ per month at ``ccu`` players: server egress + server CPU + connection state (the balanced rule),
        the total $/month column of the table (:func:`figures`)."""
        return figures(self, ccu, egress_price).total_usd.value


@dataclass(frozen=True)
class Plan:
    """The planner's answer for every codec with figures, or why there is none."""

    rows: Dict[str, Capacity]
    transport: Transport
    connections: int
    connection_seconds: float
    calls_per_s: Dict[str, Estimate]  #: per player and direction
    missing: Optional[str] = None  #: why no figures (older results, no timestamps); rows are empty then
    ci_note: str = ""
    policy: Optional[str] = None  #: the --wire policy whose packets the traffic is (None: one per call)
    cpu_note: str = "timed per message"  #: what the CPU per call of server cores and client decode is
    loss_pct: Optional[float] = None  #: the --loss rate whose link figures the traffic is (None: no lossy link)

    def find(self, codec: str) -> Optional[Capacity]:
        """The codec's row, if it has one."""
        return self.rows.get(codec)


def plan(suite: Suite, transport: str = "none", extra: int = 0, policy: Optional[str] = None,
         reference: Optional[CodecResult] = None, link: LossView = NO_LOSS) -> Plan:
    """Capacity figures of every codec with per-direction bytes, from the trace's per-connection traffic and
    ``reference``'s bytes per connection (default: the run's reference codec, :func:`reports.reference.baseline`;
    results of versions 4 to 6 hold one codec's, which is then used): its packets under the --wire ``policy``
    when the results have them (headers per packet, ``extra`` bytes of the game's own each), else its calls one
    per packet; with a lossy ``link``, a codec's traffic is its link figures at the decided rate (resends, acks and
    the run's headers included)."""
    carrier = TRANSPORTS[transport]
    table = suite.trace.get("per_connection")
    reference = reference or baseline(suite, None)[0]
    if table and reference is not None and reference.codec not in table["bytes"] and len(table["bytes"]) == 1:
        reference = suite.find(next(iter(table["bytes"])))  # an older file: the one codec it kept
    missing = _missing(suite, table, reference)
    if missing or table is None or reference is None:
        return Plan({}, carrier, 0, 0.0, {}, missing or "no per-connection traffic")
    spans = np.array(table["span_ms"], dtype=float) / 1000
    calls = {d: np.array(table[f"{d}_calls"], dtype=float) for d in (C2S, S2C)}
    ref_bytes = {d: np.array(table["bytes"][reference.codec][f"{d}_bytes"], dtype=float) for d in (C2S, S2C)}
    codecs = [r for r in suite.results if r.by_direction]
    weights = [[_weights(r, reference, d, carrier, extra, policy, link) for d in (C2S, S2C)] for r in codecs]
    estimates, ci_note = _bootstrap(spans, calls, ref_bytes, weights)
    rates = {C2S: estimates[0], S2C: estimates[1]}
    rows = {}
    for i, r in enumerate(codecs):
        up, down = estimates[2 + 2 * i], estimates[3 + 2 * i]
        encode, decode = (_cpu(wire.cpu_timing(r, policy, op)) for op in ("encode", "decode"))
        server = encode * rates[S2C] + decode * rates[C2S] if encode and decode else None
        rows[r.codec] = Capacity(r.codec, down, up, server, decode * rates[S2C] if decode else None,
                                 r.state_bytes_per_conn)
    return Plan(rows, carrier, len(spans), float(spans.sum()), rates, None, ci_note, policy,
                _cpu_note(codecs, policy), link.chosen)


def _missing(suite: Suite, table: Optional[dict], reference: Optional[CodecResult]) -> Optional[str]:
    """Why the planner cannot run on these results, or None."""
    if suite.schema_version < 4:
        return (f"not available: these results (schema {suite.schema_version}) hold no per-direction bytes or "
                f"per-connection traffic; rerun the benchmark for the capacity plan")
    if not table:  # schema 4 to 6 kept json's (or the first codec's) bytes per connection, none when it failed
        return "not available: these results hold no codec's bytes per connection"
    if reference is None or not reference.by_direction or reference.codec not in table["bytes"]:
        name = f"the reference codec {reference.codec}" if reference is not None else "no codec"
        return f"not available: {name} has no per-connection figures"
    if not sum(table["span_ms"]):
        return "not available: the trace's calls carry no timestamps, so there is no call rate"
    return None


def _weights(r: CodecResult, reference: CodecResult, direction: str, carrier: Transport, extra: int,
             policy: Optional[str], link: LossView) -> Tuple[float, float]:
    """(scale of the reference's bytes, header bytes per call) of the codec in ``direction``: on the lossy link at
    its decided rate when the codec was measured there, else under the --wire ``policy``, else one call per packet."""
    figures = (loss.figures(r, link.policy, link.chosen) or
               (wire.policy_figures(r, policy, carrier.name, extra) if policy else None))
    found = wire.weights(r, reference, figures, direction)
    return found or (_scale(r, reference, direction), _header(r, direction, carrier) + extra)


def _scale(r: CodecResult, reference: CodecResult, direction: str) -> float:
    """The codec's bytes per call in ``direction`` over the reference's: scales each connection's reference bytes."""
    mine, theirs = r.by_direction.get(direction), reference.by_direction.get(direction)
    if not mine or not theirs or not mine["calls"] or not theirs["bytes"]:
        return 0.0
    return (mine["bytes"] / mine["calls"]) / (theirs["bytes"] / theirs["calls"])


def _header(r: CodecResult, direction: str, carrier: Transport) -> float:
    """Mean header bytes per message of the codec in ``direction`` (the WebSocket length field by method mean)."""
    methods = [(m["calls"], m["bytes"] / m["calls"]) for m in r.by_method.values() if m.get("calls")]
    total = sum(n for n, _ in methods)
    if not total:
        return float(carrier.per_message(direction, 0))
    return sum(n * carrier.per_message(direction, mean) for n, mean in methods) / total


def load_bootstrap() -> None:
    """Import what the traffic intervals need (scipy.stats: 0.5 s), ahead of time: one of the pieces a run does while
    it would wait (:func:`rpcbench.reports.imports_ahead`)."""
    import scipy.stats  # noqa: F401


def _bootstrap(spans: np.ndarray, calls: Dict[str, np.ndarray], ref_bytes: Dict[str, np.ndarray],
               weights: Sequence[Sequence[Tuple[float, float]]]) -> Tuple[List[Estimate], str]:
    """Per player: calls/s per direction, then each codec's c2s and s2c bytes/s, with bootstrap CIs."""

    def rates(span: np.ndarray, c2s: np.ndarray, s2c: np.ndarray, b_c2s: np.ndarray, b_s2c: np.ndarray,
              axis: int = -1) -> np.ndarray:
        seconds = span.sum(axis)
        sums = {C2S: (c2s.sum(axis), b_c2s.sum(axis)), S2C: (s2c.sum(axis), b_s2c.sum(axis))}
        out = [sums[C2S][0] / seconds, sums[S2C][0] / seconds]
        for per_direction in weights:
            for d, (scale, header) in zip((C2S, S2C), per_direction):
                out.append((scale * sums[d][1] + header * sums[d][0]) / seconds)
        return np.stack(out)

    data = (spans, calls[C2S], calls[S2C], ref_bytes[C2S], ref_bytes[S2C])
    point = rates(*data)
    if len(spans) < 2:
        return [Estimate(float(v), math.nan, math.nan) for v in point], "one connection: no interval"
    import scipy.stats  # 0.5 s to import (load_bootstrap): only an interval over two connections or more needs it
    ci = scipy.stats.bootstrap(data, rates, paired=True, vectorized=True, n_resamples=BOOTSTRAP_RESAMPLES,
                               method="percentile", batch=max(1, 500_000 // len(spans)),
                               rng=np.random.default_rng(BOOTSTRAP_SEED)).confidence_interval
    note = (f"traffic: percentile bootstrap over the trace's {len(spans):,} connections ({BOOTSTRAP_RESAMPLES:,} "
            f"resamples, seeded)")
    return [Estimate(float(v), float(lo), float(hi)) for v, lo, hi in zip(point, ci.low, ci.high)], note


def _cpu_note(codecs: Sequence[CodecResult], policy: Optional[str]) -> str:
    """What the plan's CPU per call is: per message, or timed on whole packets of ``policy`` (and for which codecs)."""
    packets = [r.codec for r in codecs if (t := wire.cpu_timing(r, policy, "encode")) is not None and t is not r.encode]
    if not packets:
        return "timed per message"
    which = "" if len(packets) == len(codecs) else f" for {', '.join(packets)} (the others: per message)"
    return (f"timed on whole packets of {policy}{which}: encode + frame + compress each packet, decompress + "
            "unframe + decode every message")


def _cpu(timing: Optional[Timing]) -> Optional[Estimate]:
    """µs per call: the timing median with its distribution-free CI."""
    if timing is None:
        return None
    low, high, _ = timing.ci_us
    return Estimate(timing.median_us, low, high)


@dataclass(frozen=True)
class Figures:
    """One codec's planner figures at a CCU and egress price, each with its CI (what the table shows)."""

    down_kbps: Estimate
    up_kbps: Estimate
    gb_month: Estimate  #: both directions
    egress_gb: Estimate  #: s2c only: what the egress price is paid on
    egress_usd: Estimate  #: ``egress_gb`` x price
    server_cores: Optional[Estimate]
    client_ms_per_s: Optional[Estimate]  #: measured in CPython here: the client's own runtime may differ
    state_bytes: int  #: at one end, for all ccu connections
    total_usd: Estimate  #: the balanced rule's $/month: egress + cores x CORE_MONTH_PRICE + state x RAM_GB_MONTH_PRICE


def figures(row: Capacity, ccu: int, egress_price: float) -> Figures:
    """The table's figures for ``ccu`` players paying ``egress_price`` $/GB of egress."""
    month_gb = ccu * SECONDS_PER_MONTH / 1e9
    egress_usd = row.down.scaled(month_gb * egress_price)
    cores = row.server_us.scaled(ccu / 1e6) if row.server_us else None
    state_usd = row.state_bytes * ccu / 1e9 * RAM_GB_MONTH_PRICE
    total = egress_usd + cores.scaled(CORE_MONTH_PRICE) if cores else egress_usd
    return Figures(
        down_kbps=row.down.scaled(8 / 1000), up_kbps=row.up.scaled(8 / 1000),
        gb_month=(row.down + row.up).scaled(month_gb), egress_gb=row.down.scaled(month_gb), egress_usd=egress_usd,
        server_cores=cores, client_ms_per_s=row.client_decode_us.scaled(1 / 1000) if row.client_decode_us else None,
        state_bytes=row.state_bytes * ccu, total_usd=Estimate(total.value + state_usd, total.low + state_usd,
                                                              total.high + state_usd))
