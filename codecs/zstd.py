"""Zstandard three ways (python-zstandard, levels 1-22).

* ``+zstd-N``: one frame per message on its own;
* ``+zstdstream-N``: one stream per connection and direction, flushed after every message;
* ``+zstddict-N``: one frame per message, primed with a dictionary trained on held-out calls.
"""

from typing import List, Optional

import zstandard

from rpcbench.codec import Compressor

#: zstd's own bounds on the window (``--zstd-window-log``): 1 KiB to 128 MiB on 32-bit safe settings
WINDOW_LOGS = range(10, 28)
#: what the dictionary is compressed with when it is shipped to a client once
SHIP_LEVEL = 19


class Zstd(Compressor):
    """One zstd frame per message; the (de)compressor objects are built once and reused."""

    name = "zstd"
    library = "zstandard"
    default_level = 3
    levels = range(1, 23)

    def __init__(self, level: Optional[int] = None) -> None:
        super().__init__(level)
        self._compress = zstandard.ZstdCompressor(level=self.level).compress
        self._decompress = zstandard.ZstdDecompressor().decompress

    def compress(self, data: bytes) -> bytes:
        return self._compress(data)

    def decompress(self, data: bytes) -> bytes:
        return self._decompress(data)


class ZstdStream(Compressor):
    """One zstd stream per connection and direction, block-flushed per message (as Discord's gateway).

    The frame never ends: each message is compressed into the open stream and flushed
    with ``COMPRESSOBJ_FLUSH_BLOCK``, so the receiver can decode it whole on arrival, and
    every earlier message of the connection (up to the window) serves as context. The
    decoder is a streaming one: bytes cut anywhere (as TCP delivers them) decode to the
    same output. ``window_log`` (``--zstd-window-log``) bounds the window, and with it the
    memory each side keeps per connection; None keeps the level's own.
    """

    name = "zstdstream"
    library = "zstandard"
    default_level = 3
    levels = range(1, 23)
    per_connection = True
    ordered_delivery = True

    def __init__(self, level: Optional[int] = None, window_log: Optional[int] = None) -> None:
        super().__init__(level)
        if window_log is not None and window_log not in WINDOW_LOGS:
            raise ValueError(f"zstd window_log must be {WINDOW_LOGS.start}..{WINDOW_LOGS.stop - 1}, not {window_log}")
        self.window_log = window_log
        if window_log is None:
            self._cctx = zstandard.ZstdCompressor(level=self.level)
        else:
            params = zstandard.ZstdCompressionParameters.from_level(self.level, window_log=window_log)
            self._cctx = zstandard.ZstdCompressor(compression_params=params)
        self._dctx = zstandard.ZstdDecompressor()
        self._compressor = self._cctx.compressobj()
        self._decompress = self._dctx.decompressobj().decompress
        self._flush = zstandard.COMPRESSOBJ_FLUSH_BLOCK

    def connection(self) -> "ZstdStream":
        return ZstdStream(self.level, self.window_log)

    def compress(self, data: bytes) -> bytes:
        c = self._compressor
        return c.compress(data) + c.flush(self._flush)

    def decompress(self, data: bytes) -> bytes:
        return self._decompress(data)

    def state_bytes(self) -> int:
        """Memory this connection keeps: the compression and decompression contexts with their windows."""
        return self._cctx.memory_size() + self._dctx.memory_size()


class ZstdDict(Compressor):
    """One zstd frame per message, primed with a dictionary trained on calls it is not measured on.

    The dictionary (``zstandard.train_dictionary``, trained by the run before the size
    pass: ``--train-fraction`` / ``--train-trace``, ``--dict-size``) is shared by every
    connection of a server and shipped once to each client. Frames omit the dictionary id
    (both sides know it). Stateless per message: no ordering needed.
    """

    name = "zstddict"
    library = "zstandard"
    default_level = 3
    levels = range(1, 23)
    trained = True

    def shared_state_bytes(self) -> int:
        """The dictionary, held once for all connections (zstd's digested copies of it come on top, once)."""
        return self.dict_bytes

    def __init__(self, level: Optional[int] = None, dictionary: bytes = b"") -> None:
        super().__init__(level)
        if not dictionary:
            raise ValueError("zstddict needs a trained dictionary (run_benchmark trains one before the size pass)")
        self._dictionary = dictionary
        self.dict_bytes = len(dictionary)
        prepared = zstandard.ZstdCompressionDict(dictionary)
        prepared.precompute_compress(level=self.level)
        self._cctx = zstandard.ZstdCompressor(level=self.level, dict_data=prepared, write_dict_id=False)
        self._dctx = zstandard.ZstdDecompressor(dict_data=prepared)
        self._compress = self._cctx.compress
        self._decompress = self._dctx.decompress

    @classmethod
    def train(cls, samples: List[bytes], size: int) -> bytes:
        """A dictionary of at most ``size`` bytes trained on encoded messages (ZstdError if too few)."""
        return zstandard.train_dictionary(size, samples).as_bytes()

    @classmethod
    def ship_bytes(cls, dictionary: bytes) -> int:
        """Bytes it takes to send the dictionary to one client (compressed at level 19)."""
        return len(zstandard.ZstdCompressor(level=SHIP_LEVEL).compress(dictionary))

    def compress(self, data: bytes) -> bytes:
        return self._compress(data)

    def decompress(self, data: bytes) -> bytes:
        return self._decompress(data)
