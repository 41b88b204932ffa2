#!/usr/bin/env python3
"""rpcbench command line: ``python run_bench.py --help``."""

import sys

from rpcbench.commands import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
