"""Timing in fresh processes, interleaved: one live forked process per codec, driven round-robin.

The parent starts one *zygote*, ``python -m rpcbench.worker FD``, as its timing begins and sends it the
run's :class:`~rpcbench.config.RunConfig` and codecs. The zygote sets up the
codecs from that config as the parent did (plugin files, proto schemas) while the parent looks at the CPUs
and draws the sample; then it gets the timing plan and reads the
timing sample once; no codec has run in it. Then, for each of
``processes`` generations, it forks one child per codec. Each child encodes the sample
with its codec, warms up and calibrates it, then waits; the zygote tells the children
in turn to run one round (the order rotating each round), so machine drift
hits every codec alike while each codec's heap, caches and garbage stay in its own
process. With one timing lane (``--timing-lanes 1``) only one child runs at a time; with
two or more, each lane is pinned to a CPU of its own and plays its children one after
another while the other lanes play theirs: the codecs are paired anew each cycle and
every codec spends as many rounds on each CPU (:func:`rpcbench.timing.lane_turns`), so a
neighbour's cost and a CPU's speed hit every codec alike too. Each child runs in a session of
its own: Linux's autogroup scheduling shares the CPUs between sessions, and two lanes in one
session would split one session's share on a busy machine. At the end each child sends
its figures (plus tails and allocations, in the first generation, in the same lanes as
the rounds, as is the warm-up) and exits, and the next generation starts from the pristine zygote again.

Protocol: the parent starts the zygote as ``python -m rpcbench.worker FD`` with its
stdout on /dev/null and writes ``pickle.dumps((config, codec ids))`` to its stdin, later
``pickle.dumps((sample path, plan))``; the zygote
answers on file descriptor FD, a pipe of its own that codec output cannot reach:
``progress <phase>|<done>|<total>|<text>`` lines and finally one JSON line ``{"generations": [{codec: result}],
"interrupted": bool}``. Each child answers the zygote on its own pipe; a child that
does not answer a command within ``plan["codec_timeout"]`` seconds is killed, one that
dies is reaped, one that prints is stopped, and either is that codec's error only.
On SIGINT (Ctrl-C) the zygote finishes the round under way, collects what each child
has measured so far (no tails or allocations) and answers with ``interrupted: true``.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import pickle
import signal
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from rpc_capture import open_trace

from .config import RunConfig
from .errors import BenchError
from .isolation import CodecTimeout, read_line, reap, silence_stdout, stray_output
from .timing import LaneSchedule, TimingJob, stopped
from .progress import Progress

REPO = Path(__file__).resolve().parent.parent
BUSY_WINDOW_S = 0.5  #: how long the run looks at what else the CPUs do before it times codecs two at a time
BUSY_LIMIT = 0.25  #: CPUs' worth of other work from which the default times one codec at a time instead
_interrupted = False  #: set by SIGINT in the zygote: finish the round, then answer with what there is


def available() -> bool:
    """Process isolation needs ``fork`` (POSIX)."""
    return hasattr(os, "fork")


class Zygote:
    """The parent's handle on the zygote process: start it, send it the sample and the plan, pass Ctrl-C on,
    end it. It runs in a session of its own, so the terminal's Ctrl-C reaches this process only; it is passed
    on once the zygote said it is ready to stop softly (it then answers with what was measured). A second
    Ctrl-C stops everything at once. A run started with SIGINT ignored (a background job of a script) keeps
    ignoring it, as the in-process timing does: Python installs no KeyboardInterrupt handler then."""

    def __init__(self, config: RunConfig, codecs: Sequence[str]) -> None:
        """Start the zygote now, so that it imports and makes ``codecs`` from ``config`` while the run settles its
        timing (looks at the CPUs, fits the budget, draws the sample): :meth:`time` then times them."""
        self.interrupted = False
        self._ready = False
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        read_fd, write_fd = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rpcbench.worker", str(write_fd)], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, pass_fds=(write_fd,),
            start_new_session=True)  # same cwd: same paths
        os.close(write_fd)
        self._answers = os.fdopen(read_fd, encoding="utf-8")
        assert self.proc.stdin
        self.proc.stdin.write(pickle.dumps((config, tuple(codecs))))
        self.proc.stdin.flush()

    def time(self, sample_path: str, plan: Dict[str, Any], progress: Progress
             ) -> Tuple[List[Dict[str, Dict[str, Any]]], bool]:
        """Time the sample at ``sample_path`` by ``plan``: results by codec name per process set, and whether
        Ctrl-C cut the timing short."""
        ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN if ignored else self._interrupt)
        try:
            self._send(pickle.dumps((sample_path, plan)))
            for line in self._answers:
                if line == "ready\n":
                    self._now_ready()
                elif line.startswith("progress "):
                    phase, done, total, detail = line[9:].rstrip("\n").split("|", 3)
                    progress(phase, detail, int(done), int(total))
                else:
                    reply = json.loads(line)
                    return reply["generations"], self.interrupted or reply["interrupted"]
        except KeyboardInterrupt:
            self.proc.kill()
            raise
        finally:
            self.proc.wait()
            signal.signal(signal.SIGINT, previous)
        raise BenchError(f"timing worker exited without results (status {self.proc.returncode})")

    def _send(self, data: bytes) -> None:
        """The last of the zygote's input; one that has ended already is told by its answers (none)."""
        assert self.proc.stdin
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.close()
        except BrokenPipeError:
            pass

    def cpu_seconds(self) -> float:
        """CPU time the zygote has used so far (:func:`cpu_seconds_of`)."""
        return cpu_seconds_of(self.proc.pid)

    def close(self) -> None:
        """Stop the zygote if it is still there (the run ended before or during its timing)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._answers.close()

    def _interrupt(self, *_: Any) -> None:
        """SIGINT handler: the first asks the zygote to stop softly, the second stops now."""
        if self.interrupted:
            raise KeyboardInterrupt
        self.interrupted = True
        if self._ready:
            self.proc.send_signal(signal.SIGINT)

    def _now_ready(self) -> None:
        """The zygote handles SIGINT from now on (pass on one that came before)."""
        self._ready = True
        if self.interrupted:
            self.proc.send_signal(signal.SIGINT)


class Child:
    """The zygote's handle on one forked codec process: send a command, read one JSON reply in time."""

    def __init__(self, codec: str, make_job: Callable[[], TimingJob], plan: Dict[str, Any]) -> None:
        to_child, self._to_child = os.pipe()
        self._from_child, from_child = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            try:  # whatever happens, the child never returns into the zygote's code
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # the zygote decides what Ctrl-C stops
                os.setsid()  # a session, so an autogroup, of its own: lanes do not split one share of a busy machine
                for fd in (self._to_child, self._from_child, plan["channel"]):
                    os.close(fd)
                _child_loop(make_job, plan, os.fdopen(to_child), os.fdopen(from_child, "w"))
            finally:
                os._exit(0)
        os.close(to_child)
        os.close(from_child)
        self.codec = codec
        self.timeout = plan["codec_timeout"]
        self._pending = bytearray()
        self._alive = True
        self._broken = False  #: the child's command pipe closed: it died
        self._command, self._deadline = "", 0.0
        self.cpus: List[Optional[int]] = []  #: the CPU each timed round ran on, as the child saw it

    def send(self, command: str) -> None:
        """Send a command (warmup, round, finish, result) without waiting: its reply is :meth:`receive`'s, due
        within the codec timeout."""
        self._command, self._deadline = command, time.monotonic() + self.timeout
        try:
            os.write(self._to_child, (command + "\n").encode())
        except BrokenPipeError:
            self._broken = True

    def receive(self) -> Dict[str, Any]:
        """The reply to the command sent; silence past its deadline or death is answered as an error."""
        try:
            left = max(self._deadline - time.monotonic(), 0.01)  # a reply already there is read, however late
            reply = b"" if self._broken else read_line(self._from_child, left, self._pending)
        except CodecTimeout:
            self._alive = False
            reap(self.pid, kill=True)
            return {"error": f"timed out in {self._command}: no answer within {self.timeout:g} s (--codec-timeout)"}
        if reply:
            return json.loads(reply)
        self._alive = False
        return {"error": f"timing stopped in {self._command}: {reap(self.pid)}"}

    def fileno(self) -> int:
        """The pipe its replies come on (for ``select``)."""
        return self._from_child

    @property
    def deadline(self) -> float:
        """When the reply to the command sent is due (``time.monotonic``)."""
        return self._deadline

    def close(self) -> None:
        """Let the child exit and reap it."""
        os.close(self._to_child)
        os.close(self._from_child)
        if self._alive:
            reap(self.pid)


