"""Compile .proto files with ``protoc`` from ``grpcio-tools`` into a FileDescriptorSet, cached on disk.

:func:`compile_descriptors` caches its result in ``~/.cache/rpcbench/proto/<hash of the inputs>/``
(``$XDG_CACHE_HOME`` or ``RPCBENCH_CACHE`` moves ``~/.cache/rpcbench``; an installed package has no
writable folder of its own); the hash covers the files' paths and contents, the
include path and the grpcio-tools version, and ``deps.json`` beside it records every
imported file's digest, so editing a file or anything it imports rebuilds it. protoc's
errors come back as one line (:func:`condense_errors`) in a BenchError.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set

from ..errors import BenchError

_USER_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rpcbench"
CACHE_DIR = Path(os.environ.get("RPCBENCH_CACHE") or _USER_CACHE) / "proto"  #: compiled schemas

_PROTOC_FLAGS = ["--include_imports", "--include_source_info"]  # source info: the rpcs' rpcbench-method comments
_ERROR_AT = re.compile(r"^\S.*?:\d+:\d+: ")  # protoc's "file.proto:LINE:COLUMN: message"


def well_known_include() -> Path:
    """grpcio-tools' copy of google/protobuf/*.proto (the well-known types)."""
    return Path(str(importlib.resources.files("grpc_tools") / "_proto"))


def include_dirs(files: Sequence[Path], includes: Sequence[Path]) -> List[Path]:
    """protoc's -I list: the given include paths, each file's folder, the well-known types."""
    dirs = [*includes, *(f.resolve().parent for f in files), well_known_include()]
    return list(dict.fromkeys(d.resolve() for d in dirs))


def virtual_names(files: Sequence[Path], includes: Sequence[Path]) -> List[str]:
    """The name protoc gives each file: its path relative to the first include dir holding it."""
    dirs = include_dirs(files, includes)
    return [next(f.resolve().relative_to(d).as_posix() for d in dirs if f.resolve().is_relative_to(d)) for f in files]


def compile_descriptors(files: Sequence[Path], includes: Sequence[Path] = ()) -> bytes:
    """The FileDescriptorSet (with imports) of ``files``, from the cache or freshly compiled."""
    for f in files:
        if not f.is_file():
            raise BenchError(f"--proto {f}: no such file")
    dirs = include_dirs(files, includes)
    key = hashlib.sha256(json.dumps([_tool_version(), _PROTOC_FLAGS, [str(d) for d in dirs],
                                     [[str(f.resolve()), _digest(f)] for f in files]]).encode()).hexdigest()[:20]
    folder = CACHE_DIR / key
    out, deps = folder / "schema.pb", folder / "deps.json"
    if out.is_file() and deps.is_file() and _deps_unchanged(json.loads(deps.read_text())):
        return out.read_bytes()
    try:
        data = _run_protoc(files, dirs)
    except BenchError:
        clash = name_clash(files, includes) if len(files) > 1 else None
        if clash:  # say which files and names, not protoc's first "already defined" of hundreds
            raise BenchError(clash) from None
        raise
    folder.mkdir(parents=True, exist_ok=True)
    _write_atomic(out, data)
    _write_atomic(deps, json.dumps(_deps_of(data, dirs)).encode())
    return data


def _run_protoc(files: Sequence[Path], dirs: Sequence[Path]) -> bytes:
    """protoc's FileDescriptorSet for ``files``; its first error, on one line, as a BenchError."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "schema.pb"
        cmd = [sys.executable, "-m", "grpc_tools.protoc", *(f"-I{d}" for d in dirs), *_PROTOC_FLAGS,
               f"--descriptor_set_out={out}", *(str(f.resolve()) for f in files)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BenchError(f"cannot run protoc from grpcio-tools ({e}); pip install -r requirements.txt") from None
        if done.returncode != 0:
            names = ", ".join(str(f) for f in files)
            raise BenchError(f"protoc could not compile {names}: {condense_errors(done.stderr)}")
        return out.read_bytes()


def name_clash(files: Sequence[Path], includes: Sequence[Path] = ()) -> Optional[str]:
    """One line naming two of ``files`` that define the same names (a copy of a schema beside it, say) and those
    names, when some do; None when each compiles alone and no two of them clash (the failure is another)."""
    defined: Dict[Path, Set[str]] = {}
    for f in files:
        try:
            defined[f] = _names_defined(compile_descriptors([f], includes), virtual_names([f], includes)[0])
        except BenchError:
            return None  # a file that does not compile alone: protoc's own error says more
    pairs = [(a, b, sorted(defined[a] & defined[b])) for i, a in enumerate(files) for b in files[i + 1:]]
    pairs = [pair for pair in pairs if pair[2]]
    if not pairs:
        return None
    a, b, names = pairs[0]
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3:,} more" if len(names) > 3 else "")
    others = f" ({len(pairs) - 1} more pairs of files clash)" if len(pairs) > 1 else ""
    return (f"schema clash: {a} and {b} both define {shown}{others}; protoc takes a name once, so the run stops: "
            "keep one of the two files (every .proto in proto/ is used unless --proto is given) or choose with "
            "--proto FILE")


def _names_defined(data: bytes, name: str) -> Set[str]:
    """The full names one file of a FileDescriptorSet defines in its package's scope: messages, enums, their
    values (protobuf scopes enum values beside their enum), services, extensions."""
    from google.protobuf import descriptor_pb2

    proto = next(p for p in descriptor_pb2.FileDescriptorSet.FromString(data).file if p.name == name)
    scope = f"{proto.package}." if proto.package else ""
    names = [m.name for m in proto.message_type] + [e.name for e in proto.enum_type]
    names += [v.name for e in proto.enum_type for v in e.value] + [s.name for s in proto.service]
    names += [x.name for x in proto.extension]
    return {scope + n for n in names}


def condense_errors(stderr: str, limit: int = 300) -> str:
    """protoc's first error that names a file and line (else its first line), and how many more there are."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return "failed"
    first = next((line for line in lines if _ERROR_AT.match(line)), lines[0])
    if len(first) > limit:
        first = first[:limit - 3] + "..."
    more = len(lines) - 1
    return first + (f" (and {more:,} more error line{'s' * (more != 1)})" if more else "")


def _deps_of(data: bytes, dirs: Sequence[Path]) -> Dict[str, str]:
    """Every file the descriptor set was built from (imports included) with its digest."""
    from google.protobuf import descriptor_pb2

    found = {}
    for proto in descriptor_pb2.FileDescriptorSet.FromString(data).file:
        path = next((d / proto.name for d in dirs if (d / proto.name).is_file()), None)
        if path is not None:
            found[str(path)] = _digest(path)
    return found


def _deps_unchanged(deps: Dict[str, str]) -> bool:
    return all(Path(p).is_file() and _digest(Path(p)) == digest for p, digest in deps.items())


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("grpcio-tools")
    except PackageNotFoundError:
        raise BenchError("grpcio-tools is not installed (it provides protoc): "
                         "pip install -r requirements.txt") from None


def _write_atomic(path: Path, data: bytes) -> None:
    """Write then rename, so that a concurrent reader never sees half a file."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
