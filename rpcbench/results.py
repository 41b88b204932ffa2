"""Results as a small immutable data model, saved as versioned ``results.json`` and ``results.csv``.

``Suite`` (one run: environment, settings, trace) holds one ``CodecResult`` per codec,
which holds ``Sizes``, two ``Timing`` (encode, decode) and the fidelity ``Problem`` list.
The JSON format is described field by field in ``docs/results-format.md``; readers must
check ``schema_version``.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .errors import BenchError

SCHEMA_VERSION = 1

CSV_COLUMNS = (
    "codec", "calls", "failures", "mismatches", "bytes_total", "bytes_mean", "bytes_p50", "bytes_p99",
    "encode_us", "decode_us", "encode_spread_pct", "decode_spread_pct", "declared_only",
)


@dataclass(frozen=True)
class Timing:
    """Per-call time of each measured round, in ns (each round = ``loops`` replays of ``calls`` calls)."""

    rounds_ns: Tuple[float, ...]
    calls: int
    loops: int

    @property
    def median_us(self) -> float:
        """The headline figure: median over rounds, microseconds per call."""
        return statistics.median(self.rounds_ns) / 1000

    @property
    def spread_pct(self) -> float:
        """Half the min-max range of the rounds, as a percentage of the median."""
        med = statistics.median(self.rounds_ns)
        return 0.0 if not med else (max(self.rounds_ns) - min(self.rounds_ns)) / 2 / med * 100

    @property
    def stdev_pct(self) -> float:
        """Sample standard deviation of the rounds as a percentage of their mean."""
        if len(self.rounds_ns) < 2:
            return 0.0
        return statistics.stdev(self.rounds_ns) / statistics.fmean(self.rounds_ns) * 100


@dataclass(frozen=True)
class Sizes:
    """Bytes on the wire per encoded call, over the whole trace."""

    total: int
    mean: float
    p50: int
    p99: int
    min: int
    max: int


@dataclass(frozen=True)
class Problem:
    """Calls a codec got wrong, grouped by kind and feature, with one example.

    ``kind``: ``encode`` (raised or returned non-bytes), ``decode`` (raised) or
    ``mismatch`` (came back different). ``declared``: the codec's ``changes`` name
    the feature, so this is a documented property of the format, not a bug.
    """

    kind: str
    feature: str
    declared: bool
    count: int
    example_index: int
    example_method: str
    example_path: str
    detail: str


@dataclass(frozen=True)
class CodecResult:
    """Everything measured for one codec id."""

    codec: str
    config: Dict[str, Any]
    library: Optional[str]
    library_version: Optional[str]
    origin: str
    calls: int  #: calls encoded
    failures: int  #: calls that failed to encode
    mismatches: int  #: encoded calls that failed to decode or came back different
    sizes: Optional[Sizes]
    encode: Optional[Timing]
    decode: Optional[Timing]
    problems: Tuple[Problem, ...] = ()
    by_method: Dict[str, Dict[str, int]] = field(default_factory=dict)  #: method -> {"calls", "bytes"}
    error: Optional[str] = None  #: why timing could not run, if it could not

    @property
    def declared_only(self) -> bool:
        """True when every failure and mismatch is one the codec declared."""
        return all(p.declared for p in self.problems)


@dataclass(frozen=True)
class Suite:
    """One benchmark run."""

    schema_version: int
    created: str
    command: List[str]
    environment: Dict[str, Any]
    settings: Dict[str, Any]
    trace: Dict[str, Any]
    results: Tuple[CodecResult, ...]

    def result(self, codec: str) -> CodecResult:
        """The result for a codec id (KeyError if it wasn't run)."""
        for r in self.results:
            if r.codec == codec:
                return r
        raise KeyError(codec)

    def to_json(self) -> Dict[str, Any]:
        """Plain JSON data, with the derived headline figures added for other tools."""
        data = asdict(self)
        for r, out in zip(self.results, data["results"]):
            for kind in ("encode", "decode"):
                timing = getattr(r, kind)
                if timing:
                    out[kind].update(median_us=timing.median_us, spread_pct=timing.spread_pct, stdev_pct=timing.stdev_pct)
        return data

    def save(self, folder: str) -> None:
        """Write ``results.json`` and ``results.csv`` into ``folder``."""
        with open(os.path.join(folder, "results.json"), "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, indent=1, ensure_ascii=False)
            f.write("\n")
        with open(os.path.join(folder, "results.csv"), "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(CSV_COLUMNS)
            writer.writerows(csv_row(r) for r in self.results)


def csv_row(r: CodecResult) -> List[Any]:
    """One results.csv row (empty cells where a figure could not be measured)."""
    s, e, d = r.sizes, r.encode, r.decode
    return [
        r.codec, r.calls, r.failures, r.mismatches,
        s.total if s else "", f"{s.mean:.2f}" if s else "", s.p50 if s else "", s.p99 if s else "",
        f"{e.median_us:.3f}" if e else "", f"{d.median_us:.3f}" if d else "",
        f"{e.spread_pct:.1f}" if e else "", f"{d.spread_pct:.1f}" if d else "", int(r.declared_only),
    ]


def load(path: str) -> Suite:
    """Read a ``results.json`` (or the folder holding one)."""
    if os.path.isdir(path):
        path = os.path.join(path, "results.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise BenchError(f"{path}: cannot read results ({e})") from None
    if data.get("schema_version") != SCHEMA_VERSION:
        raise BenchError(f"{path}: results schema version {data.get('schema_version')}, expected {SCHEMA_VERSION}")
    return Suite(
        schema_version=data["schema_version"],
        created=data["created"],
        command=data["command"],
        environment=data["environment"],
        settings=data["settings"],
        trace=data["trace"],
        results=tuple(_codec_result(r) for r in data["results"]),
    )


def _codec_result(r: Dict[str, Any]) -> CodecResult:
    def timing(t: Optional[Dict[str, Any]]) -> Optional[Timing]:
        return Timing(tuple(t["rounds_ns"]), t["calls"], t["loops"]) if t else None

    return CodecResult(
        **{k: r[k] for k in ("codec", "config", "library", "library_version", "origin", "calls", "failures",
                             "mismatches", "by_method", "error")},
        sizes=Sizes(**r["sizes"]) if r["sizes"] else None,
        encode=timing(r["encode"]),
        decode=timing(r["decode"]),
        problems=tuple(Problem(**p) for p in r["problems"]),
    )
