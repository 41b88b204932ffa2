#!/usr/bin/env python3
"""A small asyncio battle server that records its RPC traffic with rpc_capture.

Run it, then point bots at it (``examples/battle_bot.py``), then replay the trace::

    python examples/battle_server.py --port 7777 --players 4 --record battle.rpct &
    python examples/battle_bot.py --port 7777 --bots 4
    python run_bench.py --trace battle.rpct

Wire protocol (made up, but shaped like real ones): each message is UTF-8 JSON
``{"m": method, "a": args}``, after a 4-byte big-endian length on TCP (the default), or one
WebSocket message or UDP datagram each with ``--transport ws|ws-deflate|udp``
(``examples/battle_net.py``; ``--log-sent`` logs every message sent). Clients call ``join``,
``move``, ``cast_skill``, ``heartbeat`` and ``chat``; the server calls ``welcome``,
``sync_position``, ``damage``, ``skill_result``, ``battle_event``, ``state_snapshot``,
``heartbeat_ack``, ``chat`` and ``battle_end``.

Recording is three lines, marked ``# rpc_capture``: create the recorder (a no-op one when
``--record`` is not given), wrap the function every incoming call goes through and the
one every outgoing call goes through, close the recorder at the end. The game code
never waits for the recorder. One rule: args handed to ``send`` are recorded a few
milliseconds later by the writer thread, so they are never mutated after sending (each
call below builds fresh dicts); pass ``copy_args=True`` to the recorder if yours are.

Listens on 127.0.0.1 only. Stops by itself after ``--ticks`` ticks (or ``--max-seconds``).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import random
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from rpc_capture import C2S, S2C, recorder  # noqa: E402  # rpc_capture

sys.path.insert(0, str(Path(__file__).resolve().parent))
from battle_net import TRANSPORTS, Link, SentLog, listen, message  # noqa: E402  (the transports and the wire format)

ARENA = 100.0
SPEED = 12.0  #: units per second
SKILLS = {1: (90, 25.0, 1.0), 2: (160, 15.0, 3.0), 3: (300, 10.0, 8.0)}  #: skill -> (damage, range, cooldown s)
MAX_HP = 1000
RESPAWN_S = 2.0


class Hero:
    def __init__(self, hid: int, team: int, name: str, rng: random.Random) -> None:
        self.id, self.team, self.name = hid, team, name
        self.x, self.y = ((rng.uniform(5, 30), rng.uniform(5, 30)) if team == 0
                          else (rng.uniform(70, 95), rng.uniform(70, 95)))
        self.to = (self.x, self.y)
        self.facing = 0.0
        self.hp = MAX_HP
        self.cooldowns: Dict[int, float] = {}
        self.dead_until = 0.0


class BattleServer:
    def __init__(self, players: int, ticks: int, tick_rate: float, rec: Any, seed: int = 1) -> None:
        self.players_expected = players
        self.ticks = ticks
        self.tick_rate = tick_rate
        self.rng = random.Random(seed)
        self.rec = rec
        self.writers: Dict[int, Link] = {}
        self.heroes: Dict[int, Hero] = {}  # by connection id
        self.score = [0, 0]
        self.next_conn = 1
        self.all_joined = asyncio.Event()
        self.done = asyncio.Event()
        self.tick = 0
        self.handlers = {
            "join": self.on_join, "move": self.on_move, "cast_skill": self.on_cast_skill,
            "heartbeat": self.on_heartbeat, "chat": self.on_chat,
        }
        # rpc_capture: every incoming call passes through dispatch, every outgoing one through
        # send; wrapping the two records all traffic. (rec.wrap returns them unchanged when off.)
        self.dispatch = rec.wrap(self._dispatch, direction=C2S)
        self.send = rec.wrap(self._send, direction=S2C)

    # -------------------------------------------------------------- transport

    def _send(self, conn: int, method: str, args: Any) -> None:
        w = self.writers.get(conn)
        if w is not None and not w.is_closing():
            w.send(message(method, args))

    def broadcast(self, method: str, make_args: Any) -> None:
        """Send to every player; ``make_args()`` builds fresh args per call (never shared)."""
        for conn in list(self.writers):
            self.send(conn, method, make_args())

    def _dispatch(self, conn: int, method: str, args: Any) -> None:
        handler = self.handlers.get(method)
        if handler is not None and isinstance(args, dict):
            handler(conn, **args)

    async def handle_client(self, link: Link) -> None:
        conn = self.next_conn
        self.next_conn += 1
        self.writers[conn] = link
        try:
            while not self.done.is_set():
                msg = await link.recv()
                if msg is None:
                    break
                try:
                    self.dispatch(conn, *msg)
                except TypeError:  # a client sent args that don't fit the handler: ignore the call
                    pass
        finally:
            self.writers.pop(conn, None)
            self.heroes.pop(conn, None)
            link.close()

    # -------------------------------------------------------------- handlers (client -> server)

    def on_join(self, conn: int, name: str = "") -> None:
        if conn in self.heroes:
            return
        hero = Hero(10_000 + conn, len(self.heroes) % 2, name[:32], self.rng)
        self.heroes[conn] = hero
        self.send(conn, "welcome", {"id": hero.id, "team": hero.team, "pos": [hero.x, hero.y],
                                    "tick_rate": self.tick_rate, "players": self.players_expected})
        if len(self.heroes) >= self.players_expected:
            self.all_joined.set()

    def on_move(self, conn: int, to: Any = None, frame: int = 0) -> None:
        hero = self.heroes.get(conn)
        if hero and isinstance(to, list) and len(to) == 2:
            hero.to = (min(max(float(to[0]), 0.0), ARENA), min(max(float(to[1]), 0.0), ARENA))

    def on_cast_skill(self, conn: int, skill: int = 1, target: int = 0, frame: int = 0) -> None:
        hero = self.heroes.get(conn)
        if hero is None:
            return
        now = time.monotonic()
        victim = next((h for h in self.heroes.values() if h.id == target), None)
        spec = SKILLS.get(skill)
        err = None
        if spec is None:
            err = "no_such_skill"
        elif hero.dead_until > now:
            err = "dead"
        elif hero.cooldowns.get(skill, 0.0) > now:
            err = "cooldown"
        elif victim is None or victim.team == hero.team or victim.dead_until > now:
            err = "bad_target"
        elif math.hypot(victim.x - hero.x, victim.y - hero.y) > spec[1]:
            err = "out_of_range"
        cd = round(max(hero.cooldowns.get(skill, 0.0) - now, 0.0), 2)
        if err is None:
            damage, _, cooldown = spec
            hero.cooldowns[skill] = now + cooldown
            cd = cooldown
            crit = self.rng.random() < 0.15
            amount = int(damage * (1.5 if crit else 1.0))
            victim.hp = max(victim.hp - amount, 0)
            self.broadcast("damage", lambda: {"src": hero.id, "dst": victim.id, "amount": amount, "crit": crit,
                                              "skill": skill, "hp": victim.hp})
            if victim.hp == 0:
                victim.dead_until = now + RESPAWN_S
                self.score[hero.team] += 1
                self.broadcast("battle_event", lambda: {"type": "kill", "killer": hero.id, "victim": victim.id,
                                                        "team": hero.team, "score": list(self.score)})
        self.send(conn, "skill_result", {"skill": skill, "ok": err is None, "err": err, "cd": cd, "target": target,
                                         "frame": frame})

    def on_heartbeat(self, conn: int, ts: int = 0) -> None:
        self.send(conn, "heartbeat_ack", {"ts": ts, "srv": time.time_ns() // 1_000_000})

    def on_chat(self, conn: int, text: str = "") -> None:
        hero = self.heroes.get(conn)
        if hero is None:
            return
        for other_conn, other in list(self.heroes.items()):
            if other.team == hero.team:
                self.send(other_conn, "chat", {"from": hero.name, "ch": "team", "text": str(text)[:200]})

    # -------------------------------------------------------------- the game loop

    def step(self, dt: float) -> None:
        now = time.monotonic()
        self.tick += 1
        for hero in list(self.heroes.values()):
            if hero.dead_until:
                if hero.dead_until <= now:
                    hero.dead_until = 0.0
                    hero.hp = MAX_HP
                    hero.x, hero.y = (10.0, 10.0) if hero.team == 0 else (90.0, 90.0)
                    hero.to = (hero.x, hero.y)
                    self.broadcast("hp_update",
                                   lambda h=hero: {"id": h.id, "hp": h.hp, "max_hp": MAX_HP, "reason": "respawn"})
                continue
            dx, dy = hero.to[0] - hero.x, hero.to[1] - hero.y
            dist = math.hypot(dx, dy)
            if dist > 0.01:
                step = min(dist, SPEED * dt)
                hero.x += dx / dist * step
                hero.y += dy / dist * step
                hero.facing = round(math.degrees(math.atan2(dy, dx)), 1)
                self.broadcast("sync_position", lambda h=hero: {"id": h.id, "x": h.x, "y": h.y, "facing": h.facing,
                                                                "speed": SPEED})
        if self.tick % max(1, round(self.tick_rate)) == 0:  # a full snapshot once a second
            for conn in list(self.writers):
                me = self.heroes.get(conn)
                self.send(conn, "state_snapshot", {
                    "tick": self.tick, "me": me.id if me else None, "score": list(self.score),
                    "heroes": [{"id": h.id, "team": h.team, "pos": [h.x, h.y], "hp": h.hp, "dead": h.dead_until > 0}
                               for h in self.heroes.values()],
                })

    async def run_battle(self, join_timeout: float) -> None:
        try:
            await asyncio.wait_for(self.all_joined.wait(), join_timeout)
        except asyncio.TimeoutError:
            print(f"battle_server: {len(self.heroes)} of {self.players_expected} players joined; starting anyway",
                  file=sys.stderr)
        period = 1.0 / self.tick_rate
        start = time.monotonic()
        for _ in range(self.ticks):
            self.step(period)
            await asyncio.gather(*(w.drain() for w in list(self.writers.values()) if not w.is_closing()),
                                 return_exceptions=True)
            await asyncio.sleep(max(0.0, start + self.tick * period - time.monotonic()))
        winner = 0 if self.score[0] > self.score[1] else 1 if self.score[1] > self.score[0] else None
        self.broadcast("battle_end", lambda: {"winner": winner, "score": list(self.score), "ticks": self.tick})
        await asyncio.gather(*(w.drain() for w in list(self.writers.values()) if not w.is_closing()),
                             return_exceptions=True)
        self.done.set()
        for w in list(self.writers.values()):
            w.close()


async def serve(args: argparse.Namespace) -> int:
    # rpc_capture: a real recorder with --record, else the no-op NullRecorder (chosen once, here)
    rec = recorder(args.record, metadata={"game": "examples/battle_server.py", "players": args.players,
                                          "tick_rate": args.tick_rate}, compresslevel=args.compress or None)
    game = BattleServer(args.players, args.ticks, args.tick_rate, rec, seed=args.seed)
    log_file = open(args.log_sent, "w", encoding="utf-8") if args.log_sent else None
    server, port = await listen(args.transport, args.port, SentLog(log_file, S2C), game.handle_client)
    print(f"battle_server: listening on 127.0.0.1:{port} ({args.transport})", flush=True)
    try:
        await asyncio.wait_for(game.run_battle(args.join_timeout), args.max_seconds)
        await asyncio.sleep(0.2)  # let the last messages and the closes go out
    except asyncio.TimeoutError:
        print(f"battle_server: stopped after --max-seconds {args.max_seconds:g}", file=sys.stderr)
    finally:
        server.close()
        stats = rec.close()  # rpc_capture: drain the queue, write the end record with the counters
        if log_file is not None:
            log_file.close()
    if args.record:
        print(f"battle_server: recorded {stats.get('recorded', 0):,} of {stats.get('offered', 0):,} calls "
              f"({sum(v for k, v in stats.items() if k.startswith('dropped')):,} dropped) to {args.record}", flush=True)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="A small asyncio battle server that records its RPC traffic.")
    p.add_argument("--port", type=int, default=7777, help="TCP port on 127.0.0.1 (0: any free port; default 7777)")
    p.add_argument("--players", type=int, default=4, help="players to wait for before the battle starts (default 4)")
    p.add_argument("--ticks", type=int, default=400, help="battle length in server ticks (default 400)")
    p.add_argument("--tick-rate", type=float, default=20.0, help="server ticks per second (default 20)")
    p.add_argument("--join-timeout", type=float, default=30.0, help="start anyway after this many seconds (default 30)")
    p.add_argument("--max-seconds", type=float, default=120.0, help="hard stop (default 120)")
    p.add_argument("--record", metavar="PATH", help="record the RPC traffic to this trace file (default: off)")
    p.add_argument("--compress", type=int, choices=range(0, 10), default=0, metavar="LEVEL",
                   help="gzip level for the trace")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--transport", choices=TRANSPORTS, default="tcp",
                   help="tcp (4-byte length prefix; default), ws, ws-deflate (WebSocket) or udp: see battle_net.py")
    p.add_argument("--log-sent", metavar="PATH", help="write one JSON line per message sent (see battle_net.py)")
    args = p.parse_args(argv)
    return asyncio.run(serve(args))


if __name__ == "__main__":
    sys.exit(main())