def _child_loop(make_job: Callable[[], TimingJob], plan: Dict[str, Any], commands: Any, replies: Any) -> None:
    """In the child: build the codec's timing job (encoding the sample here, not in the
    zygote), then obey warmup / round / finish until told to finish or the pipe closes.
    A codec that prints is stopped: its figures would include the output."""
    captured = silence_stdout()
    job: Optional[TimingJob] = None
    for command in commands:
        try:
            job = job or make_job()
            answer = _obey(job, plan, command.strip())
        except BaseException as e:  # reported as this codec's error; the others carry on
            answer = {"error": stopped(e)}
        printed = stray_output(captured)
        if printed:
            answer = {"error": printed}
        replies.write(json.dumps(answer) + "\n")
        replies.flush()
        if command.strip() in ("finish", "result") or "error" in answer:
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
        return {"cpu": _cpu()}
    if command == "finish" and plan["first_generation"]:
        return dict(job.finish(plan["tails"], plan["memory"], plan["memory_calls"]))
    return dict(job.result())


def _cpu() -> Optional[int]:
    """The CPU this process last ran on (Linux: field 39 of ``/proc/self/stat``), None where the system cannot say."""
    try:
        with open("/proc/self/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def _generation(codecs: Dict[str, Any], sample: list, plan: Dict[str, Any], generation: int,
                say: Callable[[str], None]) -> Dict[str, Dict]:
    """One child per codec, warmed up, then ``repeat`` interleaved rounds, then each one's answer; each phase in
    the lanes (one child per lane at a time, pinned to the lane's CPU)."""
    plan = dict(plan, first_generation=generation == 0)
    children: List[Child] = []  # in the codecs' order, the ones that failed their warm-up taken out
    answers: Dict[str, Dict[str, Any]] = {}
    tag = f"process set {generation + 1}/{plan['processes']}: " if plan["processes"] > 1 else ""
    n, cpus = len(plan["codecs"]), plan["cpus"]

    def step(phase: str, done: int, total: int, detail: str) -> None:
        say(f"progress {phase}|{done}|{total}|{tag}{detail}")

    def warm_up(at: int, name: str, lane: int) -> Child:
        step("timing: warm-up", generation * n + at, plan["processes"] * n, name)
        child = Child(name, functools.partial(TimingJob, codecs[name], sample, gc_enabled=plan["gc"],
                                              packets=plan.get("packets")), plan)
        children.append(child)
        return _sent(child, "warmup", cpus, lane)

    def warmed(child: Child, reply: Dict[str, Any]) -> None:
        if "error" in reply:
            answers[child.codec] = reply
            children.remove(child)
            child.close()

    def finish(at: int, child: Child, lane: int) -> Child:
        step("tails and allocations" if plan["first_generation"] else "timing: results", at, len(children),
             child.codec)
        return _sent(child, "result" if _interrupted else "finish", cpus, lane)

    def finished(child: Child, answer: Dict[str, Any]) -> None:
        answers[child.codec] = answer if answer.get("error") else dict(answer, cpus=child.cpus)

    try:
        _in_lanes(plan["codecs"], max(1, len(cpus)), warm_up, warmed, go_on=lambda: not _interrupted)
        _play_rounds(children, plan, answers,
                     lambda r, turns, codec: step("timing: rounds", generation * plan["repeat"] * n + turns,
                                                 plan["processes"] * plan["repeat"] * n,
                                                 f"round {r + 1}/{plan['repeat']}: {codec}"))
        _in_lanes([c for c in children if c.codec not in answers], max(1, len(cpus)), finish, finished)
    finally:
        for child in children:
            child.close()
    return answers


