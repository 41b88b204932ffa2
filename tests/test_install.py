"""rpcbench as an installed package: wheels built once per session, installed into virtualenvs.

One virtualenv sees the libraries of the environment running the tests (the codec libraries;
nothing is downloaded: ``--no-index``), holds rpcbench and the example plugin package, and runs
the ``rpcbench`` command from a folder outside the repository. Another is bare (standard library only)
and holds the same wheel installed with ``--no-deps``: ``rpc_capture`` must import and
record there. Building uses the host's setuptools (``--no-build-isolation``), from a copy
of the tree, so no stale ``build/`` folder of the checkout ends up in a wheel.
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import textwrap
import venv
import zipfile
from pathlib import Path
from typing import List

import pytest

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "examples" / "rpcbench-examplecodec"
FAST = ["--repeat", "2", "--sample", "50", "--no-floor", "--no-tails", "--no-memory", "--processes", "0", "--quiet"]
_SKIP = shutil.ignore_patterns(".git", "build", "results", ".cache", "__pycache__", "*.egg-info", ".pytest_cache",
                               ".hypothesis", "tests")


def pip(python: Path, *args: str) -> None:
    """The host's pip acting on another interpreter's environment, offline."""
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check", "-q",
                    *args], check=True, capture_output=True, text=True, timeout=300)


def build_wheel(source: Path, out: Path) -> Path:
    """The wheel of the project at ``source``, built from a fresh copy of its files."""
    copy = out / f"src-{source.name}"
    shutil.copytree(source, copy, symlinks=True, ignore=_SKIP)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(out), str(copy)], check=True, capture_output=True, text=True, timeout=300)
    name = source.name.replace("-", "_") if source != REPO else "rpcbench"
    return next(out.glob(f"{name}-*.whl"))


def make_venv(folder: Path, sees_host: bool) -> Path:
    """A virtualenv without pip of its own (the host's pip installs into it); its python. With ``sees_host`` it
    also sees the site-packages of the environment running the tests, after its own, as ``--system-site-packages``
    would if that environment were the system: when the tests run in a virtualenv (a newcomer's), venv's own
    ``system_site_packages`` would show the base interpreter's site-packages instead, which lack the libraries
    ``pip install -r requirements.txt`` put into the virtualenv."""
    venv.create(folder, with_pip=False)
    python = folder / "bin" / "python"
    if sees_host:
        own = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, capture_output=True, text=True, timeout=60).stdout.strip()
        # addsitedir, as Python does for the system site-packages: their .pth files are processed too
        lines = [f"import site; site.addsitedir({path!r})\n" for path in host_site_packages()]
        (Path(own) / "_rpcbench_tests_host.pth").write_text("".join(lines), encoding="utf-8")
    return python


def host_site_packages() -> List[str]:
    """The site-packages folders of the environment running the tests (a virtualenv's own, and its base's when it
    was made with --system-site-packages), in the order of its ``sys.path``."""
    return [path for path in sys.path if path in site.getsitepackages()]


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> List[Path]:
    out = tmp_path_factory.mktemp("wheels")
    return [build_wheel(REPO, out), build_wheel(PLUGIN, out)]


@pytest.fixture(scope="session")
def installed(wheels: List[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv over the test environment's packages with rpcbench and the example plugin installed; its bin
    folder."""
    python = make_venv(tmp_path_factory.mktemp("venv") / "env", sees_host=True)
    pip(python, "install", "--no-index", "--no-deps", *map(str, wheels))
    return python.parent


def run(exe: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_wheel_puts_only_rpcbench_and_rpc_capture_at_the_top(wheels: List[Path]) -> None:
    with zipfile.ZipFile(wheels[0]) as whl:
        names = whl.namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"rpcbench", "rpc_capture"}
    for data in ("rpcbench/codecs/json.py", "rpcbench/proto/battle.proto", "rpcbench/samples/battle.rpct",
                 "rpcbench/reports/templates/report.html", "rpcbench/commands/bench.py"):
        assert data in names


def test_installed_command_runs_outside_the_repository(installed: Path, tmp_path: Path) -> None:
    done = run(installed / "rpcbench", "--codecs", "json,protobuf,examplecodec,examplecodec+zstd-3", *FAST,
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (folder,) = (tmp_path / "results").iterdir()  # results/ of the working directory
    assert (folder / "report.html").is_file() and "examplecodec+zstd-3" in (folder / "results.csv").read_text()
    imported = run(installed / "python", "-c", "import rpcbench, rpc_capture, rpcbench.reports; "
                   "print(rpcbench.__file__, rpcbench.reports.__file__)", cwd=tmp_path)
    assert imported.returncode == 0 and str(REPO) not in imported.stdout and str(installed.parent) in imported.stdout


def test_installed_virtualenv_sees_the_libraries_of_the_test_environment(installed: Path, tmp_path: Path) -> None:
    libraries = ("matplotlib", "scipy", "msgpack", "zstandard", "google.protobuf", "jinja2")
    script = f"import importlib.util as u; print(*(u.find_spec(m).origin for m in {libraries!r}), sep='\\n')"
    here = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    there = run(installed / "python", "-c", script, cwd=tmp_path)
    assert there.returncode == 0, there.stderr
    assert there.stdout == here.stdout  # the very files the tests' own environment imports, not the base's


def test_installed_command_takes_a_trace_from_any_folder(installed: Path, tmp_path: Path) -> None:
    trace = tmp_path / "calls.jsonl"
    trace.write_text("".join(f'{{"method": "move", "args": {{"unit": {i}, "to": [1.5, {i}]}}}}\n' for i in range(300)))
    done = run(installed / "rpcbench", "run", "--trace", trace.name, "--codecs", "json,msgpack", "--out", "out", *FAST,
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "report.md").is_file()
    bad = run(installed / "rpcbench", "report", "nowhere", cwd=tmp_path)  # errors name the command the user typed
    assert bad.returncode == 2 and bad.stderr.startswith("rpcbench: error: nowhere: cannot read results"), bad.stderr
    usage = run(installed / "rpcbench", "trace", "--help", cwd=tmp_path)
    assert usage.stdout.startswith("usage: rpcbench trace ")


def test_plugin_package_is_listed_with_its_distribution(installed: Path, tmp_path: Path) -> None:
    done = run(installed / "rpcbench", "--list-codecs", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.strip().startswith("examplecodec ")]
    entry = lines[start:start + 1] + [line for line in lines[start + 1:start + 4] if line.startswith(" " * 32)]
    assert entry[-1].strip() == "[rpcbench-examplecodec 0.1.0]"  # a plugin's origin ends its entry
    assert all(len(line) <= 100 for line in lines)


def test_plugin_package_tests_pass_against_the_installed_rpcbench(installed: Path, tmp_path: Path) -> None:
    shutil.copytree(PLUGIN / "tests", tmp_path / "tests")
    done = run(installed / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_plugin_package_that_fails_to_import_is_skipped_in_one_line(tmp_path: Path) -> None:
    dist = tmp_path / "rpcbench_brokenplugin-2.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: rpcbench-brokenplugin\nVersion: 2.0\n")
    (dist / "entry_points.txt").write_text("[rpcbench.codecs]\nbroken = rpcbench_brokenplugin:Broken\n")
    (tmp_path / "rpcbench_brokenplugin.py").write_text("import a_library_nobody_installed\n")
    done = subprocess.run([sys.executable, str(REPO / "run_bench.py"), "--list-codecs"], cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(tmp_path)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    (line,) = [line for line in done.stderr.splitlines() if "brokenplugin" in line]
    assert line.startswith("warning: skipping codec package rpcbench-brokenplugin 2.0") and "a_library_nobody" in line
    assert "json" in done.stdout


def test_rpc_capture_records_in_a_bare_virtualenv(wheels: List[Path], tmp_path: Path) -> None:
    python = make_venv(tmp_path / "bare", sees_host=False)
    pip(python, "install", "--no-index", "--no-deps", str(wheels[0]))
    script = textwrap.dedent("""
        import sys
        from rpc_capture import C2S, Recorder, open_trace
        with Recorder("battle.rpct") as rec:
            for i in range(1000):
                rec.record("move", {"unit": i, "to": [1.5, 2.0]}, direction=C2S, conn=i % 4)
        calls = list(open_trace("battle.rpct"))
        assert [c.args["unit"] for c in calls] == list(range(1000)), calls[:3]
        third_party = [m for m in ("msgpack", "zstandard", "jinja2", "numpy") if m in sys.modules]
        try:
            import msgpack  # noqa: F401
        except ImportError:
            print("bare", len(calls), third_party)
    """)
    done = run(python, "-c", script, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["bare", "1000", "[]"]
