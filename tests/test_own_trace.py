"""A team's own trace, first try: the default codecs on real game traffic nobody here wrote, and the output folder.

The trace is tests/data/minecraft_packets.jsonl (real Minecraft packets, MIT: see tests/data/minecraft_packets.md).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRACE = REPO / "tests" / "data" / "minecraft_packets.jsonl"
FAST = ["--sample", "100", "--repeat", "1", "--warmup", "1", "--min-time", "0.001", "--no-tails", "--no-memory",
        "--quiet"]


def run_bench(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)


def test_the_default_codecs_carry_a_foreign_trace_with_an_inferred_schema(tmp_path):
    out = tmp_path / "run"
    done = run_bench("--trace", TRACE, "--out", out, *FAST)
    assert done.returncode == 0, done.stderr
    results = json.loads((out / "results.json").read_text())
    undeclared = {r["codec"]: p for r in results["results"] for p in r["problems"] if not p["declared"]}
    assert undeclared == {}
    schema = results["trace"]["training"]["schema"]
    held = results["trace"]["training"]["held_out_calls"]
    assert held == 100 and results["trace"]["calls"] == 400  # the dictionary's: the first 20 % of 500
    assert schema["calls"] == 500  # the schema stands in for the team's .proto: every call of the trace
    proto = (out / "inferred.proto").read_text()
    assert proto == schema["proto"] and proto.count("\nmessage ") == schema["messages"]
    typed = [r for r in results["results"] if r["codec"].split("+")[0] in ("protobuf", "msgspec-struct")]
    assert len(typed) == 3 and all(r["sizes"] for r in typed)
    assert all(r["failures"] == 0 and r["calls"] == 400 for r in typed)  # every method and key in the schema
    assert f"schema inferred from every call of the trace (500 calls): {schema['messages']} messages; " \
           "written to inferred.proto" in " ".join(done.stdout.split())
    assert "400 of the trace's 500 recorded RPC calls measured" in (out / "report.md").read_text()
    assert "inferred.proto" in (out / "report.html").read_text()
    charts = run_bench("report", out, "--charts", tmp_path / "slides")
    assert charts.returncode == 0, charts.stderr
    names = sorted(p.name for p in (tmp_path / "slides").iterdir())
    assert "bytes.png" in names and "bytes.svg" in names and len(names) % 2 == 0
    assert all((tmp_path / "slides" / n).read_bytes().startswith(b"\x89PNG") for n in names if n.endswith(".png"))
    mode = stat.S_IMODE(os.stat(out).st_mode)
    assert mode & 0o055 == 0o055 & ~_umask()  # the umask's permissions, not a temporary folder's 700


def test_methods_that_first_appear_late_are_in_the_schema_and_every_card_codec_in_the_verdict(tmp_path):
    """The Minecraft capture sessions one after another, oldest game version first (as a server upgraded over
    time records them): 27 calls of 10 methods first appear after the 20 % held out for the dictionary. The
    schema is inferred from every call, so protobuf, protobuf+zlib-1 and msgspec-struct carry all 400 measured
    calls and are compared in the verdict, not set aside as "not compared"."""
    lines = TRACE.read_text(encoding="utf-8").splitlines()
    version = [tuple(int(p) for p in json.loads(line)["conn"].split(".")) for line in lines]
    late = tmp_path / "sessions.jsonl"
    late.write_text("\n".join(line for _, line in sorted(zip(version, lines), key=lambda pair: pair[0])) + "\n")
    held = {json.loads(line)["method"] for line in late.read_text().splitlines()[:100]}
    assert len({json.loads(line)["method"] for line in late.read_text().splitlines()} - held) == 10
    out = tmp_path / "run"
    done = run_bench("--trace", late, "--codecs", "json,protobuf,protobuf+zlib-1,msgspec-struct,json+zstddict-3",
                     "--out", out, *FAST)
    assert done.returncode == 0, done.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["trace"]["calls"] == 400 and results["trace"]["training"]["schema"]["calls"] == 500
    typed = {r["codec"]: r for r in results["results"] if r["codec"] != "json" and "zstddict" not in r["codec"]}
    assert all((r["calls"], r["failures"]) == (400, 0) for r in typed.values()), typed
    for text in (done.stdout, (out / "report.md").read_text()):
        assert "not compared" not in text


def test_a_coverage_short_of_every_call_never_reads_100_percent():
    from rpcbench.reports.coverage import Coverage

    assert Coverage("protobuf", 41_100, 41_114, ()).text() == "carries 41,100 of 41,114 calls (99.97%)"
    assert Coverage("protobuf", 2_441, 2_675, ()).text() == "carries 2,441 of 2,675 calls (91.3%)"
    assert Coverage("protobuf", 400, 400, ()).text() == "carries 400 of 400 calls (100%)"


def test_a_proto_of_the_users_own_keeps_priority(tmp_path):
    proto = tmp_path / "mine.proto"
    proto.write_text('syntax = "proto3";\nmessage keep_alive { int64 keepAliveId = 1; }\n')
    done = run_bench("--trace", TRACE, "--codecs", "json,protobuf", "--proto", proto, "--sizes-only", "--no-report",
                     "--out", tmp_path / "run", "--quiet")
    assert done.returncode == 0, done.stderr
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["trace"].get("training") is None  # nothing held out: no dictionary, no inference
    protobuf = next(r for r in results["results"] if r["codec"] == "protobuf")
    assert protobuf["by_method"].keys() == {"keep_alive"}
    assert not (tmp_path / "run" / "inferred.proto").exists()


def test_an_out_folder_holding_files_is_refused_without_force(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text("an earlier run")
    args = ["--trace", TRACE, "--codecs", "json", "--sizes-only", "--no-report", "--out", out, "--quiet"]
    refused = run_bench(*args)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "not empty" in refused.stderr and "--force" in refused.stderr
    assert (out / "results.json").read_text() == "an earlier run"
    assert run_bench(*args, "--force").returncode == 0
    assert json.loads((out / "results.json").read_text())["trace"]["calls"] == 500


def test_a_t_hundreds_of_digits_long_is_one_line_naming_the_line(tmp_path):
    trace = tmp_path / "long_t.jsonl"
    trace.write_text('{"t": 1, "method": "a", "args": {}}\n{"t": ' + "9" * 400 + ', "method": "a", "args": {}}\n')
    done = run_bench("--trace", trace, "--codecs", "json", "--sizes-only", "--out", tmp_path / "run", "--quiet")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "line 2" in done.stderr and '"t"' in done.stderr and "Traceback" not in done.stderr


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_mistyped_codec_or_command_gets_a_suggestion_and_the_codec_list_fits_100_columns():
    codec = run_bench("--codecs", "jsn,json+zstdstrem-3", "--sizes-only", "--quiet", "--trace", TRACE)
    assert codec.returncode == 2 and "did you mean 'json'?" in codec.stderr
    compressor = run_bench("--codecs", "json+zstdstrem-3", "--sizes-only", "--quiet", "--trace", TRACE)
    assert compressor.returncode == 2 and "did you mean 'zstdstream'?" in compressor.stderr
    command = run_bench("compar", "a", "b")
    assert command.returncode == 2 and command.stderr.strip().splitlines() == [
        command.stderr.strip()] and "did you mean 'compare'?" in command.stderr
    listed = run_bench("--list-codecs")
    assert listed.returncode == 0 and all(len(line) <= 100 for line in listed.stdout.splitlines())
    assert "``" not in listed.stdout and "  json               stdlib     " in listed.stdout
