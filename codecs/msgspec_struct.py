"""``msgspec-struct``: typed msgspec Structs built from the protobuf schemas, as MessagePack."""

import math
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import msgspec

from rpc_capture import Call
from rpcbench import protobuf
from rpcbench.codec import Codec, Received
from rpcbench.fidelity import (BIG_INTS, FLOAT_IN_INT, INFERRED, INT_AS_FLOAT, METHOD, NON_FINITE, OTHER, SURROGATES,
                               TUPLES, WRONG_TYPE, Limit, short, unknown_method)

_UNSET = msgspec.UNSET
_SCALARS = {"double": float, "float": float, "bool": bool, "string": str, "bytes": bytes}
_SCALAR_TYPES = (float, bool, str, bytes, int)  #: what a scalar field holds (every integer type is int)
_ALLOWED = {float: (float, int)}  #: the Python types a scalar field of a type takes besides its own: none else
_ANY_MESSAGES = ("google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue",
                 "google.protobuf.Any", "google.protobuf.Timestamp", "google.protobuf.Duration",
                 "google.protobuf.Empty", "google.protobuf.FieldMask")
Build = Callable[[Any], Any]  #: plain value -> what the Struct field holds
Plain = Callable[[Any], Any]  #: what the Struct field holds -> plain value


class _Planner:
    """One Struct type, builder and reader per protobuf message (recursive messages: Any below)."""

    def __init__(self) -> None:
        self.done: Dict[str, Tuple[Any, Build, Plain]] = {}
        self.busy: set = set()

    def message(self, desc: Any) -> Tuple[Any, Build, Plain]:
        """(Struct type, dict -> Struct, Struct -> dict) for one message descriptor."""
        if desc.full_name in self.done:
            return self.done[desc.full_name]
        if desc.full_name in self.busy:
            return Any, _same, _same
        self.busy.add(desc.full_name)
        plans = [(fd.name, str(fd.number), *self.field(fd)) for fd in desc.fields]
        struct = msgspec.defstruct(
            desc.name, [(name, Union[kind, None, msgspec.UnsetType], _UNSET) for name, _, kind, _, _ in plans],
            omit_defaults=True, rename={name: number for name, number, _, _, _ in plans})
        builders = {name: build for name, _, _, build, _ in plans}
        readers = [(name, read) for name, _, _, _, read in plans]
        positional = protobuf.positional_fields(desc)

        def build(args: Any) -> Any:
            if positional and (type(args) is list or type(args) is tuple):
                if len(args) > len(positional):
                    raise TypeError(f"{len(args)} positional args, {desc.name} has {len(positional)}")
                args = dict(zip(positional, args, strict=False))
            elif type(args) is not dict:
                raise Limit(WRONG_TYPE, "args", f"{type(args).__name__} {short(args)} where message {desc.name} goes")
            return struct(**{k: None if v is None else builders[k](v) for k, v in args.items()})

        def read(value: Any) -> Any:
            out = {}
            for name, reader in readers:
                v = getattr(value, name)
                if v is not _UNSET:
                    out[name] = None if v is None else reader(v)
            return _as_list(out, positional) if positional else out

        self.busy.discard(desc.full_name)
        self.done[desc.full_name] = (struct, build, read)
        return struct, build, read

    def field(self, fd: Any) -> Tuple[Any, Build, Plain]:
        """Type, builder and reader of one field (repeated and map fields included)."""
        msg = fd.message_type
        if msg is not None and msg.GetOptions().map_entry:
            key, _, _ = self.single(msg.fields_by_name["key"])
            value, build, read = self.single(msg.fields_by_name["value"])
            return Dict[key, value], _checked_map(key, build, fd.name), \
                _same if read is _same else lambda d: {k: read(v) for k, v in d.items()}
        kind, build, read = self.single(fd)
        if not fd.is_repeated:
            return kind, build, read
        if kind in _SCALAR_TYPES:
            return List[kind], _checked_items(kind, fd.name), _same
        return List[kind], _checked_list(build, fd.name), _same if read is _same else lambda xs: [read(x) for x in xs]

    def single(self, fd: Any) -> Tuple[Any, Build, Plain]:
        """Type, builder and reader of one value of a field."""
        if fd.enum_type is not None:
            return Union[int, str], _checked(int, fd.name, (int, str)), _same  # a number or a value name
        msg = fd.message_type
        if msg is None:
            kind = _SCALARS.get(_type_name(fd), int)
            return kind, _checked(kind, fd.name), _same
        if msg.full_name.startswith("google.protobuf.") and msg.full_name.endswith("Value") and \
                msg.full_name not in _ANY_MESSAGES:
            return self.single(msg.fields_by_name["value"])  # wrappers: the value itself, None when unset
        if msg.full_name in _ANY_MESSAGES:
            return Any, _same, _same
        return self.message(msg)


def _as_list(fields: Dict[str, Any], positional: Tuple[str, ...]) -> List[Any]:
    """A positional message's args: ``arg0``, ``arg1``... up to the first one unset."""
    args = []
    for name in positional:
        if name not in fields:
            break
        args.append(fields[name])
    return args


def _type_name(fd: Any) -> str:
    names = {fd.TYPE_DOUBLE: "double", fd.TYPE_FLOAT: "float", fd.TYPE_BOOL: "bool", fd.TYPE_STRING: "string",
             fd.TYPE_BYTES: "bytes"}
    return names.get(fd.type, "int")


