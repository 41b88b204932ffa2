"""``python run_bench.py [options]``: parse the options into a RunConfig, run the benchmark,
write results.json/csv, print the table and write the charts and report."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any, List, Optional, Tuple

from rpcbench.reports import Decision, ReportOptions, build, decide, imports_ahead, terminal_text
from rpcbench import precision, protobuf
from rpcbench.config import DEFAULT_CODECS, DEFAULT_TRACE, RunConfig
from rpcbench.errors import BenchError
from rpcbench.reports.loss import chosen_rate
from rpcbench.trace_index import resolve_traces
from rpcbench.isolation import DEFAULT_CODEC_TIMEOUT
from rpcbench.link import DEFAULT_LOSS_SEED, DEFAULT_RTT_MS, LinkSettings
from rpcbench.meanwhile import Meanwhile
from rpcbench.pipeline import run_benchmark
from rpcbench.registry import CODECS_DIR, Registry, split_codec_list
from rpcbench.results import Suite

from .options import (add_report_options, dask_address, fraction, finite_number, loss_rates, report_options, seconds,
                      table_width, whole_number, wire_policies)
from .progress import ProgressDisplay
from .naming import program

MAX_PROCESSES = 1000  #: process sets run one after another: 1000 is already days of timing
MAX_JOBS = 64  #: forked processes sharing the size pass: more only thrash a machine


def build_parser() -> argparse.ArgumentParser:
    """The benchmark's options (subcommands are listed in the epilog)."""
    p = argparse.ArgumentParser(
        prog=program(),
        allow_abbrev=False,
        description="Replay a recorded RPC trace through serialization codecs and measure bytes per call, "
        "encode and decode CPU time per call, and whether each codec gives the same call back.",
        epilog="Subcommands: 'simulate --help' (make a battle trace), 'trace --help' (inspect, convert, slice "
        "traces), 'report --help' (rebuild a report), 'proto --help' (protobuf schemas), 'compare --help'. "
        "Installed, the rpcbench command takes the same arguments ('rpcbench run' is the benchmark too).",
    )
    p.add_argument("--trace", nargs="+", default=[str(DEFAULT_TRACE)], metavar="TRACE",
                   help="trace(s) to replay: binary .rpct (gzip or not) or JSON Lines files, folders of them or glob "
                   "patterns; several traces are measured each and merged (default: the bundled battle sample)")
    p.add_argument("--salvage", action="store_true",
                   help="skip damaged records of the trace (a warning says how many calls were lost) "
                   "instead of stopping")
    p.add_argument("--codecs", default=",".join(DEFAULT_CODECS),
                   help="comma-separated codec ids, e.g. json,bson,json+zlib-1; a level range or list expands: "
                   "json+zlib-1..9, json+zstd-1,3,19 (default: %(default)s)")
    _add_output_options(p)
    _add_timing_options(p)
    p.add_argument("--jobs", type=whole_number(0, MAX_JOBS), default=min(2, os.cpu_count() or 1), metavar="N",
                   help="watched processes sharing the size and fidelity pass (a codec that hangs or crashes fails "
                   "alone); 0 runs it in this process, unwatched (default: %(default)s)")
    p.add_argument("--gc", choices=("off", "on"), default="off",
                   help="garbage collector inside timed loops: off (default, as timeit: one codec's garbage is not "
                   "collected on another's clock) or on (as in production)")
    p.add_argument("--budget", type=seconds(30 * 86400), metavar="SECONDS",
                   help="fit the run into this many seconds: the size pass covers every call (a sample of them "
                   "with --sample-calls), then the timing sample, batch length, rounds and processes shrink as needed "
                   "(see rpcbench/budget.py)")
    p.add_argument("--codec-timeout", type=seconds(86400), default=DEFAULT_CODEC_TIMEOUT, metavar="SECONDS",
                   help="longest one codec may take for one step (the size pass over one call, a warm-up, a timed "
                   "round, the tails): a codec past it is stopped and reported as failed, the others carry on "
                   "(default: %(default)g)")
    p.add_argument("--no-tails", action="store_true", help="skip the per-call latency percentiles pass")
    p.add_argument("--no-memory", action="store_true", help="skip the tracemalloc allocations pass")
    _add_plugin_options(p)
    _add_compression_options(p)
    _add_fleet_options(p)
    _add_link_options(p)
    p.add_argument("--list-codecs", action="store_true", help="list the available codecs and compressors, then exit")
    add_report_options(p)
    return p


