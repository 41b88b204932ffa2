"""The name the user typed for the command, in usage and error lines (each command imports it from here,
so no command imports the package that dispatches to it)."""

from __future__ import annotations

import os
import sys


def program(subcommand: str = "") -> str:
    """The name the user typed, for usage and error lines: ``rpcbench`` when installed, else ``run_bench.py``."""
    name = "rpcbench" if os.path.basename(sys.argv[0]) == "rpcbench" else "run_bench.py"
    return f"{name} {subcommand}".rstrip()
