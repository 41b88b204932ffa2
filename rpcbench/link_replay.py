"""A trace replayed over the lossy link (:mod:`rpcbench.link`), one codec, --wire policy and loss rate at a time.

The calls leave as the size pass sends them (:mod:`rpcbench.wire`: per call, or each tick window's calls framed,
packed into packets of at most the MTU, compressed whole when the codec compresses) and each packet goes out as
one datagram (a message over the MTU as several). Then, by the codec's delivery:

* ``reliable`` (``ordered_delivery``: stream compressors, ``X+delta``): a reliable ordered layer as ENet's or
  KCP's. Each data datagram carries a segment header; the receiver acks every datagram it gets (a duplicate too)
  with a 24 B ack segment, riding on the next datagram its end sends back, else in an ack-only datagram at its
  next flush; a datagram not acked within the RTO is sent again, the RTO growing at each resend; calls reach the
  application in the order they were sent, so a call waits behind any earlier one still missing.
* ``ackdelta`` (``ack_baselines``: the ``+ackdelta`` stage): plain datagrams, never resent, each with the netcode
  header (sequence, ack, ack_bits) that acks what arrived the other way, a header-only packet when nothing goes
  back in time (:class:`rpcbench.link.AckWindow`); each
  call is encoded when its packet leaves, against what the acks that have arrived by then say the receiver holds,
  and the receiver decodes each call it gets, checked against the call sent (the size pass's fidelity check).
* ``udp`` (everything else): plain datagrams, no acks; a call in a lost datagram is lost.

Time moves event by event: datagram arrivals, then ack arrivals, then timeouts, then new sends at one instant,
each kind in the order it was scheduled. A channel's datagrams draw their fates in that order.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

from rpc_capture import C2S, S2C, Call

from .codec import Codec, Compressed, Streams, encoded_or_none, received_call
from .fidelity import compare
from .link import (ACK, ACK_BYTES, ACK_PACKETS, ACKDELTA, ACKS_PER_DATAGRAM, CALLS, DATAGRAM_BYTES, HEADERS,
                   LOST_ACKS, LOST_CALLS, LOST_PACKETS, PACKET_HEADER, PACKETS, PAYLOAD, RELIABLE, RESEND,
                   SEGMENT_HEADER, UDP, AckWindow, Channel, LinkSettings, LinkTally, header_bytes)
from .wire import Batcher, Closed, Transport, WirePolicy, framed, packets

Batch = Tuple[int, Tuple[Any, str], List[int]]  #: (when it leaves in ns, (connection, direction), its calls' indices)
Unit = Tuple[int, int, List[int]]  #: messages [first, stop) of a batch's sent ones, in datagrams of these payloads
Packed = Tuple[List[int], List[bytes], List[Unit]]  #: a batch packed (:meth:`Packer.pack`)
#: event kinds, in the order they happen at one instant (sends come last)
ARRIVE, FLUSH, ACKED, TIMEOUT = range(4)
_OTHER = {C2S: S2C, S2C: C2S}


def delivery_of(codec: Codec) -> str:
    """How ``codec`` lives with loss: ackdelta, reliable or udp."""
    if getattr(codec, "ack_baselines", False):
        return ACKDELTA
    return RELIABLE if codec.ordered_delivery else UDP


def batches(calls: Sequence[Call], policy: WirePolicy, origin: int) -> List[Batch]:
    """The sends of ``calls`` under ``policy``: each call at its time, or each tick window's calls when the
    size pass's :class:`Batcher` flushes them (``origin``: the trace's first timestamp), in time order."""
    if not policy.batched:
        return [(call.t, (call.conn, call.dir), [i]) for i, call in enumerate(calls)]
    batcher = Batcher(policy, origin)
    closed: List[Closed] = []
    for i, call in enumerate(calls):
        batch = batcher.step(call, i)
        if batch is not None:
            closed.append(batch)
    closed.extend(batcher.rest())
    out = [(batcher.flush_time(key, window, times), key, list(rows)) for key, window, times, rows in closed]
    return sorted(out, key=lambda b: b[0])  # stable: batches leaving together keep the order they closed in


class Packer:
    """A codec's messages of one batch made into datagrams, as the size pass's :class:`WireTally` counts them:
    per call one datagram per message; batched, framed and packed by :func:`packets` (a message over the MTU in
    several datagrams), each packet compressed whole by a compressing codec's compressor."""

    def __init__(self, codec: Codec, policy: WirePolicy, encode: Callable[[Call, Any], Optional[bytes]]) -> None:
        self.policy = policy
        self.encode = encode  #: (call, key) -> its message (None: the codec cannot encode it)
        compressor = codec.compressor if policy.batched and isinstance(codec, Compressed) else None
        self.compressor = compressor
        self._sessions = Streams(compressor.connection) if compressor and compressor.per_connection else None

    def pack(self, key: Any, batch: Sequence[Call]) -> Packed:
        """(positions in ``batch`` of the calls sent, their messages, the datagrams that carry them)."""
        sent, messages = [], []
        for position, call in enumerate(batch):
            message = self.encode(call, key)
            if message is not None:
                sent.append(position)
                messages.append(message)
        if not self.policy.batched:
            return sent, messages, [(i, i + 1, [len(m)]) for i, m in enumerate(messages)]
        frames = framed(messages)
        units = []
        for start, stop, pieces in packets([len(f) for f in frames], self.policy.mtu):
            payload = b"".join(frames[start:stop])
            size = len(self._compress(key, payload)) if self.compressor is not None else len(payload)
            units.append((start, stop, [size // pieces + (k < size % pieces) for k in range(pieces)]))
        return sent, messages, units

    def _compress(self, key: Any, payload: bytes) -> bytes:
        session: Any = self._sessions[key] if self._sessions is not None else self.compressor
        return bytes(session.compress(payload))


def plain_packer(codec: Codec, policy: WirePolicy) -> Packer:
    """The packer of a codec whose messages do not depend on the link: a session per stream if it keeps state;
    batched, a compressing codec's messages are its inner codec's (the packet is compressed whole)."""
    sessions = Streams(codec.connection)
    stateful = codec.per_connection
    inner = policy.batched and isinstance(codec, Compressed)

    def encode(call: Call, key: Any) -> Optional[bytes]:
        session: Any = sessions[key] if stateful else codec
        return encoded_or_none((session.inner if inner else session).encode, call)

    return Packer(codec, policy, encode)


def pack_all(codec: Codec, policy: WirePolicy, calls: Sequence[Call], sends: Sequence[Batch]) -> List[Packed]:
    """Every send's batch packed, once for all the loss rates of a codec whose messages the link does not change."""
    packer = plain_packer(codec, policy)
    return [packer.pack(key, [calls[i] for i in indices]) for _, key, indices in sends]


Replayed = Tuple[str, float, Dict[str, Any]]  #: (--wire policy, loss rate, the replay's :meth:`LinkTally.export`)


@dataclass(frozen=True)
class LinkReplays:
    """One trace's replays over the lossy link (what :func:`replay_trace` gives, a size-pass task's answer)."""

    states: Dict[str, Tuple[Replayed, ...]]  #: per codec replayed, one per policy and rate (policies first)
    errors: Dict[str, str]  #: per codec that failed, why (it has no states)


def replay_trace(make: Callable[[str], Codec], names: Sequence[str], calls: Sequence[Call], origin: int,
                 policies: Sequence[WirePolicy], settings: LinkSettings, transport: Transport,
                 extra: int = 0, beat: Any = None) -> LinkReplays:
    """Every codec (``make(name)``: a fresh one) replayed under every policy at every loss rate; a codec that
    raises is that codec's error. ``beat[1]``: the position of the codec at work, for the watch."""
    sends = {p.text: batches(calls, p, origin) for p in policies}
    replayed: Dict[str, Tuple[Replayed, ...]] = {}
    errors: Dict[str, str] = {}
    for position, name in enumerate(names):
        if beat is not None:
            beat[1] = position
        try:
            states: List[Replayed] = []
            for policy in policies:
                codec = make(name)
                packed = None if delivery_of(codec) == ACKDELTA else pack_all(codec, policy, calls, sends[policy.text])
                for rate in settings.loss:
                    replay = Replay(make(name) if packed is None else codec, policy, calls, sends[policy.text],
                                    settings, rate, transport, extra, packed)
                    states.append((policy.text, rate, replay.run(beat).export()))
            replayed[name] = tuple(states)
        except Exception as e:  # a codec that fails here is that codec's failure; the others carry on
            errors[name] = f"lossy link replay: {type(e).__name__}: {str(e)[:160]}"
    return LinkReplays(replayed, errors)


class Sent:
    """A packet sent (one or more datagrams, :data:`Unit`): the calls it carries, its datagrams' state at both ends."""

    __slots__ = ("key", "calls", "sizes", "messages", "ids", "arrived", "left", "acked", "unacked", "base", "done",
                 "seqs")

    def __init__(self, key: Tuple[Any, str], calls: List[int], sizes: List[int], messages: List[bytes],
                 ids: List[int]) -> None:
        self.key, self.calls, self.sizes = key, calls, sizes  #: (connection, direction), its calls, datagram payloads
        self.messages, self.ids = messages, ids  #: ackdelta: the messages as sent and their message ids
        self.arrived, self.left = [False] * len(sizes), len(sizes)  #: datagrams at the receiver, and still missing
        self.acked, self.unacked = [False] * len(sizes), len(sizes)  #: datagrams acked at the sender, and not yet
        self.base = 0  #: when it would have arrived without loss: sent + the longest first delay of its datagrams
        self.done: Optional[int] = None  #: when its last datagram arrived
        self.seqs = [0] * len(sizes)  #: ackdelta: its datagrams' sequence numbers on their channel


class Replay:
    """One codec's replay of a trace's calls under one policy at one loss rate (:meth:`run`)."""

    def __init__(self, codec: Codec, policy: WirePolicy, calls: Sequence[Call], sends: Sequence[Batch],
                 settings: LinkSettings, loss_pct: float, transport: Transport, extra: int = 0,
                 packed: Optional[Sequence[Packed]] = None) -> None:
        """``packed``: each send's batch already packed (:func:`pack_all`; not for ``+ackdelta``, whose messages
        depend on the acks): the same for every loss rate."""
        self.calls, self.sends, self.settings, self.loss_pct = calls, sends, settings, loss_pct
        self.packed = packed
        self.delivery = delivery_of(codec)
        self.tally = LinkTally(self.delivery)
        self.transport, self.extra = transport, extra
        self.declared = frozenset(codec.changes)
        self._channels: Dict[Any, Channel] = {}
        self._events: List[Tuple[int, int, int, Any]] = []
        self._order = itertools.count()
        self._units: List[Sent] = []  #: every packet sent, numbered in order
        self._queues: Dict[Any, Deque[int]] = {}  #: reliable: per stream, its units in order, from the next to deliver
        self._packed_ids: List[int] = []  #: ackdelta: the message ids of the batch being packed
        self._pending: Dict[Tuple[Any, str], List[Tuple[int, int]]] = {}  #: reliable: per channel, acks owed on it
        self._windows: Dict[Tuple[Any, str], AckWindow] = {}  #: ackdelta: per channel, what its receiver got
        self._sequenced: Dict[Tuple[Any, str], List[Tuple[int, int]]] = {}  #: ackdelta: per channel, by sequence
        self._owed: Dict[Tuple[Any, str], int] = {}  #: ackdelta: per channel whose end got data since it last
        #: sent, when its header-only packet goes if nothing else leaves first
        self._interval = settings.ack_interval_ns
        #: ackdelta: how long acks wait for a packet going back: a tick when batched (the end sends every tick
        #: it has calls), else the reliable layer's interval
        self._ack_wait = round(policy.tick_ms * 1_000_000) if policy.batched and policy.tick_ms else self._interval
        if self.delivery == ACKDELTA:  # batched behind a compressor, the packet is compressed whole (the Packer)
            halves: Any = codec.inner if policy.batched and isinstance(codec, Compressed) else codec
            self._senders = Streams(halves.sender)
            self._receivers = Streams(halves.receiver)
            self._ids = Streams(itertools.count)
            self.packer = Packer(codec, policy, self._ackdelta_encode)
        else:
            self.packer = plain_packer(codec, policy)

    def run(self, beat: Any = None) -> LinkTally:
        """Send every batch at its time, run the link until nothing is in flight, count what never arrived.
        ``beat[0]``: the first call of the batch being sent, for the watch."""
        for number, (t, key, indices) in enumerate(self.sends):
            if beat is not None:
                beat[0] = indices[0]
            self._until(t)
            self._send(t, key, indices, self.packed[number] if self.packed is not None else None)
        self._until(None)
        for unit in self._units:
            if unit.done is None:
                for index in unit.calls:
                    self.tally.add(unit.key[1], LOST_CALLS)
                    self.tally.lost_by_method[self.calls[index].method] += 1
        return self.tally

    def _until(self, t: Optional[int]) -> None:
        """Handle every event before ``t`` (None: all)."""
        events = self._events
        while events and (t is None or events[0][0] < t or (events[0][0] == t and events[0][1] <= TIMEOUT)):
            now, kind, _, what = heapq.heappop(events)
            if kind == ARRIVE:
                self._arrive(now, *what)
            elif kind == FLUSH:
                self._flush(now, what)
            elif kind == ACKED:
                self._acked(*what)
            else:
                self._timeout(now, *what)

    def _at(self, t: int, kind: int, what: Tuple[Any, ...]) -> None:
        heapq.heappush(self._events, (t, kind, next(self._order), what))

    def _channel(self, conn: Any, direction: str) -> Channel:
        found = self._channels.get((conn, direction))
        if found is None:
            found = self._channels[(conn, direction)] = Channel(self.settings, self.loss_pct, conn, direction)
        return found

    def _send(self, t: int, key: Any, indices: List[int], packed: Optional[Packed]) -> None:
        """A batch leaves: its calls encoded and packed (unless ``packed`` already), each datagram into the channel."""
        self._packed_ids = []
        sent, messages, units = packed or self.packer.pack(key, [self.calls[i] for i in indices])
        self.tally.add(key[1], CALLS, len(sent))
        for first, stop, payloads in units:
            ackdelta = self.delivery == ACKDELTA  # its receiver decodes what arrives: the messages are kept
            unit = Sent(key, [indices[sent[i]] for i in range(first, stop)], payloads,
                        messages[first:stop] if ackdelta else [], self._packed_ids[first:stop])
            number = len(self._units)
            self._units.append(unit)
            if self.delivery == RELIABLE:
                self._queues.setdefault(key, deque()).append(number)
            for piece in range(len(payloads)):
                delay = self._transmit(t, number, piece, 0)
                unit.base = max(unit.base, t + delay)

    def _transmit(self, t: int, number: int, piece: int, attempt: int) -> int:
        """Datagram ``piece`` of unit ``number`` into its channel (``attempt`` 0: first sent, else a resend):
        counted, its arrival and (reliable) its timeout scheduled; the delay it meets."""
        unit = self._units[number]
        conn, direction = unit.key
        size = unit.sizes[piece]
        lost, delay = self._channel(conn, direction).send()
        reliable = self.delivery == RELIABLE
        own = SEGMENT_HEADER if reliable else PACKET_HEADER if self.delivery == ACKDELTA else 0
        self.tally.add(direction, PACKETS)
        self.tally.add(direction, PAYLOAD, size)
        self.tally.add(direction, HEADERS, header_bytes(self.transport, direction, size, self.extra + own))
        if self.delivery == ACKDELTA:
            sequenced = self._sequenced.setdefault(unit.key, [])
            unit.seqs[piece] = len(sequenced)
            sequenced.append((number, piece))
        acks = self._riding(unit.key, size)
        if attempt:
            self.tally.add(direction, RESEND, size)
        if lost:
            self.tally.add(direction, LOST_PACKETS)
        else:
            self._at(t + delay, ARRIVE, (number, piece))
            if acks:
                self._at(t + delay, ACKED, tuple(acks))
        if reliable:
            self._at(t + self.settings.timeout_ns(attempt), TIMEOUT, (number, piece, attempt))
        return delay

    def _arrive(self, now: int, number: int, piece: int) -> None:
        """A data datagram reaches the receiver: acked (unless plain UDP); its unit's calls delivered once complete."""
        unit = self._units[number]
        conn, direction = unit.key
        back = (conn, _OTHER[direction])
        if self.delivery == RELIABLE:  # its ack rides on the next datagram going back, or goes at the next flush
            pending = self._pending.setdefault(back, [])
            if not pending:
                self._at(-(-now // self._interval) * self._interval, FLUSH, back)
            pending.append((number, piece))
        elif self.delivery == ACKDELTA:  # the next packet going back acks it, if still in its window
            self._windows.setdefault(unit.key, AckWindow()).got(unit.seqs[piece])
            if back not in self._owed:
                self._owed[back] = now + self._ack_wait
                self._at(now + self._ack_wait, FLUSH, back)
        if unit.arrived[piece]:
            return
        unit.arrived[piece] = True
        unit.left -= 1
        if unit.left:
            return
        unit.done = now
        if self.delivery != RELIABLE:
            self._deliver(now, unit)
            return
        queue = self._queues[unit.key]
        while queue and self._units[queue[0]].done is not None:  # in order: what waited behind this one goes too
            self._deliver(now, self._units[queue.popleft()])

    def _riding(self, channel: Tuple[Any, str], size: int) -> List[Tuple[int, int]]:
        """The acks a datagram of ``size`` payload bytes leaving on ``channel`` carries for the data coming the
        other way. Reliable: the owed acks, 24 B each, as many as fit in DATAGRAM_BYTES (the rest wait); ackdelta:
        those its header's ack and ack_bits cover, at no extra byte."""
        if self.delivery == RELIABLE:
            pending = self._pending.get(channel)
            if not pending:
                return []
            room = max(0, (DATAGRAM_BYTES - SEGMENT_HEADER - size) // ACK_BYTES)
            acks = pending[:room]
            del pending[:room]
            self.tally.add(channel[1], ACK, ACK_BYTES * len(acks))
            return acks
        if self.delivery == ACKDELTA:
            self._owed.pop(channel, None)
            return self._covered(channel)
        return []

    def _covered(self, channel: Tuple[Any, str]) -> List[Tuple[int, int]]:
        """ackdelta: the datagrams a packet leaving on ``channel`` acks (by its header's ack and ack_bits)."""
        data = (channel[0], _OTHER[channel[1]])
        window = self._windows.get(data)
        sequenced = self._sequenced.get(data, [])
        return [sequenced[seq] for seq in window.covered()] if window is not None else []

    def _flush(self, now: int, channel: Tuple[Any, str]) -> None:
        """The receiver's flush: the acks it still owes on ``channel``'s way go out in ack-only datagrams.
        Reliable: ACKS_PER_DATAGRAM to a datagram; ackdelta: one packet of the header alone, if anything
        arrived since the last packet this end sent."""
        if self.delivery == RELIABLE:
            pending = self._pending.pop(channel, [])
            for start in range(0, len(pending), ACKS_PER_DATAGRAM):
                acks = pending[start:start + ACKS_PER_DATAGRAM]
                self._ack_only(now, channel, ACK_BYTES * len(acks), acks)
        elif self._owed.get(channel) == now:  # else a packet went back since, and a later deadline may be set
            del self._owed[channel]
            self._ack_only(now, channel, PACKET_HEADER, self._covered(channel))

    def _ack_only(self, now: int, channel: Tuple[Any, str], size: int, acks: List[Tuple[int, int]]) -> None:
        """An ack-only datagram of ``size`` bytes carrying ``acks`` into ``channel``."""
        direction = channel[1]
        lost, delay = self._channel(*channel).send()
        self.tally.add(direction, ACK_PACKETS)
        self.tally.add(direction, ACK, size)
        self.tally.add(direction, HEADERS, header_bytes(self.transport, direction, size, self.extra))
        if lost:
            self.tally.add(direction, LOST_ACKS)
        else:
            self._at(now + delay, ACKED, tuple(acks))

    def _deliver(self, now: int, unit: Sent) -> None:
        direction = unit.key[1]
        if self.delivery == ACKDELTA:
            self._check(unit)
        for _ in unit.calls:
            self.tally.delivered(direction, now - unit.base)

    def _acked(self, *acks: Tuple[int, int]) -> None:
        """An ack datagram reaches the sender: each datagram it acks is no longer resent; a unit all acked tells
        ``+ackdelta``'s sender."""
        for number, piece in acks:
            unit = self._units[number]
            if unit.acked[piece]:
                continue
            unit.acked[piece] = True
            unit.unacked -= 1
            if not unit.unacked and self.delivery == ACKDELTA:
                sender = self._senders[unit.key]
                for msg_id in unit.ids:
                    sender.acked(msg_id)

    def _timeout(self, now: int, number: int, piece: int, attempt: int) -> None:
        if not self._units[number].acked[piece]:
            self._transmit(now, number, piece, attempt + 1)

    def _ackdelta_encode(self, call: Call, key: Any) -> Optional[bytes]:
        """``+ackdelta``: the call encoded now, against the newest baseline its sender has seen acked (its
        message id noted for the batch being packed)."""
        msg_id = next(self._ids[key])
        message = encoded_or_none(lambda c: self._senders[key].encode(c, msg_id), call)
        if message is not None:
            self._packed_ids.append(msg_id)
        return message

    def _check(self, unit: Sent) -> None:
        """``+ackdelta``'s receiver decodes each call of a complete unit: the message id and the call sent?"""
        receiver = self._receivers[unit.key]
        for message, index, msg_id in zip(unit.messages, unit.calls, unit.ids):
            call = self.calls[index]
            try:
                got, received = receiver.decode(message)
                diff = compare(call, received_call(received), self.declared)
            except Exception as e:
                self.tally.mismatch(f"call {index} ({call.method}): the receiver could not decode it: "
                                    f"{type(e).__name__}: {str(e)[:120]}")
                continue
            if got != msg_id:
                self.tally.mismatch(f"call {index} ({call.method}): decoded as message {got}, sent as {msg_id}")
            elif diff is not None and diff.feature not in self.declared:
                self.tally.mismatch(f"call {index} ({call.method}): {diff.path}: {diff.detail}")
