"""``run_bench.py`` end to end: real files in, results/charts/report out, errors as one line."""

from __future__ import annotations

import base64
import csv
import json
import random
import subprocess
import sys
import zlib
from pathlib import Path

import bson
import pytest

from rpc_capture import Call, TraceWriter, write_jsonl
from rpcbench.results import SCHEMA_VERSION

REPO = Path(__file__).resolve().parent.parent
FAST = ["--repeat", "1", "--warmup", "1", "--min-time", "0.001", "--quiet"]


def run_bench(*args, cwd=REPO):
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *map(str, args)],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def unseen_calls(n=300, seed=7):
    """A trace unlike the bundled one: other methods, shapes, bytes and non-ASCII text."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = rng.choice(["trade", "emote", "blob", "guild_roster"])
        if kind == "trade":
            args = {"offer": [{"item": rng.randrange(10**9), "qty": rng.randrange(1, 99)}
                              for _ in range(rng.randrange(4))],
                    "gold": rng.randrange(-10**12, 10**12), "note": rng.choice(["", "ok", "¿trato?", "取引"])}
        elif kind == "emote":
            args = [rng.random() * 1e6, rng.choice([None, True, False]), "👋" * rng.randrange(3)]
        elif kind == "blob":
            args = {"data": bytes(rng.randrange(256) for _ in range(rng.randrange(64))), "seq": i}
        else:
            args = {"members": {f"m{k}": {"lvl": rng.randrange(100), "online": rng.random() < 0.5}
                                for k in range(rng.randrange(30))}}
        out.append(Call(kind, args, 1_700_000_000_000_000_000 + i * 1000, rng.choice(["c2s", "s2c"]), rng.randrange(5)))
    return out


def independent_sizes(call):
    """Wire sizes computed here with the libraries directly, not through rpcbench."""
    def b64(v):
        if isinstance(v, bytes):
            return base64.b64encode(v).decode()
        if isinstance(v, dict):
            return {k: b64(x) for k, x in v.items()}
        if isinstance(v, list):
            return [b64(x) for x in v]
        return v
    text = json.dumps({"method": call.method, "args": b64(call.args)}, separators=(",", ":"),
                      ensure_ascii=False).encode()
    sizes = {"json": len(text), "ujson": len(text),
             "bson": len(bson.encode({"method": call.method, "args": call.args}))}
    sizes.update({f"json+zlib-{lvl}": len(zlib.compress(text, lvl)) for lvl in range(1, 10)})
    return sizes


def test_unseen_jsonl_trace_bytes_match_an_independent_computation(tmp_path):
    calls = unseen_calls()
    trace = tmp_path / "unseen.jsonl"
    write_jsonl(calls, trace)
    codecs = ["json", "ujson", "bson"] + [f"json+zlib-{lvl}" for lvl in range(1, 10)]
    result = run_bench("--trace", trace, "--codecs", ",".join(codecs), "--out", tmp_path / "out", "--no-report", *FAST)
    assert result.returncode == 0, result.stderr
    rows = {r["codec"]: r for r in csv.DictReader(open(tmp_path / "out" / "results.csv", encoding="utf-8"))}
    expected = {c: 0 for c in codecs}
    for call in calls:
        for codec, n in independent_sizes(call).items():
            expected[codec] += n
    for codec in codecs:
        assert int(rows[codec]["bytes_total"]) == expected[codec], codec
        assert rows[codec]["bytes_mean"] == f"{expected[codec] / len(calls):.2f}"
        assert int(rows[codec]["calls"]) == len(calls) and rows[codec]["failures"] == "0"
    blobs = sum(1 for c in calls if c.method == "blob")
    assert int(rows["json"]["mismatches"]) == blobs  # bytes come back as str: declared
    assert rows["json"]["declared_only"] == "1" and rows["bson"]["mismatches"] == "0"


def test_end_to_end_writes_results_charts_and_escaped_report(tmp_path):
    trace = tmp_path / "evil.rpct"
    with TraceWriter(trace, {"game": '"><img src=x onerror=alert(1)>'}) as w:
        for i in range(120):
            w.write(Call("<script>alert(1)</script>" if i % 3 == 0 else "move", {"id": i, "pos": [i / 7, 2.5]},
                         i, "c2s", i % 4))
    out = tmp_path / "out"
    result = run_bench("--trace", trace, "--codecs", "json,bson,json+zlib-1,json+zlib-2,json+zlib-3", "--out", out,
                       "--processes", "2", *FAST)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    for name in ("results.json", "results.csv", "report.html", "report.md"):
        assert (out / name).stat().st_size > 0
    assert not list(out.glob("*.png")), "charts are inline in report.html"
    report = (out / "report.html").read_text(encoding="utf-8")
    assert report.count("<svg ") >= 3
    assert "<script>alert(1)</script>" not in report and "&lt;script&gt;alert(1)&lt;/script&gt;" in report
    assert "<img src=x" not in report
    data = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert data["schema_version"] == SCHEMA_VERSION and data["trace"]["calls"] == 120
    assert data["trace"]["methods"] == {"move": 80, "<script>alert(1)</script>": 40}
    assert set(data["environment"]["libraries"]) == {"pymongo"}
    assert data["environment"]["cpu_model"] and data["trace"]["sha256"]
    assert [r["codec"] for r in data["results"]] == ["json", "bson", "json+zlib-1", "json+zlib-2", "json+zlib-3"]
    assert data["settings"]["processes"] == 2  # 2 process sets x --repeat 1 round each
    assert all(len(r["encode"]["rounds_ns"]) == 2 and r["encode"]["median_us"] > 0 for r in data["results"])
    zlib1 = data["results"][2]
    assert list(zlib1["stages"]["encode"]) == ["json", "zlib"] and list(zlib1["stages"]["decode"]) == ["zlib", "json"]
    assert set(zlib1["latency"]["encode"]) == {"*", "move", "<script>alert(1)</script>"}
    assert zlib1["latency"]["encode"]["*"]["n"] == 120 and zlib1["memory"]["encode"]["peak_bytes_max"] > 0
    assert "json" in result.stdout and "bson" in result.stdout  # the terminal table


FLAKY_CODEC = '''
from rpc_capture import Call
from rpcbench.codec import Codec

class Flaky(Codec):
    """Raises on odd ids, returns str (not bytes) on ids divisible by 10, else works."""
    id = "flaky"

    def encode(self, call):
        if call.args["id"] % 2:
            raise ValueError("odd ids are not supported")
        if call.args["id"] % 10 == 0:
            return "not bytes"
        return str(call.args["id"]).encode()

    def decode(self, data):
        return Call("move", {"id": int(data), "pos": None})
'''


def test_failing_codec_is_reported_and_the_others_carry_on(tmp_path):
    plugin = tmp_path / "flaky.py"
    plugin.write_text(FLAKY_CODEC)
    trace = tmp_path / "t.rpct"
    with TraceWriter(trace) as w:
        for i in range(100):
            w.write(Call("move", {"id": i, "pos": [1.0, 2.0]}))
    out = tmp_path / "out"
    result = run_bench("--trace", trace, "--codec-path", plugin, "--codecs", "flaky,json", "--out", out,
                       "--no-report", *FAST)
    assert result.returncode == 0, result.stderr
    data = {r["codec"]: r for r in json.loads((out / "results.json").read_text())["results"]}
    flaky = data["flaky"]
    assert (flaky["calls"], flaky["failures"], flaky["mismatches"]) == (40, 60, 40)
    kinds = {(p["kind"], p["feature"], p["declared"]): p for p in flaky["problems"]}
    assert kinds[("encode", "other", False)]["count"] == 60
    assert kinds[("mismatch", "other", False)]["detail"] == "list [1.0, 2.0] -> NoneType None"
    assert data["json"]["failures"] == 0 and data["json"]["mismatches"] == 0 and data["json"]["encode"]


@pytest.mark.parametrize("args, message", [
    (["--repeat", "0"], "--repeat: must be at least 1"),
    (["--codecs", "json,nope"], "unknown codec 'nope'; known: bson, captured, cbor, json"),
    (["--trace", "/nonexistent/x.rpct"], "/nonexistent/x.rpct: cannot open"),
    (["--codec", "nomodule_xyz:Thing"], "No module named 'nomodule_xyz'"),
    (["samples/battle.rpct"], "samples/battle.rpct: a trace is given with --trace (run_bench.py --trace PATH)"),
    (["reprot"], "unknown command 'reprot'; did you mean 'report'?"),
])
def test_bad_arguments_give_one_line_and_nonzero_exit(tmp_path, args, message):
    result = run_bench(*args, "--out", tmp_path / "o", *FAST)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len([line for line in result.stderr.splitlines() if "error" in line]) == 1


def test_corrupt_trace_names_file_and_offset(tmp_path):
    trace = tmp_path / "t.rpct"
    with TraceWriter(trace) as w:
        for i in range(10):
            w.write(Call("m", {"i": i}))
    data = bytearray(trace.read_bytes())
    data[40] ^= 0x55
    trace.write_bytes(bytes(data))
    result = run_bench("--trace", trace, "--codecs", "json", "--out", tmp_path / "o", *FAST)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"{trace}: byte offset 16: record checksum mismatch" in result.stderr


def test_list_codecs():
    result = run_bench("--list-codecs")
    assert result.returncode == 0
    for name in ("json", "ujson", "bson", "zlib", "zlibstream"):
        assert f"  {name} " in result.stdout


def test_in_process_timing_and_budget(tmp_path):
    """--processes 0 times in this process; --budget shrinks the plan (here to its floor) and records it."""
    trace = tmp_path / "t.rpct"
    with TraceWriter(trace) as w:
        for i in range(3000):
            w.write(Call("move" if i % 4 else "snapshot", {"id": i, "units": list(range(i % 50))}, i, "s2c", i % 8))
    out = tmp_path / "out"
    result = run_bench("--trace", trace, "--codecs", "json,msgpack+zlib-1", "--out", out, "--no-report", "--quiet",
                       "--processes", "0", "--repeat", "3", "--sample", "1000", "--budget", "0.001")
    assert result.returncode == 0, result.stderr
    data = json.loads((out / "results.json").read_text())
    settings = data["settings"]
    assert settings["processes"] == 0 and settings["budget_s"] == 0.001  # cannot fit: the smallest plan, and a warning
    assert settings["sample"] == 200 and settings["sample_method"] == "stratified by method, seeded"
    assert settings["sample_by_method"] == {"move": 150, "snapshot": 50}  # 3:1, like the trace
    assert "warning: --budget leaves" in result.stderr
    assert "timing cut to fit: timing sample 1,000 -> 200 calls" in result.stderr  # said, never quietly
    assert all(len(r["encode"]["rounds_ns"]) == 3 for r in data["results"])


def test_run_benchmark_from_python_gives_what_the_command_line_gives(tmp_path):
    """The library entry point and the CLI run the same data path: same bytes, same fidelity."""
    from rpcbench.config import RunConfig
    from rpcbench.pipeline import run_benchmark
    from rpcbench.results import load

    trace = tmp_path / "t.jsonl"
    write_jsonl(unseen_calls(), trace)
    codecs = ("json", "msgpack", "json+zlib-1")
    done = run_bench("--trace", str(trace), "--codecs", ",".join(codecs), "--out", str(tmp_path / "cli"),
                     "--repeat", "2", "--sample", "50", "--no-tails", "--no-memory", "--no-report", "--quiet")
    assert done.returncode == 0, done.stderr
    from_cli = load(str(tmp_path / "cli"))
    suite = run_benchmark(RunConfig(trace=str(trace), codecs=codecs, repeat=2, sample=50, tails=False,
                                    memory=False, processes=0))
    assert [r.codec for r in suite.results] == list(codecs)
    for mine, theirs in zip(suite.results, from_cli.results):
        assert (mine.sizes, mine.by_method, mine.problems) == (theirs.sizes, theirs.by_method, theirs.problems)
        assert mine.encode is not None and len(mine.encode.rounds_ns) == 2
    assert suite.trace["calls"] == from_cli.trace["calls"] == 300


@pytest.mark.parametrize("codecs, inferring", [(("json", "protobuf", "json+zstddict-3"), True),
                                               (("json", "msgpack"), False)])
def test_the_callers_work_is_done_once_in_order_while_the_run_would_wait(codecs, inferring):
    """``meanwhile`` (the CLI's imports): each piece once, in order, whether the plan waits for a schema
    inference (some pieces there) or not (all of them in the look at the CPUs before timing)."""
    from rpcbench.config import RunConfig
    from rpcbench.meanwhile import Meanwhile
    from rpcbench.pipeline import run_benchmark
    from rpcbench.worker import usable_cpus

    if usable_cpus() < 2:
        pytest.skip("one CPU: one timing lane, so no look at the CPUs before timing")
    done, phases = [], []

    def progress(phase, *_):
        phases.append(phase)
    pieces = [lambda n=n: done.append((n, phases[-1])) for n in range(3)]
    suite = run_benchmark(RunConfig(trace=str(REPO / "samples" / "battle_dict.rpct"), codecs=codecs, repeat=2,
                                    sample=50, tails=False, memory=False, timing_lanes=None),
                          progress, meanwhile=Meanwhile(pieces))
    assert [n for n, _ in done] == [0, 1, 2]
    assert {phase for _, phase in done} <= {"training", "timing sample"}
    assert ("training" in {phase for _, phase in done}) <= inferring
    assert all(r.encode is not None for r in suite.results)


def test_warnings_go_to_stderr_as_it_is_when_written():
    """The library's one-line warnings follow ``sys.stderr`` when it is swapped (pytest's capture, a notebook),
    never the stream of the run that installed them, which may be closed since (a 'Logging error' traceback)."""
    import io
    import logging

    from rpcbench.commands import _log_to_stderr

    saved = sys.stderr
    try:
        first, second = io.StringIO(), io.StringIO()
        sys.stderr = first
        _log_to_stderr()
        logging.getLogger("rpcbench").warning("to the first")
        first.close()
        sys.stderr = second
        logging.getLogger("rpcbench").warning("to the second")
        assert second.getvalue() == "warning: to the second\n"
    finally:
        sys.stderr = saved
