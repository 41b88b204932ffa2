"""rpcbench: replay recorded RPC traces through serialization codecs and measure them."""

__version__ = "0.1.0"
