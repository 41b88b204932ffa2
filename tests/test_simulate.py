"""The battle simulator's dict profile: deterministic, exactly N calls, the promised traffic mix, its bundled
sample (samples/battle_dict.rpct), the CLI. The study profile (the default) is in test_simulate_study.py."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from itertools import islice
from pathlib import Path

import pytest

from rpc_capture import C2S, S2C, Call, open_trace, write_jsonl
from rpcbench.simulate import PROFILES, simulate, simulate_profile
from rpcbench.simulate.profiles import DICT

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / DICT.sample
METHODS = {
    "move", "input_frame", "cast_skill", "pick_item", "chat", "heartbeat",  # client to server
    "sync_position", "damage", "hp_update", "buff_add", "buff_remove", "state_snapshot",
    "skill_result", "item_spawn", "heartbeat_ack", "battle_event",  # server to client (and chat)
}


@pytest.fixture(scope="module")
def calls_20k() -> list:
    return list(simulate(20000, 1))


def compact_json_bytes(call: Call) -> int:
    """Written independently of rpcbench.simulate.json_size, on purpose."""
    def b64(value: object) -> str:
        assert isinstance(value, bytes), f"unexpected {type(value).__name__} in args"
        return base64.b64encode(value).decode("ascii")

    doc = {"method": call.method, "args": call.args}
    return len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False, default=b64).encode("utf-8"))


def walk(value: object):
    """Every value nested in ``value``, itself included."""
    yield value
    if isinstance(value, dict):
        for item in value.values():
            yield from walk(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from walk(item)


def test_same_seed_same_calls_other_seed_other_calls(calls_20k: list) -> None:
    assert list(simulate(3000, 1)) == calls_20k[:3000]
    assert list(simulate(3000, 2)) != calls_20k[:3000]


def test_exactly_n_calls() -> None:
    for n in (0, 1, 7, 1234):
        assert sum(1 for _ in simulate(n, 5)) == n


def test_streams_lazily() -> None:
    """Asking for five million calls and taking ten must not build five million."""
    assert len(list(islice(simulate(5_000_000, 1), 10))) == 10


def test_every_method_in_5000_calls(calls_20k: list) -> None:
    assert {c.method for c in calls_20k[:5000]} == METHODS


def test_mean_compact_json_size_like_the_study(calls_20k: list) -> None:
    mean = sum(map(compact_json_bytes, calls_20k)) / len(calls_20k)
    assert 150 <= mean <= 250
    snapshot = max(compact_json_bytes(c) for c in calls_20k if c.method == "state_snapshot")
    assert 1000 <= snapshot <= 4096


def test_call_shapes(calls_20k: list) -> None:
    assert {c.dir for c in calls_20k} == {C2S, S2C}
    assert all(type(c.conn) is int and type(c.t) is int and type(c.args) is dict for c in calls_20k)
    times = [c.t for c in calls_20k]
    assert times == sorted(times)
    assert len({c.conn for c in calls_20k}) == 10
    assert all(len(str(c.args["ts"])) == 13 for c in calls_20k if c.method == "heartbeat")


def test_values_are_rich(calls_20k: list) -> None:
    chat = [c.args["text"] for c in calls_20k if c.method == "chat"]
    assert any(not text.isascii() for text in chat)
    values = [v for c in calls_20k[:2000] for v in walk(c.args)]
    kinds = {type(v) for v in values}
    assert {bytes, float, int, str, bool, list, dict, type(None)} <= kinds
    assert any(isinstance(v, float) and len(repr(v)) > 12 for v in values)  # unrounded movement math


def test_bundled_sample_is_what_simulate_makes_now(calls_20k: list) -> None:
    reader = open_trace(SAMPLE)
    assert reader.metadata["seed"] == 1 and reader.metadata["calls"] == 20000
    assert reader.metadata["profile"] == "dict"
    assert list(reader) == calls_20k, "regenerate: python run_bench.py simulate --profile dict --calls 20000 " \
                                      "--seed 1 --out samples/battle_dict.rpct --gzip"


def test_cli_writes_a_trace(tmp_path: Path) -> None:
    out = tmp_path / "battle.rpct"
    cmd = [sys.executable, "run_bench.py", "simulate", "--profile", "dict", "--calls", "500", "--seed", "3", "--out",
           str(out), "--gzip"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "500 calls" in done.stdout and len(done.stdout.strip().splitlines()) == 1
    reader = open_trace(out)
    assert list(reader) == list(simulate(500, 3))
    assert reader.metadata["generator"] == "rpcbench.simulate" and reader.metadata["seed"] == 3
    assert reader.metadata["capture_start"].startswith("20")
    first = out.read_bytes()
    assert subprocess.run(cmd, cwd=REPO, capture_output=True).returncode == 0
    assert out.read_bytes() == first


def test_cli_jsonl_and_bad_arguments(tmp_path: Path) -> None:
    out = tmp_path / "battle.jsonl"
    run = [sys.executable, "run_bench.py", "simulate"]
    assert subprocess.run(run + ["--profile", "dict", "--calls", "50", "--out", str(out)], cwd=REPO,
                          capture_output=True).returncode == 0
    assert list(open_trace(out)) == list(simulate(50, 1))
    for bad in (["--calls", "-1"], ["--calls", "many"], ["--out", str(out), "--gzip"], ["--profile", "nope"]):
        done = subprocess.run(run + bad, cwd=REPO, capture_output=True, text=True)
        assert done.returncode != 0 and "error:" in done.stderr.strip().splitlines()[-1]


def test_calls_follow_the_profile_data(calls_20k: list) -> None:
    """profiles.DICT names every method the dict battle sends, its direction and its args' keys."""
    assert {(c.dir, c.method) for c in calls_20k} == set(DICT.methods)
    assert {name for _, name in DICT.methods} == METHODS
    assert not DICT.positional
    for call in calls_20k:
        assert tuple(call.args) == DICT.methods[call.dir, call.method].args, call


#: sha256 of ``write_jsonl(simulate_profile(profile, 500, 9))``, recorded before the simulator became a package:
#: the bytes of both profiles' traffic must not change unless a profile's version is bumped on purpose
JSONL_500_SEED_9 = {
    ("study", "study-battle-sim 1"): "1d6bccddcd058d989f477184a9494a802e6623426dd951a83f2811058d2c3e5d",
    ("dict", "battle-sim 1"): "6c8fade642b4e43d71b0829ec3ba3510066498a750c2368ea1b34a627ce46db0",
}


@pytest.mark.parametrize("profile, version", sorted(JSONL_500_SEED_9))
def test_fixed_seed_gives_the_recorded_bytes(profile: str, version: str, tmp_path: Path) -> None:
    assert PROFILES[profile].version == version, "a new version: record the new hash here and regenerate the samples"
    out = tmp_path / "t.jsonl"
    write_jsonl(simulate_profile(profile, 500, 9), out)
    assert hashlib.sha256(out.read_bytes()).hexdigest() == JSONL_500_SEED_9[profile, version]
