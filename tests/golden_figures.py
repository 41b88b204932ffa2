"""Golden figures: what every output of a run says about bytes, failures, packets and the floor.

``tests/test_golden_figures.py`` runs each case of :data:`CASES` through ``run_bench.py`` and
compares what :func:`figures` reads from its outputs (results.json, results.csv, the terminal
text, report.md, report.html) with ``tests/data/golden/<case>.json``. Timings, paths, dates and
codec state memory are left out; everything left must not move when the core is rebuilt, except
the floor (:data:`FLOOR_FIELDS`), which may move by :data:`FLOOR_TOLERANCE` (issue 28 lets a cheaper
floor land within 1 % of today's).

After a deliberate change of a figure, regenerate the files and commit them with the change::

    python tests/golden_figures.py            # every case
    python tests/golden_figures.py fleet      # one case
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Dict, Iterator, List, Sequence

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "data" / "golden"
MINECRAFT = "tests/data/minecraft_packets.jsonl"
WIRE = ["--wire", "per-call,tick:50+mtu:1200", "--transport", "udp"]
FAST_TIMING = ["--sample", "100", "--repeat", "1", "--warmup", "1", "--min-time", "0.001", "--no-tails",
               "--no-memory"]

CASES: Dict[str, List[str]] = {
    "battle-wire": ["--trace", "samples/battle.rpct", "--sizes-only", *WIRE],
    "battle-dict-in-process": ["--trace", "samples/battle_dict.rpct", "--sizes-only", "--jobs", "0"],
    "fleet": ["--trace", "samples/battle.rpct", "samples/battle_dict.rpct", "--sizes-only"],
    # per-call only: a tick policy on this trace (evenly spaced timestamps) stops in wire.detect_tick today
    "minecraft-timed": ["--trace", MINECRAFT, "--wire", "per-call", "--transport", "udp", *FAST_TIMING],
}

FLOOR_FIELDS = {"floor_ratio", "floor_bytes_per_call", "x floor", "floor B/call"}
FLOOR_TOLERANCE = 0.01
KEY_COLUMNS = ("codec", "policy", "method")
# a column headed only by these is read as part of the column before it ("bytes mean|p99", "packets/s up|down")
SUB_COLUMNS = {"p50", "p99", "down", "±CI"}
FIGURE_COLUMNS = {
    "calls", "failures", "mismatches", "bytes mean", "bytes mean|p50", "bytes mean|p99", "x json", "x floor",
    "B/call on the wire", "payload B/packet p50", "payload B/packet p50|p99", "packets/s up", "packets/s up|down",
    "kbit/s up", "kbit/s up|down", "fragmented", "% of calls", "% of bytes (json)", "bytes/call (json)",
}
CSV_COLUMNS = ("calls", "failures", "mismatches", "bytes_total", "bytes_mean", "bytes_p50", "bytes_p99",
               "declared_only", "floor_ratio", "packets", "payload_bytes", "wire_bytes", "fragmented")
WIRE_FIELDS = ("wire", "tick_ms", "mtu", "transport", "packet_overhead", "calls", "packets", "payload_bytes",
               "fragmented", "wire_bytes", "payload_p50", "payload_p99", "by_direction")
FLOOR_SENTENCE = re.compile(r"the trace's floor, ([\d.,]+) B/call")
POLICY_LINE = re.compile(r"(\S+): ([\d.]+) up \+ ([\d.]+) down packets/s per player")
WIRE_FIGURE = re.compile(r"([\w.+-]+) ([\d.]+) B/call, ([\d.]+) kbit/s")
FLEET_LINE = re.compile(r"(\S+): ([\d.]+) B/call over the fleet; traces ([\d.]+) \((\S+)\) to ([\d.]+) \((\S+)\), "
                        r"spread (\d+) %")
LEFT_OUT = re.compile(r"(failures|mismatches) \(all ([\d,]+)\)")


def run_case(name: str, out: Path) -> str:
    """Run case ``name`` into folder ``out``; its terminal text, 100 columns wide (from the repository root, so
    paths print alike)."""
    done = subprocess.run([sys.executable, "run_bench.py", *CASES[name], "--out", str(out), "--quiet"],
                          cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, "COLUMNS": "100"})
    if done.returncode != 0:
        raise RuntimeError(f"case {name} exited {done.returncode}: {done.stderr[-2000:]}")
    return done.stdout


def figures(out: Path, terminal: str) -> Dict[str, Any]:
    """The figures of every output of one run: the run's folder ``out`` and what it printed (as JSON holds them)."""
    return json.loads(json.dumps({
        "results.json": json_figures(json.loads((out / "results.json").read_text(encoding="utf-8"))),
        "results.csv": csv_figures((out / "results.csv").read_text(encoding="utf-8")),
        "terminal": text_figures(terminal, list(terminal_tables(terminal))),
        "report.md": text_figures(md := (out / "report.md").read_text(encoding="utf-8"), list(markdown_tables(md))),
        "report.html": html_figures((out / "report.html").read_text(encoding="utf-8")),
    }))


