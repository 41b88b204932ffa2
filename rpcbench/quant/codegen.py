"""Generated encoders and decoders for the ``quant`` layout: Python source per message, compiled once.

An encoder ``e<k>(a, n, v) -> (a, n)`` appends a message's fields to one Python int ``a`` holding ``n``
bits so far (``a = a << bits | value``), most significant bit first; the codec writes it with
``int.to_bytes`` after padding to whole bytes. A decoder ``d<k>(big, T, p) -> (value, p)`` reads fields from
the message as one int ``big`` of ``T`` bits, ``p`` bits in. Each message node of the layout gets its own pair
(a type used at two paths may have two rules). The layout, and the widths, are :mod:`.layout`'s.
"""

from __future__ import annotations

import functools
import itertools
import struct
from typing import Any, Callable, Dict, List, Tuple

import msgpack

from .layout import (ANY, BOOL, BYTES, ENUM, FLOAT, INT, NONE, NULLABLE, STR, Leaf, Map, Message, Node,
                     OutOfProfile, Repeated, Slot)

Encoder = Callable[[int, int, Any], Tuple[int, int]]
Decoder = Callable[[int, int, int], Tuple[Any, int]]


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


def _rv(big: int, total: int, p: int) -> Tuple[int, int]:
    """An unsigned varint read ``p`` bits into a message of ``total`` bits, and where it ends."""
    u = shift = 0
    while True:
        group = big >> (total - p - 8) & 255
        p += 8
        u |= (group & 127) << shift
        shift += 7
        if group < 128:
            return u, p


def _out(path: str, value: Any, why: str) -> OutOfProfile:
    return OutOfProfile(path, value, why)


class UnknownKeys(TypeError):
    """A dict of args with keys its message has no field for."""


def _unknown(path: str, value: Dict[Any, Any], known: frozenset) -> UnknownKeys:
    extra = sorted(map(repr, set(value) - known))[:3]
    return UnknownKeys(f"{path}: no field for key {', '.join(extra)}")


