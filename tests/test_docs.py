"""Every ```python block of the README, docs/ and examples/ runs as printed.

Per Markdown file, in a fresh folder, in order: a block whose first line is a comment
naming a file (``# cbor_canonical.py``) is saved under that name, so later blocks can
import it; a block saved as ``test_*.py`` runs under pytest, any other block as a
script. A block that must not run says why in an HTML comment on the line before it,
``<!-- not run: reason -->``; keep that rare.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "examples").rglob("*.md"))]
BLOCK = re.compile(r"^(<!-- not run: .+ -->\n)?```python\n(.*?)^```", re.M | re.S)
FILE_NAME = re.compile(r"# ([\w/]+\.py)\n")


def python_blocks(page: Path) -> List[Tuple[int, str]]:
    """(line, source) of each block of ``page`` that runs."""
    text = page.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m[2]) for m in BLOCK.finditer(text) if not m[1]]


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=lambda p: str(p.relative_to(REPO)))
def test_python_blocks_run(page: Path, tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    for line, source in python_blocks(page):
        named = FILE_NAME.match(source)
        script = tmp_path / (named[1] if named else f"block_{line}.py")
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(source, encoding="utf-8")
        command = ["-m", "pytest", "-q", "-p", "no:cacheprovider", str(script)] if script.name.startswith(
            "test_") else [str(script)]
        done = subprocess.run([sys.executable, *command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"{page.name}, block at line {line}:\n{done.stdout}{done.stderr}"


def test_readme_codec_runs_from_the_command_line(tmp_path: Path) -> None:
    """The README's plugin file, passed by path, runs behind a compressor like a built-in."""
    (source,) = [s for _, s in python_blocks(REPO / "README.md") if s.startswith("# cbor_canonical.py")]
    (tmp_path / "cbor_canonical.py").write_text(source, encoding="utf-8")
    done = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "--codec-path", "cbor_canonical.py",
                           "--codecs", "json,cbor-canonical,cbor-canonical+zstd-3", "--out", "out", "--no-report",
                           "--quiet", "--repeat", "2", "--sample", "50", "--no-floor", "--no-tails", "--no-memory"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "cbor-canonical+zstd-3" in (tmp_path / "out" / "results.csv").read_text()
