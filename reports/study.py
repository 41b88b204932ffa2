"""The 2015 study re-tested: each of its seven findings (``docs/study.md``) checked on this run.

Each finding is a claim about two or three codecs; it *holds* when this run's figures say
the same (direction and rough size), is *partly* true when one half or only the direction
holds, and is *reversed* when the run says the opposite. A finding whose codecs were not
all measured is "not measured", with the ``--codecs`` to add: never guessed. Bytes are
mean bytes per call; CPU ratios pair rounds as everywhere (:meth:`Timing.ratio_to`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from rpcbench.results import CodecResult, Suite

from .analysis import cpu_ratio
from .formatting import fmt_ratio, fmt_share, fmt_us

HOLDS, PARTLY, REVERSED, NOT_MEASURED = "holds", "partly", "reversed", "not measured"
FORMATS = ("json", "bson")  #: the study's two formats; the summary compares the notable codecs with each
BSON_MUCH_LARGER = 1.4  #: bson/json bytes at or above this: "BSON about 60 % larger" holds (below, only the direction)
JSON_CHEAP = 0.25  #: json/bson encode CPU at or below this: "about 12 %" holds in size (below 1: only the direction)
HALF = 0.5  #: json+zlib-1 under this share of BSON's bytes
HARDLY_SMALLER = 0.9  #: zlib-9 at or above this share of level 1's bytes is "hardly smaller"
CLEARLY_MORE_CPU = 1.2  #: and at or above this multiple of its encode CPU "clearly more"
ABOUT_SAME = 0.15  #: protobuf+zlib-1 within this share of json+zlib-1's bytes is "about the same"
ORDER_OF_MAGNITUDE = 10.0  #: protobuf/bson encode CPU at or above this
MOSTLY = 0.5  #: the convert stage's share of protobuf's encode stages above this is "mostly conversion"

Measured = Dict[str, CodecResult]
Check = Callable[[Measured], Tuple[str, str]]


@dataclass(frozen=True)
class Finding:
    """One finding of the study and what this run says about it."""

    number: int
    claim: str
    test: str  #: the rule applied, with its thresholds
    verdict: str  #: holds, partly, reversed or not measured
    evidence: str  #: this run's figures, or the --codecs to add


def _mean(m: Measured, codec: str) -> float:
    """Mean bytes per call of ``codec`` (measured: :func:`retest` checks)."""
    sizes = m[codec].sizes
    assert sizes is not None
    return sizes.mean


def _bytes(m: Measured, a: str, b: str) -> float:
    """Mean bytes per call of ``a`` over ``b``'s."""
    return _mean(m, a) / _mean(m, b)


def _encode(m: Measured, a: str, b: str) -> float:
    """Encode CPU of ``a`` relative to ``b`` (paired rounds; both timed: :func:`retest` checks)."""
    ratio = cpu_ratio(m[a], m[b], "encode")
    assert ratio is not None
    return ratio


def _grade(*parts: bool) -> str:
    """All parts true: holds; some: partly; none: reversed."""
    return HOLDS if all(parts) else PARTLY if any(parts) else REVERSED


def _json_smaller(m: Measured) -> Tuple[str, str]:
    ratio = _bytes(m, "bson", "json")
    verdict = HOLDS if ratio >= BSON_MUCH_LARGER else PARTLY if ratio > 1 else REVERSED
    return verdict, f"bson is {fmt_ratio(ratio)} json's bytes ({_mean(m, 'bson'):.1f} vs {_mean(m, 'json'):.1f} B/call)"


def _json_cheap(m: Measured) -> Tuple[str, str]:
    ratio = _encode(m, "json", "bson")
    verdict = HOLDS if ratio <= JSON_CHEAP else PARTLY if ratio < 1 else REVERSED
    return verdict, f"json encodes in {fmt_ratio(ratio)} bson's CPU (study: 0.12x)"


def _zlib1_half(m: Measured) -> Tuple[str, str]:
    size, cpu = _bytes(m, "json+zlib-1", "bson"), _encode(m, "json+zlib-1", "bson")
    return _grade(size < HALF, cpu <= 1), (f"json+zlib-1 is {fmt_ratio(size)} bson's bytes at {fmt_ratio(cpu)} its "
                                           f"encode CPU")


def _zlib9_no_better(m: Measured) -> Tuple[str, str]:
    size, cpu = _bytes(m, "json+zlib-9", "json+zlib-1"), _encode(m, "json+zlib-9", "json+zlib-1")
    return _grade(size >= HARDLY_SMALLER, cpu >= CLEARLY_MORE_CPU), (
        f"json+zlib-9 is {fmt_ratio(size)} level 1's bytes at {fmt_ratio(cpu)} its encode CPU")


