"""How a trace stores values: CPython's ``marshal`` format, version 4, data types only.

Writers use ``marshal.dumps(value, 4)``, which runs in C: that is what lets the
recorder's writer thread keep up with a busy server (a pure-Python encoder cost about
6 us per call, ``marshal`` about 0.6). ``marshal.loads`` is not safe on untrusted input:
readers give it only batches tagged under their own key (:mod:`rpc_capture.keys`), and
read every other batch with :func:`load`, a small pure-Python decoder for the data
subset that checks every length against the bytes present, refuses code objects,
back-references that would make a cycle and nesting beyond :data:`MAX_DEPTH`. The
byte-level description is in ``docs/trace-format.md``.

The values: None, bool, int (any size), float, complex, str (lone surrogates kept),
bytes, tuple, list, dict (any hashable keys), set, frozenset, and marshal's two
singletons Ellipsis and StopIteration. :func:`plain` turns subclasses (``IntEnum``,
named tuples, ``OrderedDict``...) and bytes-like objects into those exact types.
"""

from __future__ import annotations

import marshal
import struct
from typing import Any, List, Tuple

VERSION = 4  #: the marshal format version written and read
MAX_DEPTH = 2000  #: deepest nesting of containers: what marshal itself writes at most
MAX_EXPANDED = 128 << 20  #: bytes a value may take with every back-reference written out in full
MAX_SAME_HASH = 32  #: keys of one dict that may share a hash value (more: a hash-collision attack)

CYCLE_OR_DEPTH = f"value contains itself (a cycle) or is nested deeper than {MAX_DEPTH} levels"

_I32 = struct.Struct("<i")
_F64 = struct.Struct("<d")
_C128 = struct.Struct("<dd")
_unpack_i32 = _I32.unpack_from
_unpack_f64 = _F64.unpack_from

FLAG_REF = 0x80  #: set on a type code: the value gets the next back-reference index
# type codes (ASCII characters, as in CPython's Python/marshal.c)
NULL, NONE, FALSE, TRUE, ELLIPSIS, STOPITER = b"0NFT.S"
INT, LONG, BINARY_FLOAT, BINARY_COMPLEX = b"ilgy"
BYTES, UNICODE, INTERNED, ASCII, ASCII_INTERNED, SHORT_ASCII, SHORT_ASCII_INTERNED = b"sutaAzZ"
TUPLE, SMALL_TUPLE, LIST, DICT, SET, FROZENSET, REF = b"()[{<>r"

_UNFINISHED = object()  #: marks the back-reference slot of a container still being read


def dump(value: Any) -> bytes:
    """Encode ``value``; ValueError if it holds a type marshal cannot write (see :func:`plain`)."""
    return marshal.dumps(value, VERSION)


def expanded_size(value: Any) -> int:
    """Bytes ``value`` takes with no back-references; ValueError if it contains itself.

    One C call: marshal format 2 has no back-references, so it follows a cycle until its
    depth limit (an error), and its length bounds what :func:`load` counts against
    :data:`MAX_EXPANDED`. About 0.4 us per typical call, paid by the recorder's writer
    thread, never by the caller.
    """
    try:
        return len(marshal.dumps(value, 2))
    except ValueError:
        raise ValueError(CYCLE_OR_DEPTH) from None


def load(buf: bytes, pos: int = 0) -> Tuple[Any, int]:
    """Decode one value from ``buf`` at ``pos``; return ``(value, next_pos)``.

    Raises ValueError on anything malformed, never allocates more than ``buf`` can hold.
    Iterative, so any depth marshal writes is read without deep recursion.
    """
    try:
        return _load(buf, pos)
    except (IndexError, struct.error):
        raise ValueError("value runs past the end of the record") from None
    except TypeError as e:  # an unhashable dict key or set item
        raise ValueError(str(e)) from None


def _size(buf: bytes, pos: int) -> int:
    n = _unpack_i32(buf, pos)[0]
    if n < 0:
        raise ValueError(f"negative length {n}")
    return n


