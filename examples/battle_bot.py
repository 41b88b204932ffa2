#!/usr/bin/env python3
"""Bot clients for ``examples/battle_server.py``: they join, walk, fight, chat and heartbeat.

    python examples/battle_bot.py --port 7777 --bots 4

Each bot is one connection to 127.0.0.1 (``--transport``, as the server's). A bot clicks somewhere to move every few
ticks, casts a skill at an enemy that looks close enough, heartbeats once a second and
chats now and then, until the server sends ``battle_end`` or closes the connection (or
``--max-seconds`` passes). Seeded: the same ``--seed`` makes the same decisions.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from rpc_capture import C2S  # noqa: E402
from battle_net import TRANSPORTS, Link, SentLog, dial, message  # noqa: E402  (the transports and the wire format)

CHAT = ("gg", "push mid!", "back back", "nice 🔥", "集合打龙！", "미드 갱 간다", "wait for me")


class Bot:
    def __init__(self, index: int, seed: int) -> None:
        self.index = index
        self.rng = random.Random(seed * 1000 + index)
        self.me: Optional[int] = None
        self.team = 0
        self.pos = [50.0, 50.0]
        self.enemies: Dict[int, List[float]] = {}  # id -> [x, y]
        self.teams: Dict[int, int] = {}
        self.tick_rate = 20.0
        self.received = 0
        self.sent = 0
        self.ended = False

    def handle(self, method: str, args: Any) -> None:
        self.received += 1
        if method == "welcome":
            self.me, self.team, self.pos = args["id"], args["team"], list(args["pos"])
            self.tick_rate = float(args.get("tick_rate", 20.0))
        elif method == "sync_position":
            if args["id"] == self.me:
                self.pos = [args["x"], args["y"]]
            elif self.teams.get(args["id"], self.team) != self.team:
                self.enemies[args["id"]] = [args["x"], args["y"]]
        elif method == "state_snapshot":
            for h in args["heroes"]:
                self.teams[h["id"]] = h["team"]
                if h["id"] != self.me and h["team"] != self.team:
                    if h["dead"]:
                        self.enemies.pop(h["id"], None)
                    else:
                        self.enemies[h["id"]] = list(h["pos"])
        elif method == "battle_end":
            self.ended = True

    async def play(self, transport: str, host: str, port: int, deadline: float, log: SentLog) -> None:
        link: Link = await dial(transport, host, port, log)

        def send(method: str, args: Any) -> None:
            link.send(message(method, args))
            self.sent += 1

        async def listen() -> None:
            while not self.ended:
                msg = await link.recv()
                if msg is None:
                    self.ended = True
                    return
                self.handle(*msg)

        listener = asyncio.create_task(listen())
        send("join", {"name": f"bot{self.index}"})
        frame_no = 0
        last_heartbeat = 0.0
        try:
            while not self.ended and time.monotonic() < deadline:
                await asyncio.sleep(self.rng.uniform(1.0, 4.0) / self.tick_rate)
                if self.me is None:
                    continue
                frame_no += 1
                now = time.monotonic()
                if now - last_heartbeat >= 1.0:
                    send("heartbeat", {"ts": time.time_ns() // 1_000_000})
                    last_heartbeat = now
                target = self._closest_enemy()
                if target is not None and self.rng.random() < 0.6:
                    tid, (tx, ty) = target
                    if math.hypot(tx - self.pos[0], ty - self.pos[1]) < 25.0:
                        send("cast_skill", {"skill": self.rng.choice((1, 1, 2, 3)), "target": tid, "frame": frame_no})
                    else:
                        send("move", {"to": [tx + self.rng.uniform(-5, 5), ty + self.rng.uniform(-5, 5)],
                                      "frame": frame_no})
                elif self.rng.random() < 0.5:
                    send("move", {"to": [self.rng.uniform(0, 100), self.rng.uniform(0, 100)], "frame": frame_no})
                if self.rng.random() < 0.01:
                    send("chat", {"text": self.rng.choice(CHAT)})
                await link.drain()
            await link.drain()
        except ConnectionError:
            pass
        finally:
            listener.cancel()
            link.close()
            await asyncio.sleep(0.05)  # let the close go out

    def _closest_enemy(self) -> Optional[tuple]:
        if not self.enemies:
            return None
        return min(self.enemies.items(), key=lambda kv: math.hypot(kv[1][0] - self.pos[0], kv[1][1] - self.pos[1]))


async def run(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.max_seconds
    bots = [Bot(i, args.seed) for i in range(args.bots)]
    log_file = open(args.log_sent, "w", encoding="utf-8") if args.log_sent else None
    log = SentLog(log_file, C2S)
    results = await asyncio.gather(*(b.play(args.transport, args.host, args.port, deadline, log) for b in bots),
                                   return_exceptions=True)
    if log_file is not None:
        log_file.close()
    errors = [r for r in results if isinstance(r, BaseException)]
    for e in errors:
        print(f"battle_bot: {type(e).__name__}: {e}", file=sys.stderr)
    print(f"battle_bot: {args.bots} bots sent {sum(b.sent for b in bots):,} calls and received "
          f"{sum(b.received for b in bots):,}; battle ended: {all(b.ended for b in bots)}", flush=True)
    return 1 if errors else 0


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Bot clients for examples/battle_server.py.")
    p.add_argument("--host", default="127.0.0.1", choices=("127.0.0.1", "localhost"),
                   help="server address (local only)")
    p.add_argument("--port", type=int, default=7777)
    p.add_argument("--bots", type=int, default=4, help="connections to open, one bot each (default 4)")
    p.add_argument("--max-seconds", type=float, default=120.0, help="give up after this long (default 120)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--transport", choices=TRANSPORTS, default="tcp", help="as the server's --transport (default tcp)")
    p.add_argument("--log-sent", metavar="PATH", help="write one JSON line per message sent (see battle_net.py)")
    return asyncio.run(run(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
