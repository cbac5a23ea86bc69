"""The report of one ``spillway run``: summary.json, CSV tables, PNG plots and report.md.

Everything is computed from what the node recorded: its per-interval history
(:class:`~spillway.status.IntervalRecord`), its final :class:`~spillway.status.NodeSnapshot` and
its result rows (``Node.results()``). Nothing is typed in by hand.

Definitions used throughout:

- *steady part*: the intervals from one source time window (``stw_s``) after the first interval
  on, because a query's SIC (THEMIS Eq. 4) sums results over one STW and is still filling before
  that. Runs shorter than that use every interval.
- *capacity*: ``capacity_tuples_per_s`` is the controller's estimate (what it budgeted per
  second of the steady part); ``capacity_measured_tuples_per_s`` what the node really achieved:
  rows processed per second of micro-batch time (Spark's ``batchDuration``). *Processed* is
  rows processed per second of the steady part. *Utilisation* is micro-batch time over the
  time the controller budgeted (``headroom`` of each interval a decision covered): 1 means the
  batches used exactly their budget, above 1 they overran it.
- *overload*: ``overload_requested`` is the configured factor (None without calibration),
  ``overload_measured`` the arrival rate over ``capacity_measured_tuples_per_s``.
- *Jain's index* (THEMIS §7.2): ``(sum x)^2 / (n sum x^2)`` over the queries' SIC values;
  ``jain`` is taken over each query's mean SIC of the steady part, ``jain_interval_mean`` is the
  mean of the per-interval index.
- *kept share*: per query, its own tuples kept over its tuples decided in the steady part
  (``rows_kept / rows_in``, both counted there).
- *query SIC*: per interval the SIC measured at the decision (THEMIS Eq. 4 over the query's
  latest complete STW, :mod:`spillway.quality.stw_account`); ``sic_mean`` its mean over the
  steady part.
- *feeds that end* (a replayed file without ``loop``): a query's figures cover the intervals
  before its feed ended, the node's those before the last feed ended; ``feeds_ended`` lists
  when.
- *latency*: from a window's last input arrival to its result (:mod:`spillway.spark.sink`), per
  result window, p95 over the windows that end in the steady part; the target is the query's
  ``latency_target_s`` or, by default, 3 trigger intervals plus the window length
  (``latency_bound_s`` is that bound for the longest window). Window times are counted from
  the first result window of the run, which starts at feed time 0; a window belongs to the
  first interval at or after its end.
- *groups* (policies that decide per group, CoD): ``groups_mean`` is the mean number of
  distinct groups among a query's tuples decided per interval of the steady part,
  ``missing_groups_mean`` the mean number of those of which nothing was kept (CoD §VII-C2's
  "missing groups"), and ``unseen_groups_mean`` the mean number estimated to have arrived
  without a tuple in a bounded group read's sample (lost unseen, :mod:`spillway.quality.unseen`;
  0 when every arrival was read); NaN for other policies.
- *error against the exact answer* (:mod:`spillway.run_exact`, after the run unless
  ``--no-exact``): per query ``error_mean``, ``spearman_sic_error`` (window SIC against window
  error) and, for grouped queries under every policy, ``groups`` and ``missing_groups`` per
  window counted against the exact answer; ``exact`` says how long the job took (wall and CPU
  seconds) or why it did not run.

Examples
--------
>>> import tempfile, pathlib, json
>>> from spillway.config import NodeConfig, QuerySpec
>>> from spillway.status import IntervalRecord, NodeSnapshot
>>> cfg = NodeConfig(queries=(QuerySpec(name="q1", kind="avg", feed="gaussian"),), stw_s=2.0)
>>> hist = [IntervalRecord(t=float(t), capacity_tuples=100.0, arrived_tuples=300,
...                        admitted_tuples=100, processed_tuples=90, batch_s=0.5,
...                        query_sic={"q1": 0.3}, query_kept={"q1": 1 / 3},
...                        query_latency_s={"q1": 1.5}) for t in range(1, 11)]
>>> snap = NodeSnapshot(t=10.0, capacity_tuples_per_s=100.0, processed_tuples_per_s=90.0,
...                     jain=1.0, policy="balance-sic")
>>> out = pathlib.Path(tempfile.mkdtemp())
>>> write_run_report(out, config=cfg, history=hist, snapshot=snap, duration_s=10).name
'report.md'
>>> s = json.loads((out / "summary.json").read_text())
>>> s["utilisation"], s["capacity_measured_tuples_per_s"], s["latency_bound_s"]
(0.625, 180.0, 4.0)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spillway.config import NodeConfig, QuerySpec
from spillway.quality.metrics import jain_index
from spillway.reporting import line_plot, markdown_table, write_csv, write_report, write_summary
from spillway.run_exact import ExactOutcome, merge_queries, section, write_files
from spillway.status import IntervalRecord, NodeSnapshot, QueryStatus

#: Trigger intervals a result may take beyond its window before it counts as late.
LATENCY_TRIGGERS = 3


def finite_jain(values: Sequence[float] | np.ndarray) -> float:
    """Jain's index (:func:`spillway.quality.metrics.jain_index`) over the finite ``values``.

    Queries without a SIC value yet (NaN) are left out; NaN when none has one.

    >>> finite_jain([0.5, 0.5, float("nan")]), finite_jain([1.0, 0.0])
    (1.0, 0.5)
    """
    x = np.asarray(values, dtype=np.float64)
    return float(jain_index(x[np.isfinite(x)]))


def latency_target(q: QuerySpec, trigger_s: float) -> float:
    """The query's latency target: its own, or 3 trigger intervals plus its window.

    >>> latency_target(QuerySpec(name="q", kind="avg", feed="gaussian", window_s=2.0), 1.0)
    5.0
    """
    if q.latency_target_s is not None:
        return float(q.latency_target_s)
    return LATENCY_TRIGGERS * trigger_s + q.window_s


def _mean(xs: Sequence[float] | np.ndarray) -> float:
    a = np.asarray(xs, dtype=np.float64)
    a = a[np.isfinite(a)]
    return float(a.mean()) if a.size else math.nan


def _p95(xs: Sequence[float] | np.ndarray) -> float:
    a = np.asarray(xs, dtype=np.float64)
    a = a[np.isfinite(a)]
    return float(np.percentile(a, 95)) if a.size else math.nan


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


def interval_rows(
    history: Sequence[IntervalRecord],
    names: Sequence[str],
    trigger_s: float,
    headroom: float = 0.8,
) -> list[dict[str, Any]]:
    """One dict per interval: node counts, rates per second, budgeted and used batch time, and
    Jain over the queries' SIC."""
    rows = []
    prev_t: float | None = None
    for r in history:
        dt = trigger_s if prev_t is None or r.t <= prev_t else r.t - prev_t
        prev_t = r.t
        rows.append(
            {
                "t_s": r.t,
                "span_s": dt,
                "capacity_tuples": r.capacity_tuples,
                "arrived_tuples": r.arrived_tuples,
                "admitted_tuples": r.admitted_tuples,
                "processed_tuples": r.processed_tuples,
                "batch_s": r.batch_s,
                "budget_s": headroom * dt,
                "span": r.span,
                "overhead_s": r.overhead_s,
                "per_tuple_s": r.per_tuple_s,
                "per_arrived_s": r.per_arrived_s,
                "capacity_tuples_per_s": r.capacity_tuples / dt,
                "processed_tuples_per_s": r.processed_tuples / dt,
                "measured_tuples_per_batch_s": _ratio(r.processed_tuples, r.batch_s),
                "overloaded": r.arrived_tuples > r.capacity_tuples,
                "jain": finite_jain([r.query_sic.get(n, math.nan) for n in names]),
            }
        )
    return rows


