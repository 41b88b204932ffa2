"""``run_bench.py compare OLD NEW``, end to end on real runs of the bundled sample.

The runs time json, msgpack, json+zlib-1 and ``jsonbuild`` (tests/data/jsonbuild.py), a plugin
codec loaded with --codec-path from a temporary folder: compact JSON like ``json``, as "the build
under test", with the settings docs/compare.md recommends for a gate.

No test asserts a speed or depends on how busy the machine is. The gate's judgments are checked on copies of
a real run whose rounds are those of a quiet machine (:func:`steady_copy`), with a change planted in them
(:func:`scaled_copy`): a planted slowdown must fail the gate, the same build must pass, runs that cannot be
tested (one process set each, a codec not timed) must exit 3. The real runs are judged with a wide margin
only (a build 2 µs slower per encode, about +100 % of jsonbuild's encode on the bundled sample, against
``--fail-above 25``), and a build whose jsonbuild writes JSON with spaces must fail on bytes, which are exact.
"""

from __future__ import annotations

import json
import re
import runpy
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest

from rpc_capture import open_trace
from rpcbench.codec import JSON_CHANGES, Codec
from rpcbench.reports.compare import GATE_RUN_SETTINGS, compare, gate, process_sets
from rpcbench.results import Timing, load
from rpcbench.timing import TimingJob

ROOT = Path(__file__).resolve().parent.parent
CODECS = "json,msgpack,json+zlib-1,jsonbuild"
#: the settings docs/compare.md recommends for a gate, with shorter batches and a smaller timing sample for test speed
TIMING = [*GATE_RUN_SETTINGS.split(), "--min-time", "0.01", "--sample", "300"]
QUICK = ["--no-floor", "--no-tails", "--no-memory", "--no-report", "--quiet"]

#: write_build(folder, extra_cpu, separators, extra_encode_ns) -> a copy of the jsonbuild plugin with those settings
write_build = runpy.run_path(str(ROOT / "tests" / "data" / "jsonbuild.py"))["write_build"]
BUILDS = {"base": (0.0, (",", ":"), 0), "slow": (0.0, (",", ":"), 2000), "wide": (0.0, (", ", ": "), 0)}


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run_bench.py"), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> Dict[str, Path]:
    """Run folders: ``a`` and ``b`` (the same build twice), ``slow`` (jsonbuild 2 µs slower per encode), ``wide``
    (jsonbuild with spaces, the default single process set and a few rounds, msgpack and json+zlib-1 dropped,
    msgpack+zlib-1 added)."""
    root = tmp_path_factory.mktemp("compare")
    plugins = {name: write_build(root / name, *settings) for name, settings in BUILDS.items()}
    plan = {"a": ("base", CODECS, TIMING), "b": ("base", CODECS, TIMING), "slow": ("slow", CODECS, TIMING),
            "wide": ("wide", "json,jsonbuild,msgpack+zlib-1", ["--repeat", "3", "--sample", "300"])}
    out = {}
    for run, (build, codecs, timing) in plan.items():
        out[run] = root / f"run-{run}"
        done = run_bench("--codecs", codecs, "--codec-path", str(plugins[build]), *timing, *QUICK,
                         "--out", str(out[run]))
        assert done.returncode == 0, done.stderr
    return out


def compare_cli(*args: str) -> subprocess.CompletedProcess:
    return run_bench("compare", *args)


def assert_fits(text: str) -> None:
    too_wide = [line for line in text.splitlines() if len(line) > 100]
    assert not too_wide, too_wide


def test_more_bytes_fail_the_gate_and_unmatched_codecs_are_listed(runs):
    done = compare_cli(str(runs["a"] / "results.json"), str(runs["wide"]), "--fail-above", "10")
    assert done.returncode == 1, done.stdout + done.stderr
    wide = load(str(runs["wide"])).result("jsonbuild").sizes
    base = load(str(runs["a"])).result("jsonbuild").sizes
    assert wide and base and wide.mean > base.mean * 1.1
    assert f"jsonbuild: bytes per call +{(wide.mean / base.mean - 1) * 100:.1f}%" in done.stdout
    assert "added (only in NEW): msgpack+zlib-1" in done.stdout
    assert "removed (only in OLD): msgpack, json+zlib-1" in done.stdout
    assert (runs["wide"] / "compare.html").is_file()  # default: into NEW's folder
    itself = compare_cli(str(runs["wide"]), str(runs["wide"]), "--out", str(runs["wide"]))
    assert "not tested (few sets)" in itself.stdout.replace("\n  ", " ")  # one process set each
    assert f"make both runs with {GATE_RUN_SETTINGS}" in itself.stdout.replace("\n  ", " ")


