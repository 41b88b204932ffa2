"""Hostile and unusual input, one test per case of issue 11: never lose a recording, never crash on a trace.

Every file here is real and on disk; the CLI is run end to end where the case is about it.
"""

from __future__ import annotations

import gzip
import json
import marshal
import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rpc_capture import Call, Recorder, TraceError, TraceReader, TraceWriter, open_trace
from rpc_capture import trace as T
from rpc_capture import values as V
from rpcbench import fidelity
from rpcbench.commands import main as cli_main
from rpcbench.tally import CodecTally, check_call
from rpcbench.registry import Registry
from rpcbench.results import load

REPO = Path(__file__).resolve().parent.parent
FAST = ["--repeat", "1", "--warmup", "1", "--min-time", "0.001", "--quiet", "--processes", "0", "--no-report"]


def run_bench(*args):
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *map(str, args)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)


def one_line_error(proc, code=2):
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def write_trace(path, n=1000):
    with TraceWriter(path) as w:
        for i in range(n):
            w.write(Call("move", {"i": i, "pad": "x" * 20}, i, "c2s", i % 3))
    return path


def record_starts(data):
    at, starts = T._FILE_HEAD.size + T._FILE_HEAD.unpack_from(data)[2], []
    while at < len(data):
        starts.append(at)
        at += T._REC_HEAD.size + T._REC_HEAD.unpack_from(data, at)[1] + 4
    return starts


# ------------------------------------------------------------------- 1. data loss in capture


def test_self_containing_args_are_rejected_with_a_reason_and_the_recording_stays_readable(tmp_path):
    looped_list = [1]
    looped_list.append(looped_list)
    looped_dict = {"a": 1}
    looped_dict["me"] = looped_dict
    deep = 0
    for _ in range(V.MAX_DEPTH + 5):
        deep = [deep]
    rec = Recorder(tmp_path / "r.rpct")
    for i in range(300):
        rec.record("ok", {"i": i})
        if i in (10, 200):
            rec.record("cycle", looped_list)
            rec.record("cycle", {"x": looped_dict})
            rec.record("deep", deep)
    stats = rec.close()
    assert stats["recorded"] == 300 and stats["dropped_unrecordable"] == 6
    assert stats["unrecordable_reasons"] == {"cycle or nesting too deep": 6}
    reader = TraceReader(tmp_path / "r.rpct")
    assert [c.args["i"] for c in reader] == list(range(300))
    assert reader.end["recorded"] == 300 and reader.end["dropped_unrecordable"] == 6


CHILD_FSIZE = r"""
import json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (60_000, 60_000))
from rpc_capture import Recorder
rec = Recorder(sys.argv[1], flush_interval=60, compresslevel=int(sys.argv[2]) or None)
for i in range(20000):
    rec.record("move", {"i": i, "pad": "x" * 40})
print(json.dumps(rec.close()))
"""


@pytest.mark.skipif(not hasattr(os, "setrlimit") and sys.platform != "linux", reason="needs RLIMIT_FSIZE")
@pytest.mark.parametrize("level", [0, 1])
def test_counts_match_the_disk_exactly_after_a_real_write_error(tmp_path, level):
    """The file size limit makes a real write fail mid-recording, with calls still in buffers."""
    path = tmp_path / "r.rpct"
    out = subprocess.run([sys.executable, "-c", CHILD_FSIZE, str(path), str(level)], cwd=REPO,
                         capture_output=True, text=True, timeout=120, check=True)
    stats = json.loads(out.stdout)
    assert stats["error"] and stats["dropped_write_error"] > 0
    on_disk = sum(1 for _ in open_trace(path))
    assert stats["recorded"] == on_disk
    assert stats["recorded"] + stats["dropped_write_error"] == 20000


def test_a_bit_flip_in_a_length_field_is_corruption_at_an_offset_not_truncation(tmp_path):
    path = write_trace(tmp_path / "t.rpct")
    data = bytearray(path.read_bytes())
    at = record_starts(data)[2]  # a batch early in the file: its new length runs past the end
    data[at + 3] ^= 0x20
    path.write_bytes(bytes(data))
    with pytest.raises(TraceError, match=rf"t.rpct: byte offset {at}: record length \d+ runs past the end"):
        list(TraceReader(path))
    line = one_line_error(run_bench("trace", "info", path))
    assert f"byte offset {at}" in line and "--salvage" in line


