"""Fleet scaling: the size pass of a simulated fleet on the executors, side by side in one run.

    python bench/fleet.py [--traces 4] [--calls 20500] [--big-calls 125000] [--codecs LIST]
                          [--rounds 3] [--chunk-calls 50000] [--cache DIR]

The fleets are ``--traces`` simulated battles (``run_bench.py simulate --seed 1..N``), cached in
``--cache`` (default /tmp/rpcbench-fleet/). Two figures, each from interleaved rounds (A, B, A,
B...), so that a shared machine's drift hits both sides alike; the median round of each counts:

1. **Dask against watched forks**: ``run_bench.py --trace FLEET --sizes-only`` (``--calls`` calls
   per trace) through the library, with ``--jobs 2`` and with ``--dask local:2`` (the cluster's
   start included, as a user waits for it): wall time of each and their ratio.
2. **Dask scaling**: the size pass of a bigger fleet (``--big-calls`` per trace) on a running
   LocalCluster of 1 and of 2 workers (one thread each): wall time, calls per second, the
   speed-up, the CPU seconds the workers and their task processes spent (the work itself: on a
   shared machine the wall time also holds the waits for a CPU; a local cluster's workers are
   threads of this process, so this process's own CPU counts too), and whether the figures are
   identical (they must be).

Also printed: the machine's 1-minute load average after each side (other processes compete for
the same CPUs; the figures mean most on a quiet machine).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import time
from pathlib import Path
from typing import Any, List, Tuple

import _common
from _common import make_fleet, side_by_side
from rpcbench.config import RunConfig
from rpcbench.executors import connect, open_executor
from rpcbench.pipeline import run_benchmark
from rpcbench.progress import quiet
from rpcbench.plan import make_plan
from rpcbench.size_pass import run_size_pass
from rpcbench.trace_index import index_traces


def whole_run(config: RunConfig) -> Tuple[float, Any]:
    """Wall seconds of a --sizes-only run, and its byte figures."""
    started = time.perf_counter()
    suite = run_benchmark(config)
    return time.perf_counter() - started, [(r.codec, r.sizes, r.failures) for r in suite.results]


def cpu_seconds() -> Tuple[int, float]:
    """(process id, CPU seconds of that process and the task processes it forked and reaped), run on each worker:
    the workers of a local cluster are threads of one process, counted once."""
    mine, theirs = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return os.getpid(), mine.ru_utime + mine.ru_stime + theirs.ru_utime + theirs.ru_stime


def workers_cpu(client: Any) -> float:
    """The CPU seconds of the processes that hold the cluster's workers (each counted once)."""
    return sum(dict(client.run(cpu_seconds).values()).values())


def size_pass(config: RunConfig) -> Tuple[float, Any]:
    """Wall seconds of the index and size pass on the config's Dask cluster; the figures and the CPU
    seconds its workers spent."""
    started = time.perf_counter()
    with open_executor(config.dask, config.jobs, config.codec_timeout, quiet) as executor:
        cpu = workers_cpu(executor.client)
        run = run_size_pass(make_plan(config, config.registry(), quiet), executor)
        cpu = workers_cpu(executor.client) - cpu
    return time.perf_counter() - started, ([(t.codec.name, sorted(t.sizes.items()), t.failures) for t in run.tallies],
                                           cpu)


def dask_against_forks(traces: List[str], args: argparse.Namespace) -> None:
    """Figure 1: a --sizes-only run with --jobs 2 and with --dask local:2."""
    config = RunConfig(trace=traces[0], traces=tuple(traces), codecs=tuple(args.codecs.split(",")), sizes_only=True,
                       jobs=2, chunk_calls=args.chunk_calls)
    got = side_by_side({"forks --jobs 2": lambda: whole_run(config),
                        "dask local:2": lambda: whole_run(dataclasses.replace(config, dask="local:2"))}, args.rounds)
    forks, dask = got["forks --jobs 2"], got["dask local:2"]
    print(_common.table(["executor", "wall s (median)", "load", "identical figures"],
                        [[name, f"{g['wall']:.2f}", f"{g['load']:.1f}", "yes" if g["figures"] == forks["figures"]
                          else "NO"] for name, g in got.items()]))
    print(f"dask local:2 / forks --jobs 2: {dask['wall'] / forks['wall']:.2f}x (target: at most 1.10x)\n")


def dask_scaling(traces: List[str], args: argparse.Namespace) -> None:
    """Figure 2: the size pass on running clusters of 1 and 2 workers."""
    config = RunConfig(trace=traces[0], traces=tuple(traces), codecs=tuple(args.codecs.split(",")), sizes_only=True,
                       chunk_calls=args.chunk_calls)
    calls = sum(t.calls for t in index_traces(config, True))
    clusters = [connect(f"local:{n}") for n in (1, 2)]  # as --dask local:N starts them
    try:
        got = side_by_side({f"{n} worker(s)": (lambda c=cluster: size_pass(dataclasses.replace(
            config, dask=c.scheduler_address))) for n, (_, cluster) in zip((1, 2), clusters)}, args.rounds)
    finally:
        for client, cluster in clusters:
            client.close()
            cluster.close()
    one, two = got["1 worker(s)"], got["2 worker(s)"]
    print(_common.table(["workers", "wall s (median)", "calls/s", "workers' CPU s (last)", "load",
                         "identical figures"],
                        [[name, f"{g['wall']:.2f}", f"{calls / g['wall']:,.0f}", f"{g['figures'][1]:.1f}",
                          f"{g['load']:.1f}", "yes" if g["figures"][0] == one["figures"][0] else "NO"]
                         for name, g in got.items()]))
    print(f"1 -> 2 dask workers: {one['wall'] / two['wall']:.2f}x speed-up on {calls:,} calls (target: at least 1.8x)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--traces", type=int, default=4)
    p.add_argument("--calls", type=int, default=20_500, help="calls per trace of figure 1's fleet")
    p.add_argument("--big-calls", type=int, default=125_000, help="calls per trace of figure 2's fleet")
    p.add_argument("--codecs", default="json,msgpack,json+zlib-1,json+zlibstream-1")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--chunk-calls", type=int, default=50_000)
    p.add_argument("--cache", default="/tmp/rpcbench-fleet")
    args = p.parse_args()
    small = make_fleet(Path(args.cache) / f"{args.traces}x{args.calls}", args.traces, args.calls)
    big = make_fleet(Path(args.cache) / f"{args.traces}x{args.big_calls}", args.traces, args.big_calls)
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the start; codecs: {args.codecs}\n")
    print(f"1. {len(small)} traces of {args.calls:,} calls, --sizes-only, whole runs")
    dask_against_forks(small, args)
    print(f"2. {len(big)} traces of {args.big_calls:,} calls, the size pass on running clusters")
    dask_scaling(big, args)


if __name__ == "__main__":
    main()
