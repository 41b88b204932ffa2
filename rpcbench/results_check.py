"""The checks a ``results.json`` passes before it is read back (:func:`rpcbench.results.load`): every field
present with its type, counts whole and at least 0, figures finite, columns of one length; a damaged or
foreign file fails on the first field that is wrong, named by its path in the file."""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any, Dict, Optional, Tuple

from .results_wire import LinkDirection

LATENCY_KEYS = ("n", "p50", "p90", "p99", "max")  #: the figures of each op/method latency entry

_NUMBER = (int, float)
_SUITE_FIELDS = {"created": str, "command": list, "environment": dict, "settings": dict, "trace": dict,
                 "results": list}
_RESULT_FIELDS = {"codec": str, "config": dict, "library": (str, type(None)), "library_version": (str, type(None)),
                  "origin": str, "calls": int, "failures": int, "mismatches": int, "sizes": (dict, type(None)),
                  "encode": (dict, type(None)), "decode": (dict, type(None)), "problems": list,
                  "by_method": dict, "error": (str, type(None))}
_OPTIONAL_RESULT_FIELDS = {"stages": dict, "latency": dict, "memory": dict, "dictionary": (dict, type(None)),
                           "state_bytes_per_conn": int, "shared_state_bytes": int, "ordered_delivery": bool,
                           "floor_ratio": (int, float, type(None)), "by_direction": dict,
                           "estimate": (dict, type(None)), "wire": list, "lossy": dict, "link": list}
_SHARE_FIELDS = {"calls": int, "bytes": int}  #: what every by_method / by_direction entry holds (it may hold more)
_SIZES_FIELDS = {"total": int, "mean": _NUMBER, "p50": int, "p99": int, "min": int, "max": int}
_NONE = type(None)
_TRACE_FIELDS = {"path": (str, _NONE), "format": (str, _NONE), "calls": (int, _NONE), "sha256": (str, _NONE),
                 "file_bytes": (int, _NONE), "metadata": (dict, _NONE), "methods": (dict, _NONE),
                 "directions": (dict, _NONE), "connections": (int, _NONE), "duration_s": (int, float, _NONE),
                 "truncated_bytes": (int, _NONE), "recorder": (dict, _NONE), "bytes_reference": (str, _NONE),
                 "per_connection": (dict, _NONE)}
_SETTINGS_FIELDS = {"sample_by_method": (dict, _NONE), "sample": (int, _NONE), "sample_method": (str, _NONE),
                    "processes": (int, _NONE), "jobs": (int, _NONE), "repeat": (int, _NONE),
                    "timing_lanes": (int, _NONE), "busy_cpus_before_timing": (int, float, _NONE),
                    "ticks": (list, _NONE),
                    "transport": (str, _NONE), "packet_overhead": (int, _NONE)}
_TICK_FIELDS = {"path": str, "tick_ms": (int, float, _NONE), "confidence": _NUMBER, "gaps": int, "quantized": list}
_WIRE_FIELDS = {"wire": str, "tick_ms": (int, float, _NONE), "mtu": (int, _NONE), "tick_confidence": (*_NUMBER, _NONE),
                "quantized": list, "transport": str, "packet_overhead": int, "calls": int, "packets": int,
                "payload_bytes": int, "fragmented": int, "wire_bytes": int, "payload_p50": _NUMBER,
                "payload_p99": _NUMBER, "latency_mean_ms": _NUMBER, "latency_p99_ms": _NUMBER, "packet_ns": int,
                "problem": (str, _NONE), "by_direction": dict}
_WIRE_DIRECTION_FIELDS = {"calls": int, "packets": int, "payload_bytes": int, "fragmented": int, "wire_bytes": int,
                          "size_classes": list}
