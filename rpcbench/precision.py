"""Precision profiles: how precisely each field of a call must arrive, for the ``quant`` codec (docs/codecs.md).

A profile is a TOML file the team edits. Its ``[fields]`` table maps a field path, or a glob over
paths, to a rule: ``{ step = 0.01, min = -50.0, max = 350.0 }`` for a float sent as a scaled int,
``{ min = 0, max = 2000 }`` for an int sent in the bits its range needs, or ``"exact"``. A path is
``<method>.args.<field>``, nested message fields joined with dots (``state_snapshot.args.entities.pos``:
every item of a repeated field shares its field's path), positional args by their index
(``obj_move.args.1``). A path named exactly wins over globs; among globs the first in the file wins.

``run_bench.py precision suggest --trace T`` writes one from a trace (rpcbench/precision_suggest.py).
The profile travels as data (:class:`Profile`, frozen: it is pickled to worker processes with the run's
settings), and every output names it by file name and hash.
"""

from __future__ import annotations

import decimal
import fnmatch
import hashlib
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from .errors import BenchError

EXACT = "exact"


@dataclass(frozen=True)
class Rule:
    """How one field travels: a float's ``step`` (None: all 64 bits), a number's range (None: unbounded)."""

    step: Optional[float] = None
    min: Optional[float] = None
    max: Optional[float] = None

    @property
    def fraction(self) -> Tuple[int, int]:
        """The step as written, as ``(units, divisor)`` with a power of ten below (0.01: ``(1, 100)``; 2.5:
        ``(25, 10)``): a decoded value is ``code * units / divisor``, the decimal correctly rounded to a float."""
        if self.step is None:
            return 1, 1
        sign, digits, exponent = decimal.Decimal(repr(self.step)).normalize().as_tuple()
        units = int("".join(map(str, digits))) * 10 ** max(int(exponent), 0)
        return units, 10 ** max(-int(exponent), 0)


EXACT_RULE = Rule()


@dataclass(frozen=True)
class Profile:
    """A precision profile: its rules in file order, and the file's name and hash (named in every output)."""

    rules: Tuple[Tuple[str, Rule], ...]
    name: str
    sha256: str  #: the first 12 hex digits of the file's SHA-256

    @property
    def label(self) -> str:
        """``battle.toml (sha256 3f2a...)``: how outputs name the profile."""
        return f"{self.name} (sha256 {self.sha256})"

    def rule(self, path: str) -> Rule:
        """The rule for a field path: the exact entry, else the first glob that matches, else exact."""
        found = dict(self.rules).get(path)
        if found is not None:
            return found
        for pattern, rule in self.rules:
            if fnmatch.fnmatchcase(path, pattern):
                return rule
        return EXACT_RULE

    def summary(self) -> Dict[str, Any]:
        """What results.json keeps under ``settings.precision``."""
        return {"file": self.name, "sha256": self.sha256, "rules": len(self.rules)}


NO_PROFILE = Profile((), "", "")  #: every field exact


def load(path: str) -> Profile:
    """The profile in a TOML file; a BenchError naming the file and the entry for anything malformed."""
    try:
        raw = Path(path).read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise BenchError(f"--precision {path}: {e}") from None
    fields = data.get("fields")
    if not isinstance(fields, dict):
        raise BenchError(f"--precision {path}: expected a [fields] table of field path = rule")
    rules = tuple((pattern, _rule(path, pattern, spec)) for pattern, spec in fields.items())
    return Profile(rules, Path(path).name, hashlib.sha256(raw).hexdigest()[:12])


def _rule(path: str, pattern: str, spec: Any) -> Rule:
    """One entry: ``"exact"`` or a table of ``step``, ``min``, ``max``."""
    where = f"--precision {path}: {pattern!r}"
    if spec == EXACT:
        return EXACT_RULE
    if not isinstance(spec, dict) or not set(spec) <= {"step", "min", "max"}:
        raise BenchError(f"{where}: expected \"exact\" or {{ step = ..., min = ..., max = ... }}")
    for key, value in spec.items():
        if type(value) not in (int, float) or not math.isfinite(value):
            raise BenchError(f"{where}: {key} must be a finite number, not {value!r}")
    step = spec.get("step")
    if step is not None and step <= 0:
        raise BenchError(f"{where}: step must be above 0")
    low, high = spec.get("min"), spec.get("max")
    if (low is None) != (high is None):
        raise BenchError(f"{where}: give both min and max, or neither")
    if low is not None and high is not None and low > high:
        raise BenchError(f"{where}: min {low} is above max {high}")
    return Rule(None if step is None else float(step), low, high)

