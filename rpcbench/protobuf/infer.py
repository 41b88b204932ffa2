"""Infer a .proto schema from a trace, so a team can try protobuf on its own traffic first.

:func:`infer` reads every call, records the shape of each method's args (:class:`TraceShapes`, a
:class:`~rpcbench.protobuf.shape.Shape` per method: kinds, int ranges, dict keys, list items; the shapes of
runs of calls read apart merge exactly) and writes one message per method
(:class:`SchemaWriter`), fields typed from every value seen. Where the values left a
choice open, the field says so in a ``// guess:`` comment; docs/protobuf.md lists the
rules. ``run_bench.py proto infer`` (commands/proto.py) prints the result.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from rpc_capture import Call, open_trace

from ..errors import BenchError
from .shape import MAX_DEPTH, Shape, child_shape, is_identifier

MAX_NESTING = 24  #: messages nested in a message at most: a dict deeper is a Struct (protoc refuses 31 levels)
MAP_MIN_KEYS = 8  #: a dict position with at least this many keys, values all alike and each dict holding
MAP_MAX_FILL = 0.75  #: ...less than this share of them, is a map (names that vary by call: player ids, slots)
_WRAPPERS = {"double": "DoubleValue", "int32": "Int32Value", "sint32": "Int32Value", "int64": "Int64Value",
             "sint64": "Int64Value", "uint64": "UInt64Value", "bool": "BoolValue", "string": "StringValue",
             "bytes": "BytesValue"}
_VALUE = "google.protobuf.Value"


class Field:
    """One field line: ``label type name = number; // comment``, and nested definitions it needs."""

    def __init__(self, type_: str, label: str = "", notes: Iterable[str] = (), nested: Iterable[str] = ()) -> None:
        self.type, self.label, self.notes, self.nested = type_, label, list(notes), list(nested)


