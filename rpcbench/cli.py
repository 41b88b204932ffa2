"""``run_bench.py``: the benchmark run by default, and tool subcommands (simulate, trace, report, proto)."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Callable, List, Optional

from rpc_capture import TraceError

from .errors import BenchError

#: subcommand -> module with ``main(argv) -> int``; anything else is the benchmark itself
SUBCOMMANDS = {
    "simulate": "rpcbench.simulate",
    "trace": "rpcbench.trace_tools",
    "proto": "rpcbench.commands.proto",
    "report": "reports",
}


def whole_number(minimum: int, maximum: Optional[int] = None) -> Callable[[str], int]:
    """An argparse ``type`` accepting whole numbers from ``minimum`` to ``maximum``, with a one-line error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum:,}, not {value:,}")
        return value

    return parse


def seconds(maximum: float) -> Callable[[str], float]:
    """An argparse ``type`` accepting a finite number of seconds above 0 and at most ``maximum``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of seconds") from None
        if not 0 < value <= maximum:  # NaN fails both comparisons
            raise argparse.ArgumentTypeError(f"must be above 0 and at most {maximum:g} seconds, not {text[:40]}")
        return value

    return parse


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command; user errors become one line on stderr and exit status 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _printable_streams()
    _log_to_stderr()
    try:
        if argv and argv[0] in SUBCOMMANDS:
            module = importlib.import_module(SUBCOMMANDS[argv[0]])
            return module.main(argv[1:])
        from .bench_cmd import main as bench_main

        return bench_main(argv)
    except (BenchError, TraceError) as e:
        print(f"run_bench.py: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("run_bench.py: interrupted", file=sys.stderr)
        return 130


def _printable_streams() -> None:
    """Trace-derived text (method names, args) may hold lone surrogates, which no encoding can
    write: printed as backslash escapes instead of stopping the command with a traceback."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


class _OneLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


def _log_to_stderr() -> None:
    """Library warnings (a truncated trace, a skipped codec) print as ``warning: ...``."""
    root = logging.getLogger()
    if not any(getattr(h, "_rpcbench", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_OneLineFormatter())
        handler._rpcbench = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.setLevel(logging.INFO)
