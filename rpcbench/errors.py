"""The error type for problems the user can fix: printed as one line, exit status 2."""


class BenchError(Exception):
    """Bad arguments, a bad codec id, a schema that doesn't compile...: message is the whole story."""
