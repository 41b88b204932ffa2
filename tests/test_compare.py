"""``run_bench.py compare OLD NEW``, end to end on real runs of the bundled sample.

The runs time json, msgpack, json+zlib-1 and ``jsonbuild`` (tests/data/jsonbuild.py), a plugin
codec loaded with --codec-path from a temporary folder: compact JSON like ``json``, as "the build
under test".
Two runs of the same build must pass a --fail-above 10 gate; a run of a build whose
jsonbuild burns 25 % more of its own time per call (14 to 20 % of the time the harness
measures for it, its loop overhead included, on the bundled sample) must fail it, and so must a build whose
jsonbuild writes JSON with spaces (more bytes). No test asserts a speed: only that the
gate tells an unchanged build from a slower one.
"""

from __future__ import annotations

import json
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest

from rpcbench.reports.compare import compare, gate
from rpcbench.results import SLOW_STATE_FACTOR, load

ROOT = Path(__file__).resolve().parent.parent
CODECS = "json,msgpack,json+zlib-1,jsonbuild"
#: small enough for test speed; 3 process sets so one process's speed mode cannot decide (docs/compare.md)
TIMING = ["--repeat", "15", "--processes", "3", "--min-time", "0.002", "--sample", "300"]
QUICK = ["--no-floor", "--no-tails", "--no-memory", "--no-report", "--quiet"]

#: write_build(folder, extra_cpu, separators) -> a copy of the jsonbuild plugin with those settings
write_build = runpy.run_path(str(ROOT / "tests" / "data" / "jsonbuild.py"))["write_build"]
BUILDS = {"base": (0.0, (",", ":")), "slow": (0.25, (",", ":")), "wide": (0.0, (", ", ": "))}


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "run_bench.py"), *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


@pytest.fixture(scope="session")
def runs(tmp_path_factory) -> Dict[str, Path]:
    """Run folders: ``a`` and ``b`` (the same build twice), ``slow`` (jsonbuild slower), ``wide``
    (jsonbuild with spaces, a few rounds only, msgpack and json+zlib-1 dropped, msgpack+zlib-1 added)."""
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


def test_same_build_twice_passes_the_gate(runs, tmp_path):
    done = compare_cli(str(runs["a"]), str(runs["b"]), "--fail-above", "10", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "gate --fail-above 10: passed" in done.stdout
    assert "t-test on the process sets' log ratios" in done.stdout.replace("\n  ", " ") and "p < 0.01" in done.stdout
    assert "Reference codec: json (the default" in done.stdout
    assert re.search(r"^jsonbuild\s+encode\s", done.stdout, re.M)
    assert (tmp_path / "compare.html").is_file()
    assert_fits(done.stdout)


def test_a_slower_build_fails_the_gate_naming_the_codec(runs, tmp_path):
    done = compare_cli(str(runs["a"]), str(runs["slow"]), "--fail-above", "10", "--out", str(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    failed = done.stdout.split("FAILED", 1)[1]
    assert re.search(r"jsonbuild: (en|de)code CPU \+\d+\.\d% relative to json", failed), done.stdout
    assert not re.search(r"^\s+(json|msgpack|json\+zlib-1): ", failed, re.M), done.stdout
    assert_fits(done.stdout)
    # the same pair without a gate only reports
    assert compare_cli(str(runs["a"]), str(runs["slow"]), "--out", str(tmp_path)).returncode == 0


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


def scaled_copy(folder: Path, dest: Path, codec: str, factor: float) -> Path:
    """A copy of a run's results.json with one codec's encode rounds multiplied by ``factor``."""
    data = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    result = next(r for r in data["results"] if r["codec"] == codec)
    result["encode"]["rounds_ns"] = [x * factor for x in result["encode"]["rounds_ns"]]
    return _write(data, dest)


def steady_copy(folder: Path, dest: Path) -> Path:
    """A copy of a run whose encode rounds are only those compare keeps (within SLOW_STATE_FACTOR x the fastest),
    cycled to the same count: the run as a quiet machine would have timed it, so a test built on it never
    depends on how busy the machine was while the fixture ran."""
    data = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    for result in (r for r in data["results"] if r["encode"]):
        rounds = result["encode"]["rounds_ns"]
        kept = [x for x in rounds if x <= SLOW_STATE_FACTOR * min(rounds)]
        result["encode"]["rounds_ns"] = [kept[i % len(kept)] for i in range(len(rounds))]
    return _write(data, dest)


def _write(data: Dict, dest: Path) -> Path:
    dest.mkdir()
    (dest / "results.json").write_text(json.dumps(data), encoding="utf-8")
    return dest


def test_scaled_rounds_fail_by_exactly_their_factor(runs, tmp_path):
    base = steady_copy(runs["a"], tmp_path / "base")
    slower = scaled_copy(base, tmp_path / "slower", "msgpack", 1.2)
    violations = gate(compare(load(str(base)), load(str(slower))), 10)
    assert [(v.codec, v.figure, round(v.change_pct, 6)) for v in violations] == [("msgpack", "encode", 20.0)]
    assert compare(load(str(base)), load(str(slower)), fail_above=10).violations == tuple(violations)
    done = compare_cli(str(base), str(slower), "--fail-above", "10")
    assert done.returncode == 1 and "msgpack: encode CPU +20.0% relative to json" in done.stdout
    within = scaled_copy(base, tmp_path / "within", "msgpack", 1.05)
    assert compare_cli(str(base), str(within), "--fail-above", "10").returncode == 0
    itself = compare_cli(str(runs["a"]), str(runs["a"]), "--fail-above", "0", "--out", str(tmp_path))
    assert itself.returncode == 0 and "FAILED" not in itself.stdout


def test_one_slow_process_is_not_a_change(runs, tmp_path):
    """The process set is the unit: one of NEW's three msgpack processes 1.2x slower (a process's speed mode, for
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
    shutil.copytree(runs["b"], hostile)
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
