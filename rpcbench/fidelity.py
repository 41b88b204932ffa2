"""Did the codec give the same call back? Finding and naming the first difference.

Features are the short names codecs use in ``Codec.changes`` to declare what they
cannot carry or carry differently; a difference is classified under one of them.
"""

from __future__ import annotations

import io
import math
import pickle
import reprlib
import threading
from typing import Any, Container, Iterator, List, NamedTuple, Optional, Set, Tuple

from rpc_capture import Call

BYTES = "bytes"  #: bytes values
TUPLES = "tuples"  #: tuples (most formats only have arrays)
INT_KEYS = "int keys"  #: dict keys that are ints
UINT64 = "uint64"  #: ints from 2**63 to 2**64-1
BIG_INTS = "big ints"  #: ints beyond 64 bits either way
NON_FINITE = "nan/inf"  #: float NaN and infinities
SURROGATES = "lone surrogates"  #: str holding unpaired UTF-16 surrogates (not valid UTF-8)
NUL_KEYS = "NUL in keys"  #: dict keys containing the character U+0000
FLOAT32 = "float precision"  #: floats that come back rounded (e.g. 32-bit fields)
INT_AS_FLOAT = "int -> float"  #: numbers that come back as another number type
NULLS = "nulls"  #: None that comes back as a default value or goes missing
DEFAULTS = "defaults"  #: a key the call left out comes back holding its type's default (proto3 scalars)
ENUM_FORM = "enum number/name"  #: an enum value given as a number comes back as its name, or the reverse
ENUM_UNKNOWN = "unknown enum number"  #: a number a closed (proto2) enum does not define
INT_RANGE = "int beyond field range"  #: an int (within 64 bits) too large or too negative for its typed field
FLOAT_IN_INT = "float in int field"  #: a finite float where the schema has an integer field
BOOL_NUMBER = "bool <-> number"  #: a bool that comes back as a number (True -> 1) or a number as a bool (2 -> True)
WRONG_TYPE = "type not in schema"  #: a value of a type its schema field cannot hold (a str in an int field...)
METHOD = "method"  #: the method name itself
INFERRED = "inferred schema"  #: a value a schema inferred from the trace has no field or type for (its guesses)
QUANTIZED = "quantized"  #: a value sent at a precision profile's step: it comes back within half a step
PRECISION = "beyond precision profile"  #: outside its range, or back off by more than half its step: never declared
OTHER = "other"  #: anything else: never declarable, always a bug

_INT64 = (-(1 << 63), (1 << 63) - 1)
PICKLE_PROTOCOL = 5  #: writes bytes and bytearray apart (protocol 5's BYTEARRAY8)


class Limit(ValueError):
    """Raised by a codec's encode for a value the format cannot hold, naming the feature.

    The size pass reports the failure under ``feature`` (declared if the codec declares it),
    with ``path`` and the message as its example, rather than guessing from the value."""

    def __init__(self, feature: str, path: str, detail: str) -> None:
        super().__init__(detail)
        self.feature, self.path = feature, path


def unknown_method(method: str, schemas: str) -> Limit:
    """The one failure every schema codec raises for a method its schemas do not define: a declarable ``METHOD``
    limit (the call cannot be sent at all, so it counts against the codec's coverage either way)."""
    return Limit(METHOD, "method", f"no message for method {method!r} in {schemas} (see docs/protobuf.md)")


class Difference(NamedTuple):
    """The first difference found: its feature, where (``args.units[3].pos``) and what."""

    feature: str
    path: str
    detail: str


def compare(original: Call, decoded: Any, declared: Container[str] = (), differs: bool = False) -> Optional[Difference]:
    """Return None when ``decoded`` is the same call as ``original``, else a difference.

    Same means same method and deeply equal args with the same types (``1``, ``1.0`` and
    ``True`` differ; a tuple is not a list; an int subclass such as pymongo's ``Int64``
    is an int). Dict key order does not count; NaN equals NaN.
    The first difference outside ``declared`` features wins, so a declared change
    (bytes -> str) cannot hide an undeclared one elsewhere in the same call.
    ``differs``: the caller's own check found them not the same (a batch's pickles or ``==``), so the pickle
    check, which only ever spares the walk, is skipped: the walk alone decides, as it does whenever it runs.
    """
    if not isinstance(decoded, Call):
        return Difference(OTHER, "", f"decode returned {type(decoded).__name__}, not Call")
    if decoded.method != original.method:
        return Difference(METHOD, "method", f"{original.method!r} -> {short(decoded.method)}")
    a, b = original.args, decoded.args
    if not differs and identical(a, b):
        return None
    first = None
    for diff in _diffs(a, b, "args"):
        if diff.feature not in declared:
            return diff
        first = first or diff
    return first


