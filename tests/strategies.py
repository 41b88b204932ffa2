"""Hypothesis strategies for RPC calls, optionally without the features a codec declares it changes."""

from __future__ import annotations

from typing import Any, Container

from hypothesis import strategies as st

from rpc_capture import C2S, S2C, Call
from rpcbench import fidelity as F
from rpcbench.codec import received_call

INT64 = st.integers(-(1 << 63), (1 << 63) - 1)


def values(without: Container[str] = ()) -> st.SearchStrategy:
    """Any value the trace format records, minus the given fidelity features."""
    ints = INT64
    if F.UINT64 not in without:
        ints = ints | st.integers(1 << 63, (1 << 64) - 1)
    if F.BIG_INTS not in without:
        ints = ints | st.integers(min_value=1 << 64) | st.integers(max_value=-(1 << 63) - 1)
    text = st.text(st.characters(codec="utf-8")) if F.SURROGATES in without else st.text()
    scalars = st.none() | st.booleans() | ints | st.floats(allow_nan=F.NON_FINITE not in without,
                                                            allow_infinity=F.NON_FINITE not in without) | text
    if F.BYTES not in without:
        scalars = scalars | st.binary(max_size=64)
    keys = text.filter(lambda k: "\x00" not in k) if F.NUL_KEYS in without else text
    keys = keys if F.INT_KEYS in without else keys | INT64

    def containers(children: st.SearchStrategy) -> st.SearchStrategy:
        out = st.lists(children, max_size=6) | st.dictionaries(keys, children, max_size=6)
        return out if F.TUPLES in without else out | st.tuples(children, children)

    return st.recursive(scalars, containers, max_leaves=20)


def calls(without: Container[str] = (), wires: bool = False) -> st.SearchStrategy:
    """Whole calls: method, args, timestamp, direction, connection; with ``wires``, some with captured bytes."""
    return st.builds(
        Call,
        method=st.text(min_size=1, max_size=30, alphabet=st.characters(codec="utf-8")),
        args=values(without),
        t=st.integers(0, (1 << 63) - 1),
        dir=st.sampled_from([C2S, S2C]),
        conn=INT64 | st.text(max_size=10, alphabet=st.characters(codec="utf-8")),
        wire=st.none() | st.binary(max_size=40) if wires else st.none(),
    )


#: one call argument per fidelity feature, for checking that a codec's declared changes really happen
FEATURE_EXAMPLES = {
    F.BYTES: {"b": b"\x00\xff"}, F.TUPLES: {"t": (1, 2)}, F.INT_KEYS: {5: "x"}, F.UINT64: {"u": 1 << 63},
    F.BIG_INTS: {"n": 1 << 70}, F.SURROGATES: {"s": "\udc80"}, F.NUL_KEYS: {"a\x00b": 1},
    F.NON_FINITE: {"f": float("inf")},
}


def assert_declared_changes_happen(codec: Any) -> None:
    """Each feature the codec declares shows up as a failure or a difference of that feature: no false claims."""
    for feature in codec.changes:
        call = Call("m", FEATURE_EXAMPLES[feature])
        try:
            back = received_call(codec.decode(codec.encode(call)))
        except Exception:
            continue  # declared as failing
        assert F.compare(call, back, codec.changes).feature == feature
