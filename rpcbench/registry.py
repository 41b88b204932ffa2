"""One registry for every codec and compressor, wherever its class comes from.

Sources, all through :meth:`Registry.load_file` / :meth:`Registry.add`:

* every ``*.py`` in the bundled ``codecs/`` folder (the built-ins, shipped inside the
  package as ``rpcbench/codecs/``; in a clone, a user adds a codec by dropping a file there),
* installed packages that declare codecs in the entry-point group ``rpcbench.codecs``
  (a class, or a module whose classes are all registered; docs/plugins.md),
* ``--codec-path FILE.py`` and ``--codecs-dir DIR``,
* ``--codec module:Class`` (an importable class).

``codecs/`` cannot be imported as a package (the standard library owns the name
``codecs``), so its files are loaded by path, each as module ``rpcbench_codecs.<stem>``.
A file or package whose import fails is skipped with one line.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import os
import re
import sys
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Type, Union, cast

from .codec import CallStage, Codec, Compressed, Compressor
from .errors import BenchError

log = logging.getLogger("rpcbench")

ENTRY_POINTS = "rpcbench.codecs"  #: the entry-point group plugin packages declare their codecs in
CODECS_DIR = (Path(__file__).resolve().parent / "codecs").resolve()  #: the built-ins, in the package
_BASE = re.compile(r"^[a-z0-9_.\-]+$")  #: a codec id
_PART = re.compile(r"^(?P<name>[a-z0-9_]+)(?:-(?P<level>-?\d+))?$")  #: a stage or compressor[-level] after a +
_LEVELS = re.compile(r"^(?P<name>[a-z0-9_]+)-(?P<levels>\d+(?:\.\.\d+)?(?:,\d+(?:\.\.\d+)?)*)$")  #: zlib-1..3,9
_LEVEL_ITEM = re.compile(r"^\d+(?:\.\.\d+)?$")  #: 3 or 1..9: a level list's item


class Registry:
    """Codec and compressor classes by id, plus the plugin files that were skipped and why.

    ``codec_options`` maps a codec id or call stage name to keyword arguments for its
    constructor (the run's protobuf schemas for ``protobuf``, the id fields of ``ackdelta``,
    say), ``compressor_options`` a compressor name to those of its constructor
    (``window_log`` for ``zstdstream``): settings reach codecs as data, never globals.
    ``dictionaries`` maps an inner codec id to the dictionary trained on its bytes, for
    ``trained`` compressors (``json+zstddict-3`` uses ``dictionaries["json"]``).
    """

    def __init__(self, codec_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
                 compressor_options: Optional[Mapping[str, Mapping[str, Any]]] = None) -> None:
        self.codec_options: Mapping[str, Mapping[str, Any]] = codec_options or {}
        self.compressor_options: Mapping[str, Mapping[str, Any]] = compressor_options or {}
        self.dictionaries: Dict[str, bytes] = {}
        self.codecs: Dict[str, Type[Codec]] = {}
        self.compressors: Dict[str, Type[Compressor]] = {}
        self.stages: Dict[str, Type[CallStage]] = {}
        self.origins: Dict[str, str] = {}
        self.skipped: Dict[str, str] = {}

    @classmethod
    def default(cls, extra_dirs: Iterable[Union[str, os.PathLike]] = (),
                codec_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
                compressor_options: Optional[Mapping[str, Mapping[str, Any]]] = None) -> "Registry":
        """The built-in ``codecs/`` folder, the installed plugin packages, then any extra plugin folders."""
        reg = cls(codec_options, compressor_options)
        reg.load_dir(CODECS_DIR)
        reg.load_entry_points()
        for folder in extra_dirs:
            reg.load_dir(folder)
        return reg

    def load_entry_points(self) -> None:
        """Register what installed packages declare in the ``rpcbench.codecs`` entry-point group.

        Each entry point names a class (``mycodec = mypkg:MyCodec``) or a module (``mypkg``,
        every codec class it defines). Its origin is the distribution and version
        (``rpcbench-examplecodec 0.1.0``); one whose import fails is skipped with one line.
        """
        for ep in importlib.metadata.entry_points(group=ENTRY_POINTS):
            origin = f"{ep.dist.name} {ep.dist.version}" if ep.dist else ep.value
            try:
                obj = ep.load()
                if isinstance(obj, ModuleType):
                    self.add_module(obj, origin)
                else:
                    self.add(obj, origin)
            except Exception as e:  # a broken plugin package must not take the built-ins down
                why = str(e) if isinstance(e, BenchError) else f"{type(e).__name__}: {e}"
                self.skipped[origin] = why
                log.warning("skipping codec package %s (entry point %s = %s): %s", origin, ep.name, ep.value, why)

    def load_dir(self, folder: Union[str, os.PathLike]) -> None:
        """Load every ``*.py`` file of a plugin folder (files starting with ``_`` excepted)."""
        path = Path(folder)
        if not path.is_dir():
            raise BenchError(f"codec folder {path} does not exist")
        for file in sorted(path.glob("*.py")):
            if not file.name.startswith("_"):
                self.load_file(file)

    def load_file(self, file: Union[str, os.PathLike]) -> None:
        """Load one plugin file by path and register the codec/compressor classes it defines."""
        path = Path(file)
        if not path.is_file():
            raise BenchError(f"codec file {path} does not exist")
        name = f"rpcbench_codecs.{_module_stem(path)}"
        spec = importlib.util.spec_from_file_location(name, path) if path.suffix == ".py" else None
        if spec is None or spec.loader is None:
            raise BenchError(f"codec file {path} is not a Python file (.py)")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except ImportError as e:
            del sys.modules[name]
            self.skipped[str(path)] = f"needs {e.name or e} (not installed)"
            log.info("skipping codec file %s: %s is not installed (in a clone: pip install -r requirements.txt; "
                     "else: pip install 'rpcbench[all]')", path, e.name or e)
            return
        except Exception as e:  # a broken user plugin must not take the built-ins down
            del sys.modules[name]
            self.skipped[str(path)] = f"{type(e).__name__}: {e}"
            log.warning("skipping codec file %s: %s: %s", path, type(e).__name__, e)
            return
        self.add_module(module, str(path))

    def load_class(self, spec: str) -> None:
        """Register ``module:Class`` (the module must be importable)."""
        mod_name, _, cls_name = spec.partition(":")
        if not mod_name or not cls_name:
            raise BenchError(f"--codec {spec!r}: expected module:Class")
        try:
            cls = getattr(importlib.import_module(mod_name), cls_name)
        except (ImportError, AttributeError) as e:
            raise BenchError(f"--codec {spec!r}: {e}") from None
        self.add(cls, spec)

    def add_module(self, module: ModuleType, origin: str) -> None:
        """Register the classes a module defines itself (not ones it imports)."""
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if obj.__module__ != module.__name__:
                continue
            if (issubclass(obj, Codec) and (obj.id or getattr(obj, "stage", ""))) or (
                    issubclass(obj, Compressor) and obj.name):
                self.add(obj, origin)

    def add(self, cls: type, origin: str = "") -> None:
        """Register one Codec, CallStage or Compressor class under its id / stage / name."""
        if isinstance(cls, type) and issubclass(cls, CallStage) and cls.stage:
            key, table = f"+{cls.stage}", cast(Dict[str, type], self.stages)
        elif isinstance(cls, type) and issubclass(cls, Codec) and cls.id:
            key, table = cls.id, cast(Dict[str, type], self.codecs)
        elif isinstance(cls, type) and issubclass(cls, Compressor) and isinstance(cls.name, str) and cls.name:
            key, table = f"+{cls.name}", cast(Dict[str, type], self.compressors)
        else:
            raise BenchError(f"{origin or cls!r}: not a Codec subclass with an id nor a Compressor with a name")
        if key in self.origins and self.origins[key] != origin:
            raise BenchError(f"{key.lstrip('+')!r} is defined twice: {self.origins[key]} and {origin}")
        if not _BASE.match(key.lstrip("+")) or "+" in key.lstrip("+"):
            raise BenchError(f"{origin}: id {key!r} must be lower case letters, digits, _ . - and no +")
        if inspect.isabstract(cls):
            missing = ", ".join(sorted(getattr(cls, "__abstractmethods__", ())))
            raise BenchError(f"{origin or cls.__module__}: {cls.__name__} does not define {missing} "
                             "(see rpcbench.codec)")
        table[key.lstrip("+")] = cls
        self.origins[key] = origin

    def known(self) -> List[str]:
        """Codec ids plus one example per compressor, for help and error messages."""
        return (sorted(self.codecs) + [f"<codec>+{name}" for name in sorted(self.stages)]
                + [f"<codec>+{name}-<level>" for name in sorted(self.compressors)])

    def create(self, codec_id: str) -> Codec:
        """An instance for an id: a codec, then any call stages, then compressors, joined by ``+``
        (``json``, ``json+zlib-6``, ``msgpack+delta+zstdstream-3``); unknown parts are a clear error."""
        base, *parts = codec_id.strip().split("+")
        if not _BASE.match(base) or base not in self.codecs:
            raise BenchError(f"unknown codec {base!r}{did_you_mean(base, self.codecs)}; known: "
                             f"{', '.join(self.known())}{self._skipped_note()}")
        codec = self.codecs[base](**self.codec_options.get(base, {}))
        for part in parts:
            codec = self._wrap(codec, part, codec_id)
        return codec

    def _wrap(self, codec: Codec, part: str, codec_id: str) -> Codec:
        """``codec`` behind one more part of an id: a call stage (``delta``) or a compressor (``zlib-6``)."""
        m = _PART.match(part)
        if m and m["name"] in self.stages and m["level"] is None:
            if isinstance(codec, Compressed):
                raise BenchError(f"{codec_id!r}: {m['name']} works on calls: put it before any compressor")
            return self.stages[m["name"]](codec, **self.codec_options.get(m["name"], {}))
        if not m or m["name"] not in self.compressors:
            raise BenchError(
                f"unknown compressor {m['name'] if m else part!r} in {codec_id!r}"
                f"{did_you_mean(m['name'] if m else part, [*self.compressors, *self.stages])}; known: "
                f"{', '.join(sorted(self.compressors)) or 'none'}; call stages: "
                f"{', '.join(sorted(self.stages)) or 'none'}{self._skipped_note()}"
            )
        comp_cls = self.compressors[m["name"]]
        level = None if m["level"] is None else int(m["level"])
        if level is not None and level not in comp_cls.levels:
            levels = comp_cls.levels
            raise BenchError(f"{codec_id!r}: {comp_cls.name} levels are {levels.start}..{levels.stop - 1}")
        options = dict(self.compressor_options.get(comp_cls.name, {}))
        if comp_cls.trained:
            if codec.name not in self.dictionaries:
                raise BenchError(f"{codec_id!r}: no dictionary trained on {codec.name} (run_benchmark trains one "
                                 "before the size pass)")
            options["dictionary"] = self.dictionaries[codec.name]
        try:
            return Compressed(codec, comp_cls(level, **options))
        except ValueError as e:
            raise BenchError(f"{codec_id!r}: {e}") from None

    def trained_compressor(self, codec_id: str) -> Optional[Tuple[str, Type[Compressor]]]:
        """``(id of what it compresses, compressor class)`` when a compressor of ``codec_id`` needs a
        trained dictionary (``msgpack+delta`` for ``msgpack+delta+zstddict-3``)."""
        parts = codec_id.strip().split("+")
        for i, part in enumerate(parts[1:], 1):
            m = _PART.match(part)
            comp = self.compressors.get(m["name"]) if m else None
            if comp is not None and comp.trained:
                return "+".join(parts[:i]), comp
        return None

    def expand(self, specs: Iterable[str]) -> List[str]:
        """Codec ids with their level ranges and lists spelled out: ``json+zlib-1..3`` is
        ``json+zlib-1``, ``json+zlib-2``, ``json+zlib-3``; ``json+zstd-1,3,19`` three ids. Only the
        last part of an id takes a range or list; levels are checked against the compressor's."""
        out: List[str] = []
        for spec in specs:
            head, _, last = spec.strip().rpartition("+")
            m = _LEVELS.match(last)
            if not head or not m or m["levels"].isdigit():
                if ".." in spec or "," in spec:
                    raise BenchError(f"{spec!r}: a level range (1..9) or list (1,3,19) goes after the last "
                                     "compressor of an id, as in json+zlib-1..9")
                out.append(spec.strip())
                continue
            levels = _levels(spec, m["levels"])
            comp = self.compressors.get(m["name"])
            if comp is not None and not set(levels) <= set(comp.levels):
                raise BenchError(f"{spec!r}: {comp.name} levels are {comp.levels.start}..{comp.levels.stop - 1}")
            out += [f"{head}+{m['name']}-{level}" for level in levels]
        return out

    def _skipped_note(self) -> str:
        if not self.skipped:
            return ""
        return " (skipped: " + "; ".join(f"{Path(f).name} {why}" for f, why in self.skipped.items()) + ")"

    def origin(self, codec_id: str) -> Optional[str]:
        """Where a codec id came from (a file path, a package and its version, or module:Class)."""
        return self.origins.get(codec_id)


