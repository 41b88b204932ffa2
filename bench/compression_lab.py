"""Compression lab: what wins on small real-time messages, on the bundled sample and a simulated trace.

    python bench/compression_lab.py [--calls 100000] [--cache DIR] [--codecs LIST] [-- RUN_BENCH OPTIONS]

For each trace (the bundled sample, then ``run_bench.py simulate --calls N --seed 7``,
cached in ``--cache``, default /tmp/rpcbench-lab/), one ``run_bench.py`` run of every
codec in ``--codecs`` (default: the per-message, per-connection, dictionary and delta
variants of json and msgpack, plus the other serializers, each skipped with one line if
its library is missing), and a table, smallest first: bytes/call, its multiple of the
trace's floor (each connection's whole stream by lzma -9), encode + decode µs per
call (medians of interleaved rounds: compare within one table, the machine drifts),
memory per connection and for 10,000, whether it needs ordered delivery, and failures plus
mismatches (declared ones included: json's bytes -> base64 are counted there).
Dictionary codecs train on the first 20 % of each trace; every codec is then measured on
the rest, so all rows of a table cover the same calls. Figures, not tests.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import _common
from rpcbench.registry import Registry

LAB_CODECS = (
    "json", "msgpack", "msgspec", "msgspec-json", "msgspec-struct", "cbor", "protobuf",
    "json+zlib-1", "json+zlib-9", "json+zstd-3", "json+brotli-5", "json+lz4-0", "msgpack+zlib-1",
    "json+zlibstream-1", "json+zstdstream-3", "msgpack+zstdstream-3", "protobuf+zstdstream-3",
    "msgspec-struct+zstdstream-3",
    "json+zstddict-3", "msgpack+zstddict-3", "protobuf+zstddict-3",
    "msgpack+delta", "msgpack+delta+zstdstream-3", "msgpack+delta+zstddict-3",
)


def available(codec_ids: list) -> list:
    """The codec ids whose plugin files loaded (one line for each that is skipped)."""
    registry = Registry.default()
    keep = []
    for cid in codec_ids:
        parts = cid.split("+")
        if parts[0] in registry.codecs and all(p.split("-")[0] in {**registry.compressors, **registry.stages}
                                               for p in parts[1:]):
            keep.append(cid)
        else:
            print(f"skipping {cid}: its library is not installed", file=sys.stderr)
    return keep


def simulated(calls: int, cache: Path) -> str:
    """A simulated battle trace of ``calls`` calls (seed 7), made once and cached."""
    path = cache / f"battle-{calls}.rpct"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, str(_common.REPO / "run_bench.py"), "simulate", "--calls", str(calls),
                        "--seed", "7", "--out", str(path)], check=True, stdout=subprocess.DEVNULL)
    return str(path)


def lab_table(suite) -> str:
    """One row per codec, smallest bytes/call first."""
    rows = []
    for r in sorted((r for r in suite.results if r.sizes), key=lambda r: r.sizes.mean):
        cpu = f"{r.encode.median_us + r.decode.median_us:.2f}" if r.encode and r.decode else "-"
        rows.append([r.codec, f"{r.sizes.mean:.1f}", f"{r.floor_ratio:.2f}x" if r.floor_ratio else "-", cpu,
                     f"{r.state_bytes_per_conn:,}", f"{r.state_bytes_for(10_000) / 1e6:,.1f}",
                     "yes" if r.ordered_delivery else "", f"{r.failures + r.mismatches:,}"])
    floor = suite.trace.get("floor") or {}
    head = (f"{suite.trace['path']}: {suite.trace['calls']:,} calls measured, floor "
            f"{floor.get('bytes_per_call', 0):.1f} B/call")
    return head + "\n" + _common.table(
        ["codec", "B/call", "x floor", "enc+dec µs", "state B/conn", "10k conns MB", "ordered", "fail+mism"], rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=100_000, help="calls of the simulated trace (default: 100000)")
    p.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "rpcbench-lab"))
    p.add_argument("--codecs", default=",".join(LAB_CODECS))
    p.add_argument("extra", nargs="*", help="more run_bench.py options, after --")
    args = p.parse_args()
    codecs = ",".join(available(args.codecs.split(",")))
    traces = [_common.BUNDLED_TRACE, simulated(args.calls, Path(args.cache))]
    print(_common.cpu_note())
    with tempfile.TemporaryDirectory() as tmp:
        for i, trace in enumerate(traces):
            options = ["--trace", trace, "--codecs", codecs, "--no-report", "--no-tails", "--no-memory", "--quiet"]
            suite, wall = _common.run_bench(options + args.extra, os.path.join(tmp, str(i)))
            print(f"\n{lab_table(suite)}\n({wall:.0f} s)")


if __name__ == "__main__":
    main()
