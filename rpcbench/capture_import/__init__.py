"""``run_bench.py import``: a pcap/pcapng capture of a game server's traffic becomes a trace.

pcap.py reads the file, segments.py each packet's TCP/UDP part, tcp.py reassembles streams,
framing.py and websocket.py cut messages out of them, decode.py turns each into
``(method, args)`` with the game's codec, and importer.py ties them together and writes the trace
(each call keeping its payload as captured in ``Call.wire``). Reference: docs/capture.md.
"""

from .decode import Envelope, payload_decoder
from .importer import FRAMINGS, import_capture

__all__ = ["Envelope", "payload_decoder", "FRAMINGS", "import_capture"]
