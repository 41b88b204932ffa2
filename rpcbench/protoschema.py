"""Protobuf schemas for the ``protobuf`` codecs: compile, map methods to messages, convert values.

* :func:`configure` is the one place the command line sets which ``.proto`` files, include
  paths and mapping file the codecs use (by default every ``*.proto`` in the repo's
  ``proto/`` folder); codecs are created without arguments and call :func:`load`.
* :func:`compile_descriptors` runs ``protoc`` from the ``grpcio-tools`` package and caches
  the FileDescriptorSet in ``.cache/proto/<hash of the inputs>/``; it is rebuilt when any
  file it was built from changes.
* :class:`Schema` holds the message classes (in a private descriptor pool, so schemas with
  the same package names never clash) and the method table: which message carries each
  method, and its method id on the wire.
* :class:`MessageConverter` turns an args dict into a message and back, built once per
  message type from its descriptor. The constructor does the work in C (upb) wherever the
  dict already has the shape it accepts; Python touches only wrappers and ``Value`` fields.

Wire format of a call (docs/protobuf.md): the bytes of ``message Call { oneof method {
Req1 m1 = 1; Req2 m2 = 2; ... } }``, i.e. ``varint(id << 3 | 2) varint(len) payload``.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.resources
import itertools
import json
import keyword
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Container, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from .errors import BenchError
from .fidelity import BIG_INTS, ENUM_UNKNOWN, FLOAT_IN_INT, INT_RANGE, NON_FINITE, SURROGATES, Limit

REPO = Path(__file__).resolve().parent.parent
PROTO_DIR = REPO / "proto"
CACHE_DIR = Path(os.environ.get("RPCBENCH_CACHE") or REPO / ".cache") / "proto"  #: compiled schemas

WRAPPERS = frozenset(f"google.protobuf.{n}Value" for n in
                     ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes"))
STRUCT, VALUE, LIST_VALUE = "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"
_RESERVED_IDS = range(19000, 20000)  # field numbers protobuf keeps for itself
_MAX_ID = (1 << 29) - 1


@dataclass(frozen=True)
class Settings:
    """Which schemas the protobuf codecs use. Empty ``files``: every .proto in ``proto/``."""

    files: Tuple[str, ...] = ()
    include: Tuple[str, ...] = ()
    mapping: Optional[str] = None
    enums: str = "names"  #: how decoded enum values come back: "names" or "numbers"


ENUM_FORMS = ("names", "numbers")


def load(chosen: Settings = Settings()) -> "Schema":
    """The schema for ``chosen`` (default: every .proto in ``proto/``); compiling is cached on disk."""
    files = [Path(f) for f in chosen.files] or sorted(PROTO_DIR.glob("*.proto"))
    if not files:
        raise BenchError(f"no .proto schema: put one in {PROTO_DIR} or pass --proto FILE")
    includes = [Path(d) for d in chosen.include]
    data = compile_descriptors(files, includes)
    return Schema(data, _virtual_names(files, includes), read_mapping(chosen.mapping), chosen.enums, chosen.mapping)


# ---------------------------------------------------------------------------------------- compiling


def well_known_include() -> Path:
    """grpcio-tools' copy of google/protobuf/*.proto (the well-known types)."""
    return Path(str(importlib.resources.files("grpc_tools") / "_proto"))


def include_dirs(files: Sequence[Path], includes: Sequence[Path]) -> List[Path]:
    """protoc's -I list: the given include paths, each file's folder, the well-known types."""
    dirs = [*includes, *(f.resolve().parent for f in files), well_known_include()]
    return list(dict.fromkeys(d.resolve() for d in dirs))


def _virtual_names(files: Sequence[Path], includes: Sequence[Path]) -> List[str]:
    """The name protoc gives each file: its path relative to the first include dir holding it."""
    dirs = include_dirs(files, includes)
    return [next(f.resolve().relative_to(d).as_posix() for d in dirs if f.resolve().is_relative_to(d)) for f in files]


