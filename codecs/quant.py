"""``quant``: each call quantized and bit-packed from the protobuf schema and the run's precision profile."""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Optional, Tuple

from rpc_capture import Call
from rpcbench import protobuf
from rpcbench.codec import Codec, Received
from rpcbench.fidelity import (DEFAULTS, ENUM_FORM, FLOAT32, INFERRED, INT_AS_FLOAT, METHOD, NULLS, PRECISION,
                               QUANTIZED, SURROGATES, TUPLES, Limit, unknown_method)
from rpcbench.precision import NO_PROFILE, Profile
from rpcbench.quant import Generated, OutOfProfile, Tolerance, method_bits, method_layouts




class Quant(Codec):
    """Each call as the bits its schema and precision profile need, padded to whole bytes once at the end.

    The method's index in as few bits as the method count needs, then its message: presence bits for optional
    fields, ints in the bits of their profile range (zig-zag varints without one), floats as multiples of their
    step over their range (64-bit IEEE when exact), bools as bits, strings and bytes length-prefixed, repeated
    fields and maps with a count (docs/codecs.md, "quant"). The encoder and decoder of each message are
    generated from the layout once (rpcbench/quant/codegen.py): their CPU is this implementation's, their bytes
    those of any implementation of the same layout.
    """

    id = "quant"
    library = "msgpack"  #: schema-less fields (google.protobuf.Value...) travel as MessagePack
    changes = {
        NULLS: "None in a field without presence is sent as its default; in a repeated field or map as empty",
        DEFAULTS: "a field without presence that the call left out comes back as its default",
        TUPLES: "tuple -> list",
        INT_AS_FLOAT: "an int in a double/float field comes back as float",
        FLOAT32: "exact float (32-bit) fields round the value",
        ENUM_FORM: "enums come back as value names, however the call gave them",
        SURROGATES: "fails to encode (string fields must be valid UTF-8)",
        METHOD: "a method the schemas have no message for fails to encode",
    }

    def __init__(self, settings: protobuf.Settings = protobuf.DEFAULT_SETTINGS,
                 precision: Profile = NO_PROFILE) -> None:
        schema = protobuf.load(settings)
        self.schemas = list(schema.files)
        self.precision = precision.label if precision.name else "none (every value exact)"
        layouts = method_layouts(schema, precision)
        self._tolerance = Tolerance({name: message for name, (_, message) in layouts.items()})
        self.lossy = self._tolerance.any
        extra = {**({QUANTIZED: f"floats come back within half their step ({precision.label})"} if self.lossy else {}),
                 **({INFERRED: protobuf.INFERRED_CHANGE} if schema.inferred else {})}
        if extra:  # (an instance attribute only when they differ from the class's)
            self.changes = {**self.changes, **extra}  # type: ignore[misc]
        self._inferred = schema.inferred
        self.index_bits = method_bits(len(layouts))
        self.envelope = f"{self.index_bits} bits of method index, then the message's bits, zero-padded to a byte"
        generated = Generated([message for _, message in layouts.values()])
        self._by_method = {name: (index, generated.encoder(message)) for name, (index, message) in layouts.items()}
        self._by_index: List[Tuple[str, Any]] = [("", None)] * len(layouts)
        for name, (index, message) in layouts.items():
            self._by_index[index] = (name, generated.decoder(message))
        self._layouts = layouts

    def encode(self, call: Call) -> bytes:
        entry = self._by_method.get(call.method)
        if entry is None:
            raise unknown_method(call.method, ", ".join(self.schemas))
        out: List[bytes] = []
        try:
            a, n = entry[1](entry[0], self.index_bits, call.args, out)
        except OutOfProfile as e:
            raise Limit(PRECISION, f"args ({e.path})", str(e)) from e
        except UnicodeEncodeError as e:
            raise Limit(SURROGATES, "args", str(e)) from e
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError, struct.error) as e:
            if self._inferred:  # a key or type the training calls did not show
                raise Limit(INFERRED, "args", f"{type(e).__name__}: {e}") from e
            raise
        pad = -n & 7
        last = (a << pad).to_bytes((n + pad) >> 3, "big")
        return b"".join(out) + last if out else last

    def decode(self, data: bytes) -> Received:
        big = int.from_bytes(data, "big")
        left = (len(data) << 3) - self.index_bits
        name, decoder = self._by_index[big >> left & ((1 << self.index_bits) - 1)]
        args, left = decoder(big, left)
        if left >= 8:
            raise ValueError(f"{left // 8} bytes after the message")
        return name, args

    def within_steps(self, call: Call, back: Call) -> Tuple[Call, Tuple[Tuple[str, float, float], ...],
                                                           Optional[Tuple[str, str]]]:
        """``back`` with each float that came back within half its step restored, what changed, the first value
        off by more (see rpcbench.quant.Tolerance)."""
        args, changes = self._tolerance.check(call.method, call.args, back.args)
        if not changes.changed and changes.beyond is None:
            return back, (), None
        return back._replace(args=args), tuple(changes.changed), changes.beyond

    def layout(self) -> Dict[str, Any]:
        """``{method: (index, message layout)}``: what the independent bit count walks (rpcbench.quant.call_bits)."""
        return dict(self._layouts)
