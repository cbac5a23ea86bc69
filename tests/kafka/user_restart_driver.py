"""A driver process for tests/kafka/test_user_restart.py (run as a script, not collected).

    python user_restart_driver.py BOOTSTRAP TOPIC SINK_TOPIC CKPT EPOCH N_BATCHES [crash]

Runs a node with one user query (the mean fare per route of TOPIC's JSON records, the user's
own PySpark) writing to SINK_TOPIC through a Kafka sink, on the logical clock from EPOCH with a
fixed capacity, until N_BATCHES batches are stored; with ``crash``, the process kills itself
(``os._exit``) right AFTER the sink committed batch 2 and before Spark recorded the batch as
done, as a driver that loses its machine at the worst moment would: Spark runs batch 2 again
on restart, and the sink must not write it twice.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import functions as F

from spillway.config import NodeConfig, QuerySpec
from spillway.errors import SpillwayError
from spillway.kafka.connection import KafkaConnection
from spillway.sinks import KafkaSink
from spillway.spark.node import Node
from spillway.spark.restart import run_until
from spillway.testing import local_spark


def mean_fare(rows):
    return rows.groupBy("window_start", "route").agg(
        F.avg("fare").alias("mean_fare"), F.count(F.lit(1)).alias("rides")
    )


def main() -> None:
    bootstrap, topic, sink_topic, ckpt, epoch, n = sys.argv[1:7]
    crash = sys.argv[7:] == ["crash"]
    conn = KafkaConnection(bootstrap_servers=bootstrap)
    kafka = KafkaSink(query="fares", topic=sink_topic, lineage="restart-test",
                      **conn.spark_options())  # fmt: skip

    def sink(rows, batch_id):
        kafka.write(batch_id, rows)
        if crash and batch_id == 2:
            os._exit(9)  # the results are in the topic; Spark has not committed the batch

    opts = {**conn.spark_options(), "subscribe": topic, "startingOffsets": "earliest",
            "format": "json", "schema": "route string, fare double", "lateness_s": 0}  # fmt: skip
    q = QuerySpec(name="fares", kind="user", feed="kafka", feed_options=opts, window_s=0.5,
                  function=mean_fare, sink=sink)  # fmt: skip
    cfg = NodeConfig(queries=(q,), trigger_s=0.5, stw_s=2.0, seed=3, policy="random",
                     checkpoint_dir=ckpt)  # fmt: skip
    node = Node(cfg, spark=local_spark("user-restart"), clock="logical", epoch_s=float(epoch),
                capacity_tuples_per_s=500)  # fmt: skip
    try:
        run_until(node, lambda: {b for _, b in node.store.batches()} >= set(range(int(n))),
                  timeout_s=120)  # fmt: skip
    except SpillwayError as e:
        print(e, file=sys.stderr)
        sys.exit(1)
    kafka.close()


if __name__ == "__main__":
    main()
