"""``+zstd-N``: Zstandard on each message on its own (python-zstandard, levels 1-22)."""

import zstandard

from rpcbench.codec import Compressor


class Zstd(Compressor):
    """One zstd frame per message; the (de)compressor objects are built once and reused."""

    name = "zstd"
    library = "zstandard"
    default_level = 3
    levels = range(1, 23)

    def __init__(self, level=None) -> None:
        super().__init__(level)
        self._compress = zstandard.ZstdCompressor(level=self.level).compress
        self._decompress = zstandard.ZstdDecompressor().decompress

    def compress(self, data: bytes) -> bytes:
        return self._compress(data)

    def decompress(self, data: bytes) -> bytes:
        return self._decompress(data)
