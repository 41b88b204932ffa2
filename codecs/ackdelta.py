"""``X+ackdelta``: each call sent as its changes against the newest call of its key that the receiver
acknowledged, then encoded by ``X``. Loss makes the baselines older and the deltas bigger, never a message
the receiver cannot rebuild: it is driven by acks (``ack_baselines``), not by ordered delivery.

The wire body (``args`` of the call ``X`` encodes, under the call's own method):

* ``[msg_id, args]``: the whole call (no acknowledged baseline of its key yet);
* ``[msg_id, msg_id - base_id, node]``: the changes against message ``base_id``;
* ``[msg_id, base_id - msg_id, args]`` (a negative distance): the whole call although the sender holds
  ``base_id`` (its args do not line up with the baseline's), so the receiver may drop older baselines.

A node holds the changes of one dict (fields in key order) or list (fields by index): ``[mask, *values]``
where bit i of ``mask`` marks field i as changed and the values are the changed fields in order, each
whole; when some of them are nodes themselves (a changed dict or list of the same shape), the node is
``[~mask, nested, *values]`` (a negative first item) and bit j of ``nested`` marks the j-th value as a
node. An unchanged field costs one bit of its level's mask.
"""

from collections import deque
from typing import Any, Callable, Deque, Dict, Iterable, List, Optional, Sequence, Tuple

from rpc_capture import Call
from rpcbench.codec import CallStage, Codec, Received
from rpcbench.codecs.delta import deep_size, same

Key = Tuple[Any, ...]  #: which calls share baselines: ``(method,)`` or ``(method, id field, id value)``
REORDER_WINDOW = 64  #: message ids a superseded baseline is kept for, for messages overtaken on the way
ID_FIELDS = ("id", "entityId", "entity_id", "eid", "entity")  #: dict args fields naming the entity a call is about


def key_rule(id_fields: Sequence[str], id_index: Optional[int]) -> Callable[[str, Any], Key]:
    """The key of a call's baselines: its method plus the first of ``id_fields`` found in dict args holding an
    int or a str (or, with ``id_index``, the list args' item at that index when it is one); else the method."""
    fields = tuple(id_fields)

    def key_of(method: str, args: Any) -> Key:
        if type(args) is dict:
            for field in fields:
                value = args.get(field)
                if type(value) is int or type(value) is str:
                    return method, field, value
        elif id_index is not None and (type(args) is list or type(args) is tuple) and id_index < len(args):
            value = args[id_index]
            if type(value) is int or type(value) is str:
                return method, id_index, value
        return (method,)

    return key_of


def _fields(value: Any) -> Optional[List[Any]]:
    """The field names (dict keys) or indexes of a dict or list, else None."""
    t = type(value)
    if t is dict:
        return list(value)
    if t is list or t is tuple:
        return list(range(len(value)))
    return None


def _lined_up(old: Any, new: Any) -> bool:
    """Same container type and the same fields in the same order (keys of the same types): a mask fits both."""
    return type(old) is type(new) and type(old) in (dict, list, tuple) and (
        len(old) == len(new) if type(old) is not dict else same(list(old), list(new)))


def changes(old: Any, new: Any) -> Optional[list]:
    """The node turning ``old`` into ``new`` (both lined up), or None when nothing changed."""
    mask = nested = 0
    values: List[Any] = []
    for bit, field in enumerate(_fields(old) or ()):
        a, b = old[field], new[field]
        if same(a, b):
            continue
        mask |= 1 << bit
        node = changes(a, b) if _lined_up(a, b) else None
        if node is not None and not (node[0] == (1 << len(a)) - 1 and len(node) == len(a) + 1):
            nested |= 1 << len(values)  # a node, unless every field of it changed whole: then the value is shorter
            values.append(node)
        else:
            values.append(b)
    if not mask:
        return None
    return [~mask, nested, *values] if nested else [mask, *values]


def apply(old: Any, node: list) -> Any:
    """``old`` with ``node`` (from :func:`changes`) applied, as a new value of ``old``'s type (``old`` kept)."""
    fields = _fields(old)
    if fields is None:
        raise ValueError(f"ackdelta node {node!r} for a {type(old).__name__}, not a dict or list")
    mask, nested, start = (~node[0], node[1], 2) if node[0] < 0 else (node[0], 0, 1)
    out = dict(old) if type(old) is dict else list(old)
    at = start  #: the next value of the node
    for bit, field in enumerate(fields):
        if mask >> bit & 1:
            out[field] = apply(old[field], node[at]) if nested >> (at - start) & 1 else node[at]
            at += 1
    if mask >> len(fields) or at != len(node):
        raise ValueError(f"ackdelta node {node!r} does not fit its baseline's {len(fields)} fields")
    return tuple(out) if type(old) is tuple else out