def _add_timing_options(p: argparse.ArgumentParser) -> None:
    """How the codecs' CPU is timed: rounds, batches, the sample, process sets and lanes."""
    p.add_argument("--repeat", type=whole_number(1, 1_000_000), default=40,
                   help="timed rounds per codec in each process set; the median of all is reported (default: 40)")
    p.add_argument("--warmup", type=whole_number(1, 1000), default=1,
                   help="untimed warm-up rounds before them (default: 1)")
    p.add_argument("--min-time", type=seconds(60), default=0.01, metavar="SECONDS",
                   help="shortest timed batch: the sample is replayed as often as needed to last this long "
                   "(default: 0.01; many short interleaved rounds beat a few long ones "
                   "on machines whose speed drifts)")
    p.add_argument("--sample", type=whole_number(1, 10_000_000), default=1000, metavar="N",
                   help="calls timed: a seeded sample, stratified by method (and by trace in a fleet), of the trace "
                   "(sizes and fidelity cover every call unless --sample-calls; default: 1000)")
    p.add_argument("--seed", type=int, default=1, help="seed of the timing sample (default: 1)")
    p.add_argument("--processes", type=whole_number(0, MAX_PROCESSES), default=1, metavar="N",
                   help="process sets: each codec is timed in its own fresh process, codecs taking turns round by "
                   "round; N sets run one after another and their rounds are pooled. 0 times every codec in this "
                   "process instead (default: 1)")
    p.add_argument("--timing-lanes", type=whole_number(1, MAX_JOBS), metavar="N",
                   help="codecs timed at once, each in its own process pinned to a CPU of its own, paired anew and "
                   "moved from CPU to CPU round by round so every codec meets the same neighbours and CPUs; 1 times "
                   "one at a time (default: 2 when this process may use 2 CPUs, --jobs is 2 or more and other work "
                   "keeps under a quarter of a CPU busy just before timing, else 1; always 1 with --processes 0)")


def _add_output_options(p: argparse.ArgumentParser) -> None:
    """Where the results go and what is printed."""
    p.add_argument("--out", help="output folder (default: a new folder under results/ in the current directory); "
                   "one that holds files is refused without --force")
    p.add_argument("--force", action="store_true", help="let --out name a folder that holds files: the new files "
                   "replace their namesakes in it")
    p.add_argument("--no-report", action="store_true", help="write results.json/csv only, no charts or HTML")
    p.add_argument("--quiet", action="store_true", help="no progress lines")


def _add_compression_options(p: argparse.ArgumentParser) -> None:
    """Dictionaries, stream windows and the floor of the compression codecs."""
    p.add_argument("--train-fraction", type=fraction, default=0.2, metavar="F",
                   help="share of the trace, from its start, that trains the dictionaries of X+zstddict-N codecs; "
                   "when such a codec runs, every codec is measured on the rest only (default: 0.2)")
    p.add_argument("--train-trace", metavar="FILE",
                   help="train the dictionaries on this trace instead, and measure the whole --trace")
    p.add_argument("--dict-size", type=whole_number(256, 1 << 24), default=16384, metavar="BYTES",
                   help="largest size of a trained dictionary (default: 16384)")
    p.add_argument("--zstd-window-log", type=whole_number(10, 27), metavar="N",
                   help="window of X+zstdstream-N codecs: 2**N bytes of history per connection and direction "
                   "(default: the level's own)")
    p.add_argument("--no-floor", action="store_true",
                   help="skip the floor (each connection's whole stream compressed by lzma -9) and the x floor "
                   "ratios")


