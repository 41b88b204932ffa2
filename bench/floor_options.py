"""What the floor could compress with: every candidate's bytes and cost on the same streams (issue 28).

    python bench/floor_options.py [--traces A,B,...] [--calls 30000,150000] [--cache DIR]
    python bench/floor_options.py --estimate [--calls 150000,300000] [--seeds 1,2]

The floor (rpcbench/floor.py) compresses each connection and direction's whole stream of
compact-JSON calls. For each trace (the bundled samples, the Minecraft example, simulated dict
and study traces of ``--calls`` calls) this prints, per candidate: bytes per call over all
streams, how far that is from the floor before issue 28 (per stream the smaller of xz -9 and,
on streams up to 512 KiB, zstd-19 with long matching), and its CPU seconds per MB of JSON
(``time.thread_time``: this thread's CPU, so other work on a shared machine weighs less; the
candidates take turns stream by stream). Then, per stream, which of xz -9 and zstd-19 gave
the smaller and by how much; what a seeded sample of streams would estimate, with its 95 %
interval; and what hashing the trace (a cache keyed by its sha256) costs against the floor.

``--estimate``: the floor as runs take it (rpcbench.floor: exact within ``FLOOR_BUDGET``, estimated
beyond) against the exact floor of every stream compressed whole, on simulated dict and study traces
of ``--calls`` calls and ``--seeds`` seeds and the bundled ones: the estimate's error, its stated 95 %
interval, the share of the JSON it compressed, and the CPU seconds of each (``time.process_time``: the
floor compresses on two threads), the two taking turns trace by trace.
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
import random
import statistics
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

import _common
import scale
import zstandard
from scipy import stats

from rpc_capture import open_trace
from rpcbench.codec import stream_key
from rpcbench.floor import FLOOR_BUDGET, Floor, FloorFigures, dictionary_size, floor_figures
from rpcbench.registry import Registry

ZSTD_BEFORE_MAX = 512 << 10  #: the floor before issue 28 tried zstd on streams up to this many bytes
BUNDLED = ("samples/battle.rpct", "samples/battle_dict.rpct", "tests/data/minecraft_packets.jsonl")
Compress = Callable[[bytes], int]


def lzma_size(fmt: int, filter_id: int, preset: int = 9, **options: int) -> Compress:
    """A compressor: LZMA at ``preset`` in ``fmt`` (.xz, .lzma or raw), its dictionary the stream's size."""
    def size(stream: bytes) -> int:
        chain = [{"id": filter_id, "preset": preset, "dict_size": dictionary_size(len(stream)), **options}]
        return len(lzma.compress(stream, format=fmt, filters=chain))
    return size


def zstd_size(level: int) -> Compress:
    """A compressor: zstd at ``level`` with long-distance matching and a 128 MiB window."""
    params = zstandard.ZstdCompressionParameters.from_level(level, enable_ldm=True, window_log=27)
    return lambda stream: len(zstandard.ZstdCompressor(compression_params=params).compress(stream))


ALONE, LZMA1 = lzma.FORMAT_ALONE, lzma.FILTER_LZMA1
CANDIDATES: Dict[str, Compress] = {
    "xz -9": lzma_size(lzma.FORMAT_XZ, lzma.FILTER_LZMA2),
    "zstd-19 long": zstd_size(19),
    "zstd-22 long": zstd_size(22),
    "lzma -9 (.lzma)": lzma_size(ALONE, LZMA1),
    "lzma -9e": lzma_size(ALONE, LZMA1, 9 | lzma.PRESET_EXTREME),
    "lzma -6e": lzma_size(ALONE, LZMA1, 6 | lzma.PRESET_EXTREME),
    "lzma -9 pb0": lzma_size(ALONE, LZMA1, pb=0),
    "lzma -9 lc4 pb0": lzma_size(ALONE, LZMA1, lc=4, pb=0),
    "lzma -9 depth 16": lzma_size(ALONE, LZMA1, depth=16),
    "lzma -9 hc4": lzma_size(ALONE, LZMA1, mf=lzma.MF_HC4),
    "lzma -9 nice 32": lzma_size(ALONE, LZMA1, nice_len=32),
    "raw LZMA2 -9": lzma_size(lzma.FORMAT_RAW, lzma.FILTER_LZMA2),
}


