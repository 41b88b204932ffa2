"""``run_bench.py trace``: info, cat, convert and slice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rpc_capture import C2S, S2C, Call, Recorder, TraceWriter, open_trace, write_jsonl
from rpc_capture.trace import VERSION
from rpcbench.commands import trace as trace_tools
from rpcbench.errors import BenchError

REPO = Path(__file__).resolve().parent.parent
T0 = 1_700_000_000_000_000_000


def make_calls():
    """200 calls over 10 s: 4 methods in known proportions, 3 connections, both directions."""
    out = []
    for i in range(200):
        method = ("move", "move", "move", "damage", "chat")[i % 5] if i % 10 else "state_snapshot"
        out.append(Call(method, {"i": i, "pos": [i * 0.25, 2.0], "raw": bytes([i % 256]), "who": "玩家"},
                        T0 + i * 50_000_000, S2C if i % 4 == 0 else C2S, (7, 8, "bot-9")[i % 3]))
    return out


@pytest.fixture
def trace(tmp_path):
    path = tmp_path / "t.rpct"
    with TraceWriter(path, {"game": "test"}) as w:
        for c in make_calls():
            w.write(c)
    return path


def run(*argv):
    return trace_tools.main([str(a) for a in argv])


def cli(*argv, **kw):
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), "trace", *map(str, argv)],
                          capture_output=True, text=True, timeout=60, **kw)


# ---------------------------------------------------------------------------------- info


def test_info_table(trace, capsys):
    assert run("info", trace) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    row = {ln.split("  ", 1)[0]: ln.split("  ", 1)[1].strip() for ln in lines[:12] if "  " in ln}
    assert row["calls"] == "200"
    assert row["format"] == f"rpctrace v{VERSION}"
    assert row["file size"].startswith(f"{trace.stat().st_size:,} bytes")
    assert row["duration"].startswith("9.950 s")
    assert row["connections"] == "3"
    assert row["directions"] == "c2s 150 (75.0%)   s2c 50 (25.0%)"
    assert row["end"].startswith("clean")
    assert "game=test" in row["metadata"]
    methods = {ln.split()[0]: ln.split()[1:] for ln in lines
               if ln.split() and ln.split()[0] in ("move", "damage", "chat", "state_snapshot")}
    assert methods == {"move": ["100", "50.0%"], "damage": ["40", "20.0%"], "chat": ["40", "20.0%"],
                       "state_snapshot": ["20", "10.0%"]}
    conns = {ln.split()[0]: ln.split()[1] for ln in lines if ln.split() and ln.split()[0] in ("7", "8", "bot-9")}
    assert conns == {"7": "67", "8": "67", "bot-9": "66"}


def test_info_shows_the_recorders_drops(tmp_path, capsys):
    path = tmp_path / "r.rpct"
    with Recorder(path, exclude=["chat"]) as rec:
        for i in range(30):
            rec.record("chat" if i % 3 == 0 else "move", {"i": i})
        rec.record("bad", {"x": object()})
    run("info", path)
    out = capsys.readouterr().out
    assert "1 calls dropped of 31 offered (unrecordable 1); not recorded by choice: filtered_out 10" in out
    counters = {ln.split()[0]: ln.split()[1] for ln in out.splitlines() if ln.startswith("  ")}
    assert counters["offered"] == "31" and counters["recorded"] == "20" and counters["dropped_unrecordable"] == "1"


def test_info_on_a_killed_recording_reports_the_cut_tail(tmp_path, capsys):
    cut = tmp_path / "cut.rpct"
    with TraceWriter(cut) as w:
        for c in make_calls() * 2:  # batch records of 128 calls, the last of 16
            w.write(c)
    data = cut.read_bytes()
    cut.write_bytes(data[: len(data) - 200])  # inside the last batch: no end record, a partial record
    run("info", cut)
    out = capsys.readouterr().out
    end = next(ln for ln in out.splitlines() if ln.startswith("end"))
    assert "MISSING" in end and "bytes of a cut-off last record skipped" in end
    assert int(next(ln for ln in out.splitlines() if ln.startswith("calls")).split()[1]) == 384


def test_info_several_files_and_jsonl(trace, tmp_path, capsys):
    jsonl = tmp_path / "t.jsonl"
    write_jsonl(make_calls(), jsonl)
    run("info", trace, jsonl)
    out = capsys.readouterr().out
    assert out.count("calls        200") == 2 and "JSON Lines" in out


# ---------------------------------------------------------------------------------- convert


def test_convert_binary_jsonl_binary_round_trip(trace, tmp_path):
    jsonl, back = tmp_path / "t.jsonl", tmp_path / "back.rpct.gz"
    assert run("convert", trace, jsonl) == 0
    first = json.loads(jsonl.read_text(encoding="utf-8").splitlines()[0])
    assert (first["method"] == "state_snapshot"
            and first["args"]["raw"] == {"$binary": {"base64": "AA==", "subType": "00"}})
    assert run("convert", jsonl, back) == 0
    assert back.read_bytes()[:2] == b"\x1f\x8b"  # .gz: compressed by default
    assert list(open_trace(back)) == make_calls()


def test_convert_keeps_metadata_and_recorder_counters(tmp_path):
    src, dst = tmp_path / "r.rpct", tmp_path / "copy.rpct"
    with Recorder(src, metadata={"battle": 5}, max_queue=10) as rec:
        for i in range(50):
            rec.record("move", {"i": i})
    run("convert", src, dst, "--compress", "1")
    original, reader = open_trace(src), open_trace(dst)
    assert list(reader) == list(original) and reader.end["calls"] == original.end["recorded"]
    assert reader.metadata["battle"] == 5 and reader.metadata["converted_from"] == "r.rpct"
    assert ({k: v for k, v in reader.end.items() if k != "calls"}
            == {k: v for k, v in original.end.items() if k != "calls"})


def test_convert_refuses_to_overwrite(trace, tmp_path):
    with pytest.raises(BenchError, match="is the input file"):
        run("convert", trace, trace)
    other = tmp_path / "o.jsonl"
    other.write_text("")
    with pytest.raises(BenchError, match="exists"):
        run("convert", trace, other)
    assert run("convert", trace, other, "--force") == 0 and len(other.read_text().splitlines()) == 200


# ---------------------------------------------------------------------------------- slice


@pytest.mark.parametrize("options, keep", [
    (["--start", "2", "--end", "4.5"], lambda c: 2e9 <= c.t - T0 < 4.5e9),
    (["--method", "move", "--method", "cha*"], lambda c: c.method in ("move", "chat")),
    (["--exclude-method", "move"], lambda c: c.method != "move"),
    (["--conn", "bot-9", "--conn", "7"], lambda c: c.conn in ("bot-9", 7)),
    (["--dir", "s2c", "--start", "5"], lambda c: c.dir == S2C and c.t - T0 >= 5e9),
])
def test_slice(trace, tmp_path, options, keep):
    out = tmp_path / "s.rpct"
    assert run("slice", trace, out, *options) == 0
    expected = [c for c in make_calls() if keep(c)]
    assert expected and list(open_trace(out)) == expected
    assert open_trace(out).metadata["sliced_from"] == "t.rpct"


def test_slice_rejects_an_empty_range(trace, tmp_path):
    with pytest.raises(BenchError, match="--end 1 is not after --start 2"):
        run("slice", trace, tmp_path / "s.rpct", "--start", "2", "--end", "1")


# ---------------------------------------------------------------------------------- cat


def test_cat_text_and_jsonl(trace, capsys):
    run("cat", trace, "--limit", "3", "--method", "move")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    assert lines[0].split()[:4] == ["0.000000", "c2s", "8", "move"]
    assert lines[0].endswith("{'i': 1, 'pos': [0.25, 2.0], 'raw': b'\\x01', 'who': '玩家'}")
    run("cat", trace, "--jsonl", "--conn", "7")
    rows = [json.loads(ln) for ln in capsys.readouterr().out.splitlines()]
    assert len(rows) == 67 and {r["conn"] for r in rows} == {7}


# ---------------------------------------------------------------------------------- command line


def test_command_line_help_errors_and_pipes(trace, tmp_path):
    for sub in ("", "info", "cat", "convert", "slice"):
        result = cli(*([sub] if sub else []), "--help")
        assert result.returncode == 0 and "run_bench.py trace" in result.stdout
    result = cli("info", tmp_path / "missing.rpct")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"run_bench.py: error: {tmp_path / 'missing.rpct'}: cannot open (No such file or directory)"]
    result = cli("convert", trace, trace)
    assert result.returncode == 2 and "is the input file" in result.stderr
    result = cli("info", trace)
    assert result.returncode == 0 and "state_snapshot" in result.stdout
    # `trace cat big | head -1`: the reader going away is not an error
    big = tmp_path / "big.rpct"
    with TraceWriter(big) as w:
        for i in range(20000):
            w.write(Call("move", {"i": i}, T0 + i, C2S, 1))
    p = subprocess.Popen([sys.executable, str(REPO / "run_bench.py"), "trace", "cat", str(big)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.readline().split()[3] == b"move"
    p.stdout.close()
    assert p.wait(30) == 0 and b"Traceback" not in p.stderr.read()
    p.stderr.close()


def test_trace_stats_merged_from_parts_equal_one_pass_over_the_bundled_trace() -> None:
    from rpc_capture import open_trace
    from rpc_capture.stats import TraceStats

    whole, parts = TraceStats(), [TraceStats(), TraceStats(), TraceStats()]
    for index, call in enumerate(open_trace(str(REPO / "samples" / "battle.rpct"))):
        whole.add(call)
        parts[index % 3].add(call)
    merged = TraceStats()
    for part in parts:
        merged.merge(part)
    assert merged == whole and whole.calls == 20_000 and whole.duration_s > 0
    assert sum(whole.connections.values()) == whole.calls == sum(whole.methods.values())
