"""What a schema is inferred from (rpcbench/protobuf/infer.py): the shape of the values seen at one place of a
method's args (:class:`Shape`: kinds, int ranges, dict keys, list items), recorded value by value, and merged
exactly from the shapes of two runs of calls (:meth:`Shape.merge`), so that halves of a trace read in two
processes give the schema one read in order gives, to the byte.
"""

from __future__ import annotations

from collections import Counter
from itertools import chain
from operator import itemgetter
from typing import Any, Dict, Iterable, Optional, Sequence, cast

MAX_FIELDS = 64  #: a dict position with more distinct keys than this is a map, not a message
#: places nested deeper than this in the args (lists and dicts) are not walked: their lists and dicts are told as
#: "deep" (a google.protobuf.Value), so that no inference, merge or pickle of shapes recurses without bound
MAX_DEPTH = 48
NOT_NAMES = "keys that are not field names"  #: why a dict position holding such a key is a map
_KINDS = {bool: "bool", int: "int", float: "float", str: "str", bytes: "bytes", list: "list", tuple: "list",
          dict: "dict"}
_SCALARS = {t: kind for t, kind in _KINDS.items() if kind in ("bool", "int", "float", "str", "bytes")}


def is_identifier(name: Any) -> bool:
    """Whether ``name`` can be a protobuf field, message or rpc name (ASCII letter or _, then letters, digits, _)."""
    return type(name) is str and name.isascii() and name.isidentifier()


class InexactMerge(Exception):
    """The shapes of two runs of calls cannot tell what adding the calls in order gives (:meth:`Shape.merge` says
    when): the calls are to be added in order instead."""


