"""Lossy codecs (``quant`` with a precision profile): which profile, what each field's values did, and the
closing note against the exact binary formats.

A codec that sends values at a declared step (rpcbench/precision.py) gives some back changed, within half a
step: the size pass counts them per field with the largest error (``CodecResult.lossy``). The rules here say
what the outputs show of it; :mod:`reports.verdict` lets such a codec compete only when the run had a profile
(:func:`is_lossy`, :func:`profile_label`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from rpcbench.results import CodecResult, Suite

from . import coverage
from .capacity import Plan
from .formatting import fmt_ratio

COMPARED = ("msgpack", "protobuf")  #: the exact binary formats the closing note sets a lossy codec against
FIELD_COLUMNS = ("field", "values changed", "largest error", "step", "of a step")  #: what :meth:`FieldRow.cells` holds


@dataclass(frozen=True)
class FieldRow:
    """One field of a lossy codec: values that came back changed within their step, the largest error."""

    path: str
    changed: int
    max_error: float
    step: float

    @property
    def share(self) -> float:
        """The largest error as a share of the step (at most 0.5: half a step)."""
        return self.max_error / self.step if self.step else 0.0

    def cells(self) -> Tuple[str, str, str, str, str]:
        """The row as every output writes it (:data:`FIELD_COLUMNS`): the one formatter of the lossy table."""
        return self.path, f"{self.changed:,}", f"{self.max_error:.3g}", f"{self.step:g}", f"{self.share:.0%}"


@dataclass(frozen=True)
class LossyCodec:
    """A lossy codec's fields, most changed values first."""

    codec: str
    fields: Tuple[FieldRow, ...]

    @property
    def changed(self) -> int:
        """Values changed over every field."""
        return sum(f.changed for f in self.fields)


@dataclass(frozen=True)
class PrecisionView:
    """What the outputs say about precision profiles and lossy codecs."""

    profile: Optional[str]  #: ``file (sha256 ...)`` of the run's --precision, None without one
    codecs: Tuple[LossyCodec, ...]  #: codecs whose values came back changed within their step
    closing: Tuple[str, ...]  #: each lossy codec's bytes and kbit/s per player against msgpack and protobuf
    floor_note: Optional[str]  #: why a lossy codec can go below the lossless floor, when one does
    generated: Tuple[str, ...] = ()  #: codecs generated from a schema and a precision profile (quant), lossy or not

    @property
    def cpu_note(self) -> Optional[str]:
        """What a generated codec's figures stand for."""
        if not self.generated:
            return None
        return (f"{', '.join(self.generated)}: the CPU is this implementation's (generated Python), the bytes those "
                "of any implementation of the same layout (docs/codecs.md, \"quant\")")

    @property
    def line(self) -> Optional[str]:
        """The header line every output shows: the profile by name and hash, and the codecs it made lossy."""
        if self.profile is None:
            return None
        if not self.codecs:
            return f"precision profile {self.profile} (--precision): every value came back exact at its steps"
        return (f"precision profile {self.profile} (--precision): {', '.join(c.codec for c in self.codecs)} gave "
                "values back within the profile's steps; each field's changes are in the lossy table")


def profile_label(suite: Suite) -> Optional[str]:
    """``file (sha256 ...)`` of the run's precision profile, None if it had none."""
    found = suite.settings.get("precision")
    return f"{found['file']} (sha256 {found['sha256']})" if found else None


def is_lossy(r: CodecResult) -> bool:
    """Whether a codec gave values back changed within a declared step."""
    return bool(r.lossy)


def view(suite: Suite, plan: Plan) -> PrecisionView:
    """The profile, each lossy codec's fields and its closing note, and the note on the floor."""
    codecs = tuple(LossyCodec(r.codec, tuple(sorted((FieldRow(path, int(f["changed"]), f["max_error"], f["step"])
                                                     for path, f in r.lossy.items()), key=lambda f: -f.changed)))
                   for r in suite.results if is_lossy(r))
    lossy = [r for r in suite.results if is_lossy(r) or r.config.get("lossy")]
    closing = tuple(line for r in lossy if (line := _closing(suite, r, plan)))
    below = [r.codec for r in lossy if r.floor_ratio is not None and r.floor_ratio < 1]
    floor_note = (f"{', '.join(below)} below 1.00x floor: the floor is the trace's exact content compressed whole; "
                  "a codec that sends values at a declared step sends less information than that, so it can go "
                  "below it") if below else None
    generated = tuple(r.codec for r in suite.results if "precision" in r.config)
    return PrecisionView(profile_label(suite), codecs, closing, floor_note, generated)


def _closing(suite: Suite, r: CodecResult, plan: Plan) -> Optional[str]:
    """``quant: 17.2 B/message, 4.49 kbit/s down + 0.6 up per player as planned; 0.14x msgpack (...)``; over the
    calls both carry when either leaves calls out (:func:`reports.coverage.same_calls`)."""
    if not r.sizes:
        return None
    parts = [_figures(r, plan)]
    for name in COMPARED:
        other = suite.find(name)
        if other is None or not other.sizes:
            continue
        if coverage.coverage(r).full and coverage.coverage(other).full:
            parts.append(f"{fmt_ratio(r.sizes.mean / other.sizes.mean)} {name} ({_figures(other, plan)})")
        elif (same := coverage.same_calls(r, other)) is not None:
            parts.append(f"{fmt_ratio(same.bytes_ratio)} {name} on the {same.coverage.carried:,} calls {r.codec} "
                         f"carries ({same.bytes_mean:.1f} vs {same.reference_bytes_mean:.1f} B/call)")
    return f"{r.codec}: " + "; ".join(parts)


def _figures(r: CodecResult, plan: Plan) -> str:
    """Bytes per call, and kbit/s per player both ways when the capacity plan has the codec."""
    row = plan.find(r.codec)
    rate = f", {_kbit(row.down.value)} kbit/s down + {_kbit(row.up.value)} up per player as planned" if row else ""
    return f"{r.sizes.mean:.1f} B/message{rate}" if r.sizes else "no figures"


def _kbit(bytes_per_s: float) -> str:
    """kbit/s to three significant digits (``4.53``, ``0.0412``), whole above 100 (``1,331``)."""
    kbit = bytes_per_s * 8 / 1000
    return f"{kbit:,.0f}" if kbit >= 100 else f"{kbit:.3g}"
