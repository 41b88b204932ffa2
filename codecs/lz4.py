"""``+lz4-N``: LZ4 on each message on its own (lz4's block format with the size in front)."""

from typing import Optional

import lz4.block

from rpcbench.codec import Compressor


class Lz4(Compressor):
    """``lz4.block.compress``: level 0 is LZ4's fast default mode, 1-12 its high-compression mode (LZ4 HC).

    The block format carries the uncompressed size (4 bytes) and no frame header, which
    suits messages of a few hundred bytes better than the LZ4 frame format.
    """

    name = "lz4"
    library = "lz4"
    default_level = 0
    levels = range(0, 13)

    def __init__(self, level: Optional[int] = None) -> None:
        super().__init__(level)
        self._mode = "default" if self.level == 0 else "high_compression"

    def compress(self, data: bytes) -> bytes:
        return lz4.block.compress(data, mode=self._mode, compression=self.level)

    def decompress(self, data: bytes) -> bytes:
        return lz4.block.decompress(data)
