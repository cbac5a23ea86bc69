"""Test helpers for spillway users and spillway's own tests.

- :class:`ListFeed`: a feed backed by explicit lists (arrival times and values per source);
- :class:`ManualClock`: an injected clock that only moves when told to;
- :func:`local_spark`: a small local SparkSession set up for tests (``local[2]``, UI off).

Examples
--------
>>> feed = ListFeed(times=[[0.1, 0.5, 1.2]], values=[[1.0, 2.0, 3.0]])
>>> feed.count(1.0).tolist()
[2]
>>> feed.payload(0, np.array([2]))["value"].tolist()
[3.0]
>>> clock = ManualClock(start=10.0)
>>> clock.advance(0.5)
10.5
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spillway.errors import ConfigError
from spillway.feeds.base import Feed


class ListFeed(Feed):
    """A feed whose tuples are given explicitly, source by source.

    Parameters
    ----------
    times : list of per-source lists of arrival times (s), each non-decreasing.
    values : list of per-source lists of values, the same shapes as ``times``.
    keys : optional list of per-source lists of int keys (default 0).
    """

    name = "list"

    def __init__(
        self,
        *,
        times: Sequence[Sequence[float]],
        values: Sequence[Sequence[float]],
        keys: Sequence[Sequence[int]] | None = None,
    ) -> None:
        if len(times) != len(values):
            raise ConfigError(
                f"times and values need one list per source: {len(times)} vs {len(values)}"
            )
        self._t = [np.asarray(t, dtype=np.float64) for t in times]
        self._v = [np.asarray(v, dtype=np.float64) for v in values]
        self._k = [
            np.asarray(k, dtype=np.int64) for k in (keys or [np.zeros(len(t)) for t in times])
        ]
        for s, (t, v, k) in enumerate(zip(self._t, self._v, self._k, strict=True)):
            if not (t.shape == v.shape == k.shape):
                raise ConfigError(f"source {s}: times, values and keys must have the same length")
            if t.size and np.any(np.diff(t) < 0):
                raise ConfigError(f"source {s}: arrival times must be non-decreasing")

    @property
    def n_sources(self) -> int:
        return len(self._t)

    def count(self, t: float) -> np.ndarray:
        return np.array([np.searchsorted(ts, t, side="left") for ts in self._t], dtype=np.int64)

    def arrival_time(self, source: int, index: np.ndarray) -> np.ndarray:
        return self._t[source][np.asarray(index, dtype=np.int64)]

    def payload(self, source: int, index: np.ndarray) -> dict[str, np.ndarray]:
        i = np.asarray(index, dtype=np.int64)
        return {"key": self._k[source][i], "value": self._v[source][i]}


class ManualClock:
    """A clock for tests: returns the time it was set to (seconds, float)."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds`` and return the new time."""
        if seconds < 0:
            raise ConfigError(f"a clock cannot go back: advance({seconds})")
        self.now += seconds
        return self.now


def local_spark(app_name: str = "spillway-test", **conf: Any) -> Any:
    """A local SparkSession for tests: ``local[2]``, UI off, 2 shuffle partitions, loopback only.

    Extra ``conf`` entries are passed to the builder (dots as in Spark: use a dict to pass them).
    """
    from pyspark.sql import SparkSession

    from spillway.spark.session import configure_spark

    builder = SparkSession.builder.master("local[2]").appName(app_name)
    builder = configure_spark(builder, test=True)
    for k, v in conf.items():
        builder = builder.config(k, v)
    return builder.getOrCreate()