class SchemaWriter:
    """Turns the shapes of each method's args into .proto source."""

    def __init__(self, package: str) -> None:
        self.package = package
        self.imports: Set[str] = {"empty"}

    def source(self, trace: str, calls: int, methods: List[Tuple[str, str, Shape]], aliases: Dict[str, str]) -> str:
        """The whole file: header, service (methods by frequency), then one message per method.

        ``aliases``: rpc -> the trace's method name, for methods that cannot be rpc names
        (``player.move``); the rpc's ``rpcbench-method`` comment maps them (docs/protobuf.md)."""
        body: List[str] = []
        for _, message, shape in methods:
            body += [""] + self.message(message, shape, "")
        names = {rpc for rpc, _, _ in methods}  # inside the service an rpc name hides a message of that name
        rpcs: List[str] = []
        for rpc, message, _ in methods:
            if rpc in aliases:
                rpcs.append(f"  // rpcbench-method: {_json_text(aliases[rpc])}")
            request = f".{self.package}.{message}" if message in names else message
            rpcs.append(f"  rpc {rpc}({request}) returns (google.protobuf.Empty);")
        head = [f"// Inferred by `run_bench.py proto infer` from {_utf8(trace)} ({calls:,} calls, {len(methods)} "
                "methods).",
                "// Field types come from the values seen; review the `guess:` comments before relying on it.",
                'syntax = "proto3";', "", f"package {self.package};", ""]
        head += [f'import "google/protobuf/{name}.proto";' for name in sorted(self.imports)]
        head += ["", "// rpc order is call frequency: the busiest methods get the one-byte envelope tags.",
                 "service Game {", *rpcs, "}"]
        return "\n".join(head + body) + "\n"

    def message(self, name: str, shape: Shape, indent: str) -> List[str]:
        """``message name {...}`` for a dict shape; fields numbered by how often they are set."""
        total = shape.kinds["dict"]
        fields = [(k, s) for k, s in (shape.fields or {}).items() if is_identifier(k)]
        fields.sort(key=lambda pair: -(pair[1].count - pair[1].none))  # stable: first seen first among equals
        taken = {k for k, _ in fields} | {name}
        lines, nested = [f"{indent}message {name} {{"], []
        if shape.fields is None or len(fields) < len(shape.fields or {}):
            lines.append(f"{indent}  // guess: keys that are not field names were seen; "
                         "calls with them will not encode")
        if shape.kinds.keys() - {"dict"}:
            lines.append(f"{indent}  // guess: args that are not a dict or list were seen; "
                         "calls with them will not encode")
        clashes = Counter(_json_name(k) for k, _ in fields)
        if max(clashes.values(), default=0) > 1:  # protoc refuses them unless told (binary wire unaffected)
            lines.append(f"{indent}  option deprecated_legacy_json_field_conflicts = true;  "
                         "// keys with the same JSON name")
        for number, (key, s) in enumerate(fields, 1):
            field = self.field(key, s, total, taken, indent + "  ")
            notes = f"  // guess: {'; '.join(field.notes)}" if field.notes else ""
            label = f"{field.label} " if field.label else ""
            lines.append(f"{indent}  {label}{field.type} {key} = {number};{notes}")
            nested += field.nested
        return lines[:1] + nested + lines[1:] + [f"{indent}}}"]

    def field(self, key: str, s: Shape, total: int, taken: Set[str], indent: str) -> Field:
        """The field for one key: type from its values, label and notes from None and absence."""
        f = self.value_type(s, key, taken, indent)
        always, nullable = s.count == total, s.none > 0
        if f.label == "repeated" or f.type.startswith("map<"):
            empty = "[]" if f.label else "{}"
            f.notes += [f"None comes back as {empty}"] * nullable
            f.notes += [f"missing in some calls: comes back as {empty}"] * (not always)
        elif f.type in _WRAPPERS and always and nullable:
            f.type = f"google.protobuf.{_WRAPPERS[f.type]}"
            self.imports.add("wrappers")
        elif f.type in _WRAPPERS and not always:
            f.label = "optional"
            f.notes += ["None and missing both seen: None comes back missing"] * nullable
        elif nullable and f.type != _VALUE:
            f.notes.append("None comes back as a missing key")
        return f

    def value_type(self, s: Shape, key: str, taken: Set[str], indent: str) -> Field:
        """The type for the non-None values of a shape (a nested message if they are dicts)."""
        kinds = set(s.kinds)
        if not kinds:
            return self.value_field("only None seen, type unknown")
        if len(kinds) > 1 and kinds != {"int", "float"}:
            bytes_note = "; bytes will not encode" if "bytes" in kinds else ""
            return self.value_field(f"mixed types ({', '.join(sorted(kinds))}){bytes_note}")
        kind = kinds.pop()
        if kind in ("int", "float"):
            name, notes = _number_type(s)
            return Field(name, notes=notes)
        if kind in ("bool", "str", "bytes"):
            return Field({"bool": "bool", "str": "string", "bytes": "bytes"}[kind])
        if kind == "list":
            return self.list_type(s.items, key, taken, indent)
        if kind == "dict":
            return self.dict_type(s, key, taken, indent)
        if kind == "deep":
            return self.value_field(f"lists and dicts nested more than {MAX_DEPTH} deep")
        return self.value_field("values of a type protobuf has no field for; they will not encode")

    def list_type(self, items: Optional[Shape], key: str, taken: Set[str], indent: str) -> Field:
        """A repeated field; items a repeated field cannot hold make it ``repeated Value``."""
        if items is None or not items.kinds:
            return self.value_field("only empty lists seen, item type unknown" if not items or not items.none
                                    else "lists of None", "repeated")
        if items.none or "list" in items.kinds:
            return self.value_field("None in lists" if items.none else "lists of lists", "repeated")
        if "dict" in items.kinds and items.fields is None:
            return self.struct_field(f"lists of dicts with {items.map_reason}", "repeated")
        f = self.value_type(items, _singular(key), taken, indent)
        f.label = "repeated"
        return f

    def dict_type(self, s: Shape, key: str, taken: Set[str], indent: str) -> Field:
        """A nested message, or a ``map<>`` (or Struct) when the keys are data rather than names."""
        if s.fields is not None and _varying_keys(s):
            s.become_map(f"{len(s.fields)} keys that vary by call, values alike")
        if s.fields is not None and len(indent) // 2 >= MAX_NESTING:
            return self.struct_field(f"dicts nested deeper than {MAX_NESTING} messages")
        if s.fields is not None:
            name = _unique(_camel(key), taken)
            return Field(name, nested=self.message(name, s, indent))
        keys = set(k for k, n in s.key_kinds.items() if n)
        if not keys <= {"name", "str"} and keys != {"int"}:
            return self.struct_field("dicts with keys of mixed types (int keys will not encode)")
        values = s.values or Shape()
        if values.none or values.kinds.keys() & {"list"} or (values.kinds["dict"] and values.fields is None):
            return self.struct_field(f"dicts with {s.map_reason} and values a map cannot hold")
        key_type = "string" if keys != {"int"} else _number_type(_range_shape(s.key_lo, s.key_hi))[0]
        value = self.value_type(values, key + "_value", taken, indent)
        return Field(f"map<{key_type}, {value.type}>", notes=[f"dicts with {s.map_reason}: map<>", *value.notes],
                     nested=value.nested)

    def value_field(self, note: str, label: str = "") -> Field:
        """google.protobuf.Value: holds anything JSON can, numbers as double."""
        self.imports.add("struct")
        return Field(_VALUE, label, [note + ": google.protobuf.Value, numbers come back as float"])

    def struct_field(self, note: str, label: str = "") -> Field:
        """google.protobuf.Struct: a dict with str keys and JSON-like values."""
        self.imports.add("struct")
        return Field("google.protobuf.Struct", label, [note + ": google.protobuf.Struct, numbers come back as float"])


