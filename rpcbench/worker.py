"""Timing in fresh processes (``--processes N``): one forked child per codec and repetition.

The parent starts one *zygote*, ``python -m rpcbench.worker SAMPLE -- <the run's options>``.
The zygote sets up the codecs from the same options as the parent (plugin files, proto
schemas) and reads the timing sample once; no codec has run in it. For each job it is
sent (one JSON line on stdin) it forks a child that times one codec and writes one JSON
line back; the child then exits, taking that codec's heap state, caches and garbage with
it, so the next codec starts from the same pristine state. Jobs run one at a time: on a
small machine, parallel timing would measure contention.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional

from rpc_capture import open_trace

from .errors import BenchError
from .timing import TimingJob

REPO = Path(__file__).resolve().parent.parent


def available() -> bool:
    """Process isolation needs ``fork`` (POSIX)."""
    return hasattr(os, "fork")


class WorkerPool:
    """The parent's handle on the zygote: ``run(job)`` returns the child's result."""

    def __init__(self, sample_path: str, argv: List[str]) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "rpcbench.worker", sample_path, "--", *argv],
            cwd=str(REPO), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        ready = self._proc.stdout.readline() if self._proc.stdout else ""
        if not ready.startswith("ready"):
            self.close()
            raise BenchError(f"timing worker failed to start ({ready.strip() or 'no answer'})")

    def run(self, job: Dict[str, Any]) -> Dict[str, Any]:
        """Send one job, wait for its result."""
        assert self._proc.stdin and self._proc.stdout
        self._proc.stdin.write(json.dumps(job) + "\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise BenchError("timing worker exited unexpectedly")
        return json.loads(line)

    def close(self) -> None:
        """Stop the zygote (end of input is its signal)."""
        if self._proc.stdin:
            self._proc.stdin.close()
        self._proc.wait(timeout=30)

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_job(job: Dict[str, Any], codecs: Dict[str, Any], sample: list) -> Dict[str, Any]:
    """Time one codec as the job says; returns the plain-JSON result (runs in the child)."""
    timing = TimingJob(codecs[job["codec"]], sample, gc_enabled=job["gc"])
    if timing.error:
        return timing.result()
    for r in range(job["warmup"] + job["repeat"]):
        timing.run_round(record=r >= job["warmup"])
        if r == job["warmup"] - 1:
            timing.calibrate(job["min_time"])
    result = timing.result()
    if job.get("tails"):
        result["latency"] = timing.tails()
    if job.get("memory"):
        result["memory"] = timing.memory()
    return result


def _serve(codecs: Dict[str, Any], sample: list) -> None:
    """The zygote's loop: one forked child per job line, its answer relayed as one line."""
    print("ready", flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: time, answer, vanish
            os.close(read_fd)
            try:
                answer = run_job(job, codecs, sample)
            except BaseException as e:  # reported to the parent as this codec's error
                answer = {"error": f"timing stopped: {type(e).__name__}: {e}", "trace": traceback.format_exc()}
            with os.fdopen(write_fd, "w") as out:
                out.write(json.dumps(answer))
            os._exit(0)
        os.close(write_fd)
        with os.fdopen(read_fd) as inp:
            answer_text = inp.read()
        _, status = os.waitpid(pid, 0)
        if not answer_text:
            answer_text = json.dumps({"error": f"timing worker died (wait status {status})"})
        print(answer_text, flush=True)


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the zygote process: ``SAMPLE -- OPTIONS``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    sample_path, options = argv[0], argv[2:]
    from .bench_cmd import build_parser, create_codecs, setup

    args = build_parser().parse_args(options)
    registry = setup(args)
    codecs = {codec.name: codec for codec in create_codecs(registry, args.codecs, announce=False)}
    sample = list(open_trace(sample_path))
    _serve(codecs, sample)
    return 0


if __name__ == "__main__":
    sys.exit(main())