def streams_of(path: str) -> Tuple[List[bytes], List[int]]:
    """Each connection and direction's calls as compact JSON, joined, and each one's count of calls."""
    encode = Registry.default().create("json").encode
    parts: Dict[object, List[bytes]] = {}
    for call in open_trace(path):
        try:
            parts.setdefault(stream_key(call), []).append(encode(call))
        except Exception:
            continue
    return [b"".join(p) for p in parts.values()], [len(p) for p in parts.values()]


def trained_zstd(path: str, streams: Sequence[bytes]) -> Tuple[int, float]:
    """zstd-19 long with a dictionary trained on the trace's own calls: bytes of every stream plus the
    dictionary once, and the CPU seconds of training and compressing."""
    encode = Registry.default().create("json").encode
    started = time.thread_time()
    samples = [encode(call) for call in open_trace(path)]
    trained = zstandard.train_dictionary(110 << 10, samples)
    params = zstandard.ZstdCompressionParameters.from_level(19, enable_ldm=True, window_log=27)
    total = len(trained.as_bytes()) + sum(
        len(zstandard.ZstdCompressor(dict_data=trained, compression_params=params).compress(s)) for s in streams)
    return total, time.thread_time() - started


def measure(streams: Sequence[bytes]) -> Tuple[Dict[str, List[int]], Dict[str, List[float]]]:
    """Every candidate's bytes and CPU seconds per stream, the candidates taking turns stream by stream."""
    sizes: Dict[str, List[int]] = {name: [] for name in CANDIDATES}
    cpu: Dict[str, List[float]] = {name: [] for name in CANDIDATES}
    for stream in streams:
        for name, compress in CANDIDATES.items():
            started = time.thread_time()
            sizes[name].append(compress(stream))
            cpu[name].append(time.thread_time() - started)
    return sizes, cpu


def sampled(bytes_: Sequence[int], calls: Sequence[int], share: float, seed: int = 1) -> Tuple[float, float, int]:
    """A seeded sample of ``share`` of the streams: the ratio estimate of bytes per call, the half-width of
    its 95 % interval (ratio estimator, finite-population correction) and the streams taken."""
    n = len(bytes_)
    k = max(2, round(n * share))
    if k >= n:
        return sum(bytes_) / sum(calls), 0.0, n
    picks = random.Random(seed).sample(range(n), k)
    b, c = [bytes_[i] for i in picks], [calls[i] for i in picks]
    rate = sum(b) / sum(c)
    residual = statistics.variance([bi - rate * ci for bi, ci in zip(b, c)])
    se = (1 - k / n) ** 0.5 * (residual / k) ** 0.5 / statistics.mean(c)
    return rate, float(stats.t.ppf(0.975, k - 1)) * se, k


def report(path: str) -> None:
    """Print the candidates' figures, the per-stream contest, sampling and hashing for one trace."""
    streams, calls = streams_of(path)
    mb, n = sum(map(len, streams)) / 1e6, sum(calls)
    sizes, per_stream_cpu = measure(streams)
    short = [len(s) <= ZSTD_BEFORE_MAX for s in streams]
    before = [min(x, z) if s else x for s, x, z in zip(short, sizes["xz -9"], sizes["zstd-19 long"])]
    before_cpu = sum(per_stream_cpu["xz -9"]) + sum(t for s, t in zip(short, per_stream_cpu["zstd-19 long"]) if s)
    cpu = {name: sum(times) for name, times in per_stream_cpu.items()}
    print(f"\n{path}: {n:,} calls, {len(streams)} streams (largest {max(map(len, streams)) / 1e6:.2f} MB), "
          f"{mb:.2f} MB of JSON; floor before {sum(before) / n:.4f} B/call")
    trained, trained_cpu = trained_zstd(path, streams)
    rows = [[name, f"{sum(s) / n:.4f}", f"{sum(s) / sum(before) - 1:+.2%}", f"{cpu[name] / mb:.3f}"]
            for name, s in sizes.items()]
    rows.append(["zstd-19 long + trained dict", f"{trained / n:.4f}", f"{trained / sum(before) - 1:+.2%}",
                 f"{trained_cpu / mb:.3f}"])
    print(_common.table(["compressor", "B/call", "vs before", "CPU s/MB"], rows))
    gaps = [z / x - 1 for x, z in zip(sizes["xz -9"], sizes["zstd-19 long"])]
    print(f"per stream: zstd-19 smaller than xz -9 on {sum(g < 0 for g in gaps)} of {len(gaps)} (median "
          f"{statistics.median(gaps):+.2%}, {min(gaps):+.2%} to {max(gaps):+.2%}); lzma -9 against the best of "
          f"the two: {max(a / b - 1 for a, b in zip(sizes['lzma -9 (.lzma)'], before)):+.2%} at worst; "
          f"floor before {before_cpu / mb:.3f} CPU s/MB")
    for share in (0.25, 0.5):
        rate, half, k = sampled(sizes["lzma -9 (.lzma)"], calls, share)
        print(f"sample of {k} of {len(streams)} streams (seed 1): {rate:.3f} ± {half:.3f} B/call "
              f"({half / rate:.1%}), all of them: {sum(sizes['lzma -9 (.lzma)']) / n:.3f}")
    started = time.thread_time()
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    hashing = time.thread_time() - started
    print(f"sha256 of the trace ({Path(path).stat().st_size / 1e6:.1f} MB, {digest[:12]}): {hashing:.3f} CPU s, "
          f"{hashing / cpu['lzma -9 (.lzma)']:.1%} of lzma -9's")


