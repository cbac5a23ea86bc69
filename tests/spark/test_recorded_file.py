"""A recorded CSV of real events (ISO date-times, text keys) replayed through a node: windows in
the data's own time, one result per key and window, and nothing shed gives the same answers as a
pandas group-by over the file."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from spillway.config import NodeConfig, QuerySpec
from spillway.feeds import make_feed

ROUTES = ("JFK-LAX", "SFO-SEA", "ORD-MIA", "BOS-DCA")


def recorded_csv(path, days=3, per_day=900, seed=5):
    """About ``per_day`` events a day over ``days`` days from 2024-03-01, ISO date-times,
    text route keys, a fare value; one row in 200 malformed."""
    rng = np.random.default_rng(seed)
    n = days * per_day
    t = pd.Timestamp("2024-03-01T00:00:00Z") + pd.to_timedelta(
        np.sort(rng.uniform(0, days * 86400, n)), unit="s"
    )
    route = rng.choice(ROUTES, n)
    fare = np.round(rng.gamma(4.0, 12.0, n), 2).astype(object)
    fare[rng.choice(n, n // 200, replace=False)] = "n/a"
    df = pd.DataFrame({"pickup": t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "route": route, "fare": fare})
    df.to_csv(path, index=False)
    return df


@pytest.mark.spark
def test_a_recorded_day_in_two_seconds_gives_one_result_per_key_per_day(spark, tmp_path):
    from spillway.spark.node import Node

    path = tmp_path / "rides.csv"
    raw = recorded_csv(path)
    feed_options = {
        "path": str(path),
        "time_column": "pickup",
        "value_column": "fare",
        "key_column": "route",
        "speed": 43_200.0,  # a recorded day in 2 s
    }
    q = QuerySpec(
        name="fares",
        kind="group_avg",
        feed="replay",
        feed_options=feed_options,
        window_s=86_400.0,  # one recorded day
    )
    cfg = NodeConfig(queries=(q,), trigger_s=1.0, stw_s=4.0, checkpoint_dir=str(tmp_path / "c"))
    node = Node(cfg, spark=spark)
    node.run(9.0)
    res = node.results()
    assert node.feeds_end_s["fares"] == pytest.approx(6.0, abs=0.01)
    # the data's own time: days of March 2024, not the run's clock
    days = sorted(res["window_start"].unique())
    assert [str(d.date()) for d in days] == ["2024-03-01", "2024-03-02", "2024-03-03"]
    assert not res.duplicated(["window_start", "key"]).any()  # one row per key per day
    assert set(res["key_text"]) == set(ROUTES)
    # nothing shed: the same means as pandas over the valid rows of the file
    ok = pd.to_numeric(raw["fare"], errors="coerce").notna()
    good = raw[ok].assign(
        fare=lambda d: d["fare"].astype(float),
        day=lambda d: pd.to_datetime(d["pickup"], utc=True).dt.floor("D"),
    )
    want = good.groupby(["day", "route"])["fare"].mean()
    got = res.set_index(["window_start", "key_text"])["value"]
    got.index.names = ["day", "route"]
    pd.testing.assert_series_equal(
        got.sort_index(), want.sort_index(), check_names=False, rtol=1e-9
    )
    feed = make_feed("replay", n_sources=1, rate=1.0, **feed_options)
    assert feed.rejected() == int((~ok).sum()) and feed.rejected() > 0
    sic = [r.query_sic["fares"] for r in node.history() if np.isfinite(r.query_sic["fares"])]
    assert sic and max(sic) <= 1.02
