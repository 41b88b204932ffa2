"""Timing lanes (``--timing-lanes``): codecs timed at once, each worker pinned to a CPU of its own.

The schedule (``lane_turns``, ``LaneSchedule``) is checked on its own, with turns of random lengths; the worker
processes on the bundled sample's calls, where each child reports the CPU every timed round ran on (read from
``/proc/self/stat`` inside the child, so an unpinned child does not pass by luck); the option end to end.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import random
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from rpc_capture import TraceWriter, open_trace
from rpcbench.budget import TimingPlan
from rpcbench.config import DEFAULT_TRACE, RunConfig
from rpcbench.timing import LaneSchedule, lane_turns, round_robin
from rpcbench.timing_stage import time_sample
from rpcbench.worker import BUSY_LIMIT, busy_cpus, cpu_seconds_of, lane_cpus, usable_cpus

REPO = Path(__file__).resolve().parent.parent
TWO_CPUS = pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or usable_cpus() < 2 or
                              not Path("/proc/self/stat").exists(), reason="needs 2 CPUs to pin to (Linux)")
FAILING = '''
from rpcbench.codec import Codec

class Boom(Codec):
    """A repr codec whose encode raises from its process's call AFTER on: past the warm-up, within the rounds."""
    id = "boom"
    AFTER = {after}
    def __init__(self):
        self.count = 0
    def encode(self, call):
        self.count += 1
        if self.count > self.AFTER:
            raise RuntimeError("boom in round")
        return repr((call.method, call.args)).encode()
    def decode(self, data):
        import ast
        return ast.literal_eval(data.decode())
