"""A long mutation-fuzzing campaign over everything rpcbench reads: traces and results.json.

Starts from intact files (a binary trace, its gzip form and its JSON Lines form, holding
legal but unusual calls: deep nesting, odd dict keys, huge ints, lone surrogates, NaN,
shared values; and a real results.json from a small run), then feeds mutated copies
(truncation, bit flips, overwritten bytes, damaged length fields, spliced records,
tampered JSON fields) to the real readers (``open_trace``, with and without salvage;
``results.load`` plus the table and HTML report). Each input must be read or refused with
a clean one-line error, within a time limit.

Prints: inputs tried (by kind), outcomes, crashes (must be 0; each saved with its
traceback), hangs (over ``--hang`` seconds), and the slowest input relative to its
size-proportional cost: its time over (its size x the per-byte cost of the intact file
of its kind, with a 4 KB floor for fixed costs).

Usage: python bench/fuzz.py [--inputs 100000] [--seed 1] [--hang 10] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Dict, List, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

import mutations as M  # noqa: E402
from rpc_capture import keys as K  # noqa: E402

KINDS = {"binary": 40, "gzip": 15, "jsonl": 25, "results": 20}  #: share of the inputs, percent
FLOOR = 4096  #: bytes: below this, an input's cost is its reader's fixed cost


class Hang(Exception):
    """Raised by the alarm when one input runs past the hang limit."""


def _alarm(*_: object) -> None:
    raise Hang()


def make_results(folder: str) -> str:
    """A real results.json from a small run of the benchmark on the bundled sample."""
    out = os.path.join(folder, "run")
    subprocess.run([sys.executable, str(REPO / "run_bench.py"), "--codecs", "json,bson,json+zlib-1", "--sample", "100",
                    "--repeat", "3", "--min-time", "0.001", "--processes", "0", "--no-report", "--quiet",
                    "--out", out], check=True, capture_output=True, timeout=600)
    return os.path.join(out, "results.json")


def timed(kind: str, path: str, out_dir: str, salvage: bool, hang: float) -> Tuple[str, float, str]:
    """``(outcome, seconds, traceback)`` of one input: ok, refused, crash or hang."""
    signal.setitimer(signal.ITIMER_REAL, hang)
    started = time.perf_counter()
    trace = ""
    try:
        outcome = M.check(kind, path, out_dir, salvage)
    except Hang:
        outcome, trace = "hang", traceback.format_exc()
    except Exception:  # noqa: BLE001 - a crash is what this campaign looks for
        outcome, trace = "crash", traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return outcome, time.perf_counter() - started, trace


def per_byte_costs(seeds: Dict[str, bytes], folder: str, out_dir: str) -> Dict[str, float]:
    """Seconds per byte of reading each intact seed (median of 5 reads), by the safe decoder:
    what a mutated record costs (a changed record's tag no longer verifies), not the fast path."""
    saved = dict(K._cache)
    K._cache["read"] = None  # no key: every record by the safe decoder
    try:
        return _costs(seeds, folder, out_dir)
    finally:
        K._cache.clear()
        K._cache.update(saved)


def _costs(seeds: Dict[str, bytes], folder: str, out_dir: str) -> Dict[str, float]:
    costs = {}
    for kind, data in seeds.items():
        path = os.path.join(folder, f"intact-{kind}")
        Path(path).write_bytes(data)
        times = [timed(kind, path, out_dir, False, 60)[1] for _ in range(5)]
        assert timed(kind, path, out_dir, False, 60)[0] == "ok", f"the intact {kind} seed does not read"
        costs[kind] = statistics.median(times) / max(len(data), FLOOR)
    return costs


def campaign(args: argparse.Namespace, folder: str) -> None:
    out_dir = os.path.join(folder, "report")
    os.makedirs(out_dir)
    seeds = M.seed_files(folder, M.hostile_calls(), make_results(folder))
    costs = per_byte_costs(seeds, folder, out_dir)
    rng = random.Random(args.seed)
    kinds = args.kinds
    weights = [KINDS[k] for k in kinds]
    tried: "collections.Counter[str]" = collections.Counter()
    outcomes: "collections.Counter[Tuple[str, str]]" = collections.Counter()
    crashes: List[str] = []
    slowest = (0.0, "", 0, 0.0)
    started = time.perf_counter()
    signal.signal(signal.SIGALRM, _alarm)
    for i in range(args.inputs):
        kind = rng.choices(kinds, weights)[0]
        data = M.mutate(kind, seeds[kind], rng)
        path = os.path.join(folder, f"input-{kind}")
        Path(path).write_bytes(data)
        salvage = kind != "results" and rng.random() < 0.3
        outcome, seconds, trace = timed(kind, path, out_dir, salvage, args.hang)
        tried[kind] += 1
        outcomes[(kind, outcome)] += 1
        ratio = seconds / (max(len(data), FLOOR) * costs[kind])
        if ratio > slowest[0]:
            slowest = (ratio, kind, len(data), seconds)
        if outcome in ("crash", "hang"):
            crashes.append(_keep(args.keep, i, kind, data, salvage, trace))
        if args.progress and (i + 1) % args.progress == 0:
            print(f"  {i + 1:,} inputs, {time.perf_counter() - started:,.0f} s, crashes+hangs {len(crashes)}",
                  file=sys.stderr)
    report(args, tried, outcomes, crashes, slowest, costs, time.perf_counter() - started)


def _keep(folder: str, i: int, kind: str, data: bytes, salvage: bool, trace: str) -> str:
    """Save a crashing input and its traceback for a rerun; returns a one-line description."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{i:07d}-{kind}{'-salvage' if salvage else ''}")
    Path(path).write_bytes(data)
    Path(path + ".txt").write_text(trace)
    return f"{path}: {trace.strip().splitlines()[-1]}"


def report(args: argparse.Namespace, tried: "collections.Counter[str]",
           outcomes: "collections.Counter[Tuple[str, str]]", crashes: List[str],
           slowest: tuple, costs: Dict[str, float], seconds: float) -> None:
    total = sum(tried.values())
    print(f"fuzz campaign: seed {args.seed}, {total:,} mutated inputs in {seconds:,.0f} s "
          f"({total / seconds:,.0f}/s), hang limit {args.hang:g} s")
    print(f"  {'kind':<8} {'inputs':>8} {'read ok':>8} {'refused':>8} {'crashes':>8} {'hangs':>6}  intact cost")
    for kind in args.kinds:
        row = [outcomes[(kind, o)] for o in ("ok", "refused", "crash", "hang")]
        print(f"  {kind:<8} {tried[kind]:>8,} {row[0]:>8,} {row[1]:>8,} {row[2]:>8,} {row[3]:>6,}  "
              f"{costs[kind] * 1e9:,.0f} ns/byte")
    n_crash = sum(v for (_, o), v in outcomes.items() if o == "crash")
    n_hang = sum(v for (_, o), v in outcomes.items() if o == "hang")
    print(f"crashes (tracebacks): {n_crash}   hangs (> {args.hang:g} s): {n_hang}")
    ratio, kind, size, secs = slowest
    print(f"slowest input relative to its size-proportional cost: {ratio:.1f}x ({kind}, {size:,} bytes, "
          f"{secs * 1000:.1f} ms; target < 100x)")
    for line in crashes[:20]:
        print(f"  {line}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inputs", type=int, default=100_000, help="mutated inputs to try (default: 100,000)")
    p.add_argument("--seed", type=int, default=1, help="seed of the mutations (default: 1)")
    p.add_argument("--kinds", type=lambda text: text.split(","), default=list(KINDS),
                   help=f"comma-separated kinds of input to mutate (default: all, {','.join(KINDS)})")
    p.add_argument("--hang", type=float, default=10.0, help="seconds after which one input counts as a hang")
    p.add_argument("--keep", default=str(REPO / "results" / "fuzz-crashes"), help="where crashing inputs are saved")
    p.add_argument("--progress", type=int, default=10_000, help="a progress line every N inputs (0: none)")
    args = p.parse_args()
    logging.getLogger("rpc_capture").setLevel(logging.ERROR)  # cut-off tails and salvages warn: thousands here
    with tempfile.TemporaryDirectory() as folder:
        campaign(args, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
