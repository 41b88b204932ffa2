"""The ``quant`` layout: what each field of each message becomes on the wire, from a protobuf schema and a
precision profile (docs/codecs.md, "quant").

A message is a tree of nodes built once: :class:`Leaf` (one value: its kind and, from the profile, its width),
:class:`Message` (fields in schema order, each a :class:`Slot` with its presence rule), :class:`Repeated` and
:class:`Map`. The generated encoders and decoders (:mod:`.codegen`) follow it; so do, written apart from them,
the bit count (:func:`.measure.call_bits`, to check the codec's bytes) and the walks over values that ``precision
suggest`` and the fidelity check use (:func:`leaves`, :class:`.measure.Tolerance`).

Widths: an int with a range ``min..max`` takes ``(max - min).bit_length()`` bits; a float with a step and a range
is the int ``round(v / step)`` over the range's multiples of the step; without a range either is a zig-zag
varint (groups of 7 bits, each after a continuation bit); an exact float its 64 (``float`` fields: 32) IEEE
bits; a bool 1 bit; an enum the bits its value count needs; strings, bytes and schema-less values
(``google.protobuf.Value``... as MessagePack) a varint length then their bytes; repeated fields and maps a
varint count. A field with presence (``optional``, a message, a wrapper) has one presence bit first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from google.protobuf.descriptor import FieldDescriptor

from ..precision import Profile, Rule
from ..protobuf import field_kind, map_value_field, positional_fields

INT, FLOAT, BOOL, STR, BYTES, ENUM, ANY = "int", "float", "bool", "str", "bytes", "enum", "any"
NONE, OPTIONAL, NULLABLE = "none", "optional", "nullable"  #: a slot's presence: none, absent -> missing, -> None
_SCALAR_KINDS = {FieldDescriptor.TYPE_DOUBLE: FLOAT, FieldDescriptor.TYPE_FLOAT: FLOAT,
                 FieldDescriptor.TYPE_BOOL: BOOL, FieldDescriptor.TYPE_STRING: STR,
                 FieldDescriptor.TYPE_BYTES: BYTES}  #: a scalar field's type -> its kind (any other: INT)
TOLERANCE = 1e-9  #: relative slack on "within half a step" (the decimal rounding of the decoded value)


class OutOfProfile(ValueError):
    """A value outside its field's range, or one no step can carry (NaN, infinity): never sent silently."""

    def __init__(self, path: str, value: Any, why: str) -> None:
        super().__init__(f"{path}: {value!r} {why}")
        self.path = path


@dataclass
class Leaf:
    """One value: its kind, path and rule; ``bits`` when fixed-width, else None (varint or length-prefixed)."""

    kind: str
    path: str
    rule: Rule
    single: bool = False  #: a 32-bit ``float`` field (exact: 32 bits)
    names: Tuple[str, ...] = ()  #: an enum's value names, in number order
    numbers: Tuple[int, ...] = ()  #: an enum's value numbers
    bits: Optional[int] = None
    low: int = 0  #: an int's min, or a float's lowest multiple of the step
    high: int = 0
    escape: Optional[int] = None  #: the code after the range that stands for 0, when the range leaves 0 out

    def __post_init__(self) -> None:
        step, rule = self.rule.step, self.rule
        if self.kind == INT and rule.min is not None and rule.max is not None:
            self._ranged(math.ceil(rule.min), math.floor(rule.max))
        elif self.kind == FLOAT and step is not None and rule.min is not None and rule.max is not None:
            self._ranged(math.floor(rule.min / step + TOLERANCE), math.ceil(rule.max / step - TOLERANCE))
        elif self.kind == FLOAT and step is None:
            self.bits = 32 if self.single else 64
        elif self.kind == BOOL:
            self.bits = 1
        elif self.kind == ENUM:
            self.bits = (len(self.names) - 1).bit_length()

    def _ranged(self, low: int, high: int) -> None:
        """Codes 0..high-low for the range; one more for 0 when the range leaves it out (the default a field
        without presence sends for a value the call left out, as protobuf's 0)."""
        self.low, self.high = low, high
        if not low <= 0 <= high:
            self.escape = high - low + 1
        self.bits = (high - low + (self.escape is not None)).bit_length()

    @property
    def default(self) -> Any:
        """What a field without presence sends for a value the call left out or gave as None."""
        if self.kind == ENUM:
            return self.names[0]
        return {INT: 0, FLOAT: 0.0, BOOL: False, STR: "", BYTES: b"", ANY: None}[self.kind]


@dataclass
class Slot:
    """One field of a message: its key (name, or index of a positional arg), presence rule and node."""

    key: Union[str, int]
    presence: str
    node: "Node"


