"""The Kafka benchmark: its settings, the log it fills, its check, and a shortened run."""

from __future__ import annotations

import math

import pytest

from spillway.bench.kafka_bench import (
    KafkaBenchConfig,
    kafka_checks,
    make_config,
    record_times_ms,
    report_markdown,
)
from spillway.bench.kafka_bench import run as run_kafka_bench
from spillway.errors import ConfigError


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rates": (1.0,)}, "rates must be two"),
        ({"rates": (1.0, -2.0)}, "rates must be a finite number > 0"),
        ({"segment_s": 0}, "segment_s must be a finite number > 0"),
        ({"partitions": 0}, "partitions must be an int >= 1"),
        ({"warmup_batches": -1}, "warmup_batches must be an int >= 0"),
    ],
)
def test_config_rejects_bad_settings(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        KafkaBenchConfig(**kwargs)


def test_the_log_reveals_each_rate_for_one_segment():
    cfg = KafkaBenchConfig(rates=(100.0, 300.0), segment_s=2.0, warmup_s=1.0)
    ts = record_times_ms(cfg, start_ms=0)
    assert len(ts) == cfg.rows == 900 and cfg.warmup_rows == 100
    assert (ts[1:] >= ts[:-1]).all()
    assert (ts < 3000).sum() == 300 and (ts >= 3000).sum() == 600 and ts[-1] < 5000
    assert make_config(quick=True).segment_s < make_config(quick=False).segment_s


def test_the_ratio_check_fails_below_the_goal_and_when_unmeasured():
    assert kafka_checks({"kafka_ratio": 0.5})[0].failed
    assert kafka_checks({"kafka_ratio": math.nan})[0].failed
    assert not kafka_checks({"kafka_ratio": 0.8})[0].failed


@pytest.mark.kafka
@pytest.mark.spark
def test_a_shortened_run_measures_both_sources_side_by_side(spark, kafka_topics, tmp_path):
    # a 2 s trigger: a loaded machine's fixed cost per batch stays below it, so both fits hold
    cfg = KafkaBenchConfig(rates=(10_000.0, 40_000.0), segment_s=6.0, lead_s=2.0, warmup_s=6.0,
                           warmup_batches=1, trigger_s=2.0)  # fmt: skip
    summary = run_kafka_bench(True, tmp_path, spark=spark, config=cfg, conn=kafka_topics.conn)
    measured = cfg.rows - cfg.warmup_rows
    assert 0 < summary["spillway"]["rows"] <= measured  # the batches after the warm-up's
    assert summary["spark"]["batches"] == 2 * cfg.batches_per_rate
    assert summary["spark"]["rows"] == cfg.batches_per_rate * sum(
        int(r * cfg.trigger_s) for r in cfg.rates
    )
    # the ratio of the two fitted rates (NaN where a fit could not separate the costs)
    a, b = summary["spillway"]["rows_per_s"], summary["spark"]["rows_per_s"]
    assert summary["kafka_ratio"] == pytest.approx(a / b, nan_ok=True)
    assert summary["kafka_baseline"]["rows_per_s"] == b or math.isnan(b)
    assert "kafka_ratio" in report_markdown(summary)
    assert (tmp_path / "kafka_batches.csv").exists()
