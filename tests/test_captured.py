"""The ``captured`` row on real captures: the example battle played over length-prefixed TCP, WebSocket (plain and
permessage-deflate) and UDP, recorded by tcpdump (tests/data/captures, examples/record_capture.py), with the log of
every message each side sent. The row's bytes are what the programs sent, it is the reference, and the wire
model is checked against the capture's packet count in every output."""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

from rpc_capture import Call, TraceWriter, open_trace
from rpcbench.captured import CAPTURED, capture_of, server_deflate
from rpcbench.config import RunConfig
from rpcbench.pipeline import run_benchmark
from reports import captured as capture_check
from reports.decision import decide
from reports.html import render_report
from reports.markdown import render_markdown
from reports.terminal import terminal_text

REPO = Path(__file__).resolve().parent.parent
CAPTURES = REPO / "tests" / "data" / "captures"
TRANSPORTS = ("tcp", "ws", "ws-deflate", "udp")
FRAMINGS = {"tcp": "u32", "ws": "websocket", "ws-deflate": "websocket", "udp": "udp"}
PORTS = {"tcp": 47771, "ws": 47772, "ws-deflate": 47773, "udp": 47774}


def sent_log(path: Path) -> List[Dict[str, Any]]:
    """What the programs logged they sent: one dict per message, payload and wire as bytes."""
    entries = [json.loads(line) for line in gzip.decompress(path.read_bytes()).splitlines()]
    for e in entries:
        e["payload"] = base64.b64decode(e["payload"])
        e["wire"] = base64.b64decode(e["wire"]) if "wire" in e else e["payload"]
    return entries


def trace_from_log(transport: str, out: Path, packets: Dict[str, int],
                   keep: Callable[[int], bool] = lambda index: True) -> List[Dict[str, Any]]:
    """A trace as an import of the capture would give (calls with their captured bytes, the header's capture
    facts), built from the senders' own log: the row under test, independent of the importer. ``keep``: which
    messages of the log (by position) the capture holds."""
    log = [e for i, e in enumerate(sent_log(CAPTURES / f"battle-{transport}.sent.jsonl.gz")) if keep(i)]
    capture = {"file": f"battle-{transport}.pcap", "framing": FRAMINGS[transport],
               "deflate": transport == "ws-deflate", "server_port": PORTS[transport], "decode": "json",
               "method_field": "m", "args_field": "a", "packets": packets, "messages": len(log)}
    with TraceWriter(out, metadata={"capture": capture}) as trace:
        for i, e in enumerate(log):
            message = json.loads(e["payload"])
            trace.write(Call(message["m"], message["a"], 10**18 + i * 1_000_000, e["dir"], e["client_port"],
                             e["wire"]))
    return log


def import_capture(transport: str, out: Path) -> subprocess.CompletedProcess:
    """``run_bench.py import`` of a committed capture, as a user types it."""
    pcap = CAPTURES / f"battle-{transport}.pcap"
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), "import", str(pcap), "--server-port",
                           str(PORTS[transport]), "--framing", FRAMINGS[transport], "--decode", "json",
                           "--method-field", "m", "--args-field", "a", "--out", str(out)],
                          capture_output=True, text=True, cwd=REPO, timeout=300)


