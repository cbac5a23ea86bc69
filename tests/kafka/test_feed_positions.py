"""A Kafka feed's processed positions and lag per partition, from its lanes (no broker)."""

from __future__ import annotations

import numpy as np
import pytest

import spillway.kafka.admin as admin
from spillway.kafka.admin import PartitionOffsets
from spillway.kafka.feed import KafkaFeed


def test_positions_never_fall_below_the_start_and_lag_is_the_log_end_minus_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    feed = object.__new__(KafkaFeed)  # its lanes only: (topic, partition, start offset)
    feed.lanes = (("t", 0, 5), ("t", 1, 0))
    feed.topics = ("t",)
    feed.conn = None
    assert feed.positions(np.array([3, 40])) == {"t/0": 5, "t/1": 40}
    ends = [PartitionOffsets(topic="t", partition=0, earliest=0, latest=9),
            PartitionOffsets(topic="t", partition=1, earliest=0, latest=40)]  # fmt: skip
    monkeypatch.setattr(admin, "partition_offsets", lambda conn, topic: ends)
    assert feed.lag(np.array([3, 40])) == {"t/0": 4, "t/1": 0}
