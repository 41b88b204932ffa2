"""``python run_bench.py [options]``: replay a trace through codecs, write results, charts and the report."""

from __future__ import annotations

import argparse
from collections import Counter
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from rpc_capture import TraceWriter, damage_note, open_trace

from . import budget, protobuf, worker
from .budget import Plan
from .cli import seconds, whole_number
from .codec import Codec
from .environment import environment, file_sha256, library_version
from .errors import BenchError
from .isolation import DEFAULT_CODEC_TIMEOUT
from .measure import CodecTally, SizePass
from .registry import Registry
from .results import SCHEMA_VERSION, CodecResult, Suite, Timing
from .timing import TimingJob, run_jobs

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = REPO / "samples" / "battle.rpct"
MEMORY_CALLS = 2000  #: calls of the sample replayed under tracemalloc (it is slow)
STAGE_ROUNDS = 2  #: timed rounds (per process) that also time each stage of multi-stage codecs
MAX_PROCESSES = 1000  #: process sets run one after another: 1000 is already days of timing
MAX_JOBS = 64  #: forked processes sharing the size pass: more only thrash a machine
DEFAULT_CODECS = (
    ["json", "ujson", "orjson", "msgpack", "bson"]
    + [f"json+zlib-{level}" for level in range(1, 10)]
    + ["bson+zlib-6", "msgpack+zlib-1", "json+zstd-3", "json+zlibstream-1"]
    + ["protobuf", "protobuf+zlib-1", "protobuf-struct"]
)


