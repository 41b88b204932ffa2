"""rpcbench._exact (the exact check in C) against what it stands for: equal fast-mode pickles.

The size pass asks ``fidelity.identical(sent, back)`` of every batch. Built with a C compiler it is one walk of
both values in C; without one, the two pickles compared. Both must give the same answer on every value, above
all on the pairs ``==`` takes for equal (``1``, ``1.0`` and ``True``; bytes and bytearray; ``0.0`` and ``-0.0``;
a dict and its subclass; the same items in another order)."""

from __future__ import annotations

import collections
import shutil
import sysconfig
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpcbench import fidelity as F

from strategies import values

try:
    from rpcbench import _exact as exact
except ImportError:  # built without a C compiler: fidelity compares the pickles, and only the last test runs
    exact = None
needs_c = pytest.mark.skipif(exact is None, reason="rpcbench._exact not built (no C compiler)")


class Int(int):
    """An int subclass: equal to its int, pickled with its class's name."""


def pickles_equal(a: Any, b: Any) -> bool:
    try:
        return F.pickled(a) == F.pickled(b)
    except Exception:
        return False


def twin(value: Any, data: st.DataObject) -> Any:
    """A copy of ``value`` that ``==`` finds equal, with some of its parts changed in ways only their types (or a
    float's sign, or a dict's order) tell: what a decoder could give back."""
    change = data.draw(st.integers(0, 3)) == 0
    if type(value) is bool:
        return int(value) if change else value
    if type(value) is int:
        return data.draw(st.sampled_from([float(value), Int(value)])) if change and abs(value) < 1 << 53 else value
    if type(value) is float:
        return -value if change and value == 0 else value
    if type(value) is bytes:
        return bytearray(value) if change else value
    if type(value) is list:
        return [twin(v, data) for v in value]
    if type(value) is tuple:
        items = tuple(twin(v, data) for v in value)
        return list(items) if change else items
    if type(value) is dict:
        items = [(k, twin(v, data)) for k, v in value.items()]
        if change:
            return collections.OrderedDict(items) if data.draw(st.booleans()) else dict(reversed(items))
        return dict(items)
    return value


@needs_c
@settings(max_examples=600, deadline=None)
@given(values(), st.data())
def test_c_answers_as_the_pickles_do(value, data):
    back = twin(value, data)
    assert exact.same(value, back) in (None, pickles_equal(value, back))
    assert F.identical(value, back) is pickles_equal(value, back)


@needs_c
@settings(max_examples=300, deadline=None)
@given(values(), values())
def test_unrelated_values(a, b):
    found = exact.same(a, b)
    assert found is not None  # values of the trace format's own types: C alone decides
    assert found is pickles_equal(a, b)


@needs_c
@pytest.mark.parametrize("a, b, same", [
    (1, 1.0, False), (1, True, False), (0, False, False), (b"x", bytearray(b"x"), False), (0.0, -0.0, False),
    ((1, 2), [1, 2], False), ({"a": 1, "b": 2}, {"b": 2, "a": 1}, False), (float("nan"), float("nan"), True),
    (bytearray(b"ab"), bytearray(b"ab"), True), ([{"k": (None, "é", 2 ** 80)}], [{"k": (None, "é", 2 ** 80)}], True),
    ({"a": Int(1)}, {"a": 1}, False), ("\ud800", "\ud800", True),
])
def test_pairs_eq_cannot_tell(a, b, same):
    assert exact.same(a, b) is same is pickles_equal(a, b)


@needs_c
def test_other_types_are_left_to_the_pickles():
    assert exact.same({1, 2}, {1, 2}) is None  # a set: its pickle follows its iteration order
    assert exact.same([Int(1)], [Int(1)]) is None
    assert F.identical([{1, 2}], [{1, 2}]) is pickles_equal([{1, 2}], [{1, 2}])


@needs_c
def test_nested_beyond_the_recursion_limit_is_not_the_same():
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(RecursionError):
        exact.same(deep, deep)
    assert F.identical(deep, deep) is False  # as the pickles say: pickle cannot write it either


def test_built_wherever_a_compiler_is():
    """A checkout with a C compiler runs the C check (README's first command builds it)."""
    if not shutil.which(str(sysconfig.get_config_var("CC") or "cc").split()[0]):
        pytest.skip("no C compiler here")
    assert F.identical is F._identical_in_c
