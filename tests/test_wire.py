"""The wire model (docs/wire.md): framing, packing, tick detection, and the size pass's packets and
payload bytes against an independent computation of the same rules (tests/wire_reference.py)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import wire_reference as ref
from rpc_capture import C2S, S2C, Call, TraceWriter, open_trace
from rpcbench.config import RunConfig
from rpcbench.pipeline import run_benchmark
from rpcbench.registry import Registry
from rpcbench.simulate import simulate_profile
from rpcbench.tally import CodecTally, check_call, send_rest
from rpcbench.tick import detect_tick
from rpcbench.wire import Batcher, WirePolicy, WireTally, framed, leb128, packets, parse_policies, unframe

REPO = Path(__file__).resolve().parent.parent
CODECS = {"json": (ref.encode_json, False), "msgpack": (ref.encode_msgpack, False),
          "json+zlib-1": (ref.encode_json, True)}
POLICIES = {"per-call": (None, None), "tick:50+mtu:1200": (50, 1200), "tick:33": (33, None),
            "tick:100+mtu:200": (100, 200)}


def run_bench(*args):
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *map(str, args)], capture_output=True,
                          text=True, cwd=REPO)


@given(st.lists(st.binary(max_size=400), max_size=20))
def test_framed_messages_unframe_to_themselves(messages):
    """The size pass checks a packet by comparing its decompressed bytes with the framed payload: that proves
    the messages come back because framing is undone exactly, as this shows."""
    assert unframe(b"".join(framed(messages))) == messages
    assert all(ref.leb128(n) == leb128(n) for n in (len(m) for m in messages))


@given(st.lists(st.binary(min_size=1, max_size=400), min_size=1, max_size=20), st.data())
def test_a_cut_payload_is_refused_not_misread(messages, data):
    payload = b"".join(framed(messages))
    cut = data.draw(st.integers(1, len(payload) - 1))
    ends = {sum(len(f) for f in framed(messages[:i])) for i in range(len(messages) + 1)}
    if cut in ends:  # cut between two messages: a shorter, valid payload
        assert unframe(payload[:cut]) == messages[:len([e for e in ends if 0 < e <= cut])]
    else:
        with pytest.raises(ValueError):
            unframe(payload[:cut])


@given(st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=30), st.integers(16, 400))
def test_packing_keeps_order_and_the_mtu(messages, mtu):
    framed = [len(leb128(len(m)) + m) for m in messages]
    packed = packets(framed, mtu)
    assert [i for start, stop, _ in packed for i in range(start, stop)] == list(range(len(framed)))
    for start, stop, pieces in packed:
        size = sum(framed[start:stop])
        assert (size <= mtu and pieces == 1) or (stop == start + 1 and pieces == -(-size // mtu) > 1)


def _simulated(tmp_path, profile, seed, hz, calls=6000):
    path = tmp_path / f"{profile}-{seed}-{hz}.rpct"
    with TraceWriter(str(path), {"generator": "test"}) as writer:
        for call in simulate_profile(profile, calls, seed, hz):
            writer.write(call)
    return str(path)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    """Traces not made for these tests (the bundled dict sample) and one simulated at another seed and tick."""
    return {"dict sample": str(REPO / "samples" / "battle_dict.rpct"),
            "study, seed 7, 30 Hz": _simulated(tmp_path_factory.mktemp("w"), "study", 7, 30, 8000)}


@pytest.mark.parametrize("name", ["dict sample", "study, seed 7, 30 Hz"])
def test_packets_and_payload_agree_with_an_independent_computation(traces, name):
    path = traces[name]
    config = RunConfig(trace=path, codecs=tuple(CODECS), jobs=0, sizes_only=True, floor=False,
                       wire=parse_policies(",".join(POLICIES)), transport="udp")
    suite = run_benchmark(config)
    calls = [(c.method, c.args, c.t, c.dir, c.conn) for c in open_trace(path)]
    for codec, (encode, compress) in CODECS.items():
        rows = {w.wire: w for w in suite.result(codec).wire}
        for policy, (tick, mtu) in POLICIES.items():
            packets, payload, fragmented = ref.packets(calls, encode, tick, mtu, compress)
            mine = rows[policy]
            assert mine.packets == pytest.approx(packets, rel=0.01), (codec, policy)
            assert mine.payload_bytes == pytest.approx(payload, rel=0.03), (codec, policy)
            assert mine.fragmented == pytest.approx(fragmented, rel=0.01, abs=1), (codec, policy)
            assert mine.wire_bytes == mine.payload_bytes + 28 * mine.packets
            assert mine.problem is None


@pytest.mark.parametrize("hz", [20, 30, 60])
@pytest.mark.parametrize("profile", ["study", "dict"])
def test_tick_auto_finds_the_tick_of_a_simulated_trace(profile, hz):
    guess = detect_tick(simulate_profile(profile, 8000, 5, hz))
    assert guess.tick_ms == pytest.approx(1000 / hz, rel=0.005)
    assert guess.confidence > 0.9 and S2C in guess.quantized and C2S not in guess.quantized


@pytest.mark.parametrize("gap_ms", [1, 300])
def test_gaps_no_tick_explains_give_no_tick(gap_ms):
    # evenly 1 ms apart (the score climbs toward the range's end, no peak inside it), or all longer than any tick
    calls = [Call("m", [i], 10**9 + i * gap_ms * 1_000_000, S2C, 1) for i in range(500)]
    guess = detect_tick(calls)
    assert guess.tick_ms is None and guess.quantized == ()


def test_a_tick_policy_on_real_minecraft_timestamps_runs(tmp_path):
    out = tmp_path / "out"
    done = run_bench("--trace", "tests/data/minecraft_packets.jsonl", "--codecs", "json", "--wire",
                     "tick:auto,tick:50", "--sizes-only", "--out", out, "--no-report")
    assert done.returncode == 0, done.stderr
    rows = json.loads((out / "results.json").read_text())["results"][0]["wire"]
    assert [row["wire"] for row in rows] == ["tick:50"] and rows[0]["packets"] > 0  # no tick found: auto left out
    assert "no server tick" in done.stderr


def test_a_trace_quantized_at_the_flush_is_not_charged_a_second_tick():
    calls = [Call("m", [i], 10**9 + i * 100_000_000, S2C, 1) for i in range(20)]
    charged = Batcher(WirePolicy("tick:50", 50.0))
    quantized = Batcher(WirePolicy("tick:50", 50.0, quantized=(S2C,)))
    for batcher in (charged, quantized):
        closed = [found for call in calls if (found := batcher.step(call, [call.args])) is not None] + batcher.rest()
        assert [len(times) for _, _, times, _ in closed] == [1] * 20
        assert [rows for *_, rows in closed] == [[[[i]]] for i in range(20)]  # each call's row, in its batch
    assert dict(charged.latency) == {500: 20}  # 50 ms in 0.1 ms units: each call waits for its window's end
    assert dict(quantized.latency) == {0: 20}


def test_a_tally_sends_the_batches_it_is_given():
    tally = WireTally(WirePolicy("tick:50+mtu:100", 50.0, 100))
    key = (1, S2C)
    tally.send(key, [b"x" * size for size in (30, 40, 250, 10)])
    assert tally.directions[S2C][:4] == [4, 1 + 3 + 1, 31 + 41 + 252 + 11, 3]  # calls, packets, payload, fragments
    calls = [("m", size, 0, S2C, 1) for size in (30, 40, 250, 10)]
    assert ref.packets(calls, lambda method, size: b"x" * size, 50, 100) == (5, 335, 3)


class ZlibForTest:
    """zlib on each packet; ``lossy`` drops the payload's last byte on the way back."""

    per_connection = False

    def __init__(self, lossy=False):
        self.lossy = lossy

    def compress(self, data):
        return zlib.compress(data, 1)

    def decompress(self, data):
        out = zlib.decompress(data)
        return out[:-1] if self.lossy else out


