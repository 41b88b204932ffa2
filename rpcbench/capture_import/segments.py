"""A captured packet's TCP segment or UDP datagram: link layer, IP and transport headers read by dpkt."""

from __future__ import annotations

import socket
from typing import Callable, Dict, NamedTuple, Optional, Union

import dpkt

from .pcap import Frame

IPPacket = Union[dpkt.ip.IP, dpkt.ip6.IP6]
TCP, UDP = "tcp", "udp"


class Segment(NamedTuple):
    """The transport part of one captured packet."""

    frame: int  #: the packet's number in the capture (1-based)
    t: int  #: capture time, ns
    proto: str  #: "tcp" or "udp"
    src: str  #: "address:port"
    sport: int
    dst: str
    dport: int
    seq: int  #: TCP sequence number (0 for UDP)
    flags: int  #: TCP flags (0 for UDP)
    payload: bytes
    header_bytes: int  #: IP and TCP/UDP header bytes
    cut: bool  #: the snap length cut this packet short


def _by_version(data: bytes) -> IPPacket:
    return dpkt.ip6.IP6(data) if data[:1] and data[0] >> 4 == 6 else dpkt.ip.IP(data)


#: link type -> the IP packet inside a frame (https://www.tcpdump.org/linktypes.html)
LINK_TYPES: Dict[int, "tuple[str, Callable[[bytes], object]]"] = {
    1: ("Ethernet", lambda d: dpkt.ethernet.Ethernet(d).data),
    0: ("BSD loopback", lambda d: _by_version(d[4:])),
    108: ("OpenBSD loopback", lambda d: _by_version(d[4:])),
    101: ("raw IP", _by_version), 12: ("raw IP", _by_version), 14: ("raw IP", _by_version),
    228: ("raw IPv4", dpkt.ip.IP), 229: ("raw IPv6", dpkt.ip6.IP6),
    113: ("Linux cooked (SLL)", lambda d: dpkt.sll.SLL(d).data),
    276: ("Linux cooked v2 (SLL2)", lambda d: dpkt.sll2.SLL2(d).data),
}


def segment(frame: Frame) -> Optional[Segment]:
    """The TCP segment or UDP datagram a packet carries; None for anything else (ARP, ICMP, IP fragments...)."""
    try:
        ip = LINK_TYPES[frame.link_type][1](frame.data)
    except (dpkt.UnpackError, dpkt.NeedData, IndexError, ValueError):
        return None
    if not isinstance(ip, (dpkt.ip.IP, dpkt.ip6.IP6)):
        return None
    if isinstance(ip, dpkt.ip.IP) and (ip.mf or ip.offset):
        return None  # a fragment: games keep messages below the path MTU
    transport = ip.data
    if isinstance(transport, dpkt.tcp.TCP):
        proto, seq, flags = TCP, transport.seq, transport.flags
    elif isinstance(transport, dpkt.udp.UDP):
        proto, seq, flags = UDP, 0, 0
    else:
        return None
    family = socket.AF_INET6 if isinstance(ip, dpkt.ip6.IP6) else socket.AF_INET
    src, dst = socket.inet_ntop(family, ip.src), socket.inet_ntop(family, ip.dst)
    ip_len = ip.len if family == socket.AF_INET else 40 + ip.plen
    payload = bytes(transport.data)
    return Segment(frame.number, frame.t, proto, _endpoint(src, transport.sport), transport.sport,
                   _endpoint(dst, transport.dport), transport.dport, seq, flags, payload, ip_len - len(payload),
                   frame.wire_len > len(frame.data))


def _endpoint(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
