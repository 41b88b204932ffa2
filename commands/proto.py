"""``run_bench.py proto``: infer a .proto from a trace, and compile schemas to show the method table.

``proto infer --trace FILE > proto/mygame.proto`` prints the schema inferred by
:func:`rpcbench.protobuf.infer` (docs/protobuf.md lists the rules); ``proto compile``
loads the schemas as a run would and prints which message carries each method.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import List

from rpcbench.errors import BenchError
from rpcbench.protobuf import PROTO_DIR, Settings, infer, is_identifier, load, package_for
from .naming import program


def main(argv: List[str]) -> int:
    """``run_bench.py proto infer|compile``."""
    args = _parser().parse_args(argv)
    if args.command == "infer":
        return _infer(args)
    return _compile(args)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=program("proto"), description="Protobuf schemas for the protobuf codecs "
                                "(docs/protobuf.md).", allow_abbrev=False)
    sub = p.add_subparsers(dest="command", required=True)
    inf = sub.add_parser("infer", help="print a .proto inferred from a trace "
                         "(run_bench.py proto infer --trace F > proto/x.proto)")
    inf.add_argument("--trace", required=True, help="trace to learn from (binary or JSON Lines)")
    inf.add_argument("--package", help="protobuf package (default: from the trace's file name)")
    inf.add_argument("--mapping-out", metavar="FILE", help="also write the method -> message mapping (JSON) of "
                     "methods whose names cannot be rpc names (the schema's rpcbench-method comments already map them)")
    comp = sub.add_parser("compile", help="compile the schemas (cached) and print which message carries each method")
    comp.add_argument("--proto", action="append", default=[], metavar="FILE",
                      help="schema (default: every .proto in proto/)")
    comp.add_argument("--proto-path", action="append", default=[], metavar="DIR",
                      help="protoc include path (repeatable)")
    comp.add_argument("--proto-map", metavar="FILE", help="JSON mapping of methods to messages")
    return p


def _infer(args: argparse.Namespace) -> int:
    package = args.package or package_for(args.trace)
    if not all(is_identifier(part) for part in package.split(".")):
        raise BenchError(f"--package {package!r} is not a protobuf package name (letters, digits, _ and dots)")
    source, mapping = infer(args.trace, package)
    sys.stdout.write(source)
    if mapping and args.mapping_out:
        Path(args.mapping_out).write_text(json.dumps(mapping, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"note: save it as {_free_path(package)} to be used by default (with every other "
          ".proto there; if one of them defines the same methods, the run names both: then pass --proto FILE)",
          file=sys.stderr)
    return 0


def _free_path(package: str) -> Path:
    """``proto/<package>.proto``, or with a suffix when a schema of that name is already there."""
    stem = package.replace(".", "_")
    names = itertools.chain([stem], (f"{stem}_inferred{'' if n == 1 else n}" for n in itertools.count(1)))
    return next(path for name in names for path in [PROTO_DIR / f"{name}.proto"] if not path.exists())


def _compile(args: argparse.Namespace) -> int:
    schema = load(Settings(tuple(args.proto), tuple(args.proto_path), args.proto_map))
    print(f"schemas: {', '.join(schema.files)}; {len(schema.methods)} methods")
    print(f"{'id':>5}  {'method':<24} message")
    for entry in sorted(schema.methods.values(), key=lambda e: e.id):
        print(f"{entry.id:>5}  {entry.name:<24} {entry.message}")
    return 0