'''


@pytest.mark.parametrize("players", [1, 2, 3, 12, 13])
def test_every_player_plays_once_a_round_and_as_often_on_each_lane(players):
    names = [f"codec{i}" for i in range(players)]
    per_lane: Counter = Counter()
    for r in range(40):
        turns = lane_turns(names, r, 2)
        assert sorted(itertools.chain(*turns)) == sorted(names)
        per_lane.update((name, lane) for lane, lane_names in enumerate(turns) for name in lane_names)
    assert set(per_lane.values()) == {20} and len(per_lane) == 2 * players


@pytest.mark.parametrize("players", [4, 12, 13])
def test_two_lanes_pair_every_player_with_every_other(players):
    """The k-th turns of the two lanes start together: within ``players`` cycles every pair has been side by side."""
    names = list(range(players))
    met = {frozenset(pair) for r in range(0, 2 * players, 2) for pair in zip(*lane_turns(names, r, 2))}
    assert met == {frozenset(pair) for pair in itertools.combinations(names, 2)}


def test_one_lane_is_the_rotation_of_before():
    names = ["json", "msgpack", "bson", "orjson", "ujson"]
    for r in range(12):
        start = r % len(names)
        assert lane_turns(names, r) == [names[start:] + names[:start]]
    order: List[Tuple[str, int]] = []
    round_robin(names, 12, lambda name, r, position: order.append((name, r)) is None)
    assert order == [(name, r) for r in range(12) for name in lane_turns(names, r)[0]]


def _simulate(schedule: LaneSchedule, out_after: Dict[str, int], seed: int) -> Tuple[Dict, Counter, List]:
    """Drive ``schedule`` with turns of random lengths; returns each player's rounds in the order played, the
    (player, lane) counts, and every turn as (start, end, player)."""
    rng = random.Random(seed)
    cost = {p: rng.uniform(20, 90) for p in schedule.live}
    running: Dict[int, Tuple[float, str, int, float]] = {}
    rounds, lanes, turns, now = defaultdict(list), Counter(), [], 0.0
    while True:
        for lane in range(schedule.lanes):
            turn = None if lane in running else schedule.next_turn(lane)
            if turn:
                running[lane] = (now + cost[turn[0]] * rng.uniform(0.8, 1.2), turn[0], turn[1], now)
        if not running:
            return rounds, lanes, turns
        lane = min(running, key=lambda k: running[k][0])
        now, player, r, start = running.pop(lane)
        rounds[player].append(r)
        lanes[player, lane] += 1
        turns.append((start, now, player))
        schedule.played(player, len(rounds[player]) != out_after.get(player))


@pytest.mark.parametrize("players, seed", [(13, 1), (12, 2), (5, 3)])
def test_lanes_flow_round_after_round_without_overlapping_a_player(players, seed):
    names = [f"codec{i}" for i in range(players)]
    rounds, lanes, turns = _simulate(LaneSchedule(names, 40, 2), {}, seed)
    assert all(rounds[name] == list(range(40)) for name in names)  # every round, in order
    assert set(lanes.values()) == {20}  # half on each CPU
    for name in names:  # never two turns of one player at once
        mine = sorted((start, end) for start, end, player in turns if player == name)
        assert all(end <= next_start for (_, end), (next_start, _) in zip(mine, mine[1:]))


def test_a_player_out_leaves_the_others_every_round():
    names = [f"codec{i}" for i in range(7)]
    rounds, _, _ = _simulate(LaneSchedule(names, 30, 2), {"codec3": 11}, 4)
    assert rounds["codec3"] == list(range(11))
    assert all(rounds[name] == list(range(30)) for name in names if name != "codec3")


def _time(tmp_path: Path, codecs: Tuple[str, ...], lanes: int, processes: int = 2, repeat: int = 6,
          plugin_after: int = 0, tails: bool = False) -> Tuple[Dict, List[str]]:
    """The bundled sample's first 300 calls timed in worker processes; the answers and the progress lines."""
    files: Tuple[str, ...] = ()
    if plugin_after:
        (tmp_path / "boom.py").write_text(FAILING.format(after=plugin_after))
        files = (str(tmp_path / "boom.py"),)
    config = RunConfig(codecs=codecs, codec_files=files, tails=tails, memory=tails, codec_timeout=30)
    registry = config.registry()
    sample = list(itertools.islice(open_trace(str(DEFAULT_TRACE)), 300))
    plan = TimingPlan(len(sample), 0.001, repeat, processes, 1, lanes)
    lines: List[str] = []
    answers, interrupted = time_sample(config, plan, [registry.create(c) for c in codecs], sample,
                                       lambda phase, detail="", done=0, total=0: lines.append(f"{phase}: {detail}"))
    assert not interrupted
    return answers, lines


@TWO_CPUS
def test_two_lanes_time_every_codec_half_its_rounds_on_each_cpu(tmp_path):
    codecs = ("json", "msgpack", "bson", "json+zlib-1", "orjson")
    answers, lines = _time(tmp_path, codecs, 2)
    cpus = lane_cpus(2)
    for codec in codecs:
        answer = answers[codec]
        assert not answer.get("error")
        assert len(answer["rounds"]["encode"]) == len(answer["rounds"]["decode"]) == 12  # repeat x process sets
        assert len(answer["cpus"]) == 12
        for process_set in (answer["cpus"][:6], answer["cpus"][6:]):  # in each set, 3 rounds on each CPU
            assert Counter(process_set) == {cpus[0]: 3, cpus[1]: 3}, (codec, answer["cpus"])
    rounds = [line for line in lines if line.startswith("timing: rounds: ")]
    assert Counter(line.split(": ")[-1] for line in rounds) == {codec: 12 for codec in codecs}


@TWO_CPUS
def test_two_lanes_take_every_codecs_tails_and_allocations_once(tmp_path):
    """After the rounds, each codec's tails and allocations (first process set only) are taken in the lanes, two
    codecs at once: every codec gets them once, the second process set none, and its rounds stay whole."""
    codecs = ("json", "msgpack", "bson")
    answers, lines = _time(tmp_path, codecs, 2, tails=True)
    for codec in codecs:
        assert set(answers[codec]["latency"]) == set(answers[codec]["memory"]) == {"encode", "decode"}, codec
        assert len(answers[codec]["rounds"]["encode"]) == 12
    assert Counter(line.split(": ")[-1] for line in lines if line.startswith("tails and allocations: ")) == \
        {codec: 1 for codec in codecs}
    assert Counter(line.split(": ")[-1] for line in lines if line.startswith("timing: results: ")) == \
        {codec: 1 for codec in codecs}


@TWO_CPUS
def test_a_codec_failing_in_a_round_is_reported_while_the_others_carry_on(tmp_path):
    # the warm-up encodes the 300 calls twice (the job's inputs, one untimed round) and calibration sets loops so a
    # round lasts 1 ms: the 1,500th call is within the first timed rounds
    answers, _ = _time(tmp_path, ("json", "boom", "msgpack", "orjson"), 2, processes=1, repeat=20, plugin_after=1500)
    assert answers["boom"]["error"] == "timing stopped: RuntimeError: boom in round"
    for codec in ("json", "msgpack", "orjson"):
        assert not answers[codec].get("error") and len(answers[codec]["rounds"]["encode"]) == 20
        assert set(answers[codec]["cpus"]) == set(lane_cpus(2))


def test_one_lane_plays_one_codec_at_a_time_in_the_order_of_before(tmp_path):
    codecs = ("json", "msgpack", "bson")
    answers, lines = _time(tmp_path, codecs, 1, processes=1, repeat=4)
    played = [line.split(": ")[-1] for line in lines if line.startswith("timing: rounds: ")]
    assert played == [name for r in range(4) for name in lane_turns(list(codecs), r)[0]]
    assert all(len(answers[codec]["rounds"]["encode"]) == 4 for codec in codecs)


def _run(tmp_path: Path, *options: str) -> "subprocess.CompletedProcess[str]":
    trace = str(tmp_path / "t.rpct")
    with TraceWriter(trace) as writer:  # the bundled sample's first 400 calls
        for call in itertools.islice(open_trace(str(DEFAULT_TRACE)), 400):
            writer.write(call)
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), "--trace", trace, "--codecs", "json,msgpack",
                           "--repeat", "4", "--min-time", "0.001", "--no-report", "--quiet", "--no-floor",
                           "--out", str(tmp_path / "out"), "--force", *options],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


@TWO_CPUS
@pytest.mark.parametrize("options, lanes", [((), 2), (("--jobs", "1"), 1), (("--timing-lanes", "1"), 1),
                                            (("--processes", "0"), 1)])
def test_the_lanes_of_a_run_are_in_its_settings(tmp_path, options, lanes):
    done = _run(tmp_path, *options)
    assert done.returncode == 0, done.stderr
    settings = json.loads((tmp_path / "out" / "results.json").read_text())["settings"]
    busy = settings.get("busy_cpus_before_timing")
    assert (busy is not None) == (options == ())  # the CPUs are looked at only for the default lanes
    if busy is not None and busy >= BUSY_LIMIT:  # the machine running the tests is busy: one lane, and it says so
        lanes = 1
        assert "timing: one codec at a time: other work kept" in done.stderr
    assert settings["timing_lanes"] == lanes


@TWO_CPUS
def test_beside_other_work_the_default_times_one_codec_at_a_time(tmp_path):
    """Two busy loops keep both CPUs busy: the default's two lanes would each share a CPU with one, so the run
    times one codec at a time, says why in one line and records what it saw; --timing-lanes 2 keeps two."""
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        default, forced = _run(tmp_path / "a"), _run(tmp_path / "b", "--timing-lanes", "2")
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    assert default.returncode == 0 and forced.returncode == 0, default.stderr + forced.stderr
    settings = json.loads((tmp_path / "a" / "out" / "results.json").read_text())["settings"]
    # two CPUs' worth, less the share the run's own zygote and imports take from them during the look
    assert settings["timing_lanes"] == 1 and settings["busy_cpus_before_timing"] >= 0.75
    assert [line for line in default.stderr.splitlines() if "one codec at a time" in line] == [
        f"warning: timing: one codec at a time: other work kept {settings['busy_cpus_before_timing']:.2f} CPUs busy, "
        "and two lanes need the CPUs to themselves (--timing-lanes 2 times two at once anyway)"]
    forced_settings = json.loads((tmp_path / "b" / "out" / "results.json").read_text())["settings"]
    assert forced_settings["timing_lanes"] == 2 and "busy_cpus_before_timing" not in forced_settings


def test_busy_cpus_sees_a_busy_loop():
    """What the default lanes go by: a busy loop in another process is a CPU's worth of work."""
    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        seen = busy_cpus()
    finally:
        loop.kill()
        loop.wait()
    assert seen is not None and 0.8 <= seen <= (os.cpu_count() or 1)


def test_busy_cpus_leaves_out_the_runs_own_work():
    """The zygote making its codecs (a process whose CPU ``ours`` gives) and this process's ``meanwhile`` (imports)
    during the look are the run's own work: not counted, where they would add about 1.8 CPUs' worth."""
    def spin() -> None:
        end = time.process_time() + 0.4
        while time.process_time() < end:
            pass
    before = busy_cpus()
    zygote = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        seen = busy_cpus(ours=lambda: cpu_seconds_of(zygote.pid), meanwhile=spin)
    finally:
        zygote.kill()
        zygote.wait()
    after = busy_cpus()
    assert seen is not None and before is not None and after is not None
    assert seen <= max(before, after) + 0.5, (before, seen, after)


@pytest.mark.parametrize("options, message", [
    (("--timing-lanes", str(usable_cpus() + 1)), f"--timing-lanes {usable_cpus() + 1}: this process may use"),
    (("--timing-lanes", "2", "--processes", "0"), "--timing-lanes 2: codecs timed in this process"),
])
def test_lanes_it_cannot_have_are_refused_in_one_line(tmp_path, options, message):
    done = _run(tmp_path, *options)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert message in done.stderr


def test_the_budget_counts_the_rounds_of_two_lanes_once_each_pair():
    """--budget's model: two lanes play the rounds in half the seconds; warm-up, set-up, tails stay as they were."""
    costs = [(2_000.0, 1), (40_000.0, 2)]  # ns per call and replays per round, of two codecs
    one = TimingPlan(1000, 0.01, 40, 1, 1)
    rounds = sum(40 * max(1, -(-0.01 // (1000 * ns / 1e9 / 2))) * 1000 * ns / 1e9 * passes for ns, passes in costs)
    assert one.cost_s(costs) - dataclasses.replace(one, lanes=2).cost_s(costs) == pytest.approx(rounds / 2)
