"""Helpers shared by the scripts in ``bench/`` (not a benchmark itself).

* :func:`bare_ns`: the hand-written reference loop (``for m in msgs: enc(m)`` between
  two ``perf_counter_ns`` reads, GC off) that overhead.py and agreement.py hold the
  harness against;
* :func:`run_bench`: one ``run_bench.py`` run in a subprocess, its results loaded;
* :func:`host_states`: timings split into the host's fast and slow state (see there);
* :func:`table`: a plain aligned text table;
* :func:`side_by_side`: sides timed in turn, round by round (fleet.py, core.py);
* :func:`make_fleet`: a cached folder of simulated traces (fleet.py, core.py).
"""

from __future__ import annotations

import gc
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rpc_capture import TraceWriter, open_trace  # noqa: E402
from rpcbench import results  # noqa: E402
from rpcbench.config import DEFAULT_CODECS  # noqa: E402
from rpcbench.results import SLOW_STATE_FACTOR  # noqa: E402

BUNDLED_TRACE = str(REPO / "samples" / "battle.rpct")
DEFAULT_IDS = ",".join(DEFAULT_CODECS)


def first_calls(trace: str, n: int) -> list:
    """The first ``n`` calls of a trace (all of them if it is shorter)."""
    out = []
    for call in open_trace(trace):
        if len(out) >= n:
            break
        out.append(call)
    return out


def write_trace(calls: list, path: str) -> str:
    """Write calls as a binary trace (so the harness and a reference replay the very same calls)."""
    with TraceWriter(path) as w:
        for call in calls:
            w.write(call)
    return path


def bare_ns(codec: Any, items: Sequence[Any], loops: int, op: str) -> int:
    """ns for ``loops`` replays of ``items`` through ``codec.encode``/``decode``: one timer pair, GC off.

    ``items`` are calls (encode) or payloads (decode), as ``TimingJob.calls``/``.payloads``
    hold them. A per-connection (streaming) codec needs fresh state per replay, as the
    harness gives it: the states are built before the timer starts, and each call goes
    to its connection's state through one dict look-up (part of the job: a server does it too).
    """
    timer = time.perf_counter_ns
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        if not codec.per_connection:
            func = codec.encode if op == "encode" else codec.decode
            t0 = timer()
            for _ in range(loops):
                for m in items:
                    func(m)
            return timer() - t0
        conns = list(dict.fromkeys(m.conn for m in items) if op == "encode" else dict.fromkeys(c for c, _ in items))
        states = [{c: getattr(codec.connection(), op) for c in conns} for _ in range(loops)]
        t0 = timer()
        if op == "encode":
            for funcs in states:
                for m in items:
                    funcs[m.conn](m)
        else:
            for funcs in states:
                for c, data in items:
                    funcs[c](data)
        return timer() - t0
    finally:
        if gc_was_on:
            gc.enable()


def run_bench(args: List[str], out: str, capture: bool = True) -> Tuple[Any, float]:
    """Run ``run_bench.py ARGS --out OUT`` (fresh interpreter); returns (Suite, wall seconds)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(REPO / "run_bench.py"), *args, "--out", out], cwd=str(REPO),
                          stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"run_bench.py {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return results.load(out), wall


def host_states(values: Sequence[float], floor: float) -> Tuple[List[float], List[float]]:
    """``values`` split into (fast, slow): fast ones within ``SLOW_STATE_FACTOR`` of ``floor``
    (the harness's own threshold, :data:`rpcbench.results.SLOW_STATE_FACTOR`, which says why).

    ``floor`` is the fastest value of everything being compared (both tools, every run),
    so that all sides are split at the same absolute threshold.
    """
    limit = floor * SLOW_STATE_FACTOR
    return [v for v in values if v <= limit], [v for v in values if v > limit]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned first column, right-aligned others; floats as given (pre-format them)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: List[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

    return "\n".join([line(cells[0]), "  ".join("-" * w for w in widths)] + [line(r) for r in cells[1:]])


def cpu_note() -> str:
    """One line on the machine's state, to read noisy figures by."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
            f"Python {sys.version.split()[0]}")


def make_fleet(folder: Path, traces: int, calls: int) -> List[str]:
    """The fleet's trace files, simulated on first use."""
    folder.mkdir(parents=True, exist_ok=True)
    for seed in range(1, traces + 1):
        path = folder / f"server-{seed:03d}.rpct"
        if not path.exists():
            part = folder / f".part-{seed}.rpct"
            subprocess.run([sys.executable, str(REPO / "run_bench.py"), "simulate", "--calls", str(calls),
                            "--seed", str(seed), "--out", str(part)], check=True, stdout=subprocess.DEVNULL)
            part.rename(path)
    return [str(folder / f"server-{seed:03d}.rpct") for seed in range(1, traces + 1)]


def side_by_side(sides: Dict[str, Callable[[], Tuple[float, Any]]], rounds: int) -> Dict[str, Dict[str, Any]]:
    """Each side once per round, in turn: median wall seconds, every round's (``walls``), the load after it, and
    the figures."""
    walls: Dict[str, List[float]] = {name: [] for name in sides}
    loads: Dict[str, List[float]] = {name: [] for name in sides}
    figures: Dict[str, Any] = {}
    for n in range(rounds):
        for name, run in sides.items():
            wall, figures[name] = run()
            walls[name].append(wall)
            loads[name].append(os.getloadavg()[0])
            print(f"  round {n + 1}: {name}: {wall:.2f} s", flush=True)
    return {name: {"wall": statistics.median(walls[name]), "walls": walls[name], "load": statistics.median(loads[name]),
                   "figures": figures[name]} for name in sides}
