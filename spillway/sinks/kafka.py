"""A Kafka topic as a user query's sink, each batch exactly once.

Each batch is one Kafka transaction written by a :class:`~spillway.federation.link.LinkWriter`
(the federation's exactly-once link): all of a batch's rows or none are visible to a
``read_committed`` reader; the writer's fixed transactional id fences a crashed predecessor;
every record's key is ``"<query>:<batch>"`` and, on start, the sink reads the last committed
record of its partition, so a batch Spark runs again after a restart is recognised and not
written twice. Each record's value is one result row as JSON (``window_start`` as ISO-8601
UTC text, ``sic`` beside the query's own columns). One query writes one partition: give two
queries two topics, or two partitions of one.

Settings: ``topic`` (required), ``partition`` (default 0), ``create`` (default true: create a
missing topic with one partition), and ``kafka.*`` client settings as for Spark's Kafka
source (``kafka.bootstrap.servers``; default the broker ``spillway kafka up`` runs).

Needs a broker (``spillway kafka up``)::

    sink = KafkaSink(query="fares", topic="fares-out")
    sink.write(4, rows)   # True: one transaction
    sink.write(4, rows)   # False: batch 4 is in the topic already (a replay)

>>> import pandas as pd
>>> iso_times(pd.DataFrame({"window_start": pd.to_datetime([1.5], unit="s", utc=True),
...                         "sic": [0.5]}))["window_start"].tolist()
['1970-01-01T00:00:01.500000Z']
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from spillway.errors import ConfigError
from spillway.sinks.base import check_batch_id

#: Columns every batch of a Kafka sink carries.
REQUIRED: tuple[str, ...] = ("window_start", "sic")


def iso_times(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with every time column as ISO-8601 UTC text (microseconds), as JSON carries
    them and Spark's ``from_json`` with a ``timestamp`` field reads them back."""
    out = rows.copy()
    for c in out.columns:
        if pd.api.types.is_datetime64_any_dtype(out[c]):
            out[c] = out[c].dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return out


class KafkaSink:
    """Writes each batch of one query to one partition of a topic in one transaction."""

    def __init__(
        self,
        *,
        query: str,
        topic: str | None = None,
        partition: int = 0,
        create: bool = True,
        **options: Any,
    ) -> None:
        if not isinstance(topic, str) or not topic:
            raise ConfigError(f"query {query!r}: kafka sink needs a 'topic'")
        unknown = sorted(k for k in options if not k.startswith("kafka."))
        if unknown:
            raise ConfigError(
                f"query {query!r}: unknown kafka sink setting(s) {', '.join(unknown)}; known: "
                "topic, partition, create and kafka.* client settings"
            )
        if not isinstance(create, bool):
            raise ConfigError(f"query {query!r}: kafka sink 'create' must be true or false")
        from spillway.federation.link import LinkWriter
        from spillway.kafka.admin import create_topic
        from spillway.kafka.broker import local_connection
        from spillway.kafka.connection import KafkaConnection

        if options.get("kafka.bootstrap.servers"):
            conn = KafkaConnection.from_spark_options(options)
        else:
            conn = local_connection("kafka sink setting 'kafka.bootstrap.servers'")
        if create:
            create_topic(conn, topic, partitions=max(1, partition + 1), exist_ok=True)
        self.query, self.topic, self.partition, self.conn = query, topic, partition, conn
        self._writer = LinkWriter(
            conn, topic, fragment=query, partition=partition, required=REQUIRED
        )

    @property
    def last_batch(self) -> int:
        """The last batch committed to the topic by this query (-1: none)."""
        return int(self._writer.last_batch)

    def write(self, batch_id: int, rows: pd.DataFrame) -> bool:
        return bool(self._writer.write(check_batch_id(batch_id), iso_times(rows)))

    def close(self) -> None:
        self._writer.close()