def _add_fleet_options(p: argparse.ArgumentParser) -> None:
    """Many traces, Dask, and a size pass that samples (docs/fleet.md)."""
    p.add_argument("--dask", type=dask_address, metavar="local[:N]|tcp://HOST:PORT",
                   help="run the size and fidelity pass on Dask: a LocalCluster of N workers in this process (each "
                   "task in a watched process of its own), or the cluster of that scheduler (the traces must be "
                   "readable from the workers); timing stays here")
    p.add_argument("--chunk-calls", type=whole_number(1000, 10**9), default=RunConfig.chunk_calls, metavar="N",
                   help="split plain binary traces into tasks of about N calls (codecs with per-connection "
                   "state still take a trace whole; default: %(default)s)")
    p.add_argument("--sizes-only", action="store_true", help="bytes and fidelity only: skip timing")
    p.add_argument("--wire", type=wire_policies, default=wire_policies("per-call"), metavar="POLICY[,POLICY...]",
                   help="how the server sends, compared side by side: per-call (each call its own packet), tick:MS "
                   "(one packet per connection, direction and MS-ms tick window), tick:MS+mtu:BYTES (packets of at "
                   "most BYTES of payload) or tick:auto (the tick read from the trace); docs/wire.md "
                   "(default: per-call)")
    p.add_argument("--sample-calls", type=whole_number(2, 10**12), metavar="N",
                   help="the size pass measures a seeded sample of about N calls (uniform over every trace) and "
                   "gives each byte figure with a 95%% confidence interval, instead of measuring every call")


def _add_link_options(p: argparse.ArgumentParser) -> None:
    """The lossy link every codec is replayed over (docs/wire.md, "The lossy link")."""
    p.add_argument("--loss", type=loss_rates, default=(), metavar="P[,P...]",
                   help="replay every codec over a lossy link at these loss rates (percent per datagram, after "
                   "--wire batching), side by side: stream codecs over a reliable ordered layer (resends, acks, "
                   "head-of-line delay), +ackdelta against acked baselines, the others as plain UDP (lost calls)")
    p.add_argument("--rtt", type=finite_number, default=DEFAULT_RTT_MS, metavar="MS",
                   help="the link's round-trip time (default: %(default)g)")
    p.add_argument("--jitter", type=finite_number, default=0.0, metavar="MS",
                   help="each one-way delay is RTT/2 plus a uniform jitter of at most this much either way, at most "
                   "half the RTT (default: 0)")
    p.add_argument("--loss-burst", type=finite_number, default=1.0, metavar="N",
                   help="mean length of a loss burst in datagrams (Gilbert-Elliott); 1: independent loss (default)")
    p.add_argument("--loss-seed", type=int, default=DEFAULT_LOSS_SEED, metavar="N",
                   help="seed of the losses and delays: the same seed, the same figures (default: %(default)s)")


def _add_plugin_options(p: argparse.ArgumentParser) -> None:
    """Where codecs come from, and the protobuf codecs' schemas."""
    p.add_argument("--codec-path", action="append", default=[], metavar="FILE.py",
                   help="load codec classes from a file (repeatable)")
    p.add_argument("--codecs-dir", action="append", default=[], metavar="DIR",
                   help="load every codec file in a folder (repeatable)")
    p.add_argument("--codec", action="append", default=[], metavar="MODULE:CLASS",
                   help="load an importable codec class (repeatable)")
    p.add_argument("--proto", action="append", default=[], metavar="FILE",
                   help="protobuf schema for the protobuf codec (repeatable; default: every .proto in proto/)")
    p.add_argument("--proto-path", action="append", default=[], metavar="DIR", help="protoc include path (repeatable)")
    p.add_argument("--proto-map", metavar="FILE", help="JSON file mapping methods to messages (docs/protobuf.md)")
    p.add_argument("--proto-enums", choices=protobuf.ENUM_FORMS, default="names",
                   help="decoded protobuf enum values: value names (default) or numbers, as the trace gives them")
    p.add_argument("--precision", metavar="FILE.toml",
                   help="precision profile for the quant codec: each field's step and range (make one with "
                   "'precision suggest --trace T'); a lossy codec competes in the verdict only with one "
                   "(docs/codecs.md, \"quant\")")


