"""The study profile (the default sample): positional args of small ints, short strings and 0.1-quantized
floats, broadcast to the room, so that BSON comes out larger than JSON as in the 2015 study."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, List

import bson
import pytest

from rpc_capture import C2S, S2C, Call, open_trace
from rpcbench.config import DEFAULT_TRACE
from rpcbench.simulate import DEFAULT_PROFILE, PROFILES, simulate_study
from rpcbench.simulate.profiles import STUDY

REPO = Path(__file__).resolve().parent.parent
CLIENT = {"req_move", "req_attack", "req_skill", "req_chat", "ping"}
SERVER = {"hit", "attack", "obj_move", "obj_stop", "cast", "buff", "die", "respawn", "spawn", "score", "state_sync",
          "pong", "chat_msg"}


@pytest.fixture(scope="module")
def calls_20k() -> List[Call]:
    return list(simulate_study(20000, 1))


def scalars(value: Any) -> Iterator[Any]:
    """Every scalar in nested lists."""
    if isinstance(value, list):
        for item in value:
            yield from scalars(item)
    else:
        yield value


def test_same_seed_same_calls_exactly_n_and_lazily(calls_20k: List[Call]) -> None:
    assert list(simulate_study(3000, 1)) == calls_20k[:3000]
    assert list(simulate_study(3000, 2)) != calls_20k[:3000]
    assert [sum(1 for _ in simulate_study(n, 5)) for n in (0, 1, 7, 1234)] == [0, 1, 7, 1234]
    assert sum(1 for _, _ in zip(simulate_study(5_000_000, 1), range(10))) == 10


def test_positional_args_of_small_ints_short_strings_and_quantized_floats(calls_20k: List[Call]) -> None:
    assert all(type(c.args) is list for c in calls_20k)
    values = [v for c in calls_20k for v in scalars(c.args)]
    assert {type(v) for v in values} == {int, float, str}
    assert all(len(v) <= 12 for v in values if isinstance(v, str))
    assert all(v == round(v, 1) and len(repr(v)) <= 5 for v in values if isinstance(v, float))
    ints = [v for v in values if isinstance(v, int)]
    assert sum(0 <= v < 10_000 for v in ints) > 0.8 * len(ints)


def test_a_real_time_battle_mix_broadcast_to_the_room(calls_20k: List[Call]) -> None:
    assert {c.method for c in calls_20k if c.dir == C2S} == CLIENT
    assert {c.method for c in calls_20k if c.dir == S2C} == SERVER
    assert len({c.conn for c in calls_20k}) == 10
    for method in ("hit", "state_sync"):  # every event goes to all ten connections, in a burst
        first = next(c for c in calls_20k if c.method == method)
        burst = [c for c in calls_20k if c.method == method and c.args == first.args]
        assert len({c.conn for c in burst}) == 10
    ms = [c.args[-1] for c in calls_20k if c.method == "attack"]
    assert all(t % 100 == 0 for t in ms) and ms == sorted(ms)  # stamped at the 10 Hz tick
    times = [c.t for c in calls_20k]
    assert times == sorted(times)


def test_bson_is_about_60_percent_larger_than_json_as_in_the_study(calls_20k: List[Call]) -> None:
    """The study: BSON 316 B per call against JSON's 195 (1.62x); the dict profile has BSON smaller."""
    from rpcbench.simulate import json_size
    json_bytes = sum(map(json_size, calls_20k))
    bson_bytes = sum(len(bson.encode({"method": c.method, "args": c.args})) for c in calls_20k)
    assert 1.5 <= bson_bytes / json_bytes <= 1.75


def test_bundled_sample_is_what_simulate_makes_now(calls_20k: List[Call]) -> None:
    reader = open_trace(DEFAULT_TRACE)
    assert (reader.metadata["profile"], reader.metadata["build"]) == ("study", PROFILES["study"].version)
    assert list(reader) == calls_20k, "regenerate: python run_bench.py simulate --calls 20000 --seed 1 " \
                                      "--out samples/battle.rpct --gzip"


def test_cli_default_profile_is_study(tmp_path: Path) -> None:
    out = tmp_path / "s.rpct"
    done = subprocess.run([sys.executable, "run_bench.py", "simulate", "--calls", "300", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert list(open_trace(out)) == list(simulate_study(300, 1))


def test_calls_follow_the_profile_data(calls_20k: List[Call]) -> None:
    """profiles.STUDY names every method the study battle sends, its direction and its positional args."""
    assert {(c.dir, c.method) for c in calls_20k} == set(STUDY.methods)
    assert {m.name for m in STUDY.methods.values() if m.dir == C2S} == CLIENT
    assert {m.name for m in STUDY.methods.values() if m.dir == S2C} == SERVER
    assert STUDY.positional and DEFAULT_PROFILE == "study" and Path(DEFAULT_TRACE).resolve() == REPO / STUDY.sample
    for call in calls_20k:
        assert len(call.args) == len(STUDY.methods[call.dir, call.method].args), call
