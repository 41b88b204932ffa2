"""Timing in fresh processes, interleaved: one live forked process per codec, driven round-robin.

The parent starts one *zygote*, ``python -m rpcbench.worker SAMPLE -- <the run's options>``.
The zygote sets up the codecs from the same options as the parent (plugin files, proto
schemas) and reads the timing sample once; no codec has run in it. Then, for each of
``processes`` generations, it forks one child per codec. Each child encodes the sample
with its codec, warms up and calibrates it, then waits; the zygote tells the children
in turn to run one round (the starting codec rotating each round), so machine drift
hits every codec alike while each codec's heap, caches and garbage stay in its own
process. Only one child runs at a time: on a small machine, parallel timing would
measure contention. At the end each child sends its figures (plus tails and
allocations, in the first generation) and exits, and the next generation starts from
the pristine zygote again.

Protocol: the parent sends one JSON line (the plan) on the zygote's stdin; the zygote
answers ``progress <text>`` lines and finally one JSON line ``{codec: result}``.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from rpc_capture import open_trace

from .errors import BenchError
from .timing import TimingJob

REPO = Path(__file__).resolve().parent.parent


def available() -> bool:
    """Process isolation needs ``fork`` (POSIX)."""
    return hasattr(os, "fork")


def time_in_processes(sample_path: str, argv: List[str], plan: Dict[str, Any],
                      progress: Callable[[str], None]) -> List[Dict[str, Dict[str, Any]]]:
    """Run the plan in a zygote started with the run's options; results by codec name, per process set."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, "-m", "rpcbench.worker", sample_path, "--", *argv],
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # same cwd: same paths
    assert proc.stdin and proc.stdout
    try:
        proc.stdin.write(json.dumps(plan) + "\n")
        proc.stdin.close()
        for line in proc.stdout:
            if line.startswith("progress "):
                progress(line[9:].rstrip("\n"))
            else:
                return json.loads(line)
    finally:
        proc.wait(timeout=60)
    raise BenchError(f"timing worker exited without results (status {proc.returncode})")


class Child:
    """The zygote's handle on one forked codec process: send a command, read one JSON reply."""

    def __init__(self, codec: str, make_job: Callable[[], TimingJob], plan: Dict[str, Any]) -> None:
        to_child, self._to_child = os.pipe()
        self._from_child, from_child = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self._to_child)
            os.close(self._from_child)
            _child_loop(make_job, plan, os.fdopen(to_child), os.fdopen(from_child, "w"))
            os._exit(0)
        os.close(to_child)
        os.close(from_child)
        self.codec = codec
        self._out = os.fdopen(self._to_child, "w")
        self._in = os.fdopen(self._from_child)

    def ask(self, command: str) -> Dict[str, Any]:
        """Send a command (warmup, round, finish); a dead child answers with an error."""
        try:
            self._out.write(command + "\n")
            self._out.flush()
            reply = self._in.readline()
        except BrokenPipeError:
            reply = ""
        return json.loads(reply) if reply else {"error": f"timing process of {self.codec} died"}

    def close(self) -> None:
        """Let the child exit and reap it."""
        for f in (self._out, self._in):
            try:
                f.close()
            except BrokenPipeError:
                pass
        os.waitpid(self.pid, 0)


def _child_loop(make_job: Callable[[], TimingJob], plan: Dict[str, Any], commands: Any, replies: Any) -> None:
    """In the child: build the codec's timing job (encoding the sample here, not in the
    zygote), then obey warmup / round / finish until told to finish or the pipe closes."""
    job: Optional[TimingJob] = None
    for command in commands:
        try:
            job = job or make_job()
            answer = _obey(job, plan, command.strip())
        except BaseException as e:  # reported as this codec's error; the others carry on
            answer = {"error": f"timing stopped: {type(e).__name__}: {e}"}
        replies.write(json.dumps(answer) + "\n")
        replies.flush()
        if command.strip() == "finish" or "error" in answer:
            return


def _obey(job: TimingJob, plan: Dict[str, Any], command: str) -> Dict[str, Any]:
    if job.error:
        return {"error": job.error}
    if command == "warmup":
        for _ in range(plan["warmup"]):
            job.run_round(record=False)
        job.calibrate(plan["min_time"])
        return {"loops": job.loops}
    if command == "round":
        job.run_round(record=True, stages=len(job.rounds["encode"]) < plan["stage_rounds"])
        return {}
    result = job.result()
    if plan["first_generation"]:
        result["latency"] = job.tails() if plan["tails"] else {}
        result["memory"] = job.memory(plan["memory_calls"]) if plan["memory"] else {}
    return result


def _generation(codecs: Dict[str, Any], sample: list, plan: Dict[str, Any], generation: int) -> Dict[str, Dict]:
    """One child per codec, warmed up one after another, then ``repeat`` interleaved rounds."""
    plan = dict(plan, first_generation=generation == 0)
    children: List[Child] = []
    answers: Dict[str, Dict[str, Any]] = {}
    tag = f"process set {generation + 1}/{plan['processes']}"
    try:
        for name in plan["codecs"]:
            print(f"progress timing {tag}: warming up {name}", flush=True)
            child = Child(name, functools.partial(TimingJob, codecs[name], sample, gc_enabled=plan["gc"]), plan)
            reply = child.ask("warmup")
            if "error" in reply:
                answers[name] = reply
                child.close()
            else:
                children.append(child)
        for r in range(plan["repeat"]):
            start = r % len(children) if children else 0
            for child in children[start:] + children[:start]:
                if child.codec not in answers:
                    print(f"progress timing {tag}, round {r + 1}/{plan['repeat']}: {child.codec}", flush=True)
                    reply = child.ask("round")
                    if "error" in reply:
                        answers[child.codec] = reply
        for child in children:
            if child.codec not in answers:
                print(f"progress timing {tag}: tails and allocations of {child.codec}", flush=True)
                answers[child.codec] = child.ask("finish")
    finally:
        for child in children:
            child.close()
    return answers


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the zygote process: ``SAMPLE -- OPTIONS``, then the plan on stdin."""
    argv = list(sys.argv[1:] if argv is None else argv)
    sample_path, options = argv[0], argv[2:]
    from .bench_cmd import build_parser, create_codecs, setup

    args = build_parser().parse_args(options)
    codecs = {codec.name: codec for codec in create_codecs(setup(args), args.codecs, announce=False)}
    sample = list(open_trace(sample_path))
    plan = json.loads(sys.stdin.readline())
    generations = [_generation(codecs, sample, plan, g) for g in range(plan["processes"])]
    print(json.dumps(generations), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