def codec_figures(record: Dict[str, Any]) -> Dict[str, Any]:
    """The bytes, failures, mismatches, floor ratio and wire rows of one codec record of results.json."""
    return {
        **{k: record.get(k) for k in ("calls", "failures", "mismatches", "sizes", "by_method", "by_direction",
                                      "floor_ratio")},
        "problems": sorted([p["kind"], p["feature"], p["declared"], p["count"]] for p in record.get("problems", [])),
        "wire": [{k: row.get(k) for k in WIRE_FIELDS} for row in record.get("wire") or []],
    }


def json_figures(doc: Dict[str, Any]) -> Dict[str, Any]:
    """results.json's figures: the trace's counts and floor, each codec's figures, and each trace's in a fleet."""
    trace = doc["trace"]
    return {
        "trace": {**{k: trace.get(k) for k in ("calls", "measured_calls", "methods", "directions", "connections")},
                  "floor_bytes_per_call": (trace.get("floor") or {}).get("bytes_per_call")},
        "codecs": {r["codec"]: codec_figures(r) for r in doc["results"]},
        "traces": {t["trace"]["path"]: {r["codec"]: codec_figures(r) for r in t["results"]}
                   for t in doc.get("traces") or []},
    }


def csv_figures(text: str) -> Dict[str, Any]:
    """results.csv's figure columns, one entry per codec, trace and wire policy."""
    rows = csv.DictReader(text.splitlines())
    return {f"{r['codec']} | {r['trace']} | {r['wire']}": {c: r.get(c) for c in CSV_COLUMNS} for r in rows}


def qualified(header: Sequence[str]) -> List[str]:
    """Column names with a sub-column named after its parent: ['bytes mean', 'p99'] -> [.., 'bytes mean|p99']."""
    names: List[str] = []
    parent = ""
    for cell in header:
        if cell in SUB_COLUMNS and parent:
            names.append(f"{parent}|{cell}")
        else:
            parent = cell
            names.append(cell)
    return names


def table_figures(header: Sequence[str], rows: Sequence[Sequence[str]]) -> Dict[str, Any] | None:
    """The figure columns of one table, by row key (codec, policy, method); None for a table holding none."""
    names = qualified(header)
    keys = [i for i, n in enumerate(names) if n in KEY_COLUMNS]
    kept = [i for i, n in enumerate(names) if n in FIGURE_COLUMNS]
    if not keys or not kept:
        return None
    return {
        "columns": [names[i] for i in kept],
        "rows": {" | ".join(row[i] for i in keys): {names[i]: row[i] for i in kept if i < len(row)} for row in rows},
    }


def terminal_tables(text: str) -> Iterator[Dict[str, Any]]:
    """Figures of each aligned table the terminal printed: a header line, a line of dashes, rows to a blank line."""
    lines = text.splitlines()
    for at in range(1, len(lines)):
        if not re.fullmatch(r"-+( +-+)+", lines[at]):
            continue
        spans = [m.span() for m in re.finditer(r"-+", lines[at])]
        rows = []
        for line in [lines[at - 1], *lines[at + 1:]]:
            if not line.strip():
                break
            rows.append([line[a:b].strip() for a, b in spans])
        found = table_figures(rows[0], rows[1:])
        if found:
            yield found


def markdown_tables(text: str) -> Iterator[Dict[str, Any]]:
    """Figures of each pipe table of report.md."""
    for block in re.findall(r"(?:^\|.*\|\n)+", text, re.M):
        cells = [[c.strip().replace("\\", "") for c in line.strip()[1:-1].split(" | ")] for line in block.splitlines()]
        found = table_figures(cells[0], cells[2:])
        if found:
            yield found