def test_a_batch_whose_calls_all_failed_sends_nothing():
    for compressor in (None, ZlibForTest()):
        tally = WireTally(WirePolicy("tick:50", 50.0), compressor)
        tally.send((1, S2C), [])
        tally.flush()
        assert tally.directions == {} and not tally.payloads


def test_calls_that_failed_to_encode_are_left_out_of_their_batch():
    policy = WirePolicy("tick:50", 50.0)
    registry = Registry.default([])
    tallies = [CodecTally(registry.create(codec), (policy,)) for codec in ("bson", "msgpack+zlib-1")]
    batchers = {policy.text: Batcher(policy)}
    odd = {b"raw": 1}  # bson has no bytes keys
    calls = [Call("odd", odd, 0, S2C, 1), Call("plain", {"i": 1}, 1000, S2C, 1),  # a window: one fails in bson
             Call("odd", odd, 100_000_000, S2C, 1)]  # a window of a failure alone: no packet for bson
    for index, call in enumerate(calls):
        check_call(tallies, index, call, batchers=batchers)
    send_rest(tallies, batchers)
    bson, packed = (tally.wire[policy.text].directions[S2C] for tally in tallies)
    assert tallies[0].failures == 2 and bson[:3] == [1, 1, 1 + len(registry.create("bson").encode(calls[1]))]
    assert packed[:2] == [3, 2]  # calls, packets


