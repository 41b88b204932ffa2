"""Fleet runs: many traces, chunks of a trace, Dask workers (one killed mid-run), merged exactly."""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_cli import FAST, REPO, run_bench

from rpc_capture import Call, TraceReader, TraceWriter
from rpcbench import results
from rpcbench.config import RunConfig
from rpcbench.errors import BenchError
from rpcbench.executors import InProcess, open_executor
from rpcbench.watch import run_watched
from rpcbench.progress import quiet
from rpcbench.simulate import simulate
from rpc_capture.stats import TraceStats
from rpcbench.plan import Plan, make_plan
from rpcbench.size_pass import run_size_pass
from rpcbench.size_result import SizePass
from rpcbench.tally import CodecTally, check_call
from rpcbench.trace_index import resolve_traces

CODECS = "json,msgpack,json+zlib-1,json+zlibstream-1,msgpack+delta"
SLOW_CODEC = '''
import json, os, time
from rpcbench.codec import Codec


class SlowJson(Codec):
    """Compact JSON that sleeps before each call (SLOW_CODEC_S), so a task runs long enough to be killed in."""

    id = "slowjson"

    def encode(self, call):
        time.sleep(float(os.environ.get("SLOW_CODEC_S", "0")))
        return json.dumps({"method": call.method, "args": call.args}, separators=(",", ":")).encode()

    def decode(self, data):
        obj = json.loads(data)
        return obj["method"], obj["args"]
'''


def odd_calls(n: int) -> list:
    """Calls some codecs cannot encode (ints past 64 bits: msgpack fails) or give back changed (bytes)."""
    out = []
    for i in range(n):
        args = {"seq": i, "big": 2 ** 70 + i} if i % 7 == 0 else {"seq": i, "blob": bytes([i % 256]) * (i % 13)}
        out.append(Call("odd" if i % 3 else "even", args, 1_700_000_000_000_000_000 + i, "c2s", i % 4))
    return out


def write_trace(path: Path, calls) -> Path:
    with TraceWriter(str(path)) as w:
        for call in calls:
            w.write(call)
    return path


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory) -> Path:
    """A folder of three traces on disk: two simulated battles and one with encode failures."""
    folder = tmp_path_factory.mktemp("fleet")
    write_trace(folder / "a.rpct", simulate(2500, 3))
    write_trace(folder / "b.rpct", simulate(3100, 4))
    write_trace(folder / "c.rpct", odd_calls(1700))
    (folder / "notes.txt").write_text("not a trace")
    return folder


def make_pass(config: RunConfig) -> Plan:
    """The plan of ``config``'s run, ready for its size pass."""
    return make_plan(config, config.registry(), quiet)


def run_pass(plan: Plan, executor=None) -> SizePass:
    """The size pass on ``executor`` (default: its config's: Dask when ``dask`` is set, else watched forks)."""
    config = plan.config
    with executor or open_executor(config.dask, config.jobs, config.codec_timeout, quiet) as running:
        return run_size_pass(plan, running)


