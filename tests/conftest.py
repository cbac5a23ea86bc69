"""One local SparkSession for every Spark test (``local[2]``, UI off, loopback)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    """The session-scoped SparkSession of :func:`spillway.testing.local_spark`."""
    from spillway.testing import local_spark

    session = local_spark("spillway-tests")
    yield session
    for q in session.streams.active:
        q.stop()
