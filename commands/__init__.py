"""The command line: ``run_bench.py`` (or the installed ``rpcbench`` command) runs the benchmark
(also as ``run``), or one of the tool subcommands.

One module per command, each with ``main(argv) -> int``. Commands parse arguments, call
the library (``rpcbench``, ``rpc_capture``, ``reports``) and print; they hold no
measurement logic. This layer is the only code that imports ``reports``, and nothing
below it imports this layer.
"""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import sys
from typing import Any, List, NoReturn, Optional

from rpc_capture import TraceError
from rpcbench.errors import BenchError
from rpcbench.registry import did_you_mean

from .naming import program

#: subcommand -> module with ``main(argv) -> int``; anything else is the benchmark itself
SUBCOMMANDS = {
    "simulate": "rpcbench.commands.simulate",
    "trace": "rpcbench.commands.trace",
    "proto": "rpcbench.commands.proto",
    "precision": "rpcbench.commands.precision",
    "report": "rpcbench.commands.report",
    "compare": "rpcbench.commands.compare",
    "import": "rpcbench.commands.import_capture",
}


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command; user errors become one line on stderr and exit status 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _printable_streams()
    _log_to_stderr()
    if argv[:1] == ["run"]:  # ``rpcbench run --trace X``: the benchmark, named
        argv = argv[1:]
    try:
        if argv and argv[0] in SUBCOMMANDS:
            module = importlib.import_module(SUBCOMMANDS[argv[0]])
            return module.main(argv[1:])
        if argv and not argv[0].startswith("-"):  # the benchmark itself takes options only
            if os.path.exists(argv[0]):  # a trace named without its option
                raise BenchError(f"{argv[0][:60]}: a trace is given with --trace (run_bench.py --trace PATH)")
            raise BenchError(f"unknown command {argv[0][:40]!r}{did_you_mean(argv[0], [*SUBCOMMANDS, 'run'])}; "
                             f"commands: run (the default), {', '.join(SUBCOMMANDS)}; options: --help")
        from .bench import main as bench_main

        return bench_main(argv)
    except (BenchError, TraceError) as e:
        print(f"{program()}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{program()}: interrupted", file=sys.stderr)
        return 130


def cli() -> NoReturn:
    """The installed ``rpcbench`` command (and ``run_bench.py``): :func:`main`, then :func:`exit_now`."""
    exit_now(main())


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` once the command is done: its output flushed and the exit handlers run
    (logging's, a temporary folder's cleanup), without the interpreter's teardown of every module and object,
    which does nothing a finished command needs and takes 0.1 s (0.3 s once Dask was loaded)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, or a closed stream: nothing left to say
            pass
    atexit._run_exitfuncs()
    os._exit(code)


def _printable_streams() -> None:
    """Trace-derived text (method names, args) may hold lone surrogates, which no encoding can
    write: printed as backslash escapes instead of stopping the command with a traceback."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


class _OneLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


class _StderrHandler(logging.StreamHandler):
    """Writes to ``sys.stderr`` as it is when a line is written, not as it was when the handler was made: a caller
    that swaps it (pytest's capture, a notebook) gets the lines, and a stream closed since is never written to."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _: Any) -> None:
        pass


def _log_to_stderr() -> None:
    """Library warnings (a truncated trace, a skipped codec) print as ``warning: ...``."""
    root = logging.getLogger()
    if not any(getattr(h, "_rpcbench", False) for h in root.handlers):
        handler = _StderrHandler()
        handler.setFormatter(_OneLineFormatter())
        handler._rpcbench = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.setLevel(logging.INFO)
