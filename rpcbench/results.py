"""Results as a small immutable data model, saved as versioned ``results.json`` and ``results.csv``.

``Suite`` (one run: environment, settings, trace) holds one ``CodecResult`` per codec,
which holds ``Sizes``, two ``Timing`` (encode, decode), the fidelity ``Problem`` list, and its
figures per --wire policy and lossy link replay (``WireFigures``, ``LinkFigures``: rpcbench/results_wire.py).
The JSON format is described field by field in ``docs/results-format.md``; readers must
check ``schema_version``.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, List, Optional, Tuple

from rpc_capture import DIRECTIONS

from .errors import BenchError
from .results_timing import CONFIDENCE as CONFIDENCE, MIN_STATE_PAIRS as MIN_STATE_PAIRS
from .results_timing import SLOW_STATE_FACTOR as SLOW_STATE_FACTOR, Timing
from .results_check import CONNECTION_BYTES, CONNECTION_COLUMNS, PROBLEM_KEYS, check_suite
from .results_wire import LinkDirection, LinkFigures, PacketCpu, WireDirection, WireFigures

SCHEMA_VERSION = 8
#: version 1 files have no ``partial`` (they are complete runs); 1 and 2 have no state or floor figures;
#: 1 to 3 have no per-direction bytes (``by_direction``) or per-connection traffic (``trace.per_connection``),
#: per-trace results of a fleet (``traces``), estimates or example traces; 1 to 4 hold the dictionaries' calls out
#: of a fleet by a seeded share and have no fleet floor (the one size pass of version 5: docs/results-format.md);
#: 1 to 5 have no wire figures (``wire``: packets per --wire policy, docs/wire.md); 4 to 6 keep one codec's bytes per
#: connection (``trace.per_connection.codec``: json, or the first codec), 7 every codec's (``bytes``); 1 to 7 have no
#: lossy link replays (``link``: per --wire policy and --loss rate, docs/wire.md)
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6, 7, 8)


CSV_COLUMNS = (
    "codec", "calls", "failures", "mismatches", "bytes_total", "bytes_mean", "bytes_p50", "bytes_p99",
    "encode_us", "encode_ci_low_us", "encode_ci_high_us", "decode_us", "decode_ci_low_us", "decode_ci_high_us",
    "ci_confidence", "declared_only", "state_bytes_per_conn", "ordered_delivery", "floor_ratio", "trace",
    "wire", "packets", "payload_bytes", "wire_bytes", "fragmented", "packet_encode_us", "packet_decode_us", "error",
    "loss_pct", "resend_bytes", "latency_p50_ms", "latency_p99_ms", "lost_calls",
)
MERGED = "*"  #: results.csv's ``trace`` of the rows over every trace of the run


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
    example_trace: Optional[str] = None  #: in a fleet's merged row, the trace whose call example_index is


@dataclass(frozen=True)
class Estimate:
    """A sampled size pass's (``--sample-calls``) figures for every call, each (low, estimate, high) at
    ``confidence`` (:func:`rpcbench.sampling.sampled_estimate`)."""

    measured_calls: int  #: calls the sample measured
    of_calls: int  #: calls it stands for
    confidence: float
    bytes_total: Tuple[float, float, float]  #: bytes of every call (failed calls count 0 bytes)
    bytes_mean: Tuple[float, float, float]  #: bytes per encoded call
    failures: Tuple[float, float, float]  #: calls that fail to encode


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
    stages: Dict[str, Dict[str, Timing]] = field(default_factory=dict)  #: "encode"/"decode" -> stage -> Timing
    latency: Dict[str, Dict[str, Dict[str, float]]] = field(default_factory=dict)  #: op -> method|"*" -> ns pcts
    memory: Dict[str, Dict[str, float]] = field(default_factory=dict)  #: op -> allocation figures per call
    #: trained codecs: bytes, train_s, train_calls, ship_bytes, ship_bytes_per_call (None for the others)
    dictionary: Optional[Dict[str, Any]] = None
    state_bytes_per_conn: int = 0  #: memory one connection's state keeps at one end (0: stateless)
    shared_state_bytes: int = 0  #: memory kept once for all connections (a dictionary)
    ordered_delivery: bool = False  #: needs reliable, ordered delivery (state across calls)
    floor_ratio: Optional[float] = None  #: bytes per call over the trace's floor (trace.floor)
    by_direction: Dict[str, Dict[str, int]] = field(default_factory=dict)  #: "c2s"/"s2c" -> {"calls", "bytes"}
    estimate: Optional[Estimate] = None  #: a sampled size pass (--sample-calls): every call's figures estimated
    #: per --wire policy: packets, payload and wire bytes, per direction, latency (rpcbench.wire.wire_figures)
    wire: Tuple[WireFigures, ...] = ()
    #: a lossy codec (quant): field path -> {"changed": values back within their step, "max_error", "step"}
    lossy: Dict[str, Dict[str, float]] = field(default_factory=dict)
    #: per --wire policy and --loss rate: its replay over the lossy link (rpcbench.link.link_figures)
    link: Tuple[LinkFigures, ...] = ()

    def state_bytes_for(self, connections: int) -> int:
        """Memory the codec's state needs for ``connections`` connections at one end."""
        return self.state_bytes_per_conn * connections + self.shared_state_bytes

    @property
    def declared_only(self) -> bool:
        """True when every failure and mismatch is one the codec declared."""
        return all(p.declared for p in self.problems)


