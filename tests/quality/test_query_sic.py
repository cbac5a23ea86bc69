"""Tests of the query SIC ledger (THEMIS Eq. 4) and its agreement with the STW counter."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spillway.errors import ConfigError
from spillway.quality.query_sic import QuerySicLedger
from spillway.quality.sic import StwConfig, StwCounter

CFG = StwConfig(stw_s=2.0, slide_s=0.25)


def _brute_force(
    times: np.ndarray, queries: np.ndarray, sic: np.ndarray, now: float, stw: float, n_q: int
) -> np.ndarray:
    inside = (times >= now - stw) & (times < now)
    return np.bincount(queries[inside], weights=sic[inside], minlength=n_q)


# --- Window expiry ----------------------------------------------------------------------------


def test_result_leaves_the_window_exactly_one_stw_later() -> None:
    ledger = QuerySicLedger(CFG, n_queries=1)
    ledger.add([1.1], [0], [0.4])
    assert ledger.window_sum(1.0).tolist() == [0.0]  # not yet produced
    assert ledger.window_sum(1.25).tolist() == [0.4]
    assert ledger.window_sum(3.0).tolist() == [0.4]  # window [1.0, 3.0)
    assert ledger.window_sum(3.25).tolist() == [0.0]  # window [1.25, 3.25)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_q=st.integers(1, 50))
def test_window_sum_matches_brute_force_on_slide_boundaries(seed: int, n_q: int) -> None:
    rng = np.random.default_rng(seed)
    ledger = QuerySicLedger(CFG, n_queries=n_q)
    times_all, q_all, s_all = [], [], []
    for k in range(1, 41):  # 10 s of results, added one slide at a time
        now = k * CFG.slide_s
        n = int(rng.integers(0, 20))
        t = now - CFG.slide_s + rng.random(n) * CFG.slide_s
        q = rng.integers(0, n_q, n)
        s = rng.random(n) / 10
        ledger.add(t, q, s)
        times_all.append(t)
        q_all.append(q)
        s_all.append(s)
        expected = _brute_force(
            np.concatenate(times_all),
            np.concatenate(q_all),
            np.concatenate(s_all),
            now,
            CFG.stw_s,
            n_q,
        )
        assert ledger.window_sum(now) == pytest.approx(expected, abs=1e-12)
    assert ledger.expired == 0


def test_thousand_queries_in_one_call() -> None:
    rng = np.random.default_rng(11)
    n_q = 1000
    ledger = QuerySicLedger(CFG, n_queries=n_q)
    t = rng.random(50_000) * 4.0
    q = rng.integers(0, n_q, t.shape[0])
    s = rng.random(t.shape[0]) / 100
    ledger.add(t, q, s)
    value = ledger.value(4.0)
    assert value.shape == (n_q,)
    assert value == pytest.approx(_brute_force(t, q, s, 4.0, CFG.stw_s, n_q), abs=1e-12)
    # Everything before 2.0 had already left the window of the newest result when it was
    # added in the same call, so it was dropped and counted.
    assert ledger.expired == int((t < 2.0 - 1e-9).sum())


def test_late_results_within_the_window_still_count() -> None:
    ledger = QuerySicLedger(CFG, n_queries=2)
    ledger.add([3.9], [0], [0.1])
    ledger.add([2.1, 0.5], [1, 1], [0.2, 0.3])  # late; the second is older than the window
    assert ledger.window_sum(4.0).tolist() == [0.1, 0.2]
    assert ledger.expired == 1


def test_slots_are_reused_as_time_moves_on() -> None:
    ledger = QuerySicLedger(CFG, n_queries=1)
    ledger.add([0.1], [0], [0.5])
    ledger.add([100.1], [0], [0.25])  # same slot, 50 windows later
    assert ledger.window_sum(100.25).tolist() == [0.25]
    assert ledger.window_sum(0.25).tolist() == [0.0]  # the old bucket was overwritten
    assert ledger.window_sum(500.0).tolist() == [0.0]


def test_no_clipping_to_one() -> None:
    ledger = QuerySicLedger(CFG, n_queries=1)
    ledger.add([0.5, 1.5], [0, 0], [0.6, 0.45])
    assert ledger.value(2.0).tolist() == [pytest.approx(1.05)]


def test_empty_add_is_a_no_op() -> None:
    ledger = QuerySicLedger(CFG, n_queries=3)
    ledger.add([], np.array([], dtype=np.int64), [])
    assert ledger.window_sum(1.0).tolist() == [0.0, 0.0, 0.0]


# --- Partial window extrapolation -------------------------------------------------------------


def test_value_extrapolates_young_queries_only() -> None:
    ledger = QuerySicLedger(CFG, n_queries=3, origin_s=[0.0, 1.0, 5.0])
    ledger.add([0.1, 1.1, 1.2], [0, 1, 1], [0.1, 0.1, 0.1])
    raw = ledger.window_sum(1.5)
    assert raw.tolist() == pytest.approx([0.1, 0.2, 0.0])
    v = ledger.value(1.5)
    assert v.tolist() == pytest.approx([0.1 * 2.0 / 1.5, 0.2 * 2.0 / 0.5, 0.0])
    assert ledger.value(2.0)[0] == pytest.approx(0.1)  # one full STW: no scaling


def test_added_queries_have_their_own_origin() -> None:
    ledger = QuerySicLedger(CFG, n_queries=1)
    (q,) = ledger.add_queries(1, origin_s=10.0).tolist()
    ledger.add([10.1, 10.1], [0, q], [0.25, 0.25])
    assert ledger.origin_s.tolist() == [0.0, 10.0]
    assert ledger.value(10.25).tolist() == pytest.approx([0.25, 0.25 * 2.0 / 0.25])


def _simulate(
    rates_per_slide: np.ndarray,
    cfg: StwConfig,
    *,
    keep: float = 1.0,
    lag_slides: int = 0,
    n_sources: int = 1,
    seed: int | None = None,
) -> list[float]:
    """One query, one lane per source: stamp arrivals, keep a fraction, report results.

    Results of slide k carry the SIC of its kept tuples and appear ``lag_slides`` later.
    Returns the ledger's value at the end of every slide.
    """
    rng = np.random.default_rng(seed)
    counter = StwCounter(cfg, n_lanes=n_sources)
    ledger = QuerySicLedger(cfg, n_queries=1)
    values = []
    for k, rate in enumerate(rates_per_slide):
        arrivals = rng.poisson(rate, n_sources) if seed is not None else np.full(n_sources, rate)
        counter.push(arrivals)
        sic = counter.tuple_sic(n_sources)
        kept = np.floor(arrivals * keep)
        result_time = (k + lag_slides) * cfg.slide_s + cfg.slide_s / 2
        ledger.add([result_time], [0], [float((kept * sic).sum())])
        values.append(float(ledger.value((k + 1) * cfg.slide_s)[0]))
    return values


def test_unshed_query_reads_one_from_the_first_slide() -> None:
    cfg = StwConfig(stw_s=10.0, slide_s=0.25)
    values = _simulate(np.full(120, 100), cfg, n_sources=3)
    assert values == pytest.approx([1.0] * 120, abs=1e-9)


def test_unshed_query_reads_about_one_with_poisson_arrivals() -> None:
    cfg = StwConfig(stw_s=10.0, slide_s=0.25)
    values = np.array(_simulate(np.full(120, 100), cfg, n_sources=2, seed=5))
    assert np.abs(values[4:] - 1.0).max() < 0.05  # after the first second


def test_shedding_half_reads_one_half() -> None:
    cfg = StwConfig(stw_s=10.0, slide_s=0.25)
    values = _simulate(np.full(80, 100), cfg, keep=0.5)
    assert values == pytest.approx([0.5] * 80, abs=1e-9)


def test_result_latency_lowers_the_early_reading_as_documented() -> None:
    cfg = StwConfig(stw_s=10.0, slide_s=0.25)
    lag = 2  # results appear 0.5 s after their tuples
    values = _simulate(np.full(120, 100), cfg, lag_slides=lag)
    for k in (8, 20, 39):  # elapsed 2.25 s, 5.25 s, 10 s
        elapsed = (k + 1) * cfg.slide_s
        assert values[k] == pytest.approx(1 - lag * cfg.slide_s / elapsed, abs=1e-9)
    assert values[-1] == pytest.approx(1 - lag * cfg.slide_s / cfg.stw_s, abs=1e-9)


def test_rate_step_overshoots_then_settles() -> None:
    cfg = StwConfig(stw_s=5.0, slide_s=0.25)
    n = cfg.n_slots
    rates = np.concatenate([np.full(2 * n, 40), np.full(2 * n, 80)])
    values = _simulate(rates, cfg)
    # One STW after the step: sum_j 2r / (r (n - j) + 2 r j) = sum_j 2 / (n + j).
    assert values[3 * n - 1] == pytest.approx(sum(2 / (n + j) for j in range(1, n + 1)))
    assert max(values) > 1.3
    assert values[-1] == pytest.approx(1.0)


# --- Errors, snapshot -------------------------------------------------------------------------


def test_construction_errors() -> None:
    with pytest.raises(ConfigError, match="config must be a StwConfig"):
        QuerySicLedger(None, n_queries=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="n_queries must be an int >= 0"):
        QuerySicLedger(CFG, n_queries=-3)
    with pytest.raises(ConfigError, match="n_queries must be an int >= 0"):
        QuerySicLedger(CFG, n_queries=2.0)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="origin_s must be finite"):
        QuerySicLedger(CFG, n_queries=1, origin_s=float("nan"))
    with pytest.raises(ConfigError, match=r"one entry per query \(2\), got shape \(3,\)"):
        QuerySicLedger(CFG, n_queries=2, origin_s=[0.0, 1.0, 2.0])


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([0.1, 0.2], [0], [0.1, 0.1]), "must be 1-D arrays of one length"),
        (([0.1], [3], [0.1]), r"query_index must be ints in 0\.\.1"),
        (([0.1], [-1], [0.1]), r"query_index must be ints in 0\.\.1"),
        (([0.1], [0.0], [0.1]), r"query_index must be ints in 0\.\.1"),
        (([0.1], [0], [-0.1]), "sic must be finite and >= 0"),
        (([0.1], [0], [float("nan")]), "sic must be finite and >= 0"),
        (([float("inf")], [0], [0.1]), "result_time must be finite"),
    ],
)
def test_add_errors(args: tuple, match: str) -> None:
    ledger = QuerySicLedger(CFG, n_queries=2)
    with pytest.raises(ConfigError, match=match):
        ledger.add(*args)
    assert ledger.window_sum(1.0).tolist() == [0.0, 0.0]


def test_value_and_add_queries_errors() -> None:
    ledger = QuerySicLedger(CFG, n_queries=1)
    with pytest.raises(ConfigError, match="now must be finite"):
        ledger.value(float("nan"))
    with pytest.raises(ConfigError, match="add_queries needs an int n >= 0"):
        ledger.add_queries(-1, origin_s=0.0)
    with pytest.raises(ConfigError, match=r"one entry per query \(2\), got shape \(1,\)"):
        ledger.add_queries(2, origin_s=[1.0])
    assert ledger.n_queries == 1


def test_snapshot_restore_round_trip() -> None:
    ledger = QuerySicLedger(CFG, n_queries=2, origin_s=[0.0, 0.5])
    ledger.add([0.3, 0.9, 0.1], [0, 1, 0], [0.1, 0.2, 0.3])
    ledger.add([5.0], [0], [0.5])  # pushes the first results out: expired stays recorded
    other = QuerySicLedger(CFG, n_queries=0)
    other.restore(pickle.loads(pickle.dumps(ledger.snapshot())))
    for now in (1.0, 5.25, 6.0):
        assert other.value(now).tolist() == ledger.value(now).tolist()
    assert other.expired == ledger.expired and other.n_queries == 2
    other.add([5.1], [1], [0.25])
    assert ledger.window_sum(5.25).tolist() == [0.5, 0.0]  # restored state is independent
    assert "n_queries=2" in repr(other)


def test_restore_rejects_another_window() -> None:
    ledger = QuerySicLedger(CFG, n_queries=1)
    other = QuerySicLedger(StwConfig(stw_s=4.0, slide_s=0.25), n_queries=1)
    with pytest.raises(ConfigError, match="restore into a ledger built with the same StwConfig"):
        other.restore(ledger.snapshot())
