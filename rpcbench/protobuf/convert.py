"""Python values <-> protobuf messages: converters, generated readers and writers, format limits.

* :class:`Converters` makes one :class:`MessageConverter` per message type on first use
  (recursive types share theirs) and holds how enums come back (names or numbers).
* :class:`MessageConverter` turns an args dict into a message and back, planned once from
  the message's descriptor: ``to_python`` is generated source (:func:`_compile_reader`),
  the writers convert only what the message constructor cannot take itself.
* :func:`find_limit` names the value a failed encode could not hold (a fidelity.Limit).
* ``google.protobuf.Value``/``Struct`` helpers: :func:`value_kwargs`,
  :func:`value_to_python`, :func:`jsonlike` (used by ``protobuf-struct`` too).

``google.protobuf`` is imported only when a converter is made, so that ``rpcbench``
imports (and ``--help`` works) without it.
"""

from __future__ import annotations

import base64
import keyword
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple, Type, Union

from ..errors import BenchError
from ..fidelity import BIG_INTS, ENUM_UNKNOWN, FLOAT_IN_INT, INT_RANGE, NON_FINITE, SURROGATES, WRONG_TYPE, Limit, short

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor, FieldDescriptor
    from google.protobuf.message import Message

ENUM_FORMS = ("names", "numbers")  #: how decoded enum values come back
WRAPPERS = frozenset(f"google.protobuf.{n}Value" for n in
                     ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes"))
STRUCT, VALUE, LIST_VALUE = "google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"

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
    messages) appear only when set. Enums come back as value names (or numbers: Converters.enums).
    """

    def __init__(self, cls: Type[Message]) -> None:
        self.cls = cls
        self.writers: Optional[Tuple[Tuple[str, Convert], ...]] = None  # None until built
        self.to_python: Callable[[Any], Dict[str, Any]]
        #: the field names if they are exactly arg0..argN-1: then the message also takes a list of args
        self.positional = positional_fields(cls.DESCRIPTOR)

    def build(self, converters: Converters) -> None:
        """Plan every field (separate from __init__ so that recursive types find themselves)."""
        fields = self.cls.DESCRIPTOR.fields
        self.to_python = _compile_reader(fields, converters)
        self.writers = tuple((fd.name, w) for fd in fields for w in [_writer(fd, converters)] if w is not None)

    def to_message(self, args: Any) -> Message:
        """The message for a call's args (TypeError/ValueError when the args don't fit it)."""
        args = self.named(args)
        return self.cls(**self.kwargs(args)) if self.writers else self.cls(**args)

    def named(self, args: Any) -> Any:
        """A positional message's list of args as the dict of its fields ``arg0``...; anything else as it is."""
        if self.positional and (type(args) is list or type(args) is tuple):
            if len(args) > len(self.positional):
                raise TypeError(f"{len(args)} positional args, {self.cls.DESCRIPTOR.name} has {len(self.positional)}")
            return dict(zip(self.positional, args, strict=False))  # fewer args: the first fields
        return args

    def to_args(self, msg: Message) -> Any:
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


class Converters:
    """One :class:`MessageConverter` per message type, made on first use; recursive types share theirs."""

    def __init__(self, enums: str = "names") -> None:
        from google.protobuf import message_factory

        if enums not in ENUM_FORMS:
            raise BenchError(f"--proto-enums {enums!r}: choose {' or '.join(ENUM_FORMS)}")
        self.enums = enums  #: "names": decoded enums come back as value names; "numbers": as ints
        self._get_class = message_factory.GetMessageClass
        self._made: Dict[str, MessageConverter] = {}

    def of(self, desc: Descriptor) -> MessageConverter:
        """The converter of message type ``desc``."""
        conv = self._made.get(desc.full_name)
        if conv is None:
            conv = self._made[desc.full_name] = MessageConverter(self._get_class(desc))
            conv.build(self)
        return conv


def positional_fields(desc: Descriptor) -> Tuple[str, ...]:
    """``("arg0", ..., "argN-1")`` when those are exactly a message's field names (it carries
    positional args), else ``()``."""
    n = len(desc.fields)
    args = tuple(f"arg{i}" for i in range(n))
    return args if n and {fd.name for fd in desc.fields} == set(args) else ()


def field_kind(fd: FieldDescriptor) -> str:
    """``scalar``, ``enum``, ``wrapper``, ``struct``, ``value``, ``list_value`` or ``message``."""
    if fd.enum_type is not None:
        return "enum"
    if fd.message_type is None:
        return "scalar"
    name = fd.message_type.full_name
    if name in WRAPPERS:
        return "wrapper"
    return {STRUCT: "struct", VALUE: "value", LIST_VALUE: "list_value"}.get(name, "message")


def map_value_field(fd: FieldDescriptor) -> Optional[FieldDescriptor]:
    """The value field of a ``map<>`` field's entry, or None when ``fd`` is not a map."""
    mt = fd.message_type
    if fd.is_repeated and mt is not None and mt.GetOptions().map_entry:
        return mt.fields_by_name["value"]
    return None


