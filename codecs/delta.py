"""``X+delta``: each call sent as its changes against the previous call of the same method on
the same connection (and direction), then encoded by ``X``."""

import sys
from typing import Any, Dict, List, Optional

from rpc_capture import Call
from rpcbench.codec import CallStage, Codec, Received

FULL, DICT, LIST, SAME = 0, 1, 2, 3  #: patch kinds: a whole value, a dict's changes, a list's changes, no change


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (``1``, ``1.0`` and ``True`` differ; so do 0.0 and -0.0).

    Key order does not count, as in the fidelity check: a patched dict keeps the old order.
    """
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is dict:
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    if ta is list or ta is tuple:
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if ta is float:
        return a.hex() == b.hex()
    return bool(a == b)


def diff(old: Any, new: Any) -> list:
    """The patch turning ``old`` into ``new``: ``[SAME]``, ``[FULL, new]``, or the changes of a dict or list.

    Dict: ``[DICT, [[key, patch], ...], [removed keys]]`` (unchanged keys omitted; keys in
    pairs so int keys stay ints). List: ``[LIST, new length, [[index, patch], ...]]``
    (unchanged items omitted; items past the old end are ``FULL``).
    """
    if same(old, new):
        return [SAME]
    if type(old) is dict and type(new) is dict:
        changed = [[k, diff(old[k], v) if k in old else [FULL, v]] for k, v in new.items()
                   if k not in old or not same(old[k], v)]
        return [DICT, changed, [k for k in old if k not in new]]
    if type(old) is list and type(new) is list:
        changed = [[i, diff(old[i], v) if i < len(old) else [FULL, v]] for i, v in enumerate(new)
                   if i >= len(old) or not same(old[i], v)]
        return [LIST, len(new), changed]
    return [FULL, new]


def patch(old: Any, change: list) -> Any:
    """``old`` with ``change`` (from :func:`diff`) applied, as a new value (``old`` is not modified)."""
    kind = change[0]
    if kind == SAME:
        return old
    if kind == FULL:
        return change[1]
    if kind == DICT:
        out = {k: v for k, v in old.items() if k not in change[2]}
        for key, sub in change[1]:
            out[key] = patch(old[key], sub) if key in old else sub[1]
        return out
    if kind == LIST:
        out = old[:change[1]] + [None] * (change[1] - len(old))
        for index, sub in change[2]:
            out[index] = patch(old[index], sub) if index < len(old) else sub[1]
        return out
    raise ValueError(f"unknown delta patch kind {kind!r}")


def deep_size(value: Any) -> int:
    """Bytes a value and everything in it take (``sys.getsizeof`` summed over containers)."""
    size = sys.getsizeof(value)
    if type(value) is dict:
        size += sum(deep_size(k) + deep_size(v) for k, v in value.items())
    elif type(value) is list or type(value) is tuple:
        size += sum(deep_size(v) for v in value)
    return size


class Delta(CallStage):
    """Sends each call as a patch against the previous call of its method on its stream.

    The first call of a method goes whole (``[0, args]``); later ones carry only what
    changed: dict keys and list items that stayed the same are omitted, changed ones are
    patched recursively, and type changes (``1`` -> ``1.0``) count as changes, so the
    receiver rebuilds every call exactly. Both ends keep the last args per method: it
    needs reliable, ordered delivery. The receiver's decoded args share unchanged parts
    with the previous call's: a receiver must not modify them in place.
    """

    stage = "delta"
    per_connection = True
    ordered_delivery = True

    def __init__(self, inner: Codec) -> None:
        super().__init__(inner)
        self._sent: Dict[str, Any] = {}
        self._received: Dict[str, Any] = {}

    def connection(self) -> "Delta":
        return Delta(self.inner.connection())

    def encode(self, call: Call) -> bytes:
        last: Optional[Any] = self._sent.get(call.method, _NONE)
        change: List[Any] = [FULL, call.args] if last is _NONE else diff(last, call.args)
        data = self.inner.encode(Call(call.method, change, call.t, call.dir, call.conn))
        self._sent[call.method] = call.args
        return data

    def decode(self, data: bytes) -> Received:
        method, change = self.inner.decode(data)
        args = patch(self._received.get(method), change)
        self._received[method] = args
        return method, args

    def state_bytes(self) -> int:
        """The last args per method, kept by the sender and by the receiver, plus the inner codec's state."""
        kept = sum(deep_size(v) for v in self._sent.values()) + sum(deep_size(v) for v in self._received.values())
        return kept + self.inner.state_bytes()


_NONE = object()  #: no previous call of the method yet
