"""Containing codec plugins: what the processes that run codecs share.

A codec runs in a forked process (timing: :mod:`rpcbench.worker`; size pass, here or on a
Dask worker: :mod:`rpcbench.executors`), so a hang, an abort, a segfault or ``sys.exit`` ends that
process only; the process that started it reads its answers from a pipe of its own
(never stdout, which codec output could corrupt) with a time limit, and turns a death
or silence into one line of that codec's error.
"""

from __future__ import annotations

import io
import os
import select
import signal
import sys
import time
from typing import Optional

#: default of ``--codec-timeout``: the longest one step of one codec may take (seconds)
DEFAULT_CODEC_TIMEOUT = 120.0


class CodecTimeout(Exception):
    """A codec's process did not answer within its time limit."""


def exit_reason(status: int) -> str:
    """What ``os.waitpid``'s status says about how a codec's process ended, in words."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"its process was killed by {name}" + (" (abort)" if sig == signal.SIGABRT else "")
    return f"its process exited with status {os.WEXITSTATUS(status)} (sys.exit or os._exit in the codec?)"


def reap(pid: int, kill: bool = False) -> str:
    """Wait for a codec's process (killing it first if ``kill``); how it ended, in words."""
    if kill:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return "its process is gone"
    return exit_reason(status)


def read_line(fd: int, timeout: float, buffer: bytearray) -> bytes:
    """One ``\\n``-ended line from ``fd`` within ``timeout`` seconds (b"" at end of file).

    ``buffer`` keeps bytes read past the line for the next call. Raises
    :class:`CodecTimeout` when the line does not come in time.
    """
    deadline = time.monotonic() + timeout
    while b"\n" not in buffer:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise CodecTimeout(f"no answer within {timeout:g} s (--codec-timeout)")
        chunk = os.read(fd, 65536)
        if not chunk:
            return b""
        buffer += chunk
    end = buffer.index(b"\n") + 1
    line = bytes(buffer[:end])
    del buffer[:end]
    return line


def silence_stdout() -> io.StringIO:
    """In a codec's process: fd 1 to /dev/null and ``sys.stdout`` to a buffer the caller checks.

    A codec's ``print`` is caught (see :func:`stray_output`), and nothing it writes can
    reach the terminal's table or a pipe the harness reads.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    sys.stdout = io.StringIO()
    return sys.stdout


def stray_output(captured: io.StringIO) -> Optional[str]:
    """The error for a codec that printed (its timing would include the I/O), or None."""
    text = captured.getvalue()
    if not text:
        return None
    return f"the codec wrote to stdout ({len(text)} characters, first: {text[:40]!r}); codecs must not print"
