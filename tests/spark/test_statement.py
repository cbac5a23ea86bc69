"""The one statement of a batch's built-in queries and the firing rule that gives their SIC."""

from __future__ import annotations

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
