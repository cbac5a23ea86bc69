"""Spark's own Kafka source on a user's SparkSession builder (the plain-Spark baseline).

:func:`configure_spark_kafka` adds the jars of :data:`spillway.kafka.jars.SPARK_KAFKA` to the
builder's ``spark.jars`` (keeping any jars already there) and returns the builder, as Delta's
``configure_spark_with_delta_pip`` does: the caller still calls ``getOrCreate()``. The jars come
from the local cache (``make setup`` / ``spillway kafka fetch``), so nothing is downloaded while
Spark starts (unlike ``spark.jars.packages``).

The connector is ``spark-sql-kafka-0-10_2.13`` 4.2.0 with kafka-clients 3.9.2: 4.3.0 is not on
Maven Central, and 4.2.0 reads and streams from our broker under PySpark 4.3.0
(``tests/kafka/test_spark.py``). ``spark.jars`` is read when the JVM starts: configure the
builder before the first session of the process.

Examples
--------
>>> class Builder:  # a stand-in for ``SparkSession.builder``
...     def __init__(self):
...         self._options = {"spark.jars": "/opt/mine.jar"}
...     def config(self, key, value):
...         self._options[key] = value
...         return self
>>> b = configure_spark_kafka(Builder(), jars=[Path("/c/a.jar"), Path("/c/b.jar")])
>>> b._options["spark.jars"]
'/opt/mine.jar,/c/a.jar,/c/b.jar'
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spillway.kafka import jars as jarlib


def spark_kafka_jars(*, required: bool = True) -> list[Path]:
    """The cached jars of Spark's Kafka source; ``[]`` when not fetched and not ``required``.

    Raises
    ------
    BrokerError
        ``required`` and the jars are not fetched.
    """
    if not required and not jarlib.is_fetched(jarlib.SPARK_KAFKA):
        return []
    return jarlib.jars(jarlib.SPARK_KAFKA)


def configure_spark_kafka(builder: Any, *, jars: Sequence[Path] | None = None) -> Any:
    """Add Spark's Kafka source to ``builder``'s ``spark.jars``; return the builder.

    Parameters
    ----------
    builder : a ``SparkSession.Builder`` (anything with ``config(key, value)``).
    jars : the jars to add (default :func:`spark_kafka_jars`).

    Raises
    ------
    BrokerError
        The connector's jars are not fetched.
    """
    paths = [str(p) for p in (jars if jars is not None else spark_kafka_jars())]
    current = getattr(builder, "_options", {}).get("spark.jars", "")
    merged = [j for j in str(current).split(",") if j] + [p for p in paths if p not in current]
    return builder.config("spark.jars", ",".join(merged))
