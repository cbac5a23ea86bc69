"""The one statement of a batch's built-in queries and the firing rule that gives their SIC."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.spark.queries import QueryKind
from spillway.spark.statement import kinds_sql, share_firings, share_sic, window_us


def _stmt(rows):
    cols = ["query_id", "window_start", "key", "rank", "value", "sic", "n_in", "last_arrival_ts"]
    return pd.DataFrame(rows, columns=cols)


def test_a_firing_without_result_leaves_a_marker_and_results_share_its_sic():
    rows = _stmt(
        [
            (3, 0, None, 1, 4.0, None, None, None),  # a result of firing (3, 0)
            (3, 0, None, 2, 5.0, None, None, None),
            (3, 0, None, None, None, 0.6, 4, 90),  # its firing
            (3, 7, None, None, None, 0.2, 1, 95),  # a firing without result
            (4, 0, None, 1, 2.0, 0.5, 2, 80),  # a result that is its own firing
        ]
    )
    out = share_firings(rows)
    assert out[["query_id", "window_start", "rank", "sic", "n_in"]].values.tolist() == [
        [3, 0, 1, 0.3, 4],
        [3, 0, 2, 0.3, 4],
        [3, 7, 0, 0.2, 1],
        [4, 0, 1, 0.5, 2],
    ]
    assert out["value"].isna().tolist() == [False, False, True, False]
    # the windows' SIC is all there, whatever the number of result rows
    assert out.groupby(["query_id", "window_start"])["sic"].sum().tolist() == pytest.approx(
        [0.6, 0.2, 0.5]
    )
    assert share_firings(rows.iloc[:0]).empty


def _reference(rows):
    """share_firings by its definition, row by row: each result row gets its firing's SIC
    mass over the firing's result rows; a firing without a result row leaves a marker."""
    firings = {}
    for r in rows.itertuples():
        if pd.notna(r.n_in):
            firings.setdefault((r.query_id, r.window_start), r)
    results = [r for r in rows.itertuples() if pd.notna(r.rank)]
    count = {}
    for r in results:
        count[(r.query_id, r.window_start)] = count.get((r.query_id, r.window_start), 0) + 1
    out = []
    for r in results:
        f = firings[(r.query_id, r.window_start)]
        out.append((r.query_id, r.window_start, r.key, int(r.rank), r.value,
                    f.sic / count[(r.query_id, r.window_start)], int(f.n_in),
                    int(f.last_arrival_ts)))  # fmt: skip
    for (q, w), f in firings.items():
        if (q, w) not in count:
            out.append((q, w, None, 0, float("nan"), f.sic, int(f.n_in), int(f.last_arrival_ts)))
    na_first = [(q, w, k is not None and not pd.isna(k), 0 if k is None or pd.isna(k) else k, rk)
                for q, w, k, rk, *_ in out]  # fmt: skip
    return [out[i] for i in sorted(range(len(out)), key=lambda i: na_first[i])]


@pytest.mark.parametrize("seed", range(20))
def test_share_firings_gives_every_row_its_firing_s_share(seed):
    rng = np.random.default_rng(seed)
    rows = []
    for q in rng.choice(50, size=rng.integers(1, 6), replace=False):
        for w in rng.choice(10, size=rng.integers(1, 4), replace=False) * 500_000:
            n_res = int(rng.integers(0, 5))
            totals = (float(rng.uniform(0.01, 1)), int(rng.integers(1, 500)),
                      int(1.8e15) + int(rng.integers(0, 10**9)))  # fmt: skip
            own = n_res > 0 and rng.random() < 0.5  # the firing rides on a result row
            for i in range(n_res):
                key = None if rng.random() < 0.3 else int(rng.integers(-(2**62), 2**62))
                extra = totals if own and i == 0 else (None, None, None)
                rows.append((q, w, key, i + 1, float(rng.normal()), *extra))
            if not own:
                rows.append((q, w, None, None, None, *totals))
    rows = _stmt([rows[i] for i in rng.permutation(len(rows))])
    got = share_firings(rows)
    want = _reference(rows)
    assert len(got) == len(want)
    assert got["query_id"].tolist() == [r[0] for r in want]
    assert got["window_start"].tolist() == [r[1] for r in want]
    assert [None if pd.isna(k) else k for k in got["key"]] == [
        None if r[2] is None or pd.isna(r[2]) else r[2] for r in want
    ]
    assert got["rank"].tolist() == [r[3] for r in want]
    np.testing.assert_array_equal(got["value"].to_numpy(), [r[4] for r in want])
    np.testing.assert_allclose(got["sic"].to_numpy(), [r[5] for r in want], rtol=1e-12)
    assert got["n_in"].tolist() == [r[6] for r in want]
    assert got["last_arrival_ts"].tolist() == [r[7] for r in want]
    assert got.dtypes.astype(str).tolist() == [
        "int32", "int64", "Int64", "int32", "float64", "float64", "int64", "int64"
    ]  # fmt: skip


def test_a_built_in_result_outside_every_firing_is_refused():
    rows = _stmt([(3, 0, None, 1, 4.0, None, None, None), (3, 5, None, None, None, 0.6, 4, 90)])
    with pytest.raises(ConfigError, match=r"a built-in query: 1 result row\(s\) have a window_st"):
        share_firings(rows)


def test_a_result_outside_every_firing_is_refused():
    out = pd.DataFrame({"window_start": [10, 12]})
    fired = pd.DataFrame({"window_start": [10], "sic_in": [1.0]})
    with pytest.raises(ConfigError, match=r"q: 1 result row\(s\) have a window_start that is not"):
        share_sic(out, fired, by=["window_start"], what="q", carry=())


def test_statement_errors():
    with pytest.raises(ConfigError, match="window_s must be a positive whole number"):
        kinds_sql("v", {"avg": ()}, 0.0)
    with pytest.raises(ConfigError, match="window_s must be a positive whole number"):
        window_us(True)
    with pytest.raises(ConfigError, match=r"window_s per query needs every query id.*\[2\]"):
        kinds_sql("v", {"avg": [0], "top5": [2]}, {0: 1.0})
    with pytest.raises(UnknownNameError, match="query kind must be one of"):
        kinds_sql("v", {"median": [0]}, 1.0)
    with pytest.raises(ConfigError, match="query kind 'k': sql must read the rows as"):
        QueryKind(name="k", title="K", cql="", rows_per_window=1, sql="SELECT 1")


def test_every_non_aggregate_kind_and_user_query_has_its_firings_in_the_statement():
    sql = kinds_sql("b", {"avg": [0], "cov": [1], "group_avg": [2]}, 1.0, firing_ids=[7])
    # every built-in kind's rows carry their firings; the user query's firings come from one
    # aggregation over its rows
    assert sql.count(" UNION ALL ") == 3 and "query_id IN (7))" in sql
    # a plan of one kind runs one part: no firing aggregation, nothing to persist
    for kind in ("group_avg", "top5", "cov"):
        assert " UNION ALL " not in kinds_sql("b", {kind: ()}, 1.0)
    only_user = kinds_sql("b", {}, {7: 0.5}, firing_ids=[7])
    assert " UNION ALL " not in only_user and "500000" in only_user