def steady_copy(folder: Path, dest: Path, processes: int = 0, phase: int = 0) -> Path:
    """A copy of a run whose rounds are those of a quiet machine: every timing's rounds set to its fastest round
    times a small steady spread within and between process sets (under 1 %), so a test built on it never depends
    on how busy the machine was while the fixture ran. ``processes``: keep only that many process sets;
    ``phase``: another pattern of the spread (another quiet run of the same build)."""
    data = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    repeat = data["settings"]["repeat"]
    for result in data["results"]:
        for op in ("encode", "decode"):
            timing = result[op]
            if not timing:
                continue
            sets = process_sets(Timing(tuple(timing["rounds_ns"]), timing["calls"], timing["loops"]), repeat)
            fastest = min(timing["rounds_ns"])
            timing["rounds_ns"] = [fastest * (1 + 0.004 * ((k + phase) % 3)) * (1 + 0.002 * ((i + phase) % 4))
                                   for k, rounds in enumerate(sets[:processes or None]) for i in rounds]
    if processes:
        data["settings"]["processes"] = processes
    return _write(data, dest)


def scaled_copy(folder: Path, dest: Path, codec: str, factor: float, op: str = "encode") -> Path:
    """A copy of a run's results.json with one codec's ``op`` rounds multiplied by ``factor``."""
    data = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    result = next(r for r in data["results"] if r["codec"] == codec)
    result[op]["rounds_ns"] = [x * factor for x in result[op]["rounds_ns"]]
    return _write(data, dest)


def _write(data: Dict, dest: Path) -> Path:
    dest.mkdir()
    (dest / "results.json").write_text(json.dumps(data), encoding="utf-8")
    return dest


