"""What a result depends on besides the code: interpreter, libraries, CPU. Recorded with every run."""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import time
from importlib import metadata
from typing import Any, Dict, Iterable, Optional

from . import __version__
from .fidelity import EXACT_CHECK


def environment(libraries: Iterable[str]) -> Dict[str, Any]:
    """Python build, platform, CPU, the versions of the given distributions, and how calls were checked for
    exactness (the C extension or pickles: the size pass's speed, not its figures)."""
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "build": " ".join(platform.python_build()),
        "compiler": platform.python_compiler(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "timer": time.get_clock_info("perf_counter").implementation,
        "timer_resolution_ns": time.get_clock_info("perf_counter").resolution * 1e9,
        "libraries": {name: library_version(name) for name in sorted(set(libraries))},
        "rpcbench": __version__,
        "exact_check": EXACT_CHECK,
    }


def library_version(name: str) -> Optional[str]:
    """Installed version of a distribution, or None; of each for a codec built on several (``orjson+zstandard``:
    ``3.10.1+0.23.0``)."""
    if "+" in name:
        versions = [library_version(part) for part in name.split("+")]
        return "+".join(v or "?" for v in versions) if any(versions) else None
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    """The CPU's marketing name (Linux /proc/cpuinfo; elsewhere what platform knows)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def file_sha256(path: str) -> str:
    """Content hash of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
