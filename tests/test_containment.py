"""Contained plugins, end to end: a codec that hangs, aborts, segfaults, exits or prints fails alone.

Each misbehaving codec is a real plugin file loaded by ``run_bench.py``; it works for its
first calls and misbehaves from call ``AFTER`` of its process on, so one run exercises
the size pass (AFTER within the trace) and another the timing processes (AFTER past the
size pass). The json codec beside them must come out complete.
"""

from __future__ import annotations

import csv
import html
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Tuple

import pytest

from rpc_capture import Call, TraceWriter
from rpcbench.results import SCHEMA_VERSION, load

REPO = Path(__file__).resolve().parent.parent
CALLS = 60
FAST = ["--repeat", "2", "--warmup", "1", "--min-time", "0.001", "--no-report", "--no-memory", "--quiet"]

PLUGIN = '''
import os, sys, time
from pathlib import Path
from rpcbench.codec import Codec

AFTER = {after}

class Misbehaving(Codec):
    """Works like a tiny repr codec for AFTER calls of its process, then misbehaves."""
    def __init__(self):
        self.count = 0
    def encode(self, call):
        self.count += 1
        if self.count > AFTER:
            self.misbehave()
        return repr((call.method, call.args)).encode()
    def decode(self, data):
        import ast
        return ast.literal_eval(data.decode())

class Hang(Misbehaving):
    id = "hang"
    def misbehave(self):
        while True:
            time.sleep(0.01)

class Abort(Misbehaving):
    id = "abort"
    def misbehave(self):
        os.abort()

class Exit0(Misbehaving):
    id = "exit0"
    def misbehave(self):
        sys.exit(0)

class Segfault(Misbehaving):
    id = "segfault"
    def misbehave(self):
        import ctypes
        ctypes.string_at(0)

class Chatty(Misbehaving):
    id = "chatty"
    def misbehave(self):
        print("hello from a codec")

class Marker(Misbehaving):
    """Well behaved; touches MARKER once it has encoded AFTER calls (the test then presses Ctrl-C)."""
    id = "marker"
    def misbehave(self):
        Path(os.environ["MARKER"]).touch()
'''


def write_trace(path: Path) -> Path:
    with TraceWriter(path) as w:
        for i in range(CALLS):
            w.write(Call("move", {"id": i, "pos": [i * 0.5, -1.0]}, conn=i % 3))
    return path


def bench(tmp_path: Path, after: int, codecs: str, *extra: str, **popen) -> "subprocess.CompletedProcess[str]":
    args = [sys.executable, str(REPO / "run_bench.py"), "--trace", str(write_trace(tmp_path / "t.rpct")),
            "--codec-path", str(_plugin(tmp_path, after)), "--codecs", codecs, "--out", str(tmp_path / "out"),
            *FAST, *extra]
    return subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120, **popen)


def results(tmp_path: Path) -> dict:
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    return {"partial": data["partial"], **{r["codec"]: r for r in data["results"]}}


def assert_json_complete(found: dict) -> None:
    ok = found["json"]
    assert ok["error"] is None and ok["calls"] == CALLS and ok["failures"] == ok["mismatches"] == 0
    assert len(ok["encode"]["rounds_ns"]) == len(ok["decode"]["rounds_ns"]) == 2


@pytest.mark.parametrize("phase, after, reasons", [
    ("size pass", 5, {"hang": "timed out: no progress on call 5 within 2 s",
                      "abort": "size pass stopped at call 5: its process was killed by SIGABRT",
                      "exit0": "size pass stopped at call 5: SystemExit: 0",
                      "segfault": "size pass stopped at call 5: its process was killed by SIGSEGV",
                      "chatty": None}),  # stdout of the size pass goes nowhere; caught in timing below
    ("timing", 100, {"hang": "timed out in warmup: no answer within 2 s",
                     "abort": "timing stopped in warmup: its process was killed by SIGABRT",
                     "exit0": "timing stopped: SystemExit: 0",
                     "segfault": "timing stopped in warmup: its process was killed by SIGSEGV",
                     "chatty": "the codec wrote to stdout ("}),
])
def test_misbehaving_codecs_fail_alone(tmp_path, phase, after, reasons):
    started = time.monotonic()
    result = bench(tmp_path, after, "hang,json,abort,exit0,segfault,chatty", "--codec-timeout", "2")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "hello from a codec" not in result.stdout.splitlines()
    found = results(tmp_path)
    assert found["partial"] is None
    assert_json_complete(found)
    for codec, reason in reasons.items():
        if reason is None:
            assert found[codec]["error"] and "stdout" in found[codec]["error"]
        else:
            assert found[codec]["error"].startswith(reason), found[codec]["error"]
            notes = " ".join(result.stdout.split())  # the terminal table's notes, wrapped to the terminal
            assert " ".join(f"error: {codec}: {reason}".split()) in notes
        if phase == "size pass" and reason:
            assert found[codec]["calls"] == 0 and found[codec]["encode"] is None  # no figures over part of the trace
    assert time.monotonic() - started < 60  # a guard against a hang, not a speed target