def main(argv: List[str]) -> int:
    """Run the benchmark as the options say; returns the exit status."""
    args = build_parser().parse_args(argv)
    config = config_from(args, argv)
    options = report_options(args)
    registry = config.registry()
    if args.list_codecs:
        print(list_codecs(registry))
        return 0
    if options.baseline and options.baseline not in registry.expand(config.codecs):
        raise BenchError(f"--baseline {options.baseline[:60]}: not one of --codecs")
    if options.loss is not None:  # a --decide-loss rate the run will not measure: said before the run, not after it
        chosen_rate(config.link.loss, options.loss)
    out = make_out_dir(args.out, config.trace if len(config.trace_files) == 1 else "fleet")
    started = time.perf_counter()
    with OutputFolder(out, args.force) as folder, ProgressDisplay(enabled=not args.quiet) as progress:
        suite = run_benchmark(config, progress, registry, meanwhile=Meanwhile(imports_ahead(not args.no_report)))
        progress.close()
        report, decided = write_outputs(suite, folder, args.no_report, options, args.charts)
    if decided is None:  # a partial run (Ctrl-C during timing): results.json only
        print(f"{program()}: {suite.partial}; partial results in {out / 'results.json'}", file=sys.stderr)
        return 130
    print(terminal_text(decided, table_width(), "results.json" if args.no_report else "report.html"))
    where = f"report: {out / report} (results.json, results.csv beside it)" if report else f"results: {out}"
    print(f"{where}; {time.perf_counter() - started:.1f} s")
    return 0


def config_from(args: argparse.Namespace, argv: List[str]) -> RunConfig:
    """The run the options describe."""
    traces = resolve_traces(args.trace)
    return RunConfig(
        trace=traces[0], traces=tuple(traces) if len(traces) > 1 else (), dask=args.dask,
        sizes_only=args.sizes_only, sample_calls=args.sample_calls, chunk_calls=args.chunk_calls,
        codecs=split_codec_list(args.codecs),
        salvage=args.salvage, sample=args.sample, seed=args.seed, repeat=args.repeat, warmup=args.warmup,
        min_time=args.min_time, processes=args.processes,
        timing_lanes=args.timing_lanes, jobs=args.jobs, gc=args.gc == "on", budget=args.budget,
        codec_timeout=args.codec_timeout, tails=not args.no_tails, memory=not args.no_memory,
        codec_files=tuple(args.codec_path), codec_dirs=tuple(args.codecs_dir), codec_classes=tuple(args.codec),
        proto=protobuf.Settings(tuple(args.proto), tuple(args.proto_path), args.proto_map, args.proto_enums),
        precision=precision.load(args.precision) if args.precision else precision.NO_PROFILE,
        train_fraction=args.train_fraction, train_trace=args.train_trace, dict_size=args.dict_size,
        zstd_window_log=args.zstd_window_log, floor=not args.no_floor, command=tuple(argv), wire=args.wire,
        transport=args.transport, packet_overhead=args.packet_overhead, link=link_settings(args))


def link_settings(args: argparse.Namespace) -> LinkSettings:
    """The lossy link the options describe (one-line error for a combination no link has)."""
    settings = LinkSettings(args.loss, args.rtt, args.jitter, args.loss_burst, args.loss_seed)
    settings.check()
    return settings


