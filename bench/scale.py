"""Scale: wall time and memory of ``run_bench.py`` on traces of 100k, 1M and 5M calls.

    python bench/scale.py [--sizes 100000,1000000,5000000] [--cache DIR] [--big-codecs LIST] [-- OPTIONS]

Traces come from ``run_bench.py simulate --seed 7`` and are cached in ``--cache``
(default /tmp/rpcbench-scale/, reused when present; 5M calls take about 3 min to make).
Sizes up to ``--full-max`` (100,000) run the default codec set; larger ones run
``--big-codecs`` (json,bson,json+zlib-1), as a full set over millions of calls takes very
long: the table says which. Each run is ``run_bench.py --trace T --codecs C --no-report``
plus OPTIONS, under ``/usr/bin/time -v`` when present. Printed per size:

* wall s: the whole run; size pass s: from start to the progress line that starts the
  phase after the size and fidelity pass (the timing sample: a phase's first line prints
  at once; the floor is a task of the size pass; results.json records size_pass_s too),
  and its calls/s; timing s: the rest;
* max RSS MB: the largest single process of the tree (``time -v``; wait4 folds waited-for
  children in as a max, not a sum; fallback: ``RUSAGE_CHILDREN``);
* tree PSS MB: the peak of the summed proportional set size of every live process of
  the tree (shared copy-on-write pages split), sampled every 0.5 s from /proc.

Issue targets: 5M-call replay peak memory < 500 MB; default codec set on 100k calls < 60 s.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import _common
from rpc_capture.trace import VERSION as TRACE_VERSION

TIME = "/usr/bin/time"


def trace_for(calls: int, cache: Path, seed: int, profile: str = "study") -> Path:
    """The cached trace of ``calls`` calls of the simulator's ``profile``, generated on first use (and again
    after a trace format change)."""
    path = cache / f"{'battle' if profile == 'study' else profile}-{calls}-s{seed}-v{TRACE_VERSION}.rpct"
    if not path.exists():
        cache.mkdir(parents=True, exist_ok=True)
        part = path.with_name(path.stem + ".part.rpct")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, str(_common.REPO / "run_bench.py"), "simulate", "--calls", str(calls),
                        "--seed", str(seed), "--profile", profile, "--out", str(part)], check=True,
                       stdout=subprocess.DEVNULL)
        part.rename(path)
        print(f"generated {path} in {time.perf_counter() - t0:.0f} s", flush=True)
    return path


def tree_pss_kb(root: int) -> int:
    """Summed PSS (kB) of ``root`` and all its live descendants."""
    children: dict = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            m = re.search(r"^Pss:\s+(\d+)", Path(f"/proc/{pid}/smaps_rollup").read_text(), re.M)
            total += int(m.group(1)) if m else 0
        except OSError:
            pass
    return total


def run_one(trace: Path, codecs: str, extra: list, out: str) -> dict:
    cmd = [sys.executable, str(_common.REPO / "run_bench.py"), "--trace", str(trace), "--codecs", codecs,
           "--no-report", "--out", out, *extra]
    timed = os.access(TIME, os.X_OK)
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.Popen(([TIME, "-v"] if timed else []) + cmd, cwd=str(_common.REPO),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend((time.perf_counter() - t0, line) for line in proc.stderr))
    reader.start()
    peak_pss = 0
    while proc.poll() is None:
        peak_pss = max(peak_pss, tree_pss_kb(proc.pid) if os.path.exists("/proc/self/smaps_rollup") else 0)
        time.sleep(0.5)
    wall = time.perf_counter() - t0
    reader.join()
    text = "".join(line for _, line in lines)
    if proc.returncode:
        raise SystemExit(f"run_bench.py failed ({proc.returncode}):\n{text[-3000:]}")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    max_rss = int(m.group(1)) if m else (after if after > before else float("nan"))
    size_end = next((t for t, line in lines if line.startswith(("timing", "warning: --budget"))),
                    float("nan"))
    return {"wall": wall, "size_s": size_end, "max_rss_mb": max_rss / 1024, "pss_mb": peak_pss / 1024,
            "progress": [line.rstrip("\n") for _, line in lines]}


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="100000,1000000,5000000", help="calls per trace (default: %(default)s)")
    p.add_argument("--cache", default="/tmp/rpcbench-scale", help="trace cache folder (default: %(default)s)")
    p.add_argument("--seed", type=int, default=7, help="simulator seed (default: 7)")
    p.add_argument("--full-max", type=int, default=100000, help="largest size run with the default codec set")
    p.add_argument("--big-codecs", default="json,bson,json+zlib-1",
                   help="codecs for larger sizes (default: %(default)s)")
    args = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    print(_common.cpu_note() + ("" if os.access(TIME, os.X_OK) else "; /usr/bin/time missing: RUSAGE_CHILDREN"))
    rows = []
    for calls in (int(s) for s in args.sizes.split(",")):
        trace = trace_for(calls, Path(args.cache), args.seed)
        full = calls <= args.full_max
        codecs = _common.DEFAULT_IDS if full else args.big_codecs
        with tempfile.TemporaryDirectory() as tmp:
            r = run_one(trace, codecs, extra, tmp)
            n = _common.results.load(tmp).trace["calls"]
        label = f"default ({len(codecs.split(','))})" if full else codecs
        rows.append([f"{n:,}", label, f"{r['wall']:.1f}", f"{r['size_s']:.0f}", f"{n / r['size_s']:,.0f}",
                     f"{r['wall'] - r['size_s']:.0f}", f"{r['max_rss_mb']:.0f}", f"{r['pss_mb']:.0f}"])
        print(f"  {n:,} calls: {r['wall']:.0f} s", flush=True)
    print()
    print(_common.table(["calls", "codecs", "wall s", "size pass s", "size calls/s", "timing+rest s",
                         "max RSS MB", "tree PSS MB"], rows))
    print(f"\nsizes above {args.full_max:,} calls use --codecs {args.big_codecs} (a full default set takes too long); "
          f"extra options: {' '.join(extra) or 'none'}")
    print("targets: 5M calls peak memory < 500 MB; default codec set on 100k calls < 60 s wall")


if __name__ == "__main__":
    main()
