"""QueryCoordinator: Eq. 4 over the STW, latency p95, counters, thread safety (no Spark)."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest

from spillway.errors import ConfigError
from spillway.spark.coordinator import QueryCoordinator


def results(q, window, sic, produced_at, latency=1.0, n_in=10):
    n = len(q)
    return pd.DataFrame(
        {
            "query_id": q,
            "window_start": window,
            "sic": sic,
            "n_in": [n_in] * n,
            "latency_s": [latency] * n if np.isscalar(latency) else latency,
            "produced_at": [produced_at] * n,
        }
    )


def test_query_sic_sums_results_over_the_stw_and_expires_them():
    coord = QueryCoordinator(n_queries=2, stw_s=4.0, slide_s=1.0)
    coord.record(results([0, 1], [0.0, 0.0], [0.25, 0.5], produced_at=0.5))
    coord.record(results([0, 0], [1.0, 1.0], [0.125, 0.125], produced_at=1.5))  # 2 rows, 1 window
    assert coord.query_sic(now=4.0).tolist() == [0.5, 0.5]
    assert coord.query_sic(now=5.0).tolist() == [0.25, 0.0]  # the results at 0.5 expired
    assert coord.query_sic(now=6.0).tolist() == [0.0, 0.0]
    c = coord.counters()
    assert (c.windows.tolist(), c.rows_out.tolist(), c.rows_in.tolist()) == (
        [2, 1],
        [3, 1],
        [20, 10],
    )


def test_latency_p95_covers_the_recent_stw_per_query():
    coord = QueryCoordinator(n_queries=2, stw_s=10.0)
    lat = np.arange(1, 21, dtype=float)
    for i, v in enumerate(lat):
        coord.record(results([0], [float(i)], [0.05], produced_at=float(i), latency=v))
    assert coord.latency_p95(now=20.0)[0] == pytest.approx(np.percentile(lat[10:], 95))
    assert np.isnan(coord.latency_p95(now=20.0)[1])
    assert coord.latency_p95(now=100.0)[0] != coord.latency_p95(now=100.0)[0]  # NaN: all old


def test_concurrent_sinks_lose_nothing():
    coord = QueryCoordinator(n_queries=4, stw_s=100.0, slide_s=1.0)

    def sink(q):
        for i in range(200):
            coord.record(results([q], [float(i)], [0.001], produced_at=50.0))

    threads = [threading.Thread(target=sink, args=(q,)) for q in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert coord.query_sic(now=100.0) == pytest.approx([0.2] * 4)
    assert coord.counters().windows.tolist() == [200] * 4


def test_errors_name_the_problem():
    with pytest.raises(ConfigError, match="n_queries must be an int >= 0, got -1"):
        QueryCoordinator(n_queries=-1, stw_s=10.0)
    with pytest.raises(ConfigError, match="stw_s must be a finite number > 0"):
        QueryCoordinator(n_queries=1, stw_s=0.0, slide_s=1.0)
    coord = QueryCoordinator(n_queries=1, stw_s=10.0)
    with pytest.raises(ConfigError, match="record needs the columns .* missing latency_s"):
        coord.record(results([0], [0.0], [1.0], 1.0).drop(columns="latency_s"))
    with pytest.raises(ConfigError, match=r"query_id must be in 0..0, got \[3\]"):
        coord.record(results([3], [0.0], [1.0], 1.0))
    coord.record(results([], [], [], 1.0))  # an empty batch is fine
    assert coord.counters().windows.tolist() == [0]
