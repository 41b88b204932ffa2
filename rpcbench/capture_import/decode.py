"""A captured payload as ``(method, args)``: decoded by the codec the game uses today.

With the envelope ``{"method": ..., "args": ...}`` (the default) the payload goes to the registry
codec's own ``decode``: json, msgpack, bson, cbor, protobuf (rpcbench's envelope over ``--proto``
schemas) or a plugin's. A game whose messages put the method elsewhere names the fields
(``--method-field``, ``--args-field``): the payload is then parsed to a document by the library
of that codec (json, msgpack, bson, cbor), or by ``--proto FILE --message NAME`` as that message,
and the fields picked out of it.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, NamedTuple, Optional, Sequence, Tuple

from ..codec import Codec, received_call
from ..errors import BenchError

Decoder = Callable[[bytes], Tuple[str, Any]]


class Envelope(NamedTuple):
    """Where a message keeps its method and its args. ``args`` empty: the message without its method field.

    In a list message (``["move", {...}]``, as socket.io sends) the fields are positions: ``0``, ``1``.
    A protobuf ``oneof``'s name as ``method``: the method is the name of the member set, the args its value.
    """

    method: str = "method"
    args: str = "args"


def _msgpack(data: bytes) -> Any:
    import msgpack
    return msgpack.unpackb(data, strict_map_key=False)


def _bson(data: bytes) -> Any:
    import bson
    return bson.decode(data)


def _cbor(data: bytes) -> Any:
    import cbor2
    return cbor2.loads(data)


#: codec id -> the payload as a document, by the library that codec uses
DOCUMENTS: Dict[str, Callable[[bytes], Any]] = {"json": json.loads, "msgpack": _msgpack, "bson": _bson, "cbor": _cbor}


def payload_decoder(codec_id: str, envelope: Envelope, create: Callable[[str], Codec],
                    protobuf: Optional[Tuple[Sequence[str], Sequence[str], str]] = None) -> Decoder:
    """The decoder of ``--decode CODEC``; ``create`` makes a registry codec, ``protobuf`` is
    (--proto files, --proto-path dirs, --message) when a message type is given."""
    if protobuf is not None:
        return _message_decoder(*protobuf, envelope)
    if envelope == Envelope():
        codec = create(codec_id)
        return lambda data: _received(received_call(codec.decode(data)))
    if codec_id not in DOCUMENTS:
        raise BenchError(f"--method-field/--args-field apply to {', '.join(DOCUMENTS)} and protobuf with --message; "
                         f"codec {codec_id!r} decodes (method, args) itself")
    parse = DOCUMENTS[codec_id]
    return lambda data: pick(parse(data), envelope)


def _received(call: Any) -> Tuple[str, Any]:
    return call.method, call.args


def pick(document: Any, envelope: Envelope) -> Tuple[str, Any]:
    """``(method, args)`` out of a decoded message; ValueError naming what is missing."""
    if isinstance(document, list) and envelope.method.isdigit():
        at = int(envelope.method)
        if at >= len(document):
            raise ValueError(f"a list of {len(document)} items has no method at position {at}")
        rest = [item for i, item in enumerate(document) if i != at]
        args = document[int(envelope.args)] if envelope.args.isdigit() and int(envelope.args) < len(document) else rest
        return _method(document[at]), args
    if not isinstance(document, dict):
        raise ValueError(f"the message is a {type(document).__name__}, not an object with a {envelope.method!r} field")
    if envelope.method not in document:
        raise ValueError(f"the message has no {envelope.method!r} field (it has {sorted(map(str, document))[:8]})")
    if not envelope.args:
        return _method(document[envelope.method]), {k: v for k, v in document.items() if k != envelope.method}
    if envelope.args not in document:
        raise ValueError(f"the message has no {envelope.args!r} field")
    return _method(document[envelope.method]), document[envelope.args]


def _method(value: Any) -> str:
    """A method name; a numeric opcode becomes its decimal text."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"the method is a {type(value).__name__}, not a name or number")


def _message_decoder(files: Sequence[str], include: Sequence[str], name: str, envelope: Envelope) -> Decoder:
    """Payloads as protobuf message ``name`` from ``files``, fields picked by ``envelope`` (a oneof allowed)."""
    from .. import protobuf
    from ..protobuf.convert import Converters

    schema = protobuf.load(protobuf.Settings(tuple(files), tuple(include)))
    try:
        desc = schema.pool.FindMessageTypeByName(name)
    except KeyError:
        raise BenchError(f"--message {name!r}: no such message in {', '.join(files) or 'proto/'} (give its full "
                         f"name, package included)") from None
    converter = Converters().of(desc)
    parse, to_python = converter.cls.FromString, converter.to_python
    if envelope.method in desc.oneofs_by_name:
        oneof = envelope.method

        def by_oneof(data: bytes) -> Tuple[str, Any]:
            message = parse(data)
            member = message.WhichOneof(oneof)
            if member is None:
                raise ValueError(f"no member of oneof {oneof!r} is set")
            return member, to_python(message)[member]

        return by_oneof
    return lambda data: pick(to_python(parse(data)), envelope)