def split_codec_list(text: str) -> Tuple[str, ...]:
    """A comma-separated ``--codecs`` value as codec ids (level lists kept whole): a bare level or
    range after a comma continues the id before it, so ``json,json+zstd-1,3,19`` is
    ``("json", "json+zstd-1,3,19")``."""
    ids: List[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if _LEVEL_ITEM.match(part):
            if not ids or not _LEVELS.match(ids[-1].rpartition("+")[2]):
                raise BenchError(f"--codecs: {part!r} is a level with no compressor before it "
                                 f"(write json+zlib-1,{part} or json+zlib-1..9)")
            ids[-1] += "," + part
        else:
            ids.append(part)
    return tuple(ids)


def _levels(spec: str, text: str) -> List[int]:
    """The levels a list of levels and ranges names (``1..3,9``: 1, 2, 3, 9), in order; a range must run upward."""
    levels: List[int] = []
    for item in text.split(","):
        low, _, high = item.partition("..")
        first, last = int(low), int(high or low)
        if last < first:
            raise BenchError(f"{spec!r}: the level range {item} runs backwards (write {last}..{first})")
        if last - first > 100:
            raise BenchError(f"{spec!r}: the level range {item} names over 100 levels")
        levels += range(first, last + 1)
    return levels


def _module_stem(path: Path) -> str:
    """A module-name-safe stem; distinct files with the same stem get distinct names."""
    stem = re.sub(r"\W", "_", path.stem)
    return stem if path.parent.resolve() == CODECS_DIR else f"{stem}_{zlib.crc32(str(path.resolve()).encode()):08x}"


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """``; did you mean 'json'?`` for the closest of ``known`` to a mistyped ``word``, or ""."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