def test_same_build_twice_passes_the_gate(runs, tmp_path):
    """Two quiet runs of the same build (one real run's rounds in two patterns of quiet-machine spread: two real
    runs' fastest rounds differ with the load while the fixture ran) pass the gate."""
    base = steady_copy(runs["a"], tmp_path / "base")
    again = steady_copy(runs["a"], tmp_path / "again", phase=1)
    done = compare_cli(str(base), str(again), "--fail-above", "10", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gate --fail-above 10: passed" in done.stdout
    assert "t-test on the process sets' log ratios" in done.stdout.replace("\n  ", " ") and "p < 0.01" in done.stdout
    assert "Reference codec: json (the default" in done.stdout
    assert re.search(r"^jsonbuild\s+encode\s", done.stdout, re.M)
    assert (tmp_path / "compare.html").is_file()
    assert_fits(done.stdout)


def test_a_planted_slowdown_fails_the_gate_by_exactly_its_factor(runs, tmp_path):
    base = steady_copy(runs["a"], tmp_path / "base")
    slower = scaled_copy(base, tmp_path / "slower", "msgpack", 1.2)
    violations = gate(compare(load(str(base)), load(str(slower))), 10)
    assert [(v.codec, v.figure, round(v.change_pct, 6)) for v in violations] == [("msgpack", "encode", 20.0)]
    assert compare(load(str(base)), load(str(slower)), fail_above=10).violations == tuple(violations)
    done = compare_cli(str(base), str(slower), "--fail-above", "10")
    assert done.returncode == 1 and "msgpack: encode CPU +20.0% relative to json" in done.stdout
    failed = done.stdout.split("FAILED", 1)[1]
    assert not re.search(r"^\s+(json|jsonbuild|json\+zlib-1): ", failed, re.M), done.stdout
    assert_fits(done.stdout)
    # a decode slowdown too; the same pair without a gate only reports; a change under the gate passes it
    decode = scaled_copy(base, tmp_path / "decode", "jsonbuild", 1.3, "decode")
    assert "jsonbuild: decode CPU +30.0% relative to json" in compare_cli(str(base), str(decode), "--fail-above",
                                                                           "10").stdout
    assert compare_cli(str(base), str(slower)).returncode == 0
    within = scaled_copy(base, tmp_path / "within", "msgpack", 1.05)
    assert compare_cli(str(base), str(within), "--fail-above", "10").returncode == 0
    itself = compare_cli(str(runs["a"]), str(runs["a"]), "--fail-above", "0", "--out", str(tmp_path))
    assert itself.returncode == 0 and "FAILED" not in itself.stdout


def test_a_real_slower_build_fails_and_the_same_build_passes_a_wide_gate(runs, tmp_path):
    """Real runs, whatever the load: the build 2 µs slower per encode (about +100 % of jsonbuild's encode) fails a
    25 % gate on jsonbuild encode alone; the same build twice passes it. Every timing is tested: no round is set
    aside, so a busy machine cannot empty a process set."""
    slow = compare_cli(str(runs["a"]), str(runs["slow"]), "--fail-above", "25", "--out", str(tmp_path))
    assert slow.returncode == 1, slow.stdout + slow.stderr
    failed = slow.stdout.split("FAILED", 1)[1]
    assert re.search(r"jsonbuild: encode CPU \+\d+\.\d% relative to json", failed), slow.stdout
    assert not re.search(r"^\s+(json|msgpack|json\+zlib-1): ", failed, re.M), slow.stdout
    same = compare_cli(str(runs["a"]), str(runs["b"]), "--fail-above", "25", "--out", str(tmp_path))
    assert same.returncode == 0, same.stdout + same.stderr
    assert not re.search(r"few sets$", same.stdout + slow.stdout, re.M)  # every timing tested


def test_untested_timings_make_the_gate_inconclusive(runs, tmp_path):
    """Runs of one process set each (the default --processes 1) cannot be tested: the gate exits 3 with one
    line saying what to rerun, even over a 25 % slowdown it cannot see; --allow-untested passes it."""
    one = steady_copy(runs["a"], tmp_path / "one", processes=1)
    slower = scaled_copy(one, tmp_path / "slower", "msgpack", 1.25)
    done = compare_cli(str(one), str(slower), "--fail-above", "10", "--out", str(tmp_path))
    assert done.returncode == 3, done.stdout + done.stderr
    line = done.stderr.strip()
    assert len(line.splitlines()) == 1 and "INCONCLUSIVE (exit 3): 6 timing(s) not tested" in line, line
    assert f"rerun both runs with {GATE_RUN_SETTINGS}" in line and "--allow-untested" in line
    assert "few sets" in done.stdout and "INCONCLUSIVE" in (tmp_path / "compare.md").read_text(encoding="utf-8")
    allowed = compare_cli(str(one), str(slower), "--fail-above", "10", "--allow-untested", "--out", str(tmp_path))
    assert allowed.returncode == 0 and "--allow-untested: 6 untested" in allowed.stdout.replace("\n  ", " ")
    assert compare_cli(str(one), str(slower), "--out", str(tmp_path)).returncode == 0  # no gate: a report only
    # a codec timed in OLD but not in NEW is not tested either
    data = json.loads((runs["b"] / "results.json").read_text(encoding="utf-8"))
    failed = next(r for r in data["results"] if r["codec"] == "msgpack")
    failed.update(encode=None, decode=None, error="timing failed: worker died")
    lost = _write(data, tmp_path / "lost")
    done = compare_cli(str(runs["a"]), str(lost), "--fail-above", "1000", "--out", str(tmp_path))
    assert done.returncode == 3 and "(msgpack encode, msgpack decode)" in done.stderr, done.stdout + done.stderr


def test_one_slow_process_is_not_a_change(runs, tmp_path):
    """The process set is the unit: one of NEW's msgpack processes 1.2x slower (a process's speed mode, for
    its whole life) is noise between processes, not a change; every process 1.2x slower is a change."""
    base = steady_copy(runs["a"], tmp_path / "base")
    data = json.loads((base / "results.json").read_text(encoding="utf-8"))
    repeat = data["settings"]["repeat"]
    msgpack = next(r for r in data["results"] if r["codec"] == "msgpack")
    msgpack["encode"]["rounds_ns"][:repeat] = [x * 1.2 for x in msgpack["encode"]["rounds_ns"][:repeat]]
    one = _write(data, tmp_path / "one")

    def verdict(new: Path) -> str:
        change = next(c for c in compare(load(str(base)), load(str(new))).codecs if c.codec == "msgpack")
        return next(t for t in change.cpu if t.op == "encode").verdict

    assert verdict(one) == "n.s."
    assert verdict(scaled_copy(base, tmp_path / "every", "msgpack", 1.2)) == "slower"


def test_reference_absent_falls_back_and_says_so(runs, tmp_path):
    done = compare_cli(str(runs["a"]), str(runs["b"]), "--reference", "bson", "--out", str(tmp_path))
    assert done.returncode == 0
    assert "Reference codec: json: bson was not timed in both runs, so the first codec both runs timed" in \
        done.stdout.replace("\n  ", " ")


def test_a_codec_not_timed_in_one_run_is_said_and_the_reference_moves_on(runs, tmp_path):
    data = json.loads((runs["b"] / "results.json").read_text(encoding="utf-8"))
    failed = next(r for r in data["results"] if r["codec"] == "json")
    failed.update(encode=None, decode=None, error="timing failed: worker died")
    (tmp_path / "results.json").write_text(json.dumps(data), encoding="utf-8")
    done = compare_cli(str(runs["a"]), str(tmp_path))
    text = done.stdout.replace("\n  ", " ")
    assert done.returncode == 0, text
    assert "Reference codec: msgpack: json was not timed in both runs" in text
    assert "json: encode not timed in NEW (timing failed: worker died), decode not timed in NEW" in text
    assert re.search(r"^jsonbuild\s+encode\s.*x\s", done.stdout, re.M)  # ratios to msgpack are given


@pytest.mark.parametrize("case", ["missing", "schema", "trace", "json-list", "bad-percent"])
def test_bad_input_is_one_line_and_exit_2(runs, tmp_path, case):
    old: List[str] = [str(runs["a"])]
    if case == "missing":
        args = [*old, str(tmp_path / "nowhere")]
    elif case == "schema":
        data = json.loads((runs["a"] / "results.json").read_text(encoding="utf-8"))
        (tmp_path / "results.json").write_text(json.dumps({**data, "schema_version": 99}), encoding="utf-8")
        args = [*old, str(tmp_path / "results.json")]
    elif case == "trace":
        args = [*old, str(ROOT / "samples" / "battle.rpct")]
    elif case == "json-list":
        (tmp_path / "list.json").write_text("[1, 2]", encoding="utf-8")
        args = [str(tmp_path / "list.json"), *old]
    else:
        args = [*old, str(runs["b"]), "--fail-above", "-5"]
    done = compare_cli(*args, "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and lines[-1].startswith("run_bench.py")
    assert len(lines) == 1 or case == "bad-percent", lines  # argparse prints its usage first
    assert not (tmp_path / "out" / "compare.html").exists()


def test_html_escapes_everything_and_needs_nothing_else(runs, tmp_path):
    hostile = tmp_path / "<script>alert(1)</script>"
    shutil.copytree(runs["a"], hostile)  # the same rounds: the gate passes whatever the load
    data = json.loads((hostile / "results.json").read_text(encoding="utf-8"))
    data["command"] = ["run_bench.py", '"><img src=x onerror=alert(1)>']
    (hostile / "results.json").write_text(json.dumps(data), encoding="utf-8")
    done = compare_cli(str(runs["a"]), str(hostile), "--fail-above", "10")
    assert done.returncode == 0, done.stdout + done.stderr
    assert_fits(done.stdout.rsplit("\ncompare.html: ", 1)[0])  # long folder names wrap; the written path is whole
    page = (hostile / "compare.html").read_text(encoding="utf-8")
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&#34;&gt;&lt;img src=x" in page
    assert not re.search(r"<[^>]*\b(src|href)\s*=|@import|url\(|https?://", page)
    assert "jsonbuild" in page and "t-test on the process sets" in page and "passed" in page


def test_runs_over_different_calls_claim_no_exact_byte_change(runs, tmp_path):
    """A run that held out other calls (a dictionary's training share) measured other calls: its bytes differ
    for that reason alone, so compare says so, calls no byte change exact and leaves bytes out of the gate."""
    data = json.loads((runs["a"] / "results.json").read_text(encoding="utf-8"))
    held = data["trace"]["calls"] // 5
    data["trace"]["training"] = {"source": "the first 20% of the trace", "calls": held, "held_out_calls": held}
    data["trace"]["calls"] -= held
    for r in data["results"]:
        r["sizes"]["mean"] *= 1.2  # what other calls can do to bytes per call
    other = tmp_path / "other"
    other.mkdir()
    (other / "results.json").write_text(json.dumps(data), encoding="utf-8")
    done = compare_cli(str(runs["a"]), str(other), "--fail-above", "10", "--out", str(tmp_path))
    text = done.stdout.replace("\n  ", " ")
    assert done.returncode == 0, text
    assert f"the runs measured different calls (0 calls held out for training in OLD, {held:,} in NEW" in text
    assert "exact, so any change is real" not in text and "none is exact" in text
    assert re.search(r"^jsonbuild\s+[\d.]+\s+[\d.]+\s+\+20\.0%\s+other calls$", done.stdout, re.M), done.stdout
    assert "bytes not judged (other calls)" in text
    md = (tmp_path / "compare.md").read_text(encoding="utf-8")
    assert "| jsonbuild |" in md and "other calls |" in md and "different calls" in md
    same = compare_cli(str(runs["a"]), str(runs["b"]), "--out", str(tmp_path))
    assert "exact, so any change is real" in same.stdout and "other calls" not in same.stdout
    md = (tmp_path / "compare.md").read_text(encoding="utf-8")
    assert md.startswith("## rpcbench compare\n") and "| codec | old B/call | new B/call | change | verdict |" in md


def test_a_crowded_out_warm_up_round_does_not_shorten_the_timed_batches():
    """The batch's loop count comes from the fastest warm-up round: a last warm-up round crowded out by other
    work (here: a 30 ms pause in it) would otherwise give batches a fraction of --min-time, where losing one
    scheduler slice doubles a round. Four unpaused warm-up rounds come first: one of them may be crowded out by
    real work on a busy machine, all four hardly."""
    calls = [call for _, call in zip(range(20), open_trace(str(ROOT / "samples" / "battle.rpct")))]

    class PausedOnce(Codec):
        id = "paused-once"
        changes = JSON_CHANGES

        def __init__(self) -> None:
            self.encoded = 0

        def encode(self, call):
            self.encoded += 1
            if self.encoded == 5 * len(calls) + 1:  # the first call of the fifth and last warm-up round
                time.sleep(0.03)
            return json.dumps([call.method, call.args], default=str).encode()

        def decode(self, data):
            return tuple(json.loads(data))

    job = TimingJob(PausedOnce(), calls)  # its set-up encodes every call once
    for _ in range(5):
        job.run_round(record=False)
    job.calibrate(0.01)
    assert job.loops > 1, job.loops  # 30 ms > 10 ms: calibrated on the paused round, it would be 1


def test_runs_timed_in_other_lanes_are_said_to_differ(runs, tmp_path):
    """One run timed two codecs at once and the other one at a time (the default falls back to one on a busy
    machine): their CPU figures were taken in other conditions, so compare says so; a file from before lanes
    (no timing_lanes) reads as one lane."""
    def with_lanes(name: str, lanes: object) -> Path:
        data = json.loads((runs["a"] / "results.json").read_text(encoding="utf-8"))
        data["settings"].pop("timing_lanes", None)
        if lanes is not None:
            data["settings"]["timing_lanes"] = lanes
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(data), encoding="utf-8")
        return tmp_path / name

    one, two, older = with_lanes("one", 1), with_lanes("two", 2), with_lanes("older", None)
    differ = compare_cli(str(one), str(two), "--out", str(tmp_path))
    assert re.search(r"timing settings differ \([^)]*timing_lanes", differ.stdout.replace("\n  ", " ")), differ.stdout
    same = compare_cli(str(older), str(one), "--out", str(tmp_path))
    assert "timing_lanes" not in same.stdout