@dataclass
class Message:
    """A message type: its slots in schema order; ``positional``: the call's args are a list (``arg0``...)."""

    name: str
    slots: List[Slot]
    positional: bool

    @property
    def count_bits(self) -> int:
        """A positional message's bits for how many args the call gives."""
        return len(self.slots).bit_length() if self.positional else 0


@dataclass
class Repeated:
    """A repeated field: a varint count, then each item."""

    item: "Node"


@dataclass
class Map:
    """A map field: a varint count, then each key and value."""

    key: Leaf
    value: "Node"


Node = Union[Leaf, Message, Repeated, Map]


def method_layouts(schema: Any, profile: Profile) -> Dict[str, Tuple[int, Message]]:
    """``{method: (index on the wire, message layout)}`` for every method of a loaded protobuf schema, indexes
    0..N-1 in the schema's method id order."""
    ordered = sorted(schema.methods.values(), key=lambda m: m.id)
    return {m.name: (i, _message(schema.pool.FindMessageTypeByName(m.message), f"{m.name}.args", profile, ()))
            for i, m in enumerate(ordered)}


def method_bits(methods: int) -> int:
    """Bits of the method index: as few as ``methods`` needs (none for one method)."""
    return max(methods - 1, 0).bit_length()


def _message(desc: Any, path: str, profile: Profile, busy: Tuple[str, ...]) -> Message:
    """The layout of one message type at ``path`` (a type nested in itself is sent schema-less below)."""
    positional = positional_fields(desc)
    busy = (*busy, desc.full_name)
    slots = []
    for i, fd in enumerate(desc.fields):
        key: Union[str, int] = i if positional else fd.name
        slots.append(Slot(key, _presence(fd), _field(fd, f"{path}.{key}", profile, busy)))
    return Message(desc.full_name, slots, bool(positional))


def _presence(fd: Any) -> str:
    """How a field tells a value the call left out: not at all, by a missing key, or as None (wrappers)."""
    if fd.is_repeated:
        return NONE
    if field_kind(fd) == "wrapper":
        return NULLABLE
    return OPTIONAL if fd.has_presence else NONE


def _field(fd: Any, path: str, profile: Profile, busy: Tuple[str, ...]) -> Node:
    """The node of one field: a map, a repeated field, or one value."""
    entry_value = map_value_field(fd)
    if entry_value is not None:
        key = fd.message_type.fields_by_name["key"]
        return Map(_value(key, f"{path}.key", profile, busy), _value(entry_value, f"{path}.value", profile, busy))  # type: ignore[arg-type]
    node = _value(fd, path, profile, busy)
    return Repeated(node) if fd.is_repeated else node


def _value(fd: Any, path: str, profile: Profile, busy: Tuple[str, ...]) -> Node:
    """The node of one value of a field."""
    kind = field_kind(fd)
    if kind == "enum":
        values = fd.enum_type.values
        return Leaf(ENUM, path, profile.rule(path), names=tuple(v.name for v in values),
                    numbers=tuple(v.number for v in values))
    if kind == "wrapper":
        return _value(fd.message_type.fields_by_name["value"], path, profile, busy)
    if kind == "message" and fd.message_type.full_name not in busy and \
            not fd.message_type.full_name.startswith("google.protobuf."):
        return _message(fd.message_type, path, profile, busy)
    if kind != "scalar":
        return Leaf(ANY, path, profile.rule(path))
    scalar = _SCALAR_KINDS.get(fd.type, INT)
    return Leaf(scalar, path, profile.rule(path), single=fd.type == fd.TYPE_FLOAT)


def varint_bits(n: int) -> int:
    """Bits of a varint of the non-negative ``n``: 8 per group of 7 bits, at least one group."""
    return 8 * max(1, -(-n.bit_length() // 7))


def zigzag(n: int) -> int:
    """0, -1, 1, -2... as 0, 1, 2, 3...: a small negative number stays a short varint."""
    return n << 1 if n >= 0 else (-n << 1) - 1


def leaves(node: Node, value: Any) -> Iterator[Tuple[Leaf, Any]]:
    """Every (leaf, value) a value holds, walked along the layout; values the layout cannot place are skipped."""
    if isinstance(node, Leaf):
        yield node, value
    elif isinstance(node, Repeated):
        for item in value or ():
            yield from leaves(node.item, item)
    elif isinstance(node, Map):
        for k, v in (value or {}).items():
            yield from leaves(node.key, k)
            yield from leaves(node.value, v)
    elif isinstance(value, (list, tuple)) and node.positional:
        for slot, item in zip(node.slots, value):
            if item is not None or slot.presence == NONE:
                yield from leaves(slot.node, item)
    elif isinstance(value, dict):
        for slot in node.slots:
            item = value.get(slot.key)
            if item is not None or slot.presence == NONE:
                yield from leaves(slot.node, item)
