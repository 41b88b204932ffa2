"""A schema for the typed codecs, inferred from the training calls when the run has none for the trace.

``protobuf`` (and ``protobuf+zlib``...) and ``msgspec-struct`` need a message per method.
The bundled schemas describe the bundled sample's methods; on a team's own trace they
carry none of its calls. Rather than fail every call, the run infers a schema
(:func:`rpcbench.protobuf.infer_calls`) from the same held-out calls the dictionaries are
trained on (rpcbench/training.py), never from the measured ones, and hands it to the
typed codecs the way ``--proto`` would. A schema the user names with ``--proto`` keeps
priority; so do the bundled schemas when they define every method of the training calls.
Measured calls the inferred schema cannot carry fail, declared, with their reason.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Sequence

from rpc_capture import Call

from . import protobuf
from .config import RunConfig
from .errors import BenchError
from .protobuf.compile import CACHE_DIR
from .registry import Registry

TYPED = ("protobuf", "msgspec-struct", "quant")  #: codecs whose messages come from the run's protobuf schemas
PACKAGE = "inferred"  #: the inferred schema's protobuf package
FILE_NAME = "inferred.proto"  #: its name beside the run's results


@dataclass(frozen=True)
class InferredSchema:
    """A .proto inferred from the training calls, and where it was written to be compiled."""

    source: str  #: the .proto text
    path: str  #: the file the typed codecs compile (in the schema cache, named by its content)
    messages: int  #: one per method of the training calls
    calls: int  #: training calls it was inferred from
    where: str  #: which calls, in words

    def summary(self) -> Dict[str, Any]:
        """What results.json keeps under ``trace.training.schema``."""
        return {"inferred_from": self.where, "calls": self.calls, "messages": self.messages,
                "file": FILE_NAME, "proto": self.source}

    def settings(self, chosen: protobuf.Settings) -> protobuf.Settings:
        """The run's protobuf settings with this schema in place of the bundled ones."""
        return dataclasses.replace(chosen, files=(self.path,), inferred=True)


def wanted(config: RunConfig, registry: Registry) -> bool:
    """Whether the run has a typed codec and no schema of the user's own (``--proto``)."""
    return not config.proto.files and any(cid.split("+")[0] in TYPED for cid in registry.expand(config.codecs))


def infer_schema(config: RunConfig, calls: Sequence[Call], where: str) -> InferredSchema | None:
    """The schema inferred from ``calls`` when the bundled ones lack a method of theirs (None if they don't)."""
    methods = {call.method for call in calls}
    try:
        covered = methods <= set(protobuf.load(config.proto).methods)
    except BenchError:  # no bundled schema at all (an installed copy without proto/)
        covered = False
    if covered:
        return None
    traces = ", ".join(Path(t).name for t in config.trace_files)
    source, _ = protobuf.infer_calls(calls, f"the training calls of {traces}, not measured", PACKAGE)
    # (rpcbench-method comments in the source map the methods that cannot be rpc names)
    path = CACHE_DIR / "inferred" / hashlib.sha256(source.encode()).hexdigest()[:20] / FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file():
        path.write_text(source, encoding="utf-8")
    return InferredSchema(source, str(path), len(methods), len(calls), where)


def use_schema(config: RunConfig, registry: Registry, schema: InferredSchema) -> RunConfig:
    """The config (and ``registry``, in place) with the typed codecs reading ``schema``."""
    settings = schema.settings(config.proto)
    registry.codec_options = {**registry.codec_options,
                              **{cid: {**registry.codec_options.get(cid, {}), "settings": settings} for cid in TYPED}}
    return dataclasses.replace(config, proto=settings)
