"""The ``dict`` profile's battle: 5v5 MOBA-style matches with named args (its data: ``profiles.DICT``).

Simulates 5v5 MOBA-style matches (heroes, lane creeps, towers, items) on a 10 Hz server
tick and yields the RPC calls a Python battle server and its ten clients exchange: input
frames and move clicks, skill casts, position syncs fanned out to every client that can
see the entity, damage, buffs, chat, heartbeats, and a full state snapshot per client
every second. Most calls are 50-150 bytes of compact JSON, snapshots 1-4 KB; the mean
is 160-190 bytes, close to the ~195 B of the study in docs/study.md.

Output depends only on ``calls`` and ``seed``: one ``random.Random(seed)``, a start time
derived from the seed, and float math that IEEE 754 rounds the same everywhere (the one
libm call, atan2 for the facing, is rounded to 0.1 degree), so traces are byte-identical.
"""

from __future__ import annotations

import math
import random
import struct
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from rpc_capture import C2S, S2C, Call

from .common import start_ns, take
from .profiles import DICT as P
from .profiles import TICK_NS, TICKS_PER_S, Range


def terrain(x: float, y: float) -> float:
    """Ground height: a gentle bowl with a slope, so z is a real float but needs no libm."""
    dx, dy = x - 120.0, y - 120.0
    return 2.75 - (dx * dx + dy * dy) * 0.000137 + x * 0.0061


@dataclass
class Buff:
    id: int
    stack: int
    src: int
    ends: int  #: tick it expires


@dataclass
class Entity:
    """A hero, creep or tower: the server's state for it, and its entry in snapshots."""

    id: int
    kind: str
    team: int
    x: float
    y: float
    hp: int
    max_hp: int
    speed: float = 0.0  #: units per second when moving
    facing: float = 0.0  #: degrees
    synced_facing: float = 0.0  #: facing in the last sync_position: clients extrapolate along it
    dest: Optional[Tuple[float, float]] = None
    buffs: List[Buff] = field(default_factory=list)
    ready: int = 0  #: tick from which it may attack or cast again

    def pos(self) -> List[float]:
        return [self.x, self.y, terrain(self.x, self.y)]

    def dist(self, x: float, y: float) -> float:
        return math.sqrt((self.x - x) * (self.x - x) + (self.y - y) * (self.y - y))

    def view(self, tick: int) -> Dict[str, Any]:
        buffs = [{"id": b.id, "stack": b.stack, "left": (b.ends - tick) / TICKS_PER_S, "src": b.src}
                 for b in self.buffs]
        return {"id": self.id, "type": self.kind, "team": self.team, "pos": self.pos(), "facing": self.facing,
                "hp": self.hp, "max_hp": self.max_hp, "buffs": buffs}


@dataclass
class Item:
    id: int
    kind: str  #: "potion" or "rune"
    x: float
    y: float
    expires: int  #: tick

    def view(self) -> Dict[str, Any]:
        return {"id": self.id, "type": self.kind, "team": None, "pos": [self.x, self.y, terrain(self.x, self.y)],
                "facing": None, "hp": None, "max_hp": None, "buffs": []}


@dataclass
class Player:
    conn: int
    name: str
    team: int
    skills: int  #: the hero's skill ids are skills + 1..4
    joystick: bool  #: mobile client: streams input_frame instead of sending move clicks
    skew_ms: int  #: client clock offset, visible in heartbeats
    hero: Entity = None  # type: ignore[assignment]  # set by Battle.new_match
    goal: Optional[Tuple[float, float]] = None  #: where the client wants its hero to go
    frame: int = 0
    respawn: int = 0  #: tick a dead hero comes back


