"""``precision suggest`` then a run with ``--precision``, end to end on a simulated trace of another seed: the
profile named with its hash in every output, the lossy table the same in each, and the verdict rule."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from rpcbench import results
from rpcbench.reports.decision import decide

REPO = Path(__file__).resolve().parent.parent
FAST = ["--repeat", "2", "--warmup", "1", "--min-time", "0.001", "--sample", "200", "--quiet"]


def run_bench(*args):
    return subprocess.run([sys.executable, str(REPO / "run_bench.py"), *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("precision")
    trace = folder / "dict.rpct"
    assert run_bench("simulate", "--profile", "dict", "--calls", "3000", "--seed", "4", "--out", trace).returncode == 0
    suggested = run_bench("precision", "suggest", "--trace", trace)
    assert suggested.returncode == 0, suggested.stderr
    profile = folder / "game.toml"
    profile.write_text(suggested.stdout, encoding="utf-8")
    done = run_bench("--trace", trace, "--codecs", "json,msgpack,protobuf,quant,quant+zstd-3", "--precision", profile,
                     "--out", folder / "out", *FAST)
    assert done.returncode == 0, done.stderr
    return folder, profile, done.stdout


def test_suggest_writes_a_commented_toml_profile_for_every_number_field(run):
    _, profile, _ = run
    text = profile.read_text(encoding="utf-8")
    rules = tomllib.loads(text)["fields"]
    assert rules["sync_position.args.x"]["step"] == 0.01  # full precision, up to a few hundred: 1e-4 relative
    assert rules["sync_position.args.facing"]["step"] == 0.1  # the simulator rounds facing to one decimal
    assert all("#" in line for line in text.splitlines() if line.startswith('"'))


def test_the_run_names_the_profile_and_its_hash_in_every_output(run):
    folder, profile, stdout = run
    suite = results.load(str(folder / "out" / "results.json"))
    sha = suite.settings["precision"]["sha256"]
    label = f"game.toml (sha256 {sha})"
    assert __import__("hashlib").sha256(profile.read_bytes()).hexdigest().startswith(sha)
    for text in (stdout, (folder / "out" / "report.html").read_text(encoding="utf-8"),
                 (folder / "out" / "report.md").read_text(encoding="utf-8").replace("\\_", "_")):
        assert label in text
    assert f"quant sends values at the steps of the precision profile {label}" in " ".join(stdout.split())


def test_quant_has_no_undeclared_problem_and_each_output_gives_the_same_lossy_counts(run):
    folder, _, stdout = run
    suite = results.load(str(folder / "out" / "results.json"))
    quant = suite.result("quant")
    assert quant.failures == 0 and all(p.declared for p in quant.problems)
    assert quant.sizes.mean * 2 <= suite.result("msgpack").sizes.mean
    page = (folder / "out" / "report.html").read_text(encoding="utf-8")
    md = (folder / "out" / "report.md").read_text(encoding="utf-8").replace("\\_", "_")
    flat = " ".join(stdout.split())
    for path, figures in quant.lossy.items():
        assert 0 < figures["max_error"] <= figures["step"] / 2 * (1 + 1e-9)
        count = f"{int(figures['changed']):,}"
        assert f"{path}: {count}," in flat or len(quant.lossy) > 8
        assert re.search(rf"<td[^>]*>{re.escape(path)}</td><td class='num'>{count}</td>", page), path
        assert f"| {path} | {count} |" in md


def test_a_lossy_codec_competes_only_with_a_profile(run):
    folder, _, _ = run
    suite = results.load(str(folder / "out" / "results.json"))
    assert "quant" not in dict(decide(suite).verdict.excluded)
    unprofiled = dataclasses.replace(suite, settings={k: v for k, v in suite.settings.items() if k != "precision"})
    verdict = decide(unprofiled).verdict
    assert "--precision" in dict(verdict.excluded)["quant"]
    assert verdict.pick is None or not verdict.pick.codec.startswith("quant")
    assert json.loads((folder / "out" / "results.json").read_text())["settings"]["precision"]["file"] == "game.toml"
