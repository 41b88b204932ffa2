"""The codec contract, and compression as a wrapper around any codec.

A codec plugin is one class in a file in ``codecs/``; the registry finds it there.
"""

from __future__ import annotations

import abc
import base64
from typing import Any, Callable, ClassVar, Dict, Iterable, List, Mapping, Optional, Tuple

from rpc_capture import Call

from .fidelity import BYTES, INT_KEYS, SURROGATES, TUPLES

Stage = Tuple[str, Callable[[Any], Any]]  #: a named step of encoding or decoding
Received = Tuple[str, Any]  #: what ``decode`` returns: ``(method, args)``, what a receiver dispatches on


class Codec(abc.ABC):
    """Turns one RPC call into the bytes sent on the wire, and back.

    Contract, which every plugin must keep:

    * ``id``: the registry name, e.g. ``"json"``. Lower case, no ``+`` (``+`` joins a
      codec and a compressor: ``"json+zlib-1"``).
    * ``encode(call) -> bytes``: everything the receiver needs to dispatch the call, i.e.
      ``call.method`` and ``call.args``; ``len()`` of the result is what the benchmark
      counts. Self-describing formats encode the envelope ``{"method": ..., "args": ...}``
      in that key order. Raise any exception for a call the format cannot carry: it is
      recorded as an encode failure of that call, and the run goes on.
    * ``decode(data) -> (method, args)``: what a receiver needs to dispatch the call, as
      a plain tuple, every value materialised (no lazy views: the decode timing must
      cover the whole job). No harness object (``Call``) is built in ``decode``: the
      timing covers the codec's work only; the harness builds the ``Call`` it compares
      for fidelity outside the timed loops (:func:`received_call`).
    * No avoidable work in ``encode``/``decode``: options are fixed once in ``__init__``
      (not restated per call when they are the library's default), and there is no
      fail-then-retry on a hot path where a cheaper test exists. ``bench/overhead.py``
      measures each codec against its bare library call.
    * Configuration (level, options) lives in plain public attributes set in
      ``__init__``; ``config()`` reports them and they are recorded with every result.
    * ``changes``: what the format cannot carry or carries differently, as
      ``{feature: what happens}`` with features from :mod:`rpcbench.fidelity` (e.g.
      ``{BYTES: "bytes -> base64 str"}``). A difference in a declared feature is
      reported as declared; anything else is a fidelity bug of the codec.
    * ``library``: the PyPI distribution the codec is built on, whose version is
      recorded (None for the standard library). Import it at the top of the plugin
      file: if it is missing, the registry skips the codec with one line.
    * ``per_connection``: True for codecs that keep state across calls (a compression
      stream per connection). The harness then calls ``connection()`` once per
      connection and direction (:func:`stream_key`) and sends that stream's calls, in
      order, through the instance it returns; stateless codecs are shared by all
      connections. Such a codec sets ``ordered_delivery = True``: a lost or reordered
      message breaks every later one of its stream, so it needs a reliable, ordered
      transport, and the report says so beside its figures.
    * ``timed_work()``: the codec whose encode and decode the timing runs for this row: itself, except for a
      row whose ``encode`` does no work (``captured`` hands back bytes a packet capture recorded), which
      names the codec doing what the recorded program did (the game's codec, plus its deflate stream).
    * ``ack_baselines``: True for a stage that keeps state per connection but survives loss
      because it encodes against what the receiver acknowledged (``+ackdelta``): it gives
      ``sender()`` and ``receiver()`` halves that a lossy link drives with its acks, and its
      plain ``encode``/``decode`` stand for an ideal link (each message acked before the next).
    * ``state_bytes()``: memory one stream's instance keeps (the sender's compressor plus
      the receiver's decompressor), measured after the trace's calls went through it;
      ``shared_state_bytes()``: memory kept once for all connections (a dictionary).
      Both 0 for stateless codecs.
    """

    id: ClassVar[str] = ""
    library: ClassVar[Optional[str]] = None
    changes: ClassVar[Mapping[str, str]] = {}
    per_connection: ClassVar[bool] = False
    ordered_delivery: ClassVar[bool] = False  #: needs reliable, ordered delivery (state across calls)
    ack_baselines: ClassVar[bool] = False  #: state across calls kept in step by acks (sender()/receiver())

    @abc.abstractmethod
    def encode(self, call: Call) -> bytes:
        """Serialize one call to the bytes that go on the wire."""

    @abc.abstractmethod
    def decode(self, data: bytes) -> Received:
        """``(method, args)``, fully materialised, from wire bytes."""

    def connection(self) -> "Codec":
        """A codec for one connection's calls in order; stateless codecs return self."""
        return self

    def timed_work(self) -> "Codec":
        """The codec the timing runs for this row's CPU figures (see the class docstring); itself by default."""
        return self

    def pass_over(self, call: Call) -> None:
        """A call of this stream that the run does not measure (held out to train a dictionary, or outside
        --size-fraction) goes by: a codec replaying a recorded stream (``captured`` with permessage-deflate, whose
        next messages refer to this one's) reads it to stay in step; every other codec ignores it."""
        return None

    def within_steps(self, call: Call, back: Call) -> Tuple[Call, Tuple[Tuple[str, float, float], ...],
                                                           Optional[Tuple[str, str]]]:
        """For a codec that sends values at a declared precision (``quant``): ``back`` with each value that came
        back within its declared step restored to the call's, then ``(field path, error, step)`` of each, and
        ``(path, detail)`` of the first value off by more (a failure). Exact codecs give ``back`` unchanged."""
        return back, (), None

    def libraries(self) -> Tuple[str, ...]:
        """Every PyPI distribution this codec's figures depend on (recorded with versions)."""
        return (self.library,) if self.library else ()

    def state_bytes(self) -> int:
        """Memory this stream's state keeps, sender and receiver side (0 for stateless codecs)."""
        return 0

    def shared_state_bytes(self) -> int:
        """Memory kept once for every connection (a dictionary); 0 if none."""
        return 0

    def encode_stages(self) -> List[Stage]:
        """``encode`` as named steps, each fed the previous one's output (for the timing split).

        One step by default. Codecs with real stages (protobuf: convert, then serialize;
        a compressed codec: encode, then compress) return them so users see where the
        time goes; the steps chained must equal ``encode``.
        """
        return [(self.name, self.encode)]

    def decode_stages(self) -> List[Stage]:
        """``decode`` as named steps, like :meth:`encode_stages`."""
        return [(self.name, self.decode)]

    @property
    def name(self) -> str:
        """The id as given on the command line (wrappers add their compressor)."""
        return self.id

    @property
    def base(self) -> "Codec":
        """The codec under any compression wrapper (itself for a plain codec)."""
        return self

    def config(self) -> Dict[str, Any]:
        """Public configuration attributes, recorded with each result."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __repr__(self) -> str:
        return f"<codec {self.name} {self.config()}>"


class Compressor(abc.ABC):
    """Compresses encoded calls; combined with any codec as ``codec+name-level``.

    ``name`` is the registry name (``"zlib"``); ``level`` a plain attribute, like any other
    option the constructor takes (``window_log``...: given by the registry from the run's
    settings, reported by ``options()``). ``compress`` and ``decompress`` work on one
    message. A compressor that keeps a stream across messages (one context per connection
    and direction, as WebSocket permessage-deflate does) sets ``per_connection = True``
    and returns a fresh context from ``connection()``; one whose messages only decode in
    the order they were sent sets ``ordered_delivery = True``. A compressor that needs a
    dictionary sets ``trained = True``, implements ``train`` and ``ship_bytes``, and
    receives the dictionary as its constructor's ``dictionary`` argument.
    """

    name: ClassVar[str] = ""
    library: ClassVar[Optional[str]] = None
    default_level: ClassVar[int] = 1
    levels: ClassVar[range] = range(1, 10)
    per_connection: ClassVar[bool] = False
    ordered_delivery: ClassVar[bool] = False  #: needs reliable, ordered delivery (a stream's state)
    trained: ClassVar[bool] = False  #: needs a dictionary trained on held-out calls

    def __init__(self, level: Optional[int] = None) -> None:
        self.level = self.default_level if level is None else level

    @abc.abstractmethod
    def compress(self, data: bytes) -> bytes:
        """Compress one message."""

    @abc.abstractmethod
    def decompress(self, data: bytes) -> bytes:
        """Decompress one message."""

    def connection(self) -> "Compressor":
        """A context for one connection's messages in order; stateless ones return self."""
        return self

    def state_bytes(self) -> int:
        """Memory this context's compressor and decompressor keep (0 for stateless compressors)."""
        return 0

    def shared_state_bytes(self) -> int:
        """Memory kept once for every connection (a dictionary); 0 if none."""
        return 0

    def options(self) -> Dict[str, Any]:
        """Public settings besides the level, recorded with each result."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_") and k != "level"}

    @classmethod
    def train(cls, samples: List[bytes], size: int) -> bytes:
        """A dictionary of at most ``size`` bytes from encoded messages (``trained`` compressors only)."""
        raise NotImplementedError(f"{cls.name} is not trained")

    @classmethod
    def ship_bytes(cls, dictionary: bytes) -> int:
        """Bytes it costs to send ``dictionary`` to one client (``trained`` compressors only)."""
        raise NotImplementedError(f"{cls.name} is not trained")


class Compressed(Codec):
    """``inner`` codec followed by ``compressor``: id ``inner+name-level``."""

    def __init__(self, inner: Codec, compressor: Compressor) -> None:
        self.inner = inner
        self.compressor = compressor
        self.per_connection = inner.per_connection or compressor.per_connection  # type: ignore[misc]
        self.ordered_delivery = inner.ordered_delivery or compressor.ordered_delivery  # type: ignore[misc]
        # acks still drive an ack_baselines stage behind a compressor that keeps nothing across messages (each
        # message, or batched each packet, compressed alone); behind a stream, ordered delivery is needed anyway
        self.ack_baselines = inner.ack_baselines and not compressor.ordered_delivery  # type: ignore[misc]
        self.changes = inner.changes  # type: ignore[misc]
        self.library = "+".join(self.libraries()) or None  # type: ignore[misc]  # json+zstd: zstandard, not stdlib
        self._steps = (inner.encode, compressor.compress, compressor.decompress, inner.decode)  # bound once

    @property
    def name(self) -> str:
        return f"{self.inner.name}+{self.compressor.name}-{self.compressor.level}"

    @property
    def base(self) -> Codec:
        return self.inner.base

    def encode(self, call: Call) -> bytes:
        encode, compress, _, _ = self._steps
        return compress(encode(call))

    def decode(self, data: bytes) -> Received:
        _, _, decompress, decode = self._steps
        return decode(decompress(data))

    def connection(self) -> "Compressed":
        return Compressed(self.inner.connection(), self.compressor.connection())

    def state_bytes(self) -> int:
        return self.inner.state_bytes() + self.compressor.state_bytes()

    def sender(self) -> "CompressedSender":
        """An ``ack_baselines`` inner stage's sending half, each message compressed."""
        return CompressedSender(self.inner.sender(), self.compressor)  # type: ignore[attr-defined]

    def receiver(self) -> "CompressedReceiver":
        """Its receiving half, each message decompressed first."""
        return CompressedReceiver(self.inner.receiver(), self.compressor)  # type: ignore[attr-defined]

    def shared_state_bytes(self) -> int:
        return self.inner.shared_state_bytes() + self.compressor.shared_state_bytes()

    def libraries(self) -> Tuple[str, ...]:
        extra = self.compressor.library
        return self.inner.libraries() + ((extra,) if extra else ())

    def encode_stages(self) -> List[Stage]:
        return self.inner.encode_stages() + [(self.compressor.name, self.compressor.compress)]

    def decode_stages(self) -> List[Stage]:
        return [(self.compressor.name, self.compressor.decompress)] + self.inner.decode_stages()

    def config(self) -> Dict[str, Any]:
        return {**self.inner.config(), "compressor": self.compressor.name, "level": self.compressor.level,
                **self.compressor.options()}


