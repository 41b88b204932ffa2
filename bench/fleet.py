"""Fleet scaling: the size and fidelity pass of a simulated fleet on 1, 2 and 4 local Dask workers.

    python bench/fleet.py [--traces 20] [--calls 250000] [--workers 1,2,4] [--codecs LIST]
                          [--chunk-calls 50000] [--cache DIR]

The fleet is ``--traces`` simulated battles (``run_bench.py simulate --seed 1..N``) of
``--calls`` calls each, cached in ``--cache`` (default /tmp/rpcbench-fleet/). For each worker
count a fresh ``LocalCluster`` (one thread per worker process) runs the size pass of
``run_bench.py --trace FOLDER --dask local:N --sizes-only`` through the library
(``rpcbench.fleet.FleetPass``). Printed per worker count: wall time of the pass, calls per
second, the peak RSS of each worker process (``ru_maxrss``, read in the worker after the
run), the workers' CPU seconds together (the work itself; on a shared machine the wall time
also holds the waits for a CPU), the machine's load, the speed-up over one worker, and
whether the merged figures are identical to the first run's (they must be).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import _common
from rpcbench.config import RunConfig
from rpcbench.fleet import Executor, FleetPass, resolve_traces
from rpcbench.progress import quiet


def make_fleet(folder: Path, traces: int, calls: int) -> List[str]:
    """The fleet's trace files, simulated on first use."""
    folder.mkdir(parents=True, exist_ok=True)
    for seed in range(1, traces + 1):
        path = folder / f"server-{seed:03d}.rpct"
        if not path.exists():
            part = folder / f".part-{seed}.rpct"
            subprocess.run([sys.executable, str(_common.REPO / "run_bench.py"), "simulate", "--calls", str(calls),
                            "--seed", str(seed), "--out", str(part)], check=True, stdout=subprocess.DEVNULL)
            part.rename(path)
    return resolve_traces([str(folder)])


def worker_usage() -> tuple:
    """(peak resident set MB, CPU seconds) of this process (run inside each worker)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def run_on(workers: int, config: RunConfig, traces: List[str]) -> Dict[str, Any]:
    """One size pass on a fresh LocalCluster of ``workers`` processes: wall s, peak RSS per worker, figures."""
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        codecs, _ = config.create_codecs(config.registry())
        fleet = FleetPass(dataclasses.replace(config, dask=cluster.scheduler_address), codecs, traces)
        started = time.perf_counter()
        with Executor(fleet.config.dask, quiet) as executor:
            fleet.run(executor)
        wall = time.perf_counter() - started
        usage = list(client.run(worker_usage).values())
    figures = [(t.codec.name, sorted(t.sizes.items()), t.failures, t.mismatches) for t in fleet.tallies]
    return {"wall": wall, "rss": sorted(mb for mb, _ in usage), "cpu": sum(s for _, s in usage),
            "figures": figures, "calls": fleet.stats.calls, "load": os.getloadavg()[0]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--traces", type=int, default=20)
    p.add_argument("--calls", type=int, default=250_000)
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--codecs", default="json,msgpack,json+zlib-1,json+zstd-3,json+zlibstream-1")
    p.add_argument("--chunk-calls", type=int, default=50_000)
    p.add_argument("--cache", default="/tmp/rpcbench-fleet")
    args = p.parse_args()
    t0 = time.perf_counter()
    traces = make_fleet(Path(args.cache) / f"{args.traces}x{args.calls}", args.traces, args.calls)
    print(f"fleet: {len(traces)} traces of {args.calls:,} calls ({time.perf_counter() - t0:.0f} s to make or find)")
    config = RunConfig(trace=traces[0], traces=tuple(traces), codecs=tuple(args.codecs.split(",")),
                       sizes_only=True, chunk_calls=args.chunk_calls)
    rows, first = [], None
    for n in (int(w) for w in args.workers.split(",")):
        run = run_on(n, config, traces)
        first = first or run
        speedup = first["wall"] / run["wall"]
        rows.append([n, f"{run['wall']:.1f}", f"{run['calls'] / run['wall']:,.0f}",
                     " ".join(f"{mb:.0f}" for mb in run["rss"]), f"{run['cpu']:.0f}", f"{run['load']:.1f}",
                     f"{speedup:.2f}x", "yes" if run["figures"] == first["figures"] else "NO"])
        print(f"  {n} worker(s): {run['wall']:.1f} s", flush=True)
    print(f"codecs: {args.codecs}; chunks of {args.chunk_calls:,} calls; {first['calls']:,} calls in all")
    print(f"machine: {os.cpu_count()} CPUs; load = 1-minute load average at the end of the run (other "
          "processes on the machine compete for the same CPUs)")
    print(_common.table(["workers", "wall s", "calls/s", "peak RSS MB per worker", "workers' CPU s", "load",
                         "speed-up vs 1", "identical figures"], rows))


if __name__ == "__main__":
    main()
