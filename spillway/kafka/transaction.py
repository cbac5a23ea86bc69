"""One batch of records in one Kafka transaction: all of it visible or none.

Used by the exactly-once writers (the federation's :class:`~spillway.federation.link.LinkWriter`
and the user queries' :class:`~spillway.sinks.KafkaSink`): the batch's records, all with one key,
go to one partition; consumer-group offsets given with them are committed in the same
transaction (Kafka's transactional offset commit); a failure aborts the transaction, so a
``read_committed`` reader sees nothing of the batch, and raises one clear error.

Needs a broker and a transactional producer (``init_transactions`` done)::

    write_batch(producer, "t", 0, "q:7", ['{"sic": 0.5}'], timeout_s=30, what="batch 7")
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from spillway.errors import KafkaClientError


def write_batch(
    producer: Any,
    topic: str,
    partition: int,
    key: str,
    values: Sequence[str],
    *,
    timeout_s: float,
    what: str,
    offsets: Sequence[Any] = (),
    group: Any = None,
    timestamps_ms: Sequence[int] | None = None,
) -> None:
    """Write ``values`` with ``key`` to ``topic[partition]`` in one transaction, committing
    ``offsets`` (``TopicPartition`` list) for the consumer group ``group`` (its metadata) with it.
    ``timestamps_ms`` gives each record its timestamp (Unix milliseconds; default: the time of
    writing).

    Raises
    ------
    KafkaClientError
        The transaction failed; it was aborted. ``what`` says what could not be committed.
    """
    from confluent_kafka import KafkaException

    try:
        producer.begin_transaction()
        for i, v in enumerate(values):
            stamp = {} if timestamps_ms is None else {"timestamp": int(timestamps_ms[i])}
            producer.produce(topic, value=v, key=key, partition=partition, **stamp)
            producer.poll(0)
        if offsets:
            producer.send_offsets_to_transaction(list(offsets), group, timeout_s)
        producer.commit_transaction(timeout_s)
    except (KafkaException, BufferError) as e:
        with contextlib.suppress(KafkaException):
            producer.abort_transaction(timeout_s)
        raise KafkaClientError(f"{what}: {e}") from None
