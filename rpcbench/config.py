"""``RunConfig``: everything one benchmark run needs, as one frozen value.

The command line builds it once (``commands/bench.py``); a notebook can build it
directly and call :func:`rpcbench.pipeline.run_benchmark`. Timing worker processes
receive the same value (pickled), never the command line, so they build the same codecs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import protobuf
from .captured import CAPTURED, SERVER_DEFLATE, capture_of, server_deflate, use_capture
from .precision import NO_PROFILE, Profile
from .codec import Codec
from .errors import BenchError
from .isolation import DEFAULT_CODEC_TIMEOUT
from .registry import Registry
from .link import LinkSettings
from .wire import PER_CALL, WirePolicy

PACKAGE = Path(__file__).resolve().parent  #: holds the bundled codecs/, proto/, samples/ (links in a clone)
DEFAULT_TRACE = PACKAGE / "samples" / "battle.rpct"  #: simulate --profile study: positional args, like the 2015 study's
DICT_TRACE = PACKAGE / "samples" / "battle_dict.rpct"  #: simulate --profile dict: named args, full-precision floats
#: The 2015 study's formats (docs/study.md: bson, json, ujson, json + zlib at levels 1 and 9,
#: protobuf with and without zlib), then what can win today: faster JSON (orjson), binary
#: untyped (msgpack) and typed rows (msgspec-struct), and compression that sees more than one
#: message: a stream per connection (zlib as WebSocket's permessage-deflate, zstd) and a
#: trained dictionary. One row each, so the default run stays under a minute.
DEFAULT_CODECS = (
    "json", "bson", "ujson", "json+zlib-1", "json+zlib-9", "protobuf", "protobuf+zlib-1",
    "orjson", "msgpack", "msgspec-struct", "json+zlibstream-1", "json+zstdstream-3", "json+zstddict-3",
)


@dataclass(frozen=True)
class RunConfig:
    """One run: what to replay, through which codecs, and how to time it (defaults as the CLI's)."""

    trace: str = str(DEFAULT_TRACE)
    codecs: Tuple[str, ...] = DEFAULT_CODECS  #: ids; a last part may name levels as a range or list (json+zlib-1..9)
    salvage: bool = False  #: skip damaged records of the trace instead of stopping
    sample: int = 1000  #: calls timed (a seeded sample stratified by method)
    seed: int = 1
    repeat: int = 40  #: timed rounds per codec and process set
    warmup: int = 1
    min_time: float = 0.01  #: seconds a timed batch lasts at least
    processes: int = 1  #: process sets (0: time in this process)
    #: codecs timed at once, each on a CPU of its own (None: 2 when the run may use 2 CPUs and ``jobs`` >= 2, else 1)
    timing_lanes: Optional[int] = None
    jobs: int = 2  #: watched processes sharing the size and fidelity pass (0: in this process, unwatched)
    gc: bool = False  #: keep the garbage collector on inside timed loops
    budget: Optional[float] = None  #: seconds the whole run may take
    codec_timeout: float = DEFAULT_CODEC_TIMEOUT
    tails: bool = True  #: per-call latency percentiles pass
    memory: bool = True  #: tracemalloc pass
    codec_files: Tuple[str, ...] = ()  #: extra plugin files (--codec-path)
    codec_dirs: Tuple[str, ...] = ()  #: extra plugin folders (--codecs-dir)
    codec_classes: Tuple[str, ...] = ()  #: importable ``module:Class`` codecs (--codec)
    proto: protobuf.Settings = field(default_factory=protobuf.Settings)
    precision: Profile = NO_PROFILE  #: how precisely each field must arrive, for ``quant`` (--precision FILE)
    train_fraction: float = 0.2  #: first share of the trace that trains dictionaries (and is not measured)
    train_trace: Optional[str] = None  #: train dictionaries on this trace instead (the whole trace is measured)
    dict_size: int = 16384  #: bytes of each trained dictionary, at most
    zstd_window_log: Optional[int] = None  #: window of ``zstdstream`` as log2 bytes (None: the level's)
    floor: bool = True  #: compute the trace's floor (each whole stream by lzma -9) and each codec's ratio to it
    dictionaries: Tuple[Tuple[str, bytes], ...] = ()  #: (inner codec id, dictionary), set by run_benchmark
    command: Tuple[str, ...] = ()  #: the command line as typed, recorded with the results
    traces: Tuple[str, ...] = ()  #: a fleet: several trace files, measured each and merged (``trace`` is the first)
    dask: Optional[str] = None  #: run the size pass on Dask: ``local``, ``local:N`` or a scheduler address
    sizes_only: bool = False  #: bytes and fidelity only, no timing
    sample_calls: Optional[int] = None  #: the size pass measures a seeded sample of this many calls
    chunk_calls: int = 16_000  #: large traces split into tasks of about this many calls (small: the last ends soon)
    wire: Tuple[WirePolicy, ...] = (WirePolicy(PER_CALL),)  #: how calls leave the server (--wire; docs/wire.md)
    transport: str = "none"  #: the headers results.csv's wire bytes include (--transport)
    packet_overhead: int = 0  #: the game's own bytes per packet (--packet-overhead)
    #: the trace's capture facts when imported from one (the captured row); not hashed (a dict), compared
    capture: Optional[Dict[str, Any]] = field(default=None, hash=False)
    link: LinkSettings = LinkSettings()  #: the lossy link each codec is replayed over (--loss; none: no replay)

    @property
    def trace_files(self) -> Tuple[str, ...]:
        """Every trace of the run."""
        return self.traces or (self.trace,)

    def with_capture(self) -> "RunConfig":
        """The run with the ``captured`` row first when its (first) trace was imported from a capture
        (:mod:`rpcbench.captured`)."""
        capture = self.capture if self.capture is not None else capture_of(self.trace)
        if capture is None:
            return self
        if capture.get("deflate") and SERVER_DEFLATE not in capture:
            capture = {**capture, SERVER_DEFLATE: server_deflate(self.trace)}
        codecs = self.codecs if CAPTURED in self.codecs else (CAPTURED, *self.codecs)
        return replace(self, capture=capture, codecs=codecs)

    def registry(self) -> Registry:
        """The built-in codecs plus the plugins this run adds, configured for it."""
        stream_options = {"window_log": self.zstd_window_log} if self.zstd_window_log else {}
        registry = Registry.default(self.codec_dirs, codec_options={"protobuf": {"settings": self.proto},
                                                                "msgspec-struct": {"settings": self.proto},
                                                                "quant": {"settings": self.proto,
                                                                          "precision": self.precision}},
                                    compressor_options={"zstdstream": stream_options})
        registry.dictionaries.update(self.dictionaries)
        for file in self.codec_files:
            registry.load_file(file)
        for spec in self.codec_classes:
            registry.load_class(spec)
        use_capture(registry, self.capture, self.proto)
        return registry

    def codec_ids(self, registry: Registry) -> Tuple[str, ...]:
        """The run's codec ids, level ranges expanded (``json+zlib-1..9``); empty or twice is an error."""
        ids = tuple(registry.expand(self.codecs))
        if not ids:
            raise BenchError("--codecs is empty")
        if len(set(ids)) != len(ids):
            raise BenchError(f"--codecs lists a codec twice: {','.join(ids)}")
        return ids

    def create_codecs(self, registry: Registry, ids: Optional[Sequence[str]] = None) -> Tuple[List[Codec], List[str]]:
        """Instances of the run's codecs (``ids``: already expanded by :meth:`codec_ids`), and one line for each
        skipped because its plugin file was skipped (a missing library); an unknown id is an error."""
        ids = self.codec_ids(registry) if ids is None else ids
        skipped_stems = {Path(f).stem: why for f, why in registry.skipped.items()}
        codecs, skipped = [], []
        for cid in ids:
            base = cid.split("+")[0]
            if base not in registry.codecs and base in skipped_stems:
                skipped.append(f"skipping {cid}: {skipped_stems[base]}")
            else:
                codecs.append(registry.create(cid))
        if not codecs:
            raise BenchError("none of the requested codecs is available")
        return codecs, skipped