def _in_lanes(items: Sequence[Any], lanes: int, start: Callable[[int, Any, int], "Child"],
              done: Callable[["Child", Dict[str, Any]], None], go_on: Callable[[], bool] = lambda: True) -> None:
    """One command per item, ``lanes`` at a time: ``start(position, item, lane)`` sends it and gives the child that
    answers, ``done(child, reply)`` takes each reply as it comes (the warm-up, and the answers after the rounds);
    no item starts once ``go_on()`` turns false."""
    waiting, positions = list(items), itertools.count()

    def next_command(lane: int) -> Optional[Child]:
        return start(next(positions), waiting.pop(0), lane) if waiting and go_on() else None

    _keep_lanes_busy(lanes, next_command, done)


def _keep_lanes_busy(lanes: int, next_command: Callable[[int], Optional["Child"]],
                     done: Callable[["Child", Dict[str, Any]], None]) -> None:
    """The lanes' one loop: each free lane asks ``next_command(lane)`` to send its next command (the child that will
    answer, or None: nothing for that lane now), ``done(child, reply)`` takes each reply as it comes (a reply
    overdue is an error), until no lane has a command under way."""
    running: Dict[Child, int] = {}  # child -> its lane
    while True:
        for lane in range(lanes):
            if lane not in running.values():
                child = next_command(lane)
                if child is not None:
                    running[child] = lane
        if not running:
            return
        child = _next_reply(list(running))
        del running[child]
        done(child, child.receive())


