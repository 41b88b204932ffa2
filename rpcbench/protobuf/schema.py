"""Which message carries each method: the settings, loading a schema, and the method table.

:func:`load` compiles the :class:`Settings`' .proto files (:mod:`.compile`, cached) into a
:class:`Schema`: the message classes in a private descriptor pool (so schemas with the
same package names never clash), one converter per message (:mod:`.convert`) and the
method table (:class:`Method`: which message carries each method, and its id on the wire).
The rules that map methods to messages are in :class:`Schema`'s docstring.

Wire format of a call (docs/protobuf.md): the bytes of ``message Call { oneof method {
Req1 m1 = 1; Req2 m2 = 2; ... } }``, i.e. ``varint(id << 3 | 2) varint(len) payload``.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Container, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from ..errors import BenchError
from ..fidelity import INFERRED, OTHER, Limit, unknown_method
from .compile import compile_descriptors, virtual_names
from .convert import Converters, MessageConverter, find_limit
from .wire import read_varint, varint

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor, FileDescriptor
    from google.protobuf.descriptor_pb2 import FileDescriptorProto
    from google.protobuf.message import Message

PROTO_DIR = Path(__file__).resolve().parents[1] / "proto"  #: the default schemas: every *.proto in it
_RESERVED_IDS = range(19000, 20000)  # field numbers protobuf keeps for itself
_MAX_ID = (1 << 29) - 1


INFERRED_CHANGE = ("the schema was inferred from every call of the trace: a call it still cannot carry (keys that "
                   "are not field names, args neither a dict nor a list: its guess: comments) fails to encode")


@dataclass(frozen=True)
class Settings:
    """Which schemas the protobuf codecs use. Empty ``files``: every .proto in ``proto/``."""

    files: Tuple[str, ...] = ()
    include: Tuple[str, ...] = ()
    mapping: Optional[str] = None
    enums: str = "names"  #: how decoded enum values come back: "names" or "numbers" (convert.ENUM_FORMS)
    inferred: bool = False  #: ``files`` is a schema inferred from the run's traces (rpcbench/inference.py)


DEFAULT_SETTINGS = Settings()  #: every .proto in proto/ (frozen, so one shared default is safe)


def load(chosen: Settings = DEFAULT_SETTINGS) -> Schema:
    """The schema for ``chosen`` (default: every .proto in ``proto/``); compiling is cached on disk."""
    files = [Path(f) for f in chosen.files] or sorted(PROTO_DIR.glob("*.proto"))
    if not files:
        raise BenchError(f"no .proto schema: put one in {PROTO_DIR} or pass --proto FILE")
    includes = [Path(d) for d in chosen.include]
    data = compile_descriptors(files, includes)
    schema = Schema(data, virtual_names(files, includes), read_mapping(chosen.mapping), chosen.enums, chosen.mapping)
    schema.inferred = chosen.inferred
    return schema


def read_mapping(path: Optional[str]) -> Dict[str, Tuple[str, Optional[int]]]:
    """``{method: (message name, id or None)}`` from a mapping file (JSON, see docs/protobuf.md).

    The file is one JSON object: ``{"move": "game.MoveRequest", "chat": {"message":
    "game.ChatMessage", "id": 20}}``. A message name may be full or, when unique, short.
    """
    if path is None:
        return {}
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BenchError(f"--proto-map {path}: {e}") from None
    if not isinstance(raw, dict):
        raise BenchError(f"--proto-map {path}: expected a JSON object {{method: message}}")
    mapping = {}
    for method, spec in raw.items():
        if isinstance(spec, dict) and isinstance(spec.get("message"), str):
            spec_id = spec.get("id")
            if spec_id is not None and (type(spec_id) is not int or not _valid_id(spec_id)):
                raise BenchError(f"--proto-map {path}: {method!r}: id must be 1..{_MAX_ID}, not 19000-19999")
            mapping[method] = (spec["message"], spec_id)
        elif isinstance(spec, str):
            mapping[method] = (spec, None)
        else:
            raise BenchError(f"--proto-map {path}: {method!r}: expected a message name or "
                             '{"message": ..., "id": N}')
    return mapping


def _valid_id(n: int) -> bool:
    return 1 <= n <= _MAX_ID and n not in _RESERVED_IDS


class Method(NamedTuple):
    """One entry of the method table: the method, its id on the wire, its message and converter."""

    name: str
    id: int
    message: str
    converter: MessageConverter
    tag: bytes  #: varint(id << 3 | 2): the envelope's field key


class Schema:
    """Message classes, converters and the method table of one compiled set of .proto files.

    Methods map to messages by, in this order: the mapping file; a ``service`` rpc of that
    name (its input type; an rpc whose leading comment is ``rpcbench-method: "<name>"``
    carries that name instead); the top-level message of that name in a file without a
    service. Every file counts: the listed ones and all they import (the well-known types
    excepted). Two different offers for one method stop the load (no silent choice). Ids:
    the mapping file's, then 1, 2, ... in that same order.
    """

    def __init__(self, descriptor_set: bytes, files: Sequence[str], mapping: Dict[str, Tuple[str, Optional[int]]],
                 enums: str = "names", mapping_path: Optional[str] = None) -> None:
        from google.protobuf import descriptor_pb2, descriptor_pool

        self._converters = Converters(enums)  # first: it checks ``enums``
        self.pool = descriptor_pool.DescriptorPool()
        self._aliases: Dict[Tuple[str, str], str] = {}  #: (file, "Service.rpc") -> method from its comment
        for proto in descriptor_pb2.FileDescriptorSet.FromString(descriptor_set).file:
            self.pool.Add(proto)
            self._aliases.update(_method_comments(proto))
        self.files = list(files)
        self.enums = enums
        self.mapping_path = mapping_path
        self.inferred = False  #: inferred from the run's traces: a call it cannot carry is declared (INFERRED)
        self.methods: Dict[str, Method] = {}
        self.by_id: Dict[int, Method] = {}
        self._add_methods(mapping)

    def _add_methods(self, mapping: Dict[str, Tuple[str, Optional[int]]]) -> None:
        fixed = [i for _, i in mapping.values() if i is not None]
        if len(set(fixed)) != len(fixed):
            raise BenchError("--proto-map: two methods have the same id")
        found = [(method, self._find_message(method, name), i) for method, (name, i) in mapping.items()]
        found += [(method, desc, None) for method, desc in self._candidates(mapping).items()]
        free = (i for i in itertools.count(1) if i not in fixed and _valid_id(i))
        for method, desc, ident in found:
            ident = ident or next(free)
            entry = Method(method, ident, desc.full_name, self._converters.of(desc), varint(ident << 3 | 2))
            self.methods[method] = self.by_id[ident] = entry

    def schema_files(self) -> List[FileDescriptor]:
        """The listed files, then everything they import (breadth first), without the well-known types."""
        seen: Dict[str, FileDescriptor] = {}
        queue = [self.pool.FindFileByName(name) for name in self.files]
        while queue:
            file = queue.pop(0)
            if file.name not in seen and not file.name.startswith("google/protobuf/"):
                seen[file.name] = file
                queue.extend(file.dependencies)
        return list(seen.values())

    def _candidates(self, mapped: Container[str]) -> Dict[str, Descriptor]:
        """method -> message descriptor from service rpcs, then from service-less files' messages.

        A BenchError when two places offer different messages for one method the mapping does not settle."""
        files = self.schema_files()
        offers = [(self._aliases.get((f.name, f"{s.name}.{m.name}"), m.name), m.input_type,
                   f"{f.name} (rpc {s.name}.{m.name})")
                  for f in files for s in f.services_by_name.values() for m in s.methods]
        offers += [(d.name, d, f"{f.name} (message {d.full_name})")
                   for f in files if not f.services_by_name for d in f.message_types_by_name.values()]
        chosen: Dict[str, Tuple[Descriptor, str]] = {}
        clashes: List[Tuple[str, str, str]] = []  #: (method, first offer, other offer)
        for method, desc, origin in offers:
            if method in mapped:
                continue
            first = chosen.setdefault(method, (desc, origin))
            if first[0] is not desc:
                clashes.append((method, first[1], origin))
        if clashes:
            method, first_offer, other = clashes[0]
            more = [m for m, _, _ in clashes[1:]]
            also = f" (so are {', '.join(map(repr, more[:3]))}{' and more' * (len(more) > 3)})" if more else ""
            raise BenchError(f"method {method!r} is defined by both {first_offer} and {other}{also}: pick one schema "
                             "with --proto FILE, or the message with --proto-map FILE (docs/protobuf.md)")
        return {method: desc for method, (desc, _) in chosen.items()}

    def _find_message(self, method: str, name: str) -> Descriptor:
        """The message a mapping-file entry names (full name, or a short name unique in the schema files)."""
        try:
            return self.pool.FindMessageTypeByName(name)
        except KeyError:
            pass
        matches = [d for f in self.schema_files() for d in _all_messages(f) if d.name == name]
        if len(matches) != 1:
            why = "is ambiguous, use the full name" if matches else "is not a message of the schemas"
            raise BenchError(f"--proto-map {_line_of(self.mapping_path, method)}: method {method!r}: "
                             f"{name!r} {why} ({', '.join(self.files)})")
        return matches[0]

    def encode(self, method: str, args: Any) -> bytes:
        """The envelope bytes of one call. A failure is always a fidelity.Limit: ``METHOD`` for a method without a
        message, the limit a value ran into (see :func:`find_limit`), else ``INFERRED`` for an inferred schema
        (one of its guesses) or ``OTHER`` (a key the schema lacks: the schema and the trace disagree)."""
        entry = self._entry(method)
        try:  # message_of then serialize, inlined: two calls fewer on the timed path
            payload = entry.converter.to_message(args).SerializeToString(deterministic=True)
        except Exception as e:  # TypeError, ValueError, protobuf's EncodeError: told apart by find_limit
            limit = self._limit(method, args)
            if limit:
                raise limit from e
            raise Limit(INFERRED if self.inferred else OTHER, "args", f"{type(e).__name__}: {e}") from e
        return entry.tag + varint(len(payload)) + payload

    def _entry(self, method: str) -> Method:
        entry = self.methods.get(method)
        if entry is None:
            raise unknown_method(method, ", ".join(self.files))
        return entry

    def _limit(self, method: str, args: Any) -> Optional[Limit]:
        """The format limit that explains a failed encode, if one does (see :func:`find_limit`)."""
        entry = self.methods.get(method)
        if entry is None:
            return None
        try:
            fields = entry.converter.named(args)
        except TypeError:
            return None
        return find_limit(entry.converter.cls.DESCRIPTOR, fields, "args")

    def message_of(self, method: str, args: Any) -> Tuple[Method, Message]:
        """Encode's first stage: the method's table entry and the message built from the args."""
        entry = self._entry(method)
        return entry, entry.converter.to_message(args)

    @staticmethod
    def serialize(built: Tuple[Method, Message]) -> bytes:
        """Encode's second stage: the message's bytes (deterministic: map entries sorted by key) in the envelope."""
        entry, msg = built
        payload = msg.SerializeToString(deterministic=True)
        return entry.tag + varint(len(payload)) + payload

    def parse(self, data: bytes) -> Tuple[Method, Message]:
        """Decode's first stage: the method's table entry and the message parsed from envelope bytes."""
        key, pos = read_varint(data, 0)
        size, pos = read_varint(data, pos)
        entry = self.by_id.get(key >> 3)
        if entry is None or key & 7 != 2 or pos + size != len(data):
            raise ValueError(f"not a call envelope (field key {key}, length {size} at {pos} of {len(data)} bytes)")
        return entry, entry.converter.cls.FromString(data[pos:])

    @staticmethod
    def to_call(parsed: Tuple[Method, Message]) -> Tuple[str, Any]:
        """Decode's second stage: ``(method, args)`` from the parsed message."""
        entry, msg = parsed
        return entry.name, entry.converter.to_args(msg)

    def decode(self, data: bytes) -> Tuple[str, Any]:
        """``(method, args)`` back from envelope bytes (parse then to_call)."""
        entry, msg = self.parse(data)
        return entry.name, entry.converter.to_args(msg)

    def overhead(self, method: str, payload_size: int) -> int:
        """Envelope bytes added to a payload of ``payload_size`` bytes: the field key and the length."""
        return len(self.methods[method].tag) + len(varint(payload_size))


