"""Level ranges and lists in codec ids (``json+zlib-1..9``, ``json+zstd-1,3,19``) and in ``--codecs``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rpcbench.config import DEFAULT_CODECS
from rpcbench.errors import BenchError
from rpcbench.registry import Registry, split_codec_list

REGISTRY = Registry.default()
REPO = Path(__file__).resolve().parent.parent
PER_MESSAGE = sorted(name for name, comp in REGISTRY.compressors.items() if not comp.trained)
INNER = ("json", "msgpack", "bson", "msgpack+delta")


@st.composite
def level_spec(draw: st.DrawFn) -> Tuple[str, List[int]]:
    """An id whose last part names levels as ranges and single levels, and the levels it names in order."""
    name = draw(st.sampled_from(PER_MESSAGE))
    levels = REGISTRY.compressors[name].levels
    items, expected = [], []
    for _ in range(draw(st.integers(1, 3))):
        low = draw(st.integers(levels.start, levels.stop - 1))
        high = draw(st.integers(low, levels.stop - 1))
        items.append(f"{low}..{high}" if draw(st.booleans()) else str(low))
        expected += range(low, high + 1) if ".." in items[-1] else [low]
    return f"{draw(st.sampled_from(INNER))}+{name}-{','.join(items)}", expected


@settings(max_examples=200, deadline=None)
@given(level_spec())
def test_a_range_or_list_expands_to_one_id_per_level(spec_levels: Tuple[str, List[int]]) -> None:
    spec, levels = spec_levels
    head, _, last = spec.rpartition("+")
    name = last.split("-")[0]
    assert REGISTRY.expand([spec]) == [f"{head}+{name}-{level}" for level in levels]


@settings(max_examples=200, deadline=None)
@given(st.lists(level_spec().map(lambda sl: sl[0]) | st.sampled_from(DEFAULT_CODECS), min_size=1, max_size=6))
def test_codecs_option_keeps_each_level_list_with_its_id(specs: List[str]) -> None:
    """Joined by commas as --codecs takes them, the ids come back whole: a bare level continues the id before it."""
    assert split_codec_list(",".join(specs)) == tuple(specs)


def test_plain_ids_pass_unchanged() -> None:
    assert REGISTRY.expand(DEFAULT_CODECS) == list(DEFAULT_CODECS)
    plain = ["json+zlib-1", "msgpack+delta+zstdstream-3"]
    assert REGISTRY.expand(plain) == plain


def test_the_issues_examples() -> None:
    assert REGISTRY.expand(["json+zlib-1..9"]) == [f"json+zlib-{n}" for n in range(1, 10)]
    assert REGISTRY.expand(split_codec_list("json,json+zstd-1,3,19")) == ["json", "json+zstd-1", "json+zstd-3",
                                                                          "json+zstd-19"]


@pytest.mark.parametrize("text, message", [
    ("json+zlib-9..1", "'json+zlib-9..1': the level range 9..1 runs backwards (write 1..9)"),
    ("json+zlib-1..99", "'json+zlib-1..99': zlib levels are 0..9"),
    ("json+zstd-0,3", "'json+zstd-0,3': zstd levels are 1..22"),
    ("json+zlib-1..3+zstd-1", "goes after the last compressor of an id"),
    ("3,json", "'3' is a level with no compressor before it"),
    ("json,5", "'5' is a level with no compressor before it"),
])
def test_bad_ranges_are_one_clear_error(text: str, message: str) -> None:
    with pytest.raises(BenchError, match=message.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        REGISTRY.expand(split_codec_list(text))


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(PER_MESSAGE), st.integers(0, 30), st.integers(1, 30))
def test_a_backwards_range_is_refused(name: str, high: int, gap: int) -> None:
    with pytest.raises(BenchError, match="runs backwards"):
        REGISTRY.expand([f"json+{name}-{high + gap}..{high}"])


def test_cli_runs_a_range_and_refuses_a_bad_one(tmp_path: Path) -> None:
    """End to end: the run's results name each expanded codec; a bad range is one line on stderr, exit 2."""
    run = [sys.executable, str(REPO / "run_bench.py"), "--no-report", "--quiet", "--repeat", "2", "--sample", "20",
           "--no-tails", "--no-memory", "--no-floor"]
    trace = tmp_path / "t.rpct"
    subprocess.run([sys.executable, str(REPO / "run_bench.py"), "simulate", "--calls", "300", "--out", str(trace)],
                   check=True, capture_output=True)
    done = subprocess.run(run + ["--trace", str(trace), "--codecs", "json,json+zlib-1..2,json+zstd-1,19",
                                 "--out", str(tmp_path / "o")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    csv = (tmp_path / "o" / "results.csv").read_text()
    for cid in ("json+zlib-1", "json+zlib-2", "json+zstd-1", "json+zstd-19"):
        assert f"\n{cid}," in csv
    bad = subprocess.run(run + ["--trace", str(trace), "--codecs", "json+zlib-9..1"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "runs backwards" in bad.stderr and "Traceback" not in bad.stderr
