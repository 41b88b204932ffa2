"""The wire and link figures of a result as typed values (rpcbench/results_wire.py): a real run's figures go to
results.json and come back as the same dataclasses, and results.json holds what the size pass counted."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Tuple

import pytest

from rpc_capture import TraceWriter
from rpcbench.config import DEFAULT_TRACE, RunConfig
from rpcbench.errors import BenchError
from rpcbench.link import COUNTS, LinkSettings
from rpcbench.pipeline import run_benchmark
from rpcbench.results import Suite, Timing, load
from rpcbench.results_wire import LinkDirection, LinkFigures, PacketCpu, WireDirection, WireFigures
from rpcbench.simulate import simulate_profile
from rpcbench.wire import parse_policies


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: Any) -> Tuple[Suite, Path]:
    """A timed run on a fleet of the bundled sample and a simulated 30 Hz dict trace, two --wire policies (the
    batched one timed on whole packets) and two loss rates, saved."""
    folder = tmp_path_factory.mktemp("fleet")
    other = folder / "dict-30hz.rpct"
    with TraceWriter(str(other), {"generator": "test"}) as writer:
        for call in simulate_profile("dict", 3000, 5, 30):
            writer.write(call)
    traces = (str(DEFAULT_TRACE), str(other))
    config = RunConfig(trace=traces[0], traces=traces, codecs=("json", "msgpack+zstd-3", "json+zlibstream-1"),
                       sample=200, repeat=2, min_time=0.001, processes=0, jobs=0, tails=False, memory=False,
                       floor=False, wire=parse_policies("per-call,tick:auto"), link=LinkSettings(loss=(0.0, 2.0)))
    suite = run_benchmark(config)
    suite.save(str(folder))
    return suite, folder


def test_wire_and_link_figures_come_back_from_results_json_as_the_same_dataclasses(fleet: Tuple[Suite, Path]) -> None:
    suite, folder = fleet
    loaded = load(str(folder))
    rows = [(r, loaded.result(r.codec)) for r in suite.results]
    rows += [(r, back) for t, held in zip(suite.traces, loaded.traces) for r, back in zip(t.results, held.results)]
    assert len(rows) == 3 * 3 and len(loaded.traces) == 2
    for r, back in rows:
        assert back.wire == r.wire and back.link == r.link, r.codec
        assert len(r.wire) == 2 and len(r.link) == 2 * 2
        for w in back.wire:
            assert type(w) is WireFigures and type(w.quantized) is tuple
            assert all(type(d) is WireDirection and type(d.size_classes) is tuple for d in w.by_direction.values())
        for k in back.link:
            assert type(k) is LinkFigures and all(type(d) is LinkDirection for d in k.by_direction.values())
    timed = [w for r in suite.results for w in r.wire if w.cpu]  # the merged rows' batched policy, timed
    assert [w.wire for w in timed] == ["tick:auto"] * 3
    assert all(type(w.cpu) is PacketCpu and type(w.cpu.encode) is Timing and w.cpu.error is None for w in timed)
    assert json.dumps(loaded.to_json()) == json.dumps(suite.to_json())  # written again, the same results.json


def test_results_json_holds_the_cpu_on_the_timed_policy_only_and_totals_that_add_up(fleet: Tuple[Suite, Path]) -> None:
    """Each figure as written is the dataclass's, a total is its directions' sum, and a replay at 0 % loss sends the
    packets and payload of its policy (its calls are the same)."""
    suite, folder = fleet
    data = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    for r, record in zip(suite.results, data["results"]):
        for w, row in zip(r.wire, record["wire"]):
            assert ("cpu" in row) == (w.cpu is not None) == (w.wire == "tick:auto"), r.codec
            for key in ("calls", "packets", "payload_bytes", "fragmented", "wire_bytes"):
                assert row[key] == getattr(w, key) == sum(getattr(d, key) for d in w.by_direction.values()), key
            if w.cpu and w.cpu.encode:
                assert row["cpu"]["encode"]["median_us"] == w.cpu.encode.median_us
        for k, replay in zip(r.link, record["link"]):
            for key in (f.name for f in dataclasses.fields(LinkDirection)):
                assert replay[key] == getattr(k, key) == sum(getattr(d, key) for d in k.by_direction.values()), key
            if k.loss_pct == 0:
                sent = next(w for w in r.wire if w.wire == k.wire)
                assert (k.calls, k.packets, k.payload_bytes, k.lost_calls) == (sent.calls, sent.packets,
                                                                               sent.payload_bytes, 0)
    assert all("cpu" not in row for t in data["traces"] for r in t["results"] for row in r["wire"])


def test_packets_that_could_not_be_timed_keep_only_why(fleet: Tuple[Suite, Path], tmp_path: Path) -> None:
    suite, _ = fleet
    failed = PacketCpu(error="no tick window of the sample holds a call")
    first = suite.results[0]
    odd = dataclasses.replace(first, wire=tuple(dataclasses.replace(w, cpu=failed) if w.cpu else w for w in first.wire))
    dataclasses.replace(suite, results=(odd, *suite.results[1:]), traces=()).save(str(tmp_path))
    row = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))["results"][0]["wire"][1]
    assert row["cpu"] == {"error": failed.error}
    back = load(str(tmp_path)).results[0].wire[1]
    assert back.cpu == failed and back.packet_timing("encode") is None


def test_a_link_directions_fields_are_the_replays_counts_in_order() -> None:
    """link_figures fills LinkDirection from a replay's counts by position: the same names in the same order."""
    assert [f.name for f in dataclasses.fields(LinkDirection)] == [*COUNTS[:-1], "wire_bytes"]
    assert COUNTS[-1] == "header_bytes"


@pytest.mark.parametrize("field, value", [("quantized", None), ("transport", 3), ("tick_confidence", "high")])
def test_a_wire_row_with_a_field_of_another_type_is_refused_naming_it(fleet: Tuple[Suite, Path], tmp_path: Path,
                                                                      field: str, value: Any) -> None:
    """Every field of a WireFigures is checked before it is made: a tampered one is one line, not a wrong value."""
    data = json.loads((fleet[1] / "results.json").read_text(encoding="utf-8"))
    data["results"][1]["wire"][0][field] = value
    (tmp_path / "results.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(BenchError, match=rf"results\[1\]\.wire\[0\]\.{field} is "):
        load(str(tmp_path))
