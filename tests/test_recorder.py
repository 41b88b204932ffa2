"""The live recorder: every call offered is recorded or counted, nothing blocks or raises,
crash safety under SIGKILL, rotation, compression, filters, sampling, wrappers."""

from __future__ import annotations

import asyncio
import collections
import enum
import errno
import gzip
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from rpc_capture import C2S, S2C, Call, NullRecorder, Recorder, TraceWriter, open_trace, recorder
from rpc_capture import trace as T

REPO = Path(__file__).resolve().parent.parent


def sample_calls(n, start=0):
    return [Call("move" if i % 3 else "hp_update",
                 {"i": i, "pos": [i * 0.5, -1.0], "name": "x" * (i % 5), "ok": i % 2 == 0},
                 0, S2C if i % 2 else C2S, i % 4) for i in range(start, start + n)]


def read(path):
    reader = open_trace(path)
    return list(reader), reader


def counters_add_up(stats, offered):
    parts = ("recorded", "pending", "filtered_out", "sampled_out", "dropped_queue_full", "dropped_unrecordable",
             "dropped_write_error")
    return stats["offered"] == offered == sum(stats[k] for k in parts)


# ---------------------------------------------------------------------------------- basics


def test_records_every_call_in_order_and_closes_cleanly(tmp_path):
    path = tmp_path / "r.rpct"
    sample = sample_calls(3000)
    before = time.time_ns()
    with Recorder(path, metadata={"battle": 42}) as rec:
        for c in sample:
            rec.record(c.method, c.args, c.dir, c.conn)
    after = time.time_ns()
    back, reader = read(path)
    assert [(c.method, c.args, c.dir, c.conn) for c in back] == [(c.method, c.args, c.dir, c.conn) for c in sample]
    times = [c.t for c in back]
    assert times == sorted(times) and before <= times[0] and times[-1] <= after
    assert reader.metadata["battle"] == 42 and reader.metadata["generator"] == "rpc_capture.Recorder"
    assert reader.end["calls"] == 3000 and reader.end["recorded"] == 3000 and counters_add_up(reader.end, 3000)
    assert reader.end["pending"] == 0 and reader.truncated_bytes == 0
    assert rec.stats()["recorded"] == 3000
    assert rec.close()["recorded"] == 3000  # a second close is harmless
    rec.record("late", {})  # after close: ignored and counted, never raised
    assert rec.stats()["ignored_after_close"] == 1 and len(read(path)[0]) == 3000


def test_defaults_for_direction_and_connection(tmp_path):
    with Recorder(tmp_path / "r.rpct") as rec:
        rec.record("ping", None)
        rec.record("pong", {"a": 1}, conn="player-7", direction=S2C)
    back, _ = read(tmp_path / "r.rpct")
    assert [(c.method, c.args, c.dir, c.conn) for c in back] == [
        ("ping", None, C2S, 0), ("pong", {"a": 1}, S2C, "player-7")]


class Skill(enum.IntEnum):
    FIREBALL = 5703


class Team(str, enum.Enum):  # a str mixin whose str() is "Team.RED", not its value
    RED = "red"


Pos = collections.namedtuple("Pos", "x y")


def test_subclasses_and_bytes_likes_are_recorded_as_their_base_types(tmp_path):
    """marshal refuses IntEnum, named tuples...: the writer converts such a batch call by call."""
    path = tmp_path / "odd.rpct"
    odd = {"skill": Skill.FIREBALL, "team": Team.RED, "at": Pos(1.5, 2), "opts": collections.OrderedDict(a=1),
           "raw": bytearray(b"\x00\xff"), "view": memoryview(b"mv"), "tags": {Skill.FIREBALL}, "keys": {(1, 2): 3}}
    with Recorder(path) as rec:
        rec.record("plain", {"a": 1})
        rec.record(Team.RED, odd, S2C, Skill.FIREBALL)
        rec.record("plain", {"a": 2})
    back, reader = read(path)
    assert reader.end["recorded"] == 3 and reader.end["dropped_unrecordable"] == 0
    assert back[1] == Call("red", {"skill": 5703, "team": "red", "at": (1.5, 2), "opts": {"a": 1}, "raw": b"\x00\xff",
                                   "view": b"mv", "tags": {5703}, "keys": {(1, 2): 3}}, back[1].t, S2C, 5703)
    exact = [type(back[1].method), type(back[1].conn)] + [type(v) for v in back[1].args.values()]
    assert exact == [str, int, int, str, tuple, dict, bytes, bytes, set, dict]
    assert [c.args for c in (back[0], back[2])] == [{"a": 1}, {"a": 2}]