def _sent(child: "Child", command: str, cpus: Sequence[int], lane: int) -> "Child":
    """``child`` pinned to its lane's CPU (with lanes), sent ``command``."""
    if cpus:
        _pin(child.pid, cpus[lane])
    child.send(command)
    return child


def _play_rounds(children: List[Child], plan: Dict[str, Any], answers: Dict[str, Dict[str, Any]],
                 started: Callable[[int, int, str], None]) -> None:
    """``repeat`` rounds of the live children in lanes (:class:`rpcbench.timing.LaneSchedule`): one lane plays one
    child at a time; with ``plan["cpus"]``, lane ``i`` runs on the ``i``-th of them (each child's affinity set
    before its turn) and the lanes play at the same time. A child that fails is answered with its error and out;
    on Ctrl-C no turn starts, the turns under way finish."""
    cpus = plan["cpus"]
    schedule = LaneSchedule(children, plan["repeat"], max(1, len(cpus)))
    turns = itertools.count()  # turns started

    def next_turn(lane: int) -> Optional[Child]:
        turn = None if _interrupted else schedule.next_turn(lane)
        if turn is None:
            return None
        child, r = turn
        started(r, next(turns), child.codec)
        return _sent(child, "round", cpus, lane)

    def played(child: Child, reply: Dict[str, Any]) -> None:
        schedule.played(child, "error" not in reply)
        if "error" in reply:
            answers[child.codec] = reply
        else:
            child.cpus.append(reply.get("cpu"))

    _keep_lanes_busy(schedule.lanes, next_turn, played)


def _pin(pid: int, cpu: int) -> None:
    """Run process ``pid`` on ``cpu`` only (one that is gone: its next answer says so)."""
    try:
        os.sched_setaffinity(pid, {cpu})
    except ProcessLookupError:
        pass


