"""run_level on a real (small) spillway Node: shed results, exact answers and their points."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from spillway.config import NodeConfig, QuerySpec
from spillway.errors import ConfigError
from spillway.experiments import sic_correlation as sc
from spillway.experiments._spark_runs import check_levels, check_positive, feed_seconds, run_level
from spillway.policies import make_policy


def test_validators_name_the_setting():
    with pytest.raises(ConfigError, match="tick_s must be a finite number > 0, got nan"):
        check_positive("tick_s", math.nan)
    with pytest.raises(ConfigError, match="levels must be strictly increasing"):
        check_levels("levels", "123")
    assert check_positive("warmup_s", 0, allow_zero=True) == 0.0


def test_feed_seconds_from_utc_timestamps():
    ts = pd.to_datetime([1_700_000_000.5], unit="s", utc=True)
    assert feed_seconds(ts, 1_700_000_000.0).tolist() == [0.5]


@pytest.mark.spark
def test_run_level_sheds_and_compares_with_the_exact_answers():
    from spillway.testing import local_spark

    spark = local_spark("spillway-tests")
    cases = [
        sc.Case(kind="avg", dataset="gaussian", sources=1, rate=400.0),
        sc.Case(kind="count", dataset="uniform", sources=1, rate=400.0),
    ]
    queries = tuple(
        QuerySpec(name=c.label, kind=c.kind, feed=c.dataset, sources=1, rate=c.rate) for c in cases
    )
    node = NodeConfig(queries=queries, policy="random", seed=1, stw_s=10.0)
    run = run_level(
        node,
        spark=spark,
        duration_s=5.0,
        policy=make_policy("random", seed=1),
        capacity_tuples_per_s=400.0,  # half the arrivals: SIC about 0.5 or less
        exact=True,
    )
    assert run.exact is not None and run.until_s > run.ready_s > 0
    assert set(run.results["kind"]) == {"avg", "count"}
    assert run.results.groupby(["query_id", "window_start", "rank"]).size().max() == 1
    assert not spark.streams.active  # the node's streaming queries were stopped
    ticks = run.ticks[run.ticks["t"] >= run.ready_s]
    assert len(ticks) >= 2 * 3 and ticks["kept_fraction"].max() < 0.8
    windows = sc.level_windows(
        run.results, run.exact, cases, level=1, stw_s=10.0, window_s=1.0, warmup_s=run.ready_s
    )
    by = {p["case"]: p for p in sc.aggregate(windows)}
    assert set(by) == {"avg/gaussian", "count/uniform"}
    count = by["count/uniform"]
    assert 0.0 < count["sic"] < 0.8
    # A COUNT over a random share of the tuples misses the rest: error about 1 - SIC.
    assert count["error"] == pytest.approx(1.0 - count["sic"], abs=0.15)
    assert by["avg/gaussian"]["error"] < count["error"]