def csv_rows(folder: Path) -> list:
    with open(folder / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


SIZE_COLUMNS = ("calls", "failures", "mismatches", "bytes_total", "bytes_mean", "bytes_p50", "bytes_p99",
                "state_bytes_per_conn")


def test_dask_fleet_equals_each_trace_alone_summed(fleet_dir, tmp_path):
    out = tmp_path / "fleet"
    done = run_bench("--trace", fleet_dir, "--codecs", CODECS, "--dask", "local:2", "--sizes-only",
                     "--chunk-calls", "1000", "--out", out, "--no-report", "--quiet")
    assert done.returncode == 0, done.stderr
    fleet = csv_rows(out)
    traces = sorted(str(p) for p in fleet_dir.glob("*.rpct"))
    assert sorted({r["trace"] for r in fleet}) == ["*", *traces]
    alone = {}
    for trace in traces:
        single = tmp_path / Path(trace).stem
        assert run_bench("--trace", trace, "--codecs", CODECS, "--sizes-only", "--out", single, "--no-report",
                         "--quiet").returncode == 0
        alone[trace] = {r["codec"]: r for r in csv_rows(single)}
    for row in fleet:
        if row["trace"] != "*":  # each trace's row is that trace's own run
            want = alone[row["trace"]][row["codec"]]
            assert {k: row[k] for k in SIZE_COLUMNS} == {k: want[k] for k in SIZE_COLUMNS}
            continue
        for column in ("calls", "failures", "mismatches", "bytes_total"):
            assert int(row[column]) == sum(int(alone[t][row["codec"]][column]) for t in traces), column
    merged = {r["codec"]: r for r in fleet if r["trace"] == "*"}
    assert int(merged["msgpack"]["failures"]) == 243  # the big ints of c.rpct
    suite = results.load(str(out))
    assert [t.trace["path"] for t in suite.traces] == traces
    single_c = results.load(str(tmp_path / "c"))
    per_trace = {r.codec: r for r in suite.traces[2].results}
    assert per_trace["msgpack"].problems == single_c.result("msgpack").problems
    assert suite.result("msgpack").problems[0].example_trace == traces[2]
    assert suite.settings["dask"]["workers"] == 2


@pytest.mark.parametrize("chunk_calls", [300, 1000, 1337])
def test_chunks_merge_to_the_one_process_figures(fleet_dir, chunk_calls):
    """One trace cut into tasks (stateful codecs whole) gives what one pass over it gives."""
    trace = str(fleet_dir / "b.rpct")
    config = RunConfig(trace=trace, codecs=tuple(CODECS.split(",")) + ("protobuf",), sample_calls=None,
                       chunk_calls=chunk_calls, floor=False)
    registry = config.registry()
    fleet = run_pass(make_pass(config))
    one = [CodecTally(registry.create(c), config.wire) for c in config.codecs]
    for index, call in enumerate(TraceReader(trace)):
        check_call(one, index, call)
    for tally in one:
        tally.measure_state()
    for mine, theirs in zip(fleet.traces[0].tallies, one):
        mine_state, their_state = mine.export(), theirs.export()
        for state in (mine_state, their_state):
            state.pop("ns")
            for _, wire in state["wire"].values():
                wire.pop("ns")
        assert mine_state == their_state, mine.codec.name
    stats = TraceStats()
    for call in TraceReader(trace):
        stats.add(call)
    assert fleet.traces[0].stats == stats


def test_timing_sample_is_stratified_and_independent_of_chunking(fleet_dir):
    traces = tuple(resolve_traces([str(fleet_dir)]))
    samples = []
    for chunk in (1000, 10**6):
        config = RunConfig(trace=traces[0], traces=traces, codecs=("json",), sample=300, chunk_calls=chunk,
                           floor=False)
        fleet = run_pass(make_pass(config))
        samples.append(fleet.sample(config.sample))
    assert samples[0] == samples[1]
    assert len(samples[0]) == 300
    assert {c.method for c in samples[0]} >= {"odd", "even", "sync_position"}  # every trace has its share


def test_batch_starts_and_seek_read_the_same_calls(fleet_dir):
    path = str(fleet_dir / "a.rpct")
    every = list(TraceReader(path))
    starts = list(TraceReader(path).batch_starts())
    assert starts[0][1] == 0 and len(starts) > 10
    for offset, before in starts[::5]:
        reader = TraceReader(path)
        reader.seek(offset, before)
        assert list(reader) == every[before:]


def test_the_timing_sample_comes_from_the_pass_itself_and_equals_the_calls_at_its_indices(fleet_dir, tmp_path):
    """The pass keeps the sample's calls as it reads them: with the traces gone afterwards, the sample of any
    size up to --sample is still there, and it is the calls found at those indices in the files, in order."""
    traces = []
    for name in ("a.rpct", "b.rpct"):
        (tmp_path / name).write_bytes((fleet_dir / name).read_bytes())
        traces.append(str(tmp_path / name))
    config = RunConfig(trace=traces[0], traces=tuple(traces), codecs=("json",), sample=300, chunk_calls=700,
                       floor=False, jobs=2)
    fleet = run_pass(make_pass(config))
    for path in traces:
        os.remove(path)
    for size in (300, 120):
        sample = fleet.sample(size)
        wanted = fleet._sample_indices(size)
        assert len(sample) == sum(map(len, wanted.values())) >= size  # each stratum at least one call
        from_files = [call for i, indices in sorted(wanted.items())
                      for call in TraceReader(str(fleet_dir / Path(traces[i]).name)).calls(indices)]
        assert sample == from_files


def test_sampled_size_pass_gives_intervals_that_hold_the_exact_figure(fleet_dir, tmp_path):
    exact, sampled = tmp_path / "exact", tmp_path / "sampled"
    for out, extra in ((exact, []), (sampled, ["--sample-calls", "2000"])):
        done = run_bench("--trace", fleet_dir, "--codecs", "json,msgpack", "--sizes-only", "--out", out,
                         "--no-report", "--quiet", *extra)
        assert done.returncode == 0, done.stderr
    truth = results.load(str(exact))
    guess = results.load(str(sampled))
    assert 1500 < guess.settings["size_pass_calls"] < 2500
    for codec in ("json", "msgpack"):
        estimate = guess.result(codec).estimate
        low, _, high = estimate.bytes_total
        assert low <= truth.result(codec).sizes.total <= high
        low, _, high = estimate.bytes_mean
        assert low <= truth.result(codec).sizes.mean <= high
        assert estimate.of_calls == truth.trace["calls"] == 7300
    assert truth.result("json").estimate is None
    written = json.loads((sampled / "results.json").read_text(encoding="utf-8"))
    assert json.loads(json.dumps(guess.to_json()))["results"] == written["results"]  # the estimates read back whole


def test_fleet_with_timing_writes_a_report(fleet_dir, tmp_path):
    out = tmp_path / "timed"
    done = run_bench("--trace", fleet_dir / "a.rpct", fleet_dir / "c.rpct", "--codecs", "json,msgpack",
                     "--sample", "200", "--out", out, *FAST)
    assert done.returncode == 0, done.stderr
    suite = results.load(str(out))
    assert suite.result("json").encode is not None and len(suite.traces) == 2
    assert suite.settings["sample"] == 200
    page = (out / "report.html").read_text()
    assert "<h2>Fleet</h2>" in page and "Traces that differ" in page
    assert f"msgpack fails or mismatches on 1 of 2 traces only: {fleet_dir / 'c.rpct'} (243 calls)" in page
    assert "fleet: 2 traces" in done.stdout


@pytest.mark.parametrize("args, message", [
    (["--trace", "{empty}"], "no trace files"),
    (["--trace", "{empty}/*.rpct"], "no file matches"),
    (["--dask", "local:0"], "local:N needs"),
    (["--dask", "nowhere"], "expected local"),
])
def test_bad_fleet_options_are_one_line(tmp_path, args, message):
    empty = tmp_path / "empty"
    empty.mkdir()
    done = run_bench(*[a.format(empty=empty) for a in args], "--out", tmp_path / "out", "--quiet", "--sizes-only")
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]  # argparse's usage may come before it
    assert message in last and "Traceback" not in done.stderr, done.stderr