def finished_intervals(history: Sequence[IntervalRecord]) -> int:
    """How many leading intervals finished: the trailing ones that admitted tuples but whose
    micro-batch never completed (nothing processed, no batch time: the node stopped during
    it) are left out of the rates.

    >>> from spillway.status import IntervalRecord as R
    >>> rec = lambda p, b: R(t=1.0, capacity_tuples=9.0, arrived_tuples=9, admitted_tuples=9,
    ...                      processed_tuples=p, batch_s=b)
    >>> finished_intervals([rec(9, 0.5), rec(0, 0.0), rec(0, 0.0)])
    1
    """
    n = len(history)
    while n and history[n - 1].processed_tuples == 0 and history[n - 1].batch_s == 0:
        n -= 1
    return n


def result_windows(results: pd.DataFrame | None, config: NodeConfig) -> pd.DataFrame:
    """One row per (query, window) of ``results``: when it ended, its SIC and its latency.

    Columns ``query``, ``window_start``, ``t_end_s`` (window end, seconds from the first result
    window), ``sic`` (result SIC of the window: summed over its rows, e.g. the 5 of a TOP-5),
    ``latency_s`` (the window's latency) and ``rows`` (result rows).
    """
    cols = ["query", "window_start", "t_end_s", "sic", "latency_s", "rows"]
    if results is None or len(results) == 0:
        return pd.DataFrame(columns=cols)
    g = results.groupby(["query", "window_start"], sort=True)
    w = g.agg(sic=("sic", "sum"), latency_s=("latency_s", "max"), rows=("sic", "size"))
    w = w.reset_index()
    if "window_end_feed_s" in results and results["window_end_feed_s"].notna().any():
        # the node's own feed-time end of each window (data time mapped back for replays)
        ends = results.groupby(["query", "window_start"], sort=True)["window_end_feed_s"].first()
        w["t_end_s"] = ends.to_numpy(dtype=np.float64)
        return w[cols]
    length = {q.name: q.window_s for q in config.queries}
    start = (w["window_start"] - w["window_start"].min()) / pd.Timedelta(seconds=1)
    w["t_end_s"] = start.to_numpy(dtype=np.float64) + w["query"].map(length).to_numpy(dtype=float)
    return w[cols]