def _load(buf: bytes, pos: int) -> Tuple[Any, int]:
    """:func:`load`'s loop: one value read per turn, atoms inline (the hot path), containers on a stack."""
    refs: List[Any] = []  # back-reference targets, in the order marshal numbered them
    weights: List[int] = []  # their expanded sizes (bytes with every back-reference written out)
    extra, limit = 0, MAX_EXPANDED - len(buf)  # bytes the back-references read so far add when written out
    stack: List[list] = []  # the open containers (see _open_container)
    start = extra_before = 0  # where the value being read began, and the extra bytes then: set for flagged ones
    while True:
        slot = -1
        top = stack[-1] if stack else None
        if top is not None and top[0] == DICT and top[2] is _NO_KEY and buf[pos] == NULL:  # the dict ends
            stack.pop()
            value, slot, start, extra_before = top[1], top[3], top[4], top[5]
            pos += 1
        else:
            code = buf[pos]
            pos += 1
            if code & FLAG_REF:
                code, slot, start, extra_before = _reserve_ref(code, refs, weights, pos - 1, extra)
            if code == REF:  # inline: most values of a batch are back-references
                i = _unpack_i32(buf, pos)[0]
                if not 0 <= i < len(refs) or refs[i] is _UNFINISHED:
                    raise _bad_reference(i)
                value, pos = refs[i], pos + 4
                extra += weights[i] - 5
                if extra > limit:
                    raise ValueError(f"back-references expand the record beyond {MAX_EXPANDED} bytes")
            elif code == INT:
                value, pos = _unpack_i32(buf, pos)[0], pos + 4
            elif code == BINARY_FLOAT:
                value, pos = _unpack_f64(buf, pos)[0], pos + 8
            elif code in _CONTAINERS:
                value, pos = _open_container(code, buf, pos, stack, slot, start, extra)
                if value is _OPENED:
                    continue
            else:
                value, pos = _rare_atom(code, buf, pos)
        while True:  # the value is complete: hand it to its container, closing those it completes
            if slot >= 0:
                refs[slot] = value
                weights[slot] = pos - start + extra - extra_before
            if not stack:
                return value, pos
            top = stack[-1]
            if top[0] == DICT:
                if top[2] is _NO_KEY:
                    if type(value) is not str:
                        _count_hash(top, value)
                    top[2] = value
                else:
                    top[1][top[2]] = value
                    top[2] = _NO_KEY
                break
            top[1].append(value)
            top[2] -= 1
            if top[2]:
                break
            stack.pop()
            value, slot, start, extra_before = _finish(top[0], top[1]), top[3], top[4], top[5]


def _reserve_ref(code: int, refs: List[Any], weights: List[int], start: int, extra: int) -> Tuple[int, int, int, int]:
    """A value with the reference flag: reserve its back-reference slot, to be filled once it is read.

    Returns ``(code without the flag, slot, where the value starts, extra bytes so far)``.
    """
    code &= 0x7F
    if code == REF:
        raise ValueError("back-reference with the reference flag set")
    refs.append(_UNFINISHED)
    weights.append(0)
    return code, len(refs) - 1, start, extra


def _open_container(code: int, buf: bytes, pos: int, stack: List[list], slot: int, start: int,
                    extra: int) -> Tuple[Any, int]:
    """Open a container at ``pos`` (after its code): push a frame for its items and return
    ``(_OPENED, next_pos)``, or ``(value, next_pos)`` for an empty list, tuple or set.

    A frame is ``[code, items, items left (a dict: its pending key), ref slot, start, extra
    at start]``, and for a dict a seventh item, its keys' hash counts (see :func:`_count_hash`).
    """
    if len(stack) >= MAX_DEPTH:
        raise ValueError(f"value nested deeper than {MAX_DEPTH} levels")
    if code == DICT:
        stack.append([DICT, {}, _NO_KEY, slot, start, extra, None])
        return _OPENED, pos
    n, pos = (buf[pos], pos + 1) if code == SMALL_TUPLE else (_size(buf, pos), pos + 4)
    if n > len(buf) - pos:  # every item takes a byte at least: refused before allocating
        raise ValueError(f"container claims {n} items but the record has {len(buf) - pos} bytes left")
    if not n:
        return _finish(code, []), pos
    stack.append([code, [], n, slot, start, extra])
    return _OPENED, pos


def _count_hash(frame: list, key: Any) -> None:
    """Count a non-str key's hash in its open dict: many keys of one hash make a dict quadratic."""
    seen = frame[6]
    if seen is None:
        seen = frame[6] = {}
    h = hash(key)
    n = seen[h] = seen.get(h, 0) + 1
    if n > MAX_SAME_HASH:
        raise ValueError(f"more than {MAX_SAME_HASH} keys of one dict share a hash value (hash-collision attack)")


_CONTAINERS = frozenset((DICT, LIST, TUPLE, SMALL_TUPLE, SET, FROZENSET))
_NO_KEY = object()  #: an open dict's pending key when the next value read is a key
_OPENED = object()  #: _open_container's answer when it pushed a frame rather than finished a value


