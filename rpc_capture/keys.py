"""The trace key: a secret that lets a reader trust the batch records its own writers made.

A writer tags each batch record with an HMAC-SHA256 of its marshal bytes. A reader holding
the same key, and only it, knows those bytes came out of ``marshal.dumps`` in an
``rpc_capture`` writer (checked data, no cycle, expansion bounded), so it may hand them to
CPython's C ``marshal.loads``: the fast path. A record whose tag does not verify (a file
from anyone else, a crafted record, a reader without the key) is read by the pure-Python
decoder of :mod:`rpc_capture.values`, which is safe on any bytes. ``marshal.loads`` is never
given bytes that did not come from a writer holding the key: on crafted bytes it can crash
the interpreter (a 13-byte record segfaults CPython 3.11), allocate gigabytes from a
5-byte record, or build code objects.

Where the key comes from, first found wins:

* ``RPC_CAPTURE_KEY``: 32 to 128 hex digits (share it with the machines that record);
* the file ``$XDG_CONFIG_HOME/rpc_capture/trace.key`` (default ``~/.config/...``), the same
  hex; a writer creates it (mode 0600) when there is none. Readers never create it.

A writer that can't create the file uses a key of its process only: its traces read
everywhere, by the safe decoder.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path
from typing import Optional, Union

Bytes = Union[bytes, memoryview]

TAG_SIZE = 16  #: bytes of a record's tag: HMAC-SHA256 of its marshal bytes, cut to 128 bits
ENV = "RPC_CAPTURE_KEY"

_cache: dict = {}  #: "read" / "write" -> the key found (None: none), looked up once per process


def key_path() -> Path:
    """Where the key file is (or would be created)."""
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "rpc_capture" / "trace.key"


def _parse(text: str) -> Optional[bytes]:
    try:
        key = bytes.fromhex(text.strip())
    except ValueError:
        return None
    return key if 16 <= len(key) <= 64 else None


def _find() -> Optional[bytes]:
    """The key from the environment or the key file, None if there is none (or it is malformed)."""
    if os.environ.get(ENV):
        return _parse(os.environ[ENV])
    try:
        return _parse(key_path().read_text("ascii"))
    except (OSError, UnicodeDecodeError):
        return None


def reader_key() -> Optional[bytes]:
    """The key a reader verifies tags with; None: every record goes to the safe decoder."""
    if "read" not in _cache:
        _cache["read"] = _find()
    return _cache["read"]


def writer_key() -> bytes:
    """The key a writer tags records with, creating the key file if there is none."""
    if "write" not in _cache:
        key = _find()
        if key is None and not os.environ.get(ENV):
            key = _create(key_path())
        _cache["write"] = key if key is not None else secrets.token_bytes(32)
        _cache.pop("read", None)  # a key just created is the reader's too
    return _cache["write"]


def _create(path: Path) -> Optional[bytes]:
    """Create the key file (another process may win the race: then its key); None if it can't."""
    key = secrets.token_bytes(32)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _find()
    except OSError:
        return None
    with os.fdopen(fd, "w") as f:
        f.write(key.hex() + "\n")
    return key


def forget() -> None:
    """Look the key up again on next use (after the environment or the file changed)."""
    _cache.clear()


def tag(data: Bytes, key: bytes) -> bytes:
    """The tag of a record's marshal bytes under ``key`` (SHA-256: the fastest keyed hash of
    ``hashlib`` on CPUs with SHA extensions, 0.3 of ``marshal.loads``'s time on the same bytes)."""
    return hmac.digest(key, data, "sha256")[:TAG_SIZE]


def verify(data: Bytes, tag_bytes: Bytes, key: Optional[bytes]) -> bool:
    """Did a writer holding ``key`` tag ``data`` so? (constant-time comparison)"""
    return key is not None and hmac.compare_digest(tag(data, key), tag_bytes)