def interval_latency(
    history: Sequence[IntervalRecord], windows: pd.DataFrame, name: str
) -> list[float]:
    """Latency of query ``name`` per interval: the interval record's value when the node gave
    one, else the worst latency of the result windows that ended in that interval."""
    recorded = [r.query_latency_s.get(name, math.nan) for r in history]
    if any(math.isfinite(x) for x in recorded) or not len(windows):
        return recorded
    w = windows[windows["query"] == name]
    t = np.array([r.t for r in history], dtype=np.float64)
    idx = np.searchsorted(t, w["t_end_s"].to_numpy(dtype=np.float64) - 1e-9, side="left")
    out = [math.nan] * len(history)
    for i, lat in zip(idx, w["latency_s"].to_numpy(dtype=np.float64), strict=True):
        if i < len(out) and math.isfinite(lat):
            out[i] = lat if not math.isfinite(out[i]) else max(out[i], lat)
    return out


def _steady_indices(
    history: Sequence[IntervalRecord], done: int, stw_s: float, until_s: float
) -> list[int]:
    """Finished intervals one STW after the first, up to ``until_s``; all finished ones (up to
    ``until_s``) when none is that late."""
    t0 = history[0].t if history else 0.0
    upto = [i for i in range(done) if history[i].t <= until_s + 1e-9]
    steady = [i for i in upto if history[i].t - t0 >= stw_s]
    return steady or upto


