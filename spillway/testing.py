"""Test helpers for spillway users and spillway's own tests.

- :class:`ListFeed`: a feed backed by explicit lists (arrival times and values per source);
- :class:`ManualClock`: an injected clock that only moves when told to;
- :func:`local_spark`: a small local SparkSession set up for tests (``local[2]``, UI off);
- :func:`running_broker`: a Kafka broker on loopback for the duration of a ``with`` block;
- :class:`KafkaTopics`: unique topics for one test, deleted afterwards;
- pytest fixtures ``kafka_broker`` (one broker for the whole test session) and
  ``kafka_topics`` (a :class:`KafkaTopics` per test); a ``conftest.py`` enables them with
  ``from spillway.testing import kafka_broker, kafka_topics``.

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

import contextlib
import itertools
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from spillway.errors import ConfigError
from spillway.feeds.base import Feed
from spillway.kafka.broker import BrokerConfig, BrokerState
from spillway.kafka.connection import KafkaConnection


class ListFeed(Feed):
    """A feed whose tuples are given explicitly, source by source.

    Parameters
    ----------
    times : list of per-source lists of arrival times (s), each non-decreasing.
    values : list of per-source lists of values, the same shapes as ``times``.
    keys : optional list of per-source lists of int keys (default 0).
    sic : optional list of per-source lists of the SIC each tuple carries (a federation
        link's rows, :attr:`~spillway.feeds.base.Feed.carries_sic`); None: none carried.

    Examples
    --------
    >>> link = ListFeed(times=[[0.1, 0.2, 0.3]], values=[[0.0] * 3], sic=[[0.1, 0.2, 0.3]])
    >>> link.carries_sic, round(link.carried_sic(0, 1, 3), 3)
    (True, 0.5)
    """

    name = "list"

    def __init__(
        self,
        *,
        times: Sequence[Sequence[float]],
        values: Sequence[Sequence[float]],
        keys: Sequence[Sequence[int]] | None = None,
        sic: Sequence[Sequence[float]] | None = None,
    ) -> None:
        if len(times) != len(values):
            raise ConfigError(
                f"times and values need one list per source: {len(times)} vs {len(values)}"
            )
        self._t = [np.asarray(t, dtype=np.float64) for t in times]
        self._v = [np.asarray(v, dtype=np.float64) for v in values]
        given: Sequence[Any] = keys or [np.zeros(len(t)) for t in times]
        self._k = [np.asarray(k, dtype=np.int64) for k in given]
        for s, (t, v, k) in enumerate(zip(self._t, self._v, self._k, strict=True)):
            if not (t.shape == v.shape == k.shape):
                raise ConfigError(f"source {s}: times, values and keys must have the same length")
            if t.size and np.any(np.diff(t) < 0):
                raise ConfigError(f"source {s}: arrival times must be non-decreasing")
        self._sic = None if sic is None else [np.asarray(x, dtype=np.float64) for x in sic]
        if self._sic is not None and [x.shape for x in self._sic] != [t.shape for t in self._t]:
            raise ConfigError("sic needs one list per source, each as long as its times")
        if self._sic is not None and any(
            (x < 0).any() or not np.isfinite(x).all() for x in self._sic
        ):
            raise ConfigError("sic must hold finite SIC values >= 0 (what each tuple carries)")

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

    def records(self, source: int, index: np.ndarray, epoch_s: float) -> dict[str, Any]:
        out = super().records(source, index, epoch_s)
        if self._sic is not None:
            out["sic"] = self._sic[source][np.asarray(index, dtype=np.int64)]
        return out

    @property
    def carries_sic(self) -> bool:
        return self._sic is not None

    def carried_sic(self, source: int, lo: int, hi: int) -> float:
        if self._sic is None:
            return super().carried_sic(source, lo, hi)
        return float(self._sic[source][lo:hi].sum())


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

    Spark's own Kafka source is on its classpath when its jars are fetched (``make setup``,
    :func:`~spillway.spark.session.configure_spark`), so any test may read ``format("kafka")``. Extra ``conf`` entries are passed to
    the builder (dots as in Spark: use a dict to pass them).
    """
    from pyspark.sql import SparkSession

    from spillway.spark.session import configure_spark

    builder = SparkSession.builder.master("local[2]").appName(app_name)
    builder = configure_spark(builder, test=True)
    for k, v in conf.items():
        builder = builder.config(k, v)
    return builder.getOrCreate()


@contextlib.contextmanager
def running_broker(data_dir: Path | None = None, **settings: Any) -> Iterator[BrokerState]:
    """A Kafka broker on 127.0.0.1 for the ``with`` block, stopped at its end.

    Parameters
    ----------
    data_dir : the broker's folder (default: a temporary folder, removed afterwards).
    **settings : other :class:`~spillway.kafka.broker.BrokerConfig` fields (``port=...``).

    The broker also stops if this process dies (Linux), so a crashed test session leaves none.
    """
    from spillway.kafka import broker

    own = data_dir is None
    folder = Path(tempfile.mkdtemp(prefix="spillway-kafka-")) if data_dir is None else data_dir
    try:
        state = broker.start(BrokerConfig(data_dir=folder, **settings), die_with_parent=True)
        try:
            yield state
        finally:
            broker.stop(folder)
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)


