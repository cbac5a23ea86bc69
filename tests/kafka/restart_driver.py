"""A driver process for tests/kafka/test_driver_kill.py (run as a script, not collected).

    python restart_driver.py BOOTSTRAP TOPIC DLQ CKPT DEAD EPOCH N_BATCHES [crash]

Runs a node shedding TOPIC (logical clock from EPOCH, fixed capacity, random policy) with its
checkpoint, results and dead letters in CKPT / DEAD / DLQ until N_BATCHES batches are stored;
with ``crash``, the process kills itself (``os._exit``) inside micro-batch 2, before its
results are stored, as a driver that loses its machine would.
"""

from __future__ import annotations

import os
import sys
import time

from spillway.config import NodeConfig, QuerySpec
from spillway.kafka.connection import KafkaConnection
from spillway.spark.node import Node
from spillway.testing import local_spark


def main() -> None:
    bootstrap, topic, dlq, ckpt, dead, epoch, n = sys.argv[1:8]
    crash = sys.argv[8:] == ["crash"]
    conn = KafkaConnection(bootstrap_servers=bootstrap)
    opts = {**conn.spark_options(), "subscribe": topic, "startingOffsets": "earliest",
            "format": "json", "schema": "route string, fare double", "key_column": "route",
            "value_column": "fare", "dead_letter": dead, "dead_letter_topic": dlq,
            "lateness_s": 0}  # fmt: skip
    q = QuerySpec(name="fares", kind="group_avg", feed="kafka", feed_options=opts, window_s=0.5)
    cfg = NodeConfig(queries=(q,), trigger_s=0.5, stw_s=2.0, seed=3, policy="random",
                     checkpoint_dir=ckpt)  # fmt: skip

    def on_batch(plan: str, batch_id: int) -> None:
        if crash and batch_id == 2:
            os._exit(9)  # the driver dies inside the batch: no cleanup, nothing flushed

    node = Node(cfg, spark=local_spark("driver-kill"), clock="logical", epoch_s=float(epoch),
                capacity_tuples_per_s=500, on_batch=on_batch)  # fmt: skip
    node.start()
    deadline = time.monotonic() + 120
    while {b for _, b in node.store.batches()} < set(range(int(n))):
        if node.query_error("group_avg") is not None or time.monotonic() > deadline:
            print(node.query_error("group_avg"), file=sys.stderr)
            node.stop()
            sys.exit(1)
        time.sleep(0.1)
    node.stop()


if __name__ == "__main__":
    main()