class _Pickles(threading.local):
    """A pickler per thread without the memo (``fast``: a value shared twice is written twice, as a decoder's
    fresh copies are), reused call after call; and the last two originals' pickles, which every codec's decoded
    value is compared with in turn (a batch's calls, and a part of it or one call of it, in between)."""

    def __init__(self) -> None:
        buffer = io.BytesIO()
        pickler = pickle.Pickler(buffer, PICKLE_PROTOCOL)
        pickler.fast = True
        seek, truncate, dump, getvalue = buffer.seek, buffer.truncate, pickler.dump, buffer.getvalue

        def dumps(value: Any) -> bytes:  # a closure: no attribute lookups per call
            seek(0)
            truncate()
            dump(value)
            return getvalue()

        self.dumps = dumps
        self.originals: List[Tuple[Any, bytes]] = [(_NONE, b""), (_NONE, b"")]  #: kept alive: no other takes their ids

    def of_original(self, value: Any) -> bytes:
        """The pickle of ``value``, made once however many codecs compare with it."""
        kept = self.originals
        for i, (original, data) in enumerate(kept):
            if original is value:
                if i:
                    kept.reverse()
                return data
        data = self.dumps(value)
        self.originals = [(value, data), kept[0]]
        return data


_NONE = object()  #: no original yet
_PICKLES = _Pickles()


def pickled(value: Any) -> bytes:
    """``value``'s pickle as :func:`compare` compares them (fast mode: no memo, so equal values give equal
    bytes however their objects are shared); raises what pickle raises."""
    return _PICKLES.dumps(value)


def identical_pickles(original: Any, other: Any) -> bool:
    """Do ``original`` and ``other`` give equal pickles (fast mode)? Equal pickles are the same values of the same
    types (a pickle names every type: ``1``, ``1.0`` and ``True``, bytes and bytearray, a list and a tuple, a dict
    and a dict subclass all differ; floats are their bits). Not equal does not mean different (dict key order, NaN
    payloads, an int subclass change the bytes too): :func:`compare`'s walk decides then. ``original``'s pickle is
    kept for the next call (every codec's value of a call is compared with the same original)."""
    try:
        pickles = _PICKLES
        return pickles.of_original(original) == pickles.dumps(other)
    except Exception:  # nested deeper than C recursion allows, cyclic, or a decoded type pickle cannot write
        return False


def _identical_in_c(original: Any, other: Any) -> bool:
    """:func:`identical_pickles`' answer from one walk of both values in C (rpcbench/_exact.c), no bytes written;
    the pickles themselves where a type it does not know is met."""
    try:
        found = _exact_same(original, other)
    except Exception:  # nested deeper than the recursion limit: not identical, as the pickles would say
        return False
    return identical_pickles(original, other) if found is None else found


# identical(original, other): would their pickles be equal (identical_pickles' question)? The walk in C where the
# extension was built, else the pickles themselves: chosen once, here.
try:
    from ._exact import same as _exact_same
except ImportError:  # built without a C compiler (setup.py): the pickles compared, the same answers, slower
    identical = identical_pickles
    EXACT_CHECK = "pickles compared (rpcbench._exact not built: no C compiler at install)"
else:
    identical = _identical_in_c
    EXACT_CHECK = "one walk in C (rpcbench._exact)"  #: results.json's environment: how the size pass checked


def _diffs(a: Any, b: Any, path: str) -> Iterator[Difference]:
    """The differences in document order, walked with an explicit stack: any depth works."""
    stack: list = [(a, b, path)]
    while stack:
        task = stack.pop()
        if type(task) is Difference:
            yield task
        else:
            stack.extend(reversed(_step(*task)))


def _step(a: Any, b: Any, path: str) -> list:
    """What comparing ``a`` with ``b`` takes, in order: differences found, and pairs still to compare."""
    ta, tb = type(a), type(b)
    if ta is dict and tb is dict:
        return _dict_step(a, b, path)
    if (ta is list or ta is tuple) and (tb is list or tb is tuple):
        out: list = [] if ta is tb else [Difference(TUPLES, path, f"{ta.__name__} -> {tb.__name__}")]
        if len(a) != len(b):
            out.append(Difference(OTHER, path, f"{len(a)} items -> {len(b)}"))
        return out + [(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b)) if not _same_leaf(x, y)]
    if ta is tb or (ta is int and isinstance(b, int) and tb is not bool):  # bson.int64.Int64 is an int
        found = _same_type_diff(a, b, path)
        return [found] if found else []
    return [_type_diff(a, b, path)]


def _same_leaf(a: Any, b: Any) -> bool:
    """Are ``a`` and ``b`` one plain value of one type (nothing to walk: a zero float still is, for its sign)?"""
    ta = type(a)
    return ta is type(b) and ta in _LEAVES and a == b and (ta is not float or a != 0.0)


_LEAVES = frozenset({str, int, float, bytes, bool, type(None)})  #: types whose equal values of one type are the same


