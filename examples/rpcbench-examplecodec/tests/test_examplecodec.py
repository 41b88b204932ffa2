"""The plugin author's test: check_codec on the calls of a real trace (here rpcbench's bundled sample)."""

from itertools import islice

from rpc_capture import open_trace
from rpcbench.config import DEFAULT_TRACE
from rpcbench.testing import check_codec
from rpcbench_examplecodec import ExampleCodec


def test_examplecodec_round_trips_the_bundled_sample():
    check_codec(ExampleCodec(), islice(open_trace(DEFAULT_TRACE), 2000))
