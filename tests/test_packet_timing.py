"""Encode/decode CPU per call measured on whole packets under a batched --wire policy (docs/wire.md): which
batches are timed, what one packet's encode and decode do, and where the figures go (results, reports)."""

from __future__ import annotations

import csv
import dataclasses
import json
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any, Dict, List

import pytest

from rpc_capture import Call, TraceWriter, open_trace
from rpcbench import timing
from rpcbench.codec import Codec, Compressed, Compressor, Received
from rpcbench.config import DEFAULT_TRACE, DICT_TRACE, RunConfig
from rpcbench.errors import BenchError
from rpcbench.executors import open_executor
from rpcbench.packet_timing import PacketOps, PacketPlan, tick_windows
from rpcbench.pipeline import run_benchmark
from rpcbench.results import load
from rpcbench.simulate import simulate_profile
from rpcbench.plan import make_plan
from rpcbench.progress import quiet
from rpcbench.size_pass import run_size_pass
from rpcbench.timing import TimingJob
from rpcbench.wire import WirePolicy, parse_policies
from rpcbench.reports import build, capacity, terminal_text
from rpcbench.reports.capacity import ReportOptions
from rpcbench.reports.decision import decide
from rpcbench.reports.formatting import fmt_ratio, fmt_us
from rpcbench.reports.markdown import render_markdown

REPO = Path(__file__).resolve().parent.parent
BATCHED = "tick:50+mtu:1200"


def _simulated(tmp_path: Path, calls: int = 2500) -> str:
    path = tmp_path / "dict-30hz.rpct"
    with TraceWriter(str(path), {"generator": "test"}) as writer:
        for call in simulate_profile("dict", calls, 5, 30):
            writer.write(call)
    return str(path)


@pytest.mark.parametrize("policy", [BATCHED, "tick:33+mtu:120", "tick:auto"])
def test_with_every_call_sampled_the_packets_timed_are_the_size_pass_packets(tmp_path: Path, policy: str) -> None:
    """The timing replays the size pass's packets: the same packets (fragments counted) and calls, per codec."""
    trace = _simulated(tmp_path)
    config = RunConfig(trace=trace, codecs=("json", "msgpack+zstd-3", "json+zlibstream-1"), sample=10_000,
                       repeat=2, min_time=0.001, processes=0, jobs=0, tails=False, memory=False, floor=False,
                       wire=parse_policies(f"per-call,{policy}"))
    suite = run_benchmark(config)
    for r in suite.results:
        per_call, batched = r.wire
        assert per_call.cpu is None and batched.wire == policy
        cpu = batched.cpu
        assert cpu is not None and (cpu.packets, cpu.calls) == (batched.packets, batched.calls), r.codec
        for op in ("encode", "decode"):
            found = batched.packet_timing(op)
            assert found is not None and found.calls == batched.calls and len(found.rounds_ns) == 2
    if policy == "tick:33+mtu:120":
        assert any(w.fragmented for r in suite.results for w in r.wire)  # some message goes in pieces


def test_a_sample_times_whole_windows_chosen_by_their_first_call() -> None:
    """A partial sample: every window timed is one the size pass sends, whole, with its first call sampled."""
    config = RunConfig(trace=str(DICT_TRACE), codecs=("json",), sample=300, jobs=0, floor=False,
                       wire=parse_policies(BATCHED))
    with open_executor(None, 0, config.codec_timeout, lambda *a: None) as executor:
        size_pass = run_size_pass(make_plan(config, config.registry(), quiet), executor)
    plan = size_pass.packet_plan(config.sample)
    assert plan is not None and plan.policy == BATCHED and plan.mtu == 1200
    def ids(calls: Any) -> tuple:
        return tuple((c.t, c.conn, c.dir, c.method) for c in calls)

    sampled = set(ids(size_pass.sample(config.sample)))
    policy = size_pass.traces[0].wire.policies[0]
    every = {ids(w) for _, w in tick_windows(enumerate(open_trace(str(DICT_TRACE))), policy)}
    assert {ids(w) for w in plan.windows} <= every
    first_sampled = size_pass._sample_indices(config.sample)[0]  # the windows a second read of the trace would give,
    again = sorted(tick_windows(enumerate(open_trace(str(DICT_TRACE))), policy), key=lambda fw: fw[0])  # by first call
    assert plan.windows == tuple(tuple(w) for first, w in again if first in first_sampled)
    assert all(ids(w)[0] in sampled for w in plan.windows)
    assert sum(len(w) for w in plan.windows) > len(plan.windows)  # batches, not single calls