def run(trace: Path, codecs=("json", "msgpack")) -> Any:
    return run_benchmark(RunConfig(trace=str(trace), codecs=codecs, sizes_only=True, memory=False, tails=False,
                                   floor=False, jobs=0))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_captured_row_is_what_the_programs_sent(transport: str, tmp_path: Path) -> None:
    trace = tmp_path / "battle.rpct"
    log = trace_from_log(transport, trace, {"c2s": 0, "s2c": 0})
    assert capture_of(str(trace))["framing"] == FRAMINGS[transport]
    suite = run(trace)
    row = suite.find(CAPTURED)
    assert suite.results[0].codec == CAPTURED  # added first, though --codecs did not name it
    assert row.calls == len(log) and row.failures == 0 and row.mismatches == 0
    assert row.sizes.total == sum(len(e["wire"]) for e in log)
    assert row.ordered_delivery is (transport == "ws-deflate")  # a deflate stream per connection and direction
    if transport == "ws-deflate":  # compressed on the wire: fewer bytes than the messages themselves
        assert row.sizes.total < sum(len(e["payload"]) for e in log)
    d = decide(suite)
    assert d.reference == CAPTURED and "packet capture" in d.reference_note


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_import_gives_back_every_message_sent(transport: str, tmp_path: Path) -> None:
    """Each connection and direction's calls are the messages its sender logged, in order: method, args and the
    bytes on the wire; the captured row built on them is those bytes and decodes every call back."""
    trace = tmp_path / "imported.rpct"
    done = import_capture(transport, trace)
    assert done.returncode == 0, done.stderr
    log = sent_log(CAPTURES / f"battle-{transport}.sent.jsonl.gz")
    calls = list(open_trace(trace))
    streams = sorted({(e["dir"], f"127.0.0.1:{e['client_port']}") for e in log})
    assert sorted({(c.dir, c.conn) for c in calls}) == streams and len(streams) == 4  # 2 bots, both ways
    for direction, conn in streams:
        got = [(c.method, c.args, c.wire) for c in calls if (c.dir, c.conn) == (direction, conn)]
        sent = [(e["method"], json.loads(e["payload"])["a"], e["wire"]) for e in log
                if (e["dir"], f"127.0.0.1:{e['client_port']}") == (direction, conn)]
        assert got == sent
    capture = capture_of(str(trace))
    assert capture["messages"] == len(log) and capture["undecoded"] == capture["partial_dropped"] == 0
    row = run(trace).find(CAPTURED)
    assert row.calls == len(log) and row.failures == row.mismatches == 0
    assert row.sizes.total == sum(len(e["wire"]) for e in log)


def test_the_cli_end_to_end_on_an_imported_capture(tmp_path: Path) -> None:
    """Import, run, report: the captured row first and the reference, the wire model checked in every output."""
    trace, out = tmp_path / "battle.rpct", tmp_path / "results"
    assert import_capture("ws-deflate", trace).returncode == 0
    done = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "--trace", str(trace), "--codecs",
                           "json,msgpack+zstdstream-3", "--out", str(out), "--repeat", "2", "--sample", "100",
                           "--no-tails", "--no-memory"], capture_output=True, text=True, cwd=REPO, timeout=600,
                          env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    results = json.loads((out / "results.json").read_text())
    assert [r["codec"] for r in results["results"]] == ["captured", "json", "msgpack+zstdstream-3"]
    log = sent_log(CAPTURES / "battle-ws-deflate.sent.jsonl.gz")
    assert results["results"][0]["sizes"]["total"] == sum(len(e["wire"]) for e in log)
    text = " ".join(done.stdout.split())
    line = ("Wire model vs the packet capture (per-call, websocket): c2s 38 modelled / 42 captured (-9.5%), s2c 237 "
            "modelled / 241 captured (-1.7%); off by more than 5%: the capture has more packets than messages")
    assert "x captured" in text and line in text  # 4 more each way: the upgrade and the close frames
    assert line in (out / "report.md").read_text() and line.replace("'", "&#39;") in (out / "report.html").read_text()


@pytest.mark.parametrize("transport", ["tcp", "udp"])
def test_the_wire_model_agrees_with_a_real_capture(transport: str, tmp_path: Path) -> None:
    """One message per segment (asyncio sends each write at once, TCP_NODELAY) or datagram: the per-call model
    makes exactly the capture's packets; with the first fifth of the calls held out to train a dictionary (the
    default run's json+zstddict-3), the model's packets are scaled to the whole trace and still agree."""
    trace = tmp_path / "imported.rpct"
    assert import_capture(transport, trace).returncode == 0
    check = decide(run(trace)).capture
    assert check.agrees and all(d.modelled == d.captured for d in check.directions)
    assert "(+0.0%)" in check.line and check.line.endswith("within 5%.")
    held_out = decide(run(trace, ("json", "json+zstddict-3"))).capture
    measured, calls = held_out.measured
    assert calls == check.directions[0].captured + check.directions[1].captured and 0.7 < measured / calls < 0.9
    assert held_out.agrees and f"scaled from the {measured:,} calls measured" in held_out.line