def summarise_run(
    *,
    config: NodeConfig,
    history: Sequence[IntervalRecord],
    snapshot: NodeSnapshot,
    results: pd.DataFrame | None = None,
    duration_s: float,
    interrupted: bool = False,
    failure: Mapping[str, Any] | None = None,
    calibration: Mapping[str, Any] | None = None,
    feeds_end_s: Mapping[str, float | None] | None = None,
    exact: ExactOutcome | None = None,
    dead_letters: Mapping[str, Mapping[str, int]] | None = None,
    log_lag: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """The numbers of a run, as written to ``summary.json`` (definitions in the module doc).

    Parameters
    ----------
    config : the node config the run used.
    history : the node's interval records, in time order.
    snapshot : the node's final snapshot.
    results : the node's result rows (``query``, ``window_start``, ``sic``, ``latency_s``, ...);
        None or empty: latencies come from the interval records instead.
    duration_s : the run length asked for.
    interrupted : the run was stopped early (Ctrl-C).
    failure : why the run failed (``plan``, ``phase``, ``error``...), None when it did not.
    calibration : what the capacity calibration measured (``Node.calibration``), if it ran.
    feeds_end_s : per query, the feed time its feed ended (None: never).
    exact : the after-run exact answers (:mod:`spillway.run_exact`); None: not computed.
    dead_letters : per query reading a log (a Kafka topic), its records set aside:
        ``malformed`` and ``late`` (``Node.dead_letters.counts()``); absent for other feeds.
    log_lag : per query reading a log, its consumer lag per partition at the end of the run
        (``NodeController.log_lag()``).
    """
    names = [q.name for q in config.queries]
    dead = dead_letters or {}
    ivs = interval_rows(history, names, config.trigger_s, config.headroom)
    done = finished_intervals(history)
    ends = {n: e for n, e in (feeds_end_s or {}).items() if e is not None and n in names}
    last_end = max(ends.values()) if len(ends) == len(names) and ends else math.inf
    steady = _steady_indices(history, done, config.stw_s, last_end)
    steady_from = history[steady[0]].t if steady else math.nan
    sel = [ivs[i] for i in steady]
    span = sum(r["span_s"] for r in sel)
    cap = sum(r["capacity_tuples"] for r in sel)
    proc = sum(r["processed_tuples"] for r in sel)
    batch = sum(r["batch_s"] for r in sel)
    budget = sum(r["budget_s"] for r in sel)
    arrived = sum(r["arrived_tuples"] for r in sel)
    measured_cap = _ratio(proc, batch)
    over = [r for r in sel if r["overloaded"] and r["capacity_tuples"] > 0]
    cap_err = [
        abs(r["processed_tuples"] - r["capacity_tuples"]) / r["capacity_tuples"] for r in over
    ]

    status: dict[str, QueryStatus] = {q.name: q for q in snapshot.queries}
    windows = result_windows(results, config)
    queries: list[dict[str, Any]] = []
    for q in config.queries:
        mine = _steady_indices(history, done, config.stw_s, ends.get(q.name, math.inf))
        hs = [history[i] for i in mine]
        q_from = hs[0].t if hs else math.nan
        sic = [r.query_sic.get(q.name, math.nan) for r in hs]
        st = status.get(q.name)
        counted = [r for r in hs if q.name in r.query_arrived]
        if counted:
            rows_in = sum(r.query_arrived[q.name] for r in counted)
            rows_kept = sum(r.query_admitted.get(q.name, 0) for r in counted)
            kept = _ratio(rows_kept, rows_in)
        else:  # records without counts: the mean per-interval share, the snapshot's counts
            rows_in = st.rows_in if st else 0
            rows_kept = st.rows_kept if st else 0
            kept = _mean([r.query_kept.get(q.name, math.nan) for r in hs])
        w = windows[windows["query"] == q.name]
        if len(w):
            lat = w["latency_s"]
            if math.isfinite(q_from) and (w["t_end_s"] >= q_from - 1e-9).any():
                lat = lat[w["t_end_s"] >= q_from - 1e-9]
            p95 = _p95(lat.to_numpy(dtype=np.float64))
        else:
            p95 = _p95([r.query_latency_s.get(q.name, math.nan) for r in hs])
        target = latency_target(q, config.trigger_s)
        grouped = [r for r in hs if q.name in r.query_groups]
        queries.append(
            {
                "name": q.name,
                "kind": q.kind,
                "feed": q.feed,
                "sources": q.n_sources,
                "arrival_rate_tuples_per_s": st.arrival_rate if st else math.nan,
                "sic_mean": _mean(sic),
                "sic_std": float(np.nanstd(sic)) if np.isfinite(sic).any() else math.nan,
                "kept_fraction": kept,
                "latency_p95_s": p95,
                "latency_target_s": target,
                "on_target": bool(math.isfinite(p95) and p95 <= target),
                "rows_in": int(rows_in),
                "rows_kept": int(rows_kept),
                "windows": int(len(w)),
                "feed_ended_s": ends.get(q.name),
                # per-group decisions (CoD): groups decided per interval, and those of which
                # nothing was kept (NaN when the policy did not decide per group)
                "groups_mean": _mean([r.query_groups[q.name] for r in grouped]),
                "missing_groups_mean": _mean([r.missing_groups[q.name] for r in grouped]),
                # groups estimated to have arrived unseen by a bounded group read (lost unseen;
                # 0 when every arrival was read; NaN when the policy did not decide per group)
                "unseen_groups_mean": _mean(
                    [r.query_groups_unseen.get(q.name, math.nan) for r in grouped]
                ),
                # records of a log set aside (not parsed, or late for their window)
                "malformed": dead.get(q.name, {}).get("malformed"),
                "late": dead.get(q.name, {}).get("late"),
                # a log's records not processed when the run ended, per partition
                "lag_at_end": dict((log_lag or {}).get(q.name, {})) or None,
            }
        )
    merge_queries(queries, exact)
    p95s = [q["latency_p95_s"] for q in queries if math.isfinite(q["latency_p95_s"])]
    arrival_rate = _ratio(arrived, span)
    return {
        "policy": config.policy,
        "seed": config.seed,
        "master": config.master,
        "duration_s": float(duration_s),
        "elapsed_s": snapshot.t,
        "interrupted": interrupted,
        "failed": failure is not None,
        "failure": dict(failure) if failure is not None else None,
        "intervals": len(history),
        "unfinished_intervals": len(history) - done,
        "steady_from_s": steady_from,
        "feeds_ended": ends,
        "jain": finite_jain([q["sic_mean"] for q in queries]),
        "jain_interval_mean": _mean([r["jain"] for r in sel]),
        "sic_mean": _mean([q["sic_mean"] for q in queries]),
        "capacity_tuples_per_s": _ratio(cap, span),
        "capacity_measured_tuples_per_s": measured_cap,
        "processed_tuples_per_s": _ratio(proc, span),
        "arrived_tuples_per_s": arrival_rate,
        "admitted_tuples_per_s": _ratio(sum(r["admitted_tuples"] for r in sel), span),
        "utilisation": _ratio(batch, budget),
        "busy_fraction": _ratio(batch, span),
        "overload_requested": config.overload,
        "overload_measured": _ratio(arrival_rate, measured_cap),
        "overloaded_intervals": len(over),
        "capacity_error_mean": _mean(cap_err),
        "latency_bound_s": LATENCY_TRIGGERS * config.trigger_s
        + max(q.window_s for q in config.queries),
        "latency_p95_max_s": max(p95s) if p95s else math.nan,
        "latency_misses": [q["name"] for q in queries if not q["on_target"]],
        "queries": queries,
        "calibration": dict(calibration) if calibration is not None else None,
        "exact": exact.as_dict() if exact is not None else None,
        "final_snapshot": {
            "t": snapshot.t,
            "capacity_tuples_per_s": snapshot.capacity_tuples_per_s,
            "processed_tuples_per_s": snapshot.processed_tuples_per_s,
            "jain": snapshot.jain,
            **({"classes": [c.as_dict() for c in snapshot.classes]} if snapshot.classes else {}),
        },
        "config": config.to_dict(),
    }


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "query"


def group_identical(
    series: Mapping[str, tuple[list[float], list[float]]], digits: int = 9
) -> dict[str, tuple[list[float], list[float]]]:
    """Merge the series that are identical (to ``digits``) into one, labelled with their names,
    so a plot shows one line per distinct series instead of overdrawing them.

    >>> s = {"a": ([1, 2], [0.5, 0.5]), "b": ([1, 2], [0.5, 0.5]), "c": ([1, 2], [1.0, 0.5])}
    >>> list(group_identical(s))
    ['a, b', 'c']
    >>> list(group_identical({f"q{i}": ([1], [1.0]) for i in range(6)}))
    ['q0, q1, q2, q3 and 2 more']
    """
    groups: dict[tuple[Any, ...], list[str]] = {}
    for name, (x, y) in series.items():
        key = (
            tuple(np.round(np.asarray(x, float), digits)),
            tuple(np.nan_to_num(np.round(np.asarray(y, float), digits), nan=np.inf)),
        )
        groups.setdefault(key, []).append(name)
    out = {}
    for members in groups.values():
        label = ", ".join(members[:4]) + (
            f" and {len(members) - 4} more" if len(members) > 4 else ""
        )
        out[label] = series[members[0]]
    return out


def _per_query_series(
    history: Sequence[IntervalRecord], names: Sequence[str], attr: str, scale: float = 1.0
) -> dict[str, tuple[list[float], list[float]]]:
    t = [r.t for r in history]
    return group_identical(
        {n: (t, [getattr(r, attr).get(n, math.nan) * scale for r in history]) for n in names}
    )


def _latency_series(
    history: Sequence[IntervalRecord], windows: pd.DataFrame, names: Sequence[str]
) -> dict[str, tuple[list[float], list[float]]]:
    """Per query: latency of every result window at its end time, else per interval."""
    if not len(windows):
        return _per_query_series(history, names, "query_latency_s")
    out = {}
    for n in names:
        w = windows[windows["query"] == n]
        out[n] = (w["t_end_s"].tolist(), w["latency_s"].astype(float).tolist())
    return out


def _plots(
    out: Path,
    config: NodeConfig,
    history: Sequence[IntervalRecord],
    ivs: list[dict[str, Any]],
    windows: pd.DataFrame,
) -> dict[str, str]:
    names = [q.name for q in config.queries]
    t = [r["t_s"] for r in ivs]
    targets: dict[float, list[str]] = {}
    for q in config.queries:
        targets.setdefault(latency_target(q, config.trigger_s), []).append(q.name)
    hlines = {
        (
            f"target {v:g} s"
            if len(targets) == 1
            else f"target {v:g} s ({', '.join(ns[:3])}{', ...' if len(ns) > 3 else ''})"
        ): v
        for v, ns in targets.items()
    }
    made = {
        "sic.png": line_plot(
            out / "sic.png",
            _per_query_series(history, names, "query_sic"),
            title="Result SIC per query (THEMIS Eq. 4, over the STW)",
            xlabel="time (s)",
            ylabel="SIC",
        ),
        "kept.png": line_plot(
            out / "kept.png",
            _per_query_series(history, names, "query_kept", 100.0),
            title="Kept share of arrived tuples per query",
            xlabel="time (s)",
            ylabel="kept (%)",
            ylim=(0.0, 105.0),
        ),
        "latency.png": line_plot(
            out / "latency.png",
            _latency_series(history, windows, names),
            title="Result latency per query (from a window's last arrival to its result)",
            xlabel="time (s)",
            ylabel="latency (s)",
            hlines=hlines,
        ),
        "jain.png": line_plot(
            out / "jain.png",
            {"Jain over query SIC": (t, [r["jain"] for r in ivs])},
            title="Fairness: Jain's index over the queries' SIC",
            xlabel="time (s)",
            ylabel="Jain's index",
            ylim=(0.0, 1.05),
        ),
        "capacity.png": line_plot(
            out / "capacity.png",
            {
                "arrived": (t, [r["arrived_tuples"] for r in ivs]),
                "admitted": (t, [r["admitted_tuples"] for r in ivs]),
                "estimated capacity": (t, [r["capacity_tuples"] for r in ivs]),
                "measured capacity (rows per batch second x budget)": (
                    t,
                    [r["measured_tuples_per_batch_s"] * r["budget_s"] for r in ivs],
                ),
            },
            title="Estimated capacity beside the capacity the batches achieved, per interval",
            xlabel="time (s)",
            ylabel="tuples per interval",
        ),
    }
    return {k: v.name for k, v in made.items()}


def _fmt(x: Any, unit: str = "", digits: int = 4) -> str:
    if isinstance(x, float) and not math.isfinite(x):
        return "n/a"
    if isinstance(x, float):
        return f"{x:,.{digits}g}{unit}" if abs(x) < 10**digits else f"{x:,.0f}{unit}"
    return f"{x}{unit}"


def _setup_text(s: Mapping[str, Any], config: NodeConfig) -> str:
    cal = s.get("calibration") or {}
    if config.overload is not None and cal.get("capacity_tuples_per_s") is not None:
        over = (
            f"the node first measured its capacity ({_fmt(cal['capacity_tuples_per_s'])} tuples "
            f"per second of batch time, {len(cal.get('rounds', []))} round(s), "
            f"{_fmt(cal.get('wall_s', math.nan), ' s')}), then scaled every query's rate so the "
            f"total arrival rate was {config.overload:g}x that capacity (measured over the "
            f"steady part: {_fmt(s['overload_measured'])}x)"
        )
    elif config.overload is not None:
        over = f"the run was to be {config.overload:g}x the capacity the node measured first"
    else:
        over = "query rates as configured (no overload scaling)"
    n_open = s["unfinished_intervals"]
    unfinished = (
        f" ({n_open} last interval(s) left out: their micro-batch had not finished at the stop)"
        if n_open
        else ""
    )
    stopped = " The run was interrupted (Ctrl-C); the numbers cover what ran." * s["interrupted"]
    ended = "".join(
        f" The feed of query `{n}` ended at t = {_fmt(t, ' s')} (a replayed file without "
        "`loop`); its figures cover the time before."
        for n, t in s.get("feeds_ended", {}).items()
    )
    return (
        f"Policy `{s['policy']}` on Spark master `{s['master']}`, seed {s['seed']}, trigger "
        f"(shedding) interval {config.trigger_s:g} s, source time window {config.stw_s:g} s, "
        f"headroom {config.headroom:g}; {over}. Asked for {s['duration_s']:g} s, ran "
        f"{_fmt(s['elapsed_s'], ' s')} over {s['intervals']} intervals; steady part from "
        f"t = {_fmt(s['steady_from_s'], ' s')}{unfinished}.{stopped}{ended}\n\n"
        + markdown_table(
            [
                {
                    "query": q.name,
                    "kind": q.kind,
                    "feed": q.feed,
                    "sources": q.n_sources,
                    "rate per source (t/s)": q.rate,
                    "profile": q.profile,
                    "window (s)": q.window_s,
                    "latency target (s)": latency_target(q, config.trigger_s),
                }
                for q in config.queries
            ]
        )
    )


def _failure_text(s: Mapping[str, Any]) -> str:
    f = s["failure"]
    phase = "measuring capacity" if str(f.get("phase", "")).startswith("calibrate") else "running"
    after = f.get("after_batch")
    where = f"plan `{f.get('plan')}` while {phase}" + (
        f", after micro-batch {after}" if after is not None else ""
    )
    return (
        f"**The run failed**: the streaming query of {where}. The numbers below cover what ran "
        f"before. Spark's error:\n\n```\n{str(f.get('error', '')).strip()[:4000]}\n```"
    )


def _report_sections(
    s: Mapping[str, Any], config: NodeConfig, plots: Mapping[str, str], files: Sequence[str]
) -> list[tuple[str, str]]:
    misses = s["latency_misses"]
    headline = markdown_table(
        [
            {"measure": m, "value": _fmt(s[k]) if k else str(len(misses))}
            for m, k in (
                ("Jain's index over mean query SIC", "jain"),
                ("mean query SIC", "sic_mean"),
                ("estimated capacity (tuples/s)", "capacity_tuples_per_s"),
                (
                    "measured capacity (tuples per second of batch time)",
                    "capacity_measured_tuples_per_s",
                ),
                ("processed (tuples/s)", "processed_tuples_per_s"),
                ("arrived (tuples/s)", "arrived_tuples_per_s"),
                ("overload requested", "overload_requested"),
                ("overload measured (arrived / measured capacity)", "overload_measured"),
                ("utilisation (batch time / budgeted time)", "utilisation"),
                ("latency bound (s)", "latency_bound_s"),
                ("worst p95 latency (s)", "latency_p95_max_s"),
                ("queries missing their target", ""),
            )
        ]
    ) + (f"\n\nMissed latency targets: {', '.join(misses)}." if misses else "")
    qtable = markdown_table(
        [{k: _fmt(v) for k, v in q.items() if k not in ("feed", "sources")} for q in s["queries"]]
    )
    capacity = (
        f"Over the steady part the cost model estimated {_fmt(s['capacity_tuples_per_s'])} "
        f"tuples/s; the node processed {_fmt(s['processed_tuples_per_s'])} tuples/s, at "
        f"{_fmt(s['capacity_measured_tuples_per_s'])} tuples per second of micro-batch time "
        f"(its measured capacity), using {_fmt(s['utilisation'])} of the batch time the "
        f"controller budgeted. In the {s['overloaded_intervals']} overloaded intervals (more "
        f"arrived than the estimate) mean |processed - estimated| / estimated = "
        f"{_fmt(s['capacity_error_mean'])}.\n\n"
        f"![estimated against measured capacity per interval]({plots['capacity.png']})"
    )
    over_time = "\n\n".join(
        f"![{cap}]({plots[f]})"
        for f, cap in (
            ("sic.png", "result SIC per query"),
            ("kept.png", "kept share per query"),
            ("latency.png", "latency per query against its target"),
            ("jain.png", "Jain's index over time"),
        )
    )
    sections = [("Setup", _setup_text(s, config))]
    if s.get("failure"):
        sections.append(("Failure", _failure_text(s)))
    classes = [("Priority classes", _classes_text(s["classes"]))] if s.get("classes") else []
    return sections + [
        ("Headline", headline),
        *classes,
        ("Queries", qtable),
        ("Error against the exact answer", section(s)),
        ("Estimated capacity against what was processed", capacity),
        ("Over time", over_time),
        ("Files", "\n".join(f"- `{f}`" for f in files)),
    ]


def _classes_text(c: Mapping[str, Any]) -> str:
    """The priority classes' table (loss, latency p95 against D) and the headroom plot."""
    rows = [
        {
            "class": k,
            "weight": v["weight"],
            "D (intervals)": v["target_intervals"],
            "D (s)": v["target_s"],
            "loss": _fmt(v["loss"]),
            "latency p95 (s)": _fmt(v["latency_p95_s"]),
            "p95 <= D": v["meets_target"],
        }
        for k, v in c["classes"].items()
    ]
    dilos = "with DILoS redistribution" if c["dilos"] else "separate, no redistribution"
    return (
        f"One {c['manager']} load manager per class, {dilos}; D is given in trigger intervals "
        f"of {c['trigger_s']:g} s. Latency: arrival to result, row-weighted over the batches "
        f"measured {c.get('latency_after_s', 0):g} s or more into the run.\n\n{markdown_table(rows)}\n\nHigher class, lower latency: "
        f"{c['latency_order']}.\n\n![each class manager's headroom H over time](headroom.png)"
    )


def write_run_report(
    out_dir: Path | str,
    *,
    config: NodeConfig,
    history: Sequence[IntervalRecord],
    snapshot: NodeSnapshot,
    results: pd.DataFrame | None = None,
    duration_s: float,
    interrupted: bool = False,
    failure: Mapping[str, Any] | None = None,
    calibration: Mapping[str, Any] | None = None,
    feeds_end_s: Mapping[str, float | None] | None = None,
    exact: ExactOutcome | None = None,
    dead_letters: Mapping[str, Mapping[str, int]] | None = None,
    log_lag: Mapping[str, Mapping[str, int]] | None = None,
    serving_cpu_s: Mapping[str, float] | None = None,
    classes: Mapping[str, Any] | None = None,
) -> Path:
    """Write the report folder of a run and return the path of its ``report.md``.

    Files: ``summary.json`` (:func:`summarise_run`), ``intervals.csv`` (one row per interval),
    ``queries/<name>.csv`` (per interval: SIC, kept share and latency of that query, see
    :func:`interval_latency`),
    ``results.csv`` (every result row, when there are results), the PNG plots ``sic``,
    ``kept``, ``latency``, ``jain`` and ``capacity``, with ``exact`` computed
    ``exact_windows.csv`` and ``sic_error.png`` (:func:`spillway.run_exact.write_files`), and
    ``report.md`` embedding them (with a "Failure" section saying where, when ``failure`` is
    given). ``serving_cpu_s``, the CPU seconds the dashboard and the metrics endpoint took in
    the driver (:meth:`spillway.watch.RunWatch.serving_cpu_s`), goes into ``summary.json``
    as is when any was served. With priority classes (``classes``, :meth:`ClassControl.summary
    <spillway.spark.class_control.ClassControl.summary>`) summary.json gains ``classes`` (per
    class loss, latency p95 against ``D`` and the manager's headroom over time) and the folder
    ``classes.csv`` and ``headroom.png``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarise_run(
        config=config,
        history=history,
        snapshot=snapshot,
        results=results,
        duration_s=duration_s,
        interrupted=interrupted,
        failure=failure,
        calibration=calibration,
        feeds_end_s=feeds_end_s,
        exact=exact,
        dead_letters=dead_letters,
        log_lag=log_lag,
    )
    if serving_cpu_s:
        summary["serving_cpu_s"] = dict(serving_cpu_s)
    if classes is not None:
        summary["classes"] = dict(classes)
    files = [write_summary(out, summary).name]
    if classes is not None:
        files += _class_files(out, classes)
    names = [q.name for q in config.queries]
    ivs = interval_rows(history, names, config.trigger_s, config.headroom)
    files.append(write_csv(out / "intervals.csv", ivs).name)
    windows = result_windows(results, config)
    for n in names:
        lat = interval_latency(history, windows, n)
        rows = [
            {
                "t_s": r.t,
                "sic": r.query_sic.get(n, math.nan),
                "sic_projected": r.query_sic_projected.get(n, math.nan),
                "kept_fraction": r.query_kept.get(n, math.nan),
                "arrived": r.query_arrived.get(n, 0),
                "kept": r.query_admitted.get(n, 0),
                "latency_s": lat[i],
            }
            for i, r in enumerate(history)
        ]
        path = write_csv(out / "queries" / f"{_file_name(n)}.csv", rows)
        files.append(f"queries/{path.name}")
    if results is not None and len(results):
        results.to_csv(out / "results.csv", index=False)
        files.append("results.csv")
    plots = _plots(out, config, history, ivs, windows)
    files += list(plots.values())
    files += write_files(out, exact)
    title = f"spillway run: {config.policy}, {len(config.queries)} queries"
    if failure is not None:
        title += " (failed)"
    return write_report(out, title, _report_sections(summary, config, plots, files + ["report.md"]))


def _class_files(out: Path, classes: Mapping[str, Any]) -> list[str]:
    """``classes.csv`` (per class: weight, D, loss, latency p95 and mean) and ``headroom.png``
    (each class manager's headroom estimate over time)."""
    per = classes["classes"]
    rows = [
        {
            "class": c,
            "weight": v["weight"],
            "target_s": v["target_s"],
            "loss": v["loss"],
            "latency_p95_s": v["latency_p95_s"],
            "latency_mean_s": v["latency_mean_s"],
            "meets_target": v["meets_target"],
        }
        for c, v in per.items()
    ]
    csv_name = write_csv(out / "classes.csv", rows).name
    series = {
        f"class {c} (D = {v['target_s']:g} s)": (
            [p[0] for p in v["headroom"]],
            [p[1] for p in v["headroom"]],
        )
        for c, v in per.items()
    }
    dilos = "on" if classes["dilos"] else "off"
    png = line_plot(
        out / "headroom.png",
        series,
        title=f"{classes['manager']} per class, DILoS {dilos}",
        xlabel="feed time (s)",
        ylabel="headroom H (CPU-s/s)",
    )
    return [csv_name, png.name]
