"""Every output of a run keeps today's figures: bytes, failures, mismatches, packets, wire bytes, floor ratio.

Each case of golden_figures.CASES (the bundled samples, one of them with batched UDP wire policies
and one in process, a two-trace fleet, and the real Minecraft traffic of tests/data timed) runs
through the CLI; the figures read from results.json, results.csv, the terminal text, report.md
and report.html must equal tests/data/golden/<case>.json (timings aside; the floor within 1 %).
A deliberate change regenerates them: ``python tests/golden_figures.py`` (see its docstring).
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable, Dict

import pytest
from golden_figures import CASES, differences, figures, golden_path, run_case

OUTPUTS = ("results.json", "results.csv", "terminal", "report.md", "report.html")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Callable[[str], Dict[str, Any]]:
    """Each case's figures, read from one run of it (run when first asked for)."""
    cache: Dict[str, Dict[str, Any]] = {}

    def figures_of(name: str) -> Dict[str, Any]:
        if name not in cache:
            out = tmp_path_factory.mktemp(name) / "run"
            cache[name] = figures(out, run_case(name, out))
        return cache[name]
    return figures_of


def golden(name: str) -> Dict[str, Any]:
    stored = json.loads(golden_path(name).read_text(encoding="utf-8"))
    assert stored["args"] == CASES[name], f"{golden_path(name)} holds another command: regenerate it"
    return stored["figures"]


@pytest.mark.parametrize("output", OUTPUTS)
@pytest.mark.parametrize("case", list(CASES))
def test_the_figures_of_every_output_are_todays(runs, case: str, output: str) -> None:
    found = differences(golden(case)[output], runs(case)[output], f"{case}/{output}")
    assert not found, "\n".join(found[:30] + [f"... {len(found)} in all"])


@pytest.mark.parametrize("case", list(CASES))
def test_the_golden_files_hold_figures_of_every_codec_in_every_output(case: str) -> None:
    held = golden(case)
    codecs = set(held["results.json"]["codecs"])
    assert len(codecs) == 13
    assert {key.split(" | ")[0] for key in held["results.csv"]} == codecs
    for page in ("terminal", "report.md", "report.html"):
        tables = [t for t in held[page]["tables"] if "bytes mean" in t["columns"]]
        assert len(tables) == 1 and set(tables[0]["rows"]) == codecs, page
        assert len(held[page]["floor B/call"]) == 1, page


def test_packets_and_wire_bytes_of_batched_udp_are_held() -> None:
    held = golden("battle-wire")
    rows = [row for codec in held["results.json"]["codecs"].values() for row in codec["wire"]]
    assert {(r["wire"], r["transport"]) for r in rows} == {("per-call", "udp"), ("tick:50+mtu:1200", "udp")}
    assert all(r["packets"] > 0 and r["wire_bytes"] > r["payload_bytes"] for r in rows)
    assert [w["policy"] for w in held["terminal"]["wire"]] == ["per-call", "tick:50+mtu:1200"]


def test_the_fleet_holds_each_trace_and_the_merge() -> None:
    held = golden("fleet")
    assert set(held["results.json"]["traces"]) == {"samples/battle.rpct", "samples/battle_dict.rpct"}
    assert {key.split(" | ")[1] for key in held["results.csv"]} == {"*", *held["results.json"]["traces"]}


def test_a_moved_figure_is_found_and_the_floor_may_move_within_one_percent() -> None:
    held = golden("battle-wire")
    moved = copy.deepcopy(held)
    moved["results.json"]["codecs"]["msgpack"]["sizes"]["total"] += 1
    moved["results.json"]["codecs"]["json"]["wire"][1]["packets"] -= 1
    moved["results.csv"]["bson | * | per-call"]["mismatches"] = "1"
    json_floor = moved["results.json"]["codecs"]["json"]["floor_ratio"]
    moved["results.json"]["codecs"]["json"]["floor_ratio"] = json_floor * 1.009
    moved["results.json"]["codecs"]["bson"]["floor_ratio"] *= 1.02
    terminal_row = next(t for t in moved["terminal"]["tables"] if "x floor" in t["columns"])["rows"]["json"]
    terminal_row["x floor"] = f"{float(terminal_row['x floor'].rstrip('x')) * 1.008:.2f}x"
    found = differences(held, moved)
    assert len(found) == 4, found
    assert all(any(part in line for line in found) for part in ("msgpack/sizes/total", "json/wire[1]/packets",
                                                                "bson | * | per-call/mismatches", "bson/floor_ratio"))

