"""Schema inference over runs of calls read apart: the shapes of the runs merged (``TraceShapes.merge``) give the
shapes, and so the .proto, that adding every call in order gives, or say they cannot (``InexactMerge``)."""

from __future__ import annotations

import random
from typing import Any, List, Sequence
from unittest import mock

from hypothesis import event, given, settings
from hypothesis import strategies as st

import pytest

from rpc_capture import Call
from rpcbench.protobuf import InexactMerge, TraceShapes
from rpcbench.protobuf import shape as shape_module
from rpcbench.protobuf.shape import MAX_FIELDS, NOT_NAMES, Shape


def shapes_of(calls: Sequence[Call]) -> TraceShapes:
    shapes = TraceShapes()
    for call in calls:
        shapes.add(call)
    return shapes


def state(s: Any) -> Any:
    """Everything of a shape the schema is written from (zero counts and the unused int range left out)."""
    if s is None:
        return None
    fields = None if s.fields is None else [(k, state(v)) for k, v in s.fields.items()]
    return (s.count, s.none, sorted((k, n) for k, n in s.kinds.items() if n), (s.lo, s.hi) if s.kinds["int"] else (),
            state(s.items), fields, state(s.values), sorted((k, n) for k, n in s.key_kinds.items() if n),
            s.key_lo, s.key_hi, s.map_reason)


def trace_state(shapes: TraceShapes) -> Any:
    return shapes.calls, [(m, state(s)) for m, s in shapes.by_method.items()]


def merged(calls: Sequence[Call], cuts: Sequence[int]) -> TraceShapes:
    """The shapes of the runs of calls between ``cuts``, each read apart, merged left to right."""
    bounds = [0, *cuts, len(calls)]
    first, *rest = [shapes_of(calls[a:b]) for a, b in zip(bounds, bounds[1:])]
    for shapes in rest:
        first.merge(shapes)
    return first


def assert_same_as_in_order(calls: Sequence[Call], cuts: Sequence[int]) -> bool:
    """The merged shapes and their schema equal the in-order ones; False (and nothing checked) when the merge
    said it cannot tell."""
    in_order = shapes_of(calls)
    try:
        split = merged(calls, cuts)
    except InexactMerge:
        return False
    assert trace_state(split) == trace_state(in_order)
    assert split.schema("t", "t") == in_order.schema("t", "t")
    return True