#: a replay over the lossy link (schema 8: rpcbench.link.link_figures), and its figures per direction
_LINK_COUNTS = tuple(f.name for f in fields(LinkDirection))
_LINK_FIELDS = {"wire": str, "loss_pct": _NUMBER, "delivery": str, **dict.fromkeys(_LINK_COUNTS, int),
                "lost_by_method": dict, "latency_p50_ms": _NUMBER, "latency_p99_ms": _NUMBER, "mismatches": int,
                "problem": (str, _NONE), "by_direction": dict}
_PROBLEM_FIELDS = {"kind": str, "feature": str, "declared": bool, "count": int, "example_index": int,
                   "example_method": str, "example_path": str, "detail": str}
_OPTIONAL_PROBLEM_FIELDS = {"example_trace": (str, type(None))}
PROBLEM_KEYS = {*_PROBLEM_FIELDS, *_OPTIONAL_PROBLEM_FIELDS}


def _fields(obj: Any, spec: Dict[str, Any], where: str, optional: Dict[str, Any] = {}) -> None:  # noqa: B006
    """TypeError/KeyError unless ``obj`` is a dict holding every field of ``spec`` with its type."""
    if type(obj) is not dict:
        raise TypeError(f"{where} is not an object")
    for name, types in [*spec.items(), *((k, t) for k, t in optional.items() if k in obj)]:
        if name not in obj:
            raise KeyError(f"{where}.{name} is missing")
        value = obj[name]
        if not isinstance(value, types) or (type(value) is bool and types is not bool):
            raise TypeError(f"{where}.{name} is {type(value).__name__}")


def _counts(mapping: Any, where: str, depth: int = 1) -> None:
    """TypeError unless ``mapping`` maps str keys to ``depth`` levels of such mappings of finite numbers."""
    if type(mapping) is not dict:
        raise TypeError(f"{where} is not an object")
    for key, value in mapping.items():
        if depth > 1:
            _counts(value, f"{where}.{key}", depth - 1)
        elif type(value) not in _NUMBER or not math.isfinite(value):
            raise TypeError(f"{where}.{key} is not a finite number")


def _check_timing(t: Any, where: str) -> None:
    _fields(t, {"rounds_ns": list, "calls": int, "loops": int}, where)
    rounds = t["rounds_ns"]
    if not rounds or not all(type(x) in _NUMBER and math.isfinite(x) and x > 0 for x in rounds):
        raise ValueError(f"{where}.rounds_ns is not a list of positive finite numbers")
    if t["calls"] < 1 or t["loops"] < 1:
        raise ValueError(f"{where}: calls and loops must be at least 1")


_FLOOR_FIELDS = {"bytes_per_call": _NUMBER, "compressor": str, "calls": int, "of_calls": int}
#: a floor estimated beyond its budget says so (rpcbench.floor.FloorFigures; absent in files before: exact)
_FLOOR_ESTIMATE_FIELDS = {"estimated": bool, "compressed_share": _NUMBER, "ci_half_width": _NUMBER}
#: a floor written before it named its ``compressor`` (rpcbench.floor): the smaller per stream of xz -9 and
#: zstd-19, each one's figure (zstd's None when the floor left zstd out on streams over 512 KiB)
_FLOOR_BEFORE_FIELDS = {"bytes_per_call": _NUMBER, "zstd19_long_bytes_per_call": (*_NUMBER, _NONE),
                        "xz9_bytes_per_call": _NUMBER, "calls": int, "of_calls": int}
_TRAINING_FIELDS = {"source": str, "calls": int, "held_out_calls": int}
_DICTIONARY_FIELDS = {"bytes": int, "train_s": _NUMBER, "ship_bytes": int, "ship_bytes_per_call": _NUMBER}


CONNECTION_COLUMNS = ("span_ms", "c2s_calls", "s2c_calls")  #: trace.per_connection: each connection's traffic
CONNECTION_BYTES = ("c2s_bytes", "s2c_bytes")  #: a codec's bytes per connection (schema 7: every codec's)


