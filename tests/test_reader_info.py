"""What results.json records of a trace file that only a read to its end knows (rpcbench/reader_info.py): the
size pass's tasks give it back, from forked processes and from this one, as a direct read of the file tells it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rpc_capture import TraceWriter, open_trace, write_jsonl
from rpc_capture.trace import VERSION
from rpcbench.config import DEFAULT_TRACE, RunConfig
from rpcbench.executors import open_executor
from rpcbench.plan import make_plan
from rpcbench.progress import quiet
from rpcbench.reader_info import ReaderInfo, reader_info
from rpcbench.size_pass import run_size_pass


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The bundled sample rewritten in today's format, then damaged in its middle and cut inside its last record,
    or cut only; and as JSON Lines."""
    out = tmp_path_factory.mktemp("reader")
    with TraceWriter(str(out / "battle.rpct"), {"generator": "test_reader_info"}) as writer:
        for call in open_trace(DEFAULT_TRACE):
            writer.write(call)
    whole = (out / "battle.rpct").read_bytes()
    data = bytearray(whole)
    middle = len(data) // 2
    data[middle:middle + 40] = bytes(b ^ 0x5A for b in data[middle:middle + 40])
    (out / "damaged.rpct").write_bytes(bytes(data[:-7]))
    (out / "cut.rpct").write_bytes(whole[:-7])
    write_jsonl(open_trace(DEFAULT_TRACE), out / "battle.jsonl")
    return out


def read_to_the_end(path: str, salvage: bool) -> ReaderInfo:
    reader = open_trace(path, salvage)
    for _ in reader:
        pass
    return reader_info(reader)


@pytest.mark.parametrize("jobs", [0, 2])
@pytest.mark.parametrize("name, salvage", [("damaged.rpct", True), ("cut.rpct", False), ("battle.jsonl", False)])
def test_the_size_pass_records_what_a_read_to_the_end_tells(folder, name, salvage, jobs):
    path = str(folder / name)
    config = RunConfig(trace=path, codecs=("json", "json+zlibstream-1"), salvage=salvage, jobs=jobs,
                       chunk_calls=3000, sizes_only=True, floor=False)
    plan = make_plan(config, config.registry(), quiet)
    with open_executor(None, jobs, config.codec_timeout, quiet) as executor:
        size_pass = run_size_pass(plan, executor)
    want = read_to_the_end(path, salvage)
    trace = size_pass.traces[0]
    assert trace.reader == want
    entry = trace.entry()
    assert {key: entry[key] for key in dataclasses.asdict(want)} == dataclasses.asdict(want)
    if name == "cut.rpct":  # split in chunks: the last chunk's task reads to the end
        assert len(plan.index[0].cuts) > 2 and want.truncated_bytes > 0 and want.salvaged is None
        assert want.format == f"rpctrace v{VERSION}" and want.metadata["generator"] == "test_reader_info"
    elif name == "damaged.rpct":
        assert want.salvaged and "salvaged: skipped 1 damaged stretch(es)" in want.salvaged and want.truncated_bytes
    else:
        assert want.format == "jsonl" and want.metadata == {} and want.recorder is None
