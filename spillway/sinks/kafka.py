"""A Kafka topic as a user query's sink, each batch exactly once.

Each batch is ONE Kafka transaction holding the batch's rows AND the sink's progress: the
transaction also commits, for the consumer group ``spillway-sink.<query>.<lineage>``, the
"offset" ``batch_id + 1`` of the sink's partition (Kafka's transactional offset commit, the way
Kafka Streams makes read-process-write atomic). So either a batch's rows and its progress are
both visible (to ``read_committed`` readers) or neither is. On start the sink reads that group's
committed offset back: a batch Spark runs again after a driver restart (same batch id, same
input: the decision is in the offset log) is recognised and not written twice. The sink's fixed
transactional id fences a crashed predecessor and aborts the transaction it left open.

The *lineage* names one checkpoint's history of batch ids: the node keeps it in the checkpoint
folder, so a restarted driver continues its own progress, while a run from a fresh checkpoint
(whose batch ids start at 0 again) writes to the same topic under a new lineage instead of being
taken for a replay. Each record's key is ``"<query>@<lineage>:<batch>"`` (what a consumer
deduplicates on, if it must) and its value one result row as JSON (``window_start`` as
ISO-8601 UTC text, ``sic`` beside the query's own columns).

Settings: ``topic`` (required), ``partition`` (default 0), ``create`` (default true: create a
missing topic with enough partitions), and ``kafka.*`` client settings as for Spark's Kafka
source (``kafka.bootstrap.servers``; default the broker ``spillway kafka up`` runs).

Needs a broker (``spillway kafka up``)::

    sink = KafkaSink(query="fares", topic="fares-mean", lineage="a1b2")
    sink.write(4, rows)   # True: one transaction
    sink.write(4, rows)   # False: batch 4 is in the topic already (a replay)

>>> import pandas as pd
>>> iso_times(pd.DataFrame({"window_start": pd.to_datetime([1.5], unit="s", utc=True),
...                         "sic": [0.5]}))["window_start"].tolist()
['1970-01-01T00:00:01.500000Z']
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pandas as pd

from spillway.errors import ConfigError, KafkaClientError
from spillway.kafka.transaction import write_batch
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


def _values(rows: pd.DataFrame) -> list[str]:
    missing = [c for c in REQUIRED if c not in rows.columns]
    if missing:
        raise ConfigError(
            f"a Kafka sink's rows need the columns {list(REQUIRED)}; missing {missing}"
        )
    sic = rows["sic"].to_numpy(dtype=np.float64)
    if sic.size and (not np.isfinite(sic).all() or sic.min() < 0):
        raise ConfigError("a Kafka sink's rows need a finite sic >= 0 (THEMIS Eq. 3)")
    text = iso_times(rows).to_json(orient="records", lines=True, double_precision=15)
    return [line for line in text.split("\n") if line]


class KafkaSink:
    """Writes each batch of one query to one partition of a topic in one transaction, with
    the sink's progress committed in the same transaction (see the module docstring)."""

    def __init__(
        self,
        *,
        query: str,
        topic: str | None = None,
        partition: int = 0,
        create: bool = True,
        lineage: str = "0",
        timeout_s: float = 30.0,
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
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0:
            raise ConfigError(f"query {query!r}: kafka sink 'partition' must be an int >= 0")
        from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

        from spillway.kafka.admin import create_topic
        from spillway.kafka.broker import local_connection
        from spillway.kafka.connection import KafkaConnection, check_reachable

        if options.get("kafka.bootstrap.servers"):
            conn = KafkaConnection.from_spark_options(options)
        else:
            conn = local_connection("kafka sink setting 'kafka.bootstrap.servers'")
        check_reachable(conn)
        if create:
            create_topic(conn, topic, partitions=partition + 1, exist_ok=True)
        self.query, self.topic, self.partition, self.conn = query, topic, partition, conn
        self.lineage, self.timeout_s = str(lineage), float(timeout_s)
        self.group = f"spillway-sink.{query}.{self.lineage}"
        self._tp = TopicPartition(topic, partition)
        self._producer = Producer(
            conn.client_config(
                transactional_id=f"spillway-sink:{topic}:{partition}:{query}:{self.lineage}",
                enable_idempotence=True,
                acks="all",
                linger_ms=5,
            )
        )
        self._consumer = Consumer(
            conn.client_config(
                group_id=self.group, enable_auto_commit=False, isolation_level="read_committed"
            )
        )
        try:  # fences a predecessor with the same id and aborts its open transaction
            self._producer.init_transactions(self.timeout_s)
            (done,) = self._consumer.committed([self._tp], timeout=self.timeout_s)
        except KafkaException as e:
            raise KafkaClientError(
                f"query {query!r}: the kafka sink to {topic!r} could not start on "
                f"{conn.bootstrap_servers}: {e}"
            ) from None
        #: The last batch this lineage committed to the topic (-1: none).
        self.last_batch = int(done.offset) - 1 if done.offset >= 0 else -1

    def write(self, batch_id: int, rows: pd.DataFrame) -> bool:
        """Write batch ``batch_id``'s rows and the sink's progress in one transaction; False if
        this lineage already committed that batch (a replay).

        Raises
        ------
        ConfigError
            A bad batch id, missing ``window_start`` or ``sic``, or a bad SIC.
        KafkaClientError
            The transaction failed (it is aborted: nothing of the batch is visible).
        """
        from confluent_kafka import TopicPartition

        b = check_batch_id(batch_id)
        values = _values(rows)
        if b <= self.last_batch:
            return False
        key = f"{self.query}@{self.lineage}:{b}"
        write_batch(
            self._producer, self.topic, self.partition, key, values,
            timeout_s=self.timeout_s,
            what=f"query {self.query!r}: the kafka sink could not commit batch {b} to "
            f"{self.topic!r}",
            offsets=[TopicPartition(self.topic, self.partition, b + 1)],
            group=self._consumer.consumer_group_metadata(),
        )  # fmt: skip
        self.last_batch = b
        return True

    def close(self) -> None:
        """Flush the producer and leave the group."""
        self._producer.flush(self.timeout_s)
        with contextlib.suppress(Exception):
            self._consumer.close()