def compile_descriptors(files: Sequence[Path], includes: Sequence[Path] = ()) -> bytes:
    """The FileDescriptorSet (with imports) of ``files``, from the cache or freshly compiled."""
    for f in files:
        if not f.is_file():
            raise BenchError(f"--proto {f}: no such file")
    dirs = include_dirs(files, includes)
    key = hashlib.sha256(json.dumps([_tool_version(), _PROTOC_FLAGS, [str(d) for d in dirs],
                                     [[str(f.resolve()), _digest(f)] for f in files]]).encode()).hexdigest()[:20]
    folder = CACHE_DIR / key
    out, deps = folder / "schema.pb", folder / "deps.json"
    if out.is_file() and deps.is_file() and _deps_unchanged(json.loads(deps.read_text())):
        return out.read_bytes()
    data = _run_protoc(files, dirs)
    folder.mkdir(parents=True, exist_ok=True)
    _write_atomic(out, data)
    _write_atomic(deps, json.dumps(_deps_of(data, dirs)).encode())
    return data


_PROTOC_FLAGS = ["--include_imports", "--include_source_info"]  # source info: the rpcs' rpcbench-method comments
_ERROR_AT = re.compile(r"^\S.*?:\d+:\d+: ")  # protoc's "file.proto:LINE:COLUMN: message"


def _run_protoc(files: Sequence[Path], dirs: Sequence[Path]) -> bytes:
    """protoc's FileDescriptorSet for ``files``; its first error, on one line, as a BenchError."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "schema.pb"
        cmd = [sys.executable, "-m", "grpc_tools.protoc", *(f"-I{d}" for d in dirs), *_PROTOC_FLAGS,
               f"--descriptor_set_out={out}", *(str(f.resolve()) for f in files)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BenchError(f"cannot run protoc from grpcio-tools ({e}); pip install -r requirements.txt") from None
        if done.returncode != 0:
            raise BenchError(f"protoc could not compile {', '.join(str(f) for f in files)}: {condense_errors(done.stderr)}")
        return out.read_bytes()


def condense_errors(stderr: str, limit: int = 300) -> str:
    """protoc's first error that names a file and line (else its first line), and how many more there are."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return "failed"
    first = next((line for line in lines if _ERROR_AT.match(line)), lines[0])
    if len(first) > limit:
        first = first[:limit - 3] + "..."
    more = len(lines) - 1
    return first + (f" (and {more:,} more error line{'s' * (more != 1)})" if more else "")


def _deps_of(data: bytes, dirs: Sequence[Path]) -> Dict[str, str]:
    """Every file the descriptor set was built from (imports included) with its digest."""
    from google.protobuf import descriptor_pb2

    found = {}
    for proto in descriptor_pb2.FileDescriptorSet.FromString(data).file:
        path = next((d / proto.name for d in dirs if (d / proto.name).is_file()), None)
        if path is not None:
            found[str(path)] = _digest(path)
    return found


def _deps_unchanged(deps: Dict[str, str]) -> bool:
    return all(Path(p).is_file() and _digest(Path(p)) == digest for p, digest in deps.items())


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("grpcio-tools")
    except PackageNotFoundError:
        raise BenchError("grpcio-tools is not installed (it provides protoc): pip install -r requirements.txt") from None


