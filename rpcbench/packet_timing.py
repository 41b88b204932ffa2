"""CPU per call of a codec sending whole packets under a batched ``--wire`` policy (``docs/wire.md``).

The size pass counts a policy's packets; this module prepares what the timing phase replays to time
them: the tick windows of the timing sample (:func:`tick_windows`, the :class:`~rpcbench.wire.Batcher`'s
batches), and per codec (:class:`PacketOps`) the two operations a server and a client run per packet:

* ``encode``: each call of a window encoded (the inner codec, under a compressor), framed with its LEB128
  length, packed in order into packets (:func:`rpcbench.wire.packets`, the MTU), each packet's payload
  compressed whole when the codec compresses (one compressor call per packet: a stream compressor
  flushes once per packet, a dictionary compressor uses its dictionary per packet);
* ``decode``: a packet decompressed (when the codec compresses), unframed
  (:func:`rpcbench.wire.unframe`) and every message decoded to its full ``(method, args)``.

A codec that does not compress pays encode + framing and unframing + decode: building the packet's payload
and splitting it again is work a batching server and its clients do that sending alone does not need.
The timing loops themselves are :mod:`rpcbench.timing`'s (rounds, warm-up, calibration, interleaving).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from rpc_capture import Call

from .codec import Codec, Compressed, Received, Streams, encoded_or_none, stream_key
from .wire import Batcher, WirePolicy, framed, framed_size, packets, unframe

Key = Tuple[Any, str]  #: a connection and direction: one stream of packets
Parts = Tuple[Callable[[Call], bytes], Optional[Callable[[bytes], bytes]], Optional[Callable[[bytes], bytes]],
              Callable[[bytes], Received]]  #: encode one message, compress a payload, decompress it, decode one


def tick_windows(calls: Iterable[Tuple[int, Call]], policy: WirePolicy,
                 origin: Optional[int] = None) -> Iterator[Tuple[int, List[Call]]]:
    """``(index, call)`` pairs grouped into the batches a :class:`Batcher` of ``policy`` closes, in the order
    they are sent: (the index of the batch's first call, its calls). ``origin``: the trace's first timestamp."""
    batcher = Batcher(policy, origin)
    for index, call in calls:
        closed = batcher.step(call, (index, call))  # the batcher keeps each call with its index as its row
        if closed is not None:
            yield _window(closed[3])
    for closed in batcher.rest():
        yield _window(closed[3])


def _window(rows: List[Tuple[int, Call]]) -> Tuple[int, List[Call]]:
    return rows[0][0], [call for _, call in rows]


@dataclass(frozen=True)
class PacketPlan:
    """What the timing of packets replays (plain data, sent to worker processes): the policy as written, its
    MTU, and the sample's tick windows, each the calls of one connection and direction in order."""

    policy: str
    mtu: Optional[int]
    windows: Tuple[Tuple[Call, ...], ...]


def parts(codec: Codec) -> Parts:
    """A codec's (or one stream's instance's) per-message steps: a compressor runs on whole payloads instead."""
    if isinstance(codec, Compressed):
        return codec.inner.encode, codec.compressor.compress, codec.compressor.decompress, codec.inner.decode
    return codec.encode, None, None, codec.decode


class PacketOps:
    """One codec's packets of a :class:`PacketPlan`: the windows it can encode (calls it fails to encode
    are left out, as the size pass sends nothing for them) and the packets they make, ready to replay."""

    def __init__(self, codec: Codec, plan: PacketPlan) -> None:
        self.codec = codec
        self.policy = plan.policy
        self.mtu = plan.mtu
        self.windows: List[Tuple[Key, List[Call]]] = []
        self.calls = self.packets = 0  #: calls in the windows; packets, a fragmented message counted per piece
        sessions = Streams(lambda: parts(codec.connection()))
        for window in plan.windows:
            key = stream_key(window[0])
            encode = sessions[key][0]
            encoded = [(call, m) for call in window if (m := encoded_or_none(encode, call)) is not None]
            if not encoded:
                continue
            self.windows.append((key, [call for call, _ in encoded]))
            self.calls += len(encoded)
            sizes = [framed_size(len(m)) for _, m in encoded]
            self.packets += sum(pieces for _, _, pieces in packets(sizes, self.mtu))
        self._streams = list(dict.fromkeys(key for key, _ in self.windows))
        self.payloads = list(self.replay("encode", self.sessions()))

    def sessions(self) -> Dict[Key, Parts]:
        """Fresh per-stream state for one replay (a stateless codec's one instance for every stream)."""
        return Streams(lambda: parts(self.codec.connection()), self._streams)

    def items(self, op: str) -> List[Tuple[Key, Any]]:
        """What one replay of ``op`` goes through: windows of calls (encode) or packets' payloads (decode)."""
        return self.windows if op == "encode" else self.payloads

    def step(self, op: str) -> Callable[[Parts, Any], List[Any]]:
        """The function ``op`` runs on each item, given its stream's steps."""
        return self.encode_window if op == "encode" else decode_packet

    def encode_window(self, steps: Parts, calls: List[Call]) -> List[bytes]:
        """A window's packets as sent: its messages framed, packed in order, each payload compressed whole."""
        encode, compress = steps[0], steps[1]
        frames = framed([encode(call) for call in calls])
        out = []
        for start, stop, _ in packets([len(frame) for frame in frames], self.mtu):
            payload = b"".join(frames[start:stop])
            out.append(compress(payload) if compress is not None else payload)
        return out

    def replay(self, op: str, sessions: Dict[Key, Parts]) -> Iterator[Tuple[Key, Any]]:
        """One untimed replay of ``op``: each item's key and result, one per packet when encoding."""
        run = self.step(op)
        for key, item in self.items(op):
            result = run(sessions[key], item)
            if op == "encode":
                yield from ((key, payload) for payload in result)
            else:
                yield key, result


def decode_packet(steps: Parts, payload: bytes) -> List[Received]:
    """Every message of a packet, decoded in full: decompressed (when the codec compresses), unframed, decoded."""
    decompress, decode = steps[2], steps[3]
    return [decode(m) for m in unframe(decompress(payload) if decompress is not None else payload)]

