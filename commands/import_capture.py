"""``run_bench.py import``: a pcap/pcapng capture of a game server becomes a trace (see rpcbench.capture_import)."""

from __future__ import annotations

import argparse
from typing import List, Optional

from rpcbench.capture_import import FRAMINGS, Envelope, import_capture, payload_decoder
from rpcbench.errors import BenchError
from rpcbench.protobuf import Settings
from rpcbench.registry import Registry

from .naming import program
from .options import whole_number


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=program("import"),
        description="Import the RPC messages of a game server from a tcpdump capture (pcap or pcapng) into a "
                    "trace; every call keeps its payload as captured (docs/capture.md).")
    p.add_argument("capture", help="the capture file (tcpdump -w, Wireshark, pcap or pcapng)")
    p.add_argument("--server-port", type=whole_number(1, 65535), required=True,
                   help="the game server's port: packets to it are c2s, from it s2c")
    p.add_argument("--framing", choices=FRAMINGS, required=True,
                   help="how messages sit in the traffic: WebSocket messages, TCP with a u16/u32/LEB128 varint "
                   "length before each message, or one message per UDP datagram")
    p.add_argument("--endian", choices=("big", "little"), default="big",
                   help="byte order of a u16/u32 length (default: big, network order)")
    p.add_argument("--decode", required=True, metavar="CODEC",
                   help="the codec the game uses today: json, msgpack, bson, cbor, protobuf or a plugin's id")
    p.add_argument("--method-field", default="method",
                   help="the message field holding the method (default: method; a number for a list message; "
                   "a oneof's name with --message)")
    p.add_argument("--args-field", default="args",
                   help="the message field holding the args (default: args; '' for the rest of the message)")
    p.add_argument("--proto", action="append", default=[], metavar="FILE",
                   help="protobuf schema (repeatable; default: every .proto in proto/)")
    p.add_argument("--proto-path", action="append", default=[], metavar="DIR", help="protoc include path")
    p.add_argument("--message", metavar="NAME",
                   help="with --decode protobuf: every payload is this message type (full name)")
    p.add_argument("--codec-path", action="append", default=[], metavar="FILE.py",
                   help="load codec classes from a file, for --decode (repeatable)")
    p.add_argument("--codec", action="append", default=[], metavar="MODULE:CLASS",
                   help="load an importable codec class, for --decode (repeatable)")
    p.add_argument("--out", required=True, help="the trace to write (binary; written only if the import succeeds)")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    """Import the capture and print what was imported."""
    args = build_parser().parse_args(argv)
    if args.message and args.decode != "protobuf":
        raise BenchError("--message applies to --decode protobuf")
    envelope = Envelope(args.method_field, args.args_field)
    registry = Registry.default(codec_options={"protobuf": {"settings": Settings(tuple(args.proto),
                                                                                 tuple(args.proto_path))}})
    for file in args.codec_path:
        registry.load_file(file)
    for spec in args.codec:
        registry.load_class(spec)
    protobuf = (args.proto, args.proto_path, args.message) if args.message else None
    decode = payload_decoder(args.decode, envelope, registry.create, protobuf)
    options = {"framing": args.framing, "server_port": args.server_port, "decode": args.decode,
               **({"endian": args.endian} if args.framing in ("u16", "u32") else {}),
               **({"method_field": args.method_field, "args_field": args.args_field} if envelope != Envelope() else {}),
               **({"message": args.message} if args.message else {})}
    header = import_capture(args.capture, args.out, args.server_port, args.framing, decode, options, args.endian)
    print(f"imported {header['messages']:,} messages (c2s {header['packets']['c2s']:,} and s2c "
          f"{header['packets']['s2c']:,} packets, {header['connections']} connection(s)) into {args.out}; "
          f"{header['partial_dropped']} partial message(s) dropped, {header['undecoded']} undecoded")
    return 0
