"""Turn PrismarineJS/minecraft-packets into an rpcbench JSON Lines trace: real game traffic nobody here wrote.

Source: https://github.com/PrismarineJS/minecraft-packets (MIT licence, Copyright (c) 2021
PrismarineJS): Minecraft Java-edition packets captured by a mineflayer bot on real servers,
each stored raw and parsed to JSON as ``data/pc/<version>/<from-server|from-client>/<packet>/<n>.json``.

Each parsed packet becomes one call: ``method`` the packet name, ``args`` the parsed JSON,
``dir`` s2c (from-server) or c2s (from-client), ``conn`` the game version (one capture
session each). The dump keeps no capture times, so ``t`` is the call's place in the file
(1 ms apart), calls ordered by sample number, then version, so every part of the trace
holds every kind of packet. Usage::

    git clone https://github.com/PrismarineJS/minecraft-packets
    python examples/minecraft_packets.py minecraft-packets/data/pc > minecraft.jsonl
    python run_bench.py --trace minecraft.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Iterator, List, Tuple

START_NS = 1_700_000_000_000_000_000  #: an arbitrary start; the dump has no capture times
DIRECTIONS = {"from-server": "s2c", "from-client": "c2s"}


def _version_key(name: str) -> Tuple[int, ...]:
    """``1.16.5`` -> (1, 16, 5), for ordering versions as numbers."""
    return tuple(int(p) for p in name.split(".") if p.isdigit())


def packets(root: Path) -> Iterator[Tuple[int, Tuple[int, ...], str, str, Path]]:
    """(sample number, version, direction, packet name, file) for every parsed packet under ``root``."""
    for version in root.iterdir():
        for folder, direction in DIRECTIONS.items():
            for file in sorted((version / folder).glob("*/*.json")):
                if file.stem.isdigit():
                    yield int(file.stem), _version_key(version.name), direction, file.parent.name, file


def main(argv: List[str]) -> int:
    """Write the trace for the ``data/pc`` folder ``argv[0]`` to stdout."""
    if len(argv) != 1 or not Path(argv[0]).is_dir():
        print("usage: minecraft_packets.py minecraft-packets/data/pc > minecraft.jsonl", file=sys.stderr)
        return 2
    written = skipped = 0
    for _, version, direction, name, file in sorted(packets(Path(argv[0]))):
        try:
            args = json.loads(file.read_text(encoding="utf-8"))
        except ValueError:  # an empty or cut file (a checkout without its large files)
            skipped += 1
            continue
        call = {"t": START_NS + written * 1_000_000, "dir": direction, "conn": ".".join(map(str, version)),
                "method": name, "args": args}
        sys.stdout.write(json.dumps(call, separators=(",", ":"), ensure_ascii=False) + "\n")
        written += 1
    print(f"{written} packets written, {skipped} files that do not parse skipped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
