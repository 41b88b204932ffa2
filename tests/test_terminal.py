"""The terminal: the table fits its width, progress shows each phase with an ETA on stderr, Ctrl-C under
the live progress display still keeps what finished."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest

from rpcbench.commands.progress import ProgressDisplay, eta_of
from rpcbench.reports import decide
from rpcbench.reports.table import columns, format_table, tail_columns
from rpcbench.results import load

REPO = Path(__file__).resolve().parent.parent
SAMPLE = str(REPO / "samples" / "battle.rpct")
CODECS = "json,bson,msgpack,json+zlib-1,json+zstdstream-3"
QUICK = ["--repeat", "3", "--sample", "100", "--min-time", "0.001"]


def plain_env() -> Dict[str, str]:
    """The environment without a terminal size, as when output goes to a pipe or a file."""
    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}


@pytest.fixture(scope="module")
def piped_run(tmp_path_factory: pytest.TempPathFactory) -> Tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("run") / "out"
    done = subprocess.run([sys.executable, "run_bench.py", "--trace", SAMPLE, "--codecs", CODECS, "--out", str(out),
                           "--no-report", *QUICK], cwd=REPO, env=plain_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done, out


def test_piped_output_fits_100_columns_and_says_what_it_left_out(piped_run: Any) -> None:
    done, out = piped_run
    lines = [line for line in done.stdout.splitlines() if not line.startswith("results: ")]  # paths stay whole
    assert max(map(len, lines)) <= 100
    left = [i for i, line in enumerate(lines) if line.startswith("Left out to fit 100 columns: ")]
    said = " ".join(line.strip() for line in lines[left[0]:left[0] + 2]) if left else ""
    assert "results.json and results.csv have every column" in said
    decided = decide(load(str(out)))
    headers = " ".join(line for line in lines if line.startswith("codec "))  # each table's heading row
    titles = [c.title for c in columns(decided) + tail_columns(decided)]
    dropped = [title for title in titles if title not in headers]  # which ones depends on the figures' widths
    assert dropped and all(title in said for title in dropped), (dropped, said)
    wide = format_table(decided)  # no width: every column, as before
    assert max(map(len, wide.splitlines())) > 100 and "Left out" not in wide
    for title in ("bytes mean", "x json", "encode µs", "enc/json", "decode µs", "dec/json"):
        assert title in done.stdout  # the figures that decide stay


@pytest.mark.parametrize("width", [40, 60, 80, 100, 120, 160])
def test_every_line_fits_the_width(piped_run: Any, width: int) -> None:
    decided = decide(load(str(piped_run[1])))
    text = format_table(decided, width)
    assert max(map(len, text.splitlines())) <= width
    for r in decided.suite.results:  # every codec keeps its row, first column whole
        assert re.search(rf"^{re.escape(r.codec)}\s", text, re.M)


def test_a_wide_terminal_gets_the_one_table(piped_run: Any) -> None:
    decided = decide(load(str(piped_run[1])))
    assert format_table(decided, 1000) == format_table(decided)


def test_progress_lines_without_a_terminal_name_each_phase(piped_run: Any) -> None:
    done, _ = piped_run
    phases = [line.split(":")[0] for line in done.stderr.splitlines()]
    for phase in ("size pass", "timing sample", "timing", "tails and allocations"):
        assert phase in phases, done.stderr


def test_plain_lines_give_the_share_done_and_an_eta() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream=stream, interval=0.0)
    display("size pass: codecs", "10 of 40", 0, 40)
    display._started["size pass: codecs"] -= 2.0  # two seconds in
    display("size pass: codecs", "10 of 40", 10, 40)
    first, second = stream.getvalue().splitlines()
    assert first == "size pass: codecs: 0% 10 of 40"
    assert re.fullmatch(r"size pass: codecs: 25%, ETA 6 s 10 of 40", second)
    ProgressDisplay(enabled=False, stream=stream)("floor", "x", 1, 2)
    assert len(stream.getvalue().splitlines()) == 2
    assert eta_of(1, 4, 3.0) == (0.25, 9.0) and eta_of(0, 4, 3.0) == (0.0, None) and eta_of(5, 0, 1.0) == (None, None)


def read_until(fd: int, pattern: str, seconds: float, seen: bytearray) -> bool:
    """Read a pty until ``pattern`` shows (True) or time runs out."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if select.select([fd], [], [], 0.2)[0]:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                return False
            if re.search(pattern.encode(), seen):
                return True
    return False


def test_live_bars_with_eta_on_a_terminal_and_ctrl_c_keeps_what_finished(tmp_path: Path) -> None:
    """stderr on a terminal: rich bars per phase; Ctrl-C in timing clears them, exits 130 with partial results."""
    master, slave = pty.openpty()
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "run_bench.py", "--trace", SAMPLE, "--codecs", "json,msgpack",
                             "--out", str(out), "--no-report", "--repeat", "100000", "--min-time", "0.001"],
                            cwd=REPO, env=plain_env(), stdout=subprocess.PIPE, stderr=slave, start_new_session=True)
    os.close(slave)
    seen = bytearray()
    try:
        assert read_until(master, r"timing: rounds .*ETA", 120, seen), seen.decode(errors="replace")[-2000:]
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground process group
        stdout, _ = proc.communicate(timeout=120)
        read_until(master, r"partial results in", 10, seen)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    text = seen.decode(errors="replace")
    assert proc.returncode == 130 and not stdout
    assert re.search(r"size pass: reading .*\d+%", text) and "ETA" in text
    assert "\x1b[?25h" in text  # the display was stopped: cursor shown again
    tail = text[text.rindex("\x1b[?25h"):]  # after the bars: only the one line saying what was kept
    assert re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", tail).strip().startswith(
        "run_bench.py: interrupted (Ctrl-C) during timing; partial results in")
    assert load(str(out)).partial == "interrupted (Ctrl-C) during timing"
