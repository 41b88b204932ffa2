"""``python run_bench.py [options]``: replay a trace through codecs, write results, charts and the report."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from pathlib import Path
from typing import List, Optional, Tuple

from rpc_capture import open_trace

from .codec import Codec
from .environment import environment, file_sha256, library_version
from .errors import BenchError
from .measure import SizePass, TimingJob, time_codecs
from .registry import Registry
from .results import SCHEMA_VERSION, CodecResult, Suite

REPO = Path(__file__).resolve().parent.parent
DEFAULT_TRACE = REPO / "samples" / "battle.rpct"
DEFAULT_CODECS = (
    ["json", "ujson", "orjson", "msgpack", "bson"]
    + [f"json+zlib-{level}" for level in range(1, 10)]
    + ["bson+zlib-6", "msgpack+zlib-1", "json+zstd-3", "json+zlibstream-1"]
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
    p.add_argument("--codecs", default=",".join(DEFAULT_CODECS),
                   help="comma-separated codec ids, e.g. json,bson,json+zlib-1 (default: %(default)s)")
    p.add_argument("--out", help="output folder (default: a new folder under results/)")
    p.add_argument("--repeat", type=_positive, default=5, help="timed rounds per codec; the median is reported (default: 5)")
    p.add_argument("--warmup", type=_positive, default=1, help="untimed warm-up rounds before them (default: 1)")
    p.add_argument("--min-time", type=float, default=0.05, metavar="SECONDS",
                   help="shortest timed batch: the sample is replayed as often as needed to last this long (default: 0.05)")
    p.add_argument("--sample", type=_positive, default=20000, metavar="N",
                   help="calls timed (a seeded uniform sample of the trace; sizes and fidelity always cover every call; "
                   "default: 20000)")
    p.add_argument("--seed", type=int, default=1, help="seed of the timing sample (default: 1)")
    p.add_argument("--codec-path", action="append", default=[], metavar="FILE.py", help="load codec classes from a file (repeatable)")
    p.add_argument("--codecs-dir", action="append", default=[], metavar="DIR", help="load every codec file in a folder (repeatable)")
    p.add_argument("--codec", action="append", default=[], metavar="MODULE:CLASS", help="load an importable codec class (repeatable)")
    p.add_argument("--list-codecs", action="store_true", help="list the available codecs and compressors, then exit")
    p.add_argument("--no-report", action="store_true", help="write results.json/csv only, no charts or HTML")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    return p


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def main(argv: List[str]) -> int:
    """Run the benchmark as the options say; returns the exit status."""
    args = build_parser().parse_args(argv)
    registry = load_registry(args)
    if args.list_codecs:
        print(list_codecs(registry))
        return 0
    if args.min_time <= 0:
        raise BenchError("--min-time must be positive")
    codecs = create_codecs(registry, args.codecs)
    out = make_out_dir(args.out, args.trace)
    started = time.perf_counter()
    progress = Progress(enabled=not args.quiet)
    suite = run(args, codecs, registry, progress)
    progress.done()
    suite.save(str(out))
    from reports.table import format_table

    print(format_table(suite))
    if not args.no_report:
        from reports import build

        print(f"report: {build(suite, str(out))}")
    print(f"results: {out / 'results.json'}, {out / 'results.csv'} ({time.perf_counter() - started:.1f} s)")
    return 0


def load_registry(args: argparse.Namespace) -> Registry:
    """Built-in codecs plus whatever the options add."""
    registry = Registry.default(args.codecs_dir)
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


def create_codecs(registry: Registry, spec: str) -> List[Codec]:
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
            print(f"skipping {cid}: {skipped_stems[base]}", file=sys.stderr)
            continue
        codecs.append(registry.create(cid))
    if not codecs:
        raise BenchError("none of the requested codecs is available")
    return codecs


def make_out_dir(out: Optional[str], trace: str) -> Path:
    """The given folder (created if needed) or a fresh one under results/."""
    if out:
        path = Path(out)
    else:
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        path = REPO / "results" / f"{stamp}-{Path(trace).name.split('.')[0]}"
        n = 1
        while path.exists():
            n += 1
            path = path.with_name(f"{path.name.rsplit('~', 1)[0]}~{n}")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BenchError(f"cannot create output folder {path}: {e.strerror or e}") from None
    return path


def run(args: argparse.Namespace, codecs: List[Codec], registry: Registry, progress: "Progress") -> Suite:
    """The size/fidelity pass over the trace, then timing on the sample; returns the Suite."""
    reader = open_trace(args.trace)
    size_pass = SizePass(codecs, args.sample, args.seed)
    size_pass.run(reader, progress)
    if not size_pass.calls:
        raise BenchError(f"{args.trace}: the trace holds no calls")
    jobs = [TimingJob(codec, size_pass.sample()) for codec in codecs]
    time_codecs(jobs, args.repeat, args.warmup, args.min_time, progress)
    results = tuple(_codec_result(tally, job, registry) for tally, job in zip(size_pass.tallies, jobs))
    return Suite(
        schema_version=SCHEMA_VERSION,
        created=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        command=[os.path.basename(sys.argv[0]) or "run_bench.py", *sys.argv[1:]],
        environment=environment(lib for c in codecs for lib in c.libraries()),
        settings={
            "codecs": [c.name for c in codecs], "repeat": args.repeat, "warmup": args.warmup,
            "sample": len(size_pass.sample()), "sample_seed": args.seed, "min_time_s": args.min_time,
            "gc": "disabled inside timed loops", "timer": "perf_counter_ns around whole batches",
        },
        trace=_trace_info(args.trace, reader, size_pass, codecs),
        results=results,
    )


def _codec_result(tally, job: TimingJob, registry: Registry) -> CodecResult:
    codec = tally.codec
    encode, decode = job.timings()
    base_id = codec.inner.id if hasattr(codec, "inner") else codec.id
    return CodecResult(
        codec=codec.name, config=_jsonable(codec.config()), library=codec.library,
        library_version=library_version(codec.library) if codec.library else None,
        origin=registry.origin(base_id) or "", calls=sum(tally.sizes.values()), failures=tally.failures,
        mismatches=tally.mismatches, sizes=tally.size_stats(), encode=encode, decode=decode,
        problems=tally.problem_list(),
        by_method={m: {"calls": c, "bytes": b} for m, (c, b) in sorted(tally.by_method.items())},
        error=job.error,
    )


def _jsonable(config: dict) -> dict:
    return {k: v if isinstance(v, (str, int, float, bool, type(None), list, tuple)) else repr(v) for k, v in config.items()}


def _trace_info(path: str, reader, size_pass: SizePass, codecs: List[Codec]) -> dict:
    reference = next((c.name for c in codecs if c.name == "json"), codecs[0].name)
    return {
        "path": path,
        "format": "jsonl" if reader.version is None else f"rpctrace v{reader.version}",
        "calls": size_pass.calls,
        "sha256": file_sha256(path),
        "file_bytes": os.path.getsize(path),
        "metadata": reader.metadata,
        "methods": dict(size_pass.methods.most_common()),
        "directions": dict(size_pass.directions),
        "connections": len(size_pass.connections),
        "duration_s": ((size_pass.t_max or 0) - (size_pass.t_min or 0)) / 1e9,
        "truncated_bytes": reader.truncated_bytes,
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