_METHOD_COMMENT = re.compile(r'^\s*rpcbench-method:\s*("(?:[^"\\]|\\.)*")\s*$', re.MULTILINE)


def _method_comments(proto: FileDescriptorProto) -> Dict[Tuple[str, str], str]:
    """(file, "Service.rpc") -> method name, for rpcs whose leading comment says ``rpcbench-method: "name"``."""
    found = {}
    for loc in proto.source_code_info.location:
        path = list(loc.path)
        match = _METHOD_COMMENT.search(loc.leading_comments)
        if len(path) == 4 and path[0] == 6 and path[2] == 2 and match:  # service (6) #i, method (2) #j
            service = proto.service[path[1]]
            name = json.loads(match[1])
            if isinstance(name, str) and name:
                found[(proto.name, f"{service.name}.{service.method[path[3]].name}")] = name
    return found


def _line_of(path: Optional[str], key: str) -> str:
    """``path:line`` of the line holding ``key`` as a JSON string (``path`` alone when not found)."""
    if path is None:
        return "(mapping)"
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return path
    quoted = json.dumps(key, ensure_ascii=False)
    return next((f"{path}:{n}" for n, line in enumerate(lines, 1) if quoted in line), path)


def _all_messages(file: FileDescriptor) -> Iterable[Descriptor]:
    stack = list(file.message_types_by_name.values())
    while stack:
        desc = stack.pop()
        stack.extend(desc.nested_types)
        yield desc
