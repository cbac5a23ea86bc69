"""The boards a dashboard or a metrics endpoint shows: one per node, N for a federation.

The dashboard (:mod:`spillway.ui`) and the Prometheus endpoint
(:mod:`spillway.telemetry.prometheus`) read a :class:`Hub`, never a node: ``spillway run``
puts one :class:`~spillway.telemetry.board.NodeBoard` in it, and a federation can put one per
node (any object with ``name``, ``version`` and ``state()``, :class:`StateSource`), fed from
wherever that node's snapshots come from.

Examples
--------
>>> from spillway.telemetry.board import NodeBoard
>>> hub = Hub([NodeBoard("a", queries=("q",), stw_s=10.0)])
>>> hub.add(NodeBoard("b", queries=("q",), stw_s=10.0))
>>> [s.name for s in hub.states()], hub.version
(['a', 'b'], 0)
>>> hub.add(NodeBoard("a", queries=(), stw_s=1.0))
Traceback (most recent call last):
...
spillway.errors.ConfigError: hub: a board named 'a' is already shown; give each node its own name
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Protocol

from spillway.errors import ConfigError
from spillway.telemetry.board import BoardState


class StateSource(Protocol):
    """What a hub reads from each node: its name, a version that grows with every change,
    and an immutable :class:`~spillway.telemetry.board.BoardState`."""

    @property
    def name(self) -> str: ...

    @property
    def version(self) -> int: ...

    def state(self) -> BoardState: ...


class Hub:
    """The named sources shown together, in the order they were added."""

    def __init__(self, sources: Iterable[StateSource] = ()) -> None:
        self._lock = threading.Lock()
        self._sources: list[StateSource] = []
        for s in sources:
            self.add(s)

    def add(self, source: StateSource) -> None:
        """Show ``source`` too (names are unique: they label its metrics)."""
        with self._lock:
            if any(s.name == source.name for s in self._sources):
                raise ConfigError(
                    f"hub: a board named {source.name!r} is already shown; give each node its "
                    "own name"
                )
            self._sources.append(source)

    @property
    def version(self) -> int:
        """Grows whenever any source changes."""
        with self._lock:
            return sum(s.version for s in self._sources)

    def states(self) -> list[BoardState]:
        """Every source's current state."""
        with self._lock:
            sources = list(self._sources)
        return [s.state() for s in sources]
