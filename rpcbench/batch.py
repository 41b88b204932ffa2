"""The size pass a batch of calls at a time: what the calls of a batch share (:class:`CallBatch`: their columns,
what the fidelity check compares them with), and the batch through one stateless codec (:func:`round_trip_all`,
:func:`compressed_all`: :class:`Inner`), each call encoded and decoded once.

Per call, bookkeeping in Python costs more than msgpack's own encode and decode; per batch, loops in C
(``map``, list comprehensions, one exact check of the batch) do the same work, and the sums wait for a span of
batches (:mod:`rpcbench.span`). The figures come out identical (tests/test_batch.py holds the two paths
against each other)."""

from __future__ import annotations

import itertools
import operator
import time
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from rpc_capture import Call

from .codec import Codec
from .fidelity import OTHER, identical
from .round_trip import Outcome, compress_checked, compressed, encode_failed, error_text, judged, not_bytes

BATCH = 128  #: calls per batch, as a binary trace stores them


class Inner(NamedTuple):
    """A batch through one codec: its bytes per call (None: it failed to encode), encode + decode ns of the
    batch, and when any call did not come back the same, the outcome of each (None for those that did)."""

    data: List[Optional[bytes]]
    ns: int
    outcomes: Optional[List[Any]] = None  #: per call, tally.Outcome or None (the same call back)
    stop: Optional[Tuple[int, str]] = None  #: (position, why) of a call that ended the codec (SystemExit)


class CallBatch:
    """Up to :data:`BATCH` calls measured one after another, with what every codec's tally shares."""

    def __init__(self, indices: List[int], calls: List[Call]) -> None:
        self.indices, self.calls = indices, calls
        self.methods, args, self.times, self.dirs, self.conns, *_ = zip(*calls)
        self.offset = 0  #: where its calls start in the piece's span (:func:`rpcbench.tally.check_batch`)
        self.shared: Dict[str, Inner] = {}  #: inner codec name -> its batch (codecs on one inner codec share it)
        self._sent = list(zip(self.methods, args))
        self.per_call: Optional[List[Dict[str, Any]]] = None  #: each call's ``shared`` (tally.check), once asked

    def same_as_sent(self, back: List[Any]) -> bool:
        """Is every decoded value exactly the (method, args) tuple sent? One check of the whole batch (in fast mode a
        list's pickle is its items' one after another, so equal pickles are equal items, each equal as
        :func:`rpcbench.fidelity.compare`'s pickle check finds it; not equal: each call is compared)."""
        return identical(self._sent, back)

    def same_each(self, back: List[Any]) -> List[bool]:
        """Is each decoded value exactly the (method, args) tuple sent? (False: maybe not.) ``==`` tells the calls that
        differ, then one check of the others shows them the same (else each call is checked on its own)."""
        try:
            equal = list(map(operator.eq, self._sent, back))
            if identical(list(itertools.compress(self._sent, equal)), list(itertools.compress(back, equal))):
                return [bool(e) for e in equal]
        except Exception:  # an == that raises (an odd decoded type)
            pass
        return list(map(identical, self._sent, back))


class _Raised(NamedTuple):
    """What a codec raised instead of giving a value (in a batch's list of values)."""

    error: BaseException


def round_trip_all(codec: Codec, batch: CallBatch, declared: frozenset, beat: Any, whole: bool = True) -> Inner:
    """:func:`rpcbench.round_trip.round_trip` of each call of ``batch`` through a stateless codec: encoding all,
    then decoding all, each call once (what a call raised is its outcome). Each call is judged only when the
    batch did not come back exactly as sent; a ``SystemExit`` stops the codec at its call (:attr:`Inner.stop`).

    ``whole``: try the batch's one pickle first (the codec's last batch came back whole); else compare each call's
    at once, as that pickle would be wasted (a codec with a declared change on a few calls of every batch)."""
    timer = time.perf_counter_ns
    t0 = timer()
    data = _each(codec.encode, batch.calls, batch.indices, beat)
    clean = len(data) == len(batch.calls) and {*map(type, data)} == {bytes}
    back = _each(codec.decode if clean else _decoder(codec), data, batch.indices, beat)
    ns = timer() - t0
    stop = _exit(data) or _exit(back)
    if stop is not None:
        return Inner([], ns, stop=stop)
    if clean and whole and _Raised not in map(type, back) and batch.same_as_sent(back):
        return Inner(data, ns)
    same = batch.same_each(back) if clean else [False] * len(data)
    if all(same):
        return Inner(data, ns)
    each = ns // len(data)
    outcomes = [None if ok else _outcome(codec, call, d, b, each, declared, clean)
                for call, d, b, ok in zip(batch.calls, data, back, same)]
    return Inner([o.data if o else d for o, d in zip(outcomes, data)], ns, outcomes)


def _exit(values: List[Any]) -> Optional[Tuple[int, str]]:
    """(position, why) of the value that is a ``SystemExit`` raised (the last: :func:`_each` stops there)."""
    last = values[-1] if values else None
    if type(last) is _Raised and not isinstance(last.error, Exception):
        return len(values) - 1, error_text(last.error)
    return None