def text_figures(text: str, tables: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Figures of a page of text: its tables, the floor, the wire summary and the fleet lines, as printed."""
    flat = " ".join(text.split())
    return {
        "tables": tables,
        "floor B/call": FLOOR_SENTENCE.findall(flat),
        "left out": LEFT_OUT.findall(flat),
        "wire": [wire_summary(flat, m) for m in POLICY_LINE.finditer(flat)],
        "fleet": FLEET_LINE.findall(flat),
    }


def wire_summary(flat: str, policy: re.Match) -> Dict[str, Any]:
    """One policy's line of the terminal's "on the wire": packets/s up and down, and B/call and kbit/s per codec."""
    rest = flat[policy.end():]
    following = POLICY_LINE.search(rest)
    rest = rest[:following.start()] if following else rest.split(" server tick ")[0]
    return {"policy": policy[1], "packets/s": [policy[2], policy[3]], "codecs": WIRE_FIGURE.findall(rest)}


class _Tables(HTMLParser):
    """Cells of every <table> of a page (whitespace folded), and its whole text."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: List[List[List[str]]] = []
        self.text: List[str] = []
        self._cell: List[str] | None = None

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th") and self.tables and self.tables[-1]:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def html_figures(page: str) -> Dict[str, Any]:
    """Figures of report.html: its tables' figure columns and the sentences text_figures reads."""
    parsed = _Tables()
    parsed.feed(page)
    tables = [table_figures(t[0], t[1:]) for t in parsed.tables if t]
    return text_figures(" ".join(parsed.text), [t for t in tables if t])


def number(printed: Any) -> float | None:
    """A printed or stored figure as a float ("7.41x", "1,375", 7.41), or None when it is not one ("-")."""
    try:
        return float(str(printed).rstrip("x").replace(",", ""))
    except ValueError:
        return None


def floor_close(expected: Any, actual: Any) -> bool:
    """Whether a floor figure is within FLOOR_TOLERANCE of the golden one, plus half its last printed digit."""
    want, got = number(expected), number(actual)
    if want is None or got is None:
        return expected == actual
    decimals = len(str(expected).rstrip("x").partition(".")[2]) if isinstance(expected, str) else 0
    return abs(got - want) <= FLOOR_TOLERANCE * abs(want) + (0.5 * 10 ** -decimals if decimals else 0.0)


def differences(expected: Any, actual: Any, where: str = "", field: str = "") -> List[str]:
    """Where ``actual`` departs from ``expected`` (floor figures within tolerance), one line each."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        lines = [f"{where}: {k!r} missing" for k in expected if k not in actual]
        lines += [f"{where}: {k!r} new" for k in actual if k not in expected]
        for k in expected.keys() & actual.keys():
            lines += differences(expected[k], actual[k], f"{where}/{k}", k if k in FLOOR_FIELDS else field)
        return lines
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [line for i, (e, a) in enumerate(zip(expected, actual))
                for line in differences(e, a, f"{where}[{i}]", field)]
    if field in FLOOR_FIELDS and not isinstance(expected, (dict, list)):
        return [] if floor_close(expected, actual) else [f"{where}: floor {actual!r}, golden {expected!r}"]
    return [] if expected == actual else [f"{where}: {actual!r}, golden {expected!r}"]


def golden_path(name: str) -> Path:
    """The file holding case ``name``'s figures."""
    return GOLDEN / f"{name}.json"


def compact_json(value: Any) -> str:
    """``value`` as indented JSON with each innermost list or object on one line: short, and diffs stay readable."""
    text = json.dumps(value, indent=1, ensure_ascii=False)
    return re.sub(r"[\[{][^\[\]{}]*[\]}]", lambda m: re.sub(r"\n *", " ", m[0]), text) + "\n"


def regenerate(names: Sequence[str]) -> None:
    """Run the cases ``names`` and write their figures to tests/data/golden/."""
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name in names:
        with tempfile.TemporaryDirectory() as folder:
            found = figures(Path(folder) / "run", run_case(name, Path(folder) / "run"))
        text = compact_json({"args": CASES[name], "figures": found})
        assert json.loads(text) == {"args": CASES[name], "figures": found}
        golden_path(name).write_text(text, encoding="utf-8")
        print(f"{golden_path(name).relative_to(REPO)}: written")


if __name__ == "__main__":
    regenerate(sys.argv[1:] or list(CASES))