def test_salvage_skips_the_damaged_record_and_says_how_many_calls_were_lost(tmp_path):
    path = write_trace(tmp_path / "t.rpct")
    data = bytearray(path.read_bytes())
    at = record_starts(data)[3]
    data[at + 20] ^= 0x01  # inside the body of the fourth batch: its checksum fails
    path.write_bytes(bytes(data))
    reader = TraceReader(path, salvage=True)
    got = [c.args["i"] for c in reader]
    assert got == list(range(384)) + list(range(512, 1000))
    assert reader.skipped == [(at, record_starts(data)[4] - at)]
    assert reader.dropped_calls() == 128
    proc = run_bench("trace", "info", "--salvage", path)
    assert proc.returncode == 0 and "losing 128 call(s)" in proc.stdout, proc.stdout + proc.stderr
    proc = run_bench("--trace", path, "--codecs", "json", "--salvage", "--out", tmp_path / "out", *FAST)
    assert proc.returncode == 0 and "losing 128 call(s)" in proc.stderr, proc.stderr
    assert json.loads((tmp_path / "out" / "results.json").read_text())["trace"]["calls"] == 872


# -------------------------------------------------------------- 2. legal but unusual values


def nested(depth):
    value = 1
    for _ in range(depth):
        value = [value]
    return value


def test_deeply_nested_args_are_compared_and_reported_not_a_crash(tmp_path):
    deep = nested(1500)
    assert fidelity.compare(Call("m", deep), Call("m", nested(1500))) is None
    diff = fidelity.compare(Call("m", deep), Call("m", nested(1499)))
    assert diff.feature == fidelity.OTHER and diff.path.startswith("args[0][0]")
    assert fidelity.features_of({"a": nested(1500)}) == set()
    path = tmp_path / "deep.rpct"
    with TraceWriter(path) as w:
        for i in range(5):
            w.write(Call("deep", {"v": nested(1000 + i)}))
            w.write(Call("flat", {"i": i}))
    proc = run_bench("--trace", path, "--codecs", "json,bson,msgpack", "--out", tmp_path / "out", *FAST)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    results = {r["codec"]: r for r in json.loads((tmp_path / "out" / "results.json").read_text())["results"]}
    assert all(r["calls"] + r["failures"] == 10 for r in results.values())


def test_deeply_nested_args_print_and_convert_without_a_traceback(tmp_path, capsys):
    path = tmp_path / "deep.rpct"
    with TraceWriter(path) as w:
        w.write(Call("deep", {"v": nested(1500)}))
    assert cli_main(["trace", "cat", str(path)]) == 0
    assert "deep  {'v': [[[[" in capsys.readouterr().out
    assert cli_main(["trace", "convert", str(path), str(tmp_path / "deep.jsonl")]) == 2
    assert "call 1 ('deep') has no JSON Lines form: args nested too deeply" in capsys.readouterr().err


def test_odd_dict_keys_are_a_failure_of_the_codec_that_cannot_carry_them(tmp_path):
    path = tmp_path / "keys.rpct"
    with TraceWriter(path) as w:
        for i in range(6):
            w.write(Call("odd", {b"raw": 1, 2.5: 2, None: 3, True: 4, (1, 2): 5, frozenset({1}): 6}))
            w.write(Call("plain", {"i": i}))
    registry = Registry.default([])
    tallies = [CodecTally(registry.create(cid)) for cid in ("bson", "json", "msgpack")]
    for index, call in enumerate(open_trace(path)):
        check_call(tallies, index, call)
    bson_tally = tallies[0]
    assert bson_tally.failures == 6 and sum(bson_tally.sizes.values()) == 6
    proc = run_bench("--trace", path, "--codecs", "bson,json,msgpack", "--out", tmp_path / "out", *FAST)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


# ------------------------------------------------------------------------ 3. cost blow-ups


def batch_body(args):
    return marshal.dumps([("m", args, 0, "c2s", 0)], 4)


def test_long_integers_decode_in_linear_time():
    big = (7 << (15 * 300_000)) + 12345  # one int of 4.5 million bits: 600 KB of trace
    body = batch_body([big, -big])
    started = time.perf_counter()
    value, end = V.load(body)
    assert end == len(body) and value[0][1] == [big, -big]
    assert time.perf_counter() - started < 5  # the quadratic rebuild took ~20-50 s; now well under 1


def test_many_colliding_dict_keys_are_refused_quickly():
    keys = [i * ((1 << 61) - 1) for i in range(20000)]  # every one hashes to 0
    body = batch_body(dict.fromkeys(keys, 0))
    started = time.perf_counter()
    with pytest.raises(ValueError, match=f"more than {V.MAX_SAME_HASH} keys of one dict share a hash"):
        V.load(body)
    assert time.perf_counter() - started < 10
    assert V.load(batch_body(dict.fromkeys(keys[:V.MAX_SAME_HASH], 0)))[0][0][1] == dict.fromkeys(keys[:32], 0)


