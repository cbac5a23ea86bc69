"""QueryCoordinator: Eq. 4 over the latest complete STW, latency p95, counters (no Spark)."""

from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest

from spillway.errors import ConfigError
from spillway.spark.coordinator import QueryCoordinator

EPOCH = 1_795_657_800.0


def results(q, window, sic, produced_at, latency=1.0, n_in=10):
    """Result rows; ``window`` and ``produced_at`` in feed seconds (shifted to Unix time)."""
    n = len(q)
    return pd.DataFrame(
        {
            "query_id": q,
            "window_start": [EPOCH + w for w in window],
            "sic": sic,
            "n_in": [n_in] * n,
            "latency_s": [latency] * n if np.isscalar(latency) else latency,
            "produced_at": [EPOCH + produced_at] * n,
        }
    )


def _coordinator(n=1, stw_s=10.0, windows_s=1.0):
    return QueryCoordinator(n_queries=n, stw_s=stw_s, windows_s=windows_s, epoch_s=EPOCH)


def _arrivals(coord, q, seconds, mass):
    for t in range(seconds):
        coord.record_decision([q], t, t + 1, arrived=mass, admitted=mass)


def test_query_sic_counts_results_with_their_source_window_not_their_production_time():
    # Four windows produced together at t = 7 (a slow first batch), then one a second: by
    # production time [4, 14) would hold 13 windows of a 10 s STW (1.3); by source time the
    # latest complete STW holds 10 of 10.
    coord = _coordinator()
    _arrivals(coord, 0, 30, 0.1)
    coord.record(results([0] * 4, [0.0, 1.0, 2.0, 3.0], [0.1] * 4, produced_at=7.0))
    for w in range(4, 30):
        coord.record(results([0], [float(w)], [0.1], produced_at=w + 1.4))
        coord.set_processed([0], w + 1.0)
        for now in (w + 1.5, w + 2.2):
            assert coord.query_sic(EPOCH + now)[0] == pytest.approx(1.0), now


def test_a_query_that_lost_half_its_input_reads_a_half():
    coord = _coordinator(n=2)
    _arrivals(coord, 0, 12, 0.1)
    _arrivals(coord, 1, 12, 0.1)
    for w in range(12):
        coord.record(results([0, 1], [float(w)] * 2, [0.1, 0.05], produced_at=w + 1.5))
    coord.set_processed([0, 1], 12.0)
    assert coord.query_sic(EPOCH + 20.0).tolist() == pytest.approx([1.0, 0.5])
    # a window whose result is missing altogether counts as lost
    coord2 = _coordinator()
    _arrivals(coord2, 0, 10, 0.1)
    coord2.record(results([0] * 9, [float(w) for w in range(9)], [0.1] * 9, produced_at=11.0))
    coord2.set_processed([0], 10.0)
    assert coord2.query_sic(EPOCH + 11.0)[0] == pytest.approx(0.9)


def test_windows_longer_than_a_second_and_rows_that_split_a_window():
    coord = _coordinator(n=2, stw_s=10.0, windows_s=[5.0, 1.0])
    _arrivals(coord, 0, 20, 0.1)
    _arrivals(coord, 1, 20, 0.1)
    for w in (0.0, 5.0, 10.0, 15.0):  # one 5 s window: its SIC split over 5 TOP-5-like rows
        coord.record(results([0] * 5, [w] * 5, [0.1] * 5, produced_at=w + 5.5))
    for w in range(20):
        coord.record(results([1], [float(w)], [0.1], produced_at=w + 1.5))
    coord.set_processed([0, 1], 20.0)
    assert coord.query_sic(EPOCH + 21.0).tolist() == pytest.approx([1.0, 1.0])
    coord.set_processed([1], 22.0)  # processed beyond the arrivals: no value would be wrong
    assert coord.counters().windows.tolist() == [4, 20]
    assert coord.counters().rows_out.tolist() == [20, 20]


def test_nothing_processed_reads_nan_and_now_caps_the_window():
    coord = _coordinator()
    assert np.isnan(coord.query_sic(EPOCH + 5.0)[0])
    _arrivals(coord, 0, 20, 0.1)
    for w in range(20):
        coord.record(results([0], [float(w)], [0.1 if w < 10 else 0.0], produced_at=w + 1.5))
    coord.set_processed([0], 20.0)
    assert coord.query_sic(EPOCH + 10.0)[0] == pytest.approx(1.0)  # [0, 10)
    assert coord.query_sic(EPOCH + 15.0)[0] == pytest.approx(0.5)  # [5, 15)
    assert coord.query_sic(EPOCH + 30.0)[0] == pytest.approx(0.0)  # [10, 20)


def test_latency_p95_covers_the_recent_stw_per_query():
    coord = _coordinator(n=2)
    lat = np.arange(1, 21, dtype=float)
    for i, v in enumerate(lat):
        coord.record(results([0], [float(i)], [0.05], produced_at=float(i), latency=v))
    assert coord.latency_p95(now=EPOCH + 20.0)[0] == pytest.approx(np.percentile(lat[10:], 95))
    assert np.isnan(coord.latency_p95(now=EPOCH + 20.0)[1])
    assert np.isnan(coord.latency_p95(now=EPOCH + 100.0)[0])  # all old


def test_concurrent_sinks_lose_nothing():
    coord = _coordinator(n=4, stw_s=100.0)

    def sink(q):
        for i in range(200):
            coord.record(results([q], [float(i)], [0.001], produced_at=50.0))

    threads = [threading.Thread(target=sink, args=(q,)) for q in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert coord.account.mass("results", 0.0, 1000.0) == pytest.approx([0.2] * 4)
    assert coord.counters().windows.tolist() == [200] * 4


def test_errors_name_the_problem():
    with pytest.raises(ConfigError, match="n_queries must be an int >= 0, got -1"):
        QueryCoordinator(n_queries=-1, stw_s=10.0)
    with pytest.raises(ConfigError, match="stw_s must be a finite number > 0"):
        QueryCoordinator(n_queries=1, stw_s=0.0)
    with pytest.raises(ConfigError, match="windows_s must be > 0"):
        QueryCoordinator(n_queries=2, stw_s=10.0, windows_s=[1.0, 0.0])
    with pytest.raises(ConfigError, match="epoch_s is not set"):
        QueryCoordinator(n_queries=1, stw_s=10.0).record(results([0], [0.0], [0.1], 1.0))
    coord = _coordinator()
    with pytest.raises(ConfigError, match="record needs the columns .* missing latency_s"):
        coord.record(results([0], [0.0], [1.0], 1.0).drop(columns="latency_s"))
    with pytest.raises(ConfigError, match=r"query_id must be in 0..0, got \[3\]"):
        coord.record(results([3], [0.0], [1.0], 1.0))
    with pytest.raises(ConfigError, match="produced_at must be finite"):
        coord.record(results([0], [0.0], [0.1], produced_at=float("nan")))
    with pytest.raises(ConfigError, match="sic must be finite and >= 0"):
        coord.record(results([0], [0.0], [-0.1], produced_at=1.0))
    with pytest.raises(ConfigError, match="now must be finite"):
        coord.query_sic(float("inf"))
    coord.record(results([], [], [], 1.0))  # an empty batch is fine
    assert coord.counters().windows.tolist() == [0]
