"""The Delta sink: each batch once in the table, keyed by Delta's transaction id (query, lineage,
batch), across a restarted driver; a fresh checkpoint's lineage writes beside an earlier run."""

from __future__ import annotations

import pandas as pd
import pytest
from deltalake import DeltaTable

from spillway.errors import ConfigError
from spillway.sinks import DeltaSink, make_sink, read_delta_sink


def _rows(batch_id, values):
    return pd.DataFrame(
        {
            "route": [f"r{i}" for i in range(len(values))],
            "mean": values,
            "window_start": pd.to_datetime([100.0 + batch_id] * len(values), unit="s", utc=True),
            "sic": [0.25] * len(values),
            "query": "q",
            "batch_id": batch_id,
        }
    )


def test_a_replayed_batch_is_skipped_by_its_transaction_id_even_after_a_restart(tmp_path):
    path = tmp_path / "table"
    first = DeltaSink(query="q", path=path, lineage="a1")
    assert first.write(0, _rows(0, [1.0, 2.0])) and first.write(1, _rows(1, [3.0]))
    assert first.write(1, _rows(1, [3.0])) is False  # the same driver runs batch 1 again
    restarted = DeltaSink(query="q", path=path, lineage="a1")  # a new driver, same checkpoint
    assert restarted.committed() == 1
    assert restarted.write(1, _rows(1, [3.0])) is False  # Spark replays the last batch
    assert restarted.write(2, _rows(2, [4.0]))
    got = read_delta_sink(path)
    assert got["batch_id"].tolist() == [0, 0, 1, 2] and got["mean"].tolist() == [1, 2, 3, 4]
    assert got["sic"].sum() == pytest.approx(1.0)  # four rows of 0.25, none counted twice
    dt = DeltaTable(str(path))
    assert dt.version() == 2  # three commits: batches 0, 1 and 2
    assert dt.transaction_version("spillway:q:a1") == 2


def test_a_fresh_checkpoint_writes_beside_and_an_empty_batch_commits_nothing(tmp_path):
    path = tmp_path / "table"
    assert DeltaSink(query="q", path=path, lineage="a1").write(0, _rows(0, [1.0]))
    fresh = DeltaSink(query="q", path=path, lineage="b2")  # batch ids start at 0 again
    assert fresh.committed() is None and fresh.write(0, _rows(0, [5.0]))
    assert fresh.write(1, _rows(1, [])) and fresh.committed() == 0
    assert sorted(read_delta_sink(path)["mean"]) == [1.0, 5.0]
    assert DeltaTable(str(path)).transaction_version("spillway:q:b2") == 0


def test_make_sink_names_the_delta_sink_and_its_errors_name_the_setting(tmp_path):
    sink = make_sink({"kind": "delta", "path": str(tmp_path / "t")}, query="q", lineage="x")
    assert isinstance(sink, DeltaSink) and sink.app_id == "spillway:q:x"
    with pytest.raises(ConfigError, match="delta sink needs a 'path'"):
        DeltaSink(query="q", path="")
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        DeltaSink(query="q", path=tmp_path / "f")
    with pytest.raises(ConfigError, match="sink 'delta'"):
        make_sink({"kind": "delta", "path": "t", "mode": "overwrite"}, query="q")
    with pytest.raises(ConfigError, match="batch_id must be an int >= 0"):
        sink.write(-1, _rows(0, [1.0]))
    with pytest.raises(ConfigError, match="no Delta table at"):
        read_delta_sink(tmp_path / "t")


@pytest.mark.spark
def test_a_restarted_user_query_replaying_its_batch_leaves_each_result_once_with_its_sic(
    spark, tmp_path
):
    from pyspark.sql import functions as F

    from spillway.spark.sink import ResultSink, ResultStore
    from spillway.spark.user import UserPart

    ddl = "query_id int, source_id int, key long, value double, sic double, event_ts double"
    # window [100, 101): three rows of SIC 0.1; [101, 102): one row of SIC 0.3
    data = [(0, 0, 1, 10.0, 0.1, 100.1), (0, 0, 2, 60.0, 0.1, 100.2), (0, 0, 1, 70.0, 0.1, 100.3)]
    data.append((0, 0, 2, 20.0, 0.3, 101.5))
    batch = (
        spark.createDataFrame(data, ddl)
        .withColumn("event_ts", F.timestamp_seconds("event_ts"))
        .withColumn("arrival_ts", F.col("event_ts"))
    )

    def per_key(rows):
        return rows.groupBy("window_start", "key").agg(F.avg("value").alias("mean"))

    def driver():  # what a (re)started node builds for its user query, same checkpoint lineage
        part = UserPart(query_id=0, name="q", fn=per_key, window_us=1_000_000)
        sink = make_sink({"kind": "delta", "path": str(tmp_path / "out")}, query="q", lineage="L")
        return ResultSink({"user": [0]}, 1.0, ResultStore(), user=[part], user_sinks={"q": sink})

    first = driver()
    first(batch, 0)
    first(batch, 1)
    driver()(batch, 1)  # the restarted driver: Spark runs batch 1 again from its offset log
    got = read_delta_sink(tmp_path / "out")
    assert got["batch_id"].tolist() == [0, 0, 0, 1, 1, 1]
    # each batch's results carry its input's SIC once: 0.3 + 0.3, whatever the replays
    assert got.groupby("batch_id")["sic"].sum().tolist() == pytest.approx([0.6, 0.6])
    assert sorted(got.loc[got["batch_id"] == 1, "mean"]) == [20.0, 40.0, 60.0]
