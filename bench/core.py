"""The measurement core against its references: every ratio of issue 28 side by side in one run.

    python bench/core.py [--rounds 3] [--run-rounds 2] [--sections read,runs,pass,dask,memory] [--cache DIR]
                         [--read-calls 30000] [--run-calls 30000[,150000,...]] [--pass-calls 20000]
                         [--fleet-traces 4] [--fleet-calls 20500[,75000]] [--memory-calls 100000]
    python bench/core.py --full       # the issue's sizes: 300,000 / 150,000 and 300,000 / 300,000 / 4 x 20,500
                                      # and 4 x 75,000 / 1,000,000 calls

Each ratio is measured against its reference in the same run, the two taking turns round by
round (``_common.side_by_side``), and compares their medians, so that a shared machine's drift
hits both alike; "round by round" gives the lowest and highest of the rounds' own ratios. Only
public entry points are used (``run_bench.py``, ``rpc_capture.open_trace``, ``write_jsonl``,
``TraceWriter``, the codec registry), so the same script measures the core before and after it
is rebuilt. Sections:

1. read: ``open_trace`` calls/s against ``marshal.loads`` of the same calls stored in batches of
   128, on the dict profile and on another shape (the real Minecraft calls of tests/data,
   repeated to the same count); a JSON Lines copy of the dict trace against ``json.loads`` per line.
2. runs: a default run (``--no-report``) with and without ``--no-floor`` on the dict profile, at each
   of ``--run-calls``: the floor's share of the run (and the floor it took: exact, or estimated beyond
   its budget with its interval), and the run over the codecs' own work (each codec's encode + decode
   median µs x its measured calls, divided by the cores used, from the same run's results.json).
   The timing phase costs about the same whatever the trace's length, so on the default 30,000
   calls this ratio reads higher than on the issue's 150,000 (``--full``).
3. pass: the size pass (``--sizes-only --no-floor --jobs 0``, its ``size_pass_s``) against a bare
   loop that reads the same trace with ``open_trace`` and encodes, decodes and compares each call
   with the registry's codec (msgpack and json; the dict profile and the bundled sample), per
   call. Each side runs in a fresh interpreter every round (the bare loop's as ``core.py --bare
   TRACE CODEC``): one loop's speed differs from process to process. The bare loop's process then
   times the check ``==`` cannot make, alone (``fidelity.identical`` of each batch as sent and as
   given back, ``exact_check``: one walk in C, rpcbench/_exact.c, where it was built): the size pass
   makes it, the bare loop does not, and the line under each ratio shows the pass without it.
4. dask: ``--dask local:2`` against the forks executor (``--jobs 2``), ``--sizes-only`` on a
   simulated fleet (``_common.make_fleet``, shared with fleet.py) at each of ``--fleet-calls``: wall time, the
   CPU seconds of each run's processes, and identical figures. Dask's own cost is mostly fixed (its import,
   the cluster's start, a few ms per task handed over): it weighs more on a small fleet than on one of the
   issue's 300,000 calls (4 x 75,000, ``--full``).
5. memory: a default run's peak memory (``scale.run_one``: largest process's max RSS, tree PSS) on a
   simulated trace (``scale.trace_for``, shared with scale.py), and whether its progress lines
   show calls/s and the time left.

Traces are simulated on first use and cached in ``--cache`` (default /tmp/rpcbench-core/).
"""

from __future__ import annotations

import argparse
import itertools
import json
import marshal
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

import _common
import scale
import trace_read
from rpc_capture import TraceWriter, open_trace, write_jsonl
from rpc_capture.trace import VERSION as TRACE_VERSION
from rpcbench import fidelity
from rpcbench.registry import Registry

MINECRAFT = _common.REPO / "tests" / "data" / "minecraft_packets.jsonl"
SECTIONS = ("read", "runs", "pass", "dask", "memory")
FULL = {"read_calls": 300_000, "run_calls": [150_000, 300_000], "run_rounds": 3, "pass_calls": 300_000,
        "fleet_calls": [20_500, 75_000], "memory_calls": 1_000_000}
