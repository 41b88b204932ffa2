"""Protobuf schemas for the ``protobuf`` codecs, one module per step, each importing only earlier ones.

* :mod:`.wire`: varints and length-delimited fields, the pieces of the call envelopes.
* :mod:`.compile`: ``protoc`` from grpcio-tools, the on-disk cache, protoc's errors on one line.
* :mod:`.convert`: Python values <-> messages (converters, generated readers and writers),
  the format limits that name a failed encode, ``Struct``/``Value`` helpers.
* :mod:`.schema`: :class:`Settings`, :func:`load`, and :class:`Schema`'s method table
  (which message carries each method, by the rules in its docstring).
* :mod:`.shape`: what a schema is inferred from: the shape of the values at one place of the args,
  recorded value by value, merged exactly from runs of calls read apart.
* :mod:`.infer`: a .proto inferred from a trace (``run_bench.py proto infer``).

Settings travel as data: the registry passes a :class:`Settings` to the codec's
constructor (``Registry(codec_options=...)``), which calls :func:`load`. Importing this
package does not import ``google.protobuf`` (that happens when a schema is loaded). The
cache folder is ``compile.CACHE_DIR`` (tests point it elsewhere).
"""

from .compile import compile_descriptors, condense_errors, well_known_include
from .convert import (ENUM_FORMS, Converters, MessageConverter, field_kind, find_limit, jsonlike, map_value_field,
                      positional_fields, value_kwargs, value_to_python)
from .infer import TraceShapes, infer, infer_calls, package_for
from .shape import InexactMerge, is_identifier
from .schema import DEFAULT_SETTINGS, INFERRED_CHANGE, PROTO_DIR, Method, Schema, Settings, load, read_mapping
from .wire import read_field, read_varint, varint

__all__ = [
    "compile_descriptors", "condense_errors", "well_known_include",
    "ENUM_FORMS", "Converters", "MessageConverter", "field_kind", "find_limit", "jsonlike", "map_value_field",
    "positional_fields", "value_kwargs", "value_to_python",
    "TraceShapes", "infer", "infer_calls", "package_for", "InexactMerge", "is_identifier",
    "DEFAULT_SETTINGS", "INFERRED_CHANGE", "PROTO_DIR", "Method", "Schema", "Settings", "load", "read_mapping",
    "read_field", "read_varint", "varint",
]