def _next_reply(running: List[Child]) -> Child:
    """The first of the running children whose reply came, or whose reply is overdue."""
    while True:
        due = min(running, key=lambda child: child.deadline)
        left = due.deadline - time.monotonic()
        if left <= 0:
            return due
        ready = select.select(running, [], [], left)[0]
        if ready:
            return ready[0]


def lane_cpus(lanes: int) -> Tuple[int, ...]:
    """The CPUs the timing lanes run on: the first ``lanes`` this process may use; none for one lane (unpinned,
    as a lone child runs wherever the system puts it)."""
    if lanes < 2:
        return ()
    return tuple(sorted(os.sched_getaffinity(0))[:lanes])


def usable_cpus() -> int:
    """CPUs this process may run on (``os.sched_getaffinity``; 1 where the system cannot say)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1


def cpu_seconds_of(pid: int) -> float:
    """CPU time process ``pid`` has used so far, its own (Linux ``/proc``; 0 where the system cannot say)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    except (OSError, ValueError, IndexError):
        return 0.0


def busy_cpus(seconds: float = BUSY_WINDOW_S, ours: Callable[[], float] = lambda: 0.0,
              meanwhile: Callable[[], None] = lambda: None) -> Optional[float]:
    """CPUs' worth of work done by others over ``seconds`` while this run waits (``/proc/stat``: every state but
    idle and iowait, steal included, as a VM's host taking the CPU is as busy as a process); None where the
    system cannot say. What this process and ``ours()`` (CPU seconds so far of the run's other processes: the
    zygote, making its codecs meanwhile) use is not counted: this process does ``meanwhile`` (the caller's work:
    imports) instead of sleeping, for ``seconds`` or as long as it takes (others then get their share of the CPUs
    beside it, not all of them: work that would take a CPU may read under one). Two lanes need the CPUs to themselves:
    beside other work each is stuck on its own CPU with it, where one codec at a time runs on whichever CPU is
    free (docs/methodology.md, timing lanes)."""
    def ticks() -> Tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:9]]  # user .. steal (guest time is in user already)
        total = sum(fields)
        return total - fields[3] - fields[4], total
    try:
        (busy0, all0), own0, start = ticks(), sum(os.times()[:4]) + ours(), time.monotonic()
        meanwhile()
        time.sleep(max(0.0, seconds - (time.monotonic() - start)))
        (busy1, all1), own1, elapsed = ticks(), sum(os.times()[:4]) + ours(), time.monotonic() - start
    except (OSError, ValueError, IndexError):
        return None
    if all1 <= all0:
        return None
    cpus = os.cpu_count() or 1
    return max(0.0, cpus * (busy1 - busy0) / (all1 - all0) - (own1 - own0) / elapsed)


def _stop_softly(*_: Any) -> None:
    global _interrupted
    _interrupted = True


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the zygote process: ``FD``, then on stdin the pickled (config, codec ids), whose codecs it
    makes at once, and later the pickled (sample path, plan)."""
    signal.signal(signal.SIGINT, _stop_softly)
    argv = list(sys.argv[1:] if argv is None else argv)
    channel_fd = int(argv[0])
    with os.fdopen(channel_fd, "w", encoding="utf-8") as channel:

        def say(line: str) -> None:
            channel.write(line + "\n")
            channel.flush()

        say("ready")
        config, ids = pickle.load(sys.stdin.buffer)  # from the parent, which started this process
        registry = config.registry()
        made = {cid: registry.create(cid) for cid in ids}
        sample_path, plan = pickle.load(sys.stdin.buffer)  # once the parent has drawn the sample
        plan = dict(plan, channel=channel_fd, cpus=lane_cpus(plan["lanes"]))
        codecs = {cid: made[cid] for cid in plan["codecs"]}
        sample = list(open_trace(sample_path))
        generations = []
        for g in range(plan["processes"]):
            if not _interrupted:
                generations.append(_generation(codecs, sample, plan, g, say))
        say(json.dumps({"generations": generations, "interrupted": _interrupted}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
