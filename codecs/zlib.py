"""``+zlib-N``: the standard zlib stream per message; ``+zlibstream-N``: one deflate stream per connection."""

import zlib

from rpcbench.codec import Compressor

_SYNC_TAIL = b"\x00\x00\xff\xff"
_MEM_LEVEL = 8  #: zlib's default memLevel, which compressobj uses
#: zlib documents its memory (zconf.h): deflate (1 << (windowBits + 2)) + (1 << (memLevel + 9)),
#: inflate (1 << windowBits) + about 7 kB; zlib has no call that reports it
_STREAM_BYTES = (1 << (zlib.MAX_WBITS + 2)) + (1 << (_MEM_LEVEL + 9)) + (1 << zlib.MAX_WBITS) + 7 * 1024


class Zlib(Compressor):
    """``zlib.compress(data, level)`` on each message on its own (header and checksum included)."""

    name = "zlib"
    default_level = 6
    levels = range(0, 10)

    def compress(self, data: bytes) -> bytes:
        return zlib.compress(data, self.level)

    def decompress(self, data: bytes) -> bytes:
        return zlib.decompress(data)


class ZlibStream(Compressor):
    """Raw deflate with one compression context per connection, as WebSocket permessage-deflate.

    Each message is flushed with ``Z_SYNC_FLUSH`` and its 4-byte ``00 00 ff ff`` tail is
    dropped (RFC 7692); earlier messages of the connection serve as the dictionary, which
    is what makes small repetitive messages shrink. The receiver keeps the matching state.
    Without the tail the bytes do not say where a message ends: the transport's framing
    (a WebSocket message) hands the decoder each message whole.
    """

    name = "zlibstream"
    default_level = 6
    levels = range(0, 10)
    per_connection = True
    ordered_delivery = True

    def __init__(self, level=None, window_bits: int = zlib.MAX_WBITS) -> None:
        """``window_bits``: the sender's LZ77 window, 2**9 to 2**15 bytes (permessage-deflate's
        ``server_max_window_bits``; ``captured`` times the one a capture's bytes reproduce with)."""
        super().__init__(level)
        self._window_bits = window_bits
        self._compressor = zlib.compressobj(self.level, zlib.DEFLATED, -window_bits)
        self._decompressor = zlib.decompressobj(-zlib.MAX_WBITS)  # inflates any window up to 2**15

    def connection(self) -> "ZlibStream":
        return ZlibStream(self.level, self._window_bits)

    def compress(self, data: bytes) -> bytes:
        c = self._compressor
        return (c.compress(data) + c.flush(zlib.Z_SYNC_FLUSH))[:-4]

    def decompress(self, data: bytes) -> bytes:
        return self._decompressor.decompress(data + _SYNC_TAIL)

    def state_bytes(self) -> int:
        """zlib's documented memory for one deflate and one inflate stream at default settings."""
        return _STREAM_BYTES