def write_outputs(suite: Suite, folder: Path, no_report: bool, options: ReportOptions,
                  charts: Optional[str] = None) -> Tuple[Optional[str], Optional[Decision]]:
    """results.json/csv into ``folder``; for a complete run also the decision for ``options`` (made once, for the
    report and the terminal) and the report (unless ``no_report``): (the report's file name, the decision), each
    None when not made."""
    suite.save(str(folder))
    if suite.partial:
        return None, None
    decided = decide(suite, options)
    if no_report:
        return None, decided
    return Path(build(decided, str(folder), charts)).name, decided


def list_codecs(registry: Registry) -> str:
    """One entry per codec, call stage and compressor: id, library or levels, the first line of its docstring as
    plain text (no reST markup), wrapped to 100 columns; a plugin's origin under it."""
    lines = ["codecs (use in --codecs):"]
    for cid, cls in sorted(registry.codecs.items()):
        origin = registry.origin(cid) or ""
        builtin = origin.startswith(str(CODECS_DIR))
        lines += _entry(cid, cls.library or "stdlib", cls.__doc__) + ([] if builtin else [f"{'':32}[{origin}]"])
    lines.append("call stages (<codec>+<name>, before any compressor):")
    for name, stage in sorted(registry.stages.items()):
        lines += _entry(name, "", stage.__doc__)
    lines.append("compressors (<codec>+<name>-<level>):")
    for name, comp in sorted(registry.compressors.items()):
        lines += _entry(name, f"{comp.levels.start}-{comp.levels.stop - 1}", comp.__doc__)
    lines += [f"skipped: {file}: {why}" for file, why in registry.skipped.items()]
    return "\n".join(lines)


def _entry(name: str, library: str, doc: Optional[str]) -> List[str]:
    """``  json         stdlib     {"method": m, "args": a} as compact JSON...``, wrapped under its text."""
    text = re.sub(r":\w+:`~?([^`]+)`|``([^`]*)``|`([^`]*)`", lambda m: next(g for g in m.groups() if g is not None),
                  (doc or "").strip().splitlines()[0] if doc and doc.strip() else "")
    return textwrap.wrap(text, LIST_WIDTH, initial_indent=f"  {name:<18} {library:<10} ", subsequent_indent=" " * 32,
                         break_on_hyphens=False) or [f"  {name:<18} {library}".rstrip()]


LIST_WIDTH = 100  #: --list-codecs lines fit this many columns


def make_out_dir(out: Optional[str], trace: str) -> Path:
    """The given folder or a fresh name under ./results/; nothing is created yet (see OutputFolder)."""
    if out:
        return Path(out)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path("results") / f"{stamp}-{Path(trace).name.split('.')[0]}"
    n = 1
    while path.exists():
        n += 1
        path = path.with_name(f"{path.name.rsplit('~', 1)[0]}~{n}")
    return path


class OutputFolder:
    """A hidden temporary folder beside ``final`` that becomes ``final`` when the run ends well.

    A run that fails or is stopped leaves no folder behind. A folder that already holds files
    (an earlier run) is refused before the run starts unless ``force``: then the new files
    replace their namesakes in it. The folder gets the permissions of any new folder (the
    umask's), not the private ones of a temporary folder.
    """

    def __init__(self, final: Path, force: bool = False) -> None:
        self.final = final
        if final.is_dir() and any(final.iterdir()) and not force:
            raise BenchError(f"--out {final}: the folder is not empty (an earlier run?); "
                             "use --force to replace its files, or another folder")
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            if final.is_dir():
                tempfile.TemporaryFile(dir=final).close()  # writable: found now, not after the whole run
            self.temp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
            umask = os.umask(0)
            os.umask(umask)
            self.temp.chmod(0o777 & ~umask)
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
            raise BenchError(f"cannot move the results into {self.final}: {e.strerror or e} "
                             f"(they are in {self.temp})") from None