def _write_atomic(path: Path, data: bytes) -> None:
    """Write then rename, so that a concurrent reader never sees half a file."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------- mapping


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
            raise BenchError(f"--proto-map {path}: {method!r}: expected a message name or {{\"message\": ..., \"id\": N}}")
    return mapping


def _valid_id(n: int) -> bool:
    return 1 <= n <= _MAX_ID and n not in _RESERVED_IDS


class Method(NamedTuple):
    """One entry of the method table: the method, its id on the wire, its message and converter."""

    name: str
    id: int
    message: str
    converter: "MessageConverter"
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
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

        if enums not in ENUM_FORMS:
            raise BenchError(f"--proto-enums {enums!r}: choose {' or '.join(ENUM_FORMS)}")
        self._get_class = message_factory.GetMessageClass
        self.pool = descriptor_pool.DescriptorPool()
        self._aliases: Dict[Tuple[str, str], str] = {}  #: (file, "Service.rpc") -> method from its comment
        for proto in descriptor_pb2.FileDescriptorSet.FromString(descriptor_set).file:
            self.pool.Add(proto)
            self._aliases.update(_method_comments(proto))
        self.files = list(files)
        self.enums = enums
        self.mapping_path = mapping_path
        self._converters: Dict[str, MessageConverter] = {}
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
            entry = Method(method, ident, desc.full_name, self.converter(desc), varint(ident << 3 | 2))
            self.methods[method] = self.by_id[ident] = entry

    def schema_files(self) -> List[Any]:
        """The listed files, then everything they import (breadth first), without the well-known types."""
        seen: Dict[str, Any] = {}
        queue = [self.pool.FindFileByName(name) for name in self.files]
        while queue:
            file = queue.pop(0)
            if file.name not in seen and not file.name.startswith("google/protobuf/"):
                seen[file.name] = file
                queue.extend(file.dependencies)
        return list(seen.values())

    def _candidates(self, mapped: Container[str]) -> Dict[str, Any]:
        """method -> message descriptor from service rpcs, then from service-less files' messages.

        A BenchError when two places offer different messages for one method the mapping does not settle."""
        files = self.schema_files()
        offers = [(self._aliases.get((f.name, f"{s.name}.{m.name}"), m.name), m.input_type, f"{f.name} (rpc {s.name}.{m.name})")
                  for f in files for s in f.services_by_name.values() for m in s.methods]
        offers += [(d.name, d, f"{f.name} (message {d.full_name})")
                   for f in files if not f.services_by_name for d in f.message_types_by_name.values()]
        chosen: Dict[str, Tuple[Any, str]] = {}
        for method, desc, origin in offers:
            if method in mapped:
                continue
            first = chosen.setdefault(method, (desc, origin))
            if first[0] is not desc:
                raise BenchError(f"method {method!r} is defined by both {first[1]} and {origin}: pick one schema "
                                 "with --proto FILE, or the message with --proto-map FILE (docs/protobuf.md)")
        return {method: desc for method, (desc, _) in chosen.items()}

    def _find_message(self, method: str, name: str) -> Any:
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

    def converter(self, desc: Any) -> "MessageConverter":
        """The converter of a message type (one per type; recursive types share theirs)."""
        conv = self._converters.get(desc.full_name)
        if conv is None:
            conv = self._converters[desc.full_name] = MessageConverter(self._get_class(desc))
            conv.build(self)
        return conv

    def encode(self, method: str, args: Any) -> bytes:
        """The envelope bytes of one call; LookupError for a method without a message, a
        fidelity.Limit when a value is beyond what the field can hold (see :func:`find_limit`)."""
        entry = self._entry(method)
        try:  # message_of then serialize, inlined: two calls fewer on the timed path
            payload = entry.converter.to_message(args).SerializeToString(deterministic=True)
        except Exception as e:  # TypeError, ValueError, protobuf's EncodeError: told apart by find_limit
            limit = self._limit(method, args)
            if limit:
                raise limit from e
            raise
        return entry.tag + varint(len(payload)) + payload

    def _entry(self, method: str) -> "Method":
        entry = self.methods.get(method)
        if entry is None:
            raise LookupError(f"method {method!r} has no message in {', '.join(self.files)} (see docs/protobuf.md)")
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

    def message_of(self, method: str, args: Any) -> Tuple["Method", Any]:
        """Encode's first stage: the method's table entry and the message built from the args."""
        entry = self._entry(method)
        return entry, entry.converter.to_message(args)

    @staticmethod
    def serialize(built: Tuple["Method", Any]) -> bytes:
        """Encode's second stage: the message's bytes (deterministic: map entries sorted by key) in the envelope."""
        entry, msg = built
        payload = msg.SerializeToString(deterministic=True)
        return entry.tag + varint(len(payload)) + payload

    def parse(self, data: bytes) -> Tuple["Method", Any]:
        """Decode's first stage: the method's table entry and the message parsed from envelope bytes."""
        key, pos = read_varint(data, 0)
        size, pos = read_varint(data, pos)
        entry = self.by_id.get(key >> 3)
        if entry is None or key & 7 != 2 or pos + size != len(data):
            raise ValueError(f"not a call envelope (field key {key}, length {size} at {pos} of {len(data)} bytes)")
        return entry, entry.converter.cls.FromString(data[pos:])

    @staticmethod
    def to_call(parsed: Tuple["Method", Any]) -> Tuple[str, Any]:
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


def _method_comments(proto: Any) -> Dict[Tuple[str, str], str]:
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


def _all_messages(file: Any) -> Iterable[Any]:
    stack = list(file.message_types_by_name.values())
    while stack:
        desc = stack.pop()
        stack.extend(desc.nested_types)
        yield desc


# ---------------------------------------------------------------------------------------- converting

Convert = Callable[[Any], Any]


class MessageConverter:
    """Python dict <-> one message type, planned once from the descriptor.

    To a message: ``cls(**args)``. upb builds nested messages from dicts, repeated fields
    from lists, maps from dicts, enums from value names and Struct from dicts, all in C;
    Python first converts only what the constructor cannot take: wrappers (``5`` ->
    ``{"value": 5}``) and ``Value`` fields, in this message or nested ones.

    Positional args: a message whose fields are named exactly ``arg0`` ... ``argN-1`` also
    takes a list of args (filling them in order) and gives a list back.

    Back: ``to_python`` is generated source, one dict display per message type (as
    ``dataclasses`` generates ``__init__``): about 40 % faster than a loop over per-field
    functions. Fields without presence always appear (proto3 scalars, repeated as a list,
    maps as a dict); wrapper fields appear, None when unset (unless in a oneof or marked
    ``optional``); other fields with presence (``optional``, proto2, oneof members,
    messages) appear only when set. Enums come back as their value names.
    """

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.writers: Optional[Tuple[Tuple[str, Convert], ...]] = None  # None until built
        self.to_python: Callable[[Any], Dict[str, Any]]
        n = len(cls.DESCRIPTOR.fields)
        args = tuple(f"arg{i}" for i in range(n))
        #: the field names if they are exactly arg0..argN-1: then the message also takes a list of args
        self.positional = args if n and {fd.name for fd in cls.DESCRIPTOR.fields} == set(args) else ()

    def build(self, schema: Schema) -> None:
        """Plan every field (separate from __init__ so that recursive types find themselves)."""
        fields = self.cls.DESCRIPTOR.fields
        self.to_python = _compile_reader(fields, schema)
        self.writers = tuple((fd.name, w) for fd in fields for w in [_writer(fd, schema)] if w is not None)

    def to_message(self, args: Any) -> Any:
        """The message for a call's args (TypeError/ValueError when the args don't fit it)."""
        args = self.named(args)
        return self.cls(**self.kwargs(args)) if self.writers else self.cls(**args)

    def named(self, args: Any) -> Any:
        """A positional message's list of args as the dict of its fields ``arg0``...; anything else as it is."""
        if self.positional and (type(args) is list or type(args) is tuple):
            if len(args) > len(self.positional):
                raise TypeError(f"{len(args)} positional args, {self.cls.DESCRIPTOR.name} has {len(self.positional)}")
            return dict(zip(self.positional, args))
        return args

    def to_args(self, msg: Any) -> Any:
        """A call's args back: a dict, or for positional messages the list up to the first unset arg."""
        out = self.to_python(msg)
        if not self.positional:
            return out
        args = []
        for name in self.positional:
            if name not in out:
                break
            args.append(out[name])
        return args

    def kwargs(self, args: Any) -> Any:
        """``args`` in the form the message constructor takes (a copy only when something changes)."""
        if not self.writers or type(args) is not dict:
            return args
        out = dict(args)
        for name, write in self.writers:
            if name in out:
                out[name] = write(out[name])
        return out


