"""Valid calls for any compiled schema: walk a message's descriptor and build values that fit it.

Seeded, so a test (or a run on a real public schema) gets the same trace every time. The
values stay inside what protobuf carries exactly: ints within each field's range, floats
that a 32-bit ``float`` holds exactly, valid UTF-8, one member per oneof, enums as
numbers or as value names, wrappers as a value or None, proto3 fields without presence
always set (proto3 cannot tell a left-out scalar from its zero: declared ``defaults``),
wrapper fields always given (None when unset, as the codec gives them back).
"""

from __future__ import annotations

import random
from typing import Any, Dict, List

from rpc_capture import Call
from rpcbench import protobuf

_INTS = {5: 31, 15: 31, 17: 31, 3: 63, 16: 63, 18: 63}  # signed TYPE_*: bits
_UINTS = {13: 32, 7: 32, 4: 64, 6: 64}  # unsigned TYPE_*: bits
_TEXT = "abcxyz _-:/0129éßжツ🙂"


class CallMaker:
    """``calls(n)``: n valid calls spread over the schema's methods (messages nested ``depth`` deep at most)."""

    def __init__(self, schema: protobuf.Schema, seed: int = 1, enums: str = "numbers", depth: int = 3) -> None:
        self.schema, self.rng, self.enums, self.depth = schema, random.Random(seed), enums, depth

    def calls(self, n: int) -> List[Call]:
        methods = sorted(self.schema.methods.values(), key=lambda m: m.id)
        return [self.call(methods[i % len(methods)]) for i in range(n)]

    def call(self, method: protobuf.Method) -> Call:
        return Call(method.name, self.message(method.converter.cls.DESCRIPTOR, 0))

    def message(self, desc: Any, level: int) -> Dict[str, Any]:
        """A dict for one message: required fields always, presence fields often, one member per oneof."""
        out: Dict[str, Any] = {}
        chosen = {o.name: self.rng.choice([*o.fields, None]) for o in desc.oneofs if not _synthetic(o)}
        for fd in desc.fields:
            oneof = fd.containing_oneof
            if oneof is not None and not _synthetic(oneof):
                if chosen[oneof.name] is not fd:
                    continue
            elif (fd.has_presence and not _required(fd) and self.rng.random() < 0.3
                  and protobuf.field_kind(fd) != "wrapper"):
                continue  # (a wrapper field comes back None when unset: it is always given, maybe as None)
            if fd.message_type is not None and level >= self.depth and not _required(fd):
                if fd.is_repeated:  # recursive or deep types stop here (a repeated field comes back [] or {})
                    out[fd.name] = {} if _map(fd) else []
                continue
            out[fd.name] = self.field(fd, level)
        return out

    def field(self, fd: Any, level: int) -> Any:
        if _map(fd):
            key, value = fd.message_type.fields_by_name["key"], fd.message_type.fields_by_name["value"]
            return {self.value(key, level): self.value(value, level) for _ in range(self.rng.randint(0, 3))}
        if fd.is_repeated:
            return [self.value(fd, level) for _ in range(self.rng.randint(0, 3))]
        return self.value(fd, level)

    def value(self, fd: Any, level: int) -> Any:
        """One value of a (singular or element) field."""
        rng, kind = self.rng, protobuf.field_kind(fd)
        if kind == "wrapper":
            return None if rng.random() < 0.2 else self.value(fd.message_type.fields_by_name["value"], level)
        if kind in ("struct", "value", "list_value"):
            return {"struct": {"k": 1.5}, "value": "v", "list_value": [1.5, "x"]}[kind]
        if kind == "message":
            return self.message(fd.message_type, level + 1)
        if kind == "enum":
            value = rng.choice(fd.enum_type.values)
            return value.number if self.enums == "numbers" else value.name
        if fd.type in _INTS:
            bits = rng.choice((6, 14, _INTS[fd.type]))
            return rng.randint(-(1 << bits), (1 << bits) - 1)
        if fd.type in _UINTS:
            return rng.randint(0, (1 << rng.choice((7, 20, _UINTS[fd.type]))) - 1)
        return {1: lambda: rng.uniform(-1e6, 1e6), 2: lambda: rng.randint(-4000, 4000) / 8,
                8: lambda: rng.random() < 0.5,
                9: lambda: "".join(rng.choices(_TEXT, k=rng.randint(0, 12))),
                12: lambda: rng.randbytes(rng.randint(0, 24))}[fd.type]()


def _map(fd: Any) -> bool:
    return protobuf.map_value_field(fd) is not None


def _required(fd: Any) -> bool:
    return fd.is_required


def _synthetic(oneof: Any) -> bool:
    """A proto3 ``optional`` field's own oneof (not a real choice)."""
    return len(oneof.fields) == 1 and oneof.fields[0].has_presence and oneof.name == f"_{oneof.fields[0].name}"
