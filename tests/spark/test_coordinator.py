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


def _one_window_per_second(coord, seconds, phase, sic, q=0):
    for j in range(seconds):
        coord.record(results([q], [float(j)], [sic], produced_at=j + phase))


@pytest.mark.parametrize("phase", [0.1, 0.4, 0.9])
def test_stw_between_slide_boundaries_is_a_whole_stw(phase):
    # One result per second, each 1/10 of a 10 s STW: every STW holds exactly 10 of them,
    # wherever "now" falls relative to the slides and the results (a ring of slide buckets
    # read 0.9 here whenever now fell before that second's result).
    coord = QueryCoordinator(n_queries=1, stw_s=10.0, slide_s=1.0, origin_s=-100.0)
    _one_window_per_second(coord, 15, phase, 0.1)
    for j in range(15, 40):
        coord.record(results([0], [float(j)], [0.1], produced_at=j + phase))
        for now in j + phase + np.arange(0.0625, 1.0, 0.125):
            assert coord.query_sic(now)[0] == pytest.approx(1.0), now


def test_a_late_boundary_question_still_sees_the_whole_stw():
    # A shedding decision for boundary 20 asked after the result of second 20 arrived.
    coord = QueryCoordinator(n_queries=1, stw_s=10.0, slide_s=1.0, origin_s=-100.0)
    _one_window_per_second(coord, 21, 0.4, 0.1)  # last result at 20.4
    assert coord.query_sic(20.0)[0] == pytest.approx(1.0)
    assert coord.query_sic(20.5)[0] == pytest.approx(1.0)


def test_query_sic_matches_a_brute_force_sum_on_unix_times():
    rng = np.random.default_rng(3)
    epoch = 1_795_657_804.0
    coord = QueryCoordinator(n_queries=3, stw_s=2.5, slide_s=0.25, origin_s=epoch)
    t = epoch + np.sort(rng.uniform(0, 30, 400))
    q = rng.integers(0, 3, 400)
    sic = rng.uniform(0, 0.02, 400)
    for i in range(0, 400, 7):
        part = slice(i, i + 7)
        coord.record(
            pd.DataFrame(
                {
                    "query_id": q[part],
                    "window_start": t[part],
                    "sic": sic[part],
                    "n_in": 1,
                    "latency_s": 0.5,
                    "produced_at": t[part],
                }
            )  # fmt: skip
        )
        seen = slice(0, i + 7)
        for now in t[min(i + 6, 399)] + rng.uniform(-2.5, 1.0, 3):
            inside = (t[seen] >= now - 2.5) & (t[seen] < now)
            want = np.bincount(q[seen][inside], weights=sic[seen][inside], minlength=3)
            if now - epoch < 2.5:
                want = want * 2.5 / (now - epoch) if now > epoch else want * 0
            assert coord.query_sic(now) == pytest.approx(want, abs=1e-12)


def test_young_queries_are_extrapolated_from_their_origin():
    coord = QueryCoordinator(n_queries=2, stw_s=10.0, slide_s=1.0, origin_s=[0.0, 5.0])
    for j in range(6):
        q = [0, 1] if j >= 5 else [0]
        coord.record(results(q, [float(j)] * len(q), [0.1] * len(q), produced_at=j + 0.5))
    # query 0: 0.6 over 6 s of 10; query 1 (started at 5): only the result at 5.5 in 1 s.
    assert coord.query_sic(6.0).tolist() == pytest.approx([1.0, 1.0])
    assert coord.query_sic(4.0).tolist() == pytest.approx([1.0, 0.0])  # before its origin
    assert coord.query_sic(16.0).tolist() == pytest.approx([0.0, 0.0])


def test_rows_older_than_two_stws_behind_the_newest_are_dropped():
    coord = QueryCoordinator(n_queries=1, stw_s=10.0, slide_s=1.0)
    _one_window_per_second(coord, 60, 0.5, 0.1)  # newest 59.5: rows before 39.5 dropped
    assert coord.query_sic(50.0)[0] == pytest.approx(1.0)  # one STW before the newest: whole
    assert coord.query_sic(45.0)[0] == pytest.approx(0.6)  # reaches behind what is kept


def test_bad_times_and_sic_are_rejected():
    coord = QueryCoordinator(n_queries=1, stw_s=10.0)
    with pytest.raises(ConfigError, match="produced_at must be finite"):
        coord.record(results([0], [0.0], [0.1], produced_at=float("nan")))
    with pytest.raises(ConfigError, match="sic must be finite and >= 0"):
        coord.record(results([0], [0.0], [-0.1], produced_at=1.0))
    with pytest.raises(ConfigError, match="now must be finite"):
        coord.query_sic(float("inf"))
    with pytest.raises(ConfigError, match=r"origin_s must be one time or one per query \(2\)"):
        QueryCoordinator(n_queries=2, stw_s=10.0, origin_s=[0.0, 1.0, 2.0])
    with pytest.raises(ConfigError, match="origin_s must be finite"):
        QueryCoordinator(n_queries=1, stw_s=10.0, origin_s=float("nan"))
