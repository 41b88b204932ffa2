"""Generated encoders and decoders for the ``quant`` layout: Python source per message, compiled once.

An encoder ``e<k>(a, n, v, out) -> (a, n)`` appends a message's fields to one Python int ``a`` holding ``n``
bits so far (``a = a << bits | value``), most significant bit first; the codec writes it with
``int.to_bytes`` after padding to whole bytes. A decoder ``d<k>(big, r) -> (value, r)`` reads fields from
the message as one int ``big`` with ``r`` bits left to read (its lowest ``r`` bits). Each message node of the
layout gets its own pair (a type used at two paths may have two rules). The layout and its widths are
:mod:`.layout`'s.
"""

from __future__ import annotations

import functools
import itertools
import struct
from typing import Any, Callable, Dict, List, Optional, Tuple

import msgpack

from .layout import (ANY, BOOL, BYTES, ENUM, FLOAT, INT, NONE, NULLABLE, STR, Leaf, Map, Message, Node,
                     OutOfProfile, Repeated, Slot)

Encoder = Callable[[int, int, Any, List[bytes]], Tuple[int, int]]
Decoder = Callable[[int, int], Tuple[Any, int]]
CHUNK_BITS = 8192  #: in a loop, an encoder moves its bytes out, a decoder trims what it read, past this many bits


def _vu(a: int, n: int, u: int) -> Tuple[int, int]:
    """An unsigned varint: groups of 7 bits, least significant first, each after a continuation bit."""
    while u > 127:
        a = a << 8 | 128 | (u & 127)
        u >>= 7
        n += 8
    return a << 8 | u, n + 8


def _vz(a: int, n: int, v: int) -> Tuple[int, int]:
    """A signed int as a zig-zag varint."""
    return _vu(a, n, v << 1 if v >= 0 else (-v << 1) - 1)


def _rv(big: int, r: int) -> Tuple[int, int]:
    """An unsigned varint read where ``r`` bits of the message are left, and the bits left after it."""
    u = shift = 0
    while True:
        r -= 8
        group = big >> r & 255
        u |= (group & 127) << shift
        shift += 7
        if group < 128:
            return u, r


def flush(out: List[bytes], a: int, n: int) -> Tuple[int, int]:
    """Move the whole bytes of ``a`` into ``out``, keeping the last ``n % 8`` bits: shifting one ever longer int
    would make a long message's encoding quadratic."""
    keep = n & 7
    out.append((a >> keep).to_bytes(n >> 3, "big"))
    return a & ((1 << keep) - 1), keep


class UnknownKeys(TypeError):
    """A dict of args with keys its message has no field for."""


def _unknown(path: str, value: Dict[Any, Any], known: frozenset) -> UnknownKeys:
    extra = sorted(map(repr, set(value) - known))[:3]
    return UnknownKeys(f"{path}: no field for key {', '.join(extra)}")


_ENV: Dict[str, Any] = {
    "_vu": _vu, "_vz": _vz, "_rv": _rv, "_flush": flush, "_out": OutOfProfile, "_unknown": _unknown,
    "_fromb": int.from_bytes,
    "_pd": struct.Struct(">d").pack, "_ud": struct.Struct(">d").unpack, "_pf": struct.Struct(">f").pack,
    "_uf": struct.Struct(">f").unpack, "_mp": msgpack.Packer(use_bin_type=True).pack,
    "_mu": functools.partial(msgpack.unpackb, strict_map_key=False), "_BIT": {True: 1, False: 0},
    "_BOOLS": (False, True),
}