def _busy_worker(client) -> tuple:
    """(address, pid) of a worker executing a size-pass task, waiting until one is."""
    def executing(dask_worker):
        return os.getpid(), [str(ts.key) for ts in dask_worker.state.executing]

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for address, (pid, keys) in client.run(executing).items():
            if any("watched" in k for k in keys):
                return address, pid
        time.sleep(0.05)
    raise AssertionError("no worker started a size-pass task within 120 s")


def test_a_worker_killed_mid_run_still_counts_every_call_once(fleet_dir, tmp_path, monkeypatch):
    from dask.distributed import Client, LocalCluster

    plugin = tmp_path / "slow.py"
    plugin.write_text(SLOW_CODEC)
    traces = tuple(resolve_traces([str(fleet_dir)]))
    monkeypatch.setenv("SLOW_CODEC_S", "0.002")  # ~1,000-call tasks of 2 s: long enough to be killed in
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.CRITICAL) as cluster, Client(cluster) as client:
        config = RunConfig(trace=traces[0], traces=traces, codecs=("slowjson",), codec_files=(str(plugin),),
                           dask=cluster.scheduler_address, sizes_only=True, chunk_calls=1000)
        plan = make_pass(config)
        errors: list = []
        done: list = []
        runner = threading.Thread(target=lambda: _run_catching(plan, done, errors))
        runner.start()
        address, pid = _busy_worker(client)
        os.kill(pid, signal.SIGKILL)
        runner.join(timeout=300)
        assert not runner.is_alive() and not errors, errors
        assert pid not in client.run(os.getpid).values()  # the worker really died (its nanny started another)
    fleet = done[0]
    monkeypatch.setenv("SLOW_CODEC_S", "0")
    reference = run_pass(make_pass(dataclasses.replace(config, dask=None)), InProcess(quiet))
    for got, want in zip([*fleet.traces, fleet], [*reference.traces, reference]):
        mine, theirs = got.tallies[0].export(), want.tallies[0].export()
        mine.pop("ns"), theirs.pop("ns")
        assert mine == theirs
    assert sum(fleet.tallies[0].sizes.values()) + fleet.tallies[0].failures == 7300