def _json_text(name: str) -> str:
    """``name`` as a JSON string for a comment of the .proto: as it reads, but for what UTF-8 cannot carry (a lone
    surrogate, which a trace may hold): then escaped, as JSON reads it back."""
    text = json.dumps(name, ensure_ascii=False)
    return text if _utf8(text) == text else json.dumps(name)


def _utf8(text: str) -> str:
    """``text`` with what UTF-8 cannot carry (lone surrogates) written as escapes: a .proto is UTF-8."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _named(args: Any) -> Any:
    """A call's args as one value: positional ones (a list) as a dict of fields ``arg0``, ``arg1``..."""
    if type(args) is list or type(args) is tuple:
        return {f"arg{i}": v for i, v in enumerate(args)}
    return args


def _varying_keys(s: Shape) -> bool:
    """Whether a dict position that could be a message looks more like a map (see MAP_MIN_KEYS)."""
    fields = list((s.fields or {}).values())
    if len(fields) < MAP_MIN_KEYS:
        return False
    kinds = {(frozenset(f.kinds), frozenset(f.fields or ()) if f.kinds["dict"] else None) for f in fields}
    fill = sum(f.count for f in fields) / max(s.kinds["dict"], 1) / len(fields)
    return len(kinds) == 1 and fill < MAP_MAX_FILL


def _number_type(s: Shape) -> Tuple[str, List[str]]:
    """double for floats; for ints the smallest fitting varint type (zigzag sint when negative)."""
    if s.kinds["float"]:
        return "double", ["ints and floats seen: ints come back as float"] if s.kinds["int"] else []
    lo, hi = s.lo, s.hi
    if lo >= 0:
        for name, limit in (("int32", 1 << 31), ("int64", 1 << 63), ("uint64", 1 << 64)):
            if hi < limit:
                return name, []
        return "uint64", ["ints beyond 64 bits seen: those calls will not encode"]
    if lo >= -(1 << 31) and hi < 1 << 31:
        return "sint32", []
    if lo >= -(1 << 63) and hi < 1 << 63:
        return "sint64", []
    return "sint64", ["ints beyond 64 bits seen: those calls will not encode"]


def _range_shape(lo: int, hi: int) -> Shape:
    s = Shape()
    s.add(lo)
    s.add(hi)
    return s


def _json_name(name: str) -> str:
    """protoc's default JSON name of a field: underscores dropped, the letter after each upper-cased."""
    return re.sub(r"_+(.?)", lambda m: m[1].upper(), name)


def _camel(name: str) -> str:
    """``sync_position`` -> ``SyncPosition`` (a valid message name for any string)."""
    parts = re.split(r"[^0-9A-Za-z]+", name)
    camel = "".join(p[:1].upper() + p[1:] for p in parts if p) or "Message"
    return camel if not camel[0].isdigit() else f"M{camel}"