def build_parser() -> argparse.ArgumentParser:
    """The benchmark's options (subcommands are listed in the epilog)."""
    p = argparse.ArgumentParser(
        prog="run_bench.py",
        allow_abbrev=False,
        description="Replay a recorded RPC trace through serialization codecs and measure bytes per call, "
        "encode and decode CPU time per call, and whether each codec gives the same call back.",
        epilog="Subcommands: 'run_bench.py simulate --help' (make a battle trace), 'run_bench.py trace --help' "
        "(inspect, convert, slice traces), 'run_bench.py report --help' (rebuild a report), "
        "'run_bench.py proto --help' (protobuf schemas).",
    )
    p.add_argument("--trace", default=str(DEFAULT_TRACE),
                   help="trace to replay: binary .rpct (gzip or not) or JSON Lines (default: the bundled battle sample)")
    p.add_argument("--salvage", action="store_true",
                   help="skip damaged records of the trace (a warning says how many calls were lost) instead of stopping")
    p.add_argument("--codecs", default=",".join(DEFAULT_CODECS),
                   help="comma-separated codec ids, e.g. json,bson,json+zlib-1 (default: %(default)s)")
    p.add_argument("--out", help="output folder (default: a new folder under results/)")
    p.add_argument("--repeat", type=whole_number(1, 1_000_000), default=40,
                   help="timed rounds per codec in each process set; the median of all is reported (default: 40)")
    p.add_argument("--warmup", type=whole_number(1, 1000), default=1, help="untimed warm-up rounds before them (default: 1)")
    p.add_argument("--min-time", type=seconds(60), default=0.01, metavar="SECONDS",
                   help="shortest timed batch: the sample is replayed as often as needed to last this long "
                   "(default: 0.01; many short interleaved rounds beat a few long ones on machines whose speed drifts)")
    p.add_argument("--sample", type=whole_number(1, 10_000_000), default=1000, metavar="N",
                   help="calls timed: a seeded sample, stratified by method, of the trace (sizes and fidelity always "
                   "cover every call; default: 1000)")
    p.add_argument("--seed", type=int, default=1, help="seed of the timing sample (default: 1)")
    p.add_argument("--processes", type=whole_number(0, MAX_PROCESSES), default=1, metavar="N",
                   help="process sets: each codec is timed in its own fresh process, codecs taking turns round by "
                   "round; N sets run one after another and their rounds are pooled. 0 times every codec in this "
                   "process instead (default: 1)")
    p.add_argument("--jobs", type=whole_number(1, MAX_JOBS), default=min(2, os.cpu_count() or 1), metavar="N",
                   help="processes sharing the size and fidelity pass over the whole trace (default: %(default)s)")
    p.add_argument("--gc", choices=("off", "on"), default="off",
                   help="garbage collector inside timed loops: off (default, as timeit: one codec's garbage is not "
                   "collected on another's clock) or on (as in production)")
    p.add_argument("--budget", type=seconds(30 * 86400), metavar="SECONDS",
                   help="fit the run into this many seconds: the size pass always covers every call, then the timing "
                   "sample, batch length, rounds and processes shrink as needed (see rpcbench/budget.py)")
    p.add_argument("--codec-timeout", type=seconds(86400), default=DEFAULT_CODEC_TIMEOUT, metavar="SECONDS",
                   help="longest one codec may take for one step (the size pass over one call, a warm-up, a timed "
                   "round, the tails): a codec past it is stopped and reported as failed, the others carry on "
                   "(default: %(default)g)")
    p.add_argument("--no-tails", action="store_true", help="skip the per-call latency percentiles pass")
    p.add_argument("--no-memory", action="store_true", help="skip the tracemalloc allocations pass")
    p.add_argument("--codec-path", action="append", default=[], metavar="FILE.py", help="load codec classes from a file (repeatable)")
    p.add_argument("--codecs-dir", action="append", default=[], metavar="DIR", help="load every codec file in a folder (repeatable)")
    p.add_argument("--codec", action="append", default=[], metavar="MODULE:CLASS", help="load an importable codec class (repeatable)")
    p.add_argument("--proto", action="append", default=[], metavar="FILE",
                   help="protobuf schema for the protobuf codec (repeatable; default: every .proto in proto/)")
    p.add_argument("--proto-path", action="append", default=[], metavar="DIR", help="protoc include path (repeatable)")
    p.add_argument("--proto-map", metavar="FILE", help="JSON file mapping methods to messages (docs/protobuf.md)")
    p.add_argument("--proto-enums", choices=protobuf.ENUM_FORMS, default="names",
                   help="decoded protobuf enum values: value names (default) or numbers, as the trace gives them")
    p.add_argument("--list-codecs", action="store_true", help="list the available codecs and compressors, then exit")
    p.add_argument("--no-report", action="store_true", help="write results.json/csv only, no charts or HTML")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def main(argv: List[str]) -> int:
    """Run the benchmark as the options say; returns the exit status."""
    args = build_parser().parse_args(argv)
    registry = setup(args)
    if args.list_codecs:
        print(list_codecs(registry))
        return 0
    codecs = create_codecs(registry, args.codecs)
    out = make_out_dir(args.out, args.trace)
    started = time.perf_counter()
    progress = Progress(enabled=not args.quiet)
    with OutputFolder(out) as folder:
        suite = run(args, argv, codecs, registry, progress)
        progress.done()
        report = write_outputs(suite, folder, args.no_report)
    if suite.partial:
        print(f"run_bench.py: {suite.partial}; partial results in {out / 'results.json'}", file=sys.stderr)
        return 130
    if report:
        print(f"report: {out / report}")
    print(f"results: {out / 'results.json'}, {out / 'results.csv'} ({time.perf_counter() - started:.1f} s)")
    return 0


def write_outputs(suite: Suite, folder: Path, no_report: bool) -> Optional[str]:
    """results.json/csv into ``folder``; for a complete run also the table (printed) and the
    report (unless ``no_report``), whose file name is returned."""
    suite.save(str(folder))
    if suite.partial:
        return None
    from reports.table import format_table

    print(format_table(suite))
    if no_report:
        return None
    from reports import build

    return Path(build(suite, str(folder))).name


def setup(args: argparse.Namespace) -> Registry:
    """Codec sources and schemas from the options: built-ins plus what the options add.

    Worker processes call this with the same options, so they build the same codecs.
    """
    proto = protobuf.Settings(tuple(args.proto), tuple(args.proto_path), args.proto_map, args.proto_enums)
    registry = Registry.default(args.codecs_dir, codec_options={"protobuf": {"settings": proto}})
    for file in args.codec_path:
        registry.load_file(file)
    for spec in args.codec:
        registry.load_class(spec)
    return registry


