"""The power and the false-alarm rate of ``run_bench.py compare --fail-above PCT``, per trace, with and without a
busy process beside the runs.

    python bench/compare_gate.py [--traces A,B,...] [--same 5] [--slower 2] [--busy both|no|yes]
                                 [--fail-above 10] [--keep DIR | --reuse DIR] [-- RUN_BENCH_OPTIONS]

For each trace (default: the bundled sample, three simulated traces of other profiles, seeds and ticks, written here,
and the Minecraft example's trace when ``--minecraft FILE`` names it), and each load (``--busy``: no other
process of ours, then one process spinning beside the runs), it makes ``--same`` runs of ``json``, ``msgpack``
and the ``jsonbuild`` plugin (tests/data/jsonbuild.py: compact JSON like ``json``) and ``--slower`` runs of a
build of it that busy-waits 2 µs more in every encode, all with the CI settings docs/compare.md recommends
(:data:`CI_TIMING`; options after ``--`` replace them). Then it judges, with the gate:

* every unordered pair of same-build runs (each pair both ways): every ratio timing the gate fails on, or
  calls slower/faster, is a false alarm, out of every ratio timing of the pairs (msgpack and jsonbuild, encode
  and decode), and so is every one of the slowed pairs' untouched timings (msgpack, jsonbuild decode);
* every same -> slower pair: caught when the gate fails on jsonbuild encode; a pair the gate could not test
  (exit 3, inconclusive) is not caught. Beside it, how often the test called jsonbuild encode slower whatever
  the threshold (a planted change under ``--fail-above`` cannot fail the gate).

It prints one row per trace and load: the planted change (its median ratio change), the power, the false-alarm
rates, inconclusive pairs, and what the test can see (the median smallest ratio change it could call in the
same-build pairs, docs/compare.md step 4). ``--reuse DIR`` judges the runs an earlier ``--keep DIR`` left,
without running.
"""

from __future__ import annotations

import argparse
import itertools
import runpy
import signal
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import _common
from rpcbench.reports.compare import GATE_RUN_SETTINGS, compare
from rpcbench.results import Suite, load

CODECS = "json,msgpack,jsonbuild"
#: the timing docs/compare.md recommends for a CI gate
CI_TIMING = GATE_RUN_SETTINGS.split()
QUICK = ["--no-floor", "--no-tails", "--no-memory", "--no-report", "--quiet"]
SLOWER_NS = 2000  #: the planted change: ns of busy wait added to every encode of jsonbuild
write_build = runpy.run_path(str(_common.REPO / "tests" / "data" / "jsonbuild.py"))["write_build"]


#: (profile, seed, server tick in Hz) of the simulated traces: other profiles, seeds and paces than the sample's
SIMULATED = (("study", 7, 10), ("dict", 3, 10), ("study", 5, 30))


def simulated(folder: Path) -> Dict[str, str]:
    """Traces of other profiles, seeds and ticks than the bundled sample's, 12,000 calls each."""
    out = {}
    for profile, seed, tick in SIMULATED:
        path = folder / f"{profile}-seed{seed}{'' if tick == 10 else f'-{tick}hz'}.rpct"
        if not path.exists():
            subprocess.run([sys.executable, str(_common.REPO / "run_bench.py"), "simulate", "--profile", profile,
                            "--seed", str(seed), "--calls", "12000", "--tick-hz", str(tick), "--out", str(path)],
                           check=True, capture_output=True)
        out[f"simulated {profile} seed {seed}{'' if tick == 10 else f' {tick} Hz'}"] = str(path)
    return out


@contextmanager
def busy(on: bool) -> Iterator[None]:
    """One process spinning beside the runs (``on``), ended by its pid afterwards."""
    if not on:
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def make_runs(folder: Path, trace: str, counts: Tuple[int, int], timing: List[str]) -> None:
    """``counts`` = (same, slower) runs on ``trace`` into ``folder``, alternating builds so load hits both."""
    plugins = {build: folder / f"plugin-{build}" / "jsonbuild.py" for build in ("same", "slower")}
    for build, extra_ns in (("same", 0), ("slower", SLOWER_NS)):
        if not plugins[build].exists():
            write_build(plugins[build].parent, 0.0, (",", ":"), extra_ns)
    order = [("same", i) for i in range(counts[0])] + [("slower", i) for i in range(counts[1])]
    order.sort(key=lambda build_i: build_i[1])  # same-0, slower-0, same-1, slower-1, ...
    for build, i in order:
        if (folder / f"{build}-{i}").exists():  # kept from an earlier --keep DIR run: go on from there
            continue
        _common.run_bench(["--trace", trace, "--codecs", CODECS, "--codec-path", str(plugins[build]), *timing,
                           *QUICK], str(folder / f"{build}-{i}"))


