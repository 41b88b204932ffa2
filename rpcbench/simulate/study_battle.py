"""The ``study`` profile's battle: traffic of the kind the 2015 study measured (its data: ``profiles.STUDY``).

The study's server (docs/study.md) sent each RPC's parameters as a *positional list* of
small ints, short strings and a few floats: ``obj_move(id, x, y, dir, speed, tick)``, not
``{"id": ..., "x": ...}``. Its clients and server agreed on argument order, positions were
quantized (0.1 m), angles whole degrees, HP and ids small battle-local ints, times server
ticks. That shape is what makes BSON (a typed, length-prefixed document per list, with
keys "0", "1"... for array items) about 1.6x the size of compact JSON; the ``dict``
profile (``dict_battle.py``, 17-digit floats under named keys) makes BSON smaller.

What it models: a 5 v 5 room on a 10 Hz tick; heroes chase and fight the nearest enemy,
each client sends move requests when its destination changes, attack and skill requests
and a ping every 2 s; the server broadcasts every event to all ten connections of the room
(no area of interest: a small arena where everyone sees everything), plus lane minions in
waves, a once-a-second ``state_sync`` of every living unit, deaths, respawns and score.
What it does not: packet loss, reconnects, matchmaking, spectators, clients of different
rooms sharing a server, or any game's real balance: it is a traffic shape, not a game.

Deterministic as the ``dict`` profile: one ``random.Random(seed)``, no libm but sqrt
and atan2 (rounded to whole degrees), so the same calls and seed give the same trace.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

from rpc_capture import C2S, S2C, Call

from .common import start_ns, take
from .profiles import STUDY as P
from .profiles import TICK_NS, TICKS_PER_S


def q(value: float) -> float:
    """A coordinate as the game sends it: 0.1 m."""
    return round(value, 1)


@dataclass
class Unit:
    id: int  #: heroes: a battle-local id (2 digits); minions: the server's next object id (6 digits)
    team: int
    x: float
    y: float
    hp: int
    max_hp: int
    speed: float
    mp: int = 0  #: mana, heroes only
    name: str = ""  #: the player's, heroes only
    skills: int = 0  #: a hero's skill ids are skills + 1..4
    clock: int = 0  #: its client's clock (ms since the app started) when the room opened
    dir: int = 0  #: whole degrees
    state: str = "idle"  #: "idle", "run", "atk" or "cast"
    dest: Optional[Tuple[float, float]] = None
    ready: int = 0  #: tick it may act again

    def dist(self, other: "Unit") -> float:
        return math.sqrt((self.x - other.x) ** 2 + (self.y - other.y) ** 2)



class StudyBattle:
    """One room: :meth:`step` runs one tick and returns its calls in time order."""

    def __init__(self, rng: random.Random, t0: int, tick_ns: int = TICK_NS) -> None:
        self.rng, self.t, self.tick, self.tick_ns = rng, t0, 0, tick_ns
        conn0 = rng.randrange(1000, 60000)
        self.conns = [conn0 + i for i in range(10)]
        uids = rng.sample(range(10, 100), 10)  # heroes go by a battle-local id
        self.heroes = [Unit(uid, i // 5, *self._base(i // 5), hp := rng.randrange(18, 26) * 100, hp,
                            rng.choice((6.0, 6.5, 7.0)), name=name, mp=600, skills=rng.randrange(11, 60) * 100,
                            clock=rng.randrange(10**5, 10**7))
                       for i, (uid, name) in enumerate(zip(uids, rng.sample(P.names, 10)))]
        self.minions: List[Unit] = []
        self.next_minion, self.score = rng.randrange(100_000, 400_000), [0, 0]  # the server's object ids
        self.dead_until: Dict[int, int] = {}
        self.pending: List[Tuple[int, Call]] = []
        self.out: List[Call] = []
        self.send_t = t0

    def _base(self, team: int) -> Tuple[float, float]:
        """A spot near a team's end of the arena (spawn and respawn)."""
        return (15.0 + self.rng.uniform(-5, 5), 50.0 + self.rng.uniform(-10, 10)) if team == 0 else \
            (85.0 + self.rng.uniform(-5, 5), 50.0 + self.rng.uniform(-10, 10))

    def step(self) -> List[Call]:
        """Handle last tick's requests, run the world, sync, then the clients act; calls sorted by time."""
        self.out, self.send_t = [], self.t + self.rng.randrange(300_000, 900_000)
        inputs, self.pending = self.pending, []
        for i, call in sorted(inputs, key=lambda ic: ic[1].t):
            getattr(self, "_on_" + call.method)(self.heroes[i], call.args)
        self._world()
        for i in range(10):
            self._client(i)
        self.tick += 1
        self.t += self.tick_ns
        self.out.sort(key=lambda c: c.t)
        return self.out

    # ------------------------------------------------------------------ wire

    def _ms(self) -> int:
        """Battle time the server stamps on its calls: milliseconds since the room opened, at the tick."""
        return self.tick * (1000 // TICKS_PER_S)

    def _broadcast(self, method: str, *args: Any) -> None:
        """The same call to every connection of the room, one after another."""
        for conn in self.conns:
            self.send_t += self.rng.randrange(5_000, 30_000)
            self.out.append(Call(method, list(args), self.send_t, S2C, conn))

    def _request(self, i: int, method: str, *args: Any) -> None:
        """Client ``i``'s call, arriving during this tick; the server handles it next tick."""
        call = Call(method, list(args), self.t + self.rng.randrange(1, self.tick_ns), C2S, self.conns[i])
        self.out.append(call)
        self.pending.append((i, call))

    # ------------------------------------------------------------------ server

    def _on_req_move(self, hero: Unit, args: List[Any]) -> None:
        if hero.hp > 0:
            hero.dest, hero.state = (args[1], args[2]), "run"
            hero.dir = round(math.degrees(math.atan2(args[2] - hero.y, args[1] - hero.x))) % 360
            self._broadcast("obj_move", hero.id, args[1], args[2], hero.dir, hero.speed, self._ms())

    def _on_req_attack(self, hero: Unit, args: List[Any]) -> None:
        target = self._unit(args[1])
        if hero.hp > 0 and target is not None and target.hp > 0 and hero.dist(target) <= P.attack_range + 1:
            hero.state, hero.dest = "atk", None
            self._broadcast("attack", hero.id, target.id, self._ms())
            self._hit(hero, target, self.rng.randrange(*P.attack_damage), 0)

    def _on_req_skill(self, hero: Unit, args: List[Any]) -> None:
        target = self._unit(args[2])
        if hero.hp > 0 and target is not None and target.hp > 0:
            hero.state, hero.dest, hero.mp = "cast", None, max(0, hero.mp - 80)
            self._broadcast("cast", hero.id, args[1], target.id, q(target.x), q(target.y), self._ms())
            self._hit(hero, target, self.rng.randrange(*P.skill_damage), args[1])
            if args[1] % 10 == 2 and target.hp > 0:
                self._broadcast("buff", target.id, 300 + args[1] % 100, 1, 3000)

    def _on_ping(self, hero: Unit, args: List[Any]) -> None:
        i = self.heroes.index(hero)
        self.send_t += self.rng.randrange(5_000, 30_000)
        self.out.append(Call("pong", [args[0], self._ms()], self.send_t, S2C, self.conns[i]))

    def _on_req_chat(self, hero: Unit, args: List[Any]) -> None:
        self._broadcast("chat_msg", hero.id, hero.name, args[0])

    def _unit(self, uid: int) -> Optional[Unit]:
        return next((u for u in self.heroes + self.minions if u.id == uid), None)

    def _hit(self, src: Unit, dst: Unit, amount: int, skill: int) -> None:
        """Damage (heroes may crit), then death: a hero's counts for the score, a minion is gone."""
        crit = int(bool(src.name) and self.rng.random() < P.crit_chance)
        amount *= 1 + crit
        dst.hp = max(0, dst.hp - amount)
        self._broadcast("hit", src.id, dst.id, skill, amount, dst.hp, crit, self._ms())
        if dst.hp == 0:
            self._broadcast("die", dst.id, src.id, src.name or "minion", self._ms())
            dst.state, dst.dest = "idle", None
            if dst.name:
                self.dead_until[dst.id] = self.tick + P.respawn_ticks
                self.score[src.team] += 1
                self._broadcast("score", self.score[0], self.score[1], self._ms())
            else:
                self.minions.remove(dst)

    def _world(self) -> None:
        """Respawns, minion waves and fights, movement, and the once-a-second state sync."""
        for hero in self.heroes:
            if self.tick % TICKS_PER_S == 0:
                hero.mp = min(600, hero.mp + 8)
            if hero.hp == 0 and self.dead_until.get(hero.id, 0) <= self.tick:
                hero.x, hero.y = self._base(hero.team)
                hero.hp, hero.state = hero.max_hp, "idle"
                self._broadcast("respawn", hero.id, q(hero.x), q(hero.y), hero.hp, self._ms())
        if self.tick % P.wave_every == 0:
            self._wave()
        for m in list(self.minions):
            self._minion(m)
        for u in self.heroes + self.minions:
            self._advance(u)
        if self.tick % P.sync_every == 0:
            alive = [u for u in self.heroes if u.hp > 0]
            self._broadcast("state_sync", self._ms(), [u.id for u in alive], [u.hp for u in alive],
                            [u.mp for u in alive], [q(u.x) for u in alive], [q(u.y) for u in alive],
                            [u.dir for u in alive], [u.state for u in alive])

    def _wave(self) -> None:
        """Each team's minions appear at its end of the lane and march on the other."""
        for team in (0, 1):
            (sx, sy), (ex, ey) = P.lane if team == 0 else P.lane[::-1]
            for _ in range(P.wave_size):
                m = Unit(self.next_minion, team, sx + self.rng.uniform(-2, 2), sy + self.rng.uniform(-2, 2), 450, 450,
                         4.0, dest=(ex, ey), state="run")
                self.next_minion += 1
                self.minions.append(m)
                self._broadcast("spawn", m.id, team, q(m.x), q(m.y), m.hp)

    def _minion(self, m: Unit) -> None:
        """A minion hits the nearest enemy in reach once a second, else marches on."""
        foe = self._nearest(m, P.attack_range)
        if foe is not None and self.tick >= m.ready:
            m.ready, m.state = self.tick + TICKS_PER_S, "atk"
            self._hit(m, foe, self.rng.randrange(*P.minion_damage), 0)
        elif foe is None and m.state == "atk":
            m.state, m.dest = "run", P.lane[1] if m.team == 0 else P.lane[0]
            self._broadcast("obj_move", m.id, m.dest[0], m.dest[1], m.dir, m.speed, self._ms())

    def _advance(self, u: Unit) -> None:
        """One tick of movement toward the destination; arriving is news (and ends a minion's march)."""
        if u.dest is None or u.hp == 0:
            return
        dx, dy = u.dest[0] - u.x, u.dest[1] - u.y
        d, step = math.sqrt(dx * dx + dy * dy), u.speed / TICKS_PER_S
        u.dir = round(math.degrees(math.atan2(dy, dx))) % 360
        if d <= step:
            (u.x, u.y), u.dest, u.state = u.dest, None, "idle"
            self._broadcast("obj_stop", u.id, q(u.x), q(u.y), u.dir, self._ms())
            if not u.name:  # a minion that made it down the lane enters the enemy base and is gone
                self.minions.remove(u)
                self._broadcast("die", u.id, 0, "base", self._ms())
        else:
            u.x, u.y = u.x + dx / d * step, u.y + dy / d * step

    def _nearest(self, u: Unit, reach: float) -> Optional[Unit]:
        """The closest living enemy within ``reach``, if any."""
        foes = [o for o in self.heroes + self.minions if o.team != u.team and o.hp > 0 and u.dist(o) <= reach]
        return min(foes, key=u.dist, default=None)

    # ------------------------------------------------------------------ clients

    def _client(self, i: int) -> None:
        """Client i: a ping every 2 s, rare chat, and its hero's fight: chase, attack, cast."""
        hero, rng = self.heroes[i], self.rng
        if (self.tick + i) % P.ping_every == 0:
            self._request(i, "ping", hero.clock + self._ms() + rng.randrange(100))
        if rng.random() < P.chat_chance:
            self._request(i, "req_chat", rng.choice(P.chat))
        foe = self._nearest(hero, P.arena * 2)
        if hero.hp == 0 or foe is None or self.tick < hero.ready:
            return
        d = hero.dist(foe)
        if d <= P.skill_range and rng.random() < P.skill_chance:
            hero.ready = self.tick + 3 * TICKS_PER_S
            self._request(i, "req_skill", self.tick, hero.skills + rng.randint(1, 4), foe.id, q(foe.x),
                          q(foe.y))
        elif d <= P.attack_range:
            hero.ready = self.tick + TICKS_PER_S
            self._request(i, "req_attack", self.tick, foe.id)
        elif hero.dest is None or math.dist(hero.dest, (foe.x, foe.y)) > 3.0:
            gx = min(max(foe.x + rng.uniform(-1, 1), 0.0), P.arena)
            gy = min(max(foe.y + rng.uniform(-1, 1), 0.0), P.arena)
            hero.dest = (q(gx), q(gy))
            self._request(i, "req_move", self.tick, q(gx), q(gy))


def simulate_study(calls: int, seed: int, tick_hz: int = TICKS_PER_S) -> Iterator[Call]:
    """Yield exactly ``calls`` calls of the study-like room, streaming (memory stays flat); ``tick_hz``: the
    server's tick (the battle's pace with it: its rates are per tick)."""
    battle = StudyBattle(random.Random(seed), start_ns(seed), 10**9 // tick_hz)
    yield from take(battle.step, calls)
