"""The lossy link (docs/wire.md, "The lossy link"): the replay's counts against a simulation written apart, on a
slice of the bundled sample; what the receiver gets against what the sender sent, after any seeded replay;
seeds; the size pass's figures against the wire model's; +ackdelta's deliveries driven by acks; the CLI."""

from __future__ import annotations

import bisect
import csv
import itertools
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpc_capture import C2S, S2C, Call, TraceWriter, open_trace
from rpcbench.codec import CallStage
from rpcbench.config import DEFAULT_TRACE
from rpcbench.link import LinkSettings, transitions
from rpcbench.link_replay import Replay, batches, delivery_of, replay_trace
from rpcbench.registry import Registry
from rpcbench.simulate import simulate_profile
from rpcbench.wire import TRANSPORTS, WirePolicy

REPO = Path(__file__).resolve().parent.parent
SLICE = list(itertools.islice(open_trace(str(DEFAULT_TRACE)), 1500))  #: real calls: the bundled sample's first
DICT_SLICE = list(itertools.islice(open_trace(str(REPO / "samples" / "battle_dict.rpct")), 400))  #: named args
REGISTRY = Registry.default()
UDP = TRANSPORTS["udp"]


def run_bench(*args):
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *map(str, args)], capture_output=True,
                          text=True, cwd=REPO)


def replay(name: str, link: LinkSettings, rate: float, policy: str = "per-call", calls=SLICE, codec=None):
    wire = WirePolicy(policy) if policy == "per-call" else WirePolicy(policy, 50.0, 200)
    codec = codec or REGISTRY.create(name)
    return Replay(codec, wire, calls, batches(calls, wire, calls[0].t), link, rate, UDP)


