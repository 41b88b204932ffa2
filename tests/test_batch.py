"""The size pass a batch at a time (rpcbench/batch.py, ``check_batch``) against call by call (``check_call``):
the same figures for every kind of codec on real traces (the bundled samples, real Minecraft packets), and
for codecs that fail, return the wrong type or exit partway through a batch; and the batch helpers (seeded
priorities, bottom-k candidates, trace statistics) against their per-call originals."""

import functools
import heapq
import random
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from rpc_capture import Call, open_trace
from rpc_capture.stats import TraceStats
from rpcbench import batch, fidelity
from rpcbench.batch import BATCH, CallBatch
from rpcbench.codec import Codec, Compressed, Compressor
from rpcbench.config import RunConfig
from rpcbench.fidelity import Limit
from rpcbench.pieces import Piece, tally_piece
from rpcbench.registry import Registry
from rpcbench.sampling import NOTHING_DRAWN, Candidates, SamplePlan, priorities, priority
from rpcbench.span import Span
from rpcbench.tally import CodecTally, check_batch, check_call, sum_span
from rpcbench.wire import PER_CALL, WirePolicy

REPO = Path(__file__).resolve().parent.parent
TRACES = {"study": REPO / "samples" / "battle.rpct", "dict": REPO / "samples" / "battle_dict.rpct",
          "minecraft": REPO / "tests" / "data" / "minecraft_packets.jsonl"}
CODECS = ("json", "msgpack", "bson", "protobuf", "json+zlib-1", "protobuf+zlib-1", "json+zlibstream-1",
          "json+zstdstream-3", "orjson", "msgspec-struct")


def figures(tallies):
    """What a tally exports, dict order included (the outputs list keys in the order they were met), but the
    histograms' (sizes and packet payloads: only their percentiles and sums reach an output)."""
    out = []
    for tally in tallies:
        state = tally.export()
        state.pop("ns")
        state["sizes"] = sorted(state["sizes"].items())
        state["wire"] = {text: {k: sorted(v.items()) if k == "payloads" else v for k, v in wire.items() if k != "ns"}
                         for text, (_, wire) in state["wire"].items()}
        out.append(repr(state))
    return out


def both_ways(make, calls, span_batches=5):
    """The figures of fresh tallies (``make()``) fed call by call, then batch by batch, summed every
    ``span_batches`` batches (the size pass sums every SPAN_CALLS calls)."""
    one, batched = make(), make()
    for index, call in enumerate(calls):
        check_call(one, index, call)
    span = Span()
    for number, start in enumerate(range(0, len(calls), BATCH)):
        chunk = calls[start:start + BATCH]
        check_batch(batched, CallBatch(list(range(start, start + len(chunk))), chunk), span)
        if number % span_batches == span_batches - 1:
            sum_span(batched, span)
    sum_span(batched, span)
    return figures(one), figures(batched)


@pytest.mark.parametrize("span_batches", [1, 7, 64])
@pytest.mark.parametrize("trace", TRACES, ids=list(TRACES))
def test_batches_give_the_figures_calls_give_on_real_traces(trace, span_batches):
    calls = list(open_trace(str(TRACES[trace])))[:3000]
    registry = Registry.default()
    one, batched = both_ways(lambda: [CodecTally(registry.create(c), (WirePolicy(PER_CALL),)) for c in CODECS],
                             calls, span_batches)
    assert one == batched
    if trace != "study":  # some codec had problems to count there: the batch's slow path ran too
        assert any("'problems': {}" not in f for f in one)


@pytest.mark.parametrize("trace", ["dict", "minecraft"])
def test_the_exact_check_in_c_and_by_pickles_give_the_same_figures(trace, monkeypatch):
    """fidelity.identical is the C walk where rpcbench._exact was built, else the pickles compared: the figures
    of a size pass do not depend on which (traces where codecs give calls back changed, so both paths run)."""
    if fidelity.identical is fidelity.identical_pickles:
        pytest.skip("rpcbench._exact not built (no C compiler)")
    calls = list(open_trace(str(TRACES[trace])))[:3000]
    registry = Registry.default()

    def batched():
        tallies, span = [CodecTally(registry.create(c), (WirePolicy(PER_CALL),)) for c in CODECS], Span()
        for start in range(0, len(calls), BATCH):
            chunk = calls[start:start + BATCH]
            check_batch(tallies, CallBatch(list(range(start, start + len(chunk))), chunk), span)
        sum_span(tallies, span)
        return figures(tallies)
    in_c = batched()
    assert any("'problems': {}" not in f for f in in_c)  # some codec gave calls back changed
    for module in (fidelity, batch):
        monkeypatch.setattr(module, "identical", fidelity.identical_pickles)
    assert batched() == in_c


