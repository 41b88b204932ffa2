"""run_bench.py import on real captures (tests/record_import_captures.py recorded them with tcpdump on
loopback: a websockets server and clients, plain and with permessage-deflate, a u16-prefixed TCP pair,
UDP) and on hostile variants of them built with dpkt: reordered, duplicated and overlapping segments,
a capture cut short or starting late, a text file, another link type, a cut snap length, TLS."""

from __future__ import annotations

import json
import ssl
import struct
import subprocess
import sys
import zlib
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import dpkt
import msgpack
import pytest

from rpc_capture import Call, TraceReader, open_trace, trace_header
from rpcbench.capture_import import Envelope, import_capture, payload_decoder
from rpcbench.capture_import.decode import DOCUMENTS, pick
from rpcbench.errors import BenchError
from rpcbench.registry import Registry

REPO = Path(__file__).resolve().parent.parent
CAPTURES = REPO / "tests" / "data" / "captures" / "import"
#: recording -> (server port, framing, decode, how the programs serialized a message)
RECORDINGS: Dict[str, Tuple[int, str, str, Callable[[Dict[str, Any]], bytes]]] = {
    "varint": (47006, "varint", "msgpack", msgpack.packb),
    "u32le": (47007, "u32", "msgpack", msgpack.packb),
    "ws_plain": (47001, "websocket", "json", lambda m: json.dumps(m).encode()),
    "ws_deflate": (47002, "websocket", "json", lambda m: json.dumps(m).encode()),
    "ws_deflate_nctx": (47003, "websocket", "json", lambda m: json.dumps(m).encode()),
    "u16": (47004, "u16", "msgpack", msgpack.packb),
    "udp": (47005, "udp", "json", lambda m: json.dumps(m).encode()),
    "udp6_any": (47008, "udp", "json", lambda m: json.dumps(m).encode()),  # IPv6, tcpdump -i any (SLL2)
}


def endian(name: str) -> str:
    return "little" if name.endswith("le") else "big"


def run_import(tmp_path: Path, name: str, capture: Any = None) -> Tuple[List[Call], Dict[str, Any]]:
    port, framing, decode, _ = RECORDINGS[name]
    out = tmp_path / f"{name}.rpct"
    decoder = payload_decoder(decode, Envelope(), Registry.default().create)
    import_capture(str(capture or CAPTURES / f"{name}.pcap"), str(out), port, framing, decoder,
                   {"framing": framing, "server_port": port, "decode": decode}, endian(name))
    return list(open_trace(out)), trace_header(out)["capture"]


def sent(name: str) -> List[Dict[str, Any]]:
    return json.loads((CAPTURES / f"{name}.sent.json").read_text(encoding="utf-8"))


def streams(items: List[Tuple[str, str, str, Any]]) -> Dict[Tuple[str, str], List[Tuple[str, Any]]]:
    """(conn, dir) -> [(method, args)] in order: what one side sent on one connection."""
    out: Dict[Tuple[str, str], List[Tuple[str, Any]]] = defaultdict(list)
    for conn, direction, method, args in items:
        out[conn, direction].append((method, args))
    return dict(out)


def as_sent(calls: List[Call]) -> Dict[Tuple[str, str], List[Tuple[str, Any]]]:
    return streams([(c.conn, c.dir, c.method, c.args) for c in calls])


def expected(name: str) -> Dict[Tuple[str, str], List[Tuple[str, Any]]]:
    return streams([(m["conn"], m["dir"], m["method"], m["args"]) for m in sent(name)])


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_every_sent_message_comes_back_with_its_direction_connection_and_method(tmp_path, name):
    calls, header = run_import(tmp_path, name)
    assert as_sent(calls) == expected(name)
    assert header["messages"] == len(sent(name)) == len(calls)
    assert header["partial_dropped"] == header["undecoded"] == header["truncated_bytes"] == 0
    assert [c.t for c in calls] == sorted(c.t for c in calls) and calls[0].t > 1.7e18  # capture clock, ns