@dataclass(frozen=True)
class TraceResults:
    """One trace of a fleet run: what it holds and each codec's size and fidelity figures on it
    (timing is the fleet's, on one sample, in the merged results)."""

    trace: Dict[str, Any]
    results: Tuple[CodecResult, ...]


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
    partial: Optional[str] = None  #: why the run stopped early (Ctrl-C during timing); None for a complete run
    traces: Tuple[TraceResults, ...] = ()  #: a fleet's figures per trace (``results`` are the merged ones)

    def find(self, codec: str) -> Optional[CodecResult]:
        """The result for a codec id, or None if it wasn't run."""
        return next((r for r in self.results if r.codec == codec), None)

    def result(self, codec: str) -> CodecResult:
        """The result for a codec id (KeyError if it wasn't run)."""
        found = self.find(codec)
        if found is None:
            raise KeyError(codec)
        return found

    def to_json(self) -> Dict[str, Any]:
        """Plain JSON data, with the derived headline figures added for other tools."""
        data = asdict(self)
        for r, out in zip(self.results, data["results"]):
            for kind in ("encode", "decode"):
                if getattr(r, kind):
                    out[kind].update(_derived(getattr(r, kind)))
                for stage, timing in r.stages.get(kind, {}).items():
                    out["stages"][kind][stage].update(_derived(timing))
        per_trace = (pair for t, out in zip(self.traces, data["traces"]) for pair in zip(t.results, out["results"]))
        for r, out in (*zip(self.results, data["results"]), *per_trace):
            for w, row in zip(r.wire, out["wire"]):
                if w.cpu:
                    row["cpu"] = _packet_cpu(w.cpu)
                else:  # results.json has no cpu but on the timed policy
                    del row["cpu"]
        return data

    def save(self, folder: str) -> None:
        """Write ``results.json`` and ``results.csv`` into ``folder``, and the typed codecs' schema when the run
        inferred it (``inferred.proto``: what a team would start its own .proto from).

        A lone surrogate in a trace-derived string (a method name...) has no UTF-8 form: it is
        written as the JSON escape ``\\udc00``, which reads back as the same string.
        """
        with open(os.path.join(folder, "results.json"), "w", encoding="utf-8", errors="backslashreplace") as f:
            json.dump(self.to_json(), f, indent=1, ensure_ascii=False)
            f.write("\n")
        with open(os.path.join(folder, "results.csv"), "w", newline="",
                  encoding="utf-8", errors="backslashreplace") as f:
            writer = csv.writer(f)
            writer.writerow(CSV_COLUMNS)
            writer.writerows(row for r in self.results for row in csv_rows(r))
            writer.writerows(row for t in self.traces for r in t.results for row in csv_rows(r, t.trace["path"]))
        schema = (self.trace.get("training") or {}).get("schema")
        if schema:
            with open(os.path.join(folder, schema["file"]), "w", encoding="utf-8") as f:
                f.write(schema["proto"])


def _derived(t: Timing) -> Dict[str, Any]:
    lo, hi, confidence = t.ci_us
    return {"median_us": t.median_us, "spread_pct": t.spread_pct, "stdev_pct": t.stdev_pct, "iqr_us": t.iqr_us,
            "mad_us": t.mad_us, "ci_us": [lo, hi], "ci_confidence": confidence}


