"""``run_bench.py precision suggest --trace FILE > my.toml``: a precision profile for ``quant`` from a trace.

The profile (rpcbench/precision.py) says how precisely each field must arrive; the suggestion
(rpcbench/precision_suggest.py) gives each field its observed range and a step, with a comment saying why,
for the team to edit and pass to a run with ``--precision my.toml`` (docs/codecs.md, "quant").
"""

from __future__ import annotations

import argparse
import sys
from typing import Iterator, List

from rpc_capture import Call, open_trace
from rpcbench.errors import BenchError
from rpcbench.precision_suggest import RELATIVE_ERROR, suggest
from rpcbench.protobuf import Settings

from . import program
from .options import fraction


def main(argv: List[str]) -> int:
    """``run_bench.py precision suggest``: print the suggested profile."""
    args = _parser().parse_args(argv)
    calls = _TraceCalls(args.trace, args.salvage)
    if next(iter(calls), None) is None:
        raise BenchError(f"{args.trace}: the trace holds no calls")
    sys.stdout.write(suggest(args.trace, calls, Settings(tuple(args.proto), tuple(args.proto_path)),
                             args.relative_error))
    return 0


class _TraceCalls:
    """The trace's calls, read afresh at each pass: a long trace is streamed, never held whole."""

    def __init__(self, path: str, salvage: bool) -> None:
        self.path, self.salvage = path, salvage

    def __iter__(self) -> Iterator[Call]:
        return iter(open_trace(self.path, self.salvage))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=program("precision"), description="Precision profiles for the quant codec "
                                "(docs/codecs.md, \"quant\").", allow_abbrev=False)
    sub = p.add_subparsers(dest="command", required=True)
    sug = sub.add_parser("suggest", help="print a profile suggested from a trace, a comment per field "
                         "(run_bench.py precision suggest --trace F > my.toml)")
    sug.add_argument("--trace", required=True, help="trace to learn from (binary or JSON Lines)")
    sug.add_argument("--proto", action="append", default=[], metavar="FILE",
                     help="schema the run will use (default: the bundled schemas when they define the trace's "
                     "methods, else one inferred from the trace, as a run does)")
    sug.add_argument("--proto-path", action="append", default=[], metavar="DIR", help="protoc include path")
    sug.add_argument("--relative-error", type=fraction, default=RELATIVE_ERROR,
                     help="error a full-precision float's step keeps, relative to its largest magnitude "
                     "(default %(default)g)")
    sug.add_argument("--salvage", action="store_true", help="skip damaged records instead of stopping")
    return p
