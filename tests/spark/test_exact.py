"""Exact answers over keep-all rows from a ListFeed, and shed-vs-exact error metrics."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from spillway.errors import ConfigError
from spillway.quality.metrics import topk_distance
from spillway.spark.exact import error_summary, exact_results, window_errors
from spillway.testing import ListFeed
from tests.spark.test_queries import feed_rows, frame

pytestmark = pytest.mark.spark


def _feed(rng, n_sources, n=24, lo=0.0, hi=100.0):
    times = [np.sort(rng.uniform(0.0, 3.0, n)).tolist() for _ in range(n_sources)]
    values = [rng.uniform(lo, hi, n).tolist() for _ in range(n_sources)]
    return times, values


def test_avg_error_of_a_half_shed_run_against_the_exact_answer(spark):
    rng = np.random.default_rng(5)
    feeds = [ListFeed(times=t, values=v) for t, v in (_feed(rng, 1), _feed(rng, 1))]
    full, half = feed_rows(feeds, 3.0, 1.0), feed_rows(feeds, 3.0, 1.0, keep=0.5)
    exact = exact_results("avg", frame(spark, full), 1.0)
    shed = exact_results("avg", frame(spark, half), 1.0)
    assert len(exact) == 6 and exact["sic"].to_numpy() == pytest.approx(np.ones(6))
    shed = shed[~((shed.query_id == 1) & (shed.window_start == shed.window_start.max()))]
    per = window_errors(shed, exact, "avg")
    summary = error_summary(shed, exact, "avg")
    # Independent check with numpy over the same rows.
    for q in (0, 1):
        errs = []
        for w in range(3):
            e = np.mean([r[3] for r in full if r[0] == q and int(r[5]) == w])
            kept = [r[3] for r in half if r[0] == q and int(r[5]) == w]
            errs.append(1.0 if (q, w) == (1, 2) else abs(np.mean(kept) - e) / abs(e))
        row = summary[summary.query_id == q].iloc[0]
        assert row["error"] == pytest.approx(np.mean(errs))
        assert row["metric"] == "mare" and row["windows"] == 3
        assert row["missing"] == (1 if q == 1 else 0)
    assert per["sic"].between(0.0, 0.75).all() and (per["sic"] == 0).sum() == 1


def test_top5_and_cov_errors(spark):
    t = pd.to_datetime([0, 1, 2], unit="s", utc=True)
    exact = pd.DataFrame(
        {
            "query_id": 0,
            "window_start": np.repeat(t[:2], 3),
            "rank": [1, 2, 3] * 2,
            "value": [4.0, 2.0, 7.0, 1.0, 2.0, 3.0],
            "sic": 1 / 3,
        }
    )
    exact = pd.concat(
        [
            exact,
            pd.DataFrame(
                {
                    "query_id": [0],
                    "window_start": [t[2]],
                    "rank": [0],
                    "value": [np.nan],
                    "sic": [1.0],
                }
            ),
        ]
    )
    shed = pd.DataFrame(
        {
            "query_id": 0,
            "window_start": [t[0]] * 3 + [t[2]],
            "rank": [1, 2, 3, 0],
            "value": [4.0, 7.0, 2.0, np.nan],
            "sic": [0.2, 0.2, 0.2, 0.5],
        }
    )
    per = window_errors(shed, exact, "top5")
    assert per["exact"].tolist() == [[4.0, 2.0, 7.0], [1.0, 2.0, 3.0], []]
    assert per["shed"].tolist() == [[4.0, 7.0, 2.0], [], []]
    d0 = topk_distance([4.0, 7.0, 2.0], [4.0, 2.0, 7.0])
    assert per["error"].tolist() == pytest.approx([d0, 1.0, 0.0])
    assert per["sic"].tolist() == pytest.approx([0.6, 0.0, 0.5])
    s = error_summary(shed, exact, "top5").iloc[0]
    assert s["error"] == pytest.approx((d0 + 1.0) / 3) and s["missing"] == 1

    # COV from real rows: 2 sources paired by arrival order; one exact window undefined.
    rng = np.random.default_rng(9)
    times = [np.sort(rng.uniform(0, 2, 40)).tolist() for _ in range(2)]
    x = rng.normal(50, 10, 40)
    feed = ListFeed(times=times, values=[x.tolist(), (x * 0.5 + rng.normal(0, 3, 40)).tolist()])
    full, half = feed_rows([feed], 2.0, 1.0), feed_rows([feed], 2.0, 1.0, keep=0.5)
    full.append((0, 0, 0, 1.0, 1.0, 5.5))  # window 5: one tuple, no covariance
    exact_cov = exact_results("cov", frame(spark, full), 1.0)
    shed_cov = exact_results("cov", frame(spark, half), 1.0)
    assert exact_cov["value"].isna().tolist() == [False, False, True]
    per = window_errors(shed_cov, exact_cov, "cov")
    assert len(per) == 2
    diff = shed_cov["value"].to_numpy() - exact_cov["value"].to_numpy()[:2]
    assert per["error"].to_numpy() == pytest.approx(diff)
    s = error_summary(shed_cov, exact_cov, "cov").iloc[0]
    assert s["metric"] == "cov_error" and s["error"] == pytest.approx(np.sqrt(np.mean(diff**2)))


def test_errors_need_result_columns():
    good = pd.DataFrame(
        {"query_id": [0], "window_start": [0], "rank": [1], "value": [1.0], "sic": [1.0]}
    )
    with pytest.raises(ConfigError, match="shed results need the columns .* missing sic"):
        window_errors(good.drop(columns="sic"), good, "avg")
    assert error_summary(good, good, "max")["error"].tolist() == [0.0]


def test_group_avg_error_counts_a_missing_group_as_100_percent(spark):
    from spillway.feeds import make_feed
    from spillway.quality.concept import group_stats, grouped_error

    feed = make_feed("taxi", n_sources=1, rate=200.0, seed=2, n_routes=10, pool_routes=20)
    full, half = feed_rows([feed], 3.0, 1.0), feed_rows([feed], 3.0, 1.0, keep=0.5)
    exact = exact_results("group_avg", frame(spark, full), 1.0)
    shed = exact_results("group_avg", frame(spark, half), 1.0)
    assert exact["key"].notna().all() and exact["rank"].eq(1).all()
    w0, w2 = exact["window_start"].min(), exact["window_start"].max()
    lost = int(shed.loc[shed.window_start == w0, "key"].iloc[0])
    shed = shed[~((shed.window_start == w0) & (shed.key == lost))]  # one group of window 0 lost
    shed = shed[shed.window_start != w2]  # and all of window 2
    per = window_errors(shed.sample(frac=1.0, random_state=1), exact, "group_avg")
    assert per.columns.tolist()[-2:] == ["groups", "missing_groups"] and len(per) == 3
    half_gone = [r for r in half if not ((int(r[5]) == 0 and r[2] == lost) or int(r[5]) == 2)]
    for w in range(3):
        keys = sorted({r[2] for r in full if int(r[5]) == w})
        errs = []
        for k in keys:
            e = np.mean([r[3] for r in full if int(r[5]) == w and r[2] == k])
            kept = [r[3] for r in half_gone if int(r[5]) == w and r[2] == k]
            errs.append(min(1.0, abs(np.mean(kept) - e) / abs(e)) if kept else 1.0)
        row = per.iloc[w]
        assert row["error"] == pytest.approx(np.mean(errs))
        assert row["groups"] == len(keys)
        got = {r[2] for r in half_gone if int(r[5]) == w}
        assert row["missing_groups"] == len(set(keys) - got)
    assert per["missing_groups"].iloc[0] >= 1 and per["error"].iloc[2] == 1.0
    assert per["sic"].iloc[2] == 0.0 and 0 < per["sic"].iloc[0] < 0.6
    # the concept module's grouped error on the same window, from the raw rows
    w0_rows = [r for r in full if int(r[5]) == 0]
    truth = group_stats(np.array([r[2] for r in w0_rows]), np.array([r[3] for r in w0_rows]))
    est = per["shed"].iloc[0]
    ref = grouped_error(truth, np.array(list(est)), np.array(list(est.values())))
    assert per["error"].iloc[0] == pytest.approx(ref.mean)
    s = error_summary(shed, exact, "group_avg").iloc[0]
    assert s["metric"] == "grouped_error" and s["windows"] == 3 and s["missing"] == 1
    assert s["error"] == pytest.approx(per["error"].mean())
    assert s["groups"] == per["groups"].sum() and s["missing_groups"] == per["missing_groups"].sum()
    with pytest.raises(ConfigError, match="shed results need the columns .*key; missing key"):
        window_errors(shed.drop(columns="key"), exact, "group_avg")