def test_the_server_deflate_found_gives_back_every_message_it_sent(tmp_path: Path) -> None:
    """The level and window found on the first messages of the server's first connection, through the compressor
    the row times, give back byte for byte every message the server sent on every connection: websockets'
    2**12 window at zlib's default level (6; 7-9 make the same bytes on these messages)."""
    trace = tmp_path / "battle.rpct"
    log = trace_from_log("ws-deflate", trace, {"c2s": 0, "s2c": 0})
    found = server_deflate(str(trace))
    assert found == {"level": 6, "window_bits": 12, "reproduced": [6, 7, 8, 9], "messages": 50}
    stream = RunConfig().registry().compressors["zlibstream"]
    for conn in sorted({e["client_port"] for e in log}):
        sent = [e for e in log if e["dir"] == "s2c" and e["client_port"] == conn]
        server = stream(found["level"], window_bits=found["window_bits"]).connection()
        assert [server.compress(e["payload"]) for e in sent] == [e["wire"] for e in sent] and len(sent) > 100
    late = tmp_path / "late.rpct"  # the capture started after the first messages: their context is missing
    trace_from_log("ws-deflate", late, {"c2s": 0, "s2c": 0}, keep=lambda index: index >= 20)
    assert server_deflate(str(late)) == {"level": 6, "window_bits": 15, "reproduced": [], "messages": 50}


@pytest.mark.parametrize("transport, work", [("tcp", "json"), ("ws-deflate", "json+zlibstream-6")])
def test_captured_is_timed_as_the_server_works_today(transport: str, work: str, tmp_path: Path) -> None:
    """The row's CPU is the game's codec (plus the server's deflate stream), run over the timing sample in order;
    so it is a baseline the verdict counts cores for, and keeps when no codec is cheaper (json's 3x bytes are
    not, on the deflate capture)."""
    trace = tmp_path / "battle.rpct"
    trace_from_log(transport, trace, {"c2s": 0, "s2c": 0})
    suite = run_benchmark(RunConfig(trace=str(trace), codecs=("json",), repeat=3, min_time=0.002, processes=0,
                                    sample=120, memory=False, tails=False, floor=False, jobs=0))
    row = suite.find(CAPTURED)
    assert row.error is None and row.encode and row.decode and row.mismatches == row.failures == 0
    assert row.config["timed_as"] == work and row.encode.calls == 120
    d = decide(suite)
    assert d.timed_reference and d.reference == CAPTURED
    assert "its CPU: json" + (" + deflate level 6, window 2**12" if transport != "tcp" else "") in d.reference_note
    assert "not counted" not in " ".join(d.verdict.lines())
    if transport == "ws-deflate":
        assert d.verdict.pick is row and d.verdict.sentence.startswith("captured: keep the baseline")


@pytest.mark.parametrize("codecs", [("json", "json+zstddict-3"), ("json",)])
def test_calls_not_measured_keep_the_deflate_stream_in_step(codecs: tuple, tmp_path: Path) -> None:
    """A dictionary codec holds the first fifth of the calls out (the default run's json+zstddict-3) and a size
    pass on a sample of calls leaves calls out: the captured row still inflates every later message of their
    streams."""
    trace = tmp_path / "battle.rpct"
    log = trace_from_log("ws-deflate", trace, {"c2s": 0, "s2c": 0})
    suite = run_benchmark(RunConfig(trace=str(trace), codecs=codecs, sizes_only=True, memory=False, tails=False,
                                    floor=False, jobs=0, sample_calls=150 if len(codecs) == 1 else None))
    row = suite.find(CAPTURED)
    assert row.failures == row.mismatches == 0 and 0 < row.calls < len(log) * 0.9


