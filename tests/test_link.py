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


class Reference:
    """The link model written apart, per call (one datagram each): an event list kept sorted by bisect, the losses
    drawn from their own seeded generators. ``size_of(i)``: call i's bytes; ``mode``: udp, reliable (KCP: acks of
    24 B ride on the next datagram going back while they fit in 1400 B, the rest go at the 10 ms flush), or
    ackdelta (every datagram's 8 B header acks the newest sequence received and the 32 before it; a header-only
    packet 10 ms after a datagram arrives if nothing went back since; ``sender()``: the stage's sending half, driven
    here). :meth:`run` returns the counts the replay must give."""

    def __init__(self, calls: List[Call], size_of, link: LinkSettings, rate: float, mode: str, sender=None) -> None:
        self.calls, self.size_of, self.link, self.mode, self.sender = calls, size_of, link, mode, sender
        self.enter, self.stay = (rate / 100, rate / 100) if link.burst == 1 else (
            rate / 100 / (link.burst * (1 - rate / 100)), 1 - 1 / link.burst)
        self.gens: Dict[Any, Tuple[random.Random, random.Random]] = {}
        self.bad: Dict[Any, bool] = {}
        self.rto = round(max(30.0, link.rtt_ms + max(10.0, 8 * link.jitter_ms / 3)) * 1e6)
        self.counts = dict.fromkeys(("packets", "resends", "resend_bytes", "acks", "ack_bytes", "payload",
                                     "lost_calls"), 0)
        #: (time, kind: 0 arrive 1 flush 2 ack 3 timeout 4 send, n, what)
        self.events: List[Tuple[int, int, int, Any]] = []
        self.serial = itertools.count()
        self.arrived, self.acked, self.owed, self.sizes = set(), set(), {}, {}
        self.seq_of, self.by_seq, self.heard = {}, {}, {}  # ackdelta: call -> seq, (channel, seq) -> call, got
        self.ids, self.senders, self.msg_id = {}, {}, {}

    def fate(self, channel) -> Tuple[bool, int]:
        if channel not in self.gens:
            conn, direction = channel
            self.gens[channel] = (random.Random(f"loss/{self.link.seed}/{conn!r}/{direction}"),
                                  random.Random(f"delay/{self.link.seed}/{conn!r}/{direction}"))
            self.bad[channel] = False
        u = self.gens[channel][0].random()
        self.bad[channel] = u < (self.stay if self.bad[channel] else self.enter)
        jitter = (2 * self.gens[channel][1].random() - 1) * (self.link.jitter_ms * 1e6)
        return self.bad[channel], round(self.link.rtt_ms * 5e5 + jitter)

    @staticmethod
    def back(channel):
        return channel[0], S2C if channel[1] == C2S else C2S

    def later(self, t, kind, what):
        bisect.insort(self.events, (t, kind, next(self.serial), what))

    def acks_leaving(self, channel, size):
        """The acks a datagram leaving on ``channel`` carries."""
        if self.mode == "reliable":
            room = max(0, (1400 - 24 - size) // 24)
            riding, self.owed[channel] = self.owed.get(channel, [])[:room], self.owed.get(channel, [])[room:]
            self.counts["ack_bytes"] += 24 * len(riding)
            return riding
        if self.mode == "ackdelta":
            self.owed.pop(channel, None)
            got = self.heard.get(self.back(channel), set())
            newest = max(got, default=0)
            return [self.by_seq[(self.back(channel), s)] for s in got if newest - 32 <= s]
        return []

    def size(self, i, channel):
        if i not in self.sizes:
            if self.mode == "ackdelta":
                stream = self.senders.setdefault(channel, self.sender())
                self.msg_id[i] = self.ids[channel] = self.ids.get(channel, -1) + 1
                self.sizes[i] = len(stream.encode(self.calls[i], self.msg_id[i]))
            else:
                self.sizes[i] = self.size_of(i)
        return self.sizes[i]

    def send(self, t, i, attempt):
        channel = (self.calls[i].conn, self.calls[i].dir)
        size = self.size(i, channel)
        self.counts["packets"] += 1
        self.counts["payload"] += size
        if attempt:
            self.counts["resends"] += 1
            self.counts["resend_bytes"] += size
        if self.mode == "ackdelta":
            self.seq_of[i] = sum(1 for key in self.by_seq if key[0] == channel)
            self.by_seq[(channel, self.seq_of[i])] = i
        lost, delay = self.fate(channel)
        riding = self.acks_leaving(channel, size)
        if not lost:
            self.later(t + delay, 0, i)
            if riding:
                self.later(t + delay, 2, riding)
        if self.mode == "reliable":
            self.later(t + round(self.rto * 1.5 ** attempt), 3, (i, attempt))

    def ack_only(self, t, channel, size, acks):
        self.counts["acks"] += 1
        self.counts["ack_bytes"] += size
        lost, delay = self.fate(channel)
        if not lost:
            self.later(t + delay, 2, acks)

    def arrive(self, t, i):
        self.arrived.add(i)
        ours = (self.calls[i].conn, self.calls[i].dir)
        theirs = self.back(ours)
        if self.mode == "reliable":
            if not self.owed.get(theirs):
                self.later(-(-t // 10_000_000) * 10_000_000, 1, theirs)
            self.owed.setdefault(theirs, []).append(i)
        elif self.mode == "ackdelta":
            self.heard.setdefault(ours, set()).add(self.seq_of[i])
            if theirs not in self.owed:
                self.owed[theirs] = t + 10_000_000
                self.later(t + 10_000_000, 1, theirs)

    def flush(self, t, channel):
        if self.mode == "reliable":
            pending = self.owed.pop(channel, [])
            for k in range(0, len(pending), 58):
                self.ack_only(t, channel, 24 * len(pending[k:k + 58]), pending[k:k + 58])
        elif self.owed.get(channel) == t:
            self.ack_only(t, channel, 8, self.acks_leaving(channel, 0))

    def run(self) -> Dict[str, int]:
        self.events = sorted((call.t, 4, next(self.serial), i) for i, call in enumerate(self.calls))
        while self.events:
            t, kind, _, what = self.events.pop(0)
            if kind == 4:
                self.send(t, what, 0)
            elif kind == 0:
                self.arrive(t, what)
            elif kind == 1:
                self.flush(t, what)
            elif kind == 2:
                for i in what:
                    if self.mode == "ackdelta" and i not in self.acked:
                        self.senders[(self.calls[i].conn, self.calls[i].dir)].acked(self.msg_id[i])
                    self.acked.add(i)
            elif what[0] not in self.acked:
                self.send(t, what[0], what[1] + 1)
        self.counts["lost_calls"] = len(self.calls) - len(self.arrived)
        return self.counts


def bursts() -> List[Call]:
    """Made for the edges the sample never reaches: each second, 50 moves of 50 entities in one burst one way (more
    than an ack window of 33, more acks than fit beside a big datagram), then one big random blob the other way
    55 ms later, while the moves' acks still wait for the flush."""
    blob = random.Random(1)
    calls = []
    for second in range(4):
        t = second * 1_000_000_000
        calls += [Call("move", {"id": k, "x": second * (k % 3), "hp": 100, "tag": "m" * 20}, t, C2S, 1)
                  for k in range(50)]
        calls.append(Call("state", {"id": 0, "blob": "".join(blob.choice("abcdefghijklmnopqrstuvwxyz0123456789")
                                                             for _ in range(1000))}, t + 55_000_000, S2C, 1))
    return calls


def stream_sizes(name: str, calls: List[Call]) -> List[int]:
    """Each call's bytes under ``name``, a session per connection and direction."""
    codec, sessions = REGISTRY.create(name), {}
    return [len(sessions.setdefault((c.conn, c.dir), codec.connection()).encode(c)) for c in calls]


@pytest.mark.parametrize("name, link, rate, made", [
    ("msgpack", LinkSettings((5,), 100, 0, 1, 7), 5, False),
    ("msgpack", LinkSettings((20,), 80, 30, 4, 2), 20, False),
    ("msgpack+zstdstream-3", LinkSettings((5,), 100, 0, 1, 7), 5, False),
    ("msgpack+zstdstream-3", LinkSettings((10,), 60, 25, 3, 11), 10, False),
    ("json+zlibstream-1", LinkSettings((30,), 150, 70, 2.5, 5), 30, False),
    ("msgpack+ackdelta", LinkSettings((0,), 100, 0, 1, 7), 0, False),
    ("msgpack+ackdelta", LinkSettings((5,), 100, 20, 1, 7), 5, False),
    ("json+ackdelta", LinkSettings((30,), 60, 25, 3, 11), 30, False),
    ("msgpack+zstdstream-3", LinkSettings((0,), 104, 0, 1, 7), 0, True),
    ("msgpack+zstdstream-3", LinkSettings((10,), 104, 0, 1, 7), 10, True),
    ("msgpack+ackdelta", LinkSettings((0,), 104, 0, 1, 7), 0, True),
    ("msgpack+ackdelta", LinkSettings((10,), 104, 0, 1, 7), 10, True),
])
def test_the_replay_counts_what_a_simulation_written_apart_counts(name, link, rate, made):
    calls = bursts() if made else SLICE[:600]
    tally = replay(name, link, rate, calls=calls).run().export()
    mode = delivery_of(REGISTRY.create(name))
    sizes = stream_sizes(name, calls) if mode != "ackdelta" else []
    want = Reference(calls, sizes.__getitem__, link, rate, mode, getattr(REGISTRY.create(name), "sender", None)).run()
    got = {key: sum(d[i] for d in tally["directions"].values()) for key, i in
           (("packets", 3), ("payload", 7), ("resend_bytes", 8), ("acks", 5), ("ack_bytes", 9), ("lost_calls", 2))}
    assert got == {k: want[k] for k in got}
    lossy = rate > 0
    assert (want["resends"] > 0) == (mode == "reliable" and lossy) and (want["lost_calls"] > 0) == (
        mode != "reliable" and lossy)
    assert (want["acks"] > 0) == (mode != "udp")
    assert want["ack_bytes"] > 24 * want["acks"] if mode == "reliable" else True  # some acks rode on data


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
    assert figures(3).states["msgpack"][0][2]["lost_by_method"] != figures(4).states["msgpack"][0][2]["lost_by_method"]


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


def test_ackdelta_acks_wait_a_tick_for_a_packet_going_back_when_batched():
    link = LinkSettings((0,), 100, 0, 1, 5)
    per_call, ticked = (replay("msgpack+ackdelta", link, 0, policy, DICT_SLICE).run() for policy in
                        ("per-call", "tick:50+mtu:200"))
    ack_only = [sum(d[5] for d in r.directions.values()) for r in (per_call, ticked)]
    assert 0 < ack_only[1] < 0.7 * ack_only[0]  # 50 ms for a packet to go back, not 10 (that gives 117 of 150)
    assert ticked.mismatches == per_call.mismatches == 0


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
       st.sampled_from(["per-call", "tick:50+mtu:200"]),
       st.sampled_from(["msgpack+ackdelta", "msgpack+ackdelta+zstd-3"]))
def test_real_ackdelta_decodes_every_delivered_call_under_loss(seed, rate, burst, jitter, policy, name):
    if "ackdelta" not in REGISTRY.stages:
        pytest.skip("no +ackdelta stage in this tree (branch i31-ackdelta)")
    calls = DICT_SLICE
    wire = WirePolicy(policy) if policy == "per-call" else WirePolicy(policy, 50.0, 200)
    link = LinkSettings((rate,), 100, jitter, burst, seed)
    run = Checked(REGISTRY.create(name), wire, calls, batches(calls, wire, calls[0].t), link, rate, UDP)
    tally = run.run().export()
    assert tally["delivery"] == "ackdelta" and tally["mismatches"] == 0, tally["problem"]
    delivered = sum(d[1] for d in tally["directions"].values())
    assert delivered + sum(d[2] for d in tally["directions"].values()) == len(calls)


@pytest.mark.parametrize("policy", ["per-call", "tick:50+mtu:200"])
def test_ackdelta_behind_a_compressor_is_driven_by_acks_unless_the_compressor_is_a_stream(policy):
    link = LinkSettings((5,), 100, 0, 1, 3)
    alone, packed, stream = (replay(n, link, 5, policy, DICT_SLICE).run().export()
                             for n in ("json+ackdelta", "json+ackdelta+zstd-3", "json+ackdelta+zstdstream-3"))
    assert packed["delivery"] == "ackdelta" and packed["mismatches"] == 0, packed["problem"]
    assert stream["delivery"] == "reliable" and sum(d[2] for d in stream["directions"].values()) == 0
    lost = [sum(d[2] for d in t["directions"].values()) for t in (alone, packed)]
    assert lost[0] == lost[1] > 0  # the same datagrams meet the same fates
    assert 0 < sum(d[7] for d in packed["directions"].values()) < sum(d[7] for d in alone["directions"].values())


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
    assert load(str(out)).results[0].link[0].loss_pct == 1
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
