"""A precision profile suggested from a trace (``run_bench.py precision suggest --trace T``), for the team to edit.

Every call of the trace is walked along the ``quant`` layout of its schema (``--proto``, the bundled schemas when
they define every method of the trace, else one inferred from the trace, as a run would), collecting each field's
values. A float whose values all carry at most 6 decimals gets the step of its most precise value (sent exactly);
one whose values carry full precision gets the power of ten that keeps the error within ``relative_error`` of its
largest magnitude. Numbers get their observed range. Each entry says why in a comment; the ranges are the trace's,
to widen to the game's own limits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Tuple

from rpc_capture import Call

from . import inference, protobuf
from .config import RunConfig
from .precision import NO_PROFILE
from .quant.layout import BOOL, BYTES, ENUM, FLOAT, INT, STR, Leaf, Message, leaves, method_layouts

MAX_DECIMALS = 6  #: more decimals than this: the value carries full precision
RELATIVE_ERROR = 1e-4  #: default error a full-precision float's step keeps, relative to its largest magnitude


@dataclass
class Seen:
    """The values one field showed: how many, their range, and the most decimals any needed (None: full)."""

    leaf: Leaf
    count: int = 0
    low: Optional[float] = None
    high: Optional[float] = None
    decimals: Optional[int] = 0
    sizes: Tuple[int, int] = (0, 0)  #: strings, bytes: fewest and most bytes
    non_finite: int = 0  #: NaN and infinities (no step carries them)

    def add(self, value: Any) -> None:
        """Count one value."""
        self.count += 1
        if self.leaf.kind in (INT, FLOAT) and type(value) in (int, float) and math.isfinite(value):
            self.low = value if self.low is None else min(self.low, value)
            self.high = value if self.high is None else max(self.high, value)
            if self.leaf.kind == FLOAT and self.decimals is not None:
                found = next((d for d in range(MAX_DECIMALS + 1) if round(value, d) == value), None)
                self.decimals = None if found is None else max(self.decimals, found)
        elif type(value) is float:
            self.non_finite += 1
        elif self.leaf.kind in (STR, BYTES) and isinstance(value, (str, bytes)):
            n = len(value.encode("utf-8", "replace") if isinstance(value, str) else value)
            self.sizes = (n, n) if self.count == 1 else (min(self.sizes[0], n), max(self.sizes[1], n))


def schema_settings(trace: str, calls: Iterable[Call], chosen: protobuf.Settings) -> Tuple[protobuf.Settings, str]:
    """The schema a run would give ``quant`` for this trace, and where it came from in words."""
    if chosen.files:
        return chosen, f"the schema {', '.join(Path(f).name for f in chosen.files)}"
    inferring = inference.Inference(RunConfig(trace=trace, proto=chosen))
    inference.infer_from(iter(calls), inferring.shapes)
    inferred = inferring.schema()
    if inferred is None:
        return chosen, "the bundled schemas (proto/)"
    return inferred.settings(chosen), f"a schema inferred from every call of {Path(trace).name}"


def observe(layouts: Dict[str, Message], calls: Iterable[Call]) -> Tuple[Dict[str, Seen], int]:
    """Every leaf path of the layouts of the methods the calls use, in schema order, with the values the calls
    showed at it; and how many calls there were (one pass: a long trace is streamed, not held)."""
    every_leaf = (leaf for message in layouts.values() for leaf in _all_leaves(message))
    order = {leaf.path: n for n, leaf in enumerate(every_leaf)}
    seen: Dict[str, Seen] = {}
    used: set = set()
    count = 0
    for call in calls:
        count += 1
        found = layouts.get(call.method)
        if found is None:
            continue
        if call.method not in used:
            used.add(call.method)
            seen.update((leaf.path, Seen(leaf)) for leaf in _all_leaves(found))
        for leaf, value in leaves(found, call.args):
            seen[leaf.path].add(value)
    return dict(sorted(seen.items(), key=lambda item: order[item[0]])), count


def _all_leaves(node: Any) -> Iterable[Leaf]:
    if isinstance(node, Leaf):
        yield node
    elif isinstance(node, Message):
        for slot in node.slots:
            yield from _all_leaves(slot.node)
    elif hasattr(node, "item"):
        yield from _all_leaves(node.item)
    else:
        yield from _all_leaves(node.key)
        yield from _all_leaves(node.value)


def suggest(trace: str, calls: Iterable[Call], chosen: protobuf.Settings = protobuf.DEFAULT_SETTINGS,
            relative_error: float = RELATIVE_ERROR) -> str:
    """The suggested profile as TOML text, one entry (or comment) per field, each saying why. ``calls`` is read
    twice when the schema is inferred (a list, or a view that opens the trace again)."""
    settings, source = schema_settings(trace, calls, chosen)
    schema = protobuf.load(settings)
    layouts = {name: message for name, (_, message) in method_layouts(schema, NO_PROFILE).items()}
    fields, count = observe(layouts, calls)
    lines = [f"# rpcbench precision profile suggested from {Path(trace).name} ({count:,} calls), fields from "
             f"{source}.", "# Field paths: <method>.args.<field>; globs (*) work; an exact path wins over globs, "
             "then the first glob.",
             "# Rules: { step, min, max } for a float (a multiple of step over min..max), { min, max } for an int, or "
             '"exact".', "# The ranges are the ones this trace showed: widen them to your game's limits (a value "
             "outside fails, declared as such).", f"# Full-precision floats get the step that keeps the error "
             f"within {relative_error:g} of their largest magnitude (--relative-error).", "", "[fields]"]
    for path, seen in fields.items():
        lines.append(_entry(path, seen, relative_error))
    return "\n".join(lines) + "\n"


def _entry(path: str, seen: Seen, relative_error: float) -> str:
    """One field's line: a rule with its reason, or a comment for a field no rule applies to."""
    key = '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'
    kind = seen.leaf.kind
    if seen.non_finite and kind == FLOAT:
        return f'{key} = "exact"  # {seen.non_finite:,} NaN or infinite values seen: no step carries them, all 64 bits'
    if seen.low is None or seen.high is None:
        what = {BOOL: "a bool: 1 bit", ENUM: f"an enum of {len(seen.leaf.names)} values: "
                f"{seen.leaf.bits} bits", STR: "a string: length-prefixed", BYTES: "bytes: length-prefixed"}
        sizes = f", {seen.sizes[0]}-{seen.sizes[1]} bytes seen" if kind in (STR, BYTES) and seen.count else ""
        why = what.get(kind, "a schema-less value: length-prefixed MessagePack") if seen.count or kind not in (
            INT, FLOAT) else f"{kind}: no value in the trace, sent exact"
        return f"# {key}: {why}{sizes} ({seen.count:,} values)"
    if kind == INT:
        low, high = int(seen.low), int(seen.high)
        return (f"{key} = {{ min = {low}, max = {high} }}  # {seen.count:,} ints seen in {low}..{high}: "
                f"{_bits((high - low).bit_length())} instead of a varint")
    step, why = _step(seen, relative_error)
    decimals = max(0, -math.floor(math.log10(step)))
    bottom = round(math.floor(seen.low / step) * step, decimals)
    top = round(math.ceil(seen.high / step) * step, decimals)
    bits = round((top - bottom) / step).bit_length()
    return (f"{key} = {{ step = {step!r}, min = {bottom!r}, max = {top!r} }}  # {seen.count:,} floats seen in "
            f"{seen.low:g}..{seen.high:g}, {why}: {_bits(bits)} instead of 64")


def _step(seen: Seen, relative_error: float) -> Tuple[float, str]:
    """A float field's step and why."""
    if seen.decimals is not None:
        step = float(f"1e-{seen.decimals}")
        return step, f"at most {seen.decimals} decimals: a step of {step:g} sends them exactly"
    largest = max(abs(seen.low or 0.0), abs(seen.high or 0.0)) or 1.0
    step = float(f"1e{math.floor(math.log10(largest * relative_error))}")
    return step, (f"full precision: a step of {step:g} keeps the error within {step / 2:g}, "
                  f"{step / 2 / largest:.1e} of the largest")



def _bits(n: int) -> str:
    return f"{n} bit" if n == 1 else f"{n} bits"