@pytest.mark.parametrize("lossy", [False, True])
def test_a_packet_that_does_not_decompress_to_its_payload_is_a_problem(lossy):
    tally = WireTally(WirePolicy("tick:50", 50.0), ZlibForTest(lossy))
    tally.send((1, C2S), [b"a" * 30, b"b" * 200])
    assert C2S not in tally.directions  # held until flushed with others
    tally.flush()
    payload = ref.leb128(30) + b"a" * 30 + ref.leb128(200) + b"b" * 200
    assert tally.directions[C2S][:3] == [2, 1, len(zlib.compress(payload, 1))]
    assert (tally.problem is not None) == lossy


def test_stream_compressors_flush_once_per_packet(tmp_path):
    out = tmp_path / "out"
    done = run_bench("--codecs", "json,json+zlibstream-1", "--wire", "per-call,tick:100", "--sizes-only",
                     "--out", out, "--no-report", "--quiet")
    assert done.returncode == 0, done.stderr
    rows = {(r["codec"], r["wire"]): r for r in csv.DictReader(open(out / "results.csv", encoding="utf-8"))}
    per_call, batched = (int(rows[("json+zlibstream-1", p)]["payload_bytes"]) for p in ("per-call", "tick:100"))
    assert batched < per_call  # one sync-flush tail per packet instead of per message
    wire = json.loads((out / "results.json").read_text())["results"][1]["wire"]
    assert all(w["problem"] is None for w in wire)


def test_the_run_compares_policies_and_decides_on_the_wire(tmp_path):
    out = tmp_path / "out"
    done = run_bench("--codecs", "json,msgpack,json+zlib-1,msgpack+zstd-3", "--wire", "per-call,tick:50+mtu:1200",
                     "--transport", "udp", "--goal", "bandwidth", "--sizes-only", "--out", out, "--quiet")
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(open(out / "results.csv", encoding="utf-8")))
    assert [(r["codec"], r["wire"]) for r in rows][:2] == [("json", "per-call"), ("json", "tick:50+mtu:1200")]
    json_rows = {r["wire"]: r for r in rows if r["codec"] == "json"}
    assert int(json_rows["per-call"]["packets"]) == 20000 and int(json_rows["tick:50+mtu:1200"]["packets"]) == 8061
    assert json_rows["tick:50+mtu:1200"]["fragmented"] == "0"
    text = done.stdout
    assert "json+zlib-1: 0.69x the wire bytes of json (tick:50+mtu:1200, udp)" in " ".join(text.split())
    assert "1.3 up + 17.7 down packets/s per player" in text and "1.3 up + 6.4 down packets/s" in text
    assert "ranking by wire bytes per call under tick:50+mtu:1200 (vs per-call)" in text
    same = run_bench("report", out)  # the run's own --transport udp and --goal bandwidth, not the defaults
    assert same.returncode == 0, same.stderr
    assert same.stdout.splitlines()[:-1] == text.splitlines()[:-1]  # all but the closing report: line
    again = run_bench("report", out, "--transport", "tcp", "--decide-wire", "per-call")
    assert again.returncode == 0, again.stderr
    assert "decided on per-call" in again.stdout and "(tcp headers; decided on per-call)" in again.stdout
    assert "verdict (bandwidth" in again.stdout  # what was not given again is still the run's