class Odd(Codec):
    """A repr codec that misbehaves on some calls: raises, names a limit, returns text, decodes wrong, exits."""

    id = name = "odd"

    def __init__(self, exit_at=None):
        self.count, self.exit_at = 0, exit_at

    def encode(self, call):
        self.count += 1
        if self.count == self.exit_at:
            sys.exit(3)
        if self.count % 97 == 5:
            raise ValueError("no")
        if self.count % 89 == 7:
            raise Limit("bytes", "args", "a limit")
        if self.count % 83 == 11:
            return "text"
        return repr((call.method, call.args)).encode()

    def decode(self, data):
        if data.endswith(b"0)"):
            raise KeyError("decode")
        method, args = eval(data.decode())  # noqa: S307  (our own repr, in a test)
        return method, args if len(data) % 7 else [args]


@pytest.mark.parametrize("exit_at", [None, 1, 300, 301])
def test_a_codec_that_fails_or_exits_partway_through_a_batch_counts_the_same(exit_at):
    calls = list(open_trace(str(TRACES["study"])))[:700]
    one, batched = both_ways(lambda: [CodecTally(Odd(exit_at), (WirePolicy(PER_CALL),)),
                                      CodecTally(Registry.default().create("msgpack"))], calls)
    assert one == batched
    if exit_at:
        assert f"stopped at call {exit_at - 1}: SystemExit: 3" in one[0]


class OddStream(Compressor):
    """A stream compressor, one per connection and direction, whose bytes depend on the stream's state (a count
    of its calls) and that misbehaves on some calls: raises, returns text, decompresses wrong or not at all, exits
    (at the ``exit_at``-th call of all its streams)."""

    name, per_connection, ordered_delivery = "oddstream", True, True

    def __init__(self, level=None, calls=None, exit_at=None):
        super().__init__(level)
        self._calls, self._exit_at, self._sent, self._received = calls or [0], exit_at, 0, 0

    def connection(self):
        return OddStream(self.level, self._calls, self._exit_at)

    def compress(self, data):
        self._calls[0] += 1
        self._sent += 1
        if self._calls[0] == self._exit_at:
            sys.exit(4)
        if self._sent % 31 == 3:
            raise ValueError("compress")
        if self._sent % 37 == 5:
            return "text"
        return self._sent.to_bytes(4, "big") + data

    def decompress(self, data):
        self._received += 1
        if self._received % 41 == 7:
            raise KeyError("decompress")
        if int.from_bytes(data[:4], "big") % 43 == 9:
            return data[5:]
        return data[4:]


@pytest.mark.parametrize("exit_at", [None, 1, 300, 301])
def test_a_stream_compressor_that_fails_or_exits_partway_through_a_batch_counts_the_same(exit_at):
    """Streams go a batch at a time too (rpcbench.batch.streamed_all), each call through its stream's state in
    the calls' order: the same figures as call by call, over an inner codec that fails some calls itself."""
    calls = list(open_trace(str(TRACES["dict"])))[:700]
    one, batched = both_ways(lambda: [CodecTally(Compressed(Odd(), OddStream(exit_at=exit_at)),
                                                 (WirePolicy(PER_CALL),)),
                                      CodecTally(Compressed(Registry.default().create("json"), OddStream()))],
                             calls)
    assert one == batched
    assert "('encode', 'other')" in one[1] and "('decode', 'other')" in one[1]  # each way it goes wrong, met
    if exit_at:  # the exit_at-th call compressed: later than the exit_at-th call when the inner codec failed some
        assert re.search(r"'size pass stopped at call \d+: SystemExit: 4'", one[0])


def test_priorities_are_the_per_call_priorities_bit_for_bit():
    indices = np.array([*range(5000), *random.Random(1).sample(range(1 << 40), 2000), (1 << 63) + 5], np.uint64)
    for seed, trace, salt in ((0, 0, 1), (1234567, 3, 2), ((1 << 70) + 9, 1, 1)):
        assert priorities(seed, trace, indices, salt).tolist() == [priority(seed, trace, int(i), salt)
                                                                   for i in indices]


@pytest.mark.parametrize("keep", [1, 7, 300])
def test_candidates_are_the_calls_of_smallest_priority_per_method(keep):
    rng = random.Random(keep)
    calls = [Call(rng.choice("abcdef"), [i], i) for i in range(5000)]
    candidates = Candidates(keep)
    for start in range(0, len(calls), BATCH):
        indices = list(range(start, min(start + BATCH, len(calls))))
        candidates.offer_all(calls[start:start + BATCH], priorities(9, 0, np.array(indices, np.uint64), 1), indices)
    ranked = {}
    for index, call in enumerate(calls):
        ranked.setdefault(call.method, []).append((priority(9, 0, index, 1), index))
    drawn = candidates.export()
    assert drawn.ranked == {m: tuple(heapq.nsmallest(keep, found)) for m, found in ranked.items()}
    assert {i: drawn.call(i) for i in drawn.calls} == {i: calls[i] for pairs in drawn.ranked.values() for _, i in pairs}