def _packet_cpu(cpu: PacketCpu) -> Dict[str, Any]:
    """A wire row's ``cpu`` as results.json writes it: the figures with their derived ones, or only the error."""
    if cpu.error is not None:
        return {"error": cpu.error}
    return {"calls": cpu.calls, "packets": cpu.packets,
            **{op: {**asdict(t), **_derived(t)} for op, t in (("encode", cpu.encode), ("decode", cpu.decode)) if t}}


def csv_row(r: CodecResult, trace: str = MERGED) -> List[Any]:
    """One results.csv row (empty cells where a figure could not be measured); ``trace`` is the trace's
    path for a fleet's per-trace rows."""
    s, e, d = r.sizes, r.encode, r.decode

    def median_and_ci(t: Optional[Timing]) -> List[str]:
        return [f"{v:.3f}" for v in (t.median_us, *t.ci_us[:2])] if t else ["", "", ""]

    timed = e or d
    confidence = timed.ci_us[2] if timed else None
    return [
        r.codec, r.calls, r.failures, r.mismatches,
        s.total if s else "", f"{s.mean:.2f}" if s else "", s.p50 if s else "", s.p99 if s else "",
        *median_and_ci(e), *median_and_ci(d), f"{confidence:.3f}" if confidence is not None else "",
        int(r.declared_only), r.state_bytes_per_conn, int(r.ordered_delivery),
        f"{r.floor_ratio:.3f}" if r.floor_ratio else "", trace,
    ]


def csv_rows(r: CodecResult, trace: str = MERGED) -> List[List[Any]]:
    """The codec's results.csv rows: one per --wire policy (the wire columns empty without wire figures; the
    packets' CPU per call only on the batched policy that was timed), each ending with the codec's error; with
    lossy link replays (--loss), one per policy and loss rate, each with its policy's wire columns and the
    replay's columns (``wire_bytes`` then the replay's: resends, acks and their headers included)."""
    row = csv_row(r, trace)
    error = r.error or ""  # why the codec has no timing or no figures (a plugin that hung or aborted...)
    if not r.wire:
        return [row + [""] * 7 + [error] + [""] * 5]
    rows = []
    for w in r.wire:
        wire = [w.wire, w.packets, w.payload_bytes, w.wire_bytes, w.fragmented,
                *(f"{t.median_us:.3f}" if (t := w.packet_timing(op)) else "" for op in ("encode", "decode")), error]
        replays = [k for k in r.link if k.wire == w.wire]
        rows.extend([row + wire[:1] + [k.packets, k.payload_bytes, k.wire_bytes] + wire[4:] +
                     [f"{k.loss_pct:g}", k.resend_bytes, f"{k.latency_p50_ms:.1f}", f"{k.latency_p99_ms:.1f}",
                      k.lost_calls] for k in replays] or [row + wire + [""] * 5])
    return rows


MAX_RESULTS_BYTES = 256 << 20  #: largest results.json read (a real one is well under 1 MB)