def _kind(fd: Any) -> str:
    """``scalar``, ``enum``, ``wrapper``, ``struct``, ``value``, ``list_value`` or ``message``."""
    if fd.enum_type is not None:
        return "enum"
    if fd.message_type is None:
        return "scalar"
    name = fd.message_type.full_name
    if name in WRAPPERS:
        return "wrapper"
    return {STRUCT: "struct", VALUE: "value", LIST_VALUE: "list_value"}.get(name, "message")


def _map_value(fd: Any) -> Optional[Any]:
    """The value field of a ``map<>`` field's entry, or None when ``fd`` is not a map."""
    mt = fd.message_type
    if fd.is_repeated and mt is not None and mt.GetOptions().map_entry:
        return mt.fields_by_name["value"]
    return None


class _EnumNames(dict):
    """Enum number -> value name; an unknown number (open proto3 enum) stays an int."""

    def __missing__(self, number: int) -> int:
        return number


def _compile_reader(fields: Sequence[Any], schema: Schema) -> Callable[[Any], Dict[str, Any]]:
    """Generate ``to_python(m)``: a dict display of the always-present fields, then one
    ``if has(...)`` line per field with presence. Field names are protobuf identifiers."""
    env: Dict[str, Any] = {}
    always, optional = [], []
    for fd in fields:
        expr, test = _field_source(fd, schema, env)
        if test:
            optional.append(f"    if {test}: d[{fd.name!r}] = {expr}")
        else:
            always.append(f"{fd.name!r}: {expr}")
    lines = ["def to_python(m):", "    has = m.HasField", f"    d = {{{', '.join(always)}}}", *optional, "    return d"]
    exec("\n".join(lines), env)
    return env["to_python"]


