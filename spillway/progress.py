"""Progress lines of long commands (benchmarks, experiments, capacity calibration).

Library code reports what it is doing with :func:`report`; nothing is printed unless someone
listens. The CLI listens (:func:`to_stream`) and prints each line to standard error with the
time since the command started, so a command that runs for minutes is never silent, and its
standard output stays the report path alone.

Examples
--------
>>> import io
>>> buf = io.StringIO()
>>> with to_stream(buf, clock=iter([0.0, 12.5]).__next__):
...     report("round 1: 10,000 tuples/s")
>>> buf.getvalue()
'spillway: [12s] round 1: 10,000 tuples/s\\n'
>>> report("nobody listens: nothing printed")
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import TextIO

#: The logger progress lines go to.
LOGGER = logging.getLogger("spillway.progress")
LOGGER.propagate = False
LOGGER.setLevel(logging.INFO)


def report(message: str) -> None:
    """Report one progress line (a no-op when nobody listens)."""
    LOGGER.info(message)


class _Handler(logging.Handler):
    def __init__(self, emit: Callable[[str], None], clock: Callable[[], float]) -> None:
        super().__init__(logging.INFO)
        self._emit = emit
        self.clock = clock
        self.start = clock()

    def emit(self, record: logging.LogRecord) -> None:
        elapsed = self.clock() - self.start
        self._emit(f"spillway: [{elapsed:.0f}s] {record.getMessage()}")


@contextlib.contextmanager
def to_stream(stream: TextIO, clock: Callable[[], float] = time.monotonic) -> Iterator[None]:
    """Print progress lines to ``stream`` while the block runs."""

    def write(line: str) -> None:
        stream.write(line + "\n")
        stream.flush()

    with to_callback(write, clock):
        yield


@contextlib.contextmanager
def to_callback(
    callback: Callable[[str], None], clock: Callable[[], float] = time.monotonic
) -> Iterator[None]:
    """Pass each progress line (formatted as :func:`to_stream` prints it) to ``callback``
    while the block runs (the live views show them).

    >>> seen = []
    >>> with to_callback(seen.append, clock=iter([0.0, 3.0]).__next__):
    ...     report("round 1")
    >>> seen
    ['spillway: [3s] round 1']
    """
    handler = _Handler(callback, clock)
    LOGGER.addHandler(handler)
    try:
        yield
    finally:
        LOGGER.removeHandler(handler)
