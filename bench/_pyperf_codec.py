"""pyperf worker script for bench/agreement.py (not a benchmark on its own).

    python bench/_pyperf_codec.py --trace FILE --codec-ids a,b --counts a=N,b=N [pyperf options]

One pyperf benchmark per codec and operation, named ``<codec> encode``/``<codec> decode``.
pyperf spawns the worker processes itself; each worker prepares only the codec of the
benchmark it runs: the calls of the trace that codec can encode and their payloads (as
the harness's ``TimingJob`` selects them), then ``bench/_common.py: bare_ns`` replays
them ``loops`` times between two timer reads. ``inner_loops`` is the number of calls, so
pyperf's values are seconds per call. ``--counts`` (from the harness's results) lets the
parent declare inner_loops without encoding; a worker checks it against what it prepares.
"""

from __future__ import annotations

import functools

import pyperf

import _common
from rpcbench.registry import Registry
from rpcbench.timing import TimingJob


@functools.lru_cache(maxsize=None)
def prepared(trace: str, cid: str) -> tuple:
    codec = Registry.default().create(cid)
    job = TimingJob(codec, list(_common.open_trace(trace)))
    return codec, {"encode": job.calls, "decode": job.payloads}


def time_func(loops: int, trace: str, cid: str, op: str, count: int) -> float:
    codec, items = prepared(trace, cid)
    if len(items[op]) != count:
        raise SystemExit(f"{cid}: {len(items[op])} encodable calls, the harness timed {count}")
    return _common.bare_ns(codec, items[op], loops, op) / 1e9


def main() -> None:
    def forward(cmd: list, args) -> None:
        cmd.extend(["--trace", args.trace, "--codec-ids", args.codec_ids, "--counts", args.counts])

    runner = pyperf.Runner(add_cmdline_args=forward)
    runner.argparser.add_argument("--trace", required=True)
    runner.argparser.add_argument("--codec-ids", required=True)
    runner.argparser.add_argument("--counts", required=True)
    args = runner.parse_args()
    counts = dict(item.split("=") for item in args.counts.split(","))
    for cid in args.codec_ids.split(","):
        for op in ("encode", "decode"):
            runner.bench_time_func(f"{cid} {op}", time_func, args.trace, cid, op, int(counts[cid]),
                                   inner_loops=int(counts[cid]))


if __name__ == "__main__":
    main()