def _field_source(fd: Any, schema: Schema, env: Dict[str, Any]) -> Tuple[str, Optional[str]]:
    """(expression for the field's Python value, presence test or None) in ``to_python``'s source."""
    get = f"m.{fd.name}" if not keyword.iskeyword(fd.name) else f"getattr(m, {fd.name!r})"
    entry_value = _map_value(fd)
    if entry_value is not None:
        conv = _element_source(entry_value, schema, env, "v")
        return (f"dict({get})" if conv == "v" else f"{{k: {conv} for k, v in {get}.items()}}"), None
    if fd.is_repeated:
        conv = _element_source(fd, schema, env, "v")
        return (f"{get}[:]" if conv == "v" else f"[{conv} for v in {get}]"), None
    conv = _element_source(fd, schema, env, get)
    if _kind(fd) == "wrapper" and fd.containing_oneof is None:  # nullable: None when unset
        return f"({conv} if has({fd.name!r}) else None)", None
    return conv, (f"has({fd.name!r})" if fd.has_presence else None)


def _element_source(fd: Any, schema: Schema, env: Dict[str, Any], value: str) -> str:
    """Source turning ``value`` (one value of ``fd``; one element if repeated) into Python."""
    kind = _kind(fd)
    if kind == "scalar":
        return value
    if kind == "wrapper":
        return f"{value}.value"
    ref = f"_{len(env)}"
    if kind == "enum":
        if schema.enums == "numbers":
            return value
        env[ref] = _EnumNames((v.number, v.name) for v in reversed(fd.enum_type.values))  # aliases: first name
        return f"{ref}[{value}]"
    if kind == "message":
        env[ref] = schema.converter(fd.message_type)  # called through the object: it may still be building
        return f"{ref}.to_python({value})"
    env[ref] = {"struct": struct_to_python, "value": value_to_python, "list_value": list_to_python}[kind]
    return f"{ref}({value})"