def _protobuf_between(m: Measured) -> Tuple[str, str]:
    to_json, to_zlib = _bytes(m, "protobuf", "json"), _bytes(m, "protobuf", "json+zlib-1")
    return _grade(to_json < 1, to_zlib > 1), (f"protobuf is {fmt_ratio(to_json)} json's bytes and "
                                              f"{fmt_ratio(to_zlib)} json+zlib-1's")


def _protobuf_zlib_same(m: Measured) -> Tuple[str, str]:
    ratio = _bytes(m, "protobuf+zlib-1", "json+zlib-1")
    verdict = HOLDS if abs(ratio - 1) <= ABOUT_SAME else PARTLY if ratio > 1 else REVERSED
    return verdict, f"protobuf+zlib-1 is {fmt_ratio(ratio)} json+zlib-1's bytes"


def _protobuf_slow(m: Measured) -> Tuple[str, str]:
    ratio = _encode(m, "protobuf", "bson")
    stages = m["protobuf"].stages.get("encode") or {}
    total = sum(t.median_us for t in stages.values())
    convert = stages.get("convert")
    text = f"protobuf encodes in {fmt_ratio(ratio)} bson's CPU"
    if convert is None or not total:
        verdict = HOLDS if ratio >= ORDER_OF_MAGNITUDE else PARTLY if ratio > 1 else REVERSED
        return verdict, text + " (its stages were not timed apart: the conversion half is not tested)"
    share = convert.median_us / total
    text += f"; converting values to messages is {fmt_share(share)} of it ({fmt_us(convert.median_us)} µs)"
    if ratio <= 1:
        return REVERSED, text
    return (HOLDS if ratio >= ORDER_OF_MAGNITUDE and share > MOSTLY else PARTLY), text


#: number -> (the finding in docs/study.md's words, the test, the codecs it needs, the check)
FINDINGS: Dict[int, Tuple[str, str, Tuple[str, ...], Check]] = {
    1: ("JSON is smaller than BSON (BSON about 60 % larger).",
        f"holds if bson/json bytes >= {BSON_MUCH_LARGER}; partly if above 1; reversed otherwise",
        ("json", "bson"), _json_smaller),
    2: ("JSON encodes in about 12 % of BSON's CPU time.",
        f"holds if json/bson encode CPU <= {JSON_CHEAP}; partly if below 1; reversed otherwise",
        ("json", "bson"), _json_cheap),
    3: ("JSON + zlib level 1 needs less than half of BSON's bytes, for little extra CPU.",
        f"both halves (bytes < {HALF}x bson's; encode CPU no more than bson's): holds; one: partly; none: reversed",
        ("json+zlib-1", "bson"), _zlib1_half),
    4: ("zlib level 9 is hardly smaller than level 1 and costs clearly more CPU.",
        f"both halves (bytes >= {HARDLY_SMALLER}x level 1's; encode CPU >= {CLEARLY_MORE_CPU}x): holds; one: partly; "
        "none: reversed", ("json+zlib-1", "json+zlib-9"), _zlib9_no_better),
    5: ("protobuf is smaller than plain JSON but larger than JSON + zlib.",
        "both halves: holds; one: partly; none: reversed", ("protobuf", "json", "json+zlib-1"), _protobuf_between),
    6: ("protobuf + zlib level 1 is about the same size as JSON + zlib level 1: not worth it.",
        f"holds within {ABOUT_SAME:.0%} of json+zlib-1's bytes; partly if larger (still not worth it); reversed if "
        "smaller (worth it)", ("protobuf+zlib-1", "json+zlib-1"), _protobuf_zlib_same),
    7: ("protobuf's CPU is an order of magnitude above BSON's, mostly Python-side conversion of values into "
        "messages.", f"both halves (encode CPU >= {ORDER_OF_MAGNITUDE:g}x bson's; convert stage > {MOSTLY:.0%} of it): "
        "holds; one, or above bson's only: partly; at or below bson's: reversed", ("protobuf", "bson"),
        _protobuf_slow),
}
STUDY_CODECS = tuple(dict.fromkeys(c for _, _, needs, _ in FINDINGS.values() for c in needs))


def _usable(r: Optional[CodecResult]) -> bool:
    """Measured with bytes and an encode timing."""
    return r is not None and r.sizes is not None and r.encode is not None


def retest(suite: Suite) -> List[Finding]:
    """The seven findings, each with this run's verdict and figures."""
    out = []
    for number, (claim, test, needs, check) in FINDINGS.items():
        absent = [c for c in needs if suite.find(c) is None]
        failed = [c for c in needs if c not in absent and not _usable(suite.find(c))]
        if absent or failed:
            why = [f"add --codecs {','.join(absent)}"] if absent else []
            why += [f"{', '.join(failed)} has no bytes or timing in this run"] if failed else []
            out.append(Finding(number, claim, test, NOT_MEASURED, f"not measured: {'; '.join(why)}"))
            continue
        verdict, evidence = check({c: suite.result(c) for c in needs})
        out.append(Finding(number, claim, test, verdict, evidence))
    return out