def test_back_reference_expansion_bombs_are_refused_by_reader_and_writer(tmp_path, monkeypatch):
    big = list(range(1000))
    bomb = [[big] * 1000] * 100  # ~10 KB of marshal, 500 MB written out
    started = time.perf_counter()
    with pytest.raises(ValueError, match="back-references expand the record beyond"):
        V.load(batch_body(bomb))
    assert time.perf_counter() - started < 5
    monkeypatch.setattr(V, "MAX_EXPANDED", 1 << 20)  # the writer measures the expansion: keep it small here
    bomb = [[big] * 100] * 10  # 5 MB written out
    rec = Recorder(tmp_path / "r.rpct")
    rec.record("bomb", bomb)
    rec.record("ok", 1)
    stats = rec.close()
    assert stats["recorded"] == 1 and stats["unrecordable_reasons"] == {"too big": 1}
    assert [c.method for c in open_trace(tmp_path / "r.rpct")] == ["ok"]


def test_a_gzip_trace_that_expands_beyond_the_ratio_limit_is_refused(tmp_path):
    path = tmp_path / "bomb.rpct.gz"
    with gzip.open(path, "wb", compresslevel=9) as f:  # 40 MB of (skipped) records of a future kind in ~40 KB
        f.write(T._FILE_HEAD.pack(T.MAGIC, 2, 2) + b"{}" + T._frame(ord("X"), bytes(1 << 20)) * 40)
    started = time.perf_counter()
    with pytest.raises(TraceError, match=f"expands more than {T.MAX_GZIP_RATIO}x"):
        sum(1 for _ in open_trace(path))
    assert time.perf_counter() - started < 30


# -------------------------------------------------------------- 4. tracebacks instead of errors


def test_deeply_nested_json_header_is_a_clean_error(tmp_path):
    header = b"[" * 100000 + b"]" * 100000
    path = tmp_path / "h.rpct"
    path.write_bytes(T.MAGIC + struct.pack("<HI", 2, len(header)) + header)
    with pytest.raises(TraceError, match="byte offset 14: header is not UTF-8 JSON"):
        TraceReader(path)
    one_line_error(run_bench("trace", "info", path))


@pytest.mark.parametrize("line", [
    '{"method": "m", "args": 1, "t": 1e400}',
    '{"method": "m", "args": {"a": 1e400}, "t": 1' + "0" * 5000 + "}",
    '{"method": "m", "args": ' + "[" * 100000 + "]" * 100000 + "}",
], ids=["t 1e400", "5000-digit t", "deep args"])
def test_odd_json_lines_are_one_line_errors(tmp_path, line):
    path = tmp_path / "t.jsonl"
    path.write_text('{"method": "ok", "args": 1}\n' + line + "\n")
    one_line_error(run_bench("trace", "info", path))


def test_lone_surrogates_go_through_run_report_and_conversion(tmp_path):
    path = tmp_path / "s.rpct"
    with TraceWriter(path) as w:
        for i in range(5):
            w.write(Call("m\udc00<b>", {"s": "\ud800x", "i": i}, i, "c2s", "\udfff"))
    proc = run_bench("--trace", path, "--codecs", "json,bson", "--out", tmp_path / "out",
                     *[a for a in FAST if a != "--no-report"])
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert load(str(tmp_path / "out")).results[0].problems[0].example_method == "m\udc00<b>"
    assert "m&lt;b&gt;" in (tmp_path / "out" / "report.html").read_text().replace("\ufffd", "").replace("&#56320;", "")
    for command in (["trace", "info", path], ["trace", "cat", path], ["trace", "convert", path, tmp_path / "s.jsonl"]):
        proc = run_bench(*command)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert [c.method for c in open_trace(tmp_path / "s.jsonl")] == ["m\udc00<b>"] * 5


def test_a_json_lines_line_over_the_limit_is_refused_without_reading_it_whole(tmp_path):
    from rpc_capture.jsonl import MAX_LINE

    path = tmp_path / "long.jsonl"
    with open(path, "wb") as f:
        f.write(b'{"method": "ok", "args": 1}\n{"method": "m", "args": "')
        f.write(b"x" * (MAX_LINE + 10))
        f.write(b'"}\n')
    with pytest.raises(TraceError, match=rf"line 2 \(byte offset 28\): longer than {MAX_LINE} bytes"):
        list(open_trace(path))
    one_line_error(run_bench("trace", "info", path))