def test_recordable_names_what_cannot_be_recorded():
    cases = [(("m", {}, 0, "sideways", 1), "direction 'sideways'"),
             (("m", {}, 0, C2S, None), "connection id is NoneType"),
             (("m", {}, 0, C2S, True), "connection id is bool"), ((3, {}, 0, C2S, 1), "method is int"),
             (("m", {}, 0.5, C2S, 1), "call time is float"), (("m", [1, object()], 0, C2S, 1), "type object")]
    for bad, message in cases:
        with pytest.raises((TypeError, ValueError), match=message):
            T.recordable(bad)
        with pytest.raises((TypeError, ValueError)):
            T.encode_batch([("ok", {}, 0, C2S, 1), bad])


# ---------------------------------------------------------------------------------- bounded, counted


@pytest.fixture
def slow_writer(monkeypatch):
    """Each batch write takes 5 ms: a producer in a loop is then far faster than the writer."""
    original = TraceWriter.write_records

    def slow(self, data, calls):
        time.sleep(0.005)
        original(self, data, calls)

    monkeypatch.setattr(TraceWriter, "write_records", slow)


def test_overload_drops_and_counts_exactly_with_bounded_queue(tmp_path, slow_writer):
    path = tmp_path / "r.rpct"
    rec = Recorder(path, max_queue=200)
    offered = 20000
    args = {"unit": 7, "x": 1.5}
    for i in range(offered):
        rec.record("sync", args, S2C, i)
    stats = rec.close()
    back, reader = read(path)
    assert counters_add_up(stats, offered)
    assert stats["recorded"] + stats["dropped_queue_full"] == offered
    assert stats["dropped_queue_full"] > 0 and stats["recorded"] > 0
    assert stats["queue_peak"] <= 200  # memory bound: never more queued than max_queue
    assert len(back) == stats["recorded"] == reader.end["calls"]
    assert reader.end["dropped_queue_full"] == stats["dropped_queue_full"]
    conns = [c.conn for c in back]
    assert conns == sorted(conns)  # what was kept is in the order offered


