"""Plug spillway into a user's SparkSession builder (never create a session behind their back).

:func:`configure_spark` adds the settings a spillway node relies on to a
``SparkSession.builder`` and returns it; the caller still calls ``getOrCreate()``:

- ``spark.driver.host`` / ``spark.driver.bindAddress`` = ``127.0.0.1``: the driver, its block
  manager and the Python workers talk over loopback only (the control channel is loopback too);
- ``spark.ui.enabled`` = false: no web UI port is opened;
- ``spark.sql.shuffle.partitions`` = 2: micro-batches are small, 200 shuffle tasks would cost
  more than the work (local[2] has two cores);
- ``spark.sql.execution.arrow.pyspark.enabled`` = true: pandas conversions go through Arrow;
- ``spark.log.level`` = WARN: quiet logs (the progress of every micro-batch goes to the
  listener, not to the console);
- ``spark.pyspark.python`` = this interpreter (:data:`sys.executable`) unless
  ``PYSPARK_PYTHON`` is set: Python workers (the source's planner and readers) must import
  spillway, numpy and pyarrow from the same environment as the driver. PySpark takes the
  workers' interpreter of Python data sources from the ``PYSPARK_PYTHON`` environment variable
  when the SparkContext starts (the conf alone is not enough), so :func:`configure_spark` also
  sets that variable in this process when it is unset: the one side effect of this function.

- ``spark.jars`` += Spark's own Kafka source (``spark-sql-kafka-0-10``), when ``make setup`` has
  fetched it (:mod:`spillway.kafka.spark`): ``format("kafka")`` works in the same session.

``test=True`` also shrinks memory (driver 1 GiB, Arrow batches of 10,000 rows) and turns off
Spark's periodic no-data progress events, which tests do not need.

Examples
--------
>>> class Builder:  # a stand-in for ``SparkSession.builder``
...     def __init__(self):
...         self.conf = {}
...     def config(self, key, value):
...         self.conf[key] = value
...         return self
>>> b = configure_spark(Builder())
>>> b.conf["spark.driver.bindAddress"], b.conf["spark.ui.enabled"]
('127.0.0.1', 'false')
>>> configure_spark(Builder(), test=True).conf["spark.driver.memory"]
'1g'
"""

from __future__ import annotations

import os
import sys
from typing import Any

#: Settings every spillway session gets.
SPARK_CONF: dict[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.log.level": "WARN",
}

#: Extra settings for tests: less memory, smaller Arrow batches.
TEST_CONF: dict[str, str] = {
    "spark.driver.memory": "1g",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
    "spark.sql.streaming.noDataProgressEventInterval": "3600s",
    "spark.default.parallelism": "2",
}


def configure_spark(builder: Any, *, test: bool = False) -> Any:
    """Add spillway's settings to a ``SparkSession.builder`` and return the builder.

    Parameters
    ----------
    builder : a ``pyspark.sql.SparkSession.Builder`` (anything with ``config(key, value)``).
    test : also apply :data:`TEST_CONF` (small memory, for tests and doctests).

    Returns
    -------
    The same builder, for chaining: ``configure_spark(SparkSession.builder).getOrCreate()``.
    """
    from spillway.kafka.spark import configure_spark_kafka, spark_kafka_jars

    conf = dict(SPARK_CONF)
    kafka_jars = spark_kafka_jars(required=False)
    if kafka_jars:  # Spark's own Kafka source, when fetched: plain-Spark baselines, user code
        builder = configure_spark_kafka(builder, jars=kafka_jars)
    if not os.environ.get("PYSPARK_PYTHON"):
        os.environ["PYSPARK_PYTHON"] = sys.executable
    conf["spark.pyspark.python"] = os.environ["PYSPARK_PYTHON"]
    if test:
        conf.update(TEST_CONF)
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder
