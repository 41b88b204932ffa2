"""The progress line of a long run: the size pass counts the trace's calls, so both displays (rich bars on a
terminal, plain lines in a pipe) show calls/s and the time left, on real traces."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import time
from typing import Any, List, Tuple

import pytest

from rpc_capture import TraceWriter, open_trace
from rpcbench.commands.progress import ProgressDisplay, clock, eta_of, plain_line, rate_of
from rpcbench.config import DEFAULT_TRACE, RunConfig
from rpcbench.executors import report
from rpcbench.watch import calls_of, share_done
from rpcbench.pipeline import run_benchmark
from rpcbench.pieces import FloorTask, PieceTask, plan_pieces
from rpcbench.trace_index import index_trace
from rpcbench.registry import Registry

CALLS = sum(1 for _ in open_trace(str(DEFAULT_TRACE)))


class Span:
    """A task that says only which calls it goes through."""

    def __init__(self, first: int, calls: int) -> None:
        self.span = (first, calls)


def test_share_done_counts_finished_tasks_and_each_running_one_up_to_its_beat() -> None:
    tasks = [Span(0, 600), Span(600, 400), Span(0, 1000)]
    total = calls_of(tasks)
    assert total == 2000
    assert share_done(0, [], total) == 0
    assert share_done(600, [(tasks[1], 699), (tasks[2], 499)], total) == pytest.approx((600 + 100 + 500) / 2000)
    assert share_done(0, [(tasks[1], -1)], total) == 0  # a beat not yet at its first call
    assert share_done(total, [], total) == 1
    assert share_done(0, [], calls_of([Span(0, 0)])) is None  # nothing counts its calls: progress in tasks


def test_the_pieces_of_a_trace_cover_its_calls_once_per_group_of_codecs(tmp_path: Any) -> None:
    """Each piece says which calls it reads; with the stateless codecs split into chunks and the stateful
    ones over the whole trace, every call is counted once per group, so the share done is the calls' share."""
    path = tmp_path / "t.rpct"
    with TraceWriter(str(path)) as writer:
        for call in open_trace(str(DEFAULT_TRACE)):
            writer.write(call)
    index = index_trace(str(path), False, 4096, True)
    assert len(index.cuts) > 2 and index.calls == CALLS
    registry = Registry.default()
    codecs = [registry.create(name) for name in ("json", "msgpack", "json+zstdstream-3")]
    pieces = plan_pieces([index], codecs, 2)
    chunked = [p for p in pieces if p.start is not None]
    assert sum(p.calls for p in chunked) == CALLS
    assert [(p.first_call, p.calls) for p in chunked] == sorted((p.first_call, p.calls) for p in chunked)
    assert all(p.calls == CALLS for p in pieces if p.start is None)
    config = RunConfig(trace=str(path))
    assert PieceTask(config, chunked[1], None).span == (chunked[1].first_call, chunked[1].calls)  # type: ignore
    assert FloorTask(config, 0, str(path), None).span == (0, 0)  # type: ignore


def test_progress_is_in_calls_until_they_are_all_read_while_a_task_still_runs() -> None:
    seen: List[Tuple[str, str, float, float, str]] = []

    def progress(phase: str, detail: str = "", done: float = 0, total: float = 0, unit: str = "") -> None:
        seen.append((phase, detail, done, total, unit))

    report(progress, "size pass: reading", (1, 4, ""), 0.5, 20000)
    report(progress, "size pass: reading", (3, 4, ""), 1.0, 20000)  # the floor still compresses: no ETA of 0 s
    report(progress, "size pass: reading", (4, 4, ""), 1.0, 20000)
    report(progress, "size pass: reading", (2, 4, " on dask"), None, 20000)  # calls not counted: tasks
    assert seen == [("size pass: reading", "1 of 4 tasks", 10000, 20000, "calls"),
                    ("size pass: reading", "3 of 4 tasks, every call read", 0, 0, ""),
                    ("size pass: reading", "4 of 4 tasks", 20000, 20000, "calls"),
                    ("size pass: reading", "2 of 4 tasks on dask", 2, 4, "")]


@pytest.mark.parametrize("jobs", [0, 2])
def test_the_size_pass_reports_the_trace_s_calls_done_up_to_all_of_them(jobs: int) -> None:
    seen: List[Tuple[str, float, float, str]] = []

    def progress(phase: str, detail: str = "", done: float = 0, total: float = 0, unit: str = "") -> None:
        seen.append((phase, done, total, unit))

    run_benchmark(RunConfig(trace=str(DEFAULT_TRACE), codecs=("json", "msgpack"), sizes_only=True, floor=False,
                            memory=False, tails=False, processes=0, jobs=jobs), progress)
    reading = [(done, total, unit) for phase, done, total, unit in seen if phase == "size pass: reading"]
    assert reading and all(unit == "calls" and total == CALLS for _, total, unit in reading)
    dones = [done for done, _, _ in reading]
    assert dones == sorted(dones) and dones[-1] == pytest.approx(CALLS)


def test_plain_lines_give_calls_per_second_and_the_time_left() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream=stream, interval=0.0)
    display("size pass: reading", "0 of 3 tasks", 0, 20000, "calls")
    display._started["size pass: reading"] -= 2.0  # two seconds in
    display("size pass: reading", "1 of 3 tasks", 5000, 20000, "calls")
    display("timing", "rounds: json", 3, 12)
    first, second, third = stream.getvalue().splitlines()
    assert first == "size pass: reading: 0% 0 of 3 tasks"
    assert re.fullmatch(r"size pass: reading: 25%, 2,\d{3} calls/s, ETA [67] s 1 of 3 tasks", second), second
    assert third == "timing: 25% rounds: json"  # steps, not calls: no rate; no ETA in its first second
    assert plain_line("floor", "", (0, 0, ""), 5.0) == "floor:"
    assert rate_of(5000, "calls", 2.0) == "2,500 calls/s" and rate_of(5000, "", 2.0) == rate_of(0, "calls", 1) == ""
    assert eta_of(1, 4, 0.5) == (0.25, None) and eta_of(1, 4, 3.0) == (0.25, 9.0)  # no ETA in the first second
    assert clock(None) == "-:--:--" and clock(41.4) == "0:00:41" and clock(3725) == "1:02:05"


def test_the_terminal_bar_shows_calls_per_second_and_the_time_left(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar's rate and ETA are the plain line's: the same rule (eta_of, rate_of) for both displays."""
    monkeypatch.setenv("COLUMNS", "160")
    master, slave = pty.openpty()
    terminal = os.fdopen(slave, "w")
    pattern = r"size pass: reading +[━╸╺]+ +25% 0:00:0\d ETA 0:00:0[67] 2,\d{3} calls/s 1 of 3 tasks"
    shown = ""
    try:
        with ProgressDisplay(stream=terminal) as display:
            display("size pass: reading", "0 of 3 tasks", 0, 20000, "calls")
            display._started["size pass: reading"] -= 2.0
            display("size pass: reading", "1 of 3 tasks", 5000, 20000, "calls")
            deadline = time.monotonic() + 10
            while not re.search(pattern, shown) and time.monotonic() < deadline:
                if select.select([master], [], [], 0.25)[0]:
                    shown += re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", os.read(master, 65536).decode(errors="replace"))
    finally:
        terminal.close()
        os.close(master)
    assert re.search(pattern, shown), shown