@pytest.mark.parametrize("name", ["ws_plain", "u16", "u32le", "varint", "udp", "udp6_any"])
def test_wire_is_exactly_what_the_programs_sent(tmp_path, name):
    calls, _ = run_import(tmp_path, name)
    serialize = RECORDINGS[name][3]
    by_stream = streams([(m["conn"], m["dir"], m["method"], serialize({"method": m["method"], "args": m["args"]}))
                         for m in sent(name)])
    assert streams([(c.conn, c.dir, c.method, c.wire) for c in calls]) == by_stream


@pytest.mark.parametrize("name, takeover", [("ws_deflate", True), ("ws_deflate_nctx", False)])
def test_deflated_wire_is_the_compressed_message_and_inflates_to_it(tmp_path, name, takeover):
    """Checked with zlib alone (not wsproto): with context takeover each stream inflates as one deflate
    stream, message after message; without it each message inflates on its own."""
    calls, header = run_import(tmp_path, name)
    assert header["deflate"] is True
    inflaters: Dict[Tuple[str, str], Any] = defaultdict(lambda: zlib.decompressobj(-15))
    for c in calls:
        inflate = inflaters[c.conn, c.dir] if takeover else zlib.decompressobj(-15)
        assert json.loads(inflate.decompress(c.wire + b"\x00\x00\xff\xff")) == {"method": c.method, "args": c.args}
    plain = sum(len(json.dumps({"method": c.method, "args": c.args})) for c in calls)
    assert sum(len(c.wire) for c in calls) < plain


def count_payload_packets(path: Path, port: int) -> Tuple[int, Dict[str, Tuple[int, int]]]:
    """The link type, and per direction (packets with payload, their IP + transport header bytes), counted by
    dpkt's own reader."""
    out = {"c2s": [0, 0], "s2c": [0, 0]}
    with open(path, "rb") as f:
        reader = dpkt.pcap.Reader(f)
        link = {1: dpkt.ethernet.Ethernet, 276: dpkt.sll2.SLL2}[reader.datalink()]
        for _, buf in reader:
            ip = link(buf).data
            if port in (ip.data.sport, ip.data.dport) and ip.data.data:
                side = out["c2s" if ip.data.dport == port else "s2c"]
                side[0] += 1
                side[1] += (ip.len if isinstance(ip, dpkt.ip.IP) else 40 + ip.plen) - len(ip.data.data)
    return reader.datalink(), {k: (v[0], v[1]) for k, v in out.items()}


@pytest.mark.parametrize("name", sorted(RECORDINGS))
def test_header_counts_packets_and_headers_as_dpkt_reader_does(tmp_path, name):
    calls, header = run_import(tmp_path, name)
    port, framing = RECORDINGS[name][:2]
    link_type, counted = count_payload_packets(CAPTURES / f"{name}.pcap", port)
    assert header["packets"] == {d: counted[d][0] for d in counted}
    prefix = {"u16": lambda n: 2, "u32": lambda n: 4, "varint": lambda n: (n.bit_length() + 6) // 7 or 1}.get(
        framing, lambda n: 0)
    framing_bytes = {d: sum(prefix(len(c.wire)) for c in calls if c.dir == d) for d in counted}
    if framing != "websocket":  # websocket adds frame headers: checked against the stream below
        assert header["header_bytes"] == {d: counted[d][1] + framing_bytes[d] for d in counted}
    assert header["framing"] == framing and header["server_port"] == port and header["link_type"] == link_type
    assert header["connections"] == len({c.conn for c in calls})


# ---------------------------------------------------------------------------- hostile and odd captures


def packets(name: str) -> List[Tuple[float, bytes]]:
    with open(CAPTURES / f"{name}.pcap", "rb") as f:
        return [(ts, bytes(buf)) for ts, buf in dpkt.pcap.Reader(f)]


