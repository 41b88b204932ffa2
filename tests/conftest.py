"""Test session set-up shared by every test module."""

import pytest

from rpcbench.protobuf import compile as proto_compile


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """Compile protobuf schemas into a temporary cache, here and in the CLI subprocesses, not in .cache/."""
    folder = tmp_path_factory.mktemp("rpcbench-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RPCBENCH_CACHE", str(folder))
        mp.setattr(proto_compile, "CACHE_DIR", folder / "proto")
        yield folder
