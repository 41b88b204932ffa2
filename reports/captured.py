"""The wire model against the packet capture a trace was imported from: the ``captured`` row's messages through
the model (the decided ``--wire`` policy, else per call) should make as many packets per direction as the capture
holds (its header's ``capture.packets``); within :data:`TOLERANCE`, or the check says why not (docs/capture.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Tuple

from rpcbench.captured import CAPTURE_KEY, CAPTURED
from rpcbench.results import Suite
from rpcbench.wire import PER_CALL

TOLERANCE = 0.05  #: the share the model's packet count may be off the capture's and still agree
DATAGRAMS = "udp"  #: the one framing not carried by TCP


@dataclass(frozen=True)
class DirectionCheck:
    """One direction's packets: as the wire model sends the captured messages, and as the capture holds them."""

    direction: str
    modelled: int  #: packets the wire model sends for the captured messages (scaled to all when fewer were measured)
    captured: int  #: packets with payload in the capture

    @property
    def off(self) -> float:
        """How far the model is off the capture, as a share of the capture's count (0 when both are 0)."""
        return (self.modelled - self.captured) / self.captured if self.captured else float(self.modelled > 0)


@dataclass(frozen=True)
class CaptureCheck:
    """The wire model against the capture, per direction, and the judgment in one sentence."""

    policy: str  #: the --wire policy the model sent the messages under
    framing: str  #: the import's --framing
    directions: Tuple[DirectionCheck, ...]
    #: (calls the run measured, the messages imported) when fewer were measured (dictionary training holds the
    #: first calls out, --sample-calls measures a sample): the model's packets are scaled by their ratio
    measured: Tuple[int, int] = (0, 0)

    @property
    def agrees(self) -> bool:
        return all(abs(d.off) <= TOLERANCE for d in self.directions)

    @property
    def reason(self) -> str:
        """Why the counts differ, from which way they differ and the framing ("" when they agree)."""
        if self.agrees:
            return ""
        over = any(d.off > TOLERANCE for d in self.directions)
        if over and self.framing != DATAGRAMS:
            return ("TCP coalesced several messages per segment (written faster than the socket sent them, or "
                    "Nagle's algorithm on): the server batches in practice; a --wire tick:MS policy models it")
        if over:
            return "the game packs several messages per datagram: a --wire tick:MS policy models it"
        return ("the capture has more packets than messages: messages over the MSS split into several segments, "
                "or packets the import did not turn into calls (a WebSocket handshake, control frames, messages "
                "that did not decode)")

    @property
    def line(self) -> str:
        """One sentence for every output."""
        counts = ", ".join(f"{d.direction} {d.modelled:,} modelled / {d.captured:,} captured ({d.off:+.1%})"
                           for d in self.directions)
        verdict = (f"within {TOLERANCE:.0%}" if self.agrees
                   else f"off by more than {TOLERANCE:.0%}: {self.reason}")
        scaled = (f" (the model's packets scaled from the {self.measured[0]:,} calls measured to the "
                  f"{self.measured[1]:,} messages captured)" if self.measured[0] else "")
        return f"Wire model vs the packet capture ({self.policy}, {self.framing}): {counts}; {verdict}{scaled}."


def check(suite: Suite, policy: Optional[str]) -> Optional[CaptureCheck]:
    """The check for a run on one imported trace that measured the ``captured`` row (None otherwise; a fleet's
    merged trace keeps no header): under ``policy`` (the decided one) when the row
    has figures for it, else per call."""
    capture: Mapping[str, Any] = (suite.trace.get("metadata") or {}).get(CAPTURE_KEY) or {}
    row = suite.find(CAPTURED)
    packets = capture.get("packets")
    if row is None or not row.wire or not isinstance(packets, Mapping):
        return None
    figures = {w.wire: w for w in row.wire}
    chosen = next(str(p) for p in (policy, PER_CALL, *figures) if p in figures)
    by_direction = figures[chosen].by_direction
    measured, messages = figures[chosen].calls, int(capture.get("messages") or 0)
    scale = messages / measured if 0 < measured < messages else 1.0
    directions = tuple(DirectionCheck(d, round(by_direction[d].packets * scale), int(packets.get(d, 0)))
                       for d in ("c2s", "s2c") if packets.get(d) or by_direction[d].packets)
    return CaptureCheck(chosen, str(capture.get("framing", "?")), directions,
                        (measured, messages) if scale != 1.0 else (0, 0))
