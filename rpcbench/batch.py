"""The size pass a batch of calls at a time: what the calls of a batch share (:class:`CallBatch`: their keys
grouped once for every codec's tally, their pickle for the fidelity check), and what one codec made of the
batch (:class:`Inner`; :func:`rpcbench.tally.round_trip_all` makes it).

Per call, bookkeeping in Python costs more than msgpack's own encode and decode; per batch, loops in C
(list comprehensions, ``Counter``, numpy's ``bincount``, one pickle of the batch) do the same work, and the
figures come out identical (tests/test_batch.py holds the two paths against each other)."""

from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from rpc_capture import C2S, Call

from .fidelity import pickled

BATCH = 128  #: calls per batch, as a binary trace stores them


class Grouping:
    """A batch's calls grouped by a key: the distinct keys in order of first appearance, the position of each
    call's key among them (:attr:`of`) and the calls per key."""

    __slots__ = ("keys", "of", "counts")

    def __init__(self, values: Sequence[Any]) -> None:
        self.keys = list(dict.fromkeys(values))
        position = {key: i for i, key in enumerate(self.keys)}
        self.of = np.fromiter(map(position.__getitem__, values), np.intp, len(values))
        self.counts: List[int] = np.bincount(self.of, minlength=len(self.keys)).tolist()

    def sums(self, weights: np.ndarray) -> List[int]:
        """The sum of ``weights`` (one per call) per key (exact: a batch's bytes are far below 2**53)."""
        return np.bincount(self.of, weights, len(self.keys)).astype(np.int64).tolist()


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
        methods, args, _, dirs, conns = zip(*calls)
        self.methods, self.directions = Grouping(methods), Grouping(dirs)
        self.streams = Grouping(list(zip(conns, map(C2S.__eq__, dirs))))  #: (connection, c2s?)
        self.shared: Dict[str, Inner] = {}  #: inner codec name -> its batch (codecs on one inner codec share it)
        self._sent = list(zip(methods, args))
        self._pickle: Optional[bytes] = None
        self._pickles: Optional[List[Optional[bytes]]] = None
        self.per_call: Optional[List[Dict[str, Any]]] = None  #: each call's ``shared`` (tally.check), once asked

    def same_as_sent(self, back: List[Any]) -> bool:
        """Is every decoded value exactly the (method, args) tuple sent? One pickle per side, compared: in fast
        mode a list's pickle is its items' one after another, so equal pickles are equal items, each equal
        as :func:`rpcbench.fidelity.compare`'s pickle check finds it (not equal: each call is compared)."""
        try:
            if self._pickle is None:
                self._pickle = pickled(self._sent)
            return self._pickle == pickled(back)
        except Exception:  # deeper than C recursion allows, or a type pickle cannot write: compared call by call
            return False

    def same_each(self, back: List[Any]) -> List[bool]:
        """Is each decoded value exactly the (method, args) tuple sent, by its pickle? (False: maybe not.)"""
        if self._pickles is None:
            self._pickles = list(map(_pickled_or_none, self._sent))
        return list(map(_same, self._pickles, map(_pickled_or_none, back)))


def _pickled_or_none(value: Any) -> Optional[bytes]:
    try:
        return pickled(value)
    except Exception:
        return None


def _same(a: Optional[bytes], b: Optional[bytes]) -> bool:
    return a is not None and a == b