def _run_catching(plan: Plan, done: list, errors: list) -> None:
    try:
        done.append(run_pass(plan))
    except BaseException as e:  # reported by the test thread
        errors.append(e)


def test_a_local_cluster_that_cannot_start_is_one_line(fleet_dir, tmp_path, monkeypatch):
    """Dask's own configuration can stop a LocalCluster (here a scheduler preload that is not there): one line
    saying why, exit 2, no results folder."""
    monkeypatch.setenv("DASK_DISTRIBUTED__SCHEDULER__PRELOAD", '["no_such_preload_module"]')
    out = tmp_path / "out"
    done = run_bench("--trace", fleet_dir / "a.rpct", "--codecs", "json", "--dask", "local:2", "--sizes-only",
                     "--out", out, "--no-report", "--quiet")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines() == [
        "run_bench.py: error: --dask local:2: the cluster did not start (No module named 'no_such_preload_module')"]
    assert not out.exists()


def test_ctrl_c_on_dask_stops_the_run_and_every_task_process(fleet_dir, tmp_path):
    """Ctrl-C (SIGINT to the whole process group) while a local cluster's tasks run: exit 130 with the one line
    saying so, and every task process the run forked is gone (none left running or unreaped)."""
    psutil = pytest.importorskip("psutil")
    plugin = tmp_path / "slow.py"
    plugin.write_text(SLOW_CODEC)
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "run_bench.py"), "--trace", str(fleet_dir), "--codec-path", str(plugin),
         "--codecs", "slowjson,json", "--dask", "local:2", "--sizes-only", "--out", str(tmp_path / "out"),
         "--no-report", "--quiet"], cwd=REPO, env=dict(os.environ, SLOW_CODEC_S="0.05"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        forked = _task_processes(psutil.Process(proc.pid))
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "run_bench.py: interrupted"
    assert forked and not [p for p in forked if psutil.pid_exists(p)]


def _task_processes(run) -> list:
    """The pids of the task processes a run has forked, once it has some (waiting up to 120 s)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = [child.pid for child in run.children()]
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("the run forked no task process within 120 s")


@dataclasses.dataclass(frozen=True)
class _Sleeper:
    """A task that writes its process id to ``pid_file``, then sleeps for ever."""

    pid_file: Path
    codecs: tuple = ("sleeper",)
    span: tuple = (0, 0)

    def prepare(self) -> None:
        pass

    def run(self, beat):
        self.pid_file.write_text(str(os.getpid()))
        time.sleep(3600)

    def blame(self, position: int, reason: str) -> "_Sleeper":
        return self


def test_a_stopped_watch_kills_and_reaps_its_task_process(tmp_path):
    """What a Dask worker that closes does to the task it runs (run_watched's ``stop``): the task's process is
    killed and reaped, and the task ends with a BenchError instead of its answer."""
    task = _Sleeper(tmp_path / "pid")
    stopping = threading.Event()

    def stop() -> bool:
        if task.pid_file.exists():
            stopping.set()
        return stopping.is_set()

    with pytest.raises(BenchError, match="stopped: the Dask worker that ran it closed"):
        run_watched([task], 1, 3600, stop=stop)
    with pytest.raises(ProcessLookupError):  # not running, and not a zombie either: reaped
        os.kill(int(task.pid_file.read_text()), 0)


def test_dictionaries_train_on_a_sample_across_the_traces(fleet_dir, tmp_path):
    runs = {}
    for name, extra in (("here", []), ("dask", ["--dask", "local:2", "--chunk-calls", "1000"])):
        out = tmp_path / name
        done = run_bench("--trace", fleet_dir, "--codecs", "json,json+zstddict-3", "--sizes-only", "--out", out,
                         "--no-report", "--quiet", *extra)
        assert done.returncode == 0, done.stderr
        runs[name] = json.loads((out / "results.json").read_text())
    here, dask = runs["here"], runs["dask"]
    training = here["trace"]["training"]
    assert training["source"] == "the first 20% of each of 3 traces (1,460 calls)"
    assert 0 < training["held_out_calls"] and here["trace"]["calls"] + training["held_out_calls"] == 7300
    assert here["trace"]["connections"] == 10 + 10 + 4  # connection ids repeat across servers: still distinct
    assert [r["sizes"] for r in here["results"]] == [r["sizes"] for r in dask["results"]]
    assert here["trace"]["training"] == dask["trace"]["training"]
    assert here["results"][1]["dictionary"]["bytes"] == dask["results"][1]["dictionary"]["bytes"] > 0


def test_results_json_keeps_per_trace_results(fleet_dir, tmp_path):
    out = tmp_path / "out"
    assert run_bench("--trace", f"{fleet_dir}/[ab].rpct", "--codecs", "json", "--sizes-only", "--out", out,
                     "--no-report", "--quiet").returncode == 0
    data = json.loads((out / "results.json").read_text())
    assert data["schema_version"] == results.SCHEMA_VERSION == 8
    assert [t["trace"]["calls"] for t in data["traces"]] == [2500, 3100]
    assert data["trace"]["calls"] == 5600 and data["trace"]["traces"] == 2
    assert data["results"][0]["sizes"]["total"] == sum(t["results"][0]["sizes"]["total"] for t in data["traces"])


ENGINE_CODECS = ("json", "msgpack", "json+zlib-1", "json+zstdstream-3", "json+zstddict-3")


def _states(tallies) -> list:
    """The tallies' figures without their clocks (the pass's, and the packets' of each --wire policy)."""
    states = [{k: v for k, v in t.export().items() if k != "ns"} for t in tallies]
    for state in states:
        state["wire"] = {text: (policy, {k: v for k, v in wire.items() if k != "ns"})
                         for text, (policy, wire) in state["wire"].items()}
    return states


def _figures(size_pass: SizePass) -> dict:
    """Everything the size pass gives but its clock: tallies, statistics, floor, the timing sample."""
    tallies = _states(size_pass.tallies)
    floor = dataclasses.replace(size_pass.floor, seconds=0.0) if size_pass.floor else None
    return {"tallies": tallies, "stats": size_pass.stats.summary(), "floor": floor, "sample": size_pass.sample(300),
            "held": size_pass.sampling.held, "measured": size_pass.measured}


@pytest.mark.parametrize("run", [dict(jobs=0), dict(jobs=2), dict(jobs=1, chunk_calls=1000),
                                 dict(dask="local:2", chunk_calls=3000)])
def test_one_trace_gives_the_same_figures_sample_floor_and_dictionaries_on_every_executor(run, tmp_path):
    """A single trace is a fleet of one: here, in watched forks or on Dask, whole or in chunks, the same bytes,
    the same timing sample, the same floor and the same trained dictionaries; and the figures are those of
    every call after the held-out first 20 % through each codec in turn."""
    base = RunConfig(codecs=ENGINE_CODECS, sample=300, jobs=0)
    base_plan = make_pass(base)
    reference, training, codecs = run_pass(base_plan), base_plan.training, base_plan.codecs
    config = dataclasses.replace(base, **run)
    plan = make_pass(config)
    size_pass, other_training = run_pass(plan), plan.training
    assert _figures(size_pass) == _figures(reference)
    assert training and other_training and training.dictionaries == other_training.dictionaries
    assert training.held == (4000,) and training.source == "the first 20% of the trace (4,000 calls)"
    registry = base.registry()
    registry.dictionaries.update(training.dictionaries)
    alone = [CodecTally(registry.create(c.name), base.wire) for c in codecs]
    for index, call in enumerate(TraceReader(base.trace)):
        if index >= 4000:
            check_call(alone, index, call)
    for tally in alone:
        tally.measure_state()
    assert _states(reference.traces[0].tallies) == _states(alone)
    assert len(_figures(reference)["sample"]) == 300


def test_a_fleet_floor_is_its_traces_floors_summed(fleet_dir):
    traces = tuple(resolve_traces([str(fleet_dir / "a.rpct"), str(fleet_dir / "b.rpct")]))
    config = RunConfig(trace=traces[0], traces=traces, codecs=("json",), jobs=0)
    fleet = run_pass(make_pass(config))
    alone = []
    for trace in traces:
        one = run_pass(make_pass(dataclasses.replace(config, trace=trace, traces=())))
        alone.append(one.floor)
    assert fleet.floor.calls == sum(f.calls for f in alone) == 5600
    best = sum(f.bytes_per_call * f.calls for f in alone) / 5600
    assert fleet.floor.bytes_per_call == pytest.approx(best, rel=1e-12)
    assert [t.entry()["floor"]["bytes_per_call"] for t in fleet.traces] == [f.bytes_per_call for f in alone]


def test_sizes_only_with_and_without_dask_write_the_same_figures(tmp_path):
    """The command line, one trace: watched forks and a Dask cluster of two give the same results.json figures."""
    runs = {}
    for name, extra in (("forks", []), ("dask", ["--dask", "local:2"])):
        out = tmp_path / name
        done = run_bench("--sizes-only", "--out", out, "--no-report", "--quiet", *extra)
        assert done.returncode == 0, done.stderr
        runs[name] = json.loads((out / "results.json").read_text())
    forks, dask = runs["forks"], runs["dask"]
    drop = ("size_pass_s", "timing_s", "dask")
    assert {k: v for k, v in forks["settings"].items() if k not in drop} == \
        {k: v for k, v in dask["settings"].items() if k not in drop}
    forks["trace"]["floor"].pop("seconds"), dask["trace"]["floor"].pop("seconds")
    assert forks["trace"] == dask["trace"] and forks["traces"] == dask["traces"] == []
    for run in (forks, dask):
        for row in run["results"]:
            (row["dictionary"] or {}).pop("train_s", None)  # a clock reading
    assert forks["results"] == dask["results"]


class _Counting:
    """A task that says how many objects the collector has frozen while it runs."""

    codecs: tuple = ()
    span = (0, 1)

    def run(self, beat):
        import gc

        return gc.get_freeze_count()


@pytest.mark.parametrize("callers_freeze", [False, True])
def test_the_in_process_executor_freezes_only_when_the_caller_has_not(callers_freeze):
    """Its tasks run with what existed before them frozen out of the collections, as in a fork; a caller that froze
    its own objects (a pre-fork server embedding rpcbench) keeps them frozen after the run, and one that did not
    gets nothing left frozen."""
    import gc

    gc.unfreeze()
    if callers_freeze:
        gc.freeze()
    before = gc.get_freeze_count()
    try:
        [during] = InProcess(quiet).run_all([_Counting()], "test")
        assert during > 0 and gc.get_freeze_count() == before
    finally:
        gc.unfreeze()
