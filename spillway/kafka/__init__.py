"""Kafka for spillway: a local broker, the client helpers a Kafka source needs, a producer tool.

Modules, one concept each:

- :mod:`~spillway.kafka.jars`: the pinned Kafka and Spark-connector jars, fetched from Maven
  Central into a user cache (``make setup`` / ``spillway kafka fetch``);
- :mod:`~spillway.kafka.broker`: a single-node KRaft broker on 127.0.0.1, started and stopped
  from Python (``spillway kafka up|down|status``);
- :mod:`~spillway.kafka.connection`: :class:`KafkaConnection`, where a cluster is and the client
  settings to reach it, rendered for confluent-kafka and for Spark's Kafka source;
- :mod:`~spillway.kafka.admin`: create and delete topics, list partitions with their earliest
  and latest offsets;
- :mod:`~spillway.kafka.reader`: read an exact offset range ``[start, end)`` of one partition
  into Arrow columns (Spark's Kafka source schema);
- :mod:`~spillway.kafka.writer`: produce a batch of values fast;
- :mod:`~spillway.kafka.encode`: feed columns to JSON or CSV message values, vectorised;
- :mod:`~spillway.kafka.produce`: push a feed into a topic at its rate profile
  (``spillway produce``);
- :mod:`~spillway.kafka.spark`: point a SparkSession builder at Spark's own Kafka source.

The Python client is confluent-kafka (librdkafka); Java is needed only for the broker and Spark.
Importing this package loads neither: each module imports confluent-kafka when it needs it.
"""

from __future__ import annotations

from spillway.kafka.connection import KafkaConnection

__all__ = ["KafkaConnection"]