class KafkaTopics:
    """Unique topics for one test: :meth:`new` creates one, :meth:`close` deletes them all.

    Names are ``<prefix>-<pid>-<n>``, unique within the broker's life even across processes.
    """

    _counter = itertools.count()

    def __init__(self, conn: KafkaConnection, *, prefix: str = "test") -> None:
        self.conn = conn
        self.prefix = prefix
        self.created: list[str] = []

    def new(self, partitions: int = 1, *, name: str | None = None) -> str:
        """Create a topic with ``partitions`` partitions and return its name."""
        from spillway.kafka.admin import create_topic

        topic = name or f"{self.prefix}-{os.getpid()}-{next(self._counter)}"
        create_topic(self.conn, topic, partitions=partitions)
        self.created.append(topic)
        return topic

    def close(self) -> None:
        """Delete every topic :meth:`new` created."""
        from spillway.kafka.admin import delete_topics

        if self.created:
            delete_topics(self.conn, self.created)
        self.created = []


def settled_end(
    conn: KafkaConnection, topic: str, partition: int = 0, timeout_s: float = 20.0
) -> int:
    """The end of a partition once every transaction on it is closed and its marker written.

    The transaction coordinator writes a commit marker a moment after commit_transaction
    returns; until then a read_committed reader stops before that batch. This waits until the
    last stable offset meets the high watermark (or ``timeout_s`` passes) and returns it.
    """
    from spillway.kafka.admin import partition_offsets

    deadline = time.monotonic() + timeout_s
    while True:
        stable, high = (
            {p.partition: p.latest for p in partition_offsets(conn, topic, committed=c)}[partition]
            for c in (True, False)
        )
        if stable == high or time.monotonic() > deadline:
            return stable
        time.sleep(0.05)


try:  # the fixtures need pytest; the helpers above do not
    import pytest
except ImportError:  # pragma: no cover - pytest is a dev dependency
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def kafka_broker() -> Iterator[BrokerState]:
        """One Kafka broker for the whole test session (started on first use, about 2-5 s)."""
        with running_broker() as state:
            yield state

    @pytest.fixture
    def kafka_topics(kafka_broker: BrokerState) -> Iterator[KafkaTopics]:
        """Unique topics for this test (``kafka_topics.new(partitions=4)``), deleted after it;
        ``kafka_topics.conn`` is the session broker's connection."""
        topics = KafkaTopics(kafka_broker.connection())
        try:
            yield topics
        finally:
            topics.close()