def _element_writer(fd: Any, schema: Schema) -> Optional[Convert]:
    """Turns one Python value into what the constructor takes for it; None: it takes it as is."""
    kind = _kind(fd)
    if kind == "wrapper":
        return _wrap
    if kind == "value":
        return value_kwargs
    if kind == "message":
        conv = schema.converter(fd.message_type)
        return conv.kwargs if conv.writers is None or conv.writers else None  # None: still being built
    return None


def _wrap(value: Any) -> Any:
    return value if value is None else {"value": value}


def _writer(fd: Any, schema: Schema) -> Optional[Convert]:
    """How a field's Python value becomes constructor input; None: passed as it is."""
    entry_value = _map_value(fd)
    conv = _element_writer(entry_value if entry_value is not None else fd, schema)
    if conv is None:
        return None
    if entry_value is not None:
        return lambda d: d if d is None else {k: conv(v) for k, v in d.items()}
    if fd.is_repeated:
        return lambda seq: seq if seq is None else [conv(v) for v in seq]
    return conv


# ---------------------------------------------------------------------------------------- format limits

_INT_RANGES = {  # FieldDescriptor.TYPE_* -> (lowest, highest) value the field holds
    **dict.fromkeys((5, 15, 17), (-(1 << 31), (1 << 31) - 1)),  # int32, sfixed32, sint32
    **dict.fromkeys((13, 7), (0, (1 << 32) - 1)),  # uint32, fixed32
    **dict.fromkeys((3, 16, 18), (-(1 << 63), (1 << 63) - 1)),  # int64, sfixed64, sint64
    **dict.fromkeys((4, 6), (0, (1 << 64) - 1)),  # uint64, fixed64
}
_STRING = 9  # FieldDescriptor.TYPE_STRING


def find_limit(desc: Any, args: Any, path: str) -> Optional[Limit]:
    """The first value in ``args`` (a message's dict) that its field cannot hold by the format's rules.

    Used after an encode failed, to name it: an int beyond 64 bits or beyond the field's
    range, a float (NaN included) in an integer field, a number a closed enum does not
    define, a str that is not valid UTF-8. None: the failure is something else."""
    if type(args) is not dict:
        return None
    for key, value in args.items():
        fd = desc.fields_by_name.get(key) if type(key) is str else None
        if fd is None or value is None:
            continue
        entry_value = _map_value(fd)
        if entry_value is not None and type(value) is dict:
            items = [(f"{path}.{key}[{k!r}]", v, entry_value) for k, v in value.items()]
            items += [(f"{path}.{key} key {k!r}", k, entry_value.containing_type.fields_by_name["key"]) for k in value]
        elif fd.is_repeated and type(value) in (list, tuple):
            items = [(f"{path}.{key}[{i}]", v, fd) for i, v in enumerate(value)]
        else:
            items = [(f"{path}.{key}", value, fd)]
        for where, v, field in items:
            found = _value_limit(field, v, where)
            if found:
                return found
    return None