def _singular(name: str) -> str:
    """A guess at the singular for an item message: entities -> entity, buffs -> buff."""
    if name.endswith("ies") and len(name) > 4:
        return name[:-3] + "y"
    if name.endswith("s") and not name.endswith(("ss", "us", "is")) and len(name) > 3:
        return name[:-1]
    return name + "_item"


def _unique(name: str, taken: Set[str]) -> str:
    """``name`` or ``name2``, ``name3``...: not yet in ``taken`` (then added), never a map's ``...Entry``."""
    base = name + "Msg" if name.endswith("Entry") else name
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}{n}"
    taken.add(candidate)
    return candidate


def package_for(trace: str) -> str:
    """The default protobuf package for a trace: its file name up to the first dot (``inferred`` if unusable)."""
    stem = re.sub(r"\W", "_", Path(trace).name.split(".")[0].lower(), flags=re.ASCII)
    return stem if is_identifier(stem) else "inferred"


def infer(trace: str, package: str) -> Tuple[str, Dict[str, str]]:
    """The .proto source for a trace, and the mapping needed for methods that are not rpc names."""
    return infer_calls(open_trace(trace), Path(trace).name, package)


def infer_calls(source: Iterable[Call], name: str, package: str) -> Tuple[str, Dict[str, str]]:
    """The .proto source for calls (``name``: where they came from, for the header), and the
    mapping needed for methods that are not rpc names."""
    shapes = TraceShapes()
    for call in source:
        shapes.add(call)
    return shapes.schema(name, package)


class TraceShapes:
    """The shape of each method's args over the calls added so far: a schema is written from it at the end.

    Calls are added one at a time, so a pass that reads the calls for something else can infer on the way; the
    shapes of runs of calls read apart (halves of a trace, in two processes) merge into those of one read
    (:meth:`merge`)."""

    def __init__(self) -> None:
        self.by_method: Dict[str, Shape] = {}
        self.calls = 0

    def add(self, call: Call) -> None:
        """Record one call's method and the shape of its args."""
        child_shape(self.by_method, call.method, 0).add(_named(call.args))
        self.calls += 1

    def add_all(self, calls: Iterable[Call]) -> None:
        """Record calls in order, as :meth:`add` of each does: each method's args of them at once
        (:meth:`Shape.add_items`: a key's values at a time)."""
        by_method: Dict[str, List[Any]] = {}  # methods in order of first appearance, as adding each inserts them
        for call in calls:
            found = by_method.get(call.method)
            if found is None:
                by_method[call.method] = [_named(call.args)]
            else:
                found.append(_named(call.args))
        for method, values in by_method.items():
            child_shape(self.by_method, method, 0).add_items(values)
            self.calls += len(values)

    def merge(self, other: "TraceShapes") -> None:
        """Add the calls ``other`` recorded, which came after this one's: the shapes adding them in order gives,
        methods in order of first appearance (:meth:`Shape.merge`; ``other`` is used up). Raises InexactMerge, this
        one then half merged, in the few cases where the shapes cannot tell: add the calls in order then."""
        for method, shape in other.by_method.items():
            mine = self.by_method.get(method)
            if mine is None:
                self.by_method[method] = shape
            else:
                mine.merge(shape)
        self.calls += other.calls

    def schema(self, name: str, package: str) -> Tuple[str, Dict[str, str]]:
        """The .proto source (``name``: where the calls came from, for its header), and the mapping needed
        for methods that are not rpc names."""
        if not self.calls:
            raise BenchError(f"{name}: the trace holds no calls")
        taken: Set[str] = {"Game"}  # the service's name
        methods: List[Tuple[str, str, Shape]] = []
        mapping: Dict[str, str] = {}
        aliases: Dict[str, str] = {}
        rpcs: Set[str] = set()
        for method, shape in sorted(self.by_method.items(), key=lambda pair: -pair[1].count):
            message = _unique(_camel(method), taken)
            sanitized = re.sub(r"\W|^(?=\d)", "_", method, flags=re.ASCII) or "call"
            rpc = method if is_identifier(method) else _unique(sanitized, rpcs)
            rpcs.add(rpc)
            if rpc != method:
                mapping[method] = f"{package}.{message}"
                aliases[rpc] = method
            methods.append((rpc, message, shape))
        return SchemaWriter(package).source(name, self.calls, methods, aliases), mapping
