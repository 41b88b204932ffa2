"""The packets of a pcap or pcapng file, with nanosecond timestamps and their cut-off bytes.

dpkt parses every header (``dpkt.pcap`` file and packet headers, ``dpkt.pcapng`` blocks); this
module only walks the file, because dpkt's own readers give float timestamps (losing the
nanoseconds), hide a packet's original length (so a snap length that cut payloads goes
unseen) and stop without a word at a file cut short.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO, Iterator, List, NamedTuple, Tuple

import dpkt

from ..errors import BenchError

_PCAP_NANO = {dpkt.pcap.TCPDUMP_MAGIC_NANO, dpkt.pcap.PMUDPCT_MAGIC_NANO}  #: magics of nanosecond timestamps
_PCAPNG_SHB = struct.pack("<I", dpkt.pcapng.PCAPNG_BT_SHB)
MAX_RECORD = 16 << 20  #: largest packet record or pcapng block read (tcpdump's snap length tops at 256 KiB)


class Frame(NamedTuple):
    """One captured packet: link-layer bytes as captured and the length it had on the wire."""

    number: int  #: 1-based, as Wireshark numbers packets
    t: int  #: capture time, nanoseconds since the epoch
    link_type: int
    data: bytes
    wire_len: int


@dataclass
class Capture:
    """An open capture: ``frames()`` yields its packets; afterwards ``truncated_bytes`` says how
    many bytes of an incomplete last packet (a capture cut short) were left out."""

    path: str
    kind: str  #: "pcap" or "pcapng"
    link_types: List[int]
    file: BinaryIO
    truncated_bytes: int = 0

    def frames(self) -> Iterator[Frame]:
        """The packets in file order (the file is closed at the end)."""
        try:
            yield from (_pcap_frames if self.kind == "pcap" else _pcapng_frames)(self)
        finally:
            self.file.close()


def open_capture(path: str) -> Capture:
    """Open a pcap or pcapng file; BenchError (one line) if it is neither or cannot be read."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise BenchError(f"{path}: cannot open ({e.strerror or e})") from None
    head = f.read(24)
    f.seek(0)
    try:
        if head[:4] == _PCAPNG_SHB:
            return Capture(path, "pcapng", [], f)
        reader = dpkt.pcap.Reader(f)  # the file header: magic, version, snap length, link type
    except (ValueError, dpkt.NeedData, dpkt.UnpackError, struct.error):
        f.close()
        raise BenchError(f"{path}: not a pcap or pcapng capture (it starts with {head[:8].hex(' ')})") from None
    return Capture(path, "pcap", [reader.datalink()], f)


def _pcap_frames(cap: Capture) -> Iterator[Frame]:
    f = cap.file
    f.seek(0)
    magic = struct.unpack(">I", f.read(4))[0]  # as dpkt names it: read big-endian
    f.seek(dpkt.pcap.FileHdr.__hdr_len__)
    header = dpkt.pcap.MAGIC_TO_PKT_HDR[magic]
    scale = 1 if magic in _PCAP_NANO else 1000
    index = 0
    while True:
        offset = f.tell()
        raw = f.read(header.__hdr_len__)
        if not raw:
            return
        hdr = header(raw) if len(raw) == header.__hdr_len__ else None
        if hdr is not None and hdr.caplen > MAX_RECORD:
            raise BenchError(f"{cap.path}: byte offset {offset}: a packet of {hdr.caplen} bytes: not a capture's "
                             f"(the file is damaged)")
        data = f.read(hdr.caplen) if hdr is not None else b""
        if hdr is None or len(data) < hdr.caplen:
            cap.truncated_bytes = len(raw) + len(data)
            return
        index += 1
        yield Frame(index, hdr.tv_sec * 1_000_000_000 + hdr.tv_usec * scale, cap.link_types[0], data, hdr.len)


def _pcapng_frames(cap: Capture) -> Iterator[Frame]:
    """Blocks of every section: interface descriptions (link type, time resolution) and packets."""
    f, little, index, offset = cap.file, True, 0, 0
    interfaces: List[Tuple[int, int, int]] = []  #: (link type, ticks per second, offset in seconds)
    while True:
        offset = f.tell()
        head = f.read(12)
        if not head:
            return
        if len(head) < 8:
            cap.truncated_bytes = len(head)
            return
        if head[:4] == _PCAPNG_SHB:  # a new section: its byte order, its own interfaces
            little = head[8:12] == struct.pack("<I", dpkt.pcapng.BYTE_ORDER_MAGIC)
            interfaces = []
        kind, size = struct.unpack("<II" if little else ">II", head[:8])
        if size > MAX_RECORD:
            raise BenchError(f"{cap.path}: byte offset {offset}: a block of {size} bytes: not a capture's "
                             f"(the file is damaged)")
        rest = f.read(max(size - len(head), 0))
        if size < 12 or len(rest) < size - len(head):
            cap.truncated_bytes = len(head) + len(rest)
            return
        block = head + rest
        try:
            if kind == dpkt.pcapng.PCAPNG_BT_IDB:
                interfaces.append(_interface(block, little))
                cap.link_types.append(interfaces[-1][0])
                continue
            if kind != dpkt.pcapng.PCAPNG_BT_EPB:
                continue  # section headers, name resolution, statistics...
            epb = (dpkt.pcapng.EnhancedPacketBlockLE if little else dpkt.pcapng.EnhancedPacketBlock)(block)
        except (dpkt.UnpackError, dpkt.NeedData, struct.error, IndexError, ValueError) as e:
            raise BenchError(f"{cap.path}: byte offset {offset}: malformed pcapng block ({e or type(e).__name__})"
                             ) from None
        if epb.iface_id >= len(interfaces):
            raise BenchError(f"{cap.path}: byte offset {offset}: packet {index + 1} names interface "
                             f"{epb.iface_id}, which the capture never describes (not a valid pcapng file)")
        link, per_second, seconds = interfaces[epb.iface_id]
        index += 1
        ticks = (epb.ts_high << 32) | epb.ts_low
        yield Frame(index, seconds * 1_000_000_000 + ticks * 1_000_000_000 // per_second, link, epb.pkt_data,
                    epb.pkt_len)


def _interface(block: bytes, little: bool) -> Tuple[int, int, int]:
    """An interface description block's link type, timestamp ticks per second and offset."""
    idb = (dpkt.pcapng.InterfaceDescriptionBlockLE if little else dpkt.pcapng.InterfaceDescriptionBlock)(block)
    per_second, offset = 1_000_000, 0
    for opt in idb.opts:
        if opt.code == dpkt.pcapng.PCAPNG_OPT_IF_TSRESOL:
            power = opt.data[0]
            per_second = 2 ** (power & 0x7F) if power & 0x80 else 10 ** power
        elif opt.code == dpkt.pcapng.PCAPNG_OPT_IF_TSOFFSET:
            offset = struct.unpack("<q" if little else ">q", opt.data[:8])[0]
    return idb.linktype, per_second, offset


