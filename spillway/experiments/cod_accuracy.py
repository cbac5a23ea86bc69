"""``cod-accuracy``: error of Uniform and CoD shedding against the exact answer (CoD Figs. 9-10).

Setup (CoD §VII-B/C3-C4, Table III, scaled). Three workloads, each over sliding windows and
several seeds (CoD repeats every experiment 5 times, §VII-A), shed at every ``b`` by every
policy variant, window by window:

============ ==================== ============================ =============== ===============
workload     stand-in for         query                        window / slide  tuples / window
============ ==================== ============================ =============== ===============
``taxi``     DEBS 2015 (taxi)     mean fare per route          30 / 10 (min→s) ~100K
``tasks``    GCM task events      mean CPU request per class   60 / 30         ~320K
``packets``  DEC packet trace     mean packet size (scalar)    45 / 15 s       ~46K
============ ==================== ============================ =============== ===============

Per window the policy decides from the window's own concept only (CoD never uses history): the
backlog has one lane per group with the group frequencies as counts (``np.bincount``) and the
per-group mean/variance as stats; ``decide`` returns keep counts per group; which tuples of a
group are kept is a uniform random choice (random priorities, the same for every ``b`` and
variant, so the samples are nested). The exact answer is the window with nothing shed. Errors
are CoD's: relative error (scalar) and the mean over the exact groups of the per-group relative
error with a missing group counted 100 % (:mod:`spillway.quality.concept`); reported as the
mean and the 95th percentile over windows, and the mean ± std over seeds.

The variants (:data:`VARIANTS`, labelled in every table and plot by :data:`LABELS`):

- ``uniform``: every tuple kept with probability ``1 - b`` (CoD Alg. 1);
- ``cod``: **CoD at the budget**: exactly ``1 - b`` of the window kept
  (``over_budget="smallest-first"``); when a window holds more groups than the budget, the
  smallest groups get one tuple each and the others go missing (``missing_groups_cod``);
- ``cod_keep_one``: CoD keeping one tuple of every group even past the budget
  (``over_budget="keep-all"``): the paper's "zero missing groups", at a processed volume above
  ``1 - b`` (``kept_fraction_cod_keep_one``); its zero missing groups hold by construction;
- ``uniform_keep_one``: Uniform at the keep-one variant's kept fraction: in every window it
  keeps exactly as many tuples as ``cod_keep_one`` kept there (a uniform random sample of that
  size), so the keep-one variant is compared with Uniform at the same volume, as ``cod`` is
  compared with ``uniform`` at ``1 - b``;
- ``cod_proportional``: CoD at the budget with the paper's proportional allocation.

Both CoD variants are checked against the paper's claims at b = 0.98 (:func:`checks_of`), each
beside Uniform at the same kept fraction (:func:`side_by_side`, in the report's "Paper vs this
run"). The paper's "zero missing groups" is a check only where it can fail: a variant that
missed no group reports it not applicable (by construction).

Examples
--------
>>> import tempfile
>>> tiny = CodAccuracyConfig(seeds=(0,), windows=2, workloads=("packets",), b_values=(0.9,),
...                          scalar_b_values=(0.9,), packets_window_tuples=4000)
>>> s = run(tiny, tempfile.mkdtemp())
>>> [(c["workload"], c["b"], c["missing_groups_cod"]) for c in s["cases"]]
[('packets', 0.9, 0.0)]
>>> [(c["name"], c["verdict"]) for c in s["checks"]]
[('packets_abs_diff_le_0.02', 'not applicable')]
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from spillway.errors import ConfigError, UnknownNameError
from spillway.experiments.checks import FAIL, Check, by_construction, compare, not_applicable
from spillway.experiments.framework import Analysis, Experiment, Figure
from spillway.feeds.base import Feed
from spillway.feeds.packets import PacketFeed
from spillway.feeds.tasks import TaskFeed
from spillway.feeds.taxi import TaxiFeed
from spillway.policies.base import Backlog, Policy
from spillway.policies.cod import CoD
from spillway.policies.uniform import Uniform
from spillway.quality.concept import GroupStats, group_stats, grouped_error, relative_error
from spillway.reporting import markdown_table, num

NAME = "cod-accuracy"
DESCRIPTION = "CoD Figs. 9-10: error of uniform vs cod shedding on taxi, tasks and packets"

#: Workload → (query kind, window length in slides). Windows/slides follow CoD §VII-B, with
#: minutes scaled to seconds for taxi and tasks.
WORKLOADS: dict[str, tuple[str, int]] = {
    "taxi": ("grouped", 3),
    "tasks": ("grouped", 2),
    "packets": ("scalar", 3),
}
#: The policy variants evaluated: name → CoD settings (None = Uniform).
VARIANTS: dict[str, dict[str, Any] | None] = {
    "uniform": None,
    "cod": {"over_budget": "smallest-first", "allocation": "equal"},
    "cod_keep_one": {"over_budget": "keep-all", "allocation": "equal"},
    "uniform_keep_one": None,
    "cod_proportional": {"over_budget": "smallest-first", "allocation": "proportional"},
}
#: Variants that keep, in every window, as many tuples as another variant did there: variant →
#: the variant whose per-window kept count it takes (a Uniform sample of that size).
MATCHED: dict[str, str] = {"uniform_keep_one": "cod_keep_one"}
#: How each variant is named in tables and plots.
LABELS: dict[str, str] = {
    "uniform": "Uniform (1 − b kept)",
    "cod": "CoD at the budget (exactly 1 − b kept)",
    "cod_keep_one": "CoD keep-one-per-group (over the budget)",
    "uniform_keep_one": "Uniform at keep-one's kept fraction",
    "cod_proportional": "CoD at the budget, proportional allocation",
}
#: Calibration settings the sensitivity sweep may vary.
_SENSITIVE = ("taxi_fare_cv", "taxi_zipf_s", "tasks_zipf_s", "tasks_cpu_cv")
#: What the paper reported (CoD §VII-C3/C4, text only: the figures' values are not in its text).
PAPER = {
    "packets": "DEC, b = 0.99: Uniform ≈ CoD (CoD degenerates to a uniform sample)",
    "tasks": "GCM, b = 0.98: Uniform > 40 % avg error, CoD < 10 %, no missing groups",
    "taxi": "DEBS, b = 0.98: Uniform > 80 %, CoD avg and p95 ≈ 10 %; Fig. 10: Uniform's error "
    "falls ~linearly with the data processed, CoD at 2 % beats Uniform at 50 %",
}


@dataclass(frozen=True, kw_only=True)
class CodAccuracyConfig:
    """Settings of ``cod-accuracy``.

    Parameters
    ----------
    seeds : feed and policy seeds (CoD repeats every experiment 5 times, §VII-A).
    windows : sliding windows evaluated per seed and workload (>= 30 for the paper's claims).
    workloads : subset of ``taxi``, ``tasks``, ``packets``.
    b_values : shed fractions for the grouped workloads (CoD Fig. 10).
    scalar_b_values : shed fractions for ``packets`` (Fig. 9 used 0.99 for DEC).
    taxi_window_tuples, tasks_window_tuples, packets_window_tuples : mean tuples per window
        (CoD Table III: ~100K, 320K, 46K).
    taxi_routes, taxi_zipf_s, taxi_fare_cv : calibration of the DEBS stand-in.
    tasks_classes, tasks_zipf_s, tasks_cpu_cv : calibration of the GCM stand-in.
    n_min : CoD's per-group floor.
    variants : policy variants evaluated (:data:`VARIANTS`; must include uniform and cod; a
        variant of :data:`MATCHED` comes after the variant whose kept counts it takes).
    sensitivity : (calibration setting, values) pairs re-run at b = 0.98 with the first seed and
        ``sensitivity_windows`` windows, to record how the stand-ins' calibration moves the errors.

    >>> CodAccuracyConfig(windows=0)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: windows must be an int >= 1, got 0
    """

    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    windows: int = 30
    workloads: tuple[str, ...] = ("taxi", "tasks", "packets")
    b_values: tuple[float, ...] = (0.98, 0.90, 0.75, 0.50)
    scalar_b_values: tuple[float, ...] = (0.99, 0.98, 0.90, 0.75, 0.50)
    taxi_window_tuples: int = 100_000
    tasks_window_tuples: int = 320_000
    packets_window_tuples: int = 46_000
    taxi_routes: int = 3000
    taxi_zipf_s: float = 1.2
    taxi_fare_cv: float = 0.1
    tasks_classes: int = 40
    tasks_zipf_s: float = 2.0
    tasks_cpu_cv: float = 0.25
    n_min: int = 1
    variants: tuple[str, ...] = field(default_factory=lambda: tuple(VARIANTS))
    sensitivity: tuple[tuple[str, tuple[float, ...]], ...] = (
        ("taxi_fare_cv", (0.05, 0.1, 0.15, 0.25)),
        ("taxi_zipf_s", (1.0, 1.2, 1.5)),
        ("tasks_zipf_s", (1.5, 2.0, 2.5, 3.0)),
    )
    sensitivity_windows: int = 5

    def __post_init__(self) -> None:
        object.__setattr__(self, "seeds", tuple(self.seeds))
        object.__setattr__(self, "workloads", tuple(self.workloads))
        object.__setattr__(self, "b_values", tuple(float(b) for b in self.b_values))
        object.__setattr__(self, "scalar_b_values", tuple(float(b) for b in self.scalar_b_values))
        object.__setattr__(self, "variants", tuple(self.variants))
        if not self.seeds or any(not isinstance(s, int) or s < 0 for s in self.seeds):
            raise ConfigError(f"seeds must be non-negative ints (at least one), got {self.seeds!r}")
        object.__setattr__(
            self,
            "sensitivity",
            tuple((str(k), tuple(float(x) for x in v)) for k, v in self.sensitivity),
        )
        for key, _ in self.sensitivity:
            if key not in _SENSITIVE:
                raise UnknownNameError(
                    f"sensitivity setting must be one of {', '.join(_SENSITIVE)}, got {key!r}"
                )
        for name in ("windows", "taxi_window_tuples", "tasks_window_tuples",
                     "packets_window_tuples", "taxi_routes", "tasks_classes", "n_min",
                     "sensitivity_windows"):  # fmt: skip
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConfigError(f"{name} must be an int >= 1, got {v!r}")
        for w in self.workloads:
            if w not in WORKLOADS:
                raise UnknownNameError(f"workload must be one of {', '.join(WORKLOADS)}, got {w!r}")
        for v in self.variants:
            if v not in VARIANTS:
                raise UnknownNameError(f"variant must be one of {', '.join(VARIANTS)}, got {v!r}")
        if "uniform" not in self.variants or "cod" not in self.variants:
            raise ConfigError("variants must include 'uniform' and 'cod' (the compared pair)")
        for v, of in MATCHED.items():
            if v in self.variants and of not in self.variants[: self.variants.index(v)]:
                raise ConfigError(
                    f"variant {v!r} keeps as many tuples as {of!r}: list {of!r} before it"
                )
        for b in self.b_values + self.scalar_b_values:
            if not 0.0 <= b < 1.0:
                raise ConfigError(f"every b must be a shed fraction in [0, 1), got {b!r}")


def make_config(quick: bool = False, seed: int = 0) -> CodAccuracyConfig:
    """The full run (30 windows, 5 seeds) or a quick one (10 windows, 2 seeds), seeds from ``seed``.

    >>> make_config(quick=True, seed=3).seeds
    (3, 4)
    """
    if quick:
        return CodAccuracyConfig(seeds=(seed, seed + 1), windows=10)
    return CodAccuracyConfig(seeds=tuple(seed + i for i in range(5)))


# ---------------------------------------------------------------------------- data
def _feed(cfg: CodAccuracyConfig, workload: str, seed: int) -> tuple[Feed, float, float]:
    """The workload's feed, its window length and slide (s)."""
    if workload == "taxi":
        win, slide = 30.0, 10.0
        return (
            TaxiFeed(
                n_sources=1, rate=cfg.taxi_window_tuples / win, seed=seed, epoch_s=slide,
                n_routes=cfg.taxi_routes, zipf_s=cfg.taxi_zipf_s, fare_cv=cfg.taxi_fare_cv,
            ),
            win, slide,
        )  # fmt: skip
    if workload == "tasks":
        win, slide = 60.0, 30.0
        return (
            TaskFeed(
                n_sources=1, rate=cfg.tasks_window_tuples / win, seed=seed, epoch_s=slide,
                n_classes=cfg.tasks_classes, zipf_s=cfg.tasks_zipf_s, cpu_cv=cfg.tasks_cpu_cv,
            ),
            win, slide,
        )  # fmt: skip
    win, slide = 45.0, 15.0
    return (
        PacketFeed(n_sources=1, rate=cfg.packets_window_tuples / win, seed=seed, epoch_s=slide),
        win,
        slide,
    )


def _policy(variant: str, kind: str, b: float, seed: int, n_min: int) -> Policy:
    if variant in MATCHED:
        return Uniform(seed=seed)  # b from the capacity: exactly the matched variant's count
    opts = VARIANTS[variant]
    if opts is None:
        return Uniform(b=b, seed=seed)
    return CoD(kind=kind, b=b, seed=seed, n_min=n_min, **opts)


def _window_backlog(stats: GroupStats) -> Backlog:
    """One query, one lane per group: counts = group frequencies, stats = the group moments."""
    g = stats.n_groups
    n = max(int(stats.count.sum()), 1)
    return Backlog(
        lane_query=np.zeros(g, np.int64),
        lane_source=np.zeros(g, np.int64),
        count=stats.count,
        tuple_sic=np.full(g, 1.0 / n),
        query_sic=np.zeros(1),
        lane_group=stats.keys,
        stats={"mean": stats.mean, "var": stats.var},
    )


def evaluate_window(
    keys: np.ndarray,
    values: np.ndarray,
    kind: str,
    policies: dict[tuple[str, float], Policy],
    rng: np.random.Generator,
) -> list[dict[str, Any]]:
    """Shed one window with every (variant, b) policy and measure the error against exact.

    Parameters
    ----------
    keys, values : the window's tuples.
    kind : ``"grouped"`` or ``"scalar"``.
    policies : (variant, b) → policy (b is in the policy's config). A variant of
        :data:`MATCHED` is given, as its capacity, the tuples its partner kept in this window
        (the partner must come before it).
    rng : draws the random priorities that pick which tuples of a group are kept.

    Returns
    -------
    list of dict
        One row per (variant, b): ``variant``, ``b``, ``error``, ``missing``, ``n_groups``,
        ``kept_fraction``.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> k = np.repeat(np.arange(50), 20); v = np.full(1000, 3.0)
    >>> pol = {("cod", 0.9): CoD(kind="grouped", b=0.9), ("uniform", 0.9): Uniform(b=0.9)}
    >>> rows = evaluate_window(k, v, "grouped", pol, rng)
    >>> [(r["variant"], r["error"], r["missing"], r["kept_fraction"]) for r in rows][0]
    ('cod', 0.0, 0, 0.1)

    Uniform matched to the keep-one variant keeps, window by window, what keep-one kept:

    >>> k = np.repeat(np.arange(300), 5); v = rng.normal(10.0, 1.0, 1500)
    >>> pol = {("cod_keep_one", 0.98): _policy("cod_keep_one", "grouped", 0.98, 0, 1),
    ...        ("uniform_keep_one", 0.98): _policy("uniform_keep_one", "grouped", 0.98, 0, 1)}
    >>> [(r["variant"], r["kept_fraction"], r["missing"])
    ...  for r in evaluate_window(k, v, "grouped", pol, rng)]
    [('cod_keep_one', 0.2, 0), ('uniform_keep_one', 0.2, 102)]
    """
    n = keys.shape[0]
    rows: list[dict[str, Any]] = []
    if kind == "scalar":
        exact = float(values.mean())
        perm = rng.permutation(n)
        prefix = np.concatenate(([0.0], np.cumsum(values[perm])))
        one = np.zeros(1, np.int64)
        bl = Backlog(
            lane_query=one, lane_source=one, count=np.array([n]), tuple_sic=np.array([1.0 / n]),
            query_sic=np.zeros(1),
            stats={"mean": np.array([exact]), "var": np.array([float(values.var())])},
        )  # fmt: skip
        for (variant, b), pol in policies.items():
            k = int(pol.decide(bl, (1.0 - b) * n).keep.sum())
            est = prefix[k] / k if k else None
            rows.append(
                {"variant": variant, "b": b, "error": relative_error(exact, est),
                 "missing": int(k == 0), "n_groups": 1, "kept_fraction": k / n}
            )  # fmt: skip
        return rows
    st = group_stats(keys, values)
    bl = _window_backlog(st)
    prio: np.ndarray = rng.random((n,))
    order = np.lexsort((prio, st.inverse))
    g_sorted = st.inverse[order]
    v_sorted = values[order]
    start = np.concatenate(([0], np.cumsum(st.count)[:-1]))
    rank = np.arange(n) - start[g_sorted]  # position of each tuple within its group
    kept: dict[tuple[str, float], int] = {}
    for (variant, b), pol in policies.items():
        cap = kept[(MATCHED[variant], b)] if variant in MATCHED else (1.0 - b) * n
        keep = pol.decide(bl, cap).keep
        kept[(variant, b)] = int(keep.sum())
        mask = rank < keep[g_sorted]
        cnt = np.bincount(g_sorted[mask], minlength=st.n_groups)
        tot = np.bincount(g_sorted[mask], weights=v_sorted[mask], minlength=st.n_groups)
        have = cnt > 0
        err = grouped_error(st, st.keys[have], tot[have] / cnt[have])
        rows.append(
            {"variant": variant, "b": b, "error": err.mean, "missing": err.missing,
             "n_groups": err.n_groups, "kept_fraction": float(keep.sum()) / n}
        )  # fmt: skip
    return rows


def _points(cfg: CodAccuracyConfig, workload: str, seed: int) -> list[dict[str, Any]]:
    kind, slides = WORKLOADS[workload]
    feed, win, slide = _feed(cfg, workload, seed)
    horizon = (cfg.windows - 1) * slide + win
    n = int(feed.count(horizon)[0])
    idx = np.arange(n)
    t = feed.arrival_time(0, idx)
    p = feed.payload(0, idx)
    bs = cfg.scalar_b_values if kind == "scalar" else cfg.b_values
    policies: dict[tuple[str, float], Policy] = {}
    for j, variant in enumerate(cfg.variants):
        if kind == "scalar" and variant not in ("uniform", "cod"):
            continue  # the group variants are the same as cod (or uniform) on a scalar window
        for i, b in enumerate(bs):
            policies[(variant, b)] = _policy(variant, kind, b, seed * 1000 + 10 * j + i, cfg.n_min)
    rng = np.random.default_rng([seed, 7])
    out = []
    for w in range(cfg.windows):
        lo, hi = np.searchsorted(t, [w * slide, w * slide + win])
        rows = evaluate_window(p["key"][lo:hi], p["value"][lo:hi], kind, policies, rng)
        for r in rows:
            # Can a budget of (1 - b) of the window hold n_min tuples of every group?
            over = kind == "grouped" and r["n_groups"] * cfg.n_min > (1 - r["b"]) * (hi - lo)
            out.append(
                {"workload": workload, "seed": seed, "window": w, "tuples": int(hi - lo), **r,
                 "groups_over_budget": bool(over)}
            )  # fmt: skip
    return out


def measure(cfg: CodAccuracyConfig) -> dict[str, Any]:
    """Every window of every workload and seed shed by every variant at every ``b``, and the
    calibration sensitivity sweep."""
    points: list[dict[str, Any]] = []
    for workload in cfg.workloads:
        for seed in cfg.seeds:
            points += _points(cfg, workload, seed)
    return {"points": points, "sensitivity": _sensitivity(cfg)}


# ---------------------------------------------------------------------------- aggregation
def cases_of(points: list[dict[str, Any]], cfg: CodAccuracyConfig) -> list[dict[str, Any]]:
    """One record per (workload, b): per variant the mean and p95 error over windows, the std of
    the per-seed means, the mean missing groups and kept fraction; and the share of windows
    holding more groups than the budget (``windows_groups_over_budget``)."""
    cases = []
    for workload in cfg.workloads:
        kind = WORKLOADS[workload][0]
        bs = cfg.scalar_b_values if kind == "scalar" else cfg.b_values
        for b in bs:
            case: dict[str, Any] = {"workload": workload, "b": b, "kind": kind}
            for variant in cfg.variants:
                rows = [
                    r for r in points
                    if r["workload"] == workload and r["b"] == b and r["variant"] == variant
                ]  # fmt: skip
                if not rows:
                    continue
                err = np.array([r["error"] for r in rows])
                per_seed = [
                    np.mean([r["error"] for r in rows if r["seed"] == s])
                    for s in cfg.seeds
                    if any(r["seed"] == s for r in rows)
                ]
                case[f"error_{variant}"] = float(err.mean())
                case[f"error_{variant}_p95"] = float(np.percentile(err, 95))
                case[f"error_{variant}_seed_std"] = float(np.std(per_seed))
                case[f"missing_groups_{variant}"] = float(np.mean([r["missing"] for r in rows]))
                case[f"kept_fraction_{variant}"] = float(
                    np.mean([r["kept_fraction"] for r in rows])
                )
                case["groups_per_window"] = float(np.mean([r["n_groups"] for r in rows]))
                case["windows_groups_over_budget"] = float(
                    np.mean([r.get("groups_over_budget", False) for r in rows])
                )
                case["windows"] = len({(r["seed"], r["window"]) for r in rows})
            cases.append(case)
    return cases


#: The CoD variants set beside Uniform at the same kept fraction: CoD variant → that Uniform.
SAME_VOLUME: dict[str, str] = {"cod": "uniform", "cod_keep_one": "uniform_keep_one"}


def side_by_side(cases: list[dict[str, Any]], b: float) -> list[dict[str, Any]]:
    """CoD at the budget and CoD keep-one-per-group at shed fraction ``b``, each beside Uniform
    keeping the same fraction of the data: one labelled row per (grouped workload, CoD variant).

    >>> c = {"workload": "taxi", "b": 0.98, "kind": "grouped", "kept_fraction_cod": 0.02,
    ...      "error_cod": 0.31, "error_cod_p95": 0.35, "missing_groups_cod": 880.0,
    ...      "kept_fraction_uniform": 0.0201, "error_uniform": 0.83, "missing_groups_uniform": 2500.0}
    >>> [(r["CoD variant"], r["kept %"], r["Uniform: error"]) for r in side_by_side([c], 0.98)]
    [('CoD at the budget (exactly 1 − b kept)', 2.0, 0.83)]
    """
    rows = []
    for c in cases:
        if c["kind"] != "grouped" or c["b"] != b:
            continue
        for v, u in SAME_VOLUME.items():
            if f"error_{v}" not in c or f"error_{u}" not in c:
                continue
            rows.append({
                "workload": c["workload"], "CoD variant": LABELS[v],
                "kept %": 100 * c[f"kept_fraction_{v}"], "error": c[f"error_{v}"],
                "error p95": c[f"error_{v}_p95"], "missing groups": c[f"missing_groups_{v}"],
                "Uniform at the same kept %": LABELS[u],
                "Uniform: kept %": 100 * c[f"kept_fraction_{u}"],
                "Uniform: error": c[f"error_{u}"],
                "Uniform: missing groups": c[f"missing_groups_{u}"],
            })  # fmt: skip
    return rows


# ---------------------------------------------------------------------------- checks
#: The shed fraction of the paper's grouped claims (CoD Fig. 9: DEBS and GCM at b = 0.98).
B_CLAIM = 0.98


def checks_of(cases: list[dict[str, Any]], cfg: CodAccuracyConfig) -> list[Check]:
    """The paper's claims (CoD §VII-C3/C4), tested on CoD **at the budget** against Uniform.

    Per grouped workload at b = 0.98, for CoD at the budget (exactly ``1 - b`` kept) and for the
    keep-one-per-group variant, each against Uniform at the same kept fraction: CoD's error
    <= 0.10 and Uniform's >= 4x CoD's; and the paper's zero missing groups, where it can fail:
    a variant that missed groups fails it (at the budget: the windows held more groups than the
    budget), one that missed none is not applicable (CoD keeps every group whenever the budget
    holds one tuple of each, and the keep-one variant always does). Per scalar workload: CoD's
    and Uniform's errors within 0.02, reported not applicable (with one scalar query both keep
    about ``1 - b`` of one random order of the window). On taxi: CoD at 0.98 below Uniform at
    0.50 (Fig. 10).

    >>> c = {"workload": "taxi", "b": 0.98, "kind": "grouped", "error_cod": 0.31,
    ...      "error_uniform": 0.83, "missing_groups_cod": 880.0, "kept_fraction_cod": 0.02,
    ...      "kept_fraction_uniform": 0.02, "windows_groups_over_budget": 1.0,
    ...      "error_cod_keep_one": 0.08, "missing_groups_cod_keep_one": 0.0,
    ...      "kept_fraction_cod_keep_one": 0.029, "error_uniform_keep_one": 0.79,
    ...      "kept_fraction_uniform_keep_one": 0.029}
    >>> cfg = CodAccuracyConfig(workloads=("taxi",), b_values=(0.98,))
    >>> [(k.name, k.verdict) for k in checks_of([c], cfg)]  # doctest: +NORMALIZE_WHITESPACE
    [('taxi_b0.98_error_cod_le_0.1', 'fail'), ('taxi_b0.98_error_uniform_ge_4x_cod', 'fail'),
     ('taxi_b0.98_missing_groups_cod_zero', 'fail'),
     ('taxi_b0.98_error_cod_keep_one_le_0.1', 'pass'),
     ('taxi_b0.98_error_uniform_ge_4x_cod_keep_one', 'pass'),
     ('taxi_b0.98_missing_groups_cod_keep_one_zero', 'not applicable'),
     ('taxi_cod_b0.98_below_uniform_b0.5', 'not applicable')]
    """
    out: list[Check] = []
    by = {(c["workload"], c["b"]): c for c in cases}
    for w in cfg.workloads:
        kind = WORKLOADS[w][0]
        if kind == "grouped":
            out += _grouped_checks(w, by.get((w, B_CLAIM)))
            continue
        diffs = [
            f"{num(abs(by[(w, b)]['error_cod'] - by[(w, b)]['error_uniform']))} at b = {b:g}"
            for b in cfg.scalar_b_values
            if (w, b) in by
        ]
        out.append(
            not_applicable(
                f"{w}_abs_diff_le_0.02",
                "holds by construction: with one scalar query CoD's rule keeps (1 − b) of the "
                "window, as Uniform does (a binomial count), and both estimates are read from "
                "the same random order of the window's tuples, so they differ only by the few "
                f"tuples one keeps more (measured |difference| {', '.join(diffs) or 'none'})",
            )
        )
    if "taxi" in cfg.workloads:
        lo, hi = by.get(("taxi", B_CLAIM)), by.get(("taxi", 0.5))
        name = f"taxi_cod_b{B_CLAIM:g}_below_uniform_b0.5"
        if lo is None or hi is None:
            out.append(not_applicable(name, "b = 0.98 and b = 0.5 are not both in b_values"))
        else:
            out.append(
                compare(
                    name, lo["error_cod"], "<", hi["error_uniform"],
                    what=f"CoD at the budget, b = 0.98 ({num(100 * lo['kept_fraction_cod'], 3)} "
                    "% kept): error",
                )
            )  # fmt: skip
    return out


def _grouped_checks(w: str, c: dict[str, Any] | None) -> list[Check]:
    pre = f"{w}_b{B_CLAIM:g}"
    if c is None:
        why = f"b = {B_CLAIM:g}, the shed fraction of the paper's claim, is not in b_values"
        return [not_applicable(f"{pre}_{n}", why) for n in _GROUPED_CHECKS]
    out = [
        compare(f"{pre}_error_cod_le_0.1", c["error_cod"], "<=", 0.10,
                what=f"CoD at the budget ({_kept(c, 'cod')} kept): mean error"),
        compare(f"{pre}_error_uniform_ge_4x_cod", c["error_uniform"], ">=", 4 * c["error_cod"],
                what=f"Uniform's mean error at {_kept(c, 'uniform')} kept (the bound is 4x CoD "
                "at the budget's)"),
        _no_missing_group(f"{pre}_missing_groups_cod_zero", c, "cod"),
    ]  # fmt: skip
    if "error_cod_keep_one" not in c:
        why = "the keep-one-per-group variant (cod_keep_one) was not in variants"
        return out + [not_applicable(f"{pre}_{n}", why) for n in _GROUPED_CHECKS[3:]]
    if c.get("windows_groups_over_budget", 1.0) == 0.0:
        why = (f"no window held more groups than the {_kept(c, 'cod')} budget, so keep-one "
               "kept what CoD at the budget kept (the same rule): its checks above apply")  # fmt: skip
        return out + [not_applicable(f"{pre}_{n}", why) for n in _GROUPED_CHECKS[3:]]
    one = c["error_cod_keep_one"]
    out.append(compare(f"{pre}_error_cod_keep_one_le_0.1", one, "<=", 0.10,
                       what=f"CoD keep-one-per-group ({_kept(c, 'cod_keep_one')} kept): mean "
                       "error"))  # fmt: skip
    name = f"{pre}_error_uniform_ge_4x_cod_keep_one"
    if "error_uniform_keep_one" in c:
        out.append(compare(name, c["error_uniform_keep_one"], ">=", 4 * one,
                           what="Uniform's mean error at keep-one's kept fraction "
                           f"({_kept(c, 'uniform_keep_one')}; the bound is 4x keep-one's)"))  # fmt: skip
    else:
        out.append(not_applicable(name, "Uniform at keep-one's kept fraction (uniform_keep_one) "
                                  "was not in variants"))  # fmt: skip
    out.append(_no_missing_group(f"{pre}_missing_groups_cod_keep_one_zero", c, "cod_keep_one"))
    return out


#: The checks of a grouped workload at b = 0.98, after the ``{workload}_b0.98_`` prefix.
_GROUPED_CHECKS = (
    "error_cod_le_0.1",
    "error_uniform_ge_4x_cod",
    "missing_groups_cod_zero",
    "error_cod_keep_one_le_0.1",
    "error_uniform_ge_4x_cod_keep_one",
    "missing_groups_cod_keep_one_zero",
)


def _kept(c: dict[str, Any], variant: str) -> str:
    return f"{num(100 * c[f'kept_fraction_{variant}'], 3)} %"


def _no_missing_group(name: str, c: dict[str, Any], variant: str) -> Check:
    """The paper's "zero missing groups", where it can fail: a variant that missed groups fails;
    one that missed none is not applicable, because CoD misses a group only when the budget
    cannot hold one tuple of every group (then at the budget it must), and the keep-one variant
    never does (it exceeds the budget instead)."""
    missing = c[f"missing_groups_{variant}"]
    measured = f"{num(missing)} missing groups per window"
    budget = f"{num(100 * (1 - c['b']), 3)} %"
    if variant == "cod_keep_one":
        return by_construction(
            name, not _any_missing(missing),
            f"the keep-one variant keeps one tuple of every group whatever the budget; it kept "
            f"{_kept(c, variant)} of the data, the budget being {budget}", measured,
        )  # fmt: skip
    over = f"{num(100 * c.get('windows_groups_over_budget', 0.0), 3)} %"
    if _any_missing(missing):
        return Check(
            name=name, verdict=FAIL,
            why=f"CoD at the budget: {measured}; {over} of windows hold more groups than the "
            f"{budget} budget, and there no policy keeping exactly 1 − b can keep one tuple of "
            "every group",
        )  # fmt: skip
    return not_applicable(
        name, f"holds by construction: every window's {budget} budget held one tuple of each of "
        f"its groups ({over} of windows over it), and CoD then keeps one of every group (its "
        f"floor); {measured}",
    )  # fmt: skip


def _any_missing(x: Any) -> bool:
    """Missing groups were counted (or the count itself was not measured: NaN, None)."""
    try:
        return float(x) != 0.0  # NaN too
    except (TypeError, ValueError):
        return True


# ---------------------------------------------------------------------------- analysis
def analyse(cfg: CodAccuracyConfig, m: dict[str, Any]) -> Analysis:
    """Values, checks, tables, figures and prose of a cod-accuracy run."""
    points, sensitivity = m["points"], m["sensitivity"]
    cases = cases_of(points, cfg)
    tables: dict[str, Any] = {"points.csv": points, "cases.csv": cases}
    if sensitivity:
        tables["sensitivity.csv"] = sensitivity
    return Analysis(
        values={"cases": cases, "side_by_side": side_by_side(cases, B_CLAIM),
                "sensitivity": sensitivity, "variants": {v: LABELS[v] for v in cfg.variants}},
        checks=checks_of(cases, cfg),
        tables=tables,
        figures=_figures(cases, points, cfg),
        setup=_setup(cfg),
        paper=_paper(cfg, cases),
        notes=_notes(cfg, cases, sensitivity),
        sections=_sections(cfg, cases, sensitivity),
    )  # fmt: skip


def _paper(cfg: CodAccuracyConfig, cases: list[dict[str, Any]]) -> str:
    """The paper's claims, then this run's CoD variants beside Uniform at the same volume."""
    claims = "\n".join(f"- **{w}**: {PAPER[w]}" for w in cfg.workloads)
    pair = side_by_side(cases, B_CLAIM)
    if not pair:
        return claims
    return (
        f"{claims}\n\nThis run at b = {B_CLAIM:g}: CoD at the budget and CoD keep-one-per-group, "
        "each beside Uniform keeping the same fraction of the data (errors: mean over windows, "
        "p95 for CoD; missing groups per window; Uniform at 1 − b keeps a binomial count, "
        "Uniform at keep-one's kept fraction keeps in every window exactly the tuples keep-one "
        "kept there):\n\n" + markdown_table(pair)
    )


def _sensitivity(cfg: CodAccuracyConfig) -> list[dict[str, Any]]:
    """Uniform and CoD at the budget, b = 0.98, while one calibration setting moves (first seed
    only)."""
    rows = []
    for key, values in cfg.sensitivity:
        workload = key.split("_", 1)[0]
        if workload not in cfg.workloads:
            continue
        for value in values:
            changes: dict[str, Any] = {
                key: value, "seeds": cfg.seeds[:1], "windows": cfg.sensitivity_windows,
                "b_values": (B_CLAIM,), "variants": ("uniform", "cod"), "sensitivity": (),
            }  # fmt: skip
            c = replace(cfg, **changes)
            pts = _points(c, workload, c.seeds[0])
            row: dict[str, Any] = {"workload": workload, "setting": key, "value": value,
                                   "b": B_CLAIM}  # fmt: skip
            for v in ("uniform", "cod"):
                rs = [r for r in pts if r["variant"] == v]
                row[f"error_{v}"] = float(np.mean([r["error"] for r in rs]))
                row[f"missing_groups_{v}"] = float(np.mean([r["missing"] for r in rs]))
                row[f"kept_fraction_{v}"] = float(np.mean([r["kept_fraction"] for r in rs]))
            row["groups_per_window"] = float(np.mean([r["n_groups"] for r in pts]))
            rows.append(row)
    return rows


def _figures(
    cases: list[dict[str, Any]], points: list[dict[str, Any]], cfg: CodAccuracyConfig
) -> list[Figure]:
    figs = []
    for workload in cfg.workloads:
        cs = sorted((c for c in cases if c["workload"] == workload), key=lambda c: -c["b"])
        if not cs:
            continue
        figs.append(
            Figure(
                file=f"error_vs_processed_{workload}.png",
                title=f"{workload}: mean error vs data processed (CoD Fig. 10 shape)",
                xlabel="data processed (% of the window, measured)",
                ylabel="average relative error over windows",
                series={
                    LABELS[v]: ([100.0 * c[f"kept_fraction_{v}"] for c in cs],
                                [c[f"error_{v}"] for c in cs])
                    for v in cfg.variants if f"error_{v}" in cs[0]
                },
                paper=("CoD Fig. 10 (DEBS): Uniform's error falls almost linearly with the data "
                       "processed; CoD stays low at every b, and CoD at 2 % beats Uniform at 50 %")
                if workload == "taxi" else f"CoD Fig. 9 ({workload}): {PAPER[workload]}",
            )
        )  # fmt: skip
        if WORKLOADS[workload][0] == "grouped":
            figs.append(
                Figure(
                    file=f"missing_groups_{workload}.png",
                    title=f"{workload}: groups missing from the result",
                    xlabel="shed fraction b", ylabel="missing groups per window (mean)",
                    series={
                        LABELS[v]: ([c["b"] for c in cs], [c[f"missing_groups_{v}"] for c in cs])
                        for v in cfg.variants if f"missing_groups_{v}" in cs[0]
                    },
                    paper="CoD §VII-C3: CoD misses no group (GCM, b = 0.98); Uniform drops the "
                          "infrequent groups whole",
                )
            )  # fmt: skip
    if "taxi" in cfg.workloads:
        s0, b = cfg.seeds[0], max(cfg.b_values)
        series = {}
        for v in ("uniform", "cod"):
            rows = [
                r for r in points
                if r["workload"] == "taxi" and r["seed"] == s0 and r["variant"] == v
                and r["b"] == b
            ]  # fmt: skip
            series[LABELS[v]] = ([r["window"] for r in rows], [r["error"] for r in rows])
        figs.append(
            Figure(
                file="taxi_error_per_window.png",
                title=f"taxi, b = {b:g}: error of every window (seed {s0})",
                xlabel="window", ylabel="mean per-group relative error", ylim=(0.0, 1.0),
                series=series,
                paper="CoD Fig. 9 (DEBS, b = 0.98): average and p95 error of CoD close to 10 %, "
                      "Uniform above 80 %",
            )
        )  # fmt: skip
    return figs


def _setup(cfg: CodAccuracyConfig) -> str:
    legend = "; ".join(f"`{v}` = {LABELS[v]}" for v in cfg.variants)
    return f"""
Stand-in data (no real DEBS/GCM/DEC offline; all synthetic, deterministic, seeded):
`taxi` = {cfg.taxi_routes} ordinary routes + 100 premium-pool routes, Zipf s = {cfg.taxi_zipf_s}
popularity drifting every slide, per-route fare CV = {cfg.taxi_fare_cv}, ~{cfg.taxi_window_tuples}
tuples per 30/10 window; `tasks` = {cfg.tasks_classes} task classes, Zipf s = {cfg.tasks_zipf_s},
drifting mix, CPU-request CV = {cfg.tasks_cpu_cv} within a class, ~{cfg.tasks_window_tuples} tuples
per 60/30 window; `packets` = bimodal packet sizes with a drifting mean, ~{cfg.packets_window_tuples}
tuples per 45/15 window. {cfg.windows} windows × {len(cfg.seeds)} seeds {list(cfg.seeds)} per
workload.

Per window, every policy decides from that window's concept only (group frequencies by
`np.bincount`, per-group mean/variance) and the kept tuples of a group are a uniform random choice.
Exact = the window with nothing shed. Error = CoD §VII-C3 (missing group = 100 %, clipped to 1).
Variants: {legend} (`spillway.policies.cod`: `over_budget`, `allocation`). The checks compare
each CoD variant with Uniform keeping the same fraction of the data: CoD **at the budget** with
Uniform at 1 − b, CoD keep-one-per-group with Uniform at keep-one's kept fraction.
"""


def _sections(
    cfg: CodAccuracyConfig, cases: list[dict[str, Any]], sensitivity: list[dict[str, Any]]
) -> list[tuple[str, str]]:
    errors = [
        "workload",
        "b",
        "groups_per_window",
        "windows_groups_over_budget",
        *(f"error_{v}" for v in cfg.variants),
        "error_uniform_p95",
        "error_cod_p95",
    ]
    volume = [
        "workload",
        "b",
        *(f"missing_groups_{v}" for v in cfg.variants),
        *(f"kept_fraction_{v}" for v in cfg.variants),
    ]
    spread = ["workload", "b", *(f"error_{v}_seed_std" for v in cfg.variants)]  # fmt: skip
    legend = "\n".join(f"- `{v}`: {LABELS[v]}" for v in cfg.variants)
    return [
        ("What this run measured: error", legend + "\n\n" + markdown_table(cases, errors)),
        ("Missing groups and data processed", markdown_table(cases, volume)),
        ("Spread over seeds (std of the per-seed mean error)", markdown_table(cases, spread)),
        (
            f"Calibration sensitivity (b = {B_CLAIM:g}, CoD at the budget, seed {cfg.seeds[0]}, "
            f"{cfg.sensitivity_windows} windows; defaults in the setup)",
            markdown_table(sensitivity) if sensitivity else "_(not run)_",
        ),
    ]


def _notes(
    cfg: CodAccuracyConfig, cases: list[dict[str, Any]], sensitivity: list[dict[str, Any]]
) -> str:
    by = {(c["workload"], c["b"]): c for c in cases}
    grouped = [c for c in cases if c["kind"] == "grouped" and c["b"] == B_CLAIM]
    budget = "; ".join(
        f"{c['workload']}: {num(c['groups_per_window'])} groups per window, "
        f"{num(100 * c['windows_groups_over_budget'], 3)} % of windows over the budget; CoD at "
        f"the budget misses {num(c['missing_groups_cod'])} groups with error "
        f"{num(c['error_cod'], 3)}"
        + (
            f", keep-one keeps {num(100 * c['kept_fraction_cod_keep_one'], 3)} % with error "
            f"{num(c['error_cod_keep_one'], 3)}"
            if "error_cod_keep_one" in c
            else ""
        )
        + (
            f" (Uniform at that kept fraction: error {num(c['error_uniform_keep_one'], 3)}, "
            f"{num(c['missing_groups_uniform_keep_one'])} missing groups)"
            if "error_uniform_keep_one" in c
            else ""
        )
        for c in grouped
    )
    notes = f"""
- **The budget.** At b = {B_CLAIM:g} a window's budget is 2 % of its tuples. When a window holds
  more groups than that, no policy at the budget can keep every group: CoD at the budget keeps
  one tuple of the smallest groups and misses the rest, and the paper's "zero missing groups"
  needs the keep-one variant, which processes more than 1 − b; each is compared with Uniform
  keeping the same fraction of the data. Measured: {budget or "n/a"}.
  The paper does not say how it handled this; Fig. 10's x-axis here is the *measured* volume.
- **Calibration.** The grouped errors depend on the stand-ins' per-group spread and tail: taxi
  fare CV = {cfg.taxi_fare_cv} (a route's fares follow its distance), so a 1-tuple estimate has
  ~{0.8 * cfg.taxi_fare_cv:.2f} error; the long Zipf tail makes many routes appear only a few
  times per window, which Uniform loses. These are chosen to resemble DEBS/GCM, not fitted to
  the paper's numbers; other tails and spreads give other levels (calibration sensitivity table).
- **GCM** has 4 scheduling classes in reality; with so few groups Uniform would rarely miss one,
  so `tasks` uses {cfg.tasks_classes} finer classes.
- **Scalar.** CoD's scalar rule (equal relative standard error across queries, from μ and σ²)
  gives exactly the uniform volume for a single query, so both errors match, as the paper found;
  the comparison holds by construction and is reported not applicable.
- **Not reproduced:** Storm, the 5-node AWS cluster, real datasets, absolute figure values (the
  paper's text has none); sliding windows are evaluated per window in numpy, not on Spark."""
    if ("taxi", B_CLAIM) in by and ("taxi", 0.5) in by:
        lo, hi = by[("taxi", B_CLAIM)], by[("taxi", 0.5)]
        notes += (
            f"\n- **Data volume (Fig. 10).** On taxi, CoD at the budget, b = 0.98, processed "
            f"{num(100 * lo['kept_fraction_cod'], 3)} % of the data with error "
            f"{num(lo['error_cod'], 3)}; Uniform at b = 0.50 processed "
            f"{num(100 * hi['kept_fraction_uniform'], 3)} % with error "
            f"{num(hi['error_uniform'], 3)} (the paper: CoD at 2 % beats Uniform at 50 %)."
        )
    skew = [r for r in sensitivity if r["setting"] == "tasks_zipf_s"]
    if ("tasks", B_CLAIM) in by and skew:
        t = by[("tasks", B_CLAIM)]
        pts = "; ".join(
            f"s = {r['value']:g}: Uniform {num(r['error_uniform'], 3)}, CoD "
            f"{num(r['error_cod'], 3)}"
            for r in skew
        )
        notes += (
            f"\n- **tasks vs GCM.** At the default skew (Zipf s = {cfg.tasks_zipf_s:g}) Uniform's "
            f"error at b = 0.98 is {num(t['error_uniform'], 3)}, below the paper's > 40 %: few of "
            f"the {cfg.tasks_classes} classes are rare enough to be lost. The paper's level needs "
            f"a heavier tail ({pts}); the default is not tuned to the paper's number."
        )
    return notes


EXPERIMENT: Experiment[CodAccuracyConfig, dict[str, Any]] = Experiment(
    name=NAME,
    title="cod-accuracy: Uniform vs CoD error (CoD Figs. 9-10)",
    config_type=CodAccuracyConfig,
    measure=measure,
    analyse=analyse,
)


def run(config: CodAccuracyConfig, out_dir: str | Path) -> dict[str, Any]:
    """Run the experiment and write summary.json, points.csv, cases.csv, sensitivity.csv, PNG
    plots and report.md; returns the summary."""
    return EXPERIMENT.run(config, out_dir)


def with_overrides(config: CodAccuracyConfig, **changes: Any) -> CodAccuracyConfig:
    """A copy of ``config`` with some settings changed (validated again).

    >>> with_overrides(make_config(quick=True), windows=3).windows
    3
    """
    return replace(config, **changes)
