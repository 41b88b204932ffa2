"""The caller's own work, done while a run would wait (:class:`Meanwhile`): the command line's is the imports
its outputs need (scipy.stats, matplotlib: about 0.9 s of CPU), done while the plan waits for its schema
inference and, what is left, while the timing looks at the CPUs, not after the timing."""

from __future__ import annotations

from typing import Callable, Iterable


class Meanwhile:
    """Pieces of work, each done once, in order, when the run has time for them."""

    def __init__(self, pieces: Iterable[Callable[[], None]] = ()) -> None:
        self._left = list(pieces)

    def until(self, over: Callable[[], bool]) -> None:
        """Do the pieces left, one after another, until ``over()`` (the wait is over) or none is left."""
        while self._left and not over():
            self._left.pop(0)()

    def rest(self) -> None:
        """Do every piece left."""
        self.until(lambda: False)


NOTHING = Meanwhile()  #: no work of the caller's (the default): nothing to do, ever
