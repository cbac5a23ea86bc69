"""run_exact: every query's error against its exact answer, beside its window SIC."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from spillway.config import NodeConfig, QuerySpec
from spillway.errors import SpillwayError
from spillway.run_exact import (
    QUERY_KEYS,
    ExactOutcome,
    ExactStep,
    compute_exact,
    kind_errors,
    merge_queries,
    query_errors,
    section,
    window_table,
)

T = pd.to_datetime(np.arange(100.0, 110.0), unit="s", utc=True)


def _grouped(n_windows=4, lost_from=2):
    """Exact and shed group_avg rows: 3 routes per window, route 9 lost from window
    ``lost_from`` on (the shed rows carry the SIC of the kept share)."""
    rows = [
        {
            "query_id": 0,
            "window_start": T[w],
            "key": k,
            "rank": 1,
            "value": 10.0 + k,
            "sic": 0.1 / 3,
        }
        for w in range(n_windows)
        for k in (1, 5, 9)
    ]
    exact = pd.DataFrame(rows)
    lost = (exact["key"] == 9) & (exact["window_start"] >= T[lost_from])
    shed = exact[~lost].assign(value=lambda d: d["value"] * 1.1)
    return shed, exact


def _table(shed, exact, kinds, processed):
    return window_table(
        shed,
        exact,
        kinds=kinds,
        feed_window=lambda q, s: (s - 100.0, s - 99.0),
        arrived_mass=lambda q, a, b: (b - a) * 0.1,
        processed_s=processed,
        names=[f"q{i}" for i in range(len(kinds))],
    )


def test_grouped_windows_count_groups_and_missing_groups_against_the_exact_answer():
    shed, exact = _grouped()
    w = _table(shed, exact, ["group_avg"], [4.0])
    assert w["groups"].tolist() == [3, 3, 3, 3]
    assert w["missing_groups"].tolist() == [0, 0, 1, 1]
    assert np.allclose(w["sic_window"], [1, 1, 2 / 3, 2 / 3])
    e = query_errors(w, {"q0": "group_avg"})["q0"]
    assert e["groups"] == 3 and e["missing_groups"] == 0.5 and e["spearman_sic_error"] < -0.8


def test_only_windows_the_run_processed_are_compared_and_a_lost_window_counts():
    exact = pd.DataFrame(
        {"query_id": 0, "window_start": T[:6], "rank": 1, "value": 100.0, "sic": 0.1}
    )
    shed = exact.iloc[[0, 1, 3]].assign(value=[100.0, 60.0, 90.0], sic=[0.1, 0.06, 0.09])
    w = _table(shed, exact, ["count"], [5.0])  # windows ending after t = 5 s never ran
    assert w["t1_s"].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert w["has_result"].tolist() == [True, True, False, True, False]
    assert np.allclose(w["sic_window"], [1.0, 0.6, 0.0, 0.9, 0.0])
    assert np.allclose(w["error"], [0.0, 0.4, 1.0, 0.1, 1.0])
    e = query_errors(w, {"q0": "count", "other": "avg"})
    assert e["q0"]["windows_without_result"] == 2 and e["q0"]["spearman_sic_error"] == -1.0
    assert e["other"]["error_windows"] == 0 and math.isnan(e["other"]["error_mean"])


def test_covariance_error_is_its_magnitude_and_an_unshed_run_has_no_rank_correlation():
    exact = pd.DataFrame(
        {"query_id": 0, "window_start": T[:3], "rank": 1, "value": 2.0, "sic": 0.1}
    )
    w = _table(exact.assign(value=[2.0, 1.5, 2.5]), exact, ["cov"], [3.0])
    assert w["metric"].iloc[0] == "abs_cov_error" and w["error"].tolist() == [0.0, 0.5, 0.5]
    # nothing shed: every window reads SIC 1, so Spearman is undefined (NaN), not a pass
    assert math.isnan(query_errors(w, {"q0": "cov"})["q0"]["spearman_sic_error"])


def test_kind_errors_pool_the_queries_of_a_kind():
    exact = pd.DataFrame(
        {"query_id": [0, 1] * 3, "window_start": np.repeat(T[:3], 2), "rank": 1,
         "value": 10.0, "sic": 0.1}
    )  # fmt: skip
    shed = exact.assign(
        value=[10.0, 9.0, 8.0, 7.0, 6.0, 5.0], sic=[0.1, 0.09, 0.08, 0.07, 0.06, 0.05]
    )
    k = kind_errors(_table(shed, exact, ["count", "count"], [3.0, 3.0]))
    assert k["count"]["queries"] == 2 and k["count"]["error_windows"] == 6
    assert k["count"]["spearman_sic_error"] == -1.0


def test_merge_queries_and_the_section_without_an_exact_answer():
    queries = [{"name": "a", "kind": "avg"}]
    merge_queries(queries, ExactOutcome.skipped("--no-exact was given"))
    assert set(QUERY_KEYS) <= set(queries[0]) and math.isnan(queries[0]["error_mean"])
    summary = {"exact": ExactOutcome.skipped("--no-exact was given").as_dict(), "queries": queries}
    assert section(summary).startswith("Not computed: --no-exact was given")


def test_compute_exact_needs_a_node_that_ran_and_the_step_reports_why():
    class Unstarted:
        coordinator = None

        def snapshot(self):
            return "snap"

    with pytest.raises(SpillwayError, match="compute_exact needs a node that ran"):
        compute_exact(Unstarted())
    step = ExactStep()
    step(Unstarted())
    assert step.snapshot == "snap" and not step.outcome.computed
    assert step.outcome.reason.startswith("the exact job failed: compute_exact needs")


@pytest.mark.spark
def test_a_run_reports_error_beside_window_sic_for_every_query(spark, tmp_path):
    from spillway.spark.node import Node

    # 150 t/s per query, then 40x from t = 4 s against a fixed 5,000 t/s: unshed, then shed
    # (a batch holds 2,000 tuples, so a slow first batch's backlog of several seconds is
    # still not shed).
    step_profile = {"times": [4.0], "factors": [40.0]}
    queries = tuple(
        QuerySpec(name=k, kind=k, feed="uniform", rate=150.0, profile="step",
                  profile_options=step_profile)
        for k in ("count", "avg")
    )  # fmt: skip
    cfg = NodeConfig(queries=queries, trigger_s=0.5, stw_s=2.0, seed=1,
                     policy="random", checkpoint_dir=str(tmp_path))  # fmt: skip
    node = Node(cfg, spark=spark, capacity_tuples_per_s=5000.0, keep_source_mass=True)
    step = ExactStep()
    node.run(9.0, before_stop=step)
    out = step.outcome
    assert out is not None and out.computed and out.wall_s > 0 and out.cpu_s > 0
    w = out.windows
    assert set(w["query"]) == {"count", "avg"} and len(w) >= 12
    early = w[w["t1_s"] <= 3.5]
    assert len(early) and np.allclose(early["sic_window"], 1.0, atol=0.02)
    assert np.allclose(early["error"], 0.0)  # nothing shed: the exact answer itself
    late = w[(w["t0_s"] >= 5.0) & (w["kind"] == "count")]
    assert len(late) and (late["sic_window"] < 0.6).all() and (late["error"] > 0.2).all()
    per = query_errors(w, {"count": "count", "avg": "avg"})
    assert per["count"]["spearman_sic_error"] < -0.7


@pytest.mark.parametrize(
    ("processed", "why"),
    [([-math.inf, -math.inf], "no micro-batch finished"), ([0.0, -math.inf], "no source time")],
)
def test_a_node_that_processed_nothing_skips_the_exact_job_with_its_reason(processed, why):
    account = SimpleNamespace(processed=np.array(processed))
    node = SimpleNamespace(coordinator=SimpleNamespace(epoch_s=0.0, account=account))
    out = compute_exact(node)
    assert not out.computed and why in out.as_dict()["reason"]