@pytest.fixture(scope="module")
def results_text(tmp_path_factory):
    """The results.json of a real (small) run."""
    folder = tmp_path_factory.mktemp("run")
    proc = run_bench("--trace", write_trace(folder / "t.rpct", 50), "--codecs", "json", "--out", folder / "out", *FAST)
    assert proc.returncode == 0, proc.stderr
    return (folder / "out" / "results.json").read_text()


@pytest.mark.parametrize("damage", ["empty", "truncated", "retyped", "field removed", "not json", "floor retyped",
                                    "floor field removed", "floor estimate retyped", "dictionary retyped",
                                    "method figure renamed", "direction figure renamed", "zero mean size"])
def test_report_on_a_damaged_results_file_is_one_line(tmp_path, results_text, damage):
    path = tmp_path / "results.json"
    text = results_text
    data = json.loads(text)
    if damage == "empty":
        text = ""
    elif damage == "truncated":
        text = text[: len(text) // 2]
    elif damage == "retyped":
        data["results"][0]["encode"]["rounds_ns"] = "fast"
        data["trace"]["methods"] = {"move": "many"}
        text = json.dumps(data)
    elif damage == "field removed":
        del data["results"][0]["sizes"]
        text = json.dumps(data)
    elif damage.startswith("floor"):  # schema 3: the floor the table's footnote quotes
        assert data["trace"]["floor"]["bytes_per_call"] > 0
        if damage == "floor retyped":
            data["trace"]["floor"]["compressor"] = 9
        elif damage == "floor estimate retyped":  # the estimate's interval, which the footnote quotes
            data["trace"]["floor"]["ci_half_width"] = "narrow"
        else:
            del data["trace"]["floor"]["of_calls"]
        text = json.dumps(data)
    elif damage == "dictionary retyped":
        data["results"][0]["dictionary"] = 5
        text = json.dumps(data)
    elif damage.endswith("renamed"):  # found by bench/fuzz.py: a KeyError deep in the reports
        part = data["results"][0]["by_method" if damage.startswith("method") else "by_direction"]
        figures = next(iter(part.values()))
        figures["bytez"] = figures.pop("bytes")
        text = json.dumps(data)
    elif damage == "zero mean size":  # found by bench/fuzz.py: a ZeroDivisionError in every ratio
        data["results"][0]["sizes"]["mean"] = 0.0
        text = json.dumps(data)
    else:
        text = "\x00\xff garbage"
    path.write_text(text)
    line = one_line_error(run_bench("report", path))
    assert str(path) in line


def test_an_unwritable_output_folder_is_refused_before_the_run(tmp_path):
    target = "/proc/self/rpcbench-out" if os.path.isdir("/proc/self") else str(tmp_path / "file" / "x")
    (tmp_path / "file").write_text("")
    started = time.perf_counter()
    line = one_line_error(run_bench("--out", target, "--codecs", "json", *FAST))
    assert "cannot write to output folder" in line
    line = one_line_error(run_bench("--out", "/proc/self", "--force", "--codecs", "json", "--trace", write_trace(
        tmp_path / "t.rpct", 10), *FAST)) if os.path.isdir("/proc/self") else line
    assert "cannot write to output folder" in line
    assert time.perf_counter() - started < 120


def test_a_codec_path_that_is_not_python_is_refused():
    line = one_line_error(run_bench("--codec-path", "/etc/passwd", "--list-codecs"))
    assert "codec file /etc/passwd is not a Python file" in line


def test_a_bom_and_a_cut_last_line_do_not_refuse_the_whole_json_lines_file(tmp_path, caplog):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"method": "a", "args": 1}\n{"method": "b", "args": [2]}\n{"method": "c", "ar')
    reader = open_trace(path)
    assert [c.method for c in reader] == ["a", "b"] and reader.truncated_bytes == 19
    proc = run_bench("trace", "info", path)
    assert proc.returncode == 0 and "calls        2" in proc.stdout, proc.stdout + proc.stderr
    path.write_bytes(b'{"method": "a", "args": 1}\nnot json at all\n{"method": "c", "args": 3}\n')
    with pytest.raises(TraceError, match=r"line 2 \(byte offset 27\)"):
        list(open_trace(path))
    salvaged = open_trace(path, salvage=True)
    assert [c.method for c in salvaged] == ["a", "c"] and salvaged.dropped_calls() == 1


# ---------------------------------------------------------- 5. arguments that must be refused


@pytest.mark.parametrize("args", [
    ["--min-time", "nan"], ["--min-time", "inf"], ["--min-time", "0"], ["--budget", "nan"], ["--budget", "-5"],
    ["--processes", "1000000000"], ["--jobs", "100000000"], ["--processes", "-1"], ["--sample", "1e9"],
    ["--repeat", "10000000000"],
])
def test_insane_numbers_are_refused_with_one_line(args, capsys):
    started = time.perf_counter()
    with pytest.raises(SystemExit) as exit_:
        cli_main([*args, "--codecs", "json"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if "error" in line]
    assert line.startswith("run_bench.py: error: argument " + args[0]) and "Traceback" not in err
    assert time.perf_counter() - started < 60



#: marshal data that C ``marshal.loads`` must never see: on CPython 3.11 the first two crash the
#: interpreter (a tuple whose set item, or dict key, is the tuple itself while it is being built),
#: the third makes it allocate and zero 2 GB, the fourth is a code object
CRAFTED_MARSHAL = {
    "segfault via a set": b"\xa9\x01<\x01\x00\x00\x00r\x00\x00\x00\x00",
    "segfault via a dict key": b"\xa9\x02{r\x00\x00\x00\x00N0N",
    "2 GB tuple": b"(\x00\x00\x00\x10",
    "code object": marshal.dumps([("m", compile("1", "x", "eval"), 0, "c2s", 0)]),
}


@pytest.mark.parametrize("name", CRAFTED_MARSHAL)
@pytest.mark.parametrize("forgery", ["zero tag", "tag of other bytes", "tag under another key"])
def test_crafted_marshal_behind_a_forged_tag_is_one_line_exit_2(tmp_path, monkeypatch, name, forgery):
    """Version 3 batch records holding bytes that crash, bloat or build code in ``marshal.loads``:
    without a tag made under the reader's key, they go to the safe decoder and are refused."""
    from rpc_capture import keys as K
    data = CRAFTED_MARSHAL[name]
    reader_key = bytes(range(32))
    monkeypatch.setenv(K.ENV, reader_key.hex())  # the CLI's key, below
    tag = {"zero tag": bytes(K.TAG_SIZE), "tag of other bytes": K.tag(b"[\x00\x00\x00\x00", reader_key),
           "tag under another key": K.tag(data, bytes(32))}[forgery]
    path = tmp_path / "crafted.rpct"
    path.write_bytes(T._FILE_HEAD.pack(T.MAGIC, 3, 2) + b"{}" + T._frame(T.KIND_BATCH, tag + data))
    line = one_line_error(run_bench("trace", "info", path))
    assert f"{path}: byte offset 16: malformed batch record" in line


def test_the_same_crafted_bytes_under_the_readers_own_key_would_reach_marshal(tmp_path, monkeypatch):
    """The other side of the test above: the tag is the only gate (so the key must stay secret)."""
    from rpc_capture import keys as K
    monkeypatch.setenv(K.ENV, bytes(range(32)).hex())
    monkeypatch.setattr(K, "_cache", {})
    data = CRAFTED_MARSHAL["code object"]
    path = tmp_path / "signed.rpct"
    path.write_bytes(T._FILE_HEAD.pack(T.MAGIC, 3, 2) + b"{}"
                     + T._frame(T.KIND_BATCH, K.tag(data, bytes(range(32))) + data))
    [call] = list(TraceReader(path))
    assert type(call.args).__name__ == "code"


def test_the_fuzz_seed_calls_through_the_default_codecs_give_figures_not_a_traceback(tmp_path):
    """The fuzz campaign's legal but unusual calls (tests/mutations.py: nesting 300 deep, odd keys, huge ints, a
    method named with a lone surrogate, NaN) through every default codec, the typed ones too: their schema is
    inferred (a method name UTF-8 cannot carry is escaped in its comment, a .proto being UTF-8) and each codec's
    trouble with the calls is its own."""
    import mutations

    path = tmp_path / "hostile.rpct"
    with TraceWriter(path) as w:
        for call in mutations.hostile_calls():
            w.write(call)
    proc = run_bench("--trace", path, "--out", tmp_path / "out", *FAST)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert '// rpcbench-method: "text\\ud800"' in (tmp_path / "out" / "inferred.proto").read_text(encoding="utf-8")
    suite = json.loads((tmp_path / "out" / "results.json").read_text())
    assert all(r["calls"] + r["failures"] == 112 for r in suite["results"])  # 140 calls, the first 20 % held out
    assert "text\ud800" in suite["trace"]["methods"]
