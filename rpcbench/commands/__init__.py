"""The command line, one module per command, each with ``main(argv) -> int``.

Commands parse arguments, call the library (``rpcbench``, ``rpc_capture``) and print;
they hold no measurement logic. This layer is the only code that imports ``reports``.
"""