def _finish(code: int, items: list) -> Any:
    if code == LIST:
        return items
    if code == TUPLE or code == SMALL_TUPLE:
        return tuple(items)
    return set(items) if code == SET else frozenset(items)


def _bad_reference(i: int) -> ValueError:
    """The error for back-reference index ``i`` (read as a signed length) that has no finished value."""
    if i < 0:
        return ValueError(f"negative length {i}")
    return ValueError(f"back-reference {i} to a value not read yet, or to a container from inside it")


def _rare_atom(code: int, buf: bytes, pos: int) -> Tuple[Any, int]:
    """The scalar codes other than int, float and back-reference: returns ``(value, next_pos)``."""
    if code == SHORT_ASCII or code == SHORT_ASCII_INTERNED:
        end = pos + 1 + buf[pos]
        if end > len(buf):
            raise ValueError("string runs past the end of the record")
        return buf[pos + 1:end].decode("ascii"), end
    if code == NONE:
        return None, pos
    if code == TRUE or code == FALSE:
        return code == TRUE, pos
    if code == LONG:
        return _load_long(buf, pos)
    if code in _SIZED:
        end = pos + 4 + _size(buf, pos)
        if end > len(buf):
            raise ValueError("string runs past the end of the record")
        raw = buf[pos + 4:end]
        if code == BYTES:
            return bytes(raw), end
        return raw.decode("utf-8" if code == UNICODE or code == INTERNED else "ascii", "surrogatepass"), end
    if code == BINARY_COMPLEX:
        return complex(*_C128.unpack_from(buf, pos)), pos + 16
    if code == ELLIPSIS or code == STOPITER:
        return (... if code == ELLIPSIS else StopIteration), pos
    raise ValueError(f"unsupported marshal type code 0x{code:02x}")


_SIZED = frozenset((UNICODE, INTERNED, ASCII, ASCII_INTERNED, BYTES))


def _load_long(buf: bytes, pos: int) -> Tuple[int, int]:
    """An int as marshal writes it beyond 32 bits: signed digit count, base-2**15 digits, least first."""
    n = _unpack_i32(buf, pos)[0]
    size = abs(n)
    pos += 4
    if size > (len(buf) - pos) // 2:
        raise ValueError(f"int claims {size} digits but the record has {len(buf) - pos} bytes left")
    digits = struct.unpack_from(f"<{size}H", buf, pos)
    if size and not digits[-1]:
        raise ValueError("int with a leading zero digit")
    if size and max(digits) >> 15:
        raise ValueError(f"int digit {max(digits)} out of range")
    value = _from_digits(digits, 0, size)
    return (-value if n < 0 else value), pos + 2 * size


def _from_digits(digits: Tuple[int, ...], lo: int, hi: int) -> int:
    """The int of base-2**15 ``digits[lo:hi]`` (least first). Halving keeps it O(n log n):
    shifting one digit in at a time rebuilt the whole int per digit, quadratic."""
    if hi - lo <= 32:
        value = 0
        for i in range(hi - 1, lo - 1, -1):
            value = value << 15 | digits[i]
        return value
    mid = (lo + hi) // 2
    return _from_digits(digits, mid, hi) << (15 * (mid - lo)) | _from_digits(digits, lo, mid)


_ATOMS = frozenset((type(None), bool, int, float, complex, str, bytes))


def plain(value: Any) -> Any:
    """``value`` with every part an exact type :func:`dump` writes: subclasses become their
    base type (``IntEnum`` -> int, named tuple -> tuple, ``OrderedDict`` -> dict), bytearray
    and memoryview become bytes. TypeError for anything else, ValueError if nested too deep."""
    try:
        return _plain(value)
    except RecursionError:
        raise ValueError(CYCLE_OR_DEPTH) from None


def _plain(value: Any) -> Any:
    t = type(value)
    if t in _ATOMS or value is ... or value is StopIteration:
        return value
    atoms = _ATOMS  # exact-type items are taken as they are, without a call: most of the speed
    if t is dict:
        return {k if type(k) in atoms else _plain(k): v if type(v) in atoms else _plain(v) for k, v in value.items()}
    if t is list:
        return [v if type(v) in atoms else _plain(v) for v in value]
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    for base in (list, tuple, set, frozenset):
        if isinstance(value, base):
            return base(_plain(v) for v in value)
    for scalar in (int, float, str):  # exact copies, whatever __str__ and friends were overridden to say
        if isinstance(value, scalar):
            return getattr(scalar, f"__{scalar.__name__}__")(value)
    if isinstance(value, complex):
        return complex(float(value.real), float(value.imag))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"cannot record a value of type {t.__name__}")