def _dict_step(a: dict, b: dict, path: str) -> list:
    out: list = []
    for k, x in a.items():
        if k in b:
            y = b[k]
            if not _same_leaf(x, y):
                out.append((x, y, _key_path(path, k)))
            continue
        where = _key_path(path, k)
        if type(k) is int and str(k) in b:
            out += [Difference(INT_KEYS, where, "int key -> str key"), (x, b[str(k)], where)]
        elif x is None:
            out.append(Difference(NULLS, where, "None -> key missing"))
        else:
            out.append(Difference(OTHER, where, "key missing"))
    for k in b:
        if k not in a and not (type(k) is str and _int_key_in(k, a)):
            feature = DEFAULTS if not b[k] and type(b[k]) is not type(None) else OTHER
            out.append(Difference(feature, _key_path(path, k), f"unexpected key ({short(b[k])})"))
    return out


def _key_path(path: str, key: Any) -> str:
    return f"{path}.{key}" if type(key) is str or type(key) is int else f"{path}.{short(key)}"


def _int_key_in(k: str, a: dict) -> bool:
    try:
        return int(k) in a
    except ValueError:
        return False


def _same_type_diff(a: Any, b: Any, path: str) -> Optional[Difference]:
    if a == b:
        if type(a) is float and math.copysign(1.0, a) != math.copysign(1.0, b):
            return Difference(OTHER, path, f"{a!r} -> {b!r} (sign of zero)")
        return None
    if type(a) is float:
        if math.isnan(a) and math.isnan(b):
            return None
        if not math.isfinite(a):
            return Difference(NON_FINITE, path, f"{a!r} -> {b!r}")
        return Difference(FLOAT32, path, f"{a!r} -> {b!r}")
    if type(a) is int and not _INT64[0] <= a <= _INT64[1]:
        return Difference(UINT64 if 0 < a < (1 << 64) else BIG_INTS, path, f"{a} -> {b}")
    return Difference(OTHER, path, f"{short(a)} -> {short(b)}")


def _type_diff(a: Any, b: Any, path: str) -> Difference:
    ta, tb = type(a).__name__, type(b).__name__
    if type(a) is bytes:
        return Difference(BYTES, path, f"bytes -> {tb}")
    if a is None:
        return Difference(NULLS, path, f"None -> {short(b)}")
    if type(a) is float and not math.isfinite(a):
        return Difference(NON_FINITE, path, f"{a!r} -> {short(b)}")
    if type(a) in (int, float) and type(b) in (int, float) and a == b:
        return Difference(INT_AS_FLOAT, path, f"{a!r} -> {b!r}")
    if type(a) is int and type(b) is float and abs(a) > 1 << 53:
        return Difference(INT_AS_FLOAT, path, f"{a} -> {b!r} (beyond 2**53, rounded)")
    if type(a) is int and not _INT64[0] <= a <= _INT64[1]:
        return Difference(UINT64 if 0 < a < (1 << 64) else BIG_INTS, path, f"{a} -> {short(b)}")
    if {type(a), type(b)} in ({int, str}, {bool, str}):  # an enum given as a number (a bool is one) or a name
        return Difference(ENUM_FORM, path, f"{short(a)} -> {short(b)}")
    if bool in (type(a), type(b)) and {type(a), type(b)} <= {bool, int, float}:  # a typed field of the other kind
        return Difference(BOOL_NUMBER, path, f"{a!r} -> {b!r}")
    return Difference(OTHER, path, f"{ta} {short(a)} -> {tb} {short(b)}")


_REPR = reprlib.Repr()  #: bounded cost and depth for any value
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother, _REPR.maxlong = 4, 40, 40, 40


def short(v: Any, limit: int = 40) -> str:
    """``v`` for a problem's detail: its repr, bounded in depth and length."""
    text = _REPR.repr(v)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def features_of(value: Any) -> Set[str]:
    """The input features present in a value (to tell a declared encode failure)."""
    return set(_scan(value))


def _scan(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:  # an explicit stack: any depth works
        v = stack.pop()
        t = type(v)
        if t is dict:
            for k, x in v.items():
                if type(k) is int:
                    yield INT_KEYS
                elif type(k) is str and "\x00" in k:
                    yield NUL_KEYS
                stack += (k, x)
        elif t is list or t is tuple:
            if t is tuple:
                yield TUPLES
            stack.extend(v)
        elif t is bytes:
            yield BYTES
        elif t is int and not _INT64[0] <= v <= _INT64[1]:
            yield UINT64 if 0 < v < (1 << 64) else BIG_INTS
        elif t is float and not math.isfinite(v):
            yield NON_FINITE
        elif t is str:
            yield from _scan_str(v)


def _scan_str(s: str) -> Tuple[str, ...]:
    try:
        s.encode("utf-8")
        return ()
    except UnicodeEncodeError:
        return (SURROGATES,)