def test_without_a_capture_the_row_is_a_one_line_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "--codecs", "json,captured", "--out",
                           str(tmp_path / "out"), "--sizes-only", "--quiet"], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith(
        "captured: this trace was not imported from a packet capture (run_bench.py import makes one; "
        "docs/capture.md)")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("transport", ["tcp", "ws-deflate"])
def test_wire_model_check_agrees_and_says_why_not(transport: str, tmp_path: Path) -> None:
    log = sent_log(CAPTURES / f"battle-{transport}.sent.jsonl.gz")
    sent = {d: sum(e["dir"] == d for e in log) for d in ("c2s", "s2c")}
    agreeing = tmp_path / "agree.rpct"
    trace_from_log(transport, agreeing, {"c2s": sent["c2s"], "s2c": sent["s2c"] + 1})
    check = decide(run(agreeing)).capture
    assert check is not None and check.agrees and check.policy == "per-call"
    assert [(c.direction, c.modelled, c.captured) for c in check.directions] == [
        ("c2s", sent["c2s"], sent["c2s"]), ("s2c", sent["s2c"], sent["s2c"] + 1)]
    coalesced = tmp_path / "coalesced.rpct"  # TCP put several messages in one segment
    segments = sent["s2c"] * 3 // 4
    trace_from_log(transport, coalesced, {"c2s": sent["c2s"], "s2c": segments})
    check = decide(run(coalesced)).capture
    assert not check.agrees and "TCP coalesced several messages per segment" in check.reason
    assert f"s2c {sent['s2c']:,} modelled / {segments:,} captured ({sent['s2c'] / segments - 1:+.1%})" in check.line


def test_every_output_shows_the_check(tmp_path: Path) -> None:
    trace = tmp_path / "battle.rpct"
    trace_from_log("ws", trace, {"c2s": 1, "s2c": 1})
    d = decide(run(trace))
    line = d.capture.line
    assert not d.capture.agrees and "off by more than 5%" in line
    assert line.replace("'", "&#39;") in render_report(d, {})
    assert line in render_markdown(d)
    assert line in " ".join(terminal_text(d, width=10_000).split())
    ordinary = decide(run_benchmark(RunConfig(codecs=("json",), sizes_only=True, memory=False, tails=False,
                                              floor=False, jobs=0)))
    assert ordinary.capture is None and capture_check.check(ordinary.suite, None) is None


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump is not installed (apt-get install tcpdump)")
def test_a_live_recording_holds_every_message_sent(tmp_path: Path) -> None:
    """examples/record_capture.py on this machine: every datagram the programs logged is in the capture."""
    dpkt = pytest.importorskip("dpkt")
    done = subprocess.run([sys.executable, str(REPO / "examples" / "record_capture.py"), "--transport", "udp",
                           "--port-base", "0", "--ticks", "20", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0 and "tcpdump did not start" in done.stderr:
        pytest.skip(f"cannot capture on lo here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    log = sent_log(tmp_path / "battle-udp.sent.jsonl.gz")
    with (tmp_path / "battle-udp.pcap").open("rb") as f:
        udp = [dpkt.ethernet.Ethernet(frame).data.data for _, frame in dpkt.pcap.Reader(f)]
    (server_port, _), = Counter(p for u in udp for p in (u.sport, u.dport)).most_common(1)
    for direction, to_server in (("c2s", True), ("s2c", False)):  # each side's datagrams in the order it sent them
        assert [bytes(u.data) for u in udp if (u.dport == server_port) is to_server] == [
            e["payload"] for e in log if e["dir"] == direction]
    assert len(log) > 50