def span_stats(stats, indices, calls):
    """A batch's statistics as the size pass counts them: its columns in a span of its own, summed."""
    batch, span = CallBatch(indices, calls), Span()
    span.add(batch.methods, batch.conns, batch.dirs, batch.times)
    stats.merge(span.stats(span.columns()))


BATCH_STATS = {"add_all": lambda stats, indices, calls: stats.add_all(calls), "span": span_stats}


@pytest.mark.parametrize("way", BATCH_STATS)
@pytest.mark.parametrize("shuffled", [False, True])
def test_trace_statistics_of_batches_are_those_of_calls(shuffled, way):
    """TraceStats.add_all of a batch, and a batch's statistics from its groupings merged, against add per call
    (a timestamp beyond 64 bits too)."""
    calls = [*open_trace(str(TRACES["dict"])), Call("x", [], 5, "c2s", "late"), Call("y", [], 1 << 70, "s2c", 7)]
    if shuffled:  # timestamps out of order
        random.Random(2).shuffle(calls)
    one, batched = TraceStats(), TraceStats()
    for call in calls:
        one.add(call)
    for start in range(0, len(calls), BATCH):
        chunk = calls[start:start + BATCH]
        BATCH_STATS[way](batched, list(range(start, start + len(chunk))), chunk)
    assert batched == one
    assert [list(getattr(batched, name)) for name in ("spans", "methods", "directions", "connections")] == \
        [list(getattr(one, name)) for name in ("spans", "methods", "directions", "connections")]


@pytest.mark.parametrize("wide_at", [None, 0, 300, -1])
def test_trace_statistics_of_a_span_of_many_batches_are_those_of_calls(wide_at):
    """A span holding every batch (as the size pass sums 64 at once), its statistics against add per call; a
    timestamp beyond 64 bits in its first, a middle or its last batch turns its kept timestamps into Python ints."""
    calls = list(open_trace(str(TRACES["dict"])))
    if wide_at is not None:
        calls[wide_at] = calls[wide_at]._replace(t=1 << 70)
    one, span = TraceStats(), Span()
    for call in calls:
        one.add(call)
    for start in range(0, len(calls), BATCH):
        batch = CallBatch(list(range(start, start + BATCH)), calls[start:start + BATCH])
        span.add(batch.methods, batch.conns, batch.dirs, batch.times)
    assert span.stats(span.columns()) == one


def test_a_piece_with_nothing_to_time_draws_no_candidates_and_counts_the_same():
    config = RunConfig(trace=str(TRACES["dict"]), codecs=("msgpack", "json"))
    piece = Piece(0, config.trace, config.codecs)
    timed, untimed = (tally_piece(config, piece, SamplePlan(1, keep)) for keep in (50, 0))  # 0: --sizes-only

    def counted(summary):
        tallies = [{k: v for k, v in state.items() if k not in ("ns", "wire")} for state in summary.tallies]
        return tallies, summary.count.stats, summary.count.measured
    assert untimed.count.drawn.ranked == {} and untimed.count.drawn.calls == {}
    assert sum(map(len, timed.count.drawn.ranked.values())) > 50
    assert counted(untimed) == counted(timed) and timed.count.measured == timed.count.stats.calls > 0


@pytest.mark.parametrize("keep", [1, 50])
def test_draws_of_pieces_merge_alike_in_any_order(keep):
    """The size pass folds each piece's draw in as the piece ends, in whatever order pieces end (forks, Dask):
    any order gives the one draw of the whole trace, its calls and tick windows in trace order."""
    calls = list(open_trace(str(TRACES["dict"])))[:3000]
    policy = WirePolicy("tick:50", tick_ms=50)
    whole, pieces = Candidates(keep, policy), []
    for start in range(0, len(calls), 700):
        piece = Candidates(keep, policy)
        for at in range(start, min(start + 700, len(calls)), BATCH):
            indices = list(range(at, min(at + BATCH, start + 700, len(calls))))
            chunk, ranks = calls[indices[0]:indices[-1] + 1], priorities(3, 0, np.array(indices, np.uint64), 1)
            piece.offer_all(chunk, ranks, indices)
            whole.offer_all(chunk, ranks, indices)
        pieces.append(piece.export())
    merged = [functools.reduce(lambda a, b: a.merge(b, keep), order, NOTHING_DRAWN)
              for order in (pieces, pieces[::-1], random.Random(keep).sample(pieces, len(pieces)))]
    assert merged[0] == merged[1] == merged[2]
    assert all(list(m.windows) == sorted(m.windows) and list(m.calls) == sorted(m.calls) for m in merged)
    assert merged[0].ranked == whole.export().ranked and merged[0].windows  # windows drawn, a piece's edge aside