# -- what one packet's encode and decode do: a codec on a fake clock ---------------------------------------

class Clock:
    """A clock that only the fake codec and compressor move: timings then count their calls exactly."""

    now = 0

    @classmethod
    def read(cls) -> int:
        return cls.now


class Ticking(Codec):
    """json, costing 1,000 ns to encode a message and 500 to decode one on the fake clock."""

    id = "ticking"

    def encode(self, call: Call) -> bytes:
        Clock.now += 1000
        return json.dumps([call.method, call.args]).encode()

    def decode(self, data: bytes) -> Received:
        Clock.now += 500
        method, args = json.loads(data)
        return method, args


class TickingZlib(Compressor):
    """zlib, costing 3,000 ns per compress and 2,000 per decompress on the fake clock."""

    name = "tickzlib"

    def compress(self, data: bytes) -> bytes:
        Clock.now += 3000
        return zlib.compress(data, 1)

    def decompress(self, data: bytes) -> bytes:
        Clock.now += 2000
        return zlib.decompress(data)


def _plan(calls: List[Call], policy: WirePolicy) -> PacketPlan:
    return PacketPlan(policy.text, policy.mtu, tuple(tuple(w) for _, w in tick_windows(enumerate(calls), policy)))


def test_figures_are_per_call_and_a_packet_is_compressed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Per call: encode = each message's encode + the packet's one compress over its calls; decode alike."""
    monkeypatch.setattr(timing.time, "perf_counter_ns", Clock.read)
    calls = list(open_trace(str(DEFAULT_TRACE)))[:3000]
    plan = _plan(calls, WirePolicy(BATCHED, 50.0, 1200))
    for codec, compress, decompress in ((Ticking(), 0, 0), (Compressed(Ticking(), TickingZlib()), 3000, 2000)):
        job = TimingJob(codec, calls, packets=plan)
        job.run_round(record=True, stages=False)
        ops = job.packets
        assert ops is not None and ops.calls == sum(len(w) for w in plan.windows) and ops.packets < ops.calls
        per_packet = ops.packets / ops.calls
        assert job.rounds["encode_packet"] == [pytest.approx(1000 + compress * per_packet)]
        assert job.rounds["decode_packet"] == [pytest.approx(500 + decompress * per_packet)]
        assert job.rounds["encode"] == [pytest.approx(1000 + compress)]  # per message: one compress each
        answer = job.result()
        assert answer["packets"] == {"policy": BATCHED, "calls": ops.calls, "packets": ops.packets, "loops": 1}


@pytest.mark.parametrize("codec_id", ["json", "json+zlib-1", "msgpack+zstd-3", "json+zlibstream-1"])
def test_decoding_a_packet_builds_every_message_in_full(codec_id: str) -> None:
    """decompress + unframe + decode gives back each call of the packet as the codec decodes it alone."""
    codec = RunConfig().registry().create(codec_id)
    calls = list(open_trace(str(DICT_TRACE)))[:1500]
    ops = PacketOps(codec, _plan(calls, WirePolicy("tick:100+mtu:300", 100.0, 300)))
    decoded = [value for _, values in ops.replay("decode", ops.sessions()) for value in values]
    inner = codec.inner if isinstance(codec, Compressed) else codec
    assert decoded == [inner.decode(inner.encode(call)) for _, window in ops.windows for call in window]
    assert len(decoded) == ops.calls and len(ops.payloads) < ops.packets  # a message over 300 B: one payload, pieces


# -- through the command line: results, csv, reports, capacity ---------------------------------------------

@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "out"
    done = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "--codecs", "json,json+zlib-1",
                           "--wire", f"per-call,{BATCHED}", "--transport", "udp", "--repeat", "3", "--sample", "400",
                           "--out", str(out), "--quiet"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def test_results_carry_the_packets_cpu_on_the_timed_policy(run: Path) -> None:
    data = json.loads((run / "results.json").read_text())
    for r in data["results"]:
        per_call, batched = r["wire"]
        assert "cpu" not in per_call
        cpu = batched["cpu"]
        assert cpu["calls"] > cpu["packets"] > 0 and len(cpu["encode"]["rounds_ns"]) == 3
        assert cpu["encode"]["median_us"] > 0 and cpu["decode"]["ci_us"][0] <= cpu["decode"]["median_us"]
    rows = list(csv.DictReader(open(run / "results.csv", encoding="utf-8")))
    for row in rows:
        timed = row["wire"] == BATCHED
        assert bool(row["packet_encode_us"]) == timed and bool(row["packet_decode_us"]) == timed
    suite = load(str(run))
    found = suite.results[0].wire[1].packet_timing("encode")
    assert found is not None and float(rows[1]["packet_encode_us"]) == pytest.approx(found.median_us, abs=0.001)


def test_the_capacity_plan_counts_the_decided_policys_cpu(run: Path) -> None:
    suite = load(str(run))
    for policy in ("per-call", BATCHED):
        d = decide(suite, ReportOptions(transport="udp", wire=policy))
        for r in suite.results:
            w = next(w for w in r.wire if w.wire == policy)
            encode = w.packet_timing("encode") or r.encode
            decode = w.packet_timing("decode") or r.decode
            assert encode and decode and (encode is not r.encode) == (policy == BATCHED)
            rates = d.plan.calls_per_s
            server = d.plan.rows[r.codec].server_us
            assert server is not None and server.value == pytest.approx(
                encode.median_us * rates["s2c"].value + decode.median_us * rates["c2s"].value)
        assert ("whole packets" in d.plan.cpu_note) == (policy == BATCHED)


def test_the_cpu_goal_and_the_verdicts_ratios_use_the_decided_policys_cpu(run: Path) -> None:
    suite = load(str(run))
    json_, zlib = suite.result("json"), suite.result("json+zlib-1")

    def sent(r: Any, policy: str, op: str) -> Any:
        return next(w for w in r.wire if w.wire == policy).packet_timing(op) or (r.encode if op == "encode"
                                                                                 else r.decode)
    for policy in ("per-call", BATCHED):
        d = decide(suite, ReportOptions(transport="udp", wire=policy, goal="cpu"))
        cpu = {r.codec: sent(r, policy, "encode").median_us + sent(r, policy, "decode").median_us
               for r in (json_, zlib)}
        assert d.verdict.pick is not None and d.verdict.pick.codec == min(cpu, key=cpu.__getitem__)
        smallest = decide(suite, ReportOptions(transport="udp", wire=policy, goal="bandwidth")).verdict
        assert smallest.pick is not None and smallest.pick.codec == "json+zlib-1"  # fewer bytes under both
        ratio = sent(zlib, policy, "encode").ratio_to(sent(json_, policy, "encode"))
        packets = " on whole packets" if policy == BATCHED else ""
        decode = sent(zlib, policy, "decode").ratio_to(sent(json_, policy, "decode"))
        assert f"at {fmt_ratio(ratio)} its encode CPU ({fmt_ratio(decode)} decode){packets}," in smallest.sentence


def test_every_output_prints_the_decisions_cpu_on_packets(run: Path, tmp_path: Path) -> None:
    """The terminal note, report.html's wire table and report.md's print the WireView's figure, not their own."""
    d = decide(load(str(run)), ReportOptions(transport="udp"))
    row = d.wire.row("json+zlib-1", BATCHED)
    assert row is not None and row.encode_us is not None and row.decode_us is not None
    odd = dataclasses.replace(row, encode_us=6543.21, decode_us=4321.0)
    rows = tuple(odd if r is row else r for r in d.wire.rows)
    d = dataclasses.replace(d, wire=dataclasses.replace(d.wire, rows=rows))
    folder = tmp_path / "report"
    folder.mkdir()
    build(d, str(folder))
    html = (folder / "report.html").read_text(encoding="utf-8")
    texts: Dict[str, Any] = {"terminal": terminal_text(d), "md": render_markdown(d), "html": html}
    assert f"{fmt_us(6543.21)} + {fmt_us(4321.0)} µs/call" in " ".join(texts["terminal"].split())
    assert f"| {fmt_us(6543.21)} | {fmt_us(4321.0)} |" in texts["md"]
    assert f"<td class='num'>{fmt_us(6543.21)}</td>" in html or f">{fmt_us(6543.21)}<" in html


def test_a_damaged_cpu_figure_is_one_line(run: Path, tmp_path: Path) -> None:
    data = json.loads((run / "results.json").read_text())
    data["results"][0]["wire"][1]["cpu"]["encode"]["rounds_ns"] = [-1.0]
    (tmp_path / "results.json").write_text(json.dumps(data))
    with pytest.raises(BenchError, match=r"wire\[1\]\.cpu\.encode\.rounds_ns"):
        load(str(tmp_path))
    del data["results"][0]["wire"][1]["cpu"]  # a file from before the figure: it loads, the plan is per message
    (tmp_path / "results.json").write_text(json.dumps(data))
    suite = load(str(tmp_path))
    assert capacity.plan(suite, "udp", 0, BATCHED).cpu_note.startswith("timed on whole packets of tick:50+mtu:1200 "
                                                                        "for json+zlib-1")
