"""The host-state split used by bench/agreement.py and bench/repeatability.py (synthetic timings, nothing timed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import _common  # noqa: E402
import agreement  # noqa: E402
import repeatability  # noqa: E402
from rpcbench.results import CodecResult, Suite, Timing  # noqa: E402

FAST, SLOW = 1000.0, 1700.0


def test_host_states_split_at_one_threshold_above_the_floor():
    fast, slow = _common.host_states([1000, 1240, 1260, 1700, 1010], floor=1000)
    assert fast == [1000, 1240, 1010] and slow == [1260, 1700]
    # the floor is shared: values that are all slow against another tool's fastest stay slow
    assert _common.host_states([1700, 1800], floor=1000) == ([], [1700, 1800])


def test_agreement_compares_the_state_both_tools_sampled_most():
    harness = [FAST] * 30 + [SLOW] * 10  # mostly fast
    pyperf = [FAST * 1.01] * 20 + [SLOW * 1.3] * 40  # mostly slow, and its slow state slower still
    mine, ref, label = agreement.compare_in_state(harness, pyperf)
    assert label == "F20" and mine == FAST and ref == FAST * 1.01
    # plain medians would land in different states (1000 vs 2210); the matched ones agree within 1 %
    assert abs(mine / ref - 1) < 0.02


def test_agreement_falls_back_to_plain_medians_without_a_shared_state():
    mine, ref, label = agreement.compare_in_state([FAST] * 9 + [SLOW], [SLOW] * 3 + [FAST])
    assert label == "-" and mine == FAST and ref == SLOW


def _suite(rounds: dict) -> Suite:
    results = tuple(CodecResult(codec=cid, config={}, library=None, library_version=None, origin="", calls=1,
                                failures=0, mismatches=0, sizes=None, encode=Timing(tuple(r), 1000, 1), decode=None,
                                problems=(), by_method={}) for cid, r in rounds.items())
    return Suite(schema_version=1, created="", command=[], environment={}, settings={}, trace={}, results=results)


@pytest.mark.parametrize("fast_rounds", [8, 30])
def test_repeatability_state_matched_ratio_ignores_the_share_of_each_state(fast_rounds):
    """msgpack/json is 0.14 in the fast state and 0.17 in the slow one: only the share differs between runs."""
    def run(n_fast: int) -> Suite:
        json_rounds = [FAST] * n_fast + [SLOW] * (40 - n_fast)
        msgpack = [FAST * 0.14] * n_fast + [SLOW * 0.17] * (40 - n_fast)
        return _suite({"json": json_rounds, "msgpack": msgpack})

    suites = [run(fast_rounds), run(40 - fast_rounds)]
    plain = [s.result("msgpack").encode.ratio_to(s.result("json").encode) for s in suites]
    assert max(plain) / min(plain) > 1.15  # the median flips state with the share
    text = repeatability.state_matched("msgpack", suites, "encode")
    assert text.startswith("1.000 ")


def test_repeatability_state_matched_needs_five_pairs_in_every_run():
    suites = [_suite({"json": [FAST] * 3 + [SLOW], "msgpack": [140.0] * 3 + [290.0]}) for _ in range(2)]
    assert repeatability.state_matched("msgpack", suites, "encode") == "-"
    assert repeatability.state_matched("json", suites, "encode") == "-"
