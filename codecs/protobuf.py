"""``protobuf`` (typed messages from the .proto schemas) and ``protobuf-struct`` (schema-less).

The machinery (protoc, method table, converters) is the package :mod:`rpcbench.protobuf`;
docs/protobuf.md explains schemas, mapping, the envelope and the declared changes.
"""

from typing import List

from google.protobuf import struct_pb2
from google.protobuf.internal import api_implementation

from rpc_capture import Call
from rpcbench.codec import Codec, Received, Stage
from rpcbench.fidelity import (BIG_INTS, BOOL_NUMBER, BYTES, DEFAULTS, ENUM_FORM, ENUM_UNKNOWN, FLOAT32, FLOAT_IN_INT,
                               INT_AS_FLOAT, INFERRED, INT_KEYS, INT_RANGE, METHOD, NON_FINITE, NULLS, SURROGATES,
                               TUPLES, WRONG_TYPE)
from rpcbench.protobuf import (DEFAULT_SETTINGS, INFERRED_CHANGE, Settings, jsonlike, load, read_field, value_kwargs,
                               value_to_python, varint)



class Protobuf(Codec):
    """Each call as its method's request message from the schemas, inside a ``oneof`` envelope.

    Encode converts the args dict to the message and serializes it (deterministically);
    decode parses and converts back to the same Python values, so both timings are end to
    end, and both are also timed stage by stage.
    """

    id = "protobuf"
    library = "protobuf"
    changes = {
        NULLS: "None in a field that is not a wrapper is sent unset: comes back missing, [] or {} "
               "(repeated, map) or the default (proto3 field without presence)",
        FLOAT32: "float (32-bit) fields round the value",
        INT_AS_FLOAT: "an int in a double/float field or in a Struct/Value comes back as float",
        TUPLES: "tuple -> list",
        SURROGATES: "fails to encode (string fields must be valid UTF-8)",
        DEFAULTS: "a proto3 field without presence that the call left out comes back as 0, \"\" or false",
        ENUM_FORM: "enums come back as value names (--proto-enums numbers: as numbers), however the call gave them",
        ENUM_UNKNOWN: "a number that a closed (proto2) enum does not define fails to encode",
        BIG_INTS: "ints beyond 64 bits fail to encode (no protobuf integer type holds them)",
        INT_RANGE: "an int beyond its field's type (over 2**31 in int32, negative in uint64...) fails to encode",
        FLOAT_IN_INT: "a float in an integer or enum field fails to encode",
        NON_FINITE: "NaN or infinity in an integer or enum field fails to encode (double/float fields carry them)",
        METHOD: "a method the schemas have no message for fails to encode",
        BOOL_NUMBER: "a bool in an integer, enum or double/float field comes back as a number (True -> 1), an int "
                     "in a bool field as a bool (2 -> True): protobuf takes one for the other",
        BYTES: "bytes in a string field come back as str",
        WRONG_TYPE: "a value of a type its field cannot hold (a str in an int field, an int in a string field, "
                    "bytes in a google.protobuf.Value) fails to encode",
    }

    def __init__(self, settings: Settings = DEFAULT_SETTINGS) -> None:
        schema = load(settings)
        self.backend = api_implementation.Type()
        self.schemas = list(schema.files)
        self.proto_path = list(settings.include)
        self.mapping = settings.mapping
        self.enums = schema.enums
        self.methods = len(schema.methods)
        self.envelope = "oneof: varint(method id << 3 | 2) + varint(length) + message"
        self.serialization = "deterministic (map entries sorted by key)"
        self._schema = schema
        if schema.inferred:
            self.changes = {**self.changes, INFERRED: INFERRED_CHANGE}  # type: ignore[misc]
        self._encode = schema.encode
        self._decode = schema.decode

    def encode(self, call: Call) -> bytes:
        return self._encode(call.method, call.args)

    def decode(self, data: bytes) -> Received:
        return self._decode(data)

    def encode_stages(self) -> List[Stage]:
        """convert (args -> message), then serialize (message -> envelope bytes)."""
        message_of = self._schema.message_of
        return [("convert", lambda call: message_of(call.method, call.args)), ("serialize", self._schema.serialize)]

    def decode_stages(self) -> List[Stage]:
        """parse (bytes -> message), then convert (message -> (method, args))."""
        return [("parse", self._schema.parse), ("convert", self._schema.to_call)]


class ProtobufStruct(Codec):
    """No schema: ``message Call { string method = 1; google.protobuf.Value args = 2; }``.

    Args go through ``google.protobuf.Value`` (a Struct for dicts), protobuf's JSON-like
    model: every number is a double, bytes travel as base64 text, keys as str.
    """

    id = "protobuf-struct"
    library = "protobuf"
    changes = {
        INT_AS_FLOAT: "every number becomes a double (int -> float; beyond 2**53 digits are lost)",
        BYTES: "bytes -> base64 str",
        INT_KEYS: "int key -> str key",
        TUPLES: "tuple -> list",
        SURROGATES: "fails to encode (string fields must be valid UTF-8)",
    }

    def __init__(self) -> None:
        self.backend = api_implementation.Type()
        self.envelope = "message Call { string method = 1; google.protobuf.Value args = 2; }"
        self._value = struct_pb2.Value
        self._jsonlike_methods: set = set()  # methods whose args needed jsonlike() (no failed try per call)

    def encode(self, call: Call) -> bytes:
        method = call.method.encode("utf-8")
        if call.method in self._jsonlike_methods:  # seen carrying bytes, tuples or int keys: convert up front
            args = self._value(**value_kwargs(jsonlike(call.args)))
        else:
            try:
                args = self._value(**value_kwargs(call.args))
            except (TypeError, ValueError):  # bytes, tuples or int keys somewhere: make it JSON-like first
                self._jsonlike_methods.add(call.method)
                args = self._value(**value_kwargs(jsonlike(call.args)))
        payload = args.SerializeToString()
        return b"".join((b"\x0a", varint(len(method)), method,
                         b"\x12", varint(len(payload)), payload))

    def decode(self, data: bytes) -> Received:
        method, pos = read_field(data, 0, 1)
        args, end = read_field(data, pos, 2)
        if end != len(data):
            raise ValueError(f"{len(data) - end} bytes after the call")
        return method.decode("utf-8"), value_to_python(self._value.FromString(args))