_ENV: Dict[str, Any] = {
    "_vu": _vu, "_vz": _vz, "_rv": _rv, "_out": _out, "_unknown": _unknown, "_fromb": int.from_bytes,
    "_pd": struct.Struct(">d").pack, "_ud": struct.Struct(">d").unpack, "_pf": struct.Struct(">f").pack,
    "_uf": struct.Struct(">f").unpack, "_mp": msgpack.Packer(use_bin_type=True).pack,
    "_mu": functools.partial(msgpack.unpackb, strict_map_key=False), "_BIT": {True: 1, False: 0}, "_BOOLS": (False, True),
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
        self.source = "\n".join(self._lines)

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
        enc = [f"def e{k}(a, n, v):"]
        dec = [f"def d{k}(big, T, p):"]
        if message.positional:
            bits = message.count_bits
            enc += [f"    if type(v) is not list and type(v) is not tuple or len(v) > {len(message.slots)}:",
                    f"        raise TypeError('{message.name} takes a list of at most {len(message.slots)} args')",
                    "    c = len(v)", f"    a = a << {bits} | c", f"    n += {bits}"]
            dec += [f"    c = big >> (T - p - {bits}) & {(1 << bits) - 1}", f"    p += {bits}", "    v = []"]
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
                absent = "        v[{!r}] = None".format(slot.key) if slot.presence == NULLABLE else "        pass"
                dec += [*self._slot_decode(slot, 1, absent), f"    v[{slot.key!r}] = x0" if slot.presence == NONE
                        else ""]
        self._lines += [*enc, "    return a, n", *[line for line in dec if line], "    return v, p", ""]

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

    def _slot_decode(self, slot: Slot, depth: int, absent: str = "") -> List[str]:
        """Lines decoding the slot's field into ``x0`` (for a field with presence: into ``v`` when present)."""
        pad = "    " * depth
        if slot.presence == NONE:
            return self._decode(slot.node, "x0", depth, 0)
        present = [f"{pad}    v[{slot.key!r}] = x0"] if absent else []
        missing = [f"{pad}else:", absent.replace("        ", pad + "    ", 1)] if absent else [
            f"{pad}else:", f"{pad}    x0 = None"]
        return [f"{pad}p += 1", f"{pad}if big >> (T - p) & 1:", *self._decode(slot.node, "x0", depth + 1, 0),
                *present, *missing]

    def _encode(self, node: Node, x: str, depth: int, level: int) -> List[str]:
        """Lines encoding the value in variable ``x`` as ``node``."""
        pad = "    " * depth
        if isinstance(node, Message):
            return [f"{pad}a, n = e{self._number(node)}(a, n, {x})"]
        if isinstance(node, Repeated):
            item = f"x{level + 1}"
            return [f"{pad}a, n = _vu(a, n, len({x}))", f"{pad}for {item} in {x}:",
                    *self._encode(node.item, item, depth + 1, level + 1)]
        if isinstance(node, Map):
            key, value = f"k{level + 1}", f"x{level + 1}"
            return [f"{pad}a, n = _vu(a, n, len({x}))", f"{pad}for {key}, {value} in {x}.items():",
                    *self._encode(node.key, key, depth + 1, level + 1),
                    *self._encode(node.value, value, depth + 1, level + 1)]
        return [pad + line for line in self._leaf_encode(node, x)]

    def _leaf_encode(self, leaf: Leaf, x: str) -> List[str]:
        """Lines encoding one value (no indentation)."""
        bits, path = leaf.bits, leaf.path
        if leaf.kind == INT and bits is not None:
            return [f"if not {leaf.low} <= {x} <= {leaf.high}:",
                    f"    raise _out({path!r}, {x}, 'outside its range {leaf.low}..{leaf.high}')",
                    f"a = a << {bits} | ({x} - {leaf.low})", f"n += {bits}"]
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
            index = {**{name: i for i, name in enumerate(leaf.names)},
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
        return [f"if not {low!r} <= {x} <= {high!r}:",
                f"    raise _out({path!r}, {x}, 'outside its range {leaf.rule.min:g}..{leaf.rule.max:g}')",
                f"q = round({x} / {step!r}) - {leaf.low}",
                f"if q < 0 or q > {leaf.high - leaf.low}:",
                f"    raise _out({path!r}, {x}, 'outside its range {leaf.rule.min:g}..{leaf.rule.max:g}')",
                f"a = a << {leaf.bits} | q", f"n += {leaf.bits}"]

    def _decode(self, node: Node, x: str, depth: int, level: int) -> List[str]:
        """Lines decoding ``node`` into variable ``x``."""
        pad = "    " * depth
        if isinstance(node, Message):
            return [f"{pad}{x}, p = d{self._number(node)}(big, T, p)"]
        if isinstance(node, Repeated):
            item = f"x{level + 1}"
            return [f"{pad}c{level + 1}, p = _rv(big, T, p)", f"{pad}{x} = []", f"{pad}for _ in range(c{level + 1}):",
                    *self._decode(node.item, item, depth + 1, level + 1), f"{pad}    {x}.append({item})"]
        if isinstance(node, Map):
            key, value = f"k{level + 1}", f"x{level + 1}"
            return [f"{pad}c{level + 1}, p = _rv(big, T, p)", f"{pad}{x} = {{}}",
                    f"{pad}for _ in range(c{level + 1}):", *self._decode(node.key, key, depth + 1, level + 1),
                    *self._decode(node.value, value, depth + 1, level + 1), f"{pad}    {x}[{key}] = {value}"]
        return [pad + line for line in self._leaf_decode(node, x)]

    def _leaf_decode(self, leaf: Leaf, x: str) -> List[str]:
        """Lines decoding one value into ``x`` (no indentation)."""
        bits = leaf.bits
        take = f"(big >> (T - p - {bits}) & {(1 << bits) - 1 if bits else 0})"
        step = leaf.rule.step
        if leaf.kind == INT and bits is not None:
            return [f"{x} = {take} + {leaf.low}", f"p += {bits}"]
        if leaf.kind == INT:
            return ["q, p = _rv(big, T, p)", f"{x} = q >> 1 ^ -(q & 1)"]
        if leaf.kind == FLOAT and step is not None and bits is not None:
            return [f"{x} = round(({take} + {leaf.low}) * {step!r}, {leaf.rule.decimals})", f"p += {bits}"]
        if leaf.kind == FLOAT and step is not None:
            return ["q, p = _rv(big, T, p)", f"{x} = round((q >> 1 ^ -(q & 1)) * {step!r}, {leaf.rule.decimals})"]
        if leaf.kind == FLOAT:
            unpack = "_uf" if leaf.single else "_ud"
            return [f"{x} = {unpack}({take}.to_bytes({bits // 8}, 'big'))[0]", f"p += {bits}"]
        if leaf.kind == BOOL:
            return [f"{x} = _BOOLS[big >> (T - p - 1) & 1]", "p += 1"]
        if leaf.kind == ENUM:
            return [f"{x} = {self._const(leaf.names)}[{take}]", f"p += {bits}"]
        finish = {STR: ".decode()", BYTES: "", ANY: ""}[leaf.kind]
        raw = "(big >> (T - p - (L << 3)) & ((1 << (L << 3)) - 1)).to_bytes(L, 'big')"
        value = f"_mu({raw})" if leaf.kind == ANY else f"{raw}{finish}"
        return ["L, p = _rv(big, T, p)", f"{x} = {value}", "p += L << 3"]