def _check_trace_extras(trace: Dict[str, Any]) -> None:
    """The floor and the dictionary training (schema 3), the per-connection traffic (schema 4), when recorded."""
    floor = trace.get("floor")
    floor_spec = _FLOOR_FIELDS if type(floor) is not dict or "compressor" in floor else _FLOOR_BEFORE_FIELDS
    for name, spec in (("floor", floor_spec), ("training", _TRAINING_FIELDS)):
        if trace.get(name) is not None:
            optional = _FLOOR_ESTIMATE_FIELDS if name == "floor" else {}
            _fields(trace[name], spec, f"trace.{name}", optional)
            _finite(trace[name], {**spec, **{k: t for k, t in optional.items() if k in trace[name]}}, f"trace.{name}")
    table = trace.get("per_connection")
    if table is None:
        return
    where = "trace.per_connection"
    if "codec" in table:  # versions 4 to 6: one codec's bytes beside the traffic
        _fields(table, {"codec": str}, where)
        _columns(table, (*CONNECTION_COLUMNS, *CONNECTION_BYTES), where, None)
        return
    _fields(table, {"bytes": dict}, where)
    rows = _columns(table, CONNECTION_COLUMNS, where, None)
    for codec, columns in table["bytes"].items():
        _columns(columns, CONNECTION_BYTES, f"{where}.bytes.{str(codec)[:60]}", rows)


def _columns(table: Any, names: Tuple[str, ...], where: str, rows: Optional[int]) -> int:
    """Columns ``names`` of ``table``: lists of whole numbers of at least 0, all ``rows`` long (None: alike)."""
    _fields(table, dict.fromkeys(names, list), where)
    if len({len(table[name]) for name in names} | ({rows} if rows is not None else set())) != 1:
        raise ValueError(f"{where}: columns of different lengths")
    for name in names:
        if not all(type(x) is int and x >= 0 for x in table[name]):
            raise ValueError(f"{where}.{name} is not a list of whole numbers of at least 0")
    return len(table[names[0]])


def _finite(obj: Dict[str, Any], spec: Dict[str, Any], where: str) -> None:
    """ValueError unless every numeric field of ``spec`` in ``obj`` is a finite number, not negative."""
    for name, types in spec.items():
        if types in (int, _NUMBER) and not (math.isfinite(obj[name]) and obj[name] >= 0):
            raise ValueError(f"{where}.{name} is not a finite number of at least 0")


def check_suite(data: Dict[str, Any]) -> None:
    """Every field the reports use, with its type: a foreign or tampered file fails here, in one line."""
    _fields(data, _SUITE_FIELDS, "results.json", {"partial": (str, _NONE)})
    if not all(type(word) is str for word in data["command"]):
        raise TypeError("command is not a list of strings")
    _fields(data["trace"], {}, "trace", _TRACE_FIELDS)
    _fields(data["settings"], {}, "settings", _SETTINGS_FIELDS)
    _check_trace_extras(data["trace"])
    for name, mapping in (("trace.methods", data["trace"].get("methods")), ("trace.directions", data["trace"].get(
            "directions")), ("settings.sample_by_method", data["settings"].get("sample_by_method"))):
        if mapping is not None:
            _counts(mapping, name)
    for i, tick in enumerate(data["settings"].get("ticks") or ()):
        _fields(tick, _TICK_FIELDS, f"settings.ticks[{i}]")
        if not (tick["tick_ms"] is None or math.isfinite(tick["tick_ms"]) and tick["tick_ms"] > 0) or not all(
                type(d) is str for d in tick["quantized"]):
            raise ValueError(f"settings.ticks[{i}]: not a tick found in a trace")
    for i, r in enumerate(data["results"]):
        _check_result(r, f"results[{i}]")
    for i, t in enumerate(data.get("traces", [])):
        _fields(t, {"trace": dict, "results": list}, f"traces[{i}]")
        _fields(t["trace"], {"path": str}, f"traces[{i}].trace", _TRACE_FIELDS)
        for j, r in enumerate(t["results"]):
            _check_result(r, f"traces[{i}].results[{j}]")


