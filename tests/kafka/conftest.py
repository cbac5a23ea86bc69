"""The Kafka tests share one broker for the whole session (``spillway.testing.kafka_broker``)
and get their own topics per test (``kafka_topics``); Spark tests share the local session."""

from __future__ import annotations

import pytest

from spillway.testing import kafka_broker, kafka_topics  # noqa: F401  (pytest fixtures)


@pytest.fixture(scope="session")
def spark():
    """The session-scoped SparkSession of :func:`spillway.testing.local_spark`."""
    from spillway.testing import local_spark

    return local_spark("spillway-tests")