def load(path: str) -> Suite:
    """Read a ``results.json`` (or the folder holding one); BenchError naming the file and
    the first field that is missing or of the wrong type for anything damaged or foreign."""
    if os.path.isdir(path):
        path = os.path.join(path, "results.json")
    try:
        if os.path.getsize(path) > MAX_RESULTS_BYTES:
            raise BenchError(f"{path}: over {MAX_RESULTS_BYTES} bytes, not a results file")
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, RecursionError) as e:
        raise BenchError(f"{path}: cannot read results ({str(e) or type(e).__name__})") from None
    if not isinstance(data, dict) or data.get("schema_version") not in READABLE_VERSIONS:
        version = data.get("schema_version") if isinstance(data, dict) else None
        raise BenchError(f"{path}: results schema version {str(version)[:20]}, expected {SCHEMA_VERSION}")
    try:
        check_suite(data)
        return _suite(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BenchError(f"{path}: not a valid results file ({type(e).__name__}: {str(e)[:200]})") from None


def _suite(data: Dict[str, Any]) -> Suite:
    return Suite(
        schema_version=data["schema_version"],
        created=data["created"],
        command=data["command"],
        environment=data["environment"],
        settings=data["settings"],
        trace=_with_bytes_by_codec(data["trace"]),
        results=tuple(_codec_result(r) for r in data["results"]),
        partial=data.get("partial"),
        traces=tuple(TraceResults(t["trace"], tuple(_codec_result(r) for r in t["results"]))
                     for t in data.get("traces", [])),
    )


def _with_bytes_by_codec(trace: Dict[str, Any]) -> Dict[str, Any]:
    """A trace record of versions 4 to 6 (one codec's bytes per connection, ``codec``) in the shape of version 7
    (``bytes``: every codec's), so the capacity planner reads one shape."""
    table = trace.get("per_connection")
    if not table or "codec" not in table:
        return trace
    traffic = {name: table[name] for name in CONNECTION_COLUMNS}
    return {**trace, "per_connection": {**traffic, "bytes": {table["codec"]: {n: table[n] for n in CONNECTION_BYTES}}}}


def _timing(t: Optional[Dict[str, Any]]) -> Optional[Timing]:
    return Timing(tuple(t["rounds_ns"]), t["calls"], t["loops"]) if t else None


def _codec_result(r: Dict[str, Any]) -> CodecResult:
    stages = {op: {name: _timing(t) for name, t in by_stage.items()} for op, by_stage in r.get("stages", {}).items()}

    return CodecResult(
        **{k: r[k] for k in ("codec", "config", "library", "library_version", "origin", "calls", "failures",
                             "mismatches", "by_method", "error")},
        sizes=Sizes(**r["sizes"]) if r["sizes"] else None,
        encode=_timing(r["encode"]),
        decode=_timing(r["decode"]),
        problems=tuple(Problem(**{k: v for k, v in p.items() if k in PROBLEM_KEYS}) for p in r["problems"]),
        stages=stages,  # type: ignore[arg-type]
        latency=r.get("latency", {}),
        memory=r.get("memory", {}),
        dictionary=r.get("dictionary"),
        state_bytes_per_conn=r.get("state_bytes_per_conn", 0),
        shared_state_bytes=r.get("shared_state_bytes", 0),
        ordered_delivery=r.get("ordered_delivery", False),
        floor_ratio=r.get("floor_ratio"),
        by_direction=r.get("by_direction", {}),
        estimate=_estimate(r.get("estimate")),
        wire=tuple(_wire(w) for w in r.get("wire", ())),
        lossy=r.get("lossy", {}),
        link=tuple(_link(k) for k in r.get("link", ())),
    )


def _wire(w: Dict[str, Any]) -> WireFigures:
    """A results file's figures under one --wire policy (schema 6 on; the checks passed: results_check)."""
    cpu = w.get("cpu")
    return _typed(WireFigures, w, quantized=tuple(w["quantized"]),
                  by_direction={d: _typed(WireDirection, f, size_classes=tuple(f["size_classes"]))
                                for d, f in w["by_direction"].items() if d in DIRECTIONS},
                  cpu=PacketCpu(cpu.get("calls", 0), cpu.get("packets", 0), _timing(cpu.get("encode")),
                                _timing(cpu.get("decode")), cpu.get("error")) if cpu else None)


def _link(k: Dict[str, Any]) -> LinkFigures:
    """A results file's replay over the lossy link (schema 8; the checks passed: results_check)."""
    return _typed(LinkFigures, k, by_direction={d: _typed(LinkDirection, f) for d, f in k["by_direction"].items()
                                                if d in DIRECTIONS})


def _typed(kind: Any, data: Dict[str, Any], **given: Any) -> Any:
    """``kind`` (a dataclass) from the fields of ``data`` it has, ``given`` ones instead (TypeError: one missing)."""
    return kind(**{**{f.name: data[f.name] for f in fields(kind) if f.name in data}, **given})


def _estimate(e: Optional[Dict[str, Any]]) -> Optional[Estimate]:
    """A results file's estimates (none before version 4, or from a pass over every call)."""
    if not e:
        return None
    return Estimate(e["measured_calls"], e["of_calls"], e["confidence"], _interval(e["bytes_total"]),
                    _interval(e["bytes_mean"]), _interval(e["failures"]))


def _interval(values: List[float]) -> Tuple[float, float, float]:
    low, mid, high = values
    return low, mid, high
