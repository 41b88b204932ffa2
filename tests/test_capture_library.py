"""rpc_capture's trace tools called as a library (``trace info|cat|convert|slice`` are their CLI, in
test_trace_tools.py): summarize, Selection, call_lines, copy_trace; and rpc_capture importing only the stdlib."""

from __future__ import annotations

import fnmatch
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpc_capture import (C2S, S2C, Call, Recorder, Selection, TraceError, TraceWriter, call_lines, copy_trace,
                         format_summary, open_trace, output_format, summarize, write_jsonl)
from rpc_capture import trace as T
from rpcbench import fidelity as F
from strategies import calls as any_calls

REPO = Path(__file__).resolve().parent.parent
T0 = 1_700_000_000_000_000_000
METHODS = ("move", "move_fast", "hit", "chat")
CONNS = (7, 8, "bot-9")


def make_calls(n: int = 100) -> List[Call]:
    """``n`` calls 50 ms apart over four methods, three connections and both directions."""
    return [Call(METHODS[i % 4], {"i": i, "raw": bytes([i % 256])}, T0 + i * 50_000_000,
                 S2C if i % 3 == 0 else C2S, CONNS[i % 3]) for i in range(n)]


def write(path: Path, calls: List[Call], **meta: object) -> Path:
    with TraceWriter(path, dict(meta)) as w:
        for c in calls:
            w.write(c)
    return path


# ---------------------------------------------------------------------------------- Selection

small_calls = st.lists(st.builds(Call, method=st.sampled_from(METHODS), args=st.just([]),
                                 t=st.integers(T0, T0 + 10 * 10**9), dir=st.sampled_from([C2S, S2C]),
                                 conn=st.sampled_from(CONNS)), max_size=40)
seconds = st.none() | st.floats(0, 10, allow_nan=False)
names = st.none() | st.lists(st.sampled_from(METHODS + ("move*", "*")), min_size=1, max_size=2)


@settings(max_examples=200, deadline=None)
@given(small_calls, seconds, seconds, names, names, st.none() | st.lists(st.sampled_from(CONNS + ("7",)), max_size=2),
       st.none() | st.sampled_from([C2S, S2C]))
def test_selection_keeps_exactly_the_calls_matching_every_criterion(calls, start, end, methods, exclude, conns,
                                                                     direction) -> None:
    if start is not None and end is not None and end <= start:
        with pytest.raises(ValueError, match="not after start"):
            Selection(start, end)
        return
    chosen = Selection(start, end, methods, exclude, conns, direction)

    def keep(c: Call) -> bool:
        since = c.t - calls[0].t
        return ((start is None or since >= round(start * 1e9)) and (end is None or since < round(end * 1e9))
                and (methods is None or any(fnmatch.fnmatchcase(c.method, p) for p in methods))
                and not any(fnmatch.fnmatchcase(c.method, p) for p in exclude or ())
                and (conns is None or str(c.conn) in {str(x) for x in conns})
                and (direction is None or c.dir == direction))

    assert list(chosen(iter(calls))) == [c for c in calls if keep(c)]
    assert chosen.given == any(v is not None for v in (start, end, methods, exclude, conns, direction))


def test_selection_refuses_an_unknown_direction() -> None:
    with pytest.raises(ValueError, match="direction"):
        Selection(direction="up")


# ---------------------------------------------------------------------------------- summarize


def test_summarize_counts_calls_methods_connections_and_the_clean_end(tmp_path: Path) -> None:
    path = write(tmp_path / "t.rpct", make_calls(), game="test")
    summary = summarize(path)
    assert (summary.stats.calls, summary.format, summary.binary) == (100, f"rpctrace v{T.VERSION}", True)
    assert summary.stats.methods == {m: 25 for m in METHODS}
    assert summary.stats.connections == {7: 34, 8: 33, "bot-9": 33}
    assert (summary.stats.t_min, summary.stats.t_max) == (T0, T0 + 99 * 50_000_000)
    assert summary.file_bytes == path.stat().st_size and summary.metadata == {"game": "test"}
    assert summary.end_text() == "clean (end record present)" and summary.counters == {}
    text = format_summary(summary, top=2)
    assert "drops        unknown (no recorder counters in this trace)" in text
    assert "(2 more)" in text and "(1 more)" in text  # methods, connections beyond the top 2


def test_summarize_reports_the_recorders_drops(tmp_path: Path) -> None:
    path = tmp_path / "r.rpct"
    with Recorder(path, exclude=["chat"]) as rec:
        for i in range(30):
            rec.record("chat" if i % 3 == 0 else "move", {"i": i})
        rec.record("bad", {"x": object()})
    summary = summarize(path)
    assert summary.stats.calls == 20 == summary.counters["recorded"]
    assert summary.counters["offered"] == 31 and summary.counters["dropped_unrecordable"] == 1
    assert ("drops        1 calls dropped of 31 offered (unrecordable 1); not recorded by choice: filtered_out 10"
            in format_summary(summary))


