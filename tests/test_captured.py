"""The ``captured`` row on real captures: the example battle played over length-prefixed TCP, WebSocket (plain and
permessage-deflate) and UDP, recorded by tcpdump (tests/data/captures, examples/record_capture.py), with the log of
every message each side sent. The row's bytes are what the programs sent, it is the reference, and the wire
model is checked against the capture's packet count in every output."""

from __future__ import annotations

import base64
import gzip
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

import pytest

from rpc_capture import Call, TraceWriter
from rpcbench.captured import CAPTURED, capture_of
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


def trace_from_log(transport: str, out: Path, packets: Dict[str, int]) -> List[Dict[str, Any]]:
    """A trace as an import of the capture would give (calls with their captured bytes, the header's capture
    facts), built from the senders' own log: the row under test, independent of the importer."""
    log = sent_log(CAPTURES / f"battle-{transport}.sent.jsonl.gz")
    capture = {"file": f"battle-{transport}.pcap", "framing": FRAMINGS[transport],
               "deflate": transport == "ws-deflate", "server_port": PORTS[transport], "decode": "json",
               "method_field": "m", "args_field": "a", "packets": packets, "messages": len(log)}
    with TraceWriter(out, metadata={"capture": capture}) as trace:
        for i, e in enumerate(log):
            message = json.loads(e["payload"])
            trace.write(Call(message["m"], message["a"], 10**18 + i * 1_000_000, e["dir"], e["client_port"],
                             e["wire"]))
    return log


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