def floor_of(calls: Sequence[Any], budget: int) -> Tuple[FloorFigures, float]:
    """The floor of ``calls`` within ``budget`` bytes of JSON compressed, and its CPU seconds."""
    started = time.process_time()
    floor = Floor(Registry.default().create("json"), budget=budget)
    for call in calls:
        floor.add(call)
    figures = floor_figures([floor.totals()])
    assert figures is not None
    return figures, time.process_time() - started


def estimate_row(path: str) -> List[str]:
    """One trace: the run's floor (estimated beyond the budget) against every stream compressed whole."""
    calls = list(open_trace(path))
    (run, run_cpu), (exact, exact_cpu) = floor_of(calls, FLOOR_BUDGET), floor_of(calls, 1 << 62)
    error = run.bytes_per_call / exact.bytes_per_call - 1
    within = "yes" if abs(run.bytes_per_call - exact.bytes_per_call) <= run.ci_half_width else "NO"
    print(f"  {Path(path).name}: {run.bytes_per_call:.3f} against {exact.bytes_per_call:.3f}", flush=True)
    return [Path(path).name, f"{len(calls):,}", f"{exact.bytes_per_call:.3f}",
            f"{run.bytes_per_call:.3f}" + (" ± " f"{run.ci_half_width:.3f}" if run.estimated else " (exact)"),
            f"{error:+.2%}", within if run.estimated else "", f"{run.compressed_share:.0%}",
            f"{run_cpu:.1f} / {exact_cpu:.1f}"]


def estimates(args: argparse.Namespace) -> None:
    """The ``--estimate`` table."""
    traces = [str(_common.REPO / t) for t in args.traces.split(",") if t]
    traces += [str(scale.trace_for(int(c), args.cache, int(seed), profile)) for c in args.calls.split(",") if c
               for seed in args.seeds.split(",") for profile in ("dict", "study")]
    rows = [estimate_row(path) for path in traces]
    print(f"\nthe floor as runs take it (budget {FLOOR_BUDGET >> 20} MiB of JSON) against the exact floor; "
          f"{_common.cpu_note()}")
    print(_common.table(["trace", "calls", "exact B/call", "run's floor, ± 95 %", "error", "within ±",
                         "JSON compressed", "CPU s run / exact"], rows))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--traces", default=",".join(BUNDLED), help="traces besides the simulated (default: %(default)s)")
    p.add_argument("--calls", default="30000,150000", help="calls of the simulated dict and study traces")
    p.add_argument("--seeds", default="1", help="--estimate: seeds of the simulated traces (default: 1)")
    p.add_argument("--estimate", action="store_true", help="the run's floor, estimated beyond its budget, against "
                   "the exact floor")
    p.add_argument("--cache", type=Path, default=Path("/tmp/rpcbench-core"), help="trace cache (default: %(default)s)")
    args = p.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    print(_common.cpu_note(), flush=True)
    if args.estimate:
        estimates(args)
        return
    simulated = [str(scale.trace_for(int(c), args.cache, 1, profile))
                 for c in args.calls.split(",") if c for profile in ("dict", "study")]
    for path in [*(str(_common.REPO / t) for t in args.traces.split(",") if t), *simulated]:
        report(path)


if __name__ == "__main__":
    main()