def kept_runs(folder: Path) -> Dict[str, List[Suite]]:
    """The runs of one trace and load in ``folder``, by build."""
    return {build: [load(str(p)) for p in sorted(folder.glob(f"{build}-*"))] for build in ("same", "slower")}


def judge(runs: Dict[str, List[Suite]], fail_above: float) -> Dict[str, object]:
    """Power, false alarms (gate failures and calls among unchanged ratio timings) and inconclusive pairs."""
    alarms, called, unchanged, inconclusive, sight = 0, 0, 0, 0, []
    for old, new in itertools.permutations(runs["same"], 2):
        c = compare(old, new, fail_above=fail_above)
        flagged = {(v.codec, v.figure) for v in c.violations}
        inconclusive += bool(c.untested)
        for ch in c.codecs:
            for t in (t for t in ch.cpu if t.ratio):
                sight += [t.ratio.detectable_pct] if t.ratio.detectable_pct is not None else []
                unchanged += 1
                alarms += (ch.codec, t.op) in flagged
                called += t.verdict in ("slower", "faster")
    caught, seen, changes, pairs = 0, 0, [], 0
    for old, new in itertools.product(runs["same"], runs["slower"]):
        c = compare(old, new, fail_above=fail_above)
        pairs += 1
        flagged = {(v.codec, v.figure) for v in c.violations}
        caught += ("jsonbuild", "encode") in flagged
        inconclusive += bool(c.untested)
        for ch in c.codecs:
            for t in (t for t in ch.cpu if t.ratio):
                if (ch.codec, t.op) == ("jsonbuild", "encode"):
                    changes.append(t.ratio.change_pct)
                    seen += t.verdict == "slower"
                    continue
                unchanged += 1
                alarms += (ch.codec, t.op) in flagged
                called += t.verdict in ("slower", "faster")
    changes.sort()
    sight.sort()
    return {"sight": sight[len(sight) // 2] if sight else None, "caught": caught, "seen": seen, "pairs": pairs,
            "alarms": alarms, "called": called, "unchanged": unchanged, "inconclusive": inconclusive,
            "change": changes[len(changes) // 2] if changes else None}


def row(trace: str, load_name: str, r: Dict[str, object]) -> List[str]:
    change, sight = r["change"], r["sight"]
    return [trace, load_name, "-" if change is None else f"{change:+.0f}%", "-" if sight is None else f"{sight:.0f}%",
            f"{r['caught']} of {r['pairs']}", f"{r['seen']} of {r['pairs']}", f"{r['alarms']} of {r['unchanged']}",
            f"{r['called']} of {r['unchanged']}", str(r["inconclusive"])]


def main(argv: Optional[Sequence[str]] = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    timing = argv[argv.index("--") + 1:] if "--" in argv else CI_TIMING
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--same", type=int, default=5, help="runs of the unchanged build per trace and load (default 5)")
    p.add_argument("--slower", type=int, default=2, help="runs of the slower build per trace and load (default 2)")
    p.add_argument("--busy", choices=("both", "no", "yes"), default="both", help="a busy process beside the runs")
    p.add_argument("--fail-above", type=float, default=10.0, help="the gate's threshold, %% (default 10)")
    p.add_argument("--minecraft", metavar="FILE", help="the Minecraft example's trace (examples/minecraft_packets.py)")
    p.add_argument("--traces", help="only these trace names (comma-separated: bundled, study, dict, minecraft)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--keep", metavar="DIR", help="keep the runs in DIR instead of a temporary folder")
    where.add_argument("--reuse", metavar="DIR", help="judge the runs of an earlier --keep DIR; run nothing")
    args = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so a kill still ends the busy process
    print(_common.cpu_note())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(args.reuse or args.keep or tmp)
        traces = {"bundled sample": _common.BUNDLED_TRACE, **simulated(folder)}
        if args.minecraft:
            traces["Minecraft example"] = args.minecraft
        wanted = args.traces.split(",") if args.traces else None
        loads = {"both": (False, True), "no": (False,), "yes": (True,)}[args.busy]
        rows = []
        for name, trace in traces.items():
            if wanted and not any(w in name.lower() for w in wanted):
                continue
            for on in loads:
                runs_folder = folder / f"{name.replace(' ', '-')}-{'busy' if on else 'quiet'}"
                if not args.reuse:
                    with busy(on):
                        make_runs(runs_folder, trace, (args.same, args.slower), timing)
                rows.append(row(name, "+1 busy process" if on else "as found", judge(kept_runs(runs_folder),
                                                                                     args.fail_above)))
                print(f"done: {name}, {rows[-1][1]}", flush=True)
    head = ("trace", "load", "planted change", "can see", "gate failed (power)", "called slower", "false alarms (gate)",
            "called", "inconclusive")
    print(f"\nrun_bench.py --codecs {CODECS} {' '.join(timing)}; compare --fail-above {args.fail_above:g}\n"
          f"{_common.table(head, rows)}")


if __name__ == "__main__":
    main()