FLEET_CODECS = "json,msgpack,json+zlib-1,json+zlibstream-1"
Row = List[str]  # one line of the summary: ratio, measured, reference, value, round by round, target
HEADERS = ["ratio", "measured", "reference", "value", "round by round", "target"]


def timed(func: Callable[[Any], int], arg: Any) -> Tuple[float, int]:
    """(seconds, what ``func(arg)`` returned): one side of a round for ``side_by_side``."""
    started = time.perf_counter_ns()
    n = func(arg)
    return (time.perf_counter_ns() - started) / 1e9, n


def cli_run(args: Sequence[str]) -> Tuple[float, Dict[str, Any]]:
    """(wall seconds, results.json) of one ``run_bench.py ARGS --no-report --quiet`` in a fresh folder."""
    with tempfile.TemporaryDirectory() as folder:
        _, wall = _common.run_bench([*args, "--no-report", "--quiet"], str(Path(folder) / "run"))
        return wall, json.loads((Path(folder) / "run" / "results.json").read_text(encoding="utf-8"))


def ratio_row(name: str, got: Dict[str, Dict[str, Any]], measured: str, reference: str, target: str,
              per: Tuple[float, float] = (1.0, 1.0)) -> Row:
    """A summary line: the median of ``measured`` over that of ``reference`` (each divided by its ``per``), and
    the lowest and highest of the rounds' own ratios."""
    a, b = got[measured]["wall"] / per[0], got[reference]["wall"] / per[1]
    rounds = [m / r * per[1] / per[0] for m, r in zip(got[measured]["walls"], got[reference]["walls"])]
    return [name, f"{measured} {a:.3g}", f"{reference} {b:.3g}", f"{a / b:.2f}x", spread(rounds, "{:.2f}x"), target]


def spread(values: Sequence[float], form: str) -> str:
    """The lowest and highest of the rounds' figures, ``form`` formatting each: how far one round can be off."""
    return f"{form.format(min(values))} - {form.format(max(values))}"


# 1. reading

def marshal_batches(calls: Sequence[Any]) -> List[bytes]:
    """The calls as ``marshal`` stores them, 128 to a batch: the reference reader's input."""
    rows = [tuple(call) for call in calls]
    return [marshal.dumps(rows[i:i + 128]) for i in range(0, len(rows), 128)]


def load_batches(batches: Sequence[bytes]) -> int:
    """``marshal.loads`` of every batch; the calls read."""
    return sum(len(marshal.loads(batch)) for batch in batches)


def json_lines(path: str) -> int:
    """``json.loads`` of every line of a JSON Lines file; the lines read."""
    with open(path, "rb") as lines:
        return sum(1 for line in lines if json.loads(line) is not None)