def _check_result(r: Any, where: str) -> None:
    """One codec's result: every field the reports use, with its type."""
    _fields(r, _RESULT_FIELDS, where, _OPTIONAL_RESULT_FIELDS)
    for part in ("by_method", "by_direction"):  # per method / direction: at least its calls and bytes
        _counts(r.get(part, {}), f"{where}.{part}", 2)
        for key, figures in r.get(part, {}).items():
            _fields(figures, _SHARE_FIELDS, f"{where}.{part}.{key}")
    _counts(r.get("latency", {}), f"{where}.latency", 3)
    for op, by_method in r.get("latency", {}).items():
        for method, pcts in by_method.items():
            _fields(pcts, dict.fromkeys(LATENCY_KEYS, _NUMBER), f"{where}.latency.{op}.{method}")
    _counts(r.get("memory", {}), f"{where}.memory", 2)
    _counts(r.get("lossy", {}), f"{where}.lossy", 2)
    if r.get("dictionary") is not None:
        _fields(r["dictionary"], _DICTIONARY_FIELDS, f"{where}.dictionary")
        _counts(r["dictionary"], f"{where}.dictionary")
    if r["sizes"] is not None:
        _fields(r["sizes"], _SIZES_FIELDS, f"{where}.sizes")
        if not r["sizes"]["mean"] > 0:  # every ratio divides by it; a message carries at least its method
            raise TypeError(f"{where}.sizes.mean is not above 0")
    for op in ("encode", "decode"):
        if r[op] is not None:
            _check_timing(r[op], f"{where}.{op}")
    for op, stages in r.get("stages", {}).items():
        _fields(stages, {}, f"{where}.stages.{op}")
        for name, t in stages.items():
            _check_timing(t, f"{where}.stages.{op}.{name}")
    for j, p in enumerate(r["problems"]):
        _fields(p, _PROBLEM_FIELDS, f"{where}.problems[{j}]", _OPTIONAL_PROBLEM_FIELDS)
    for j, w in enumerate(r.get("wire", ())):
        _check_wire(w, f"{where}.wire[{j}]")
    for j, k in enumerate(r.get("link", ())):
        _check_link(k, f"{where}.link[{j}]")


def _check_link(k: Any, where: str) -> None:
    """One replay over the lossy link: its counts whole and not negative, in total and per direction."""
    _fields(k, _LINK_FIELDS, where)
    _finite(k, _LINK_FIELDS, where)
    _counts(k["lost_by_method"], f"{where}.lost_by_method")
    for direction in ("c2s", "s2c"):
        figures = k["by_direction"].get(direction)
        spec = dict.fromkeys(_LINK_COUNTS, int)
        _fields(figures, spec, f"{where}.by_direction.{direction}")
        _finite(figures, spec, f"{where}.by_direction.{direction}")


def _check_wire(w: Any, where: str) -> None:
    """One codec's figures under one --wire policy: both directions, counts finite and not negative; the
    packets' CPU (``cpu``, optional) timings as the codec's."""
    _fields(w, _WIRE_FIELDS, where, {"cpu": dict})
    _finite(w, _WIRE_FIELDS, where)
    if "cpu" in w:
        _fields(w["cpu"], {}, f"{where}.cpu", {"error": str})
        if "error" not in w["cpu"]:
            _fields(w["cpu"], {"calls": int, "packets": int, "encode": dict, "decode": dict}, f"{where}.cpu")
            for op in ("encode", "decode"):
                _check_timing(w["cpu"][op], f"{where}.cpu.{op}")
    for direction in ("c2s", "s2c"):
        figures = w["by_direction"].get(direction)
        _fields(figures, _WIRE_DIRECTION_FIELDS, f"{where}.by_direction.{direction}")
        _finite(figures, _WIRE_DIRECTION_FIELDS, f"{where}.by_direction.{direction}")
        classes = figures["size_classes"]
        if len(classes) != 3 or not all(type(n) is int and n >= 0 for n in classes):
            raise TypeError(f"{where}.by_direction.{direction}.size_classes is not 3 counts")