def test_a_failed_codecs_reason_is_in_every_output(tmp_path):
    """A codec that hung (size pass) and one that aborted (timing): results.json, results.csv (its ``error``
    column: "0 calls, 0 failures" alone would read as a codec that had nothing to do), the terminal,
    report.html and report.md each carry the reason."""
    hung = bench(tmp_path, 5, "hang,json", "--codec-timeout", "2", "--no-tails")
    assert hung.returncode == 0, hung.stderr
    aborted_dir = tmp_path / "aborted"
    aborted_dir.mkdir()
    aborted = bench(aborted_dir, 100, "abort,json", "--codec-timeout", "10", "--no-tails")
    assert aborted.returncode == 0, aborted.stderr
    for folder, done, codec in ((tmp_path, hung, "hang"), (aborted_dir, aborted, "abort")):
        subprocess.run([sys.executable, str(REPO / "run_bench.py"), "report", str(folder / "out")], cwd=REPO,
                       capture_output=True, text=True, timeout=120, check=True)
        reason = results(folder)[codec]["error"]
        assert reason and ("timed out" in reason or "SIGABRT" in reason)
        with open(folder / "out" / "results.csv", newline="", encoding="utf-8") as f:
            rows = {row["codec"]: row for row in csv.DictReader(f)}
        assert rows[codec]["error"] == reason and rows["json"]["error"] == ""
        assert f"error: {codec}: {reason}" in " ".join(done.stdout.split())
        assert reason in (folder / "out" / "report.md").read_text(encoding="utf-8")
        assert html.escape(reason, quote=False) in (folder / "out" / "report.html").read_text(encoding="utf-8")


def _start_timing_run(tmp_path: Path, processes: str, repeat: str, sigint) -> subprocess.Popen:
    """A run whose marker plugin touches a file once timing is under way; SIGINT as its parent leaves it."""
    marker = tmp_path / "timing-started"
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "run_bench.py"), "--trace", str(write_trace(tmp_path / "t.rpct")),
         "--codec-path", str(_plugin(tmp_path, 2000)), "--codecs", "json,marker", "--out", str(tmp_path / "out"),
         "--repeat", repeat, "--min-time", "0.001", "--no-report", "--quiet", "--processes", processes,
         "--timing-lanes", "1"],  # one lane: on a busy machine two would add a warning line to stderr
        cwd=REPO, env=dict(os.environ, MARKER=str(marker)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), proc.communicate()
    return proc


def _communicate(proc: subprocess.Popen) -> Tuple[str, str]:
    try:
        return proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # never leave a long run burning the suite's CPU
        proc.communicate()
        raise


@pytest.mark.parametrize("processes", ["1", "0"])
def test_ctrl_c_during_timing_keeps_partial_results(tmp_path, processes):
    # SIGINT as a terminal leaves it, whatever the suite inherited (a script's background job ignores it)
    proc = _start_timing_run(tmp_path, processes, "100000", signal.SIG_DFL)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground process group
    out, err = _communicate(proc)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert err.startswith("run_bench.py: interrupted (Ctrl-C) during timing; partial results in")
    found = results(tmp_path)
    assert found["partial"] == "interrupted (Ctrl-C) during timing"
    assert found["json"]["calls"] == CALLS and found["json"]["encode"]["rounds_ns"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


@pytest.mark.parametrize("processes", ["1", "0"])
def test_run_started_with_sigint_ignored_runs_to_the_end(tmp_path, processes):
    proc = _start_timing_run(tmp_path, processes, "40", signal.SIG_IGN)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = _communicate(proc)
    assert proc.returncode == 0, err
    found = results(tmp_path)
    assert found["partial"] is None and len(found["json"]["encode"]["rounds_ns"]) == 40


def _plugin(tmp_path: Path, after: int) -> Path:
    plugin = tmp_path / "bad.py"
    plugin.write_text(PLUGIN.format(after=after))
    return plugin


def test_a_failed_run_leaves_no_folder(tmp_path):
    empty = tmp_path / "empty.rpct"
    with TraceWriter(empty):
        pass
    result = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "--trace", str(empty), "--codecs", "json",
                             "--out", str(tmp_path / "out"), *FAST], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2 and "holds no calls" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.rpct"]


def test_version_1_results_still_load_as_complete(tmp_path):
    result = bench(tmp_path, 10**9, "json")
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION and data["partial"] is None
    del data["partial"]
    data["schema_version"] = 1
    (tmp_path / "v1.json").write_text(json.dumps(data))
    suite = load(str(tmp_path / "v1.json"))
    assert suite.partial is None and suite.result("json").calls == CALLS


def test_misbehaving_codecs_fail_alone_on_dask(tmp_path):
    """On a Dask cluster each task runs its codecs in a watched process too: a codec that hangs, aborts the
    process or calls sys.exit fails with the reason; the workers, the run and the other codecs carry on."""
    runs = {}
    for name, codecs in (("bad", "hang,json,abort,exit0,msgpack"), ("good", "json,msgpack")):
        (tmp_path / name).mkdir()
        result = bench(tmp_path / name, 5, codecs, "--codec-timeout", "2", "--dask", "local:2", "--sizes-only")
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        runs[name] = results(tmp_path / name)
    bad, good = runs["bad"], runs["good"]
    for codec, reason in {"hang": "timed out: no progress on call 5 within 2 s",
                          "abort": "size pass stopped at call 5: its process was killed by SIGABRT",
                          "exit0": "size pass stopped at call 5: SystemExit: 0"}.items():
        assert bad[codec]["error"].startswith(reason), bad[codec]["error"]
        assert bad[codec]["calls"] == 0 and bad[codec]["sizes"] is None
    for codec in ("json", "msgpack"):
        figures = ("calls", "failures", "mismatches", "sizes", "by_method", "by_direction", "problems")
        assert {k: bad[codec][k] for k in figures} == {k: good[codec][k] for k in figures}
        assert bad[codec]["calls"] == CALLS
