"""A schema for the typed codecs, inferred from every call of the run's traces when the run has none for them.

``protobuf`` (and ``protobuf+zlib``...) and ``msgspec-struct`` need a message per method.
The bundled schemas describe the bundled samples' methods; on a team's own trace they
lack its methods. A team's own .proto would cover every RPC method of its server, so the
inferred schema that stands in for it is inferred (:class:`rpcbench.protobuf.TraceShapes`)
from every call of the run's traces, methods that first appear late included, in the one
read that also takes the dictionaries' held-out calls (rpcbench/training.py), and handed to
the typed codecs the way ``--proto`` would. Nothing is held out for it: every codec is
measured on the same calls. A schema the user names with ``--proto`` keeps priority; so do
the bundled schemas when they define every method of the trace. A bundled schema that does
not load (two files defining the same names...) stops the run with its one-line reason:
never a silent fall-back to inference.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import AbstractSet, Any, Dict, Iterator, List, Sequence

from rpc_capture import Call

from . import protobuf
from .config import RunConfig
from .protobuf.compile import CACHE_DIR
from .registry import Registry

TYPED = ("protobuf", "msgspec-struct", "quant")  #: codecs whose messages come from the run's protobuf schemas
PACKAGE = "inferred"  #: the inferred schema's protobuf package
FILE_NAME = "inferred.proto"  #: its name beside the run's results


@dataclass(frozen=True)
class InferredSchema:
    """A .proto inferred from every call of the run's traces, and where it was written to be compiled."""

    source: str  #: the .proto text
    path: str  #: the file the typed codecs compile (in the schema cache, named by its content)
    messages: int  #: one per method of the traces
    calls: int  #: calls it was inferred from (every call of the traces)
    where: str  #: which calls, in words
    why: str  #: why the run inferred it rather than use the bundled schemas

    def summary(self) -> Dict[str, Any]:
        """What results.json keeps under ``trace.training.schema``."""
        return {"inferred_from": self.where, "calls": self.calls, "messages": self.messages,
                "file": FILE_NAME, "proto": self.source, "why": self.why}

    def settings(self, chosen: protobuf.Settings) -> protobuf.Settings:
        """The run's protobuf settings with this schema in place of the bundled ones."""
        return dataclasses.replace(chosen, files=(self.path,), inferred=True)


def wanted(config: RunConfig, ids: Sequence[str]) -> bool:
    """Whether the run has a typed codec (of its codec ``ids``) and no schema of the user's own (``--proto``)."""
    return not config.proto.files and any(cid.split("+")[0] in TYPED for cid in ids)


INFER_BATCH = 4096  #: calls given to the shapes at once (TraceShapes.add_all: a key's values at a time)


class Inference:
    """The typed codecs' schema, inferred from the calls: every call of the run's traces to its :attr:`shapes`
    (:func:`infer_from`), then :meth:`schema`. Made before the read, so that bundled schemas that do not load (two
    files defining the same names...) stop the run at once with their one-line reason: never a silent fall-back to
    inference."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.bundled = _bundled_methods(config.proto)
        self.shapes = protobuf.TraceShapes()  #: the calls' shapes

    def merge(self, parts: Sequence[protobuf.TraceShapes]) -> bool:
        """Take the shapes of runs of calls read apart (in call order) as if their calls were added here in order;
        False, nothing taken, where they cannot tell what that gives (:class:`rpcbench.protobuf.InexactMerge`)."""
        shapes = protobuf.TraceShapes()
        try:
            for part in parts:
                shapes.merge(part)
        except protobuf.InexactMerge:
            return False
        self.shapes = shapes
        return True

    def schema(self) -> InferredSchema | None:
        """The schema inferred from the calls added, when the bundled schemas lack a method of theirs; None when
        they define them all."""
        methods = self.shapes.by_method.keys()
        missing = methods - self.bundled
        if not missing:
            return None
        files = self.config.trace_files
        source, _ = self.shapes.schema(f"every call of {', '.join(Path(t).name for t in files)}", PACKAGE)
        # (rpcbench-method comments in the source map the methods that cannot be rpc names)
        path = CACHE_DIR / "inferred" / hashlib.sha256(source.encode()).hexdigest()[:20] / FILE_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file():
            path.write_text(source, encoding="utf-8")
        where = "the trace" if len(files) == 1 else f"the {len(files)} traces"
        why = (f"no --proto given, and the bundled schemas lack {len(missing):,} of the {len(methods):,} methods "
               f"of {where}")
        calls = self.shapes.calls
        return InferredSchema(source, str(path), len(methods), calls, f"every call of {where} ({calls:,} calls)", why)


def infer_from(calls: Iterator[Call], shapes: protobuf.TraceShapes, keep: int = 0) -> List[Call]:
    """Give every call of ``calls`` to ``shapes``, INFER_BATCH at a time (TraceShapes.add_all); the first ``keep``
    of them."""
    kept: List[Call] = []
    while batch := list(itertools.islice(calls, INFER_BATCH)):
        if len(kept) < keep:
            kept += batch[:keep - len(kept)]
        shapes.add_all(batch)
    return kept


def _bundled_methods(chosen: protobuf.Settings) -> AbstractSet[str]:
    """The methods the bundled schemas (every .proto in ``proto/``) define; none when there is no such file (an
    installed copy without them). Any other failure to load them (a clash, a file protoc refuses) is raised."""
    if not any(protobuf.PROTO_DIR.glob("*.proto")):
        return frozenset()
    return protobuf.load(chosen).methods.keys()


def use_schema(config: RunConfig, registry: Registry, schema: InferredSchema) -> RunConfig:
    """The config (and ``registry``, in place) with the typed codecs reading ``schema``."""
    settings = schema.settings(config.proto)
    registry.codec_options = {**registry.codec_options,
                              **{cid: {**registry.codec_options.get(cid, {}), "settings": settings} for cid in TYPED}}
    return dataclasses.replace(config, proto=settings)