def _decoder(codec: Codec) -> Any:
    """``codec.decode`` of what encoded to bytes (the rest left as it is: they failed already)."""
    return lambda data: codec.decode(data) if type(data) is bytes else data


def _outcome(codec: Codec, call: Call, data: Any, back: Any, ns: int, declared: frozenset, checked: bool) -> Outcome:
    """The outcome of one call of a batch from what its encode and decode gave or raised (``checked``: the batch's
    check found it not the same; else its batch was not checked, as some call did not encode)."""
    if type(data) is _Raised:
        return encode_failed(call, data.error, declared, ns)
    if type(data) is not bytes:
        return encode_failed(call, not_bytes(data), declared, ns)
    if type(back) is _Raised:
        return Outcome(data, ("decode", OTHER, False, "", error_text(back.error)), ns)
    return judged(codec, call, data, back, ns, declared, differs=checked)


def _each(func: Any, items: Sequence[Any], indices: Sequence[int], beat: Any) -> List[Any]:
    """``func`` of each item, in order, each once; an item whose call raised gets :class:`_Raised`, and a
    ``SystemExit`` ends the list. With a watcher, ``beat[0]`` names the call at work, as call by call it does."""
    out: List[Any] = []
    append = out.append
    while len(out) < len(items):
        try:
            if beat is None:
                for item in itertools.islice(items, len(out), None):
                    append(func(item))
            else:
                for index, item in itertools.islice(zip(indices, items), len(out), None):
                    beat[0] = index
                    append(func(item))
        except Exception as e:
            append(_Raised(e))
        except SystemExit as e:
            append(_Raised(e))
            break
    return out


def compressed_all(compressor: Any, base: Inner, batch: CallBatch, beat: Any) -> Inner:
    """The batch of ``inner+compressor`` from the inner codec's: compressed and checked at once when every call
    encoded (the inner codec's problems kept), else :func:`rpcbench.round_trip.compressed` of each call's
    outcome (a stateless compressor, so a call compressed again gives the same)."""
    if base.stop is not None:
        return base
    timer = time.perf_counter_ns
    t0 = timer()
    each = base.ns // len(base.data)
    if None not in base.data:
        packed = _each(compressor.compress, base.data, batch.indices, beat)
        if {*map(type, packed)} == {bytes} and len(packed) == len(base.data) and \
                _each(compressor.decompress, packed, batch.indices, beat) == base.data:
            ns = timer() - t0
            return Inner(packed, base.ns + ns, base.outcomes and [
                o and o._replace(data=p, ns=o.ns + ns // len(packed)) for o, p in zip(base.outcomes, packed)])
    outcomes = [compressed(compressor, o or Outcome(d, None, each)) for o, d in
                zip(base.outcomes or [None] * len(base.data), base.data)]
    return Inner([o.data for o in outcomes], base.ns + timer() - t0, outcomes)


def streamed_all(compressors: Sequence[Any], base: Inner, batch: CallBatch, beat: Any) -> Inner:
    """The batch of ``inner+compressor`` for a compressor that keeps a stream per connection: each call's inner
    bytes through ``compressors`` (its stream's, one per call), compressed then decompressed call after call in
    the streams' order as :func:`rpcbench.round_trip.compressed` does (a stream's state cannot go back, so what
    goes wrong is told for that call alone); a ``SystemExit`` stops the codec at its call."""
    if base.stop is not None:
        return base
    timer = time.perf_counter_ns
    t0 = timer()
    steps: List[Any] = []
    append = steps.append
    try:
        for index, compressor, data in zip(batch.indices, compressors, base.data):
            if beat is not None:
                beat[0] = index
            append((None, None) if data is None else compress_checked(compressor, data))
    except SystemExit as e:
        return Inner([], base.ns + timer() - t0, stop=(len(steps), error_text(e)))
    ns = timer() - t0
    packed = [step[0] for step in steps]
    if base.outcomes is None and not any(step[1] for step in steps):
        return Inner(packed, base.ns + ns)
    each, base_each = ns // len(steps), base.ns // len(steps)
    outcomes = [_streamed(step, o, each, base_each) for step, o in zip(steps, base.outcomes or [None] * len(steps))]
    return Inner([o.data if o else p for o, p in zip(outcomes, packed)], base.ns + ns, outcomes)


def _streamed(step: Tuple[Optional[bytes], Any], base: Optional[Outcome], each: int, base_each: int
              ) -> Optional[Outcome]:
    """One call's outcome in :func:`streamed_all` (None: the same call back, compressed), from the inner codec's
    outcome ``base`` (None: the same call) and the compressor's ``step``."""
    packed, problem = step
    if base is not None and base.data is None:  # the inner codec failed the call: nothing was compressed
        return base
    ns = (base.ns if base is not None else base_each) + each
    if problem is not None:
        return Outcome(packed, problem, ns)
    return base._replace(data=packed, ns=ns) if base is not None else None