def minecraft_trace(calls: int, cache: Path) -> str:
    """The Minecraft calls of tests/data repeated (later times) to ``calls`` calls, as a binary trace."""
    path = cache / f"minecraft-{calls}-v{TRACE_VERSION}.rpct"  # a trace cached by an older writer reads otherwise
    if not path.exists():
        source = list(open_trace(str(MINECRAFT)))
        span = source[-1].t - source[0].t + 1_000_000
        part = cache / "minecraft.part.rpct"
        with TraceWriter(str(part)) as writer:
            for i in range(calls):
                call = source[i % len(source)]
                writer.write(call._replace(t=call.t + (i // len(source)) * span))
        part.rename(path)
    return str(path)


def read_through(path: str) -> int:
    """Every call of the trace through ``open_trace``, driven as trace_read.py drives it (a C consumer)."""
    return trace_read.count(open_trace(path))


def read_ratio(name: str, path: str, reference: str, read: Callable[[], Tuple[float, int]], rounds: int) -> Row:
    """open_trace against ``read`` (the reference) over the same calls: calls/s of each, their ratio."""
    calls = sum(1 for _ in open_trace(path))
    print(f"read, {name}: {calls:,} calls", flush=True)
    got = _common.side_by_side({"open_trace": lambda: timed(read_through, path), reference: read}, rounds)
    ours, theirs = calls / got["open_trace"]["wall"], calls / got[reference]["wall"]
    rounds = [r / o for o, r in zip(got["open_trace"]["walls"], got[reference]["walls"])]
    return [f"read {name} (calls/s)", f"open_trace {ours:,.0f}", f"{reference} {theirs:,.0f}", f"{ours / theirs:.2f}x",
            spread(rounds, "{:.2f}x"), ">= 0.50x" if reference.startswith("marshal") else "about 1x"]


def read_section(args: argparse.Namespace) -> List[Row]:
    """Section 1: binary reading against marshal on two shapes, JSON Lines reading against json.loads."""
    dict_trace = str(scale.trace_for(args.read_calls, args.cache, 1, "dict"))
    jsonl = args.cache / f"dict-{args.read_calls}.jsonl"
    if not jsonl.exists():
        write_jsonl(open_trace(dict_trace), str(jsonl))
    rows = []
    for name, path in (("dict", dict_trace), ("minecraft", minecraft_trace(args.read_calls, args.cache))):
        batches = marshal_batches(list(open_trace(path)))
        rows.append(read_ratio(name, path, "marshal x128", lambda b=batches: timed(load_batches, b), args.rounds))
    return rows + [read_ratio("dict JSON Lines", str(jsonl), "json.loads", lambda: timed(json_lines, str(jsonl)),
                              args.rounds)]


# 2. default runs

def own_work_s(doc: Dict[str, Any]) -> float:
    """The codecs' own encode + decode seconds in a run (median µs x measured calls), divided by the cores used."""
    cores = max(1, min(doc["settings"].get("jobs") or 1, os.cpu_count() or 1))
    us = sum((r["encode"]["median_us"] + r["decode"]["median_us"]) * r["calls"]
             for r in doc["results"] if r.get("encode") and r.get("decode"))
    return us / 1e6 / cores


def runs_section(args: argparse.Namespace) -> List[Row]:
    """Section 2: the floor's share of a default run, and a default run over the codecs' own work, at each of
    ``--run-calls``."""
    return [row for calls in args.run_calls for row in default_runs(calls, args)]


def default_runs(calls: int, args: argparse.Namespace) -> List[Row]:
    """Section 2 on a dict-profile trace of ``calls`` calls: a default run and one with --no-floor in turns."""
    trace = str(scale.trace_for(calls, args.cache, 1, "dict"))
    print(f"default runs: {trace}", flush=True)
    cpu: Dict[str, List[float]] = {"default run": [], "--no-floor": []}

    def run_of(name: str, extra: List[str]) -> Callable[[], Tuple[float, Dict[str, Any]]]:
        def one() -> Tuple[float, Dict[str, Any]]:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall, doc = cli_run(["--trace", trace, *extra])
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            return wall, doc
        return one

    got = _common.side_by_side({"default run": run_of("default run", []),
                                "--no-floor": run_of("--no-floor", ["--no-floor"])}, args.run_rounds)
    run, no_floor = got["default run"]["wall"], got["--no-floor"]["wall"]
    run_cpu, no_floor_cpu = statistics.median(cpu["default run"]), statistics.median(cpu["--no-floor"])
    own = own_work_s(got["default run"]["figures"])
    floor = got["default run"]["figures"]["trace"]["floor"]
    how = (f"estimated ± {floor['ci_half_width']:.2f} B/call, {floor['compressed_share']:.0%} compressed"
           if floor.get("estimated") else "exact")
    runs, no_floors = got["default run"]["walls"], got["--no-floor"]["walls"]
    return [[f"floor's share of a default run, {calls:,} calls", f"default {run:.1f} s",
             f"--no-floor {no_floor:.1f} s", f"{1 - no_floor / run:.1%}",
             spread([1 - n / r for r, n in zip(runs, no_floors)], "{:.1%}"), "<= 10 %"],
            ["  the same in CPU s of the run's processes", f"default {run_cpu:.1f}", f"--no-floor {no_floor_cpu:.1f}",
             f"{1 - no_floor_cpu / run_cpu:.1%}",
             spread([1 - n / r for r, n in zip(cpu["default run"], cpu["--no-floor"])], "{:.1%}"), ""],
            [f"  its floor: {floor['bytes_per_call']:.2f} B/call, {how}, {floor['seconds']:.1f} s", "", "", "", "", ""],
            [f"default run / codecs' own work, {calls:,} calls", f"default {run:.1f} s", f"own work {own:.1f} s",
             f"{run / own:.2f}x", spread([r / own for r in runs], "{:.2f}x"), "<= 1.75x"]]


# 3. the size pass

def bare_pass(path: str, codec: Any) -> int:
    """Read the trace and encode, decode and compare each call with ``codec``; the calls done."""
    encode, decode = codec.encode, codec.decode
    done = same = 0
    for call in open_trace(path):
        if decode(encode(call)) == (call.method, call.args):
            same += 1
        done += 1
    return done


def exact_check(path: str, codec: Any, limit: int = 60_000) -> Tuple[float, int]:
    """(seconds, calls) of the check ``==`` cannot make, alone: ``fidelity.identical`` of each batch of 128 calls as
    sent and as ``codec`` gives them back (one walk of both in C where rpcbench._exact was built, else a pickle of
    each side), over the first ``limit`` calls of the trace. The size pass makes it because ``==`` takes ``1``,
    ``1.0`` and ``True`` (and bytes and bytearray) for the same value."""
    calls = list(itertools.islice(open_trace(path), limit))
    batches = [(calls[i:i + 128], [codec.decode(codec.encode(c)) for c in calls[i:i + 128]])
               for i in range(0, len(calls), 128)]
    batches = [([(c.method, c.args) for c in sent], back) for sent, back in batches]
    identical = fidelity.identical
    started = time.perf_counter_ns()
    _ = [identical(sent, back) for sent, back in batches]  # (a batch not identical is then compared call by call)
    return (time.perf_counter_ns() - started) / 1e9, len(calls)


def bare_child(trace: str, codec_id: str) -> Dict[str, float]:
    """The bare loop and the exact check in this process (``core.py --bare TRACE CODEC``, the child of
    :func:`bare_in_child`): their seconds and calls."""
    codec = Registry.default().create(codec_id)
    bare_s, calls = timed(lambda p: bare_pass(p, codec), trace)
    check_s, checked = exact_check(trace, codec)
    return {"bare_s": bare_s, "calls": calls, "check_s": check_s, "checked": checked}


def bare_in_child(trace: str, codec_id: str) -> Dict[str, float]:
    """:func:`bare_child` in a fresh interpreter, as the size pass it is compared with runs in one. The same loop's
    speed differs from process to process and a process keeps its own: over 300,000 dict calls, 0.78-0.94 s in 14
    fresh processes, and 0.96-1.00 s in all three rounds of one bench process. Measured in the bench's process,
    the reference was one draw for every round."""
    out = subprocess.run([sys.executable, __file__, "--bare", trace, codec_id], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.splitlines()[-1])


def pass_ratio(name: str, trace: str, codec_id: str, rounds: int) -> List[Row]:
    """The in-process size pass of one codec against the bare loop, per call, each in a fresh interpreter every
    round; and the exact check's own cost, which the bare loop's ``==`` does not pay."""
    print(f"size pass, {name}, {codec_id}: {trace}", flush=True)

    def size_pass() -> Tuple[float, Dict[str, Any]]:
        _, doc = cli_run(["--trace", trace, "--codecs", codec_id, "--sizes-only", "--no-floor", "--jobs", "0"])
        return doc["settings"]["size_pass_s"], doc
    checks: List[float] = []

    def bare() -> Tuple[float, Dict[str, float]]:
        child = bare_in_child(trace, codec_id)
        checks.append(child["check_s"] / child["checked"])
        return child["bare_s"], child
    got = _common.side_by_side({"size pass": size_pass, "bare loop": bare}, rounds)
    measured, calls = got["size pass"]["figures"]["trace"]["measured_calls"], got["bare loop"]["figures"]["calls"]
    row = ratio_row(f"size pass {name} {codec_id} (µs/call)", got, "size pass", "bare loop", "<= 1.3x",
                    (measured / 1e6, calls / 1e6))
    pass_us, bare_us = (got[side]["wall"] / n * 1e6 for side, n in (("size pass", measured), ("bare loop", calls)))
    check_us = statistics.median(checks) * 1e6
    without = [(p / measured - c) / (b / calls) for p, b, c in zip(got["size pass"]["walls"], got["bare loop"]["walls"],
                                                                 checks)]
    return [row, [f"  of which the exact check ({check_us / pass_us:.0%}); without it", f"{pass_us - check_us:.3g}",
                  f"bare loop {bare_us:.3g}", f"{(pass_us - check_us) / bare_us:.2f}x", spread(without, "{:.2f}x"), ""]]


def pass_section(args: argparse.Namespace) -> List[Row]:
    """Section 3: the size pass against a bare loop, msgpack and json, dict profile and bundled sample."""
    traces = {"dict": str(scale.trace_for(args.pass_calls, args.cache, 1, "dict")), "sample": _common.BUNDLED_TRACE}
    return [row for name, trace in traces.items() for codec in ("msgpack", "json")
            for row in pass_ratio(name, trace, codec, args.rounds)]


# 4. Dask against the forks executor

def fleet_figures(doc: Dict[str, Any]) -> List[Any]:
    """What must be identical whichever executor ran: each codec's bytes, failures and mismatches."""
    return [(r["codec"], r["sizes"], r["failures"], r["mismatches"]) for r in doc["results"]]


def fleet_run(args: Sequence[str], cpu: List[float]) -> Tuple[float, List[Any]]:
    """(wall seconds, fleet_figures) of one run; the CPU seconds of its processes appended to ``cpu``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, doc = cli_run(args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall, fleet_figures(doc)


def dask_section(args: argparse.Namespace) -> List[Row]:
    """Section 4: --dask local:2 against --jobs 2, whole --sizes-only runs of a fleet of each size: wall time, and
    the CPU seconds of the run's processes (the work each side does, which a loaded machine's waits do not blur)."""
    return [row for calls in args.fleet_calls for row in dask_ratio(args, calls)]


def dask_ratio(args: argparse.Namespace, calls: int) -> List[Row]:
    """--dask local:2 against --jobs 2 on a fleet of ``--fleet-traces`` traces of ``calls`` calls."""
    fleet = _common.make_fleet(Path(args.fleet_cache) / f"{args.fleet_traces}x{calls}", args.fleet_traces, calls)
    common = ["--trace", *fleet, "--sizes-only", "--codecs", FLEET_CODECS]
    print(f"dask: {len(fleet)} traces of {calls:,} calls, codecs {FLEET_CODECS}", flush=True)
    cpu: Dict[str, List[float]] = {"forks": [], "dask": []}
    got = _common.side_by_side({"forks": lambda: fleet_run([*common, "--jobs", "2"], cpu["forks"]),
                                "dask": lambda: fleet_run([*common, "--dask", "local:2"], cpu["dask"])}, args.rounds)
    same = "identical" if got["dask"]["figures"] == got["forks"]["figures"] else "FIGURES DIFFER"
    work = {side: {"wall": statistics.median(seconds), "walls": seconds} for side, seconds in cpu.items()}
    size = f"{len(fleet)} x {calls:,}"
    return [ratio_row(f"--dask local:2 / forks (s), {size}, {same}", got, "dask", "forks", "<= 1.10x"),
            ratio_row(f"--dask local:2 / forks, CPU s of the run's processes, {size}", work, "dask", "forks", "")]


# 5. memory and progress of a long run

def memory_section(args: argparse.Namespace) -> List[Row]:
    """Section 5: a default run's peak memory, and what its progress lines show."""
    trace = scale.trace_for(args.memory_calls, Path(args.memory_cache), 7)
    print(f"memory: a default run of {trace}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        got = scale.run_one(trace, _common.DEFAULT_IDS, [], str(Path(folder) / "run"))
    lines = [line for line in got["progress"] if line.startswith("size pass")]
    rate = any("calls/s" in line for line in lines)
    left = any(" ETA " in line or " left" in line for line in lines)
    print("  progress lines of the size pass, last two:", *lines[-2:], sep="\n    ")
    return [[f"peak memory, {args.memory_calls:,} calls (MB)", f"max RSS {got['max_rss_mb']:.0f}",
             f"tree PSS {got['pss_mb']:.0f}", f"{max(got['max_rss_mb'], got['pss_mb']):.0f} MB", "one run",
             "<= 500 MB at 1,000,000"],
            ["progress line: calls/s, time left", f"wall {got['wall']:.0f} s", "", f"{'yes' if rate else 'no'}, "
             f"{'yes' if left else 'no'}", "one run", "yes, yes"]]


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds per ratio (default: 3)")
    p.add_argument("--run-rounds", type=int, default=2, help="rounds of the default runs, the longest (default: 2)")
    p.add_argument("--sections", default=",".join(SECTIONS), help="which, of %(default)s")
    p.add_argument("--read-calls", type=int, default=30_000)
    p.add_argument("--run-calls", type=lambda text: [int(n) for n in text.split(",")], default=[30_000],
                   help="calls of the default runs' traces, one or more (default: 30000; --full: 150000,300000)")
    p.add_argument("--pass-calls", type=int, default=20_000)
    p.add_argument("--fleet-traces", type=int, default=4)
    p.add_argument("--fleet-calls", type=lambda text: [int(n) for n in text.split(",")], default=[20_500],
                   help="calls per trace of the fleet, one or more (default: 20500; --full: 20500,75000): fewer weigh "
                   "Dask's fixed cost more (10,000: 1.21x where 20,500 gave 1.02x, same load)")
    p.add_argument("--memory-calls", type=int, default=100_000)
    p.add_argument("--full", action="store_true", help=f"the issue's sizes: {FULL}")
    p.add_argument("--cache", type=Path, default=Path("/tmp/rpcbench-core"), help="trace cache (default: %(default)s)")
    p.add_argument("--fleet-cache", default="/tmp/rpcbench-fleet", help="fleet.py's cache (default: %(default)s)")
    p.add_argument("--memory-cache", default="/tmp/rpcbench-scale", help="scale.py's cache (default: %(default)s)")
    args = p.parse_args()
    if args.full:
        vars(args).update(FULL)
    args.cache.mkdir(parents=True, exist_ok=True)
    return args


def main() -> None:
    if sys.argv[1:2] == ["--bare"]:  # the child of bare_in_child
        print(json.dumps(bare_child(*sys.argv[2:4])))
        return
    args = parse()
    started = time.perf_counter()
    print(_common.cpu_note(), flush=True)
    run = {"read": read_section, "runs": runs_section, "pass": pass_section, "dask": dask_section,
           "memory": memory_section}
    rows = [row for name in args.sections.split(",") for row in run[name](args)]
    print(f"\nissue 28, medians of {args.rounds} interleaved rounds per ratio ({args.run_rounds} for the default "
          f"runs); {_common.cpu_note()}; "
          f"{time.perf_counter() - started:.0f} s in all")
    print(_common.table(HEADERS, rows))


if __name__ == "__main__":
    main()