def list_codecs(registry: Registry) -> str:
    """One line per codec and compressor: id, library, origin, first docstring line."""
    lines = ["codecs:"]
    for cid, cls in sorted(registry.codecs.items()):
        lines.append(f"  {cid:<18} {cls.library or 'stdlib':<10} {_first_line(cls.__doc__)}  [{registry.origin(cid)}]")
    lines.append("compressors (use as <codec>+<name>-<level>):")
    for name, comp in sorted(registry.compressors.items()):
        levels = f"levels {comp.levels.start}-{comp.levels.stop - 1}"
        lines.append(f"  {name:<18} {levels:<10} {_first_line(comp.__doc__)}")
    for file, why in registry.skipped.items():
        lines.append(f"skipped: {file}: {why}")
    return "\n".join(lines)


def _first_line(doc: Optional[str]) -> str:
    return (doc or "").strip().splitlines()[0] if doc and doc.strip() else ""


def create_codecs(registry: Registry, spec: str, announce: bool = True) -> List[Codec]:
    """Instances for a comma-separated id list; ids whose plugin file was skipped are dropped with one line."""
    ids = [part.strip() for part in spec.split(",") if part.strip()]
    if not ids:
        raise BenchError("--codecs is empty")
    if len(set(ids)) != len(ids):
        raise BenchError(f"--codecs lists a codec twice: {spec}")
    skipped_stems = {Path(f).stem: why for f, why in registry.skipped.items()}
    codecs = []
    for cid in ids:
        base = cid.split("+")[0]
        if base not in registry.codecs and base in skipped_stems:
            if announce:
                print(f"skipping {cid}: {skipped_stems[base]}", file=sys.stderr)
            continue
        codecs.append(registry.create(cid))
    if not codecs:
        raise BenchError("none of the requested codecs is available")
    return codecs


def make_out_dir(out: Optional[str], trace: str) -> Path:
    """The given folder or a fresh name under results/; nothing is created yet (see OutputFolder)."""
    if out:
        return Path(out)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = REPO / "results" / f"{stamp}-{Path(trace).name.split('.')[0]}"
    n = 1
    while path.exists():
        n += 1
        path = path.with_name(f"{path.name.rsplit('~', 1)[0]}~{n}")
    return path


class OutputFolder:
    """A hidden temporary folder beside ``final`` that becomes ``final`` when the run ends well.

    A run that fails or is stopped leaves no folder behind. When ``final`` already exists
    (``--out`` given an existing folder), the new files replace their namesakes in it.
    """

    def __init__(self, final: Path) -> None:
        self.final = final
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.is_dir():
                tempfile.TemporaryFile(dir=final).close()  # writable: found now, not after the whole run
            self.temp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
        except OSError as e:
            raise BenchError(f"cannot write to output folder {final}: {e.strerror or e}") from None

    def __enter__(self) -> Path:
        return self.temp

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None:
        if kind is not None:
            shutil.rmtree(self.temp, ignore_errors=True)
            return
        try:
            if not self.final.is_dir():
                os.rename(self.temp, self.final)
                return
            for entry in self.temp.iterdir():
                os.replace(entry, self.final / entry.name)
            self.temp.rmdir()
        except OSError as e:
            raise BenchError(f"cannot move the results into {self.final}: {e.strerror or e} (they are in {self.temp})") from None