class _EnumNames(dict):
    """Enum number -> value name; an unknown number (open proto3 enum) stays an int."""

    def __missing__(self, number: int) -> int:
        return number


def _compile_reader(fields: Sequence[FieldDescriptor], converters: Converters) -> Callable[[Any], Dict[str, Any]]:
    """Generate ``to_python(m)``: a dict display of the always-present fields, then one
    ``if has(...)`` line per field with presence. Field names are protobuf identifiers."""
    env: Dict[str, Any] = {}
    always, optional = [], []
    for fd in fields:
        expr, test = _field_source(fd, converters, env)
        if test:
            optional.append(f"    if {test}: d[{fd.name!r}] = {expr}")
        else:
            always.append(f"{fd.name!r}: {expr}")
    lines = ["def to_python(m):", "    has = m.HasField", f"    d = {{{', '.join(always)}}}", *optional, "    return d"]
    exec("\n".join(lines), env)
    return env["to_python"]


def _field_source(fd: FieldDescriptor, converters: Converters, env: Dict[str, Any]) -> Tuple[str, Optional[str]]:
    """(expression for the field's Python value, presence test or None) in ``to_python``'s source."""
    get = f"m.{fd.name}" if not keyword.iskeyword(fd.name) else f"getattr(m, {fd.name!r})"
    entry_value = map_value_field(fd)
    if entry_value is not None:
        conv = _element_source(entry_value, converters, env, "v")
        return (f"dict({get})" if conv == "v" else f"{{k: {conv} for k, v in {get}.items()}}"), None
    if fd.is_repeated:
        conv = _element_source(fd, converters, env, "v")
        return (f"{get}[:]" if conv == "v" else f"[{conv} for v in {get}]"), None
    conv = _element_source(fd, converters, env, get)
    if field_kind(fd) == "wrapper" and fd.containing_oneof is None:  # nullable: None when unset
        return f"({conv} if has({fd.name!r}) else None)", None
    return conv, (f"has({fd.name!r})" if fd.has_presence else None)


def _element_source(fd: FieldDescriptor, converters: Converters, env: Dict[str, Any], value: str) -> str:
    """Source turning ``value`` (one value of ``fd``; one element if repeated) into Python."""
    kind = field_kind(fd)
    if kind == "scalar":
        return value
    if kind == "wrapper":
        return f"{value}.value"
    ref = f"_{len(env)}"
    if kind == "enum":
        if converters.enums == "numbers":
            return value
        env[ref] = _EnumNames((v.number, v.name) for v in reversed(fd.enum_type.values))  # aliases: first name
        return f"{ref}[{value}]"
    if kind == "message":
        env[ref] = converters.of(fd.message_type)  # called through the object: it may still be building
        return f"{ref}.to_python({value})"
    env[ref] = {"struct": struct_to_python, "value": value_to_python, "list_value": list_to_python}[kind]
    return f"{ref}({value})"


def _element_writer(fd: FieldDescriptor, converters: Converters) -> Optional[Convert]:
    """Turns one Python value into what the constructor takes for it; None: it takes it as is."""
    kind = field_kind(fd)
    if kind == "wrapper":
        return _wrap
    if kind == "value":
        return value_kwargs
    if kind == "message":
        conv = converters.of(fd.message_type)
        return conv.kwargs if conv.writers is None or conv.writers else None  # None: still being built
    return None


def _wrap(value: Any) -> Any:
    return value if value is None else {"value": value}


def _writer(fd: FieldDescriptor, converters: Converters) -> Optional[Convert]:
    """How a field's Python value becomes constructor input; None: passed as it is."""
    entry_value = map_value_field(fd)
    conv = _element_writer(entry_value if entry_value is not None else fd, converters)
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
#: the Python types upb's constructor takes for a field (by FieldDescriptor.TYPE_*, or "enum"); a bool passes as an
#: int and an int as a bool, and come back changed (fidelity.BOOL_NUMBER, declared), bytes pass as a str (BYTES)
_ACCEPTS: Dict[Any, Tuple[type, ...]] = {
    **dict.fromkeys(_INT_RANGES, (int, bool)), 1: (float, int, bool), 2: (float, int, bool), 8: (bool, int),
    _STRING: (str, bytes), 12: (bytes,), "enum": (int, bool, str)}
_JSONLIKE = (type(None), bool, int, float, str)  #: what a google.protobuf.Value holds besides dicts and lists


