"""The simulator's traffic profiles as data: each one's methods and their arguments, rates, map and pools.

What a profile sends (method names, direction, argument names in order) and how often
(ticks between syncs and pings, chances per tick, damage ranges) is here; how a battle
plays out is in ``study_battle.py`` and ``dict_battle.py``. ``docs/simulate.md`` says what
each profile models and what it does not. Changing a value here changes the traffic:
bump the profile's ``version`` and regenerate its bundled sample.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

from rpc_capture import C2S, S2C

TICK_NS = 100_000_000  #: 10 Hz server tick, both profiles
TICKS_PER_S = 10
EPOCH_S = 1_704_067_200  #: 2024-01-01T00:00:00Z; a seed's capture starts within the year after

Point = Tuple[float, float]
Range = Tuple[int, int]  #: randrange bounds: low inclusive, high exclusive


@dataclass(frozen=True)
class Method:
    """One RPC of a profile: who sends it and its arguments (positional, in order, or a dict's keys)."""

    name: str
    dir: str
    args: Tuple[str, ...]


def methods(*table: Method) -> Dict[Tuple[str, str], Method]:
    """A profile's methods by (direction, name): a name may go both ways with other arguments (``chat``)."""
    return {(m.dir, m.name): m for m in table}


# ---------------------------------------------------------------------------------------------- study


@dataclass(frozen=True)
class StudyProfile:
    """``study``: positional args of small ints, short strings, 0.1 m floats; every event to the whole room."""

    name: str
    version: str  #: written as the trace's ``build``; bump when the traffic changes
    sample: str
    methods: Dict[Tuple[str, str], Method]
    positional: bool  #: args are lists in the order of ``Method.args``
    arena: float  #: metres, square
    lane: Tuple[Point, Point]  #: minions walk from one end to the other
    attack_range: float
    skill_range: float
    wave_every: int  #: ticks between minion waves
    wave_size: int  #: minions per team and wave
    sync_every: int  #: ticks between state_syncs of every living hero to every client
    ping_every: int  #: ticks between a client's pings
    respawn_ticks: int
    chat_chance: float  #: per client per tick
    skill_chance: float  #: per tick, for a hero in skill range and off cooldown
    attack_damage: Range
    skill_damage: Range
    minion_damage: Range
    crit_chance: float  #: heroes only; a crit doubles the damage
    names: Tuple[str, ...]
    chat: Tuple[str, ...]


STUDY = StudyProfile(
    name="study",
    version="study-battle-sim 1",
    sample="samples/battle.rpct",
    methods=methods(
        Method("req_move", C2S, ("tick", "x", "y")),
        Method("req_attack", C2S, ("tick", "target")),
        Method("req_skill", C2S, ("tick", "skill", "target", "x", "y")),
        Method("req_chat", C2S, ("text",)),
        Method("ping", C2S, ("client_ms",)),
        Method("obj_move", S2C, ("id", "x", "y", "dir", "speed", "ms")),
        Method("obj_stop", S2C, ("id", "x", "y", "dir", "ms")),
        Method("attack", S2C, ("src", "dst", "ms")),
        Method("cast", S2C, ("src", "skill", "dst", "x", "y", "ms")),
        Method("hit", S2C, ("src", "dst", "skill", "amount", "hp", "crit", "ms")),
        Method("buff", S2C, ("id", "buff", "stack", "duration_ms")),
        Method("die", S2C, ("id", "killer", "killer_name", "ms")),
        Method("score", S2C, ("team0", "team1", "ms")),
        Method("respawn", S2C, ("id", "x", "y", "hp", "ms")),
        Method("spawn", S2C, ("id", "team", "x", "y", "hp")),
        Method("state_sync", S2C, ("ms", "ids", "hps", "mps", "xs", "ys", "dirs", "states")),
        Method("pong", S2C, ("client_ms", "ms")),
        Method("chat_msg", S2C, ("from", "name", "text")),
    ),
    positional=True,
    arena=100.0,
    lane=((10.0, 50.0), (90.0, 50.0)),
    attack_range=2.5,
    skill_range=8.0,
    wave_every=30 * TICKS_PER_S,
    wave_size=3,
    sync_every=TICKS_PER_S,
    ping_every=2 * TICKS_PER_S,
    respawn_ticks=5 * TICKS_PER_S,
    chat_chance=0.002,
    skill_chance=0.08,
    attack_damage=(60, 140),
    skill_damage=(150, 400),
    minion_damage=(20, 40),
    crit_chance=0.15,
    names=("Lumi", "Kai", "Nova", "Rex", "Mira", "Zed", "Aria", "Bo", "Juno", "Taro", "Yuki", "Ash"),
    chat=("gg", "go mid", "help!", "nice", "wait", "back", "ok", "push", "care bot", "lol"),
)


# ---------------------------------------------------------------------------------------------- dict


@dataclass(frozen=True)
class DictProfile:
    """``dict``: named args with full-precision floats, creeps, towers, runes, area-of-interest fan-out."""

    name: str
    version: str  #: written as the trace's ``build``; bump when the traffic changes
    sample: str
    methods: Dict[Tuple[str, str], Method]
    positional: bool  #: False: args are dicts with the keys of ``Method.args``
    team_size: int
    creeps_per_team: int
    view: float  #: area of interest: a client hears about what happens this close to its hero
    skill_range: float
    skill_damage: Range
    crit_chance: float  #: heroes only; a crit doubles the damage
    tower_reach: float
    tower_damage: Range
    creep_reach: float
    creep_damage: Range
    sync_every: int  #: ticks between sync_position of an entity moving straight on (turns sync at once)
    snapshot_every: int  #: ticks between full state snapshots to each client
    heartbeat_every: int  #: ticks between a client's heartbeats
    chat_chance: float  #: per player per tick
    match_ticks: int  #: a match lasts this long at most, then the next starts
    warmup_ticks: int  #: the capture starts this far into the first match, mid-fight
    bases: Tuple[Point, Point]
    towers: Tuple[Tuple[float, ...], Tuple[float, ...]]  #: on the diagonal lane, per team
    tower_hp: int
    skill_buffs: Dict[int, Tuple[int, int]]  #: skill slot -> (buff id, duration in ticks)
    rune_buff: Tuple[int, int]  #: (buff id, duration in ticks)
    rune_spots: Tuple[Point, Point]  #: in the river across mid
    rune_every: int  #: ticks
    names: Tuple[str, ...]
    chat: Tuple[str, ...]


DICT = DictProfile(
    name="dict",
    version="battle-sim 1",
    sample="samples/battle_dict.rpct",
    methods=methods(
        Method("move", C2S, ("to", "frame", "run")),
        Method("input_frame", C2S, ("frame", "input", "ack")),
        Method("cast_skill", C2S, ("skill", "target", "pos", "frame")),
        Method("pick_item", C2S, ("item", "frame")),
        Method("chat", C2S, ("ch", "text")),
        Method("heartbeat", C2S, ("ts",)),
        Method("sync_position", S2C, ("id", "x", "y", "z", "facing", "speed")),
        Method("damage", S2C, ("src", "dst", "amount", "crit", "skill", "hp")),
        Method("hp_update", S2C, ("id", "hp", "max_hp", "reason")),
        Method("buff_add", S2C, ("id", "buff", "stack", "dur", "src")),
        Method("buff_remove", S2C, ("id", "buff", "reason")),
        Method("state_snapshot", S2C, ("tick", "ts", "me", "score", "entities")),
        Method("skill_result", S2C, ("skill", "ok", "err", "cd", "target", "frame")),
        Method("item_spawn", S2C, ("item", "kind", "pos", "ttl", "owner")),
        Method("battle_event", S2C, ("type", "killer", "victim", "team", "assist", "gold", "ts")),
        Method("chat", S2C, ("from", "name", "ch", "text", "ts")),
        Method("heartbeat_ack", S2C, ("ts", "srv")),
    ),
    positional=False,
    team_size=5,
    creeps_per_team=6,
    view=40.0,
    skill_range=20.0,
    skill_damage=(120, 380),
    crit_chance=0.2,
    tower_reach=16.0,
    tower_damage=(90, 140),
    creep_reach=6.0,
    creep_damage=(18, 36),
    sync_every=5,
    snapshot_every=10,
    heartbeat_every=20,
    chat_chance=0.004,
    match_ticks=15 * 60 * TICKS_PER_S,
    warmup_ticks=60 * TICKS_PER_S,
    bases=((12.0, 12.0), (228.0, 228.0)),
    towers=((84.0, 60.0, 36.0), (156.0, 180.0, 204.0)),
    tower_hp=1500,
    skill_buffs={2: (2001, 30), 4: (2003, 15)},
    rune_buff=(4001, 80),
    rune_spots=((108.0, 132.0), (132.0, 108.0)),
    rune_every=15 * TICKS_PER_S,
    names=("夜雨听风", "불꽃남자", "xX_Sniper_Xx", "🐉龙王", "김치전사", "ShadowFox", "小明同学",
           "달빛기사", "NoobMaster69", "风之子🌪", "Pro_Gamer_KR", "绝地求生王", "토끼🐰", "Lumi"),
    chat=("集合打龙！", "gg wp 👍", "미드 갱 간다", "等我复活 ⏳", "ㅋㅋㅋㅋㅋ", "push top!!",
          "小心草丛有人", "back back 🔙", "드래곤 먼저 잡자", "nice 🔥🔥", "我去推塔，你们守家",
          "ㄱㄱ", "?", "ult ready 💥", "对面打野在下路", "힐 좀 해줘요 ㅠㅠ", "lag 😡",
          "2塔快掉了 help", "ok 👌", "wp 잘했어요", "别送了兄弟们 😂", "건물 밀어요 tower now"),
)

PROFILES = {p.name: p for p in (STUDY, DICT)}
DEFAULT_PROFILE = STUDY.name