def _value_limit(fd: Any, value: Any, path: str) -> Optional[Limit]:
    """The Limit one value of field ``fd`` runs into, if any."""
    kind = _kind(fd)
    if kind == "message":
        return find_limit(fd.message_type, value, path)
    if kind == "wrapper" and type(value) is not dict:
        return _value_limit(fd.message_type.fields_by_name["value"], value, path)
    t = type(value)
    if t is str and fd.type == _STRING and _not_utf8(value):
        return Limit(SURROGATES, path, f"{value!r} is not valid UTF-8")
    bounds = _INT_RANGES.get(fd.type)
    if bounds is None and kind != "enum":
        return None
    if t is float:
        feature = FLOAT_IN_INT if value == value and abs(value) != float("inf") else NON_FINITE
        return Limit(feature, path, f"{value!r} in {_type_name(fd)} field {fd.name!r}")
    if t is int and bounds and not bounds[0] <= value <= bounds[1]:
        feature = BIG_INTS if not -(1 << 63) <= value < 1 << 64 else INT_RANGE
        return Limit(feature, path, f"{value} does not fit {_type_name(fd)} field {fd.name!r}")
    if t is int and kind == "enum" and fd.enum_type.is_closed and value not in fd.enum_type.values_by_number:
        return Limit(ENUM_UNKNOWN, path, f"{value} is not a number of closed enum {fd.enum_type.full_name}")
    return None


def _type_name(fd: Any) -> str:
    return fd.enum_type.name if fd.enum_type is not None else {v: k for k, v in vars(type(fd)).items()
                                                               if k.startswith("TYPE_")}[fd.type][5:].lower()


def _not_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


# ---------------------------------------------------------------------------------------- Struct / Value


def value_kwargs(value: Any) -> Dict[str, Any]:
    """Constructor input of a ``google.protobuf.Value`` holding ``value`` (dicts and lists stay as they
    are: the Struct and ListValue constructors convert them)."""
    t = type(value)
    if value is None:
        return {"null_value": 0}
    if t is bool:
        return {"bool_value": value}
    if t is int or t is float:
        return {"number_value": value}
    if t is str:
        return {"string_value": value}
    if t is dict:
        return {"struct_value": value}
    if t is list or t is tuple:
        return {"list_value": list(value)}
    raise TypeError(f"a google.protobuf.Value cannot hold {t.__name__}")


def value_to_python(value: Any) -> Any:
    """The Python value of a ``google.protobuf.Value`` (numbers are floats; unset is None)."""
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return {k: value_to_python(v) for k, v in value.struct_value.fields.items()}
    if kind == "list_value":
        return [value_to_python(v) for v in value.list_value.values]
    if kind is None or kind == "null_value":
        return None
    return getattr(value, kind)


def jsonlike(value: Any) -> Any:
    """``value`` in the shape a Struct can hold: bytes as base64 text, tuples as lists, keys as str."""
    t = type(value)
    if t is bytes or t is bytearray:
        return base64.b64encode(value).decode("ascii")
    if t is dict:
        return {k if type(k) is str else str(k): jsonlike(v) for k, v in value.items()}
    if t is list or t is tuple:
        return [jsonlike(v) for v in value]
    return value


def struct_to_python(struct: Any) -> Dict[str, Any]:
    """The dict of a ``google.protobuf.Struct``."""
    return {k: value_to_python(v) for k, v in struct.fields.items()}


def list_to_python(values: Any) -> List[Any]:
    """The list of a ``google.protobuf.ListValue``."""
    return [value_to_python(v) for v in values.values]


# ---------------------------------------------------------------------------------------- varints

_ONE_BYTE = [bytes((n,)) for n in range(0x80)]


def varint(n: int) -> bytes:
    """Protobuf's base-128 varint of a non-negative int."""
    if n < 0x80:
        return _ONE_BYTE[n]
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def read_varint(data: bytes, pos: int) -> Tuple[int, int]:
    """``(value, next position)`` of the varint at ``pos`` (IndexError if the data ends inside it)."""
    n = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return n, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")



def read_field(data: bytes, pos: int, number: int) -> Tuple[bytes, int]:
    """The bytes of length-delimited field ``number`` at ``pos``, and the position after them."""
    key, pos = read_varint(data, pos)
    if key != number << 3 | 2:
        raise ValueError(f"expected field {number} at byte {pos}, found key {key}")
    size, pos = read_varint(data, pos)
    if pos + size > len(data):
        raise ValueError(f"field {number} runs past the end of the data")
    return data[pos:pos + size], pos + size
