#!/usr/bin/env python3
"""Record the example battle with ``tcpdump`` on loopback: a packet capture and the log of every message sent.

    python examples/record_capture.py --transport ws-deflate --out tests/data/captures

For each ``--transport`` (tcp, ws, ws-deflate, udp; default all four) it starts
``tcpdump -i lo -s 0 -U --immediate-mode -w battle-T.pcap port N``, plays a battle of ``examples/battle_server.py`` and
``examples/battle_bot.py`` on port N, stops tcpdump, and writes ``battle-T.sent.jsonl.gz``: what the
server and the bots logged with ``--log-sent`` (one JSON line per message sent; see
``examples/battle_net.py``). The committed fixtures in ``tests/data/captures/`` were made this way;
``tests/test_captured.py`` imports them and compares every call with the log. Needs ``tcpdump`` and the
right to capture on ``lo`` (root, or CAP_NET_RAW).
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional

HERE = Path(__file__).resolve().parent
TRANSPORTS = ("tcp", "ws", "ws-deflate", "udp")
PORT_BASE = 47770  #: the committed captures: tcp on 47771, ws 47772, ws-deflate 47773, udp 47774


def free_port(kind: int) -> int:
    """A port nothing listens on now (``kind``: SOCK_STREAM or SOCK_DGRAM)."""
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_tcpdump(pcap: Path, port: int) -> subprocess.Popen:
    """tcpdump on ``lo`` for ``port``, once it says it is listening (full packets, written as they come)."""
    command = ["tcpdump", "-i", "lo", "-s", "0", "-U", "--immediate-mode", "-w", str(pcap), "port", str(port)]
    dump = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert dump.stderr is not None
    line = dump.stderr.readline()
    if "listening on" not in line:
        dump.kill()
        raise RuntimeError(f"tcpdump did not start: {line.strip() or dump.stderr.read().strip()}")
    return dump


def record(transport: str, out: Path, port: int = 0, players: int = 2, ticks: int = 60, seed: int = 1) -> List[Path]:
    """Play one battle over ``transport`` on ``port`` (0: a free one) under tcpdump; the capture and the merged
    sent log."""
    port = port or free_port(socket.SOCK_DGRAM if transport == "udp" else socket.SOCK_STREAM)
    pcap, sent = out / f"battle-{transport}.pcap", out / f"battle-{transport}.sent.jsonl.gz"
    logs = [out / f"battle-{transport}.{side}.tmp" for side in ("server", "bots")]
    dump = start_tcpdump(pcap, port)
    try:
        server = subprocess.Popen(
            [sys.executable, str(HERE / "battle_server.py"), "--port", str(port), "--players", str(players),
             "--ticks", str(ticks), "--transport", transport, "--log-sent", str(logs[0]), "--seed", str(seed),
             "--join-timeout", "15", "--max-seconds", "60"], stdout=subprocess.PIPE, text=True)
        assert server.stdout is not None
        server.stdout.readline()  # "listening on ...": the bots may connect
        subprocess.run([sys.executable, str(HERE / "battle_bot.py"), "--port", str(port), "--bots", str(players),
                        "--transport", transport, "--log-sent", str(logs[1]), "--seed", str(seed),
                        "--max-seconds", "60"], check=True, stdout=subprocess.DEVNULL, timeout=90)
        if server.wait(timeout=30) != 0:
            raise RuntimeError(f"battle_server.py over {transport} exited with {server.returncode}")
        time.sleep(0.5)  # the last packets reach tcpdump
    finally:
        dump.send_signal(signal.SIGINT)
        dump.wait(timeout=10)
    text = "".join(log.read_text(encoding="utf-8") for log in logs)
    sent.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    for log in logs:
        log.unlink()
    return [pcap, sent]


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="Record the example battle with tcpdump on loopback.")
    p.add_argument("--transport", choices=TRANSPORTS, action="append", help="repeatable; default: all four")
    p.add_argument("--out", type=Path, default=Path("."), help="folder for battle-T.pcap and battle-T.sent.jsonl.gz")
    p.add_argument("--port-base", type=int, default=PORT_BASE,
                   help=f"the server's port: this plus the transport's place in {', '.join(TRANSPORTS)} (default "
                        f"{PORT_BASE}: tcp on {PORT_BASE + 1}...; 0: any free port)")
    p.add_argument("--players", type=int, default=2)
    p.add_argument("--ticks", type=int, default=60)
    args = p.parse_args(argv)
    if shutil.which("tcpdump") is None:
        print("record_capture: tcpdump is not installed (apt-get install tcpdump)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for transport in args.transport or TRANSPORTS:
        port = args.port_base and args.port_base + 1 + TRANSPORTS.index(transport)
        pcap, sent = record(transport, args.out, port, args.players, args.ticks)
        lines = gzip.decompress(sent.read_bytes()).count(b"\n")
        print(f"record_capture: {transport} on port {port or 'any'}: {pcap} ({pcap.stat().st_size:,} B), "
              f"{lines} messages in {sent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
