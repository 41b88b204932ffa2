"""``+brotli-N``: Brotli on each message on its own (quality N = 0..11; its built-in dictionary helps text)."""

import brotli

from rpcbench.codec import Compressor


class Brotli(Compressor):
    """``brotli.compress(data, quality=N)``: a per-message stream whose built-in web dictionary suits JSON."""

    name = "brotli"
    library = "brotli"
    default_level = 5
    levels = range(0, 12)

    def compress(self, data: bytes) -> bytes:
        return brotli.compress(data, quality=self.level)

    def decompress(self, data: bytes) -> bytes:
        return brotli.decompress(data)