class Battle:
    """One battle server: :meth:`step` runs one tick and returns that tick's calls in time order.

    In tick k the server handles the client calls that arrived during tick k-1, moves and
    fights, sends syncs and snapshots; then the clients send their calls for tick k+1.
    """

    def __init__(self, rng: random.Random, t0: int, tick_ns: int = TICK_NS) -> None:
        self.rng, self.t, self.tick, self.tick_ns = rng, t0, 0, tick_ns
        self.next_id = rng.randrange(100_000, 400_000)  # creep, tower and item ids: 6 digits
        conn0 = rng.randrange(1000, 60000)
        names = rng.sample(P.names, 2 * P.team_size)
        self.players = [Player(conn0 + i, names[i], i // P.team_size, rng.randrange(11, 60) * 100,
                               rng.random() < 0.5, rng.randrange(-900, 900)) for i in range(2 * P.team_size)]
        self.pending: List[Tuple[Player, Call]] = []  # client calls to handle next tick
        self.out: List[Call] = []  # this tick's calls
        self.send_t = t0  # when the server's next message leaves
        self.new_match()

    def new_match(self) -> None:
        """Towers, creeps at the front and heroes near mid: the fight starts at once."""
        rng = self.rng
        self.match_end, self.score = self.tick + P.match_ticks, [0, 0]
        self.winner: Optional[int] = None
        self.entities: List[Entity] = []
        self.items: List[Item] = []
        for team in (0, 1):
            for d in P.towers[team]:
                self.entities.append(Entity(self._new_id(), "tower", team, d, d, P.tower_hp, P.tower_hp))
            for _ in range(P.creeps_per_team):
                self._spawn_creep(team, 108.0 if team == 0 else 132.0)
        hero_ids = rng.sample(range(1_000_000, 10_000_000), len(self.players))
        for p, hero_id in zip(self.players, hero_ids):
            mid, hp = 100.0 if p.team == 0 else 140.0, rng.randrange(1800, 2600)
            p.hero = Entity(hero_id, "hero", p.team, mid + rng.uniform(-15, 15), mid + rng.uniform(-15, 15), hp, hp,
                            speed=rng.choice((6.2, 6.5, 6.8, 7.1)))
            p.goal = None
            self.entities.append(p.hero)

    def step(self) -> List[Call]:
        """Advance one tick and return its calls sorted by time."""
        self.out = []
        self.send_t = self.t + self.rng.randrange(300_000, 900_000)  # processing before the first send
        inputs, self.pending = self.pending, []
        for player, call in sorted(inputs, key=lambda pc: pc[1].t):  # in order of arrival
            getattr(self, "_on_" + call.method)(player, call.args)
        self._world()
        for i, p in enumerate(self.players):
            self._client(i, p)
        if self.winner is not None or self.tick >= self.match_end:
            self._end_match()
        self.tick += 1
        self.t += self.tick_ns
        self.out.sort(key=lambda c: c.t)
        return self.out

    # ------------------------------------------------------------------ sending and receiving

    def _ms(self) -> int:
        return self.t // 1_000_000

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _send(self, conn: int, method: str, args: Dict[str, Any]) -> None:
        self.send_t += self.rng.randrange(5_000, 40_000)  # encoding and writing one message
        self.out.append(Call(method, args, self.send_t, S2C, conn))

    def _broadcast(self, method: str, args: Dict[str, Any], team: Optional[int] = None) -> None:
        for p in self.players:
            if team is None or p.team == team:
                self._send(p.conn, method, args)

    def _fanout(self, x: float, y: float, method: str, args: Dict[str, Any]) -> None:
        """Send to every client whose hero (alive, or dead and watching) is within view of (x, y)."""
        for p in self.players:
            if p.hero.dist(x, y) <= P.view:
                self._send(p.conn, method, args)

    def _recv(self, p: Player, method: str, args: Dict[str, Any]) -> None:
        """A client call arriving at a random moment of this tick; the server handles it next tick."""
        call = Call(method, args, self.t + self.rng.randrange(1, self.tick_ns), C2S, p.conn)
        self.out.append(call)
        self.pending.append((p, call))

    # ------------------------------------------------------------------ server: one handler per client RPC

    def _on_move(self, p: Player, args: Dict[str, Any]) -> None:
        p.hero.dest = (args["to"][0], args["to"][1])

    def _on_input_frame(self, p: Player, args: Dict[str, Any]) -> None:
        _, sx, sy, _ = struct.unpack("<BhhH", args["input"])
        step = p.hero.speed / TICKS_PER_S / 32767
        p.hero.dest = (p.hero.x + sx * step, p.hero.y + sy * step) if sx or sy else None

    def _on_cast_skill(self, p: Player, args: Dict[str, Any]) -> None:
        hero, skill = p.hero, args["skill"]
        target = next((e for e in self.entities if e.id == args["target"]), None)
        err = None
        if hero.hp <= 0:
            err = "dead"
        elif target is None or target.hp <= 0:
            err = "target_dead"
        elif hero.dist(target.x, target.y) > P.skill_range:
            err = "out_of_range"
        cooldown = 1.5 + (skill % 100) * 1.25
        self._send(p.conn, "skill_result", {"skill": skill, "ok": err is None, "err": err, "cd": cooldown,
                                            "target": args["target"], "frame": args["frame"]})
        if err is None and target is not None:
            hero.ready = self.tick + int(cooldown * TICKS_PER_S)
            self._hit(hero, target, self.rng.randrange(*P.skill_damage), skill)
            if skill % 100 in P.skill_buffs and target.hp > 0:
                self._add_buff(target, *P.skill_buffs[skill % 100], hero.id)

    def _on_pick_item(self, p: Player, args: Dict[str, Any]) -> None:
        item = next((it for it in self.items if it.id == args["item"]), None)
        if item is not None and p.hero.hp > 0:
            self.items.remove(item)
            if item.kind == "rune":
                self._add_buff(p.hero, *P.rune_buff, item.id)
            else:
                self._heal(p, 400, "potion")

    def _on_chat(self, p: Player, args: Dict[str, Any]) -> None:
        msg = {"from": p.hero.id, "name": p.name, "ch": args["ch"], "text": args["text"], "ts": self._ms()}
        self._broadcast("chat", msg, p.team if args["ch"] == "team" else None)

    def _on_heartbeat(self, p: Player, args: Dict[str, Any]) -> None:
        self._send(p.conn, "heartbeat_ack", {"ts": args["ts"], "srv": self._ms()})

    # ------------------------------------------------------------------ server: the world

    def _world(self) -> None:
        """Creeps and towers fight, everything moves, buffs expire, runes spawn, heroes heal."""
        for e in list(self.entities):
            if e.hp > 0 and self._act(e) and (e.facing != e.synced_facing or (self.tick + e.id) % P.sync_every == 0):
                e.synced_facing = e.facing
                sync = {"id": e.id, "x": e.x, "y": e.y, "z": terrain(e.x, e.y), "facing": e.facing, "speed": e.speed}
                self._fanout(e.x, e.y, "sync_position", sync)
        for e in self.entities:
            for b in [b for b in e.buffs if b.ends <= self.tick]:
                e.buffs.remove(b)
                self._fanout(e.x, e.y, "buff_remove", {"id": e.id, "buff": b.id, "reason": "expired"})
        self.items = [it for it in self.items if it.expires > self.tick]
        if self.tick % P.rune_every == 0:
            x, y = self.rng.choice(P.rune_spots)
            self._spawn_item("rune", x + self.rng.uniform(-2, 2), y + self.rng.uniform(-2, 2), None)
        for i, p in enumerate(self.players):
            if (self.tick + i) % TICKS_PER_S == 0:
                self._regen(p)
            if (self.tick + i) % P.snapshot_every == 0:
                self._snapshot(p)

    def _act(self, e: Entity) -> bool:
        """Towers shoot, creeps fight what is in reach or march on, heroes go where told; True if it moved."""
        if e.kind == "tower":
            self._attack(e, P.tower_reach, P.tower_damage)
            return False
        if e.kind == "creep" and self._attack(e, P.creep_reach, P.creep_damage):
            return False
        return self._advance(e)

    def _attack(self, e: Entity, reach: float, damage: Range) -> bool:
        """Hit the nearest enemy within reach when off cooldown; True if one was in reach."""
        foe = self._nearest(e, reach)
        if foe is not None and self.tick >= e.ready:
            e.ready = self.tick + TICKS_PER_S
            self._hit(e, foe, self.rng.randrange(*damage), None)
        return foe is not None

    def _advance(self, e: Entity) -> bool:
        """Move one tick toward the destination; True if the entity moved."""
        if e.dest is None:
            return False
        dx, dy = e.dest[0] - e.x, e.dest[1] - e.y
        d, step = math.sqrt(dx * dx + dy * dy), e.speed / TICKS_PER_S
        e.facing = round(math.degrees(math.atan2(dy, dx)), 1)
        if d <= step:
            (e.x, e.y), e.dest = e.dest, None
        else:
            e.x, e.y = e.x + dx / d * step, e.y + dy / d * step
        return d > 0

    def _nearest(self, e: Entity, reach: float) -> Optional[Entity]:
        best, best_d = None, reach
        for o in self.entities:
            if o.team != e.team and o.hp > 0:
                d = e.dist(o.x, o.y)
                if d <= best_d:
                    best, best_d = o, d
        return best

    def _hit(self, src: Entity, dst: Entity, amount: int, skill: Optional[int]) -> None:
        crit = src.kind == "hero" and self.rng.random() < P.crit_chance
        amount = amount * 2 if crit else amount
        dst.hp = max(0, dst.hp - amount)
        self._fanout(dst.x, dst.y, "damage", {"src": src.id, "dst": dst.id, "amount": amount, "crit": crit,
                                              "skill": skill, "hp": dst.hp})
        if dst.hp == 0:
            self._kill(src, dst)

    def _kill(self, killer: Entity, victim: Entity) -> None:
        """Hero kills and towers are news for everyone, creeps for those nearby (who may see a potion drop)."""
        event = {"type": "kill", "killer": killer.id, "victim": victim.id, "team": killer.team,
                 "assist": None, "gold": 300, "ts": self._ms()}
        if victim.kind == "hero":
            next(p for p in self.players if p.hero is victim).respawn = self.tick + 6 * TICKS_PER_S
            victim.buffs.clear()
            self.score[killer.team] += 1
            event["assist"] = [p.hero.id for p in self.players if p.team == killer.team and p.hero is not killer
                               and p.hero.hp > 0 and p.hero.dist(victim.x, victim.y) <= P.view]
            self._broadcast("battle_event", event)
            return
        self.entities.remove(victim)
        if victim.kind == "tower":
            self._broadcast("battle_event", dict(event, type="tower_down", gold=500))
            if not any(e.kind == "tower" and e.team == victim.team for e in self.entities):
                self.winner = killer.team
            return
        self._spawn_creep(victim.team, P.bases[victim.team][0])
        gold = self.rng.randrange(30, 45) if killer.kind == "hero" else None
        self._fanout(victim.x, victim.y, "battle_event", dict(event, type="creep_kill", gold=gold))
        if self.rng.random() < 0.4:
            self._spawn_item("potion", victim.x, victim.y, killer.id if killer.kind == "hero" else None)

    def _spawn_item(self, kind: str, x: float, y: float, owner: Optional[int]) -> None:
        """Drop an item for 30 s: a potion is news nearby, a rune is announced to everyone."""
        item = Item(self._new_id(), kind, x, y, self.tick + 30 * TICKS_PER_S)
        self.items.append(item)
        args = {"item": item.id, "kind": kind, "pos": item.view()["pos"], "ttl": 30.0, "owner": owner}
        if kind == "rune":
            self._broadcast("item_spawn", args)
        else:
            self._fanout(x, y, "item_spawn", args)

    def _add_buff(self, target: Entity, buff_id: int, ticks: int, src: int) -> None:
        """Add a buff, or stack it (up to 3, each stack lasting half a second longer)."""
        buff = next((b for b in target.buffs if b.id == buff_id), None)
        if buff is None:
            buff = Buff(buff_id, 0, src, 0)
            target.buffs.append(buff)
        buff.stack = min(buff.stack + 1, 3)
        ticks += (buff.stack - 1) * TICKS_PER_S // 2
        buff.ends = self.tick + ticks
        self._fanout(target.x, target.y, "buff_add", {"id": target.id, "buff": buff_id, "stack": buff.stack,
                                                      "dur": ticks / TICKS_PER_S, "src": src})

    def _heal(self, p: Player, amount: int, reason: str) -> None:
        p.hero.hp = min(p.hero.max_hp, p.hero.hp + amount)
        self._send(p.conn, "hp_update", {"id": p.hero.id, "hp": p.hero.hp, "max_hp": p.hero.max_hp, "reason": reason})

    def _regen(self, p: Player) -> None:
        """Once a second: a dead hero may respawn at base; a hurt one regenerates, fast at base."""
        hero = p.hero
        if hero.hp <= 0 and self.tick >= p.respawn:
            hero.x, hero.y = P.bases[p.team]
            p.goal = hero.dest = None
            self._heal(p, hero.max_hp, "respawn")
        elif 0 < hero.hp < hero.max_hp:
            at_base = hero.dist(*P.bases[p.team]) < 20.0
            self._heal(p, hero.max_hp // (8 if at_base else 60), "regen")

    def _snapshot(self, p: Player) -> None:
        """Everything the client can see, in full: lets it correct drift and join late."""
        hero = p.hero
        seen = [e.view(self.tick) for e in self.entities if hero.dist(e.x, e.y) <= P.view]
        seen += [it.view() for it in self.items if hero.dist(it.x, it.y) <= P.view]
        self._send(p.conn, "state_snapshot", {"tick": self.tick, "ts": self._ms(), "me": hero.id,
                                              "score": list(self.score), "entities": seen})

    def _spawn_creep(self, team: int, along: float) -> None:
        """A creep at (along, along) on the lane, marching on the enemy base."""
        rng, (ex, ey) = self.rng, P.bases[1 - team]
        x, y = along + rng.uniform(-6, 6), along + rng.uniform(-6, 6)
        dest = (ex + rng.uniform(-5, 5), ey + rng.uniform(-5, 5))
        self.entities.append(Entity(self._new_id(), "creep", team, x, y, 450, 450, speed=4.5, dest=dest))

    def _end_match(self) -> None:
        winner = self.winner if self.winner is not None else int(self.score[1] > self.score[0])
        self._broadcast("battle_event", {"type": "battle_end", "killer": None, "victim": None, "team": winner,
                                         "assist": None, "gold": None, "ts": self._ms()})
        self.new_match()

    # ------------------------------------------------------------------ clients

    def _client(self, i: int, p: Player) -> None:
        """One client's calls this tick: heartbeat, chat, and (if alive) what its player does."""
        rng = self.rng
        if (self.tick + i) % P.heartbeat_every == 0:
            self._recv(p, "heartbeat", {"ts": self._ms() + p.skew_ms + rng.randrange(100)})
        if rng.random() < P.chat_chance:
            self._recv(p, "chat", {"ch": rng.choice(("team", "team", "all")), "text": rng.choice(P.chat)})
        p.frame += 1
        if p.hero.hp > 0:
            self._steer(p, self._decide(p))

    def _decide(self, p: Player) -> Optional[Tuple[float, float]]:
        """The player's goal: retreat when low, grab a nearby potion or a rune, else fight the nearest enemy."""
        hero, rng = p.hero, self.rng
        item = next((it for it in self.items if hero.dist(it.x, it.y) <= (60.0 if it.kind == "rune" else 25.0)), None)
        foe = self._nearest(hero, P.view)
        goal = p.goal
        if hero.hp < hero.max_hp // 4:
            goal = P.bases[p.team]
        elif item is not None:
            goal = (item.x, item.y)
            if hero.dist(item.x, item.y) < 1.5:
                self._recv(p, "pick_item", {"item": item.id, "frame": p.frame})
        elif foe is not None:
            if hero.dist(foe.x, foe.y) <= P.skill_range and self.tick >= hero.ready and rng.random() < 0.5:
                self._recv(p, "cast_skill", {"skill": p.skills + rng.randint(1, 4), "target": foe.id,
                                             "pos": foe.pos(), "frame": p.frame})
            if goal is None or rng.random() < 0.04:
                goal = (foe.x + rng.uniform(-12, 12), foe.y + rng.uniform(-12, 12))
        elif goal is None:
            ex, ey = P.bases[1 - p.team]
            goal = (hero.x + (ex - hero.x) * 0.2, hero.y + (ey - hero.y) * 0.2)
        return None if goal is None or hero.dist(*goal) < 1.0 else goal

    def _steer(self, p: Player, goal: Optional[Tuple[float, float]]) -> None:
        """Joystick clients stream input frames (idle ones twice a second); others click to move."""
        if p.joystick and (goal is not None or p.frame % 5 == 0):
            sx = sy = 0
            if goal is not None:
                d = p.hero.dist(*goal)
                sx, sy = int((goal[0] - p.hero.x) / d * 32767), int((goal[1] - p.hero.y) / d * 32767)
            packed = struct.pack("<BhhH", 0x01 if goal else 0x00, sx, sy, p.frame % 3600)
            self._recv(p, "input_frame", {"frame": p.frame, "input": packed, "ack": self.tick})
        elif not p.joystick and goal is not None and goal != p.goal:
            self._recv(p, "move", {"to": [goal[0], goal[1], terrain(*goal)], "frame": p.frame, "run": True})
        p.goal = goal


def simulate(calls: int, seed: int, tick_hz: int = TICKS_PER_S) -> Iterator[Call]:
    """Yield exactly ``calls`` calls of simulated battle traffic, streaming (memory stays flat); ``tick_hz``:
    the server's tick (the battle's pace with it: its rates are per tick)."""
    tick_ns = 10**9 // tick_hz
    battle = Battle(random.Random(seed), start_ns(seed) - P.warmup_ticks * tick_ns, tick_ns)
    for _ in range(P.warmup_ticks):
        battle.step()
    yield from take(battle.step, calls)
