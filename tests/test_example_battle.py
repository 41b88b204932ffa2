"""End to end: the example battle server and bots play over TCP on 127.0.0.1, the server
records its traffic with rpc_capture, and run_bench.py replays the trace."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from rpc_capture import C2S, S2C, open_trace

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"


def test_recorded_battle_replays_in_run_bench(tmp_path):
    trace = tmp_path / "battle.rpct"
    server = subprocess.Popen(
        [sys.executable, str(EXAMPLES / "battle_server.py"), "--port", "0", "--players", "4", "--ticks", "60",
         "--tick-rate", "30", "--join-timeout", "15", "--max-seconds", "30", "--record", str(trace)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = server.stdout.readline()
        port = re.search(r"listening on 127\.0\.0\.1:(\d+)", first)
        assert port, f"server did not start: {first!r} {server.stderr.read() if server.poll() is not None else ''}"
        bots = subprocess.run(
            [sys.executable, str(EXAMPLES / "battle_bot.py"), "--port", port.group(1), "--bots", "4",
             "--max-seconds", "30"],
            capture_output=True, text=True, timeout=60)
        assert bots.returncode == 0, bots.stderr
        assert "battle ended: True" in bots.stdout
        out, err = server.communicate(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert server.returncode == 0, err
    assert re.search(r"recorded [\d,]+ of [\d,]+ calls \(0 dropped\)", out), out

    reader = open_trace(trace)
    calls = list(reader)
    methods = {c.method for c in calls}
    assert {"join", "welcome", "move", "sync_position", "state_snapshot", "heartbeat", "heartbeat_ack",
            "battle_end"} <= methods
    assert {c.dir for c in calls} == {C2S, S2C} and len({c.conn for c in calls}) == 4
    assert sum(c.method == "join" for c in calls) == 4 and sum(c.method == "battle_end" for c in calls) == 4
    assert all(a.t <= b.t for a, b in zip(calls, calls[1:]))
    assert reader.end["calls"] == len(calls) == reader.end["offered"] == reader.end["recorded"]

    out_dir = tmp_path / "results"
    bench = subprocess.run(
        [sys.executable, str(REPO / "run_bench.py"), "--trace", str(trace), "--codecs", "json,json+zlib-1",
         "--out", str(out_dir), "--no-report", "--repeat", "1", "--warmup", "1", "--min-time", "0.001",
         "--sample", "300", "--quiet"],
        capture_output=True, text=True, timeout=120)
    assert bench.returncode == 0, bench.stderr
    results = json.loads((out_dir / "results.json").read_text())
    assert results["trace"]["calls"] == len(calls)
    assert results["trace"]["recorder"]["recorded"] == len(calls)
    assert [r["codec"] for r in results["results"]] == ["json", "json+zlib-1"]
    for r in results["results"]:
        assert r["calls"] == len(calls) and r["failures"] == 0 and r["mismatches"] == 0
