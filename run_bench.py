#!/usr/bin/env python3
"""rpcbench command line: ``python run_bench.py --help``."""

from rpcbench.commands import cli

if __name__ == "__main__":
    cli()