def _checked(kind: type, name: str, allowed: Tuple[type, ...] = ()) -> Build:
    """A builder that refuses a value of a type the scalar field does not carry (msgspec checks types on decode
    only): a declared failure at encode (``float in int field``, ``nan/inf``, ``type not in schema``), never a
    bool that comes back as an int. An int is taken by a double/float field (it comes back as float, declared).
    ``allowed``: the Python types it takes, if not ``kind`` alone (an enum's: a number or a value name)."""
    allowed = allowed or _ALLOWED.get(kind, (kind,))

    def check(value: Any) -> Any:
        if type(value) not in allowed:
            raise _wrong(kind, name, value)
        return value
    return check


def _checked_items(kind: type, name: str) -> Build:
    """:func:`_checked` for a repeated scalar field, item by item."""
    allowed = _ALLOWED.get(kind, (kind,))

    def check(values: Any) -> Any:
        if type(values) is not list and type(values) is not tuple:
            raise _wrong(list, name, values)
        for v in values:
            if type(v) not in allowed:
                raise _wrong(kind, name, v)
        return values
    return check


def _checked_list(build: Build, name: str) -> Build:
    """The builder of a repeated field of messages (or of enums, Any): a list, each item built."""
    def check(values: Any) -> Any:
        if type(values) is not list and type(values) is not tuple:
            raise _wrong(list, name, values)
        return values if build is _same else [build(x) for x in values]
    return check


def _checked_map(key: Any, build: Build, name: str) -> Build:
    """The builder of a map field: a dict whose keys are of the key type (str or int) and values built."""
    def check(values: Any) -> Any:
        if type(values) is not dict:
            raise _wrong(dict, name, values)
        wrong = next((k for k in values if type(k) is not key), None)
        if wrong is not None:
            raise _wrong(key, f"{name} key", wrong)
        return values if build is _same else {k: build(v) for k, v in values.items()}
    return check


def _wrong(kind: type, name: str, value: Any) -> Limit:
    """The Limit of a value of the wrong type in scalar field ``name`` of type ``kind``."""
    detail = f"{type(value).__name__} {short(value)} in {kind.__name__} field {name!r}"
    if type(value) is float and kind is int:
        return Limit(FLOAT_IN_INT if math.isfinite(value) else NON_FINITE, "args", detail)
    return Limit(WRONG_TYPE, "args", detail)


def _same(value: Any) -> Any:
    return value


class MsgspecStruct(Codec):
    """Each call as its method's message, typed: a msgspec Struct per protobuf message, MessagePack on the wire.

    The Structs are generated from the same schemas as ``protobuf`` (``proto/``,
    ``--proto``...): fields keyed by their protobuf field numbers, fields the call left out
    omitted, None kept as nil. The envelope is the method's id as a varint, then the
    message. Decoding validates every field against its type (msgspec's typed decoder)
    and gives the args back as dicts; a message whose fields are ``arg0``...``argN-1`` takes
    and gives back a list of positional args, as ``protobuf`` does.
    """

    id = "msgspec-struct"
    library = "msgspec"
    changes = {
        TUPLES: "tuple -> list",
        INT_AS_FLOAT: "an int in a double/float field comes back as float",
        BIG_INTS: "fails to encode (over 64 bits)",
        SURROGATES: "fails to encode (not valid UTF-8)",
        METHOD: "a method the schemas do not define fails to encode",
        FLOAT_IN_INT: "a float in an integer field fails to encode",
        NON_FINITE: "NaN or infinity in an integer field fails to encode",
        WRONG_TYPE: "a value of a type its field does not carry (a bool in an int field, an int in a string field) "
                    "fails to encode",
    }

    def __init__(self, settings: Optional[protobuf.Settings] = None) -> None:
        schema = protobuf.load(settings or protobuf.DEFAULT_SETTINGS)
        self.schemas = list(schema.files)
        if schema.inferred:
            self.changes = {**self.changes, INFERRED: protobuf.INFERRED_CHANGE}  # type: ignore[misc]
        self._inferred = schema.inferred  #: a call the schema cannot carry is declared (INFERRED)
        self.envelope = "varint(method id) + msgpack of the message's Struct (keys: field numbers)"
        planner = _Planner()
        self._by_method: Dict[str, Tuple[bytes, Build]] = {}
        self._by_id: Dict[int, Tuple[str, Any, Plain]] = {}
        encode = msgspec.msgpack.Encoder().encode
        for method in schema.methods.values():
            struct, build, read = planner.message(schema.pool.FindMessageTypeByName(method.message))
            self._by_method[method.name] = (protobuf.varint(method.id), build)
            self._by_id[method.id] = (method.name, msgspec.msgpack.Decoder(struct).decode, read)
        self._encode = encode

    def encode(self, call: Call) -> bytes:
        entry = self._by_method.get(call.method)
        if entry is None:
            raise unknown_method(call.method, ", ".join(self.schemas))
        prefix, build = entry
        try:
            return prefix + self._encode(build(call.args))
        except Limit:
            raise
        except (TypeError, ValueError, KeyError) as e:  # a key the schema lacks, too many positional args
            raise Limit(INFERRED if self._inferred else OTHER, "args", f"{type(e).__name__}: {e}") from e

    def decode(self, data: bytes) -> Received:
        method_id, pos = _varint(data)
        name, decode, read = self._by_id[method_id]
        return name, read(decode(data[pos:]))


def _varint(data: bytes) -> Tuple[int, int]:
    """A varint from the start of ``data``, and where it ends."""
    value = shift = pos = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