def find_limit(desc: Descriptor, args: Any, path: str) -> Optional[Limit]:
    """The first value in ``args`` (a message's dict) that its field cannot hold by the format's rules.

    Used after an encode failed, to name it: an int beyond 64 bits or beyond the field's
    range, a float (NaN included) in an integer field, a number a closed enum does not
    define, a str that is not valid UTF-8, a value of a type the field cannot hold at all
    (a str in an int field, an int in a string field, a list in a message field). None: the
    failure is something else (a key the message has no field for)."""
    if type(args) is not dict:
        return Limit(WRONG_TYPE, path, f"{type(args).__name__} {short(args)} where message {desc.name} goes")
    for key, value in args.items():
        fd = desc.fields_by_name.get(key) if type(key) is str else None
        if fd is None or value is None:
            continue
        entry_value = map_value_field(fd)
        if fd.is_repeated and type(value) not in ((dict,) if entry_value else (list, tuple)):
            what = "map" if entry_value else "repeated"
            return Limit(WRONG_TYPE, f"{path}.{key}", f"{type(value).__name__} {short(value)} in {what} field {key!r}")
        if entry_value is not None:
            items = [(f"{path}.{key}[{k!r}]", v, entry_value) for k, v in value.items()]
            items += [(f"{path}.{key} key {k!r}", k, entry_value.containing_type.fields_by_name["key"]) for k in value]
        elif fd.is_repeated:
            items = [(f"{path}.{key}[{i}]", v, fd) for i, v in enumerate(value)]
        else:
            items = [(f"{path}.{key}", value, fd)]
        for where, v, field in items:
            found = _value_limit(field, v, where)
            if found:
                return found
    return None


def _value_limit(fd: FieldDescriptor, value: Any, path: str) -> Optional[Limit]:
    """The Limit one value of field ``fd`` runs into, if any."""
    kind = field_kind(fd)
    if kind == "message":
        return find_limit(fd.message_type, value, path)
    if kind == "wrapper" and type(value) is not dict:
        return _value_limit(fd.message_type.fields_by_name["value"], value, path)
    if kind in ("struct", "value", "list_value"):
        return _jsonlike_limit(kind, value, path, fd.name)
    t = type(value)
    if t is str and fd.type == _STRING and _not_utf8(value):
        return Limit(SURROGATES, path, f"{value!r} is not valid UTF-8")
    if t is bytes and fd.type == _STRING and _not_utf8(value):  # taken as its text when it is UTF-8 (BYTES)
        return Limit(WRONG_TYPE, path, f"bytes {short(value)} (not UTF-8) in string field {fd.name!r}")
    bounds = _INT_RANGES.get(fd.type)
    if t is float and (bounds or kind == "enum"):
        feature = FLOAT_IN_INT if value == value and abs(value) != float("inf") else NON_FINITE
        return Limit(feature, path, f"{value!r} in {_type_name(fd)} field {fd.name!r}")
    if t is int and bounds and not bounds[0] <= value <= bounds[1]:
        feature = BIG_INTS if not -(1 << 63) <= value < 1 << 64 else INT_RANGE
        return Limit(feature, path, f"{value} does not fit {_type_name(fd)} field {fd.name!r}")
    if t is int and kind == "enum" and fd.enum_type.is_closed and value not in fd.enum_type.values_by_number:
        return Limit(ENUM_UNKNOWN, path, f"{value} is not a number of closed enum {fd.enum_type.full_name}")
    if t not in _ACCEPTS.get("enum" if kind == "enum" else fd.type, (t,)):
        return Limit(WRONG_TYPE, path, f"{t.__name__} {short(value)} in {_type_name(fd)} field {fd.name!r}")
    return None


def _jsonlike_limit(kind: str, value: Any, path: str, name: str) -> Optional[Limit]:
    """The first value a Struct, ListValue or Value field cannot hold (bytes, sets...), if any."""
    outer: Optional[Tuple[type, ...]] = {"struct": (dict,), "list_value": (list, tuple)}.get(kind)
    stack = [(value, path)]
    if outer and type(value) not in outer:
        return Limit(WRONG_TYPE, path, f"{type(value).__name__} {short(value)} in {kind} field {name!r}")
    while stack:
        v, where = stack.pop()
        t = type(v)
        if t is dict:
            if not all(type(k) is str for k in v):
                return Limit(WRONG_TYPE, where, f"a key that is not a str in a google.protobuf.Struct: {short(v)}")
            stack += [(x, f"{where}.{k}") for k, x in v.items()]
        elif t is list or t is tuple:
            stack += [(x, f"{where}[{i}]") for i, x in enumerate(v)]
        elif t not in _JSONLIKE:
            return Limit(WRONG_TYPE, where, f"{t.__name__} {short(v)} in a google.protobuf.Value (JSON values only)")
    return None


def _type_name(fd: FieldDescriptor) -> str:
    return fd.enum_type.name if fd.enum_type is not None else {v: k for k, v in vars(type(fd)).items()
                                                               if k.startswith("TYPE_")}[fd.type][5:].lower()


def _not_utf8(text: Union[str, bytes]) -> bool:
    """Whether a str has no UTF-8 form (lone surrogates), or bytes are not UTF-8 text."""
    try:
        if isinstance(text, str):
            text.encode("utf-8")
        else:
            text.decode("utf-8")
        return False
    except UnicodeError:
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