def values(names: List[str]) -> st.SearchStrategy:
    """Nested values; dicts keyed mostly by ``names`` (enough of them to pass the map limits), sometimes by keys
    that are no field names (str, int, bool)."""
    scalars = (st.none() | st.booleans() | st.integers(-(1 << 70), 1 << 70) | st.integers(-5, 5) | st.floats()
               | st.text(max_size=3) | st.binary(max_size=3))
    keys = st.sampled_from(names) | st.sampled_from(["x-y", "1a", "é", 7, -3, 1 << 40, True])
    name_keys = st.sampled_from(names)
    return st.recursive(scalars, lambda inner: (
        st.lists(inner, max_size=4) | st.lists(st.integers(-9, 9), max_size=4)
        | st.dictionaries(name_keys, inner, max_size=len(names) // 2)
        | st.dictionaries(keys, inner, max_size=4)), max_leaves=12)


@st.composite
def call_streams(draw: Any, limit: int) -> List[Call]:
    names = [f"k{i}" for i in range(limit + 4)]
    args = values(names) | st.dictionaries(st.sampled_from(names), values(names), max_size=limit // 2 + 2)
    methods = st.sampled_from(["move", "move", "chat", "player.hit", "2fa"])
    return draw(st.lists(st.builds(Call, methods, args | st.lists(values(names), max_size=3)), min_size=2,
                         max_size=40))


@pytest.mark.parametrize("limit", [3, 10])
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_merged_halves_give_the_in_order_schema(limit, data):
    """With the map limit lowered (MAX_FIELDS 3 or 10) so that random dicts pass it often: split at a random call,
    and at two, merged left to right."""
    with mock.patch.object(shape_module, "MAX_FIELDS", limit):
        calls = data.draw(call_streams(limit))
        cut = data.draw(st.integers(1, len(calls) - 1))
        event(f"two runs: {'exact' if assert_same_as_in_order(calls, [cut]) else 'inexact'}")
        cuts = sorted(data.draw(st.lists(st.integers(0, len(calls)), min_size=2, max_size=2)))
        event(f"three runs: {'exact' if assert_same_as_in_order(calls, cuts) else 'inexact'}")


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_merged_halves_give_the_in_order_schema_at_the_real_limit(data):
    calls = data.draw(call_streams(MAX_FIELDS))
    cut = data.draw(st.integers(1, len(calls) - 1))
    event(f"two runs: {'exact' if assert_same_as_in_order(calls, [cut]) else 'inexact'}")


def test_keys_of_two_halves_passing_the_limit_together_make_a_map_as_in_order():
    """Neither half has more than MAX_FIELDS keys, both together do: in order, the position becomes a map on the
    first call past the limit; pooling the halves (what a map does with its keys' values) would keep a message."""
    rng = random.Random(1)
    calls = [Call("m", {"pos": {f"k{i}": rng.randrange(100) for i in rng.sample(range(40), 20)}}) for _ in range(30)]
    calls += [Call("m", {"pos": {f"k{i}": rng.random() for i in rng.sample(range(30, 80), 20)}}) for _ in range(30)]
    assert assert_same_as_in_order(calls, [30])
    assert f"more than {MAX_FIELDS} distinct keys: map<>" in shapes_of(calls).schema("t", "t")[0]
    first, second = shapes_of(calls[:30]), shapes_of(calls[30:])
    first.by_method["m"].pool(second.by_method["m"])
    assert "map<" not in first.schema("t", "t")[0]


def test_a_map_in_one_half_only_takes_the_others_fields_as_in_order():
    """The first half's dicts hold names only, the second's a key that is no name from its first call: the merged
    position is a map for that reason, its values the first half's fields then the second's values."""
    calls = [Call("m", {"slots": {"a": {"hp": i}, "b": {"mp": i}}}) for i in range(5)]
    calls += [Call("m", {"slots": {"x-1": {"mp": i, "sp": 1}, "c": {"hp": 2, "xp": 3}}}) for i in range(5)]
    assert assert_same_as_in_order(calls, [5])
    assert f"dicts with {NOT_NAMES}: map<>" in shapes_of(calls).schema("t", "t")[0]


def test_where_the_order_of_keys_in_calls_decides_the_merge_says_it_cannot_tell():
    """A map in the first half; in the second, two name keys whose dict values have keys of their own. The second
    half's shape is the same whether ``a`` or ``b`` comes first in its calls, the in-order schemas are not (the
    map's value message numbers its fields in order of first appearance): the merge raises InexactMerge."""
    head = [Call("m", {"pos": {"not a name": {}}})]
    a_first = [Call("m", {"pos": {"a": {"x": 1}}}), Call("m", {"pos": {"b": {"y": 1}}}),
               Call("m", {"pos": {"a": {"z": 1}}})]
    b_first = [a_first[0], a_first[2], a_first[1]]
    assert trace_state(shapes_of(a_first)) == trace_state(shapes_of(b_first))
    assert shapes_of(head + a_first).schema("t", "t") != shapes_of(head + b_first).schema("t", "t")
    for second in (a_first, b_first):
        with pytest.raises(InexactMerge):
            merged(head + second, [1])


def test_shape_merge_into_a_new_shape_is_the_shape():
    """Merging into a new Shape copies (the parts a merge takes over must be the other's whole state)."""
    rng = random.Random(7)
    calls = [Call("m", {"a": [rng.randrange(9)] * 2, "b": {"c": None, "7": rng.random()}}) for _ in range(20)]
    fresh = TraceShapes()
    fresh.merge(shapes_of(calls))
    assert trace_state(fresh) == trace_state(shapes_of(calls))
    empty = Shape()
    empty.merge(Shape())
    assert state(empty) == state(Shape())


def test_a_map_pooled_from_one_key_keeps_what_its_maps_pooled():
    """In the second half, ``q`` becomes a map after two keys (its values pooled: ``x z`` from ``a``, then ``y``
    from ``b``, where the calls had ``x y z``), then ``p`` becomes a map after one key, its values a copy of that
    key's shape: the copy must still say that ``q`` pooled two keys, or the merge would trust its order."""
    first = [Call("m", {"p": {"g-h": {"q": {"i-j": {}}}}})]
    second = [Call("m", {"p": {"k": {"q": q}}}) for q in ({"a": {"x": 1}}, {"b": {"y": 1}}, {"a": {"z": 1}},
                                                          {"c-d": {}})]
    second.append(Call("m", {"p": {"e-f": {}}}))
    with pytest.raises(InexactMerge):
        merged(first + second, [1])


@pytest.mark.parametrize("limit", [3, 10])
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_calls_added_in_batches_give_the_shapes_of_adding_each(limit, data):
    """``TraceShapes.add_all`` (a method's args at once, a key's values at a time) against ``add`` of each call,
    the calls cut into batches at random."""
    with mock.patch.object(shape_module, "MAX_FIELDS", limit):
        calls = data.draw(call_streams(limit))
        cuts = sorted(data.draw(st.lists(st.integers(0, len(calls)), max_size=3)))
        batched = TraceShapes()
        for a, b in zip([0, *cuts], [*cuts, len(calls)]):
            batched.add_all(calls[a:b])
        in_order = shapes_of(calls)
        assert trace_state(batched) == trace_state(in_order)
        assert batched.schema("t", "t") == in_order.schema("t", "t")