class CompressedSender:
    """The sending half of ``X+stage+compressor`` for a stage kept in step by acks (``X+ackdelta+zstd-3``)."""

    def __init__(self, half: Any, compressor: Compressor) -> None:
        self.half, self._compress = half, compressor.compress

    def encode(self, call: Call, msg_id: int) -> bytes:
        return self._compress(self.half.encode(call, msg_id))

    def acked(self, msg_id: int) -> None:
        self.half.acked(msg_id)

    def view(self) -> Any:
        return self.half.view()


class CompressedReceiver:
    """The receiving half of the same."""

    def __init__(self, half: Any, compressor: Compressor) -> None:
        self.half, self._decompress = half, compressor.decompress

    def decode(self, data: bytes) -> Any:
        return self.half.decode(self._decompress(data))

    def state(self) -> Any:
        return self.half.state()


class CallStage(Codec):
    """A stage that rewrites calls before an inner codec encodes them: id ``inner+name``.

    Subclasses set ``stage`` (the registry name, e.g. ``"delta"``) and implement
    ``encode``/``decode`` around ``self.inner``; ``connection()`` wraps the inner
    codec's own. Its position in an id is after the codec it wraps and before any
    compressor: ``msgpack+delta+zstdstream-3``.
    """

    stage: ClassVar[str] = ""

    def __init__(self, inner: Codec) -> None:
        self.inner = inner
        self.changes = inner.changes  # type: ignore[misc]
        self.library = inner.library  # type: ignore[misc]

    @property
    def name(self) -> str:
        return f"{self.inner.name}+{self.stage}"

    @property
    def base(self) -> Codec:
        return self.inner.base

    def libraries(self) -> Tuple[str, ...]:
        return self.inner.libraries()

    def state_bytes(self) -> int:
        return self.inner.state_bytes()

    def config(self) -> Dict[str, Any]:
        return {**self.inner.config(), "stage": self.stage}


