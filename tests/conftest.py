"""Shared fixtures: one local SparkSession for every Spark test (``local[2]``, UI off, loopback,
Spark's Kafka source on its classpath), one Kafka broker for the whole session
(``kafka_broker``) and fresh topics per test (``kafka_topics``)."""

from __future__ import annotations

import pytest

from spillway.testing import kafka_broker, kafka_topics  # noqa: F401  (pytest fixtures)


@pytest.fixture(scope="session")
def spark():
    """The session-scoped SparkSession of :func:`spillway.testing.local_spark`."""
    from spillway.testing import local_spark

    session = local_spark("spillway-tests")
    yield session
    for q in session.streams.active:
        q.stop()
