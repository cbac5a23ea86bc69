"""After a ``spillway run``: every query's error against its exact answer, beside its SIC.

THEMIS §7.1 validates SIC by the error it stands for: the result of a shed window against the
perfect answer of the same window. A ``spillway run`` can get that answer for every query,
because every feed is a pure function of seed, source and index: once the streaming queries
have stopped (:meth:`~spillway.spark.node.Node.halt`, so the exact job never competes with them
for the cores), the node's keep-all batch job recomputes every window over the same input
(:meth:`~spillway.spark.node.Node.exact_results`), and :func:`spillway.spark.exact.window_errors`
pairs shed and exact windows. Its wall time and the CPU seconds of the whole process tree (the
Python driver, Spark's JVM and its Python workers, :func:`spillway.procfs.tree_cpu_s`) are measured and
reported, so the cost is never hidden in the run's figures.

Per result window (:func:`window_table`):

- ``sic_window``: the window's result SIC (its rows' SIC summed, Eq. 3) over the SIC mass that
  arrived in the window's source time (the coordinator's archive,
  :meth:`~spillway.quality.stw_account.SourceTimeAccount.archived_mass`): 1 for a window that
  lost nothing, whatever the rates; 0 for a window whose every tuple was shed;
- ``error``: the kind's metric (:data:`spillway.spark.exact.METRICS`): relative error (AVG,
  MAX, COUNT, AVG-all), normalised Kendall distance (TOP-5), the absolute difference of the
  covariances (COV), CoD's grouped error (grouped means, with ``groups`` and ``missing_groups``
  counted against the exact answer under every policy).

Only windows whose input the streaming run processed are compared (those ending by the source
time up to which the query's input was processed); a window of that span without a shed
result lost every tuple and counts with SIC 0 and its full error.

The job's cost is bounded: it re-reads every tuple that arrived, shed or not (at 3x overload,
three times what the node processed). When the run's input exceeds ``budget_rows`` (default
:data:`DEFAULT_BUDGET_ROWS`), the job recomputes evenly spaced spans of source time holding that
many tuples (:func:`sample_spans`) instead of the whole run, and the report says so.

Per query (:func:`query_errors`): ``error_mean`` (mean window error), ``spearman_sic_error``
(Spearman's rho between window SIC and window error over the run; NaN when either is constant,
e.g. nothing was shed) and, for grouped queries, ``groups`` and ``missing_groups`` (mean per
window). :func:`kind_errors` pools the windows of each query kind.

Examples
--------
>>> import pandas as pd
>>> w = pd.DataFrame({"query": "q", "kind": "count", "metric": "mare",
...                   "sic_window": [1.0, 0.8, 0.5, 0.3], "error": [0.0, 0.21, 0.48, 0.71],
...                   "has_result": True})
>>> e = query_errors(w, {"q": "count"})["q"]
>>> e["error_mean"], e["spearman_sic_error"], e["error_windows"]
(0.35, -1.0, 4)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spillway.errors import SpillwayError
from spillway.procfs import tree_cpu_s
from spillway.progress import report
from spillway.quality.metrics import spearman_rho
from spillway.reporting import line_plot, markdown_table, num, write_csv

#: Columns of :func:`window_table`.
WINDOW_COLUMNS = (
    "query",
    "kind",
    "metric",
    "window_start",
    "t0_s",
    "t1_s",
    "result_sic",
    "arrived_sic",
    "sic_window",
    "error",
    "has_result",
    "groups",
    "missing_groups",
)

#: Tuples the exact job re-reads at most by default (about a minute of Spark on 2 cores).
DEFAULT_BUDGET_ROWS = 40_000_000

#: At most this many sampled spans (each is a separate batch job with its fixed cost).
MAX_SPANS = 12

#: Keys every query of summary.json gains (NaN when the exact answer was not computed).
QUERY_KEYS = (
    "error_metric",
    "error_mean",
    "spearman_sic_error",
    "error_windows",
    "windows_without_result",
    "sic_window_min",
    "sic_window_max",
    "groups",
    "missing_groups",
)


def sample_spans(
    until_s: float, rows_per_s: float, *, budget_rows: float, unit_s: float
) -> list[tuple[float, float]]:
    """Spans of source time ``[a, b)`` to recompute: the whole ``[0, until_s)`` when its
    ``rows_per_s * until_s`` tuples fit in ``budget_rows``, else at most :data:`MAX_SPANS`
    evenly spaced spans holding about ``budget_rows`` tuples; every bound a multiple of
    ``unit_s`` (a common multiple of the windows, so no window is cut).

    >>> sample_spans(10.0, 100.0, budget_rows=5000, unit_s=1.0)
    [(0.0, 10.0)]
    >>> sample_spans(100.0, 1000.0, budget_rows=20_000, unit_s=2.0)
    [(0.0, 2.0), (10.0, 12.0), (22.0, 24.0), (32.0, 34.0), (44.0, 46.0), (54.0, 56.0), (66.0, 68.0), (76.0, 78.0), (88.0, 90.0), (98.0, 100.0)]
    """
    units = math.floor(until_s / unit_s + 1e-9)
    if units <= 0:
        return []
    if not rows_per_s > 0 or rows_per_s * units * unit_s <= budget_rows:
        return [(0.0, units * unit_s)]
    fit = max(1, math.floor(budget_rows / (rows_per_s * unit_s)))
    n = min(MAX_SPANS, fit)
    each = max(1, fit // n)
    starts = sorted({round(k * (units - each) / max(n - 1, 1)) for k in range(n)})
    return [(float(a * unit_s), float((a + each) * unit_s)) for a in starts]


@dataclass(frozen=True, kw_only=True)
class ExactOutcome:
    """What the after-run exact job gave (or why there is none).

    Attributes
    ----------
    computed : the exact answers were computed and compared.
    reason : why not, when not computed (the run was interrupted or failed, ``--no-exact``,
        the job failed).
    wall_s : wall time of the exact job and the comparison.
    cpu_s : CPU seconds of the process tree over that time (:func:`spillway.procfs.tree_cpu_s`).
    until_s : feed time up to which windows were recomputed.
    spans : the spans of source time recomputed (:func:`sample_spans`).
    share : the share of the run's source time those spans cover (1: every window).
    windows : every compared window (:data:`WINDOW_COLUMNS`).

    >>> ExactOutcome.skipped("--no-exact").as_dict()["reason"]
    '--no-exact'
    """

    computed: bool
    reason: str = ""
    wall_s: float = math.nan
    cpu_s: float = math.nan
    until_s: float = math.nan
    spans: tuple[tuple[float, float], ...] = ()
    share: float = math.nan
    windows: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=WINDOW_COLUMNS))

    @classmethod
    def skipped(cls, reason: str) -> ExactOutcome:
        """No exact answer, and why."""
        return cls(computed=False, reason=reason)

    def as_dict(self) -> dict[str, Any]:
        """The ``exact`` entry of summary.json (per-kind figures under ``kinds``)."""
        return {
            "computed": self.computed,
            "reason": self.reason,
            "wall_s": self.wall_s,
            "cpu_s": self.cpu_s,
            "until_s": self.until_s,
            "spans": [list(s) for s in self.spans],
            "share": self.share,
            "windows": int(len(self.windows)),
            "kinds": kind_errors(self.windows),
        }


def window_table(
    shed: pd.DataFrame,
    exact: pd.DataFrame,
    *,
    kinds: Sequence[str],
    feed_window: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    arrived_mass: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray],
    processed_s: Sequence[float] | np.ndarray,
    names: Sequence[str],
) -> pd.DataFrame:
    """Every window the run processed, shed against exact (:data:`WINDOW_COLUMNS`).

    Parameters
    ----------
    shed, exact : result rows with ``query_id``, ``window_start`` (UTC timestamps), ``rank``,
        ``value``, ``sic`` (and ``key`` for grouped kinds): the run's and the exact job's.
    kinds : the kind of every query id.
    feed_window : ``(query ids, window starts in Unix s) -> (t0, t1)`` in feed seconds (the
        coordinator's :meth:`~spillway.spark.coordinator.QueryCoordinator.feed_window`).
    arrived_mass : ``(query ids, t0, t1) -> arrived SIC mass`` per window (the account's
        archive).
    processed_s : per query id, feed time up to which its input was processed.
    names : the name of every query id.

    Examples
    --------
    >>> t = pd.to_datetime([100.0, 101.0, 102.0], unit="s", utc=True)
    >>> exact = pd.DataFrame({"query_id": 0, "window_start": t, "rank": 1,
    ...                       "value": [10.0, 10.0, 10.0], "sic": 0.1})
    >>> shed = exact.iloc[:2].assign(value=[10.0, 5.0], sic=[0.1, 0.05])
    >>> w = window_table(shed, exact, kinds=["count"],
    ...                  feed_window=lambda q, s: (s - 100.0, s - 99.0),
    ...                  arrived_mass=lambda q, a, b: (b - a) * 0.1,
    ...                  processed_s=[3.0], names=["q"])
    >>> w[["t0_s", "sic_window", "error", "has_result"]].values.tolist()
    [[0.0, 1.0, 0.0, True], [1.0, 0.5, 0.5, True], [2.0, 0.0, 1.0, False]]
    """
    from spillway.spark.exact import METRICS, window_errors

    frames = []
    for kind in dict.fromkeys(kinds):
        ids = [i for i, k in enumerate(kinds) if k == kind]
        s = shed[shed["query_id"].isin(ids)]
        e = exact[exact["query_id"].isin(ids)]
        if e.empty:
            continue
        per = window_errors(s, e, kind)
        if per.empty:
            continue
        q = per["query_id"].to_numpy(dtype=np.int64)
        start = per["window_start"].map(pd.Timestamp.timestamp).to_numpy(dtype=np.float64)
        t0, t1 = feed_window(q, start)
        done = t1 <= np.asarray(processed_s, dtype=np.float64)[q] + 1e-6
        if not done.any():
            continue
        per, q, t0, t1 = per[done], q[done], t0[done], t1[done]
        arrived = np.asarray(arrived_mass(q, t0, t1), dtype=np.float64)
        result = per["sic"].to_numpy(dtype=np.float64)
        ratio = np.full(len(per), np.nan)
        np.divide(result, arrived, out=ratio, where=arrived > 0)
        err = per["error"].to_numpy(dtype=np.float64)
        metric = METRICS[kind]
        present = set(map(tuple, s[["query_id", "window_start"]].drop_duplicates().values))
        has = [(int(a), b) in present for a, b in zip(q, per["window_start"], strict=True)]
        frames.append(
            pd.DataFrame(
                {
                    "query": [names[i] for i in q],
                    "kind": kind,
                    "metric": "abs_cov_error" if metric == "cov_error" else metric,
                    "window_start": per["window_start"].to_numpy(),
                    "t0_s": t0,
                    "t1_s": t1,
                    "result_sic": result,
                    "arrived_sic": arrived,
                    "sic_window": ratio,
                    "error": np.abs(err) if metric == "cov_error" else err,
                    "has_result": has,
                    "groups": per["groups"].to_numpy(float) if "groups" in per else np.nan,
                    "missing_groups": per["missing_groups"].to_numpy(float)
                    if "missing_groups" in per
                    else np.nan,
                }
            )
        )
    if not frames:
        return window_table_empty()
    out = pd.concat(frames, ignore_index=True)
    return out.sort_values(["query", "t0_s"], kind="stable").reset_index(drop=True)


def _stats(w: pd.DataFrame) -> dict[str, Any]:
    """Error mean, window counts, SIC range and Spearman's rho over windows ``w``."""
    ok = w[np.isfinite(w["sic_window"].astype(float)) & np.isfinite(w["error"].astype(float))]
    sic = ok["sic_window"].to_numpy(dtype=np.float64)
    err = ok["error"].to_numpy(dtype=np.float64)
    return {
        "error_metric": str(w["metric"].iloc[0]) if len(w) else None,
        "error_mean": round(float(err.mean()), 12) if err.size else math.nan,
        "spearman_sic_error": spearman_rho(sic, err) if sic.size >= 2 else math.nan,
        "error_windows": int(len(ok)),
        "windows_without_result": int((~w["has_result"].astype(bool)).sum()),
        "sic_window_min": float(sic.min()) if sic.size else math.nan,
        "sic_window_max": float(sic.max()) if sic.size else math.nan,
        "groups": float(w["groups"].astype(float).mean()) if "groups" in w else math.nan,
        "missing_groups": float(w["missing_groups"].astype(float).mean())
        if "missing_groups" in w
        else math.nan,
    }


def query_errors(windows: pd.DataFrame, kinds: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Per query name (every one of ``kinds``, NaN without windows): :data:`QUERY_KEYS`."""
    out = {}
    for name in kinds:
        w = windows[windows["query"] == name] if len(windows) else windows
        out[name] = (
            _stats(w) if len(w) else dict.fromkeys(QUERY_KEYS, math.nan) | {"error_windows": 0}
        )
    return out


def kind_errors(windows: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """The same figures with the windows of every query of one kind pooled, per kind.

    >>> w = pd.DataFrame({"query": ["a", "b"], "kind": "avg", "metric": "mare",
    ...                   "sic_window": [1.0, 0.5], "error": [0.0, 0.1], "has_result": True})
    >>> kind_errors(w)["avg"]["spearman_sic_error"], kind_errors(w)["avg"]["queries"]
    (-1.0, 2)
    """
    if not len(windows):
        return {}
    return {
        str(k): {**_stats(g), "queries": int(g["query"].nunique())}
        for k, g in windows.groupby("kind", sort=False)
    }


def compute_exact(node: Any, *, budget_rows: float = DEFAULT_BUDGET_ROWS) -> ExactOutcome:
    """Recompute the windows of a halted node (:meth:`~spillway.spark.node.Node.halt`) with
    nothing shed and compare; the job's wall and CPU time measured. Every window when the
    run's input holds at most ``budget_rows`` tuples, else sampled spans (:func:`sample_spans`).

    Raises
    ------
    SpillwayError
        The node was never started (no coordinator) or keeps no archive of arrived mass
        (``keep_source_mass=False``).
    """
    coord = getattr(node, "coordinator", None)
    if coord is None or coord.epoch_s is None:
        raise SpillwayError("compute_exact needs a node that ran (no coordinator yet)")
    processed = coord.account.processed
    if not np.isfinite(processed).any():
        return ExactOutcome.skipped("no micro-batch finished: nothing to compare")
    until = float(np.max(processed[np.isfinite(processed)]))
    if until <= 0:
        return ExactOutcome.skipped("no source time was processed: nothing to compare")
    arrived = sum(r.arrived_tuples for r in node.history())
    unit = math.lcm(*(max(1, round(q.window_s * 1000)) for q in node.config.queries)) / 1000
    spans = sample_spans(until, arrived / until, budget_rows=budget_rows, unit_s=unit)
    share = sum(b - a for a, b in spans) / until
    report(
        f"computing the exact answers (nothing shed) of {share:.0%} of the run's source time "
        f"up to t = {until:.0f} s, in {len(spans)} span(s)"
    )
    cpu0, t0 = tree_cpu_s(), time.perf_counter()
    names = [q.name for q in node.config.queries]
    ids = {n: i for i, n in enumerate(names)}
    shed = node.results()
    shed = shed.assign(query_id=shed["query"].map(ids))
    frames = []
    for a, b in spans:
        exact = node.exact_results(b, from_s=a)
        w = window_table(
            shed,
            exact.assign(query_id=exact["query"].map(ids)),
            kinds=[q.kind for q in node.config.queries],
            feed_window=coord.feed_window,
            arrived_mass=lambda q, lo, hi: coord.account.archived_mass("arrived", q, lo, hi),
            processed_s=np.where(np.isfinite(processed), processed, -np.inf),
            names=names,
        )
        frames.append(w[(w["t0_s"] >= a - 1e-6) & (w["t1_s"] <= b + 1e-6)])  # whole windows
    windows = pd.concat(frames, ignore_index=True) if frames else window_table_empty()
    wall, cpu = time.perf_counter() - t0, tree_cpu_s() - cpu0
    report(f"exact answers: {len(windows):,} windows compared in {wall:.0f} s ({cpu:.0f} CPU s)")
    return ExactOutcome(
        computed=True, wall_s=wall, cpu_s=cpu, until_s=until, spans=tuple(spans), share=share,
        windows=windows,
    )  # fmt: skip


def window_table_empty() -> pd.DataFrame:
    """An empty :func:`window_table`."""
    return pd.DataFrame(columns=list(WINDOW_COLUMNS))


class ExactStep:
    """``Node.run(before_stop=ExactStep())``: after the streaming queries stop, take the
    node's final snapshot (before the exact job's time passes) and compute the exact answers.

    A failure of the exact job is recorded as the outcome's reason rather than raised, so the
    run's own report is still written. :attr:`outcome` stays None when the step never ran (an
    interrupted or failed run).
    """

    def __init__(self, *, budget_rows: float = DEFAULT_BUDGET_ROWS) -> None:
        if not (isinstance(budget_rows, int | float) and budget_rows > 0):
            raise SpillwayError(f"budget_rows must be a number > 0 (tuples), got {budget_rows!r}")
        self.budget_rows = float(budget_rows)
        self.outcome: ExactOutcome | None = None
        self.snapshot: Any = None

    def __call__(self, node: Any) -> None:
        self.snapshot = node.snapshot()
        try:
            self.outcome = compute_exact(node, budget_rows=self.budget_rows)
        except Exception as e:  # the job failed: say so in the report, keep the run's figures
            from spillway.spark.node import short_error

            self.outcome = ExactOutcome.skipped(f"the exact job failed: {short_error(str(e))}")


# ------------------------------------------------------------------------------ the report


def merge_queries(queries: Sequence[dict[str, Any]], outcome: ExactOutcome | None) -> None:
    """Add :data:`QUERY_KEYS` to every query entry of summary.json (in place; NaN without an
    exact answer)."""
    per = (
        query_errors(outcome.windows, {q["name"]: q["kind"] for q in queries})
        if outcome is not None and outcome.computed
        else {}
    )
    for q in queries:
        q.update(per.get(q["name"], dict.fromkeys(QUERY_KEYS, math.nan)))


def write_files(out: Path, outcome: ExactOutcome | None) -> list[str]:
    """``exact_windows.csv`` and ``sic_error.png`` (window SIC against error, per kind) when
    the exact answers were computed; the file names written."""
    if outcome is None or not outcome.computed or not len(outcome.windows):
        return []
    w = outcome.windows
    write_csv(
        out / "exact_windows.csv",
        w.assign(window_start=w["window_start"].astype(str)).to_dict("records"),
    )
    series = {
        f"{kind} ({g['metric'].iloc[0]})": (g["sic_window"].tolist(), g["error"].tolist())
        for kind, g in w.groupby("kind", sort=False)
    }
    line_plot(
        out / "sic_error.png", series, scatter=True,
        title="Error against the exact answer vs SIC, per result window",
        xlabel="window SIC (result SIC / arrived SIC)", ylabel="window error (metric of its kind)",
    )  # fmt: skip
    return ["exact_windows.csv", "sic_error.png"]


def section(summary: Mapping[str, Any]) -> str:
    """The report's "Error against the exact answer" section from summary.json's entries."""
    ex = summary.get("exact")
    if not ex or not ex.get("computed"):
        why = (ex or {}).get("reason") or "not computed"
        return f"Not computed: {why}. Every query's `error_mean` and `spearman_sic_error` are null."
    spans = ex.get("spans") or []
    what = (
        f"every window up to t = {num(ex['until_s'], 3)} s"
        if ex.get("share", 1) >= 1 - 1e-9
        else f"{len(spans)} evenly spaced spans of source time ({num(100 * ex['share'], 2)} % "
        f"of the run up to t = {num(ex['until_s'], 3)} s: "
        + ", ".join(f"{num(a, 4)}-{num(b, 4)} s" for a, b in spans)
        + "; the whole run would have exceeded the row budget of the job, `--exact-rows`)"
    )
    head = (
        f"After the streaming queries stopped, the node's keep-all batch job recomputed {what} "
        f"over the same input with nothing shed and "
        f"compared {ex['windows']:,} windows: {num(ex['wall_s'], 3)} s of wall time, "
        f"{num(ex['cpu_s'], 3)} CPU seconds (driver, JVM and Python workers). None of it ran "
        "while the node streamed. Window SIC is the window's result SIC over the SIC that "
        "arrived in it (1: nothing lost); `spearman_sic_error` is Spearman's rho between window "
        "SIC and window error over the run (undefined when either is constant). Every window is "
        "in `exact_windows.csv`.\n\n"
    )
    cols = ("error_metric", "error_windows", "windows_without_result", "sic_window_min",
            "sic_window_max", "error_mean", "spearman_sic_error", "groups", "missing_groups")  # fmt: skip
    rows = [
        {"query": q["name"], "kind": q["kind"], **{c: _cell(q.get(c)) for c in cols}}
        for q in summary["queries"]
    ]
    kinds = [
        {"kind": k, **{c: _cell(v.get(c)) for c in ("queries", *cols)}}
        for k, v in ex.get("kinds", {}).items()
    ]
    return (
        head
        + markdown_table(rows)
        + "\n\nPooled per query kind:\n\n"
        + markdown_table(kinds)
        + "\n\n![window SIC against window error](sic_error.png)"
    )


def _cell(x: Any) -> str:
    return x if isinstance(x, str) else num(x, 3)