class Shape:
    """Everything seen at one place of the args (the values of one key, or the items of lists)."""

    def __init__(self, depth: int = 0) -> None:
        self.depth = depth  #: how many lists and dicts hold this place
        self.count = 0  #: values seen, None included
        self.none = 0
        self.kinds: Counter = Counter()  #: non-None values by kind: bool int float str bytes list dict other deep
        self.lo = self.hi = 0  #: int range
        self.items: Optional[Shape] = None  #: list items
        self.fields: Optional[Dict[str, Shape]] = {}  #: dict values by key; None once the dicts look like a map
        self.values: Optional[Shape] = None  #: all dict values, once the dicts look like a map
        self.key_kinds: Counter = Counter()  #: dict keys: "name", "int", "str" (not a field name), "other"
        self.key_lo = self.key_hi = 0
        self.map_reason = ""
        #: keys told apart before the dicts became a map, or more (a bound: :meth:`merge` reads it)
        self.map_at = 0

    def add(self, value: Any) -> None:
        """Record one value (called for every value of every call the schema is inferred from: kept lean)."""
        self.count += 1
        if value is None:
            self.none += 1
            return
        kind = _KINDS.get(type(value), "other")
        kinds = self.kinds
        kinds[kind] += 1
        if kind == "int":
            if kinds["int"] == 1:
                self.lo = self.hi = value
            elif value < self.lo:
                self.lo = value
            elif value > self.hi:
                self.hi = value
        elif kind == "list":
            if self.depth >= MAX_DEPTH:
                self._deep("list", 1)
                return
            items = self.items
            if items is None:
                items = self.items = Shape(self.depth + 1)
            items.add_items(value)
        elif kind == "dict":
            if self.depth >= MAX_DEPTH:
                self._deep("dict", 1)
                return
            self._add_dict(value)

    def _deep(self, kind: str, n: int) -> None:
        """``n`` values of ``kind`` (list or dict) counted at a place too deep to walk them: as "deep" ones."""
        self.kinds[kind] -= n
        if not self.kinds[kind]:
            del self.kinds[kind]
        self.kinds["deep"] += n

    def add_items(self, values: Any) -> None:
        """Record values in order, as :meth:`add` of each does (the items of one list, the args of a method's calls,
        a key's values in them): values of one scalar type (chunk data, coordinates) in a few C calls, dicts whose
        keys are all known a key at a time, lists' items all at once."""
        types = set(map(type, values))
        single = types.pop() if len(types) == 1 else None
        kind = _SCALARS.get(single)  # type: ignore[arg-type]
        if kind is None:
            if single is dict and self.depth < MAX_DEPTH:
                self._add_dicts(values)
            elif (single is list or single is tuple) and self.depth < MAX_DEPTH:
                self._add_lists(values)
            else:
                for item in values:
                    self.add(item)
            return
        n = len(values)
        self.count += n
        if kind == "int":
            lo, hi = min(values), max(values)
            self.lo, self.hi = (lo, hi) if not self.kinds["int"] else (min(self.lo, lo), max(self.hi, hi))
        self.kinds[kind] += n

    def _add_dicts(self, dicts: Sequence[dict]) -> None:
        """Dicts in order: runs of them whose keys are all known a key's values at a time (:meth:`_add_known`), each
        other one (a new key, a map) as :meth:`add` does."""
        start, n = 0, len(dicts)
        while start < n:
            end = start
            if self.fields is not None:
                known = self.fields.keys().__ge__
                while end < n and known(dicts[end].keys()):
                    end += 1
                if end > start:
                    self._add_known(dicts[start:end])
            if end < n:
                self.add(dicts[end])
            start = end + 1

    def _add_known(self, dicts: Sequence[dict]) -> None:
        """Dicts whose keys are all known fields: each key's shape sees its values in the order adding one dict at a
        time gives them (keys' shapes are apart, and no key or map comes of such dicts)."""
        fields = cast(Dict[str, Shape], self.fields)
        n = len(dicts)
        self.count += n
        self.kinds["dict"] += n
        self.key_kinds["name"] += sum(map(len, dicts))
        every = set(map(len, dicts)) == {len(fields)}  #: every dict holds every key
        for key, shape in fields.items():
            column = list(map(itemgetter(key), dicts)) if every else [d[key] for d in dicts if key in d]
            if column:
                shape.add_items(column)

    def _add_lists(self, lists: Sequence[Any]) -> None:
        """Lists in order: their items all at once, in order (what adding each list gives its items)."""
        n = len(lists)
        self.count += n
        self.kinds["list"] += n
        if self.items is None:
            self.items = Shape(self.depth + 1)
        self.items.add_items(list(chain.from_iterable(lists)))

    def _add_dict(self, d: dict) -> None:
        fields = self.fields
        if fields is not None and fields.keys() >= d.keys():  # keys already seen, so field names: the usual case
            self.key_kinds["name"] += len(d)
            for key, value in d.items():
                fields[key].add(value)
            return
        for key in d:
            kind = _key_kind(key)
            self.key_kinds[kind] += 1
            if kind == "int":
                self.key_lo, self.key_hi = min(self.key_lo, key), max(self.key_hi, key)
        if fields is not None:
            odd = [k for k, n in self.key_kinds.items() if k != "name" and n]
            if odd or len(fields.keys() | d.keys()) > MAX_FIELDS:
                self.become_map(NOT_NAMES if odd else f"more than {MAX_FIELDS} distinct keys")
        if self.fields is not None:
            for key, value in d.items():
                child_shape(self.fields, key, self.depth + 1).add(value)
        else:
            for value in d.values():
                self.values.add(value)  # type: ignore[union-attr]

    def become_map(self, reason: str) -> None:
        """Stop telling keys apart: their values pool into one shape, the map's values."""
        fields = self.fields or {}
        self.map_reason, self.map_at, self.values = reason, len(fields), Shape(self.depth + 1)
        for shape in fields.values():
            self.values.pool(shape)
        self.fields = None

    def pool(self, other: "Shape") -> None:
        """Add everything ``other`` saw, as a map's values pool the values of its keys (:meth:`become_map`). Not
        the same as adding ``other``'s values after this one's (that is :meth:`merge`): dict fields come in the
        order of the shapes pooled, and a dict position does not become a map for the keys of both."""
        self._merge_tallies(other)
        if other.items:
            self.items = self.items or Shape(self.depth + 1)
            self.items.pool(other.items)
        if other.fields is None and self.fields is not None:
            self.become_map(other.map_reason)
            self.map_at = max(self.map_at, other.map_at)  # into a new Shape, a copy of other
        if self.fields is not None:
            for key, shape in (other.fields or {}).items():
                child_shape(self.fields, key, self.depth + 1).pool(shape)
        elif other.fields is not None:
            for shape in other.fields.values():
                self.values.pool(shape)  # type: ignore[union-attr]
        else:
            self.values.pool(other.values)  # type: ignore[union-attr, arg-type]

    def merge(self, other: "Shape") -> None:
        """Make this the shape of its values followed by ``other``'s: what adding them in that order gives, when
        ``other`` was made by adding its values in order to a new Shape (or by merging such shapes). ``other``
        is used up (its parts become this one's). Raises InexactMerge, this shape then half merged, in the few
        cases where the two shapes cannot tell (:meth:`_merge_dicts`)."""
        self._merge_tallies(other)
        if other.items is not None:
            if self.items is None:
                self.items = other.items
            else:
                self.items.merge(other.items)
        if other.kinds["dict"]:
            self._merge_dicts(other)

    def has_dicts(self) -> bool:
        """Whether a dict was seen here or in list items below: without one, the order values came in changes
        nothing of the shape (it is counts and ranges only)."""
        return bool(self.kinds["dict"]) or (self.items is not None and self.items.has_dicts())

    def _merge_tallies(self, other: "Shape") -> None:
        """Add ``other``'s counts and ranges: the same whatever the order the values came in."""
        if other.kinds["int"]:
            self.lo, self.hi = ((other.lo, other.hi) if not self.kinds["int"]
                                else (min(self.lo, other.lo), max(self.hi, other.hi)))
        self.count += other.count
        self.none += other.none
        self.kinds.update(other.kinds)
        self.key_kinds.update(other.key_kinds)
        self.key_lo, self.key_hi = min(self.key_lo, other.key_lo), max(self.key_hi, other.key_hi)

    def _merge_dicts(self, other: "Shape") -> None:
        """The dicts' part of :meth:`merge`: fields in order of first appearance, and a map where adding in order
        makes one, with the same reason and the same values. Each shape kept each key's values apart, so where
        the values of several keys go into one map's values in the order of the calls (lost), the merge is exact
        only if none of those values holds a dict (then order changes nothing); else InexactMerge. That is when
        this is a map and ``other``'s dicts held two keys or more without being one, or its map pooled two keys
        or more (:attr:`map_at`); when neither was a map but their keys together are more than MAX_FIELDS; and
        when only ``other`` is a map but it told keys apart first (:meth:`_merge_into_map`)."""
        fields, theirs = self.fields, other.fields
        if fields is not None and not fields:  # no key seen here yet: the dict part is other's
            self.fields, self.values, self.map_reason, self.map_at = theirs, other.values, other.map_reason, \
                other.map_at
        elif fields is None:  # a map already: every value of other's dicts goes to its values, in call order
            shapes = list(theirs.values()) if theirs is not None else [other.values]
            pooled = theirs is None and other.map_at > 1
            if (len(shapes) > 1 or pooled) and any(s.has_dicts() for s in shapes):  # type: ignore[union-attr]
                raise InexactMerge("dicts in a map's values, their order among keys lost")
            for shape in shapes:
                self.values.merge(shape)  # type: ignore[union-attr, arg-type]
        elif theirs is not None:
            self._merge_fields(fields, theirs)
        else:
            self._merge_into_map(fields, other)

    def _merge_fields(self, fields: Dict[str, "Shape"], theirs: Dict[str, "Shape"]) -> None:
        """Neither a map: other's new keys after this one's, unless that makes more than MAX_FIELDS (adding in
        order makes a map on the first call with a key past the limit)."""
        new = [key for key in theirs if key not in fields]
        if new and len(fields) + len(new) > MAX_FIELDS:
            self._pooled([*fields.values(), *theirs.values()], f"more than {MAX_FIELDS} distinct keys",
                         len(fields) + len(new))
            return
        for key, shape in theirs.items():
            mine = fields.get(key)
            if mine is None:
                fields[key] = shape
            else:
                mine.merge(shape)

    def _merge_into_map(self, fields: Dict[str, "Shape"], other: "Shape") -> None:
        """Only ``other`` a map: adding in order makes this one a map on the same call as ``other`` did when
        ``other`` became one before telling any key apart (then its values came in call order), or for the same
        reason on that call or before when no value holds a dict. Otherwise InexactMerge."""
        if len(fields) > MAX_FIELDS:  # (pooled from other keys' dicts): the calls may never add a new key
            raise InexactMerge("a message of more than MAX_FIELDS fields, pooled")
        if other.map_at == 0:
            self.become_map(other.map_reason)
            self.values.merge(other.values)  # type: ignore[union-attr, arg-type]
            return
        if other.map_reason == NOT_NAMES and len(fields) + other.map_at > MAX_FIELDS:
            raise InexactMerge("the keys together may pass MAX_FIELDS before the first key not a name")
        self._pooled([*fields.values(), other.values], other.map_reason,  # type: ignore[list-item]
                     len(fields) + other.map_at)

    def _pooled(self, shapes: Iterable["Shape"], reason: str, keys: int) -> None:
        """Become a map whose values are ``shapes`` merged: exact only if none holds a dict (else InexactMerge)."""
        values = Shape(self.depth + 1)
        for shape in shapes:
            if shape.has_dicts():
                raise InexactMerge("dicts in the values of keys a map pools")
            values.merge(shape)
        self.fields, self.values, self.map_reason, self.map_at = None, values, reason, keys


def child_shape(fields: Dict[Any, Shape], key: Any, depth: int) -> Shape:
    """The shape of ``key`` in ``fields`` (a place ``depth`` lists and dicts deep), made on first sight."""
    shape = fields.get(key)
    if shape is None:
        shape = fields[key] = Shape(depth)
    return shape


def _key_kind(key: Any) -> str:
    """``name`` (can be a field name), ``str`` (any other str), ``int`` or ``other``."""
    if is_identifier(key):
        return "name"
    return "str" if type(key) is str else "int" if type(key) is int else "other"