class AckSender:
    """One end's sending half: encodes each call against the newest acknowledged call of its key.

    It keeps that baseline per key, and the messages of the key sent since, until an ack makes one of them
    the baseline (at most ``most_unacked`` per key: an ack that is that late is ignored)."""

    def __init__(self, inner: Codec, key_of: Callable[[str, Any], Key], most_unacked: int) -> None:
        self._encode, self._key_of, self._most_unacked = inner.encode, key_of, most_unacked
        self._acked: Dict[Key, Tuple[int, Call]] = {}  #: key -> newest acknowledged (msg_id, what the receiver holds)
        self._unacked: Dict[Key, Dict[int, Call]] = {}  #: key -> msg_id -> what the receiver will hold once it gets it
        self._key_by_id: Dict[int, Key] = {}

    def encode(self, call: Call, msg_id: int) -> bytes:
        """The message of ``call`` (``msg_id`` rises per sender), against the newest acked call of its key."""
        method, args = call.method, call.args
        key = self._key_of(method, args)
        base = self._acked.get(key)
        if base is None:
            body, held = [msg_id, args], args
        elif _lined_up(base[1].args, args):
            node = changes(base[1].args, args) or [0]
            body, held = [msg_id, msg_id - base[0], node], apply(base[1].args, node)  # the receiver's key order
        else:
            body, held = [msg_id, base[0] - msg_id, args], args
        data = self._encode(Call(method, body, call.t, call.dir, call.conn))
        pending = self._unacked.setdefault(key, {})
        pending[msg_id], self._key_by_id[msg_id] = Call(method, held), key
        if len(pending) > self._most_unacked:  # acks that never come: the oldest waits no longer (ids rise)
            oldest = next(iter(pending))
            del pending[oldest], self._key_by_id[oldest]
        return data

    def acked(self, msg_id: int) -> None:
        """The receiver's ack of ``msg_id`` arrived: it becomes its key's baseline unless a newer one is acked;
        unacked messages older than it are forgotten (their acks could no longer change the baseline)."""
        key = self._key_by_id.pop(msg_id, None)
        if key is None:  # unknown, or older than an acked message of its key: nothing to do
            return
        pending = self._unacked[key]
        self._acked[key] = (msg_id, pending.pop(msg_id))
        for older in [i for i in pending if i < msg_id]:
            del pending[older], self._key_by_id[older]

    def view(self) -> Dict[Any, Tuple[int, Call]]:
        """Key -> ``(msg_id, call)``: the baseline the next call of that key is encoded against."""
        return dict(self._acked)

    def state_bytes(self) -> int:
        """The calls kept: acknowledged baselines and messages waiting for their acks."""
        return _kept(self._acked.values()) + sum(_kept(p.items()) for p in self._unacked.values())