class Generated:
    """The encoder and decoder of every message node of a set of layouts, compiled once."""

    def __init__(self, messages: List[Message]) -> None:
        self.env: Dict[str, Any] = dict(_ENV)
        self._names: Dict[int, int] = {}
        self._lines: List[str] = []
        self._consts = itertools.count()
        self._todo: List[Message] = []
        for message in messages:
            self._number(message)
        while self._todo:
            self._message(self._todo.pop())
        exec("\n".join(self._lines), self.env)  # noqa: S102 (source built here from the schema's layout)

    def encoder(self, message: Message) -> Encoder:
        """The compiled encoder of a message node."""
        return self.env[f"e{self._names[id(message)]}"]

    def decoder(self, message: Message) -> Decoder:
        """The compiled decoder of a message node."""
        return self.env[f"d{self._names[id(message)]}"]

    def _number(self, message: Message) -> int:
        if id(message) not in self._names:
            self._names[id(message)] = len(self._names)
            self._todo.append(message)
        return self._names[id(message)]

    def _const(self, value: Any) -> str:
        """A name in the generated code's globals for ``value``."""
        name = f"_c{next(self._consts)}"
        self.env[name] = value
        return name

    def _message(self, message: Message) -> None:
        k = self._number(message)
        enc = [f"def e{k}(a, n, v, out):"]
        dec = [f"def d{k}(big, r):"]
        if message.positional:
            bits = message.count_bits
            enc += [f"    if type(v) is not list and type(v) is not tuple or len(v) > {len(message.slots)}:",
                    f"        raise TypeError('{message.name} takes a list of at most {len(message.slots)} args')",
                    "    c = len(v)", f"    a = a << {bits} | c", f"    n += {bits}"]
            dec += [f"    r -= {bits}", f"    c = big >> r & {(1 << bits) - 1}", "    v = []"]
            for i, slot in enumerate(message.slots):
                enc += [f"    if c > {i}:", f"        x0 = v[{i}]", *self._slot_encode(slot, 2)]
                dec += [f"    if c > {i}:", *self._slot_decode(slot, 2), "        v.append(x0)"]
        else:
            known = self._const(frozenset(s.key for s in message.slots))
            enc += ["    if type(v) is not dict:", f"        raise TypeError('{message.name}: args must be a dict')",
                    f"    if not v.keys() <= {known}:", f"        raise _unknown({message.name!r}, v, {known})"]
            dec += ["    v = {}"]
            for slot in message.slots:
                enc += [f"    x0 = v.get({slot.key!r})", *self._slot_encode(slot, 1)]
                absent = f"v[{slot.key!r}] = None" if slot.presence == NULLABLE else "pass"
                dec += [*self._slot_decode(slot, 1, absent), f"    v[{slot.key!r}] = x0" if slot.presence == NONE
                        else ""]
        self._lines += [*enc, "    return a, n", *[line for line in dec if line], "    return v, r", ""]

    def _slot_encode(self, slot: Slot, depth: int) -> List[str]:
        """Lines encoding ``x0`` as the slot's field: a presence bit first if it has one."""
        pad = "    " * depth
        if slot.presence == NONE:
            node = slot.node
            default = self._const(node.default) if isinstance(node, Leaf) else ("()" if isinstance(node, Repeated)
                                                                                  else "{}")
            return [f"{pad}if x0 is None:", f"{pad}    x0 = {default}", *self._encode(node, "x0", depth, 0)]
        return [f"{pad}if x0 is None:", f"{pad}    a <<= 1", f"{pad}    n += 1", f"{pad}else:",
                f"{pad}    a = a << 1 | 1", f"{pad}    n += 1", *self._encode(slot.node, "x0", depth + 1, 0)]

    def _slot_decode(self, slot: Slot, depth: int, absent: Optional[str] = None) -> List[str]:
        """Lines decoding the slot's field into ``x0``; for a field with presence and an ``absent`` statement
        (unindented), into ``v`` when present and ``absent`` when not (without one: ``x0`` is None then)."""
        pad = "    " * depth
        if slot.presence == NONE:
            return self._decode(slot.node, "x0", depth, 0)
        present = [f"{pad}    v[{slot.key!r}] = x0"] if absent is not None else []
        missing = f"{pad}    {absent}" if absent is not None else f"{pad}    x0 = None"
        return [f"{pad}r -= 1", f"{pad}if big >> r & 1:", *self._decode(slot.node, "x0", depth + 1, 0),
                *present, f"{pad}else:", missing]

    def _encode(self, node: Node, x: str, depth: int, level: int) -> List[str]:
        """Lines encoding the value in variable ``x`` as ``node``."""
        pad = "    " * depth
        if isinstance(node, Message):
            return [f"{pad}a, n = e{self._number(node)}(a, n, {x}, out)"]
        if isinstance(node, Repeated):
            item = f"x{level + 1}"
            return [f"{pad}a, n = _vu(a, n, len({x}))", f"{pad}for {item} in {x}:",
                    *self._encode(node.item, item, depth + 1, level + 1), *self._flushed(depth + 1)]
        if isinstance(node, Map):
            key, value = f"k{level + 1}", f"x{level + 1}"
            return [f"{pad}a, n = _vu(a, n, len({x}))", f"{pad}for {key}, {value} in {x}.items():",
                    *self._encode(node.key, key, depth + 1, level + 1),
                    *self._encode(node.value, value, depth + 1, level + 1), *self._flushed(depth + 1)]
        return [pad + line for line in self._leaf_encode(node, x)]

    @staticmethod
    def _flushed(depth: int) -> List[str]:
        """Lines ending a loop's item: past CHUNK_BITS, the whole bytes so far go to ``out``."""
        pad = "    " * depth
        return [f"{pad}if n > {CHUNK_BITS}:", f"{pad}    a, n = _flush(out, a, n)"]

    @staticmethod
    def _trimmed(depth: int) -> List[str]:
        """Lines ending a loop's item: past CHUNK_BITS read, ``big`` keeps only the bits left (reading from one
        long int would make a long message's decoding quadratic)."""
        pad = "    " * depth
        return [f"{pad}if big.bit_length() - r > {CHUNK_BITS}:", f"{pad}    big &= (1 << r) - 1"]

    def _leaf_encode(self, leaf: Leaf, x: str) -> List[str]:
        """Lines encoding one value (no indentation)."""
        bits, path = leaf.bits, leaf.path
        if leaf.kind == INT and bits is not None:
            return [f"if {leaf.low} <= {x} <= {leaf.high}:", f"    a = a << {bits} | ({x} - {leaf.low})",
                    *self._escaped(leaf, x, "a = a << {bits} | {escape}"),
                    "else:", f"    raise _out({path!r}, {x}, 'outside its range {leaf.low}..{leaf.high}')",
                    f"n += {bits}"]
        if leaf.kind == INT:
            return [f"a, n = _vz(a, n, {x})"]
        if leaf.kind == FLOAT and leaf.rule.step is not None:
            return self._float_encode(leaf, x)
        if leaf.kind == FLOAT:
            pack = "_pf" if leaf.single else "_pd"
            return [f"a = a << {bits} | _fromb({pack}({x}), 'big')", f"n += {bits}"]
        if leaf.kind == BOOL:
            return [f"a = a << 1 | _BIT[{x}]", "n += 1"]
        if leaf.kind == ENUM:
            index: Dict[Any, int] = {**{name: i for i, name in enumerate(leaf.names)},
                                     **{number: i for i, number in reversed(list(enumerate(leaf.numbers)))}}
            return [f"a = a << {bits} | {self._const(index)}[{x}]", f"n += {bits}"]
        raw = {STR: f"{x}.encode()", BYTES: x, ANY: f"_mp({x})"}[leaf.kind]
        return [f"y = {raw}", "a, n = _vu(a, n, len(y))", "a = a << (len(y) << 3) | _fromb(y, 'big')",
                "n += len(y) << 3"]

    def _float_encode(self, leaf: Leaf, x: str) -> List[str]:
        """A float as the nearest multiple of its step: over its range in fixed bits, else a zig-zag varint."""
        step, path = leaf.rule.step, leaf.path
        assert step is not None
        if leaf.bits is None:
            return [f"if {x} - {x} != 0:", f"    raise _out({path!r}, {x}, 'has no multiple of its step')",
                    f"a, n = _vz(a, n, round({x} / {step!r}))"]
        low, high = (leaf.low - 0.5) * step, (leaf.high + 0.5) * step
        outside = f"raise _out({path!r}, {x}, 'outside its range {leaf.rule.min:g}..{leaf.rule.max:g}')"
        return [f"if {low!r} <= {x} <= {high!r}:", f"    q = round({x} / {step!r}) - {leaf.low}",
                f"    if q < 0 or q > {leaf.high - leaf.low}:", f"        {outside}",
                *self._escaped(leaf, x, "q = {escape}"), "else:", f"    {outside}",
                f"a = a << {leaf.bits} | q", f"n += {leaf.bits}"]

    @staticmethod
    def _escaped(leaf: Leaf, x: str, line: str) -> List[str]:
        """For a range that leaves 0 out: 0 is sent as the escape code (``line`` with it filled in)."""
        if leaf.escape is None:
            return []
        return [f"elif {x} == 0:", "    " + line.format(bits=leaf.bits, escape=leaf.escape)]

    def _decode(self, node: Node, x: str, depth: int, level: int) -> List[str]:
        """Lines decoding ``node`` into variable ``x``."""
        pad = "    " * depth
        if isinstance(node, Message):
            return [f"{pad}{x}, r = d{self._number(node)}(big, r)"]
        if isinstance(node, Repeated):
            item = f"x{level + 1}"
            return [f"{pad}c{level + 1}, r = _rv(big, r)", f"{pad}{x} = []", f"{pad}for _ in range(c{level + 1}):",
                    *self._decode(node.item, item, depth + 1, level + 1), f"{pad}    {x}.append({item})",
                    *self._trimmed(depth + 1)]
        if isinstance(node, Map):
            key, value = f"k{level + 1}", f"x{level + 1}"
            return [f"{pad}c{level + 1}, r = _rv(big, r)", f"{pad}{x} = {{}}",
                    f"{pad}for _ in range(c{level + 1}):", *self._decode(node.key, key, depth + 1, level + 1),
                    *self._decode(node.value, value, depth + 1, level + 1), f"{pad}    {x}[{key}] = {value}",
                    *self._trimmed(depth + 1)]
        return [pad + line for line in self._leaf_decode(node, x)]

    def _leaf_decode(self, leaf: Leaf, x: str) -> List[str]:
        """Lines decoding one value into ``x`` (no indentation)."""
        bits = leaf.bits
        take = f"(big >> r & {(1 << bits) - 1 if bits else 0})"
        ahead = [f"r -= {bits}"]
        step = leaf.rule.step
        if leaf.kind == INT and bits is not None:
            if leaf.escape is not None:
                return [*ahead, f"q = {take}", f"{x} = q + {leaf.low} if q != {leaf.escape} else 0"]
            return [*ahead, f"{x} = {take} + {leaf.low}"]
        if leaf.kind == INT:
            return ["q, r = _rv(big, r)", f"{x} = q >> 1 ^ -(q & 1)"]
        if leaf.kind == FLOAT and step is not None and bits is not None:
            if leaf.escape is not None:
                return [*ahead, f"q = {take}", f"{x} = {_scaled(leaf, f'(q + {leaf.low})')} if q != {leaf.escape} "
                        "else 0.0"]
            return [*ahead, f"{x} = {_scaled(leaf, f'({take} + {leaf.low})')}"]
        if leaf.kind == FLOAT and step is not None:
            return ["q, r = _rv(big, r)", f"{x} = {_scaled(leaf, '(q >> 1 ^ -(q & 1))')}"]
        if leaf.kind == FLOAT:
            unpack = "_uf" if leaf.single else "_ud"
            return [*ahead, f"{x} = {unpack}({take}.to_bytes({(bits or 0) // 8}, 'big'))[0]"]
        if leaf.kind == BOOL:
            return ["r -= 1", f"{x} = _BOOLS[big >> r & 1]"]
        if leaf.kind == ENUM:
            return [*ahead, f"{x} = {self._const(leaf.names)}[{take}]"]
        finish = {STR: ".decode()", BYTES: "", ANY: ""}[leaf.kind]
        raw = "(big >> r & ((1 << (L << 3)) - 1)).to_bytes(L, 'big')"
        value = f"_mu({raw})" if leaf.kind == ANY else f"{raw}{finish}"
        return ["L, r = _rv(big, r)", "r -= L << 3", f"{x} = {value}"]


def _scaled(leaf: Leaf, code: str) -> str:
    """Source of a stepped float from its count of steps: ``code * units / divisor``, an int divided by a power
    of ten, which Python rounds correctly (0.01 x 11594 is 115.94 exactly as written, at a fifth of ``round``'s
    cost)."""
    units, divisor = leaf.rule.fraction
    return f"{code} * {units} / {divisor}" if units != 1 else f"{code} / {divisor}"