def run(args: argparse.Namespace, argv: List[str], codecs: List[Codec], registry: Registry,
        progress: "Progress") -> Suite:
    """The size/fidelity pass over the trace, then timing on the sample; returns the Suite."""
    started = time.perf_counter()
    reader = open_trace(args.trace, args.salvage)
    size_pass = SizePass(codecs, args.sample, args.seed)
    size_pass.run_split(reader, lambda: open_trace(args.trace, args.salvage), args.jobs, progress,
                        args.codec_timeout)
    if damage_note(reader):
        print(f"warning: {damage_note(reader)}", file=sys.stderr)
    if not size_pass.stats.calls:
        raise BenchError(f"{args.trace}: the trace holds no calls")
    size_pass_s = time.perf_counter() - started
    plan = Plan(args.sample, args.min_time, args.repeat, args.processes if worker.available() else 0, args.warmup)
    if args.budget:
        plan = _fit_budget(plan, size_pass, args.budget - (time.perf_counter() - started))
        size_pass.sample_size = plan.sample
    progress("drawing the timing sample")
    sample = size_pass.sample(lambda: open_trace(args.trace, args.salvage))
    timing_started = time.perf_counter()
    failed = {t.codec.name: {"error": t.error} for t in size_pass.tallies if t.error}
    timings, interrupted = time_sample(args, argv, plan, [c for c in codecs if c.name not in failed], sample, progress)
    timings.update(failed)
    durations = {"size_pass_s": round(size_pass_s, 2), "timing_s": round(time.perf_counter() - timing_started, 2)}
    return Suite(
        schema_version=SCHEMA_VERSION,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        command=["run_bench.py", *argv],
        environment=environment(lib for c in codecs for lib in c.libraries()),
        settings={
            "codecs": [c.name for c in codecs], "repeat": plan.repeat, "warmup": plan.warmup, "budget_s": args.budget,
            "processes": plan.processes, "sample": len(sample), "sample_seed": args.seed, "min_time_s": plan.min_time,
            "sample_method": "all calls" if len(sample) == size_pass.stats.calls else "stratified by method, seeded",
            "sample_by_method": dict(Counter(call.method for call in sample).most_common()), "jobs": args.jobs,
            "gc": f"{args.gc} inside timed loops", "timer": "perf_counter_ns around whole batches",
            "tails": not args.no_tails, "memory": not args.no_memory, "codec_timeout_s": args.codec_timeout,
            **durations,
        },
        trace=_trace_info(args.trace, reader, size_pass, codecs),
        results=tuple(_codec_result(t, timings.get(t.codec.name, {}), registry) for t in size_pass.tallies),
        partial="interrupted (Ctrl-C) during timing" if interrupted else None,
    )


def _fit_budget(plan: Plan, size_pass: SizePass, seconds_left: float) -> Plan:
    """Shrink the timing plan to the time left, from each codec's cost in the size pass."""
    calls = max(size_pass.stats.calls, 1)
    costs = [(t.ns / calls, len(t.codec.encode_stages()) > 1 and not t.codec.per_connection) for t in size_pass.tallies]
    fitted = budget.fit(plan, costs, seconds_left, MEMORY_CALLS)
    if fitted.cost_s(costs, MEMORY_CALLS) > seconds_left:
        print(f"warning: --budget leaves {seconds_left:.0f} s after the size pass; timing will need about "
              f"{fitted.cost_s(costs, MEMORY_CALLS):.0f} s even with the smallest plan", file=sys.stderr)
    return fitted


def time_sample(args: argparse.Namespace, argv: List[str], plan: Plan, codecs: List[Codec], sample: list,
                progress: "Progress") -> Tuple[Dict[str, Dict[str, Any]], bool]:
    """Timing results per codec name (in fresh worker processes, or interleaved in this one),
    and whether Ctrl-C cut the timing short."""
    if not codecs:
        return {}, False
    if plan.processes == 0:
        jobs = [TimingJob(codec, sample, gc_enabled=args.gc == "on") for codec in codecs]
        interrupted = run_jobs(jobs, plan.repeat, plan.warmup, plan.min_time, STAGE_ROUNDS, progress)
        out = {}
        for j in jobs:
            out[j.codec.name] = j.result()
            if not j.error and not interrupted:
                progress(f"tails and allocations: {j.codec.name}")
                out[j.codec.name].update(latency={} if args.no_tails else j.tails(),
                                         memory={} if args.no_memory else j.memory(MEMORY_CALLS))
        return out, interrupted
    job_plan = {"codecs": [c.name for c in codecs], "repeat": plan.repeat, "warmup": plan.warmup,
                "min_time": plan.min_time, "processes": plan.processes, "gc": args.gc == "on",
                "stage_rounds": STAGE_ROUNDS, "tails": not args.no_tails, "memory": not args.no_memory,
                "memory_calls": MEMORY_CALLS, "codec_timeout": args.codec_timeout}
    with tempfile.TemporaryDirectory() as tmp:
        sample_path = os.path.join(tmp, "sample.rpct")
        with TraceWriter(sample_path) as w:
            for call in sample:
                w.write(call)
        generations, interrupted = worker.time_in_processes(sample_path, argv, job_plan, progress)
    merged: Dict[str, Dict[str, Any]] = {}
    for answers in generations:
        for name, answer in answers.items():
            _merge(merged.setdefault(name, {}), answer)
    return merged, interrupted


