"""What the outputs show of a lossy link (--loss): the terminal's tables, report.html's loss section and charts,
report.md's table, the verdict's rate (--decide-loss) and the capacity plan at it.

The results come from a real run on samples/battle.rpct, written back with the real Suite model after adding
``link`` figures made by the small model below (written here, apart from rpcbench's link engine): each call of
the trace is one UDP datagram of its method's mean size under the codec; a datagram is lost with the rate's
probability (seeded); stateless codecs lose the call, stream codecs resend it after one RTT until it gets
through and every later message of its connection and direction waits behind it; each delivered message is
acknowledged by an 8-byte datagram the other way. The expected figures are worked out from these link figures
in the tests, never copied from the outputs.
"""

import dataclasses
import html
import json
import random
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from rpc_capture.reading import open_trace
from rpcbench import results
from rpcbench.reports import charts
from rpcbench.reports.capacity import ReportOptions
from rpcbench.reports.decision import decide

REPO = Path(__file__).resolve().parent.parent
RATES = (0.0, 1.0, 5.0)
RTT_MS, SEED, UDP_HEADER, ACK_BYTES = 100.0, 7, 28, 8
CODECS = "json,msgpack,json+zlib-1,json+zlibstream-1,msgpack+zstdstream-3"


def run_bench(*args):
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *map(str, args)], capture_output=True,
                          text=True, encoding="utf-8", cwd=REPO, timeout=600)


def link_model(calls, r, rate, seed=SEED):
    """The link figures of codec result ``r`` at ``rate`` % loss over ``calls`` (see the module's docstring)."""
    rng = random.Random(f"{seed}:{r.codec}:{rate}")
    size = {m: round(f["bytes"] / f["calls"]) for m, f in r.by_method.items() if f["calls"]}
    reliable = r.ordered_delivery
    ways = {d: Counter() for d in ("c2s", "s2c")}
    lost_by_method, added, ready = Counter(), [], defaultdict(float)
    for c in calls:
        payload, way, back = size[c.method], ways[c.dir], ways["s2c" if c.dir == "c2s" else "c2s"]
        way["calls"] += 1
        sent_ms, tries, lost = c.t / 1e6, 1, False
        while rng.random() < rate / 100:
            way["lost_packets"] += 1
            lost = not reliable
            if lost:
                break
            tries += 1
        way["packets"] += tries
        way["payload_bytes"] += payload * tries
        way["resend_bytes"] += payload * (tries - 1)
        if lost:
            way["lost_calls"] += 1
            lost_by_method[c.method] += 1
            continue
        way["delivered_calls"] += 1
        if reliable:
            key = (c.conn, c.dir)
            arrives = max(sent_ms + (tries - 1) * RTT_MS, ready[key])
            ready[key] = arrives
            added.append(arrives - sent_ms)
            back["ack_packets"] += 1
            back["ack_bytes"] += ACK_BYTES
    for way in ways.values():
        way["wire_bytes"] = way["payload_bytes"] + way["ack_bytes"] + UDP_HEADER * (way["packets"] + way["ack_packets"])
    keys = ("calls", "delivered_calls", "lost_calls", "packets", "lost_packets", "ack_packets", "payload_bytes",
            "resend_bytes", "ack_bytes", "wire_bytes")
    total = {k: sum(w[k] for w in ways.values()) for k in keys}
    p50, p99 = (float(np.percentile(added, q, method="inverted_cdf")) if added else 0.0 for q in (50, 99))
    return {"wire": "per-call", "loss_pct": rate, "delivery": "reliable" if reliable else "udp", **total,
            "lost_by_method": dict(lost_by_method), "latency_p50_ms": p50, "latency_p99_ms": p99,
            "by_direction": {d: {k: w[k] for k in keys} for d, w in ways.items()}}


def with_link(run, out, rename=None):
    """The run's results written to ``out`` again with link figures at RATES and the link's settings."""
    suite = results.load(run)
    calls = list(open_trace(REPO / "samples" / "battle.rpct"))
    if rename:
        calls = [c._replace(method=rename.get(c.method, c.method)) for c in calls]
        suite = dataclasses.replace(suite, results=tuple(dataclasses.replace(
            r, by_method={rename.get(m, m): f for m, f in r.by_method.items()}) for r in suite.results))
    linked = tuple(dataclasses.replace(r, link=tuple(link_model(calls, r, rate) for rate in RATES))
                   for r in suite.results)
    settings = {**suite.settings, "loss": list(RATES), "rtt_ms": RTT_MS, "jitter_ms": 0.0, "loss_burst": 1.0,
                "loss_seed": SEED}
    out.mkdir(parents=True, exist_ok=True)
    dataclasses.replace(suite, results=linked, settings=settings).save(str(out))
    return out


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    """A real run on the bundled sample, over UDP, without a lossy link."""
    out = tmp_path_factory.mktemp("plain") / "out"
    done = run_bench("--codecs", CODECS, "--transport", "udp", "--repeat", "3", "--sample", "200", "--processes",
                     "1", "--min-time", "0.001", "--no-memory", "--out", out, "--quiet")
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def lossy_run(plain_run, tmp_path_factory):
    return with_link(plain_run, tmp_path_factory.mktemp("lossy") / "out")