def stream_key(call: Call) -> Tuple[Any, str]:
    """Which stream of a per-connection codec carries ``call``: one per connection and direction."""
    return call.conn, call.dir


class Streams(Dict[Any, Any]):
    """One instance per stream (connection and direction, :func:`stream_key`), made by ``make`` (a codec's or
    compressor's ``connection``) the first time the stream is looked up: ``streams[stream_key(call)]``."""

    def __init__(self, make: Callable[[], Any], keys: Iterable[Any] = ()) -> None:
        """``keys``: streams made now (before a timed replay starts), the others when first looked up."""
        super().__init__((key, make()) for key in keys)
        self.make = make

    def __missing__(self, key: Any) -> Any:
        made = self[key] = self.make()
        return made


def encoded_or_none(encode: Callable[[Call], Any], call: Call) -> Optional[bytes]:
    """``encode(call)``, or None when the codec raises or returns something other than bytes: the calls timing
    and training leave out (the size pass counts them as the codec's failures)."""
    try:
        data = encode(call)
    except Exception:
        return None
    return data if type(data) is bytes else None


def received_call(decoded: Any) -> Call:
    """The ``Call`` a codec's ``decode`` result stands for (outside timed loops: fidelity checks).

    A ``Call`` (what ``decode`` returned before the contract changed) is accepted too; its
    construction is then part of that codec's timed decode. Raises TypeError, naming what
    came back, for anything else.
    """
    if type(decoded) is tuple and len(decoded) == 2 and isinstance(decoded[0], str):  # the contract's, tried first
        return Call(decoded[0], decoded[1])
    if isinstance(decoded, Call):
        return Call(decoded.method, decoded.args)
    shown = type(decoded).__name__ + (f" of {len(decoded)}" if isinstance(decoded, tuple) else "")
    raise TypeError(f"decode returned {shown}, not a (method, args) tuple")


#: what every JSON codec declares: JSON has no bytes, no int keys, no tuples, and is UTF-8
JSON_CHANGES: Mapping[str, str] = {
    BYTES: "bytes -> base64 str",
    INT_KEYS: "int key -> str key",
    TUPLES: "tuple -> list",
    SURROGATES: "fails to encode (not valid UTF-8)",
}


def base64_default(value: Any) -> str:
    """``default=`` hook for JSON encoders: bytes become standard base64 text (padded)."""
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def bytes_to_base64(value: Any) -> Any:
    """``value`` with every bytes inside it replaced by base64 text, for encoders without a hook."""
    t = type(value)
    if t is bytes or t is bytearray:
        return base64.b64encode(value).decode("ascii")
    if t is dict:
        return {k: bytes_to_base64(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [bytes_to_base64(v) for v in value]
    return value