class AckReceiver:
    """The other end: rebuilds each call from its message and the baseline it names.

    A message naming baseline ``b`` tells that the sender saw ``b`` acked, so it never names an older message
    of ``b``'s key again; but a message sent earlier may still be on its way, overtaken (jitter reorders
    datagrams), and name one. So the older messages of the key are dropped once ``reorder_window`` more
    message ids have arrived: a message overtaken by fewer than that still finds its baseline. Of the newer
    ones, the newest ``2 * reorder_window`` are kept (the sender awaits acks of at most ``reorder_window``).
    """

    def __init__(self, inner: Codec, key_of: Callable[[str, Any], Key], reorder_window: int) -> None:
        self._decode, self._key_of, self._window = inner.decode, key_of, reorder_window
        self._held: Dict[Key, Dict[int, Call]] = {}  #: key -> msg_id -> call, every one the sender may refer to
        self._key_by_id: Dict[int, Key] = {}
        self._floor: Dict[Key, int] = {}  #: key -> the newest baseline a message named: older ones are retiring
        self._retiring: Deque[Tuple[int, Key, int]] = deque()  #: (drop when this id arrived, key, below this id)
        self._newest = -1  #: the newest message id that arrived

    def decode(self, data: bytes) -> Tuple[int, Received]:
        """``(msg_id, (method, args))``; ValueError when the message's baseline is not held."""
        method, body = self._decode(data)
        msg_id, args = body[0], body[-1]
        self._newest = max(self._newest, msg_id)
        if len(body) == 3 and body[1] >= 0:
            args = apply(self._find(msg_id - body[1]).args, body[2])
        key = self._key_of(method, args)
        if len(body) == 3:
            self._retire_older(msg_id - abs(body[1]), key)
        held = self._held.setdefault(key, {})
        held[msg_id], self._key_by_id[msg_id] = Call(method, args), key
        if len(held) > 2 * self._window + 1:  # no ack reached the sender for long: the oldest but the baseline go
            oldest = min(held.keys() - {self._floor.get(key)})
            del held[oldest], self._key_by_id[oldest]
        self._drop_retired()
        return msg_id, (method, args)

    def _find(self, base_id: int) -> Call:
        key = self._key_by_id.get(base_id)
        if key is None:
            raise ValueError(f"ackdelta: baseline message {base_id} is not held (never received, or dropped: "
                             f"the message came over {self._window} message ids late)")
        return self._held[key][base_id]

    def _retire_older(self, base_id: int, key: Key) -> None:
        """The sender saw ``base_id`` acked: the older messages of its key retire (dropped a window later)."""
        key = self._key_by_id.get(base_id, key)
        if base_id > self._floor.get(key, -1):
            self._floor[key] = base_id
            self._retiring.append((self._newest + self._window, key, base_id))

    def _drop_retired(self) -> None:
        retiring, held = self._retiring, self._held
        while retiring and retiring[0][0] <= self._newest:
            _, key, below = retiring.popleft()
            calls = held.get(key, {})
            for older in [i for i in calls if i < below]:
                del calls[older], self._key_by_id[older]

    def state(self) -> Dict[Any, Tuple[int, Call]]:
        """Key -> ``(msg_id, call)``: the newest message held of that key."""
        return {key: max(held.items(), key=lambda item: item[0]) for key, held in self._held.items() if held}

    def state_bytes(self) -> int:
        """The calls kept as possible baselines."""
        return sum(_kept(held.items()) for held in self._held.values())


def _kept(items: Iterable[Tuple[int, Call]]) -> int:
    return sum(deep_size(call.args) for _, call in items)


class AckDelta(CallStage):
    """Sends each call as a bitmask delta against the newest acknowledged call of its key (see the module).

    On a lossy link the link engine drives :meth:`sender` and :meth:`receiver` with its acks
    (``ack_baselines``). Plain ``encode``/``decode`` are an ideal link: each message is acked before the
    next is sent, so the baseline is the previous call of the same key on the stream. The receiver's
    decoded args share unchanged parts with its baselines: a receiver must not modify them in place.
    """

    stage = "ackdelta"
    per_connection = True
    ack_baselines = True

    def __init__(self, inner: Codec, id_fields: Sequence[str] = ID_FIELDS, id_index: Optional[int] = None,
                 reorder_window: int = REORDER_WINDOW) -> None:
        super().__init__(inner)
        if id_index is not None and id_index < 0:
            raise ValueError(f"ackdelta: id_index must be 0 or more, not {id_index}")
        if reorder_window < 1:
            raise ValueError(f"ackdelta: reorder_window must be 1 or more, not {reorder_window}")
        self.ordered_delivery = inner.ordered_delivery  # type: ignore[misc]  # only an ordered inner codec needs it
        self.id_fields, self.id_index, self.reorder_window = tuple(id_fields), id_index, reorder_window
        self._key_of = key_rule(self.id_fields, id_index)
        self._sender, self._receiver = self.sender(), self.receiver()
        self._next_id = 0

    def connection(self) -> "AckDelta":
        return AckDelta(self.inner.connection(), self.id_fields, self.id_index, self.reorder_window)

    def sender(self) -> AckSender:
        """The sending half of one connection and direction."""
        return AckSender(self.inner.connection(), self._key_of, self.reorder_window)

    def receiver(self) -> AckReceiver:
        """The receiving half of that connection and direction."""
        return AckReceiver(self.inner.connection(), self._key_of, self.reorder_window)

    def encode(self, call: Call) -> bytes:
        msg_id = self._next_id
        self._next_id += 1
        data = self._sender.encode(call, msg_id)
        self._sender.acked(msg_id)
        return data

    def decode(self, data: bytes) -> Received:
        return self._receiver.decode(data)[1]

    def state_bytes(self) -> int:
        """The calls both halves keep (one baseline per key on an ideal link), plus the inner codec's state."""
        return self._sender.state_bytes() + self._receiver.state_bytes() + self.inner.state_bytes()

    def config(self) -> Dict[str, Any]:
        return {**super().config(), "id_fields": list(self.id_fields), "id_index": self.id_index,
                "reorder_window": self.reorder_window}
