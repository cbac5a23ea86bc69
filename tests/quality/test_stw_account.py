"""SourceTimeAccount: SIC mass by source time and the query SIC it measures."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spillway.errors import ConfigError
from spillway.quality import StwConfig, StwCounter
from spillway.quality.stw_account import SourceTimeAccount


def _brute(records, q_n, lo, hi):
    out = np.zeros(q_n)
    for q, t0, t1, m in records:
        if t1 > t0:
            out[q] += m * max(0.0, min(t1, hi) - max(t0, lo)) / (t1 - t0)
        elif lo <= t0 < hi:
            out[q] += m
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.floats(0, 20, allow_nan=False),
            st.floats(0, 5, allow_nan=False),
            st.floats(0, 1, allow_nan=False),
        ),
        max_size=30,
    ),
    st.floats(-5, 25, allow_nan=False),
    st.floats(0, 30, allow_nan=False),
)
def test_mass_is_the_overlap_weighted_sum(records, lo, width):
    acc = SourceTimeAccount(n_queries=3, stw_s=100.0)
    recs = [(q, t0, t0 + d, m) for q, t0, d, m in records]
    for q, t0, t1, m in recs:
        acc.add("arrived", q, t0, t1, m)
    assert acc.mass("arrived", lo, lo + width) == pytest.approx(
        _brute(recs, 3, lo, lo + width), abs=1e-9
    )


def _stamp_run(rates, shed=0.0, stw_s=10.0):
    """Per-second slides of one single-source query at ``rates`` (tuples per slide), stamped by
    Eq. 1 over the trailing STW (StwCounter), a share ``shed`` of every slide dropped."""
    counter = StwCounter(StwConfig(stw_s=stw_s, slide_s=1.0), n_lanes=1)
    acc = SourceTimeAccount(n_queries=1, stw_s=stw_s)
    for t, n in enumerate(rates):
        counter.push([n])
        sic = float(counter.tuple_sic(n_sources_per_lane=1)[0])
        acc.add("arrived", 0, t, t + 1, n * sic)
        acc.add("results", 0, t, t + 1, n * sic * (1 - shed))
        acc.set_processed(0, t + 1)
    return acc


def test_an_unshed_query_reads_one_through_a_rate_step():
    # A source doubling its rate: Eq. 4 summed over the next STW would read 2 ln 2 = 1.39
    # (the stamps lag the new rate); the ratio reads exactly 1 at every point.
    rates = [100] * 20 + [200] * 20
    acc = _stamp_run(rates)
    raw = acc.mass("results", 20.0, 30.0)[0]
    assert raw == pytest.approx(2 * np.log(2), rel=0.05)
    for t in range(10, 40):
        assert acc.measured(now=t)[0] == pytest.approx(1.0)
    shed = _stamp_run(rates, shed=0.25)
    assert shed.measured(now=35.0)[0] == pytest.approx(0.75)


def test_measured_uses_the_latest_complete_stw_and_caps_at_now():
    acc = SourceTimeAccount(n_queries=2, stw_s=4.0)
    for t in range(8):
        acc.add("arrived", [0, 1], t, t + 1, 0.25)
        acc.add("results", [0, 1], t, t + 1, [0.25, 0.25 if t < 4 else 0.0])
    acc.set_processed([0, 1], 8.0)
    assert acc.measured().tolist() == [1.0, 0.0]  # [4, 8): query 1 lost everything there
    assert acc.measured(now=4.0).tolist() == [1.0, 1.0]  # [0, 4)
    assert acc.measured(now=6.0).tolist() == [1.0, 0.5]
    acc.set_processed([0], 2.0)  # never moves back
    assert acc.processed.tolist() == [8.0, 8.0]


def test_nothing_processed_or_nothing_arrived_has_no_value():
    acc = SourceTimeAccount(n_queries=2, stw_s=4.0)
    acc.add("arrived", 0, 0.0, 1.0, 0.25)
    acc.set_processed([0, 1], 1.0)
    assert acc.measured().tolist()[0] == 0.0  # arrived, no result: all lost
    assert np.isnan(acc.measured()[1])  # nothing arrived: no information either way


def test_old_records_are_pruned_behind_the_newest():
    acc = SourceTimeAccount(n_queries=1, stw_s=2.0)
    for t in range(20):
        acc.add("arrived", 0, t, t + 1, 1.0)
    assert acc.windows("arrived") == 7  # t1 >= 20 - 3 * 2
    assert acc.mass("arrived", 0.0, 100.0).tolist() == [7.0]


def test_concurrent_adds_lose_nothing():
    acc = SourceTimeAccount(n_queries=4, stw_s=1000.0)

    def add(q):
        for i in range(300):
            acc.add("results", q, float(i), float(i + 1), 0.001)

    threads = [threading.Thread(target=add, args=(q,)) for q in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert acc.mass("results", 0.0, 1e6) == pytest.approx([0.3] * 4)


def test_errors_name_the_problem():
    with pytest.raises(ConfigError, match="n_queries must be an int >= 0, got -1"):
        SourceTimeAccount(n_queries=-1, stw_s=1.0)
    with pytest.raises(ConfigError, match="stw_s must be a finite number > 0"):
        SourceTimeAccount(n_queries=1, stw_s=0.0)
    acc = SourceTimeAccount(n_queries=1, stw_s=1.0)
    with pytest.raises(ConfigError, match="series must be one of arrived, admitted, results"):
        acc.add("kept", 0, 0.0, 1.0, 1.0)
    with pytest.raises(ConfigError, match=r"query ids must be in 0..0, got \[1\]"):
        acc.add("arrived", 1, 0.0, 1.0, 1.0)
    with pytest.raises(ConfigError, match="mass must be >= 0"):
        acc.add("arrived", 0, 0.0, 1.0, -1.0)
    with pytest.raises(ConfigError, match="t1 >= t0"):
        acc.add("arrived", 0, 2.0, 1.0, 1.0)
    with pytest.raises(ConfigError, match="t0 must be finite"):
        acc.add("arrived", 0, float("nan"), 1.0, 1.0)
    with pytest.raises(ConfigError, match="mass must be one value or one per record"):
        acc.add("arrived", [0, 0], 0.0, 1.0, [1.0, 1.0, 1.0])
    with pytest.raises(ConfigError, match=r"query ids must be in 0..0, got \[5\]"):
        acc.set_processed([5], 1.0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),
            st.floats(0, 50, allow_nan=False),
            st.floats(0, 5, allow_nan=False),
            st.floats(0, 1, allow_nan=False),
        ),
        max_size=30,
    ),
    st.lists(st.tuples(st.integers(0, 2), st.floats(-5, 55), st.floats(0, 10)), max_size=8),
)
def test_archived_mass_is_the_overlap_weighted_sum_of_every_record(records, windows):
    acc = SourceTimeAccount(n_queries=3, stw_s=2.0, archive=True)  # the live part prunes
    recs = [(q, t0, t0 + d, m) for q, t0, d, m in records]
    for q, t0, t1, m in recs:
        acc.add("arrived", q, t0, t1, m)
    if not windows:
        return
    q, lo, width = (np.array(x) for x in zip(*windows, strict=True))
    got = acc.archived_mass("arrived", q, lo, lo + width)
    want = [_brute(recs, 3, a, a + w)[i] for i, a, w in windows]
    assert got == pytest.approx(want, abs=1e-9)


def test_the_archive_keeps_arrived_and_results_only_and_must_be_asked_for():
    acc = SourceTimeAccount(n_queries=1, stw_s=1.0, archive=True)
    for t in range(20):
        acc.add("results", 0, t, t + 1, 0.5)
        acc.add("admitted", 0, t, t + 1, 0.5)
    assert acc.archived_mass("results", [0], [0.0], [2.0]).tolist() == [1.0]
    assert acc.mass("results", 0.0, 2.0).tolist() == [0.0]  # pruned from the live part
    with pytest.raises(ConfigError, match="series must be one of arrived, results; got 'admitted'"):
        acc.archived_mass("admitted", [0], [0.0], [1.0])
    with pytest.raises(ConfigError, match="hi must be one value or one per record"):
        acc.archived_mass("results", [0, 0], [0.0, 1.0], [1.0, 2.0, 3.0])
    with pytest.raises(ConfigError, match="archived_mass needs an account built with archive"):
        SourceTimeAccount(n_queries=1, stw_s=1.0).archived_mass("arrived", [0], [0.0], [1.0])
    with pytest.raises(ConfigError, match="archive must be True or False, got 1"):
        SourceTimeAccount(n_queries=1, stw_s=1.0, archive=1)  # type: ignore[arg-type]