def reference(calls: List[Call], sizes: List[int], link: LinkSettings, rate: float, reliable: bool) -> Dict[str, int]:
    """The link model written apart, per call (one datagram each): an event list kept sorted by bisect, the losses
    drawn from their own seeded generators. Returns the counts the replay must give."""
    enter, stay = (rate / 100, rate / 100) if link.burst == 1 else (
        rate / 100 / (link.burst * (1 - rate / 100)), 1 - 1 / link.burst)
    gens: Dict[Any, Tuple[random.Random, random.Random]] = {}
    bad: Dict[Any, bool] = {}

    def fate(channel) -> Tuple[bool, int]:
        if channel not in gens:
            conn, direction = channel
            gens[channel] = (random.Random(f"loss/{link.seed}/{conn!r}/{direction}"),
                             random.Random(f"delay/{link.seed}/{conn!r}/{direction}"))
            bad[channel] = False
        u = gens[channel][0].random()
        bad[channel] = u < (stay if bad[channel] else enter)
        jitter = (2 * gens[channel][1].random() - 1) * (link.jitter_ms * 1e6)
        return bad[channel], round(link.rtt_ms * 5e5 + jitter)

    rto = round(max(30.0, link.rtt_ms + max(10.0, 8 * link.jitter_ms / 3)) * 1e6)
    counts = dict.fromkeys(("packets", "resends", "resend_bytes", "acks", "lost_calls"), 0)
    events: List[Tuple[int, int, int, Any]] = []  # (time, kind: 0 arrive 1 flush 2 ack 3 timeout 4 send, n, what)
    serial = itertools.count()
    for i, call in enumerate(calls):
        events.append((call.t, 4, next(serial), i))
    events.sort()
    arrived, acked, owed = set(), set(), {}

    def later(t, kind, what):
        bisect.insort(events, (t, kind, next(serial), what))

    def send(t, i, attempt):
        counts["packets"] += 1
        if attempt:
            counts["resends"] += 1
            counts["resend_bytes"] += sizes[i]
        lost, delay = fate((calls[i].conn, calls[i].dir))
        if not lost:
            later(t + delay, 0, i)
        if reliable:
            later(t + round(rto * 1.5 ** attempt), 3, (i, attempt))

    while events:
        t, kind, _, what = events.pop(0)
        if kind == 4:
            send(t, what, 0)
        elif kind == 0:
            arrived.add(what)
            if reliable:
                back = (calls[what].conn, S2C if calls[what].dir == C2S else C2S)
                if not owed.get(back):
                    later(-(-t // 10_000_000) * 10_000_000, 1, back)
                owed.setdefault(back, []).append(what)
        elif kind == 1:
            acks = owed.pop(what)
            for k in range(0, len(acks), 58):
                counts["acks"] += 1
                lost, delay = fate(what)
                if not lost:
                    later(t + delay, 2, acks[k:k + 58])
        elif kind == 2:
            acked.update(what)
        elif what[0] not in acked:
            send(t, what[0], what[1] + 1)
    counts["lost_calls"] = len(calls) - len(arrived)
    return counts


def stream_sizes(name: str, calls: List[Call]) -> List[int]:
    """Each call's bytes under ``name``, a session per connection and direction."""
    codec, sessions = REGISTRY.create(name), {}
    return [len(sessions.setdefault((c.conn, c.dir), codec.connection()).encode(c)) for c in calls]


@pytest.mark.parametrize("name, link, rate", [
    ("msgpack", LinkSettings((5,), 100, 0, 1, 7), 5),
    ("msgpack", LinkSettings((20,), 80, 30, 4, 2), 20),
    ("msgpack+zstdstream-3", LinkSettings((5,), 100, 0, 1, 7), 5),
    ("msgpack+zstdstream-3", LinkSettings((10,), 60, 25, 3, 11), 10),
    ("json+zlibstream-1", LinkSettings((30,), 150, 70, 2.5, 5), 30),
])
def test_the_replay_counts_what_a_simulation_written_apart_counts(name, link, rate):
    calls = SLICE[:600]
    tally = replay(name, link, rate, calls=calls).run().export()
    reliable = delivery_of(REGISTRY.create(name)) == "reliable"
    want = reference(calls, stream_sizes(name, calls), link, rate, reliable)
    got = {key: sum(d[i] for d in tally["directions"].values()) for key, i in
           (("packets", 3), ("resend_bytes", 8), ("acks", 5), ("lost_calls", 2))}
    assert got == {k: want[k] for k in got}
    assert (want["resends"] > 0) == reliable and (want["lost_calls"] > 0) == (not reliable)


class Watched(Replay):
    """A replay that notes which calls reach the receiving application, in the order they do."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.got: List[int] = []

    def _deliver(self, now, unit):
        self.got.extend(unit.calls)
        super()._deliver(now, unit)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["msgpack", "msgpack+zstdstream-3"]), st.sampled_from(["per-call", "tick:50+mtu:200"]),
       st.integers(0, 2**32), st.floats(0, 50), st.sampled_from([1, 2, 8]), st.floats(0, 40))
def test_the_receiver_gets_what_was_sent(name, policy, seed, rate, burst, jitter):
    calls = SLICE[:300]
    wire = WirePolicy(policy) if policy == "per-call" else WirePolicy(policy, 50.0, 200)
    link = LinkSettings((rate,), 100, jitter, burst, seed)
    run = Watched(REGISTRY.create(name), wire, calls, batches(calls, wire, calls[0].t), link, rate, UDP)
    tally = run.run().export()
    lost = sum(d[2] for d in tally["directions"].values())
    if run.delivery == "reliable":  # every call, in the order it was sent on its connection and direction
        assert lost == 0
        for stream in {(c.conn, c.dir) for c in calls}:
            assert [i for i in run.got if (calls[i].conn, calls[i].dir) == stream] == \
                   [i for i, c in enumerate(calls) if (c.conn, c.dir) == stream]
    else:  # the calls that were not lost, each once
        assert len(set(run.got)) == len(run.got) == len(calls) - lost
        assert sum(tally["lost_by_method"].values()) == lost
    assert sum(tally["latency"].values()) == len(run.got)


def test_the_same_seed_gives_the_same_figures_another_seed_others():
    def figures(seed):
        link = LinkSettings((5,), 100, 20, 2, seed)
        return replay_trace(REGISTRY.create, ["msgpack", "msgpack+zstdstream-3"], SLICE, SLICE[0].t,
                            [WirePolicy("per-call")], link, UDP)
    assert figures(3) == figures(3)
    assert figures(3)["msgpack"][0][2]["lost_by_method"] != figures(4)["msgpack"][0][2]["lost_by_method"]


@pytest.mark.parametrize("rate, burst", [(1, 1), (5, 1), (5, 4), (20, 10)])
def test_the_loss_process_keeps_its_rate_and_burst(rate, burst):
    from rpcbench.link import Channel
    channel = Channel(LinkSettings((rate,), 100, 0, burst, 9), rate, 1, C2S)
    fates = [channel.send()[0] for _ in range(200_000)]
    runs = [len(list(g)) for lost, g in itertools.groupby(fates) if lost]
    assert sum(fates) / len(fates) == pytest.approx(rate / 100, rel=0.1)
    mean_burst = burst if burst > 1 else 1 / (1 - rate / 100)  # independent loss: bursts of 1/(1-p)
    assert sum(runs) / len(runs) == pytest.approx(mean_burst, rel=0.1)
    assert transitions(0, burst) == (0, 0)


class EchoAckDelta(CallStage):
    """A test double of the +ackdelta interface (INTERFACES.md): a call whose args equal its method's newest
    acked call is sent as a reference to that message; the receiver needs that message to decode it."""

    stage = "echoack"
    ack_baselines = True

    def encode(self, call):  # the size pass's ideal link is not what this double is for
        return self.inner.encode(call)

    def decode(self, data):
        return self.inner.decode(data)

    def sender(self):
        return _Sender()

    def receiver(self):
        return _Receiver()


class _Sender:
    def __init__(self):
        self.sent: Dict[int, Call] = {}
        self.acked_calls: Dict[str, Tuple[int, Call]] = {}

    def encode(self, call, msg_id):
        self.sent[msg_id] = call
        base = self.acked_calls.get(call.method)
        if base and base[1].args == call.args:
            return msgpack.packb([msg_id, base[0], call.method])
        return msgpack.packb([msg_id, None, call.method, call.args])

    def acked(self, msg_id):
        call = self.sent.pop(msg_id)
        if msg_id > self.acked_calls.get(call.method, (-1,))[0]:
            self.acked_calls[call.method] = (msg_id, call)


class _Receiver:
    def __init__(self):
        self.held: Dict[int, Any] = {}

    def decode(self, data):
        msg_id, base, method, *args = msgpack.unpackb(data)
        if base is not None and base not in self.held:
            raise ValueError(f"message {msg_id} refers to message {base}, which never arrived")
        value = self.held[base] if base is not None else args[0]
        self.held[msg_id] = value
        return msg_id, (method, value)


@pytest.mark.parametrize("rate, burst", [(0, 1), (5, 1), (30, 4)])
def test_ackdelta_is_encoded_against_what_acks_say_arrived(rate, burst):
    link = LinkSettings((rate,), 100, 20, burst, 5)
    codec = EchoAckDelta(REGISTRY.create("msgpack"))
    tally = replay("", link, rate, codec=codec).run().export()
    assert tally["delivery"] == "ackdelta" and tally["mismatches"] == 0, tally["problem"]
    plain = replay("msgpack", link, rate).run().export()
    assert sum(d[7] for d in tally["directions"].values()) < sum(d[7] for d in plain["directions"].values())
    lost = sum(d[2] for d in tally["directions"].values())
    assert (lost > 0) == (rate > 0) and sum(d[5] for d in tally["directions"].values()) > 0


def test_a_receiver_that_decodes_wrong_is_counted_not_raised():
    class Wrong(EchoAckDelta):
        def receiver(self):
            return type("R", (), {"decode": lambda self, data: (0, ("nope", []))})()
    tally = replay("", LinkSettings((0,)), 0, codec=Wrong(REGISTRY.create("msgpack"))).run().export()
    assert tally["mismatches"] == len(SLICE) and "call 0 (spawn): method: 'spawn' -> 'nope'" == tally["problem"]


def test_the_cli_replays_the_sample_at_each_rate(tmp_path):
    out = tmp_path / "out"
    done = run_bench("--codecs", "msgpack,msgpack+zstdstream-3", "--sizes-only", "--loss", "0,1,5", "--rtt", "100",
                     "--transport", "udp", "--wire", "per-call,tick:100", "--out", out, "--no-report", "--quiet")
    assert done.returncode == 0, done.stderr
    data = json.loads((out / "results.json").read_text())
    assert data["settings"]["loss"] == [0, 1, 5] and data["settings"]["rtt_ms"] == 100
    for result in data["results"]:
        wire = {w["wire"]: w for w in result["wire"]}
        assert [(k["wire"], k["loss_pct"]) for k in result["link"]] == [
            (w, p) for w in ("per-call", "tick:100") for p in (0, 1, 5)]
        for k in result["link"]:
            assert k["calls"] == 20000 == k["delivered_calls"] + k["lost_calls"]
            assert k["by_direction"]["c2s"]["calls"] + k["by_direction"]["s2c"]["calls"] == 20000
            if k["loss_pct"] == 0:  # no loss: the wire model's packets and payload, to the byte
                assert (k["packets"], k["payload_bytes"]) == (wire[k["wire"]]["packets"],
                                                              wire[k["wire"]]["payload_bytes"])
                assert k["resend_bytes"] == k["lost_calls"] == 0 and k["latency_p99_ms"] == 0
        lossy = [k for k in result["link"] if k["loss_pct"] == 5]
        if result["ordered_delivery"]:
            assert all(k["delivery"] == "reliable" and k["lost_calls"] == 0 and k["resend_bytes"] > 0
                       and k["latency_p99_ms"] >= 100 for k in lossy)
        else:
            assert all(k["delivery"] == "udp" and k["lost_calls"] > 0 and k["ack_bytes"] == 0 for k in lossy)
    rows = list(csv.DictReader(open(out / "results.csv", encoding="utf-8")))
    assert len(rows) == 2 * 2 * 3
    by_key = {(r["codec"], r["wire"], r["loss_pct"]): r for r in rows}
    for result in data["results"]:
        for k in result["link"]:
            row = by_key[(result["codec"], k["wire"], f"{k['loss_pct']:g}")]
            assert (int(row["wire_bytes"]), int(row["resend_bytes"]), int(row["lost_calls"])) == (
                k["wire_bytes"], k["resend_bytes"], k["lost_calls"])


@pytest.mark.parametrize("args, message", [
    (["--loss", "60"], "--loss 60: each rate must be 0 to 50 percent"),
    (["--loss", "nan"], "--loss nan: each rate must be 0 to 50 percent"),
    (["--loss", "1,1"], "--loss names a rate twice"),
    (["--loss", "x"], "argument --loss: 'x' is not a number"),
    (["--loss", "1", "--rtt", "0"], "--rtt 0: must be over 0 and at most 10000 ms"),
    (["--loss", "1", "--rtt", "10", "--jitter", "6"], "--jitter 6: must be 0 to half the RTT"),
    (["--loss", "1", "--loss-burst", "0.5"], "--loss-burst 0.5: must be 1 to 1000"),
    (["--loss", "1", "--sample-calls", "100"], "not with --sample-calls"),
])
def test_bad_link_options_are_one_line(tmp_path, args, message):
    done = run_bench("--codecs", "json", "--sizes-only", "--out", tmp_path / "o", "--quiet", *args)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert message in done.stderr.strip().splitlines()[-1]  # argparse's usage lines come first, as for any option


def test_a_fleet_merges_each_traces_replays_exactly(tmp_path):
    paths = []
    for seed, hz in ((3, 30), (4, 10)):
        paths.append(tmp_path / f"t{seed}.rpct")
        with TraceWriter(str(paths[-1]), {"generator": "test"}) as writer:
            for call in simulate_profile("dict", 2500, seed, hz):
                writer.write(call)
    out = tmp_path / "out"
    done = run_bench("--trace", *paths, "--codecs", "msgpack,msgpack+zstdstream-3", "--sizes-only", "--loss", "2,10",
                     "--jitter", "10", "--loss-burst", "3", "--wire", "tick:auto", "--out", out, "--no-report",
                     "--quiet")
    assert done.returncode == 0, done.stderr
    data = json.loads((out / "results.json").read_text())
    for number, merged in enumerate(data["results"]):
        alone = [t["results"][number]["link"] for t in data["traces"]]
        assert len(merged["link"]) == 2 and all(len(a) == 2 for a in alone)
        for at, replay in enumerate(merged["link"]):
            for key in ("calls", "lost_calls", "packets", "lost_packets", "ack_packets", "payload_bytes",
                        "resend_bytes", "ack_bytes", "wire_bytes"):
                assert replay[key] == sum(a[at][key] for a in alone), key
            assert replay["calls"] == 5000
            ps = [a[at]["latency_p99_ms"] for a in alone]
            assert min(ps) <= replay["latency_p99_ms"] <= max(ps)


class Checked(Replay):
    """A replay that, whenever acks reach a sender, checks each baseline the sender may now use against what its
    receiver holds: the receiver holds that message of the key or a newer one, and the same call when the same."""

    def _acked(self, *acks):
        super()._acked(*acks)
        for key in {self._units[number].key for number, _ in acks}:
            held = self._receivers[key].state()
            for entity, (msg_id, call) in self._senders[key].view().items():
                assert held[entity][0] >= msg_id
                if held[entity][0] == msg_id:
                    assert (held[entity][1].method, held[entity][1].args) == (call.method, call.args)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32), st.floats(0, 40), st.sampled_from([1, 3]), st.floats(0, 40),
       st.sampled_from(["per-call", "tick:50+mtu:200"]))
def test_real_ackdelta_decodes_every_delivered_call_under_loss(seed, rate, burst, jitter, policy):
    if "ackdelta" not in REGISTRY.stages:
        pytest.skip("no +ackdelta stage in this tree (branch i31-ackdelta)")
    calls = DICT_SLICE
    wire = WirePolicy(policy) if policy == "per-call" else WirePolicy(policy, 50.0, 200)
    link = LinkSettings((rate,), 100, jitter, burst, seed)
    run = Checked(REGISTRY.create("msgpack+ackdelta"), wire, calls, batches(calls, wire, calls[0].t), link, rate, UDP)
    tally = run.run().export()
    assert tally["delivery"] == "ackdelta" and tally["mismatches"] == 0, tally["problem"]
    delivered = sum(d[1] for d in tally["directions"].values())
    assert delivered + sum(d[2] for d in tally["directions"].values()) == len(calls)


def test_jitter_alone_delays_only_ordered_delivery():
    link = LinkSettings((0,), 100, 40, 1, 3)  # no loss: reordering is all there is
    ordered = replay("msgpack+zstdstream-3", link, 0).run().export()
    plain = replay("msgpack", link, 0).run().export()
    assert sum(ordered["latency"].values()) == sum(plain["latency"].values()) == len(SLICE)
    assert max(ordered["latency"]) > 0 and set(plain["latency"]) == {0}
    assert sum(d[8] for d in ordered["directions"].values()) == 0  # acks come back within the RTO: no resend


@pytest.fixture(scope="module")
def one_rate(tmp_path_factory):
    """results.json of a run at one loss rate."""
    out = tmp_path_factory.mktemp("one_rate")
    assert run_bench("--codecs", "json", "--sizes-only", "--loss", "1", "--out", out, "--no-report", "--force",
                     "--quiet").returncode == 0
    return json.loads((out / "results.json").read_text())


def test_results_of_older_schemas_load_without_replays(one_rate, tmp_path):
    from rpcbench.results import load
    out = tmp_path
    (out / "results.json").write_text(json.dumps(one_rate))
    assert load(str(out)).results[0].link[0]["loss_pct"] == 1
    data = json.loads(json.dumps(one_rate))
    data["schema_version"] = 7
    for result in data["results"]:
        del result["link"]
    (out / "results.json").write_text(json.dumps(data))
    assert load(str(out)).results[0].link == ()


def test_a_damaged_replay_in_results_is_refused_naming_its_field(one_rate, tmp_path):
    from rpcbench.errors import BenchError
    from rpcbench.results import load
    out = tmp_path
    data = json.loads(json.dumps(one_rate))
    data["results"][0]["link"][0]["by_direction"]["s2c"]["resend_bytes"] = -3
    (out / "results.json").write_text(json.dumps(data))
    with pytest.raises(BenchError, match=r"results\[0\]\.link\[0\]\.by_direction\.s2c\.resend_bytes"):
        load(str(out))
