"""The ``quant`` codec's machinery: quantized, bit-packed messages from a protobuf schema and a precision profile.

* :mod:`.layout`: what each field becomes on the wire (widths from the profile, presence bits), as a tree of nodes.
* :mod:`.codegen`: an encoder and a decoder per message node, generated as Python source and compiled once.
* :mod:`.measure`: the bit count of a call from the layout alone, and the per-field check of lossy values.

codecs/quant.py is the codec; rpcbench/precision.py the profile; docs/codecs.md the layout bit by bit.
"""

from .codegen import Generated, UnknownKeys
from .layout import Leaf, Message, OutOfProfile, method_bits, method_layouts
from .measure import Changes, Tolerance, call_bits

__all__ = ["Generated", "UnknownKeys", "Leaf", "Message", "OutOfProfile", "method_bits", "method_layouts",
           "Changes", "Tolerance", "call_bits"]