def _merge(into: Dict[str, Any], answer: Dict[str, Any]) -> None:
    """Add one worker's answer to a codec's results: rounds append, the rest is kept from the first."""
    if answer.get("error"):
        into["error"] = answer["error"]
        return
    for op, rounds in answer["rounds"].items():
        into.setdefault("rounds", {}).setdefault(op, []).extend(rounds)
    for op, stages in answer["stage_rounds"].items():
        for stage, rounds in stages.items():
            into.setdefault("stage_rounds", {}).setdefault(op, {}).setdefault(stage, []).extend(rounds)
    for key in ("calls", "loops", "latency", "memory"):
        if key in answer:
            into.setdefault(key, answer[key])


def _codec_result(tally: CodecTally, timing: Dict[str, Any], registry: Registry) -> CodecResult:
    codec = tally.codec
    rounds = timing.get("rounds", {})

    def as_timing(values: Optional[List[float]]) -> Optional[Timing]:
        return Timing(tuple(values), timing["calls"], timing["loops"]) if values else None

    return CodecResult(
        codec=codec.name, config=_jsonable(codec.config()), library=codec.library,
        library_version=library_version(codec.library) if codec.library else None,
        origin=registry.origin(codec.base.id) or "", calls=sum(tally.sizes.values()), failures=tally.failures,
        mismatches=tally.mismatches, sizes=tally.size_stats(),
        encode=as_timing(rounds.get("encode")), decode=as_timing(rounds.get("decode")),
        problems=tally.problem_list(),
        by_method={m: {"calls": c, "bytes": b} for m, (c, b) in sorted(tally.by_method.items())},
        error=timing.get("error") or (None if rounds.get("encode") else "not timed: the run was interrupted first"),
        stages={op: {name: as_timing(v) for name, v in stages.items()}  # type: ignore[misc]
                for op, stages in timing.get("stage_rounds", {}).items() if stages},
        latency=timing.get("latency", {}), memory=timing.get("memory", {}),
    )


def _jsonable(config: dict) -> dict:
    return {k: v if isinstance(v, (str, int, float, bool, type(None), list, tuple)) else repr(v) for k, v in config.items()}


def _trace_info(path: str, reader, size_pass: SizePass, codecs: List[Codec]) -> dict:
    reference = next((c.name for c in codecs if c.name == "json"), codecs[0].name)
    return {
        "path": path,
        "format": "jsonl" if reader.version is None else f"rpctrace v{reader.version}",
        "sha256": file_sha256(path),
        "file_bytes": os.path.getsize(path),
        "metadata": reader.metadata,
        **size_pass.stats.summary(),
        "truncated_bytes": reader.truncated_bytes,
        "salvaged": damage_note(reader),
        "recorder": reader.end or reader.stats,
        "bytes_reference": reference,
    }


class Progress:
    """Progress on stderr: one updating line on a terminal, a line every few seconds otherwise."""

    def __init__(self, enabled: bool = True, interval: float = 3.0) -> None:
        self.enabled = enabled
        self.tty = sys.stderr.isatty()
        self.interval = interval
        self._last = 0.0
        self._width = 0

    def __call__(self, message: str) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.tty:
            sys.stderr.write("\r" + message.ljust(self._width))
            self._width = len(message)
            sys.stderr.flush()
        elif now - self._last >= self.interval:
            print(message, file=sys.stderr)
            self._last = now

    def done(self) -> None:
        """End the updating line."""
        if self.enabled and self.tty and self._width:
            sys.stderr.write("\r" + " " * self._width + "\r")
            sys.stderr.flush()
