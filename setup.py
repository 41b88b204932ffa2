"""The one C extension, rpcbench._exact (the size pass's exact check: rpcbench/_exact.c), built when a C compiler is
there: ``optional``, so an install without one goes on, and rpcbench compares pickles instead (same answers,
slower). Everything else is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("rpcbench._exact", ["rpcbench/_exact.c"], optional=True)])
