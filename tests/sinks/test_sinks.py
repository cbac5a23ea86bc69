"""Sinks of user queries: every batch once, a replayed batch replacing or skipping its rows."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.sinks import ConsoleSink, FunctionSink, ParquetSink, make_sink, read_parquet_sink
from spillway.sinks.base import check_batch_id


def _rows(values, t0=100.0):
    return pd.DataFrame(
        {
            "route": [f"r{i}" for i in range(len(values))],
            "mean": values,
            "window_start": pd.to_datetime([t0] * len(values), unit="s", utc=True),
            "sic": [0.5] * len(values),
        }
    )


def test_a_parquet_sink_holds_each_batch_once_even_when_a_batch_is_written_again(tmp_path):
    sink = ParquetSink(query="q", path=tmp_path / "out")
    sink.write(0, _rows([1.0, 2.0]))
    sink.write(1, _rows([3.0]))
    sink.write(1, _rows([3.0]))  # Spark ran batch 1 again after a failure
    got = read_parquet_sink(tmp_path / "out")
    assert got["mean"].tolist() == [1.0, 2.0, 3.0]
    assert got["window_start"].dt.tz is not None and got["sic"].sum() == pytest.approx(1.5)
    # nothing half-written is left beside the batches
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "part-000000000000-0.parquet",
        "part-000000000001-0.parquet",
    ]


def test_a_parquet_sink_writes_no_file_for_an_empty_batch_and_refuses_a_file_path(tmp_path):
    sink = ParquetSink(query="q", path=tmp_path / "out")
    assert sink.write(0, _rows([]))
    assert not list((tmp_path / "out").iterdir())
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        ParquetSink(query="q", path=tmp_path / "f")
    with pytest.raises(ConfigError, match="needs a 'path'"):
        ParquetSink(query="q", path="")


@pytest.mark.spark
def test_the_parquet_folder_reads_back_in_spark_as_one_table(spark, tmp_path):
    sink = ParquetSink(query="q", path=tmp_path / "out")
    sink.write(0, _rows([1.0, 2.0]))
    sink.write(7, _rows([3.0], t0=101.0))
    df = spark.read.parquet(str(tmp_path / "out"))
    assert sorted(r["mean"] for r in df.collect()) == [1.0, 2.0, 3.0]
    assert dict(df.dtypes)["window_start"] == "timestamp"


def test_the_console_sink_prints_a_header_and_the_rows():
    out = io.StringIO()
    ConsoleSink(query="fares", rows=1, out=out).write(3, _rows([1.0, 2.0]))
    text = out.getvalue()
    assert text.startswith("-- query fares, batch 3: 2 rows") and "... 1 more" in text
    with pytest.raises(ConfigError, match="'rows' must be an int >= 0"):
        ConsoleSink(query="q", rows=-1)


def test_a_function_sink_is_called_per_batch_run_with_the_batch_id():
    seen = []
    sink = make_sink(lambda rows, b: seen.append((b, rows["mean"].tolist())), query="q")
    assert isinstance(sink, FunctionSink)
    sink.write(2, _rows([1.0]))
    assert seen == [(2, [1.0])]


@pytest.mark.parametrize(
    ("spec", "error", "match"),
    [
        (
            {"kind": "iceberg"},
            UnknownNameError,
            "unknown sink kind 'iceberg'; known: console, delta",
        ),
        ({"path": "x"}, UnknownNameError, "unknown sink kind None"),
        ({"kind": "parquet", "path": "x", "mode": "append"}, ConfigError, "sink 'parquet'"),
        ({"kind": "kafka"}, ConfigError, "kafka sink needs a 'topic'"),
        ({"kind": "kafka", "topic": "t", "acks": 1}, ConfigError, "unknown kafka sink setting"),
    ],
)
def test_a_bad_sink_setting_is_one_clear_error(spec, error, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=match):
        make_sink(spec, query="q")


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_batch_ids_are_ints_from_zero(bad):
    with pytest.raises(ConfigError, match="batch_id must be an int >= 0"):
        check_batch_id(bad)