@pytest.mark.parametrize("args, message", [
    (["--wire", "tick:fast"], "expected per-call, tick:MS, tick:MS+mtu:BYTES or tick:auto"),
    (["--wire", "tick:50+mtu:4"], "the MTU must be 16 to 65507"),
    (["--wire", "tick:50", "--sample-calls", "100"], "not with --sample-calls"),
])
def test_bad_wire_options_are_one_line(tmp_path, args, message):
    done = run_bench("--codecs", "json", "--sizes-only", "--out", tmp_path / "o", "--quiet", *args)
    assert done.returncode != 0 and message in done.stderr and "Traceback" not in done.stderr


def test_tick_auto_end_to_end(tmp_path):
    trace = _simulated(tmp_path, "dict", 11, 60, 4000)
    out = tmp_path / "out"
    done = run_bench("--trace", trace, "--codecs", "json", "--wire", "tick:auto", "--sizes-only", "--out", out,
                     "--no-report", "--quiet")
    assert done.returncode == 0, done.stderr
    wire = json.loads((out / "results.json").read_text())["results"][0]["wire"][0]
    assert wire["wire"] == "tick:auto" and wire["tick_ms"] == pytest.approx(16.67, abs=0.05)
    assert wire["tick_confidence"] > 0.9


def test_a_trace_without_timestamps_gets_a_note_and_per_call_only(tmp_path):
    trace = tmp_path / "flat.rpct"
    with TraceWriter(str(trace), {}) as writer:
        for i in range(200):
            writer.write(Call("move", [i, i * 2], 0, S2C if i % 3 else C2S, i % 4))
    out = tmp_path / "out"
    done = run_bench("--trace", trace, "--codecs", "json", "--wire", "per-call,tick:50", "--sizes-only", "--out", out,
                     "--no-report")
    assert done.returncode == 0, done.stderr
    assert "per-call only" in done.stderr + done.stdout
    rows = list(csv.DictReader(open(out / "results.csv", encoding="utf-8")))
    assert [r["wire"] for r in rows] == ["per-call"]


def test_the_pareto_front_stands_on_the_wire_figures_of_the_decided_policy(tmp_path):
    from rpcbench.reports import ReportOptions, decide
    from rpcbench.reports.analysis import cpu_us
    from rpcbench.reports.markdown import render_markdown
    from rpcbench.results import load

    done = run_bench("--codecs", "json,msgpack,json+zlib-1,json+zstddict-3,msgpack+zstd-3", "--wire",
                     "per-call,tick:50+mtu:1200", "--transport", "udp", "--repeat", "3", "--sample", "500",
                     "--no-report", "--out", tmp_path / "out", "--quiet")
    assert done.returncode == 0, done.stderr
    suite = load(str(tmp_path / "out"))
    fronts = {}
    for policy, transport in (("tick:50+mtu:1200", "udp"), ("per-call", "udp"), ("per-call", "none")):
        d = decide(suite, ReportOptions(transport=transport, wire=policy))
        axes = d.front_axes
        if (policy, transport) == ("per-call", "none"):  # nothing on the wire but the messages
            assert axes.bytes_label == "bytes per call (mean)"
            assert dict(axes.bytes) == {r.codec: r.sizes.mean for r in suite.results}
        else:
            assert axes.bytes_label == f"wire bytes per call ({policy}, udp headers)"
            assert dict(axes.bytes) == {r.codec: r.bytes_per_call for r in d.wire.rows if r.policy == policy}
        if policy == "per-call":  # CPU per message
            assert dict(axes.cpu) == {r.codec: cpu_us(r) for r in suite.results}
        else:  # CPU on whole packets, as timed under the batched policy
            rows = [r for r in d.wire.rows if r.policy == policy]
            assert "on whole tick:50+mtu:1200 packets" in axes.cpu_label
            assert dict(axes.cpu) == {r.codec: r.encode_us + r.decode_us for r in rows}
        points = {c: (axes.bytes[c], axes.cpu[c]) for c in axes.bytes}
        for codec, (size, cpu) in points.items():  # on the front exactly when nothing is smaller and cheaper
            beaten = any(s <= size and c <= cpu and (s, c) != (size, cpu) for s, c in points.values())
            assert (codec in d.front) == (not beaten), (policy, codec)
        fronts[policy, transport] = d.front
        assert f"smallest first: {', '.join(d.front)}; on {axes.text}." in render_markdown(d)
    assert fronts["per-call", "udp"] == fronts["per-call", "none"]  # the same headers on every call move nothing