def test_concurrent_producers_are_counted_exactly(tmp_path, slow_writer):
    path = tmp_path / "r.rpct"
    rec = Recorder(path, max_queue=300)
    per_thread, threads = 4000, 4

    def produce(k):
        for i in range(per_thread):
            rec.record("t", {"thread": k, "i": i}, C2S, k)

    workers = [threading.Thread(target=produce, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    stats = rec.close()
    back, _ = read(path)
    assert counters_add_up(stats, per_thread * threads)
    assert stats["recorded"] == len(back)
    assert stats["queue_peak"] <= 300 + threads  # check-then-append may overshoot by one per producer
    for k in range(threads):
        mine = [c.args["i"] for c in back if c.conn == k]
        assert mine == sorted(mine)


def test_filters_and_sampling_are_counted_not_dropped(tmp_path):
    path = tmp_path / "f.rpct"
    names = ["move", "buff_add", "buff_remove", "chat"]
    with Recorder(path, include=["move", "buff_*"], exclude=["buff_remove"]) as rec:
        for i in range(400):
            rec.record(names[i % 4], {"i": i})
    back, reader = read(path)
    assert sorted({c.method for c in back}) == ["buff_add", "move"] and len(back) == 200
    assert reader.end["filtered_out"] == 200 and counters_add_up(reader.end, 400)

    path = tmp_path / "s.rpct"
    with Recorder(path, sample_calls=4, seed=3) as rec:
        for i in range(4000):
            rec.record("move", {"i": i})
    back, reader = read(path)
    assert 800 <= len(back) <= 1200  # 1 in 4 at random: 1000 expected, a 6-sigma band
    assert reader.end["sampled_out"] == 4000 - len(back) and counters_add_up(reader.end, 4000)
    assert sum(v for k, v in reader.end.items() if k.startswith("dropped")) == 0


def test_copy_args_snapshots_what_the_caller_mutates_later(tmp_path):
    path = tmp_path / "c.rpct"
    with Recorder(path, copy_args=True) as rec:
        args = {"hp": 100, "buffs": [1, 2], "pos": {"x": 1.0}, "raw": bytearray(b"ab")}
        for hp in (100, 90, 80):
            args["hp"] = hp
            rec.record("hp_update", args)
            args["buffs"].append(hp)
            args["pos"]["x"] += 1
            args["raw"] += b"!"
    back, _ = read(path)
    assert [c.args for c in back] == [
        {"hp": 100, "buffs": [1, 2], "pos": {"x": 1.0}, "raw": b"ab"},
        {"hp": 90, "buffs": [1, 2, 100], "pos": {"x": 2.0}, "raw": b"ab!"},
        {"hp": 80, "buffs": [1, 2, 100, 90], "pos": {"x": 3.0}, "raw": b"ab!!"},
    ]


def test_unrecordable_calls_are_counted_and_logged_never_raised(tmp_path, caplog):
    path = tmp_path / "u.rpct"
    with caplog.at_level(logging.WARNING, logger="rpc_capture"):
        with Recorder(path) as rec:
            rec.record("ok", {"a": 1})
            rec.record("obj", {"a": object()})
            rec.record("dir", {}, "sideways")
            rec.record("conn", {}, C2S, None)
            rec.record(["not", "a", "name"], {})
            rec.record("ok", {"a": 2})
    back, reader = read(path)
    assert [c.args for c in back] == [{"a": 1}, {"a": 2}]
    assert reader.end["dropped_unrecordable"] == 4 and counters_add_up(reader.end, 6)
    assert any("'obj' not recorded" in r.getMessage() for r in caplog.records)


# ---------------------------------------------------------------------------------- write errors


def test_write_error_stops_recording_with_one_error_and_counts_the_loss(tmp_path, monkeypatch, caplog):
    path = tmp_path / "w.rpct"
    original = TraceWriter.write_records
    writes = []

    def failing(self, data, calls):
        if len(writes) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        writes.append(calls)
        original(self, data, calls)

    monkeypatch.setattr(TraceWriter, "write_records", failing)
    rec = Recorder(path)
    offered = 0
    with caplog.at_level(logging.ERROR, logger="rpc_capture"):
        for _ in range(6):
            for _ in range(100):
                rec.record("move", {"i": offered})
                offered += 1
            rec.flush(timeout=10)
        stats = rec.close()
    assert "No space left on device" in stats["error"] and rec.error == stats["error"]
    assert stats["recorded"] == sum(writes) == 200
    assert stats["dropped_write_error"] == offered - 200 and counters_add_up(stats, offered)
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1
    back, reader = read(path)  # what was written before the failure still reads back
    assert [c.args["i"] for c in back] == list(range(200)) and reader.end is None


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs Linux /dev/full")
def test_real_disk_full_never_raises_into_the_caller(caplog):
    with caplog.at_level(logging.ERROR, logger="rpc_capture"):
        rec = Recorder("/dev/full", flush_interval=0.01)
        for i in range(5000):
            rec.record("move", {"i": i, "pad": "x" * 50})
        assert rec.flush(timeout=10) is False
        for i in range(100):  # after the failure: still no exception, every call counted
            rec.record("move", {"i": i})
        stats = rec.close()
    assert stats["error"].startswith("OSError") and "No space left" in stats["error"]
    assert stats["recorded"] == 0 and counters_add_up(stats, 5100)
    assert stats["dropped_write_error"] == 5100
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1


# ---------------------------------------------------------------------------------- flushing and crashes


def test_flushes_by_itself_without_close(tmp_path):
    path = tmp_path / "p.rpct"
    rec = Recorder(path, flush_interval=0.05)
    for i in range(10):
        rec.record("move", {"i": i})
    deadline = time.monotonic() + 10
    seen = []
    while time.monotonic() < deadline:  # a bound, not a speed requirement
        seen, reader = read(path)
        if len(seen) == 10:
            break
        time.sleep(0.02)
    assert len(seen) == 10 and reader.end is None and reader.stats["recorded"] == 10
    rec.close()


CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {repo!r})
    from rpc_capture import Recorder
    rec = Recorder(sys.argv[1], compresslevel=int(sys.argv[2]) or None, flush_interval=0.05)
    i = 0
    while True:
        for _ in range(250):
            rec.record("tick", {{"i": i, "pos": [i * 0.5, -1.0], "name": "x" * (i % 7)}}, "s2c", i % 4)
            i += 1
        assert rec.flush(10)
        print(i, flush=True)  # every call below i is on its way to the disk
        for _ in range(i % 100):  # and some more that may or may not be
            rec.record("tick", {{"i": i}}, "s2c", i % 4)
            i += 1
""")


@pytest.mark.parametrize("level", [0, 1])
def test_sigkill_mid_recording_keeps_every_flushed_call(tmp_path, level):
    path = tmp_path / "killed.rpct"
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(repo=str(REPO)))
    child = subprocess.Popen([sys.executable, str(script), str(path), str(level)], stdout=subprocess.PIPE, text=True)
    try:
        flushed = 0
        deadline = time.monotonic() + 20
        while flushed < 4000 and time.monotonic() < deadline:
            line = child.stdout.readline()
            assert line, "the recording process died on its own"
            flushed = int(line)
        child.send_signal(signal.SIGKILL)  # mid-recording: the writer thread is busy
    finally:
        child.kill()
        child.wait(10)
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    back, reader = read(path)
    got = [c.args["i"] for c in back]
    assert got == list(range(len(got)))  # complete calls only, in order, none missing
    assert len(got) >= flushed >= 4000
    assert reader.end is None  # the reader reports the unclean end...
    assert reader.stats is not None and reader.stats["recorded"] >= flushed - 250  # ...and the last counters
    if level:
        assert path.read_bytes()[:2] == b"\x1f\x8b"


def test_recorder_left_open_is_closed_at_interpreter_exit(tmp_path):
    path = tmp_path / "exit.rpct"
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r}); from rpc_capture import Recorder; "
            f"rec = Recorder({str(path)!r}); [rec.record('m', {{'i': i}}) for i in range(1000)]")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
    back, reader = read(path)
    assert len(back) == 1000 and reader.end["recorded"] == 1000


# ---------------------------------------------------------------------------------- rotation, compression


def test_rotation_by_size_makes_numbered_complete_traces(tmp_path):
    path = tmp_path / "battle.rpct"
    sample = sample_calls(3000)
    with Recorder(path, rotate_bytes=20_000) as rec:
        for k, c in enumerate(sample):
            rec.record(c.method, c.args, c.dir, c.conn)
            if k % 200 == 199:
                rec.flush()
    assert len(rec.paths) >= 3 and not path.exists()
    assert [os.path.basename(p) for p in rec.paths] == [f"battle.{n:04d}.rpct" for n in range(1, len(rec.paths) + 1)]
    everything = []
    for n, part in enumerate(rec.paths, 1):
        back, reader = read(part)
        assert reader.end is not None and reader.end["calls"] == len(back) and reader.metadata["part"] == n
        everything += back
    assert [c.args for c in everything] == [c.args for c in sample]
    assert reader.end["recorded"] == 3000 and reader.end["files"] == len(rec.paths)


def test_rotation_by_time(tmp_path):
    path = tmp_path / "t.rpct.gz"
    with Recorder(path, rotate_seconds=0.05, compresslevel=1) as rec:
        for i in range(6):
            rec.record("move", {"i": i})
            rec.flush()
            time.sleep(0.06)
    assert len(rec.paths) >= 2 and all(p.endswith(".rpct.gz") for p in rec.paths)
    got = [c.args["i"] for p in rec.paths for c in read(p)[0]]
    assert got == list(range(6))


def test_compressed_recording(tmp_path):
    path = tmp_path / "c.rpct.gz"
    sample = sample_calls(2000)
    with Recorder(path, compresslevel=6) as rec:
        for c in sample:
            rec.record(c.method, c.args, c.dir, c.conn)
    assert path.read_bytes()[:2] == b"\x1f\x8b"
    assert len(gzip.decompress(path.read_bytes())) > 2 * path.stat().st_size
    back, reader = read(path)
    assert [c.args for c in back] == [c.args for c in sample] and reader.end["recorded"] == 2000


# ---------------------------------------------------------------------------------- off switch, battle sampling


def test_off_switch_is_a_no_op_with_the_same_api(tmp_path):
    for off in (recorder(None), recorder(tmp_path / "x.rpct", enabled=False), Recorder.disabled()):
        assert isinstance(off, NullRecorder) and not off.enabled
        off.record("move", {"a": 1}, S2C, 3)
        with off as same:
            same.record("move", {})

        def send(conn, method, args):
            return "sent"

        assert off.wrap(send) is send and off.wrap(direction=S2C)(send) is send
        assert off.handler()(send) is send
        assert off.flush() is True and off.close() == {} and off.stats() == {}
    assert list(tmp_path.iterdir()) == []


def test_battle_sampling_is_stable_per_battle(tmp_path):
    picked = []
    for battle in range(200):
        rec = recorder(tmp_path / f"b{battle}.rpct", sample_battles=10, battle=battle)
        again = recorder(None if not rec.enabled else tmp_path / f"again{battle}.rpct",
                         sample_battles=10, battle=battle)
        assert rec.enabled == again.enabled or not rec.enabled
        if rec.enabled:
            picked.append(battle)
        rec.close()
        again.close()
    assert 5 <= len(picked) <= 40  # 1 in 10 of 200 by hash
    assert sorted(p.name for p in tmp_path.glob("b*.rpct")) == sorted(f"b{b}.rpct" for b in picked)


def test_bad_options_are_refused_at_construction(tmp_path):
    for bad in ({"max_queue": 0}, {"flush_interval": 0}, {"sample_calls": 0}, {"rotate_bytes": 0},
                {"compresslevel": 11}):
        with pytest.raises(ValueError):
            Recorder(tmp_path / "x.rpct", **bad)



def test_a_file_that_cannot_be_created_is_logged_not_raised(tmp_path, caplog):
    with caplog.at_level(logging.ERROR, logger="rpc_capture"):
        rec = Recorder(tmp_path / "no" / "such" / "dir" / "x.rpct")
        rec.record("move", {"i": 1})
        assert rec.flush() is False
        stats = rec.close()
    assert "No such file or directory" in rec.error and counters_add_up(stats, 1) and stats["dropped_write_error"] == 1
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1


# ---------------------------------------------------------------------------------- wrappers


def test_wrap_dispatch_and_send_functions(tmp_path):
    path = tmp_path / "w.rpct"
    handled = []
    with Recorder(path) as rec:

        @rec.wrap
        def dispatch(conn, method, args):
            handled.append(method)
            return len(handled)

        class Link:
            @rec.wrap(direction=S2C, conn="peer")
            def send(self, peer, method, args, flags=0):
                return flags

        assert dispatch(7, "move", {"to": [1, 2]}) == 1
        assert dispatch(conn=8, method="chat", args={"text": "gg"}) == 2
        assert Link().send(3, "welcome", {"id": 1}, flags=5) == 5
    back, _ = read(path)
    assert [(c.method, c.args, c.dir, c.conn) for c in back] == [
        ("move", {"to": [1, 2]}, C2S, 7), ("chat", {"text": "gg"}, C2S, 8), ("welcome", {"id": 1}, S2C, 3)]
    assert handled == ["move", "chat"] and dispatch.__name__ == "dispatch"


def test_handler_decorator_and_async_functions(tmp_path):
    path = tmp_path / "h.rpct"
    with Recorder(path) as rec:

        class Game:
            @rec.handler()
            def cast_skill(self, conn, skill, target=None):
                return skill

            @rec.handler("move_to", conn="peer")
            async def move(self, peer, x, y):
                await asyncio.sleep(0)
                return x + y

        game = Game()
        assert game.cast_skill(5, 5703) == 5703
        assert game.cast_skill(6, skill=1, target=9) == 1

        @rec.wrap(direction=S2C)
        async def send(conn, method, args):
            return method

        async def main():
            return await game.move(2, 1.5, y=2.0), await send(4, "ack", [1])

        assert asyncio.run(main()) == (3.5, "ack")
        with pytest.raises(ValueError, match="no parameter 'conn'"):
            rec.wrap(lambda peer, method, args: None)
    back, _ = read(path)
    assert [(c.method, c.args, c.dir, c.conn) for c in back] == [
        ("cast_skill", {"skill": 5703}, C2S, 5), ("cast_skill", {"skill": 1, "target": 9}, C2S, 6),
        ("move_to", {"x": 1.5, "y": 2.0}, C2S, 2), ("ack", [1], S2C, 4)]
