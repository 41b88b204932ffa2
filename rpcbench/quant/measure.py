"""Two walks over a call along its ``quant`` layout, written apart from the generated code they check.

* :func:`call_bits`: the bits a call takes, counted from the layout's widths alone. A test holds it equal to
  the codec's bytes on real traces (``ceil(bits / 8)``), so the layout docs/codecs.md describes is the one
  the encoder writes.
* :class:`Tolerance`: which values of a decoded call came back within their declared step (a lossy change the
  report counts per field, with the largest error) and which did not (a failure).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set, Tuple

import msgpack

from .layout import ANY, BYTES, FLOAT, INT, NONE, STR, TOLERANCE, Leaf, Map, Message, Node, Repeated, Slot
from .layout import varint_bits, zigzag


def call_bits(index_bits: int, message: Message, args: Any) -> int:
    """Bits of one call: the method index, then the message (before padding to whole bytes)."""
    return index_bits + node_bits(message, args)


def node_bits(node: Node, value: Any) -> int:
    """Bits of one value of a node."""
    if isinstance(node, Leaf):
        return leaf_bits(node, node.default if value is None else value)
    if isinstance(node, Repeated):
        items = value or ()
        return varint_bits(len(items)) + sum(node_bits(node.item, x) for x in items)
    if isinstance(node, Map):
        entries = value or {}
        return varint_bits(len(entries)) + sum(node_bits(node.key, k) + node_bits(node.value, v)
                                               for k, v in entries.items())
    if node.positional:
        return node.count_bits + sum(_slot_bits(s, v) for s, v in zip(node.slots, value))
    return sum(_slot_bits(s, value.get(s.key)) for s in node.slots)


def _slot_bits(slot: Slot, value: Any) -> int:
    """A field: its presence bit, if it has one, then its value."""
    if slot.presence == NONE:
        return node_bits(slot.node, value)
    return 1 + (0 if value is None else node_bits(slot.node, value))


def leaf_bits(leaf: Leaf, value: Any) -> int:
    """Bits of one value: fixed, a zig-zag varint, or a varint length and the bytes."""
    if leaf.bits is not None:
        return leaf.bits
    if leaf.kind == INT:
        return varint_bits(zigzag(value))
    if leaf.kind == FLOAT:
        return varint_bits(zigzag(round(value / leaf.rule.step)))
    data = {STR: lambda v: v.encode(), BYTES: bytes, ANY: msgpack.packb}[leaf.kind](value)
    return varint_bits(len(data)) + 8 * len(data)


@dataclass
class Changes:
    """What one decoded call's quantized values did: (path, error, step) per changed value, the first off-step."""

    changed: List[Tuple[str, float, float]] = field(default_factory=list)
    beyond: Optional[Tuple[str, str]] = None  #: (path, detail) of the first value off by more than half a step


class Tolerance:
    """Compares a decoded call's quantized floats with the original's against their steps."""

    def __init__(self, layouts: Dict[str, Message]) -> None:
        self.layouts = layouts
        self._lossy: Set[int] = set()  #: ids of the nodes with a quantized float at or below them
        for message in layouts.values():
            self._mark(message)

    @property
    def any(self) -> bool:
        """Whether any field is quantized (the codec is lossy)."""
        return bool(self._lossy)

    def _mark(self, node: Node) -> bool:
        if isinstance(node, Leaf):
            lossy = node.kind == FLOAT and node.rule.step is not None
        elif isinstance(node, Repeated):
            lossy = self._mark(node.item)
        elif isinstance(node, Map):
            lossy = self._mark(node.value)
        else:
            lossy = any([self._mark(s.node) for s in node.slots])
        if lossy:
            self._lossy.add(id(node))
        return lossy

    def check(self, method: str, original: Any, decoded: Any) -> Tuple[Any, Changes]:
        """``decoded`` with each value that came back within half its step replaced by the original (so the exact
        comparison that follows sees only what else differs), and the changes found."""
        changes = Changes()
        message = self.layouts.get(method)
        if message is None or id(message) not in self._lossy:
            return decoded, changes
        return self._walk(message, original, decoded, changes), changes

    def _walk(self, node: Node, a: Any, b: Any, changes: Changes) -> Any:
        if id(node) not in self._lossy:
            return b
        if isinstance(node, Leaf):
            return _leaf(node, a, b, changes)
        if isinstance(node, Repeated):
            if type(a) in (list, tuple) and type(b) is list and len(a) == len(b):
                return [self._walk(node.item, x, y, changes) for x, y in zip(a, b)]
            return b
        if isinstance(node, Map):
            if type(a) is dict and type(b) is dict:
                return {k: self._walk(node.value, a[k], v, changes) if k in a else v for k, v in b.items()}
            return b
        if node.positional and type(a) in (list, tuple) and type(b) is list:
            return [self._walk(s.node, x, y, changes) for s, x, y in zip(node.slots, a, b)] + b[len(a):]
        if not node.positional and type(a) is dict and type(b) is dict:
            out = dict(b)
            for slot in node.slots:
                if slot.key in a and slot.key in b:
                    out[slot.key] = self._walk(slot.node, a[slot.key], b[slot.key], changes)
            return out
        return b


def _leaf(leaf: Leaf, a: Any, b: Any, changes: Changes) -> Any:
    """One quantized float: the original back if ``b`` is within half a step of it (a change, when it differs)."""
    step = leaf.rule.step
    if type(b) is not float or type(a) not in (int, float) or step is None or not math.isfinite(a):
        return b
    error = abs(a - b)
    if error <= step / 2 * (1 + TOLERANCE) + abs(a) * 1e-15:
        if type(a) is not float or a != b or math.copysign(1.0, a) != math.copysign(1.0, b):
            changes.changed.append((leaf.path, error, step))
        return a
    if changes.beyond is None:
        changes.beyond = (leaf.path, f"{a!r} -> {b!r}: off by {error:.6g}, more than half its step {step:g}")
    return b