def write_pcap(path: Path, frames: List[Tuple[float, bytes]], linktype: int = 1) -> Path:
    with open(path, "wb") as f:
        writer = dpkt.pcap.Writer(f, linktype=linktype)
        for ts, buf in frames:
            writer.writepkt(buf, ts)
    return path


def tcp_of(buf: bytes) -> Tuple[dpkt.ethernet.Ethernet, dpkt.tcp.TCP]:
    eth = dpkt.ethernet.Ethernet(buf)
    return eth, eth.data.data


def with_payload(buf: bytes, payload: bytes, seq_shift: int = 0) -> bytes:
    """The packet carrying ``payload`` at sequence number + ``seq_shift`` instead (lengths and checksums redone)."""
    eth, tcp = tcp_of(buf)
    tcp.data, tcp.seq, tcp.sum = payload, (tcp.seq + seq_shift) % (1 << 32), 0
    eth.data.len, eth.data.sum = len(eth.data), 0
    return bytes(eth)


def payload_indices(frames: List[Tuple[float, bytes]], port: int) -> List[int]:
    return [i for i, (_, buf) in enumerate(frames) if tcp_of(buf)[1].data and port in
            (tcp_of(buf)[1].sport, tcp_of(buf)[1].dport)]


@pytest.mark.parametrize("name", ["u16", "ws_deflate"])
def test_reordered_retransmitted_and_overlapping_segments_give_the_same_calls(tmp_path, name):
    frames = packets(name)
    port = RECORDINGS[name][0]
    data_at = payload_indices(frames, port)
    split = set(data_at[2:-2:3])  # every third data segment: cut in two overlapping parts, sent second first
    hostile = []
    for i, (ts, buf) in enumerate(frames):
        data = tcp_of(buf)[1].data
        if i in split and len(data) >= 8:
            cut = len(data) // 2
            hostile += [(ts, with_payload(buf, data[cut:], cut)), (ts + 1e-4, with_payload(buf, data[:cut + 3]))]
        else:
            hostile.append((ts, buf))
    hostile.insert(len(hostile) - 3, frames[data_at[5]])  # retransmissions, late
    hostile.insert(len(hostile) // 2, frames[data_at[7]])
    calls, header = run_import(tmp_path, name, write_pcap(tmp_path / "hostile.pcap", hostile))
    clean, clean_header = run_import(tmp_path, name)
    assert as_sent(calls) == as_sent(clean) == expected(name)
    assert [c.wire for c in calls] != [] and sorted(c.wire for c in calls) == sorted(c.wire for c in clean)
    assert header["partial_dropped"] == 0
    assert header["packets"]["c2s"] + header["packets"]["s2c"] > sum(clean_header["packets"].values())


@pytest.mark.parametrize("name", ["u16", "ws_plain"])
def test_a_capture_ending_inside_a_message_drops_it_and_counts_it(tmp_path, name):
    frames = packets(name)
    port = RECORDINGS[name][0]
    data_frames = [i for i in payload_indices(frames, port) if tcp_of(frames[i][1])[1].data[0] & 0x0F in (1, 2)]
    last = data_frames[-1] if name.startswith("ws") else payload_indices(frames, port)[-1]  # a message, not a close
    ts, buf = frames[last]
    data = tcp_of(buf)[1].data
    cut = frames[:last] + [(ts, with_payload(buf, data[:len(data) - 1]))]  # its last byte never captured
    calls, header = run_import(tmp_path, name, write_pcap(tmp_path / "cut.pcap", cut))
    full = expected(name)
    got = as_sent(calls)
    assert header["partial_dropped"] == 1 and header["messages"] == len(calls) == sum(map(len, got.values()))
    assert all(got[k] == full[k][:len(got[k])] for k in got) and len(calls) < len(sent(name))
    assert len(calls) == len(sent(name)) - 1  # only the cut message is lost


def test_a_capture_starting_mid_stream_reads_from_its_first_segment(tmp_path):
    """Started after the SYN and the first messages (as tcpdump started late): the rest comes back."""
    frames = packets("u16")
    port = RECORDINGS["u16"][0]
    first = payload_indices(frames, port)[10]
    calls, header = run_import(tmp_path, "u16", write_pcap(tmp_path / "late.pcap", frames[first:]))
    full = expected("u16")
    got = as_sent(calls)
    assert all(got[k] == full[k][len(full[k]) - len(got[k]):] for k in got)
    assert header["partial_dropped"] == 0 and 0 < len(calls) < len(sent("u16"))


def test_a_websocket_capture_starting_after_the_upgrade_still_reads_plain_frames(tmp_path):
    frames = packets("ws_plain")
    port = RECORDINGS["ws_plain"][0]
    late = [frames[i] for i in payload_indices(frames, port)[8:]]
    calls, header = run_import(tmp_path, "ws_plain", write_pcap(tmp_path / "late.pcap", late))
    full = expected("ws_plain")
    got = as_sent(calls)
    assert got and all(got[k] == full[k][len(full[k]) - len(got[k]):] for k in got)


def run_bench(*args: Any) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def import_cli(capture: Path, out: Path, name: str = "u16", *extra: str) -> subprocess.CompletedProcess:
    port, framing, decode, _ = RECORDINGS[name]
    return run_bench("import", capture, "--server-port", port, "--framing", framing, "--decode", decode,
                     "--out", out, *extra)


def one_line_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert all(w in proc.stderr for w in words), proc.stderr


def test_a_truncated_capture_imports_every_complete_packet_and_says_how_many_bytes_were_cut(tmp_path):
    data = (CAPTURES / "u16.pcap").read_bytes()
    frames = packets("u16")
    cut_at = len(data) - len(frames[-1][1]) // 2 - len(frames[-2][1]) - 16  # inside the second-to-last packet
    (tmp_path / "cut.pcap").write_bytes(data[:cut_at])
    proc = import_cli(tmp_path / "cut.pcap", tmp_path / "out.rpct")
    assert proc.returncode == 0, proc.stderr
    [warning] = [line for line in proc.stderr.splitlines() if "cut short" in line]
    header = trace_header(tmp_path / "out.rpct")["capture"]
    assert f"last {header['truncated_bytes']} bytes" in warning and 0 < header["truncated_bytes"] < 200
    assert "Traceback" not in proc.stderr


def test_bad_input_is_one_line_and_leaves_out_untouched(tmp_path):
    out = tmp_path / "out.rpct"
    out.write_bytes(b"an older trace")
    text = tmp_path / "notes.txt"
    text.write_text("this is not a capture\n", encoding="utf-8")
    one_line_error(import_cli(text, out), "notes.txt", "not a pcap or pcapng capture")
    one_line_error(import_cli(write_pcap(tmp_path / "user0.pcap", packets("u16"), linktype=147), out),
                   "link type 147 is not supported")
    one_line_error(import_cli(CAPTURES / "u16.pcap", out, "udp"), "no UDP payload to or from port 47005")
    one_line_error(import_cli(CAPTURES / "u16.pcap", out, "u16", "--decode", "bson"), "none of the 96 messages")
    one_line_error(import_cli(CAPTURES / "ws_plain.pcap", out, "ws_plain", "--framing", "u32"),
                   "no complete --framing u32 message in the 2 connection(s) on port 47001")
    one_line_error(import_cli(CAPTURES / "u16.pcap", out, "u16", "--framing", "websocket"),
                   "is not WebSocket: its first bytes (00 32 82 a6 6d 65 74 68) are no HTTP upgrade")
    assert out.read_bytes() == b"an older trace" and sorted(p.name for p in tmp_path.iterdir()) == [
        "notes.txt", "out.rpct", "user0.pcap"]


def test_a_snap_length_that_cut_payloads_is_refused(tmp_path):
    raw = bytearray((CAPTURES / "u16.pcap").read_bytes())
    # rewrite each record as tcpdump -s 80 would: caplen 80 at most, the original length kept
    at, out = 24, bytearray(raw[:24])
    while at < len(raw):
        sec, usec, caplen, length = struct.unpack_from("<IIII", raw, at)
        keep = min(caplen, 80)
        out += struct.pack("<IIII", sec, usec, keep, length) + raw[at + 16:at + 16 + keep]
        at += 16 + caplen
    (tmp_path / "snap.pcap").write_bytes(bytes(out))
    one_line_error(import_cli(tmp_path / "snap.pcap", tmp_path / "out.rpct"), "snap length", "tcpdump -s 0")
    assert not (tmp_path / "out.rpct").exists()


def client_hello() -> bytes:
    """A real TLS ClientHello, as Python's ssl module (OpenSSL) writes it, without any network."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="game.example")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_tls_is_refused_naming_the_connection(tmp_path):
    frames = packets("u16")
    port = RECORDINGS["u16"][0]
    first = payload_indices(frames, port)[0]
    ts, buf = frames[first]
    hello = client_hello()
    tls = frames[:first] + [(ts, with_payload(buf, hello))] + [
        (t, with_payload(b, tcp_of(b)[1].data, len(hello) - len(tcp_of(buf)[1].data)) if tcp_of(b)[1].dport == port
         else b) for t, b in frames[first + 1:]]
    client = "127.0.0.1:%d" % tcp_of(buf)[1].sport
    one_line_error(import_cli(write_pcap(tmp_path / "tls.pcap", tls), tmp_path / "out.rpct"),
                   f"connection {client} is TLS")


def test_undecodable_payloads_are_counted_skipped_and_the_first_named(tmp_path):
    frames = packets("u16")
    port = RECORDINGS["u16"][0]
    i = payload_indices(frames, port)[6]
    ts, buf = frames[i]
    data = bytearray(tcp_of(buf)[1].data)
    data[2] = 0xC1  # never used by msgpack: the message cannot decode
    frames[i] = (ts, with_payload(buf, bytes(data)))
    proc = import_cli(write_pcap(tmp_path / "bad.pcap", frames), tmp_path / "out.rpct")
    assert proc.returncode == 0, proc.stderr
    header = trace_header(tmp_path / "out.rpct")["capture"]
    assert header["undecoded"] == 1 and header["messages"] == len(sent("u16")) - 1
    [warning] = [line for line in proc.stderr.splitlines() if "did not decode" in line]
    assert f"packet {i + 1}," in warning and "stream offset" in warning


def test_pcapng_gives_the_same_calls_as_pcap(tmp_path):
    frames = packets("udp")
    with open(tmp_path / "udp.pcapng", "wb") as f:
        writer = dpkt.pcapng.Writer(f, linktype=1)
        for ts, buf in frames:
            writer.writepkt(buf, ts)
    calls, header = run_import(tmp_path, "udp", tmp_path / "udp.pcapng")
    clean, _ = run_import(tmp_path, "udp")
    assert calls == clean and header["messages"] == len(sent("udp"))


def test_the_cli_end_to_end(tmp_path):
    out = tmp_path / "ws.rpct"
    proc = import_cli(CAPTURES / "ws_deflate.pcap", out, "ws_deflate")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert "imported 96 messages" in proc.stdout and "2 connection(s)" in proc.stdout
    calls = list(TraceReader(out))
    assert len(calls) == 96 and all(c.wire for c in calls) and not (tmp_path / "ws.rpct.part").exists()


# ---------------------------------------------------------------------------- where the method sits


def test_default_envelope_by_the_registry_codec_agrees_with_picking_fields(tmp_path):
    calls, _ = run_import(tmp_path, "ws_plain")
    registry_decode = payload_decoder("json", Envelope(), Registry.default().create)
    for c in calls:
        assert registry_decode(c.wire) == pick(DOCUMENTS["json"](c.wire), Envelope()) == (c.method, c.args)


@pytest.mark.parametrize("document, envelope, want", [
    ({"type": "move", "x": 1, "y": 2}, Envelope("type", ""), ("move", {"x": 1, "y": 2})),
    ({"op": 7, "d": [1, 2]}, Envelope("op", "d"), ("7", [1, 2])),
    (["move", {"x": 1}], Envelope("0", "1"), ("move", {"x": 1})),
    (["move", 1, 2], Envelope("0", ""), ("move", [1, 2])),
])
def test_custom_fields_pick_method_and_args(document, envelope, want):
    assert pick(document, envelope) == want
    decode = payload_decoder("msgpack", envelope, Registry.default().create)
    assert decode(msgpack.packb(document)) == want


@pytest.mark.parametrize("document, message", [
    ({"type": "move"}, "no 'method' field"), ([1, 2], "a list, not an object"),
    ({"method": None, "args": 1}, "NoneType"),
])
def test_a_message_without_the_fields_does_not_decode(document, message):
    with pytest.raises(ValueError, match=message):
        pick(document, Envelope())


def test_custom_fields_with_a_plugin_codec_are_refused():
    with pytest.raises(BenchError, match="decodes \\(method, args\\) itself"):
        payload_decoder("ujson", Envelope("type", "data"), Registry.default().create)


GAME_PROTO = """
syntax = "proto3";
package game;
message Move { int32 id = 1; double x = 2; }
message Chat { string text = 1; }
message Envelope { oneof body { Move move = 1; Chat chat = 2; } uint32 seq = 3; }
message Flat { string method = 1; Move args = 2; }
"""


def test_protobuf_message_by_oneof_or_by_fields(tmp_path):
    from google.protobuf import message_factory

    from rpcbench import protobuf

    proto = tmp_path / "game.proto"
    proto.write_text(GAME_PROTO, encoding="utf-8")
    pool = protobuf.load(protobuf.Settings((str(proto),))).pool
    envelope_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("game.Envelope"))
    flat_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("game.Flat"))
    create = Registry.default().create
    by_oneof = payload_decoder("protobuf", Envelope("body", "args"), create, ([str(proto)], [], "game.Envelope"))
    assert by_oneof(envelope_cls(move={"id": 3, "x": 1.5}, seq=9).SerializeToString()) == ("move", {"id": 3, "x": 1.5})
    assert by_oneof(envelope_cls(chat={"text": "gg"}).SerializeToString()) == ("chat", {"text": "gg"})
    with pytest.raises(ValueError, match="no member of oneof 'body'"):
        by_oneof(envelope_cls(seq=1).SerializeToString())
    by_fields = payload_decoder("protobuf", Envelope(), create, ([str(proto)], [], "game.Flat"))
    assert by_fields(flat_cls(method="move", args={"id": 4}).SerializeToString()) == ("move", {"id": 4, "x": 0.0})
    with pytest.raises(BenchError, match="--message 'Flat': no such message"):
        payload_decoder("protobuf", Envelope(), create, ([str(proto)], [], "Flat"))


@pytest.mark.parametrize("name", ["ws_deflate", "u16"])
def test_damaged_captures_import_or_fail_with_a_bench_error(tmp_path, name):
    """Bytes changed anywhere (headers, lengths, payloads), in pcap and pcapng: the import succeeds or stops
    with BenchError (one line on the command line), never another exception."""
    import random

    frames = packets(name)
    with open(tmp_path / "c.pcapng", "wb") as f:
        writer = dpkt.pcapng.Writer(f, linktype=1)
        for ts, buf in frames:
            writer.writepkt(buf, ts)
    rng = random.Random(32)
    for source in (CAPTURES / f"{name}.pcap", tmp_path / "c.pcapng"):
        data = source.read_bytes()
        for trial in range(25):
            damaged = bytearray(data)
            for _ in range(rng.choice((1, 3, 20))):
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            path = tmp_path / f"d{trial}{source.suffix}"
            path.write_bytes(bytes(damaged[:rng.randrange(len(damaged) // 2, len(damaged) + 1)]))
            try:
                run_import(tmp_path, name, path)
            except BenchError:
                pass