def test_summarize_a_cut_trace_and_a_jsonl_one(tmp_path: Path) -> None:
    cut = write(tmp_path / "cut.rpct", make_calls(300))
    cut.write_bytes(cut.read_bytes()[:-200])
    summary = summarize(cut)
    assert summary.end is None and summary.truncated_bytes > 0 and summary.stats.calls == 256
    assert summary.end_text().startswith("MISSING") and "cut-off last record" in summary.end_text()
    jsonl = tmp_path / "t.jsonl"
    write_jsonl(make_calls(), jsonl)
    summary = summarize(jsonl)
    assert (summary.format, summary.binary, summary.stats.calls) == ("JSON Lines", False, 100)
    assert summary.end_text() == "- (JSON Lines has no end record)"


# ---------------------------------------------------------------------------------- call_lines


def test_call_lines_readable_and_jsonl(tmp_path: Path) -> None:
    calls = make_calls(10)
    text = list(call_lines(calls[3:], "x"))
    assert text[0] == f"{0:>12.6f}  s2c  {7:>8}  chat  {{'i': 3, 'raw': b'\\x03'}}\n"
    assert text[1].split()[0] == "0.050000"
    rows = [json.loads(line) for line in call_lines(calls, "x", jsonl=True)]
    assert [(r["t"], r["conn"], r["method"]) for r in rows] == [(c.t, c.conn, c.method) for c in calls]


def test_call_lines_names_the_call_without_a_json_form() -> None:
    calls = make_calls(2) + [Call("odd", {"s": {1, 2}}, T0, C2S, 1)]
    with pytest.raises(TraceError, match=r"src.rpct: call 3 \('odd'\) has no JSON Lines form"):
        list(call_lines(calls, "src.rpct", jsonl=True))


# ---------------------------------------------------------------------------------- copy_trace


@settings(max_examples=40, deadline=None)
@given(st.lists(any_calls(without=(F.INT_KEYS, F.TUPLES, F.NON_FINITE)), max_size=20))
def test_copy_trace_binary_to_jsonl_and_back_keeps_every_call(calls: List[Call]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src, jsonl, back = Path(tmp, "a.rpct"), Path(tmp, "a.jsonl"), Path(tmp, "b.rpct.gz")
        write(src, calls)
        assert copy_trace(open_trace(src), str(jsonl), fmt="jsonl") == len(calls)
        assert copy_trace(open_trace(jsonl), str(back)) == len(calls)
        assert back.read_bytes()[:2] == b"\x1f\x8b"  # .gz: gzip 6 unless told
        assert list(open_trace(back)) == calls
        assert not Path(tmp, "b.rpct.gz.part").exists()


def test_copy_trace_carries_the_recorders_counters_but_a_slice_does_not(tmp_path: Path) -> None:
    src = tmp_path / "r.rpct"
    with Recorder(src, metadata={"battle": 5}) as rec:
        for i in range(50):
            rec.record("move" if i % 2 else "hit", {"i": i})
    original = open_trace(src)
    calls = list(original)
    copy = tmp_path / "copy.rpct"
    copy_trace(open_trace(src), str(copy), compresslevel=0)
    reader = open_trace(copy)
    assert list(reader) == calls and reader.metadata["converted_from"] == "r.rpct"
    assert {k: v for k, v in reader.end.items() if k != "calls"} == {k: v for k, v in original.end.items()
                                                                   if k != "calls"}
    part = tmp_path / "part.rpct"
    assert copy_trace(open_trace(src), str(part), Selection(methods=["hit"])) == 25
    reader = open_trace(part)
    assert list(reader) == [c for c in calls if c.method == "hit"]
    assert reader.metadata["sliced_from"] == "r.rpct" and reader.end == {"calls": 25}


def test_copy_trace_leaves_nothing_when_a_call_has_no_json_form(tmp_path: Path) -> None:
    deep: list = []
    for _ in range(1500):  # the binary format records it (marshal goes to 2,000 levels), JSON stops at 1,000
        deep = [deep]
    src = write(tmp_path / "a.rpct", make_calls(3) + [Call("odd", deep, T0, C2S, 1)])
    with pytest.raises(TraceError, match="call 4"):
        copy_trace(open_trace(src), str(tmp_path / "a.jsonl"), fmt="jsonl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.rpct"]


@pytest.mark.parametrize("path, to, expected", [("x.jsonl", None, "jsonl"), ("X.JSON", None, "jsonl"),
                                                ("x.rpct.gz", None, "binary"), ("x.jsonl", "binary", "binary")])
def test_output_format_follows_the_extension_unless_told(path: str, to: Optional[str], expected: str) -> None:
    assert output_format(path, to) == expected


# ---------------------------------------------------------------------------------- standard library only


def test_rpc_capture_imports_only_the_standard_library() -> None:
    code = ("import sys; before = set(sys.modules); import rpc_capture; "
            "print(sorted({m.split('.')[0] for m in set(sys.modules) - before} - set(sys.stdlib_module_names)))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['rpc_capture']"
