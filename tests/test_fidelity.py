"""compare(): what counts as the same call, and how differences are named."""

from __future__ import annotations

import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpc_capture import Call
from rpcbench import fidelity as F

from strategies import values


def diff(a, b, declared=(), differs=False):
    return F.compare(Call("m", a), Call("m", b), declared, differs)


@pytest.mark.parametrize("a, b, feature, path, detail", [
    ({"b": b"\x01"}, {"b": "AQ=="}, F.BYTES, "args.b", "bytes -> str"),
    ({"t": (1, 2)}, {"t": [1, 2]}, F.TUPLES, "args.t", "tuple -> list"),
    ({7: "x"}, {"7": "x"}, F.INT_KEYS, "args.7", "int key -> str key"),
    ({"x": 1.1}, {"x": 1.100000023841858}, F.FLOAT32, "args.x", "1.1 -> 1.100000023841858"),
    ({"n": 3}, {"n": 3.0}, F.INT_AS_FLOAT, "args.n", "3 -> 3.0"),
    ({"v": None}, {"v": 0}, F.NULLS, "args.v", "None -> 0"),
    ({"v": None}, {}, F.NULLS, "args.v", "None -> key missing"),
    ({"u": 1 << 63}, {"u": -(1 << 63)}, F.UINT64, "args.u", f"{1 << 63} -> {-(1 << 63)}"),
    ({"f": float("inf")}, {"f": None}, F.NON_FINITE, "args.f", "inf -> None"),
    ({"a": [1, 2]}, {"a": [1]}, F.OTHER, "args.a", "2 items -> 1"),
    ({"a": 1}, {"a": 1, "z": 2}, F.OTHER, "args.z", "unexpected key (2)"),
    ({"a": True}, {"a": 1}, F.BOOL_NUMBER, "args.a", "True -> 1"),  # a typed int field took the bool
    ({"a": 2}, {"a": True}, F.BOOL_NUMBER, "args.a", "2 -> True"),
    ({"a": False}, {"a": 0.0}, F.BOOL_NUMBER, "args.a", "False -> 0.0"),
    ({"a": True}, {"a": "B"}, F.ENUM_FORM, "args.a", "True -> 'B'"),  # a bool taken as an enum number
    ({"a": True}, {"a": [1]}, F.OTHER, "args.a", "bool True -> list [1]"),
    ({"a": 0.0}, {"a": -0.0}, F.OTHER, "args.a", "0.0 -> -0.0 (sign of zero)"),
    ([{"deep": ["x", "y"]}], [{"deep": ["x", "z"]}], F.OTHER, "args[0].deep[1]", "'y' -> 'z'"),
    # equal under ==, told apart by the fast path's pickles (or the walk): types the C fast path must not merge
    ({"b": b"ab"}, {"b": bytearray(b"ab")}, F.BYTES, "args.b", "bytes -> bytearray"),
    ([1, 2.0], [1.0, 2.0], F.INT_AS_FLOAT, "args[0]", "1 -> 1.0"),
    ([[0, False]], [[0, 0]], F.BOOL_NUMBER, "args[0][1]", "False -> 0"),
])
@pytest.mark.parametrize("differs", [False, True])  # True: the walk alone, as a batch's outcomes ask
def test_differences_are_named(a, b, feature, path, detail, differs):
    assert diff(a, b, differs=differs) == F.Difference(feature, path, detail)


@pytest.mark.parametrize("a, b", [
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}),  # key order is not a difference
    ([float("nan")], [float("nan")]),
    ({"big": 10**20}, {"big": 10**20}),
    ({"s": "x", "t": "x"}, {"s": "x", "t": "".join(["x"])}),  # shared or not (the pickle memo) is no difference
    ([float("nan")], [float("-nan")]),  # NaN payloads differ in bits only
])
@pytest.mark.parametrize("differs", [False, True])
def test_same(a, b, differs):
    assert diff(a, b, differs=differs) is None


def _json_copy(value):
    """``value`` as JSON gives it back: tuples as lists, int keys as str, bytes as hex str, 1.0 still a float."""
    return json.loads(json.dumps(value, default=bytes.hex))


@settings(max_examples=300, deadline=None)
@given(values(), values(), st.sampled_from(["copy", "json", "other"]),
       st.sets(st.sampled_from([F.BYTES, F.TUPLES, F.INT_KEYS, F.INT_AS_FLOAT, F.OTHER])))
def test_the_walk_alone_finds_what_the_pickle_check_and_walk_find(a, other, how, declared):
    """A batch's outcomes skip compare's pickle check (differs=True): the walk alone must give the same answer,
    on the same value (fresh objects), on what JSON gives back, and on any other value."""
    b = {"copy": lambda: pickle.loads(pickle.dumps(a)), "json": lambda: _json_copy(a), "other": lambda: other}[how]()
    assert diff(a, b, declared, differs=True) == diff(a, b, declared)


def test_int_subclass_is_an_int():
    class Int64(int):
        pass

    assert diff({"t": 1732250000000}, {"t": Int64(1732250000000)}) is None


def test_a_declared_change_does_not_hide_an_undeclared_one():
    a = {"raw": b"\x00", "hp": 10}
    b = {"raw": "AA==", "hp": 11}
    assert diff(a, b, {F.BYTES}) == F.Difference(F.OTHER, "args.hp", "10 -> 11")
    assert diff(a, dict(b, hp=10), {F.BYTES}).feature == F.BYTES


def test_method_and_type_of_result():
    assert F.compare(Call("a", 1), Call("b", 1)).feature == F.METHOD
    assert F.compare(Call("a", 1), {"method": "a"}).detail == "decode returned dict, not Call"


def test_features_of_input():
    value = {"b": b"", 5: (1 << 64, "\udc80"), "x\x00": float("nan")}
    assert F.features_of(value) == {F.BYTES, F.INT_KEYS, F.TUPLES, F.BIG_INTS, F.SURROGATES, F.NUL_KEYS, F.NON_FINITE}
    assert F.features_of({"plain": [1, 2.5, "s", None, True]}) == set()


def test_defaults_and_rounded_big_ints_are_named():
    assert diff({"a": 1}, {"a": 1, "hp": 0}) == F.Difference(F.DEFAULTS, "args.hp", "unexpected key (0)")
    assert diff({"a": 1}, {"a": 1, "hp": 7}).feature == F.OTHER
    big = (1 << 60) + 1
    assert diff({"n": big}, {"n": float(big)}) == F.Difference(
        F.INT_AS_FLOAT, "args.n", f"{big} -> {float(big)!r} (beyond 2**53, rounded)")
