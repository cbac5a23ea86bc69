"""Online cost model of one Spark plan: fixed overhead, per kept tuple and per arrived tuple.

A micro-batch that keeps ``rows`` of the ``arrived`` tuples it covers takes ``duration ≈
overhead + per_tuple · rows + per_arrived · arrived`` seconds (docs/design.md, cost model). The
per-arrived term is what every arrived tuple costs whether kept or not: fetching it, hashing it
to choose, scanning its key for a per-group decision, dropping it. Without it, a node at 10x
overload budgets only what it keeps and its batches grow with the arrivals they must still
touch; with it, the budget left for kept tuples shrinks as arrivals grow. When nothing is shed
(``arrived == rows``) the two per-tuple terms cannot be told apart and the prior splits them. THEMIS (§6) keeps only the per-tuple average ("processing time per tuple, smoothed
with a moving average"); on Spark every micro-batch also pays a fixed cost (planning, scheduling
tasks, state-store commits, offset and commit logs), so both terms are fitted here.

Fit: exponentially weighted, regularised least squares, computed recursively in information
form (recursive least squares with forgetting factor ``λ``). The data's sums are kept apart
from the prior; after each observation

    D ← λ·D + w·x·xᵀ,        d ← λ·d + w·x·y,

with regressor ``x = (1, rows / rows_scale, arrived / rows_scale)`` and robustness weight ``w``,
and the estimate minimises ``θᵀAθ − 2bᵀθ`` over ``θ >= 0`` (three variables, solved exactly
over the faces of the orthant) with

    A = A₀ + D / σ²,        b = A₀·θ₀ + d / σ²,

prior mean ``θ₀``, prior information ``A₀`` and the noise variance ``σ²`` learned so far. The
prior keeps a constant weight ``A₀`` for ever, so when ``rows`` barely varies the split between
overhead and per-tuple cost is pulled toward the prior instead of drifting (no covariance
wind-up), while the fitted line still predicts the observed durations. Every batch in the data
is weighed by the *current* ``σ²``: weighing each by the ``σ²`` of its own time let the first
batches, folded in while ``σ²`` was still its small initial value, outweigh tens of later ones
(measured: a node whose start was slow kept a per-tuple cost 60 % too high for more than 100 s
and shed 18 % of what it could have kept, ``tests/control/test_cost_model.py``).

Robustness:

- the first ``warmup_batches`` observations are ignored (JIT compilation, Python worker start);
- an observation whose residual exceeds ``outlier_sigmas`` predictive standard deviations is
  down-weighted (Huber weight ``w = k·s/|r|``), so one slow batch (a GC pause) barely moves it;
- ``shift_after`` consecutive outliers on the same side are a real change (a heavier query was
  added): from then on, while residuals stay beyond the limit on that side, each observation gets
  full weight and older data are discounted by ``shift_discount`` (re-convergence takes a few
  batches instead of ``1 / (1 − λ)``);
- ``bias_after`` consecutive residuals on the same side, however small, are a bias of the
  fit: older data are discounted by ``shift_discount`` once. The batches a node runs are the
  size the model allows, so they barely vary, and the slope rests on old batches of other
  sizes; when those were slow (a cold JVM's first batches, often the largest: the prior's
  capacity), the model keeps a per-tuple cost several times the truth, every batch finishes
  under its prediction by less than the outlier limit (the cold batches inflated ``σ²``),
  and the capacity only climbs as fast as forgetting erases them (the spark-federation runs
  of 2026-11-28 climbed about 7 % a decision for 100 s). On the closed loop of
  ``tests/control/test_cost_model.py`` (a batch costs 1 s + 1.2 µs a row with 0.25 s of
  noise, after four cold batches of 250,000 rows taking 3.3-9.6 s; its ``_closed_loop`` over
  seeds 0-19): the budget reached 80 % of the true capacity after a median 44.5 decisions
  without the rule, 21.5 with it, with 3.9 % and 5.3 % of the later batches over the
  trigger; without cold batches, 4 decisions and 5.0 % either way;
- the noise variance ``σ²`` is learned from clipped residuals, floored at ``min_noise_s²``;
- a batch of 0 rows is an ordinary observation: it measures the overhead alone.

Keep one state per Spark plan (plans have different per-tuple costs: a TOP-5 join costs more per
tuple than an AVG).

Examples
--------
>>> cfg = CostModelConfig(warmup_batches=0)
>>> state = initial_state(cfg)
>>> estimate(state) == CostEstimate(overhead_s=cfg.prior_overhead_s,
...                                 per_tuple_s=cfg.prior_per_tuple_s)
True
>>> for rows in [10_000, 40_000, 20_000, 80_000, 0, 60_000] * 5:
...     state = observe(cfg, state, rows, 0.4 + 1e-5 * rows)
>>> est = estimate(state)          # nothing shed: the two per-tuple terms share 1e-5 s
>>> round(est.overhead_s, 2), round((est.per_tuple_s + est.per_arrived_s) * 1e5, 2)
(0.4, 1.0)
>>> round(est.duration_s(50_000), 2)
0.9

References
----------
THEMIS §6 "Cost model" (per-tuple moving average, the baseline this model extends);
docs/design.md, "Decisions where the papers are silent or wrong" (cost model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from spillway.errors import ConfigError


def _check_number(
    name: str,
    value: object,
    *,
    low: float,
    low_ok: bool,
    high: float | None = None,
    high_ok: bool = True,
) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        v = float(value)  # type: ignore[arg-type]
        ok = (v >= low if low_ok else v > low) and (
            high is None or (v <= high if high_ok else v < high)
        )
    if not ok:
        lo = f"{'>=' if low_ok else '>'} {low:g}"
        hi = "" if high is None else f" and {'<=' if high_ok else '<'} {high:g}"
        raise ConfigError(f"{name} must be a finite number {lo}{hi}, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class CostModelConfig:
    """Settings of the online cost model of one plan.

    Parameters
    ----------
    prior_overhead_s : prior mean of the fixed cost of a micro-batch (s).
    prior_overhead_std_s : prior standard deviation of the overhead (s); its inverse square is
        the weight the prior keeps against the data.
    prior_per_tuple_s : prior mean of the cost of one tuple (s).
    prior_per_tuple_std_s : prior standard deviation of the per-tuple cost (s).
    prior_per_arrived_s : prior mean of the cost of one arrived tuple, kept or not (s).
    prior_per_arrived_std_s : prior standard deviation of the per-arrived cost (s).
    forgetting : forgetting factor ``λ`` in (0, 1]; the data's memory is about ``1 / (1 − λ)``
        micro-batches (20 at the default 0.95). 1 means no forgetting.
    rows_scale : rows are divided by this before fitting, so both coefficients have similar
        magnitude (numerical conditioning only; it does not change the fit).
    noise_s : initial standard deviation of a batch duration around the line (s).
    min_noise_s : floor of the learned noise standard deviation (s).
    outlier_sigmas : residuals beyond this many predictive standard deviations are outliers.
    shift_after : this many consecutive outliers on one side are taken as a real change.
    shift_discount : factor in [0, 1] applied to older data when a change is detected.
    bias_after : this many consecutive residuals on one side, whatever their size, are a
        bias of the fit: older data are discounted by ``shift_discount`` (module docstring,
        "Robustness"); 0: never.
    warmup_batches : the first observations ignored (JIT and worker warm-up).
    min_per_tuple_s : floor of the per-tuple estimate (s), so capacities stay finite.
    """

    prior_overhead_s: float = 0.3
    prior_overhead_std_s: float = 0.5
    prior_per_tuple_s: float = 2e-6
    prior_per_tuple_std_s: float = 2e-5
    prior_per_arrived_s: float = 0.0
    prior_per_arrived_std_s: float = 5e-6
    forgetting: float = 0.95
    rows_scale: float = 10_000.0
    noise_s: float = 0.05
    min_noise_s: float = 0.002
    outlier_sigmas: float = 4.0
    shift_after: int = 3
    shift_discount: float = 0.1
    bias_after: int = 8
    warmup_batches: int = 1
    min_per_tuple_s: float = 1e-9

    def __post_init__(self) -> None:
        _check_number("prior_overhead_s", self.prior_overhead_s, low=0, low_ok=True)
        _check_number("prior_overhead_std_s", self.prior_overhead_std_s, low=0, low_ok=False)
        _check_number("prior_per_tuple_s", self.prior_per_tuple_s, low=0, low_ok=False)
        _check_number("prior_per_tuple_std_s", self.prior_per_tuple_std_s, low=0, low_ok=False)
        _check_number("prior_per_arrived_s", self.prior_per_arrived_s, low=0, low_ok=True)
        _check_number("prior_per_arrived_std_s", self.prior_per_arrived_std_s, low=0, low_ok=False)
        _check_number("forgetting", self.forgetting, low=0, low_ok=False, high=1)
        _check_number("rows_scale", self.rows_scale, low=0, low_ok=False)
        _check_number("noise_s", self.noise_s, low=0, low_ok=False)
        _check_number("min_noise_s", self.min_noise_s, low=0, low_ok=False)
        _check_number("outlier_sigmas", self.outlier_sigmas, low=0, low_ok=False)
        _check_number("shift_discount", self.shift_discount, low=0, low_ok=True, high=1)
        _check_number("min_per_tuple_s", self.min_per_tuple_s, low=0, low_ok=False)
        for name in ("shift_after", "warmup_batches", "bias_after"):
            v = getattr(self, name)
            if (
                not isinstance(v, int)
                or isinstance(v, bool)
                or v < (1 if name == "shift_after" else 0)
            ):
                rule = ">= 1" if name == "shift_after" else ">= 0"
                raise ConfigError(f"{name} must be an int {rule}, got {v!r}")
        if self.prior_per_tuple_s < self.min_per_tuple_s:
            raise ConfigError(
                f"prior_per_tuple_s must be >= min_per_tuple_s ({self.min_per_tuple_s:g}), "
                f"got {self.prior_per_tuple_s!r}: raise the prior or lower the floor"
            )


@dataclass(frozen=True, kw_only=True)
class CostEstimate:
    """Fitted cost of one plan's micro-batch: ``overhead_s + per_tuple_s · rows +
    per_arrived_s · arrived`` seconds (``arrived`` defaults to ``rows``: nothing shed).

    Examples
    --------
    >>> CostEstimate(overhead_s=0.5, per_tuple_s=1e-5).duration_s(20_000)
    0.7
    >>> round(CostEstimate(overhead_s=0.5, per_tuple_s=1e-5, per_arrived_s=1e-6)
    ...       .duration_s(20_000, arrived=100_000), 6)
    0.8
    """

    overhead_s: float
    per_tuple_s: float
    per_arrived_s: float = 0.0

    def __post_init__(self) -> None:
        _check_number("CostEstimate.overhead_s", self.overhead_s, low=0, low_ok=True)
        _check_number("CostEstimate.per_tuple_s", self.per_tuple_s, low=0, low_ok=False)
        _check_number("CostEstimate.per_arrived_s", self.per_arrived_s, low=0, low_ok=True)

    def duration_s(self, rows: float, arrived: float | None = None) -> float:
        """Predicted duration (s) of a micro-batch keeping ``rows`` of ``arrived`` tuples."""
        seen = float(rows) if arrived is None else float(arrived)
        return self.overhead_s + self.per_tuple_s * float(rows) + self.per_arrived_s * seen


@dataclass(frozen=True, kw_only=True)
class CostModelState:
    """Picklable state of one plan's cost model (create it with :func:`initial_state`).

    Parameters
    ----------
    info : the data's weighted sum ``D`` of ``x·xᵀ`` (3 x 3, symmetric) as its rows (scaled
        units; the prior is not in it).
    vec : the data's weighted sum ``d`` of ``x·y`` (scaled units).
    noise_var : learned variance of a duration around the fitted plane (s²).
    overhead_s, per_tuple_s, per_arrived_s : the current estimate.
    seen : observations received (including the ignored warm-up ones).
    used : observations that entered the fit.
    outlier_run : consecutive outliers so far, signed by the side of the line they fell on.
    shifts : changes of the cost detected so far (see ``shift_after``).
    side_run : consecutive residuals on one side of the line so far, signed by that side.
    biases : biases of the fit detected so far (see ``bias_after``).
    """

    info: tuple[tuple[float, ...], ...]
    vec: tuple[float, ...]
    noise_var: float
    overhead_s: float
    per_tuple_s: float
    per_arrived_s: float = 0.0
    seen: int = 0
    used: int = 0
    outlier_run: int = 0
    shifts: int = 0
    side_run: int = 0
    biases: int = 0


def _prior(config: CostModelConfig) -> tuple[np.ndarray, np.ndarray]:
    scale = config.rows_scale
    std = np.array(
        [
            config.prior_overhead_std_s,
            config.prior_per_tuple_std_s * scale,
            config.prior_per_arrived_std_s * scale,
        ]
    )
    mean = np.array(
        [
            config.prior_overhead_s,
            config.prior_per_tuple_s * scale,
            config.prior_per_arrived_s * scale,
        ]
    )
    info = np.diag(1.0 / std**2)
    return info, info @ mean


def _freeze(
    info: np.ndarray, vec: np.ndarray
) -> tuple[tuple[tuple[float, ...], ...], tuple[float, ...]]:
    return tuple(tuple(float(v) for v in row) for row in info), tuple(float(v) for v in vec)


def initial_state(config: CostModelConfig) -> CostModelState:
    """The state before any observation: the estimate is the prior.

    >>> s = initial_state(CostModelConfig(prior_overhead_s=0.2))
    >>> s.overhead_s, s.used
    (0.2, 0)
    """
    info, vec = _freeze(np.zeros((3, 3)), np.zeros(3))
    return CostModelState(
        info=info,
        vec=vec,
        noise_var=config.noise_s**2,
        overhead_s=config.prior_overhead_s,
        per_tuple_s=config.prior_per_tuple_s,
        per_arrived_s=config.prior_per_arrived_s,
    )


def _solve_nonneg(info: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """Minimise ``θᵀAθ − 2bᵀθ`` over ``θ >= 0`` (A symmetric positive definite): the best of
    the unconstrained minima on every face of the orthant (all subsets of free variables)."""
    n = len(vec)
    best, best_f = np.zeros(n), 0.0
    for mask in range(1, 1 << n):
        free = [i for i in range(n) if mask >> i & 1]
        sub = info[np.ix_(free, free)]
        try:
            t = np.linalg.solve(sub, vec[free])
        except np.linalg.LinAlgError:
            continue
        if (t < 0).any():
            continue
        theta = np.zeros(n)
        theta[free] = t
        f = float(theta @ info @ theta - 2 * vec @ theta)
        if f < best_f:
            best, best_f = theta, f
    return best


def _count(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or value != int(value)
    ):
        raise ConfigError(
            f"{name} must be a whole number >= 0 (tuples in the batch), got {value!r}"
        )
    return float(value)


def observe(
    config: CostModelConfig,
    state: CostModelState,
    rows: int,
    duration_s: float,
    arrived: int | None = None,
) -> CostModelState:
    """Fold one finished micro-batch that kept ``rows`` of ``arrived`` tuples and lasted
    ``duration_s`` into the model.

    Parameters
    ----------
    config : the model's settings.
    state : the state returned by the previous call (or :func:`initial_state`).
    rows : tuples the micro-batch processed (``numInputRows``), ``>= 0``.
    duration_s : its processing time in seconds, ``>= 0``.
    arrived : tuples its offset range covered, kept or shed (default ``rows``: nothing shed).

    Returns
    -------
    CostModelState
        The new state; ``state`` itself is unchanged.

    Raises
    ------
    ConfigError
        ``rows``, ``arrived`` or ``duration_s`` is negative, not finite, or not a number.

    Examples
    --------
    >>> cfg = CostModelConfig(warmup_batches=1)
    >>> s = observe(cfg, initial_state(cfg), 1000, 30.0)  # warm-up batch: ignored
    >>> s.seen, s.used, s.overhead_s == cfg.prior_overhead_s
    (1, 0, True)

    Batches that shed: 0.4 s, 1e-5 s a kept tuple, 2e-6 s an arrived one.

    >>> cfg = CostModelConfig(warmup_batches=0)
    >>> s = initial_state(cfg)
    >>> for kept, came in [(10_000, 50_000), (40_000, 40_000), (20_000, 200_000), (5_000, 80_000)] * 8:
    ...     s = observe(cfg, s, kept, 0.4 + 1e-5 * kept + 2e-6 * came, arrived=came)
    >>> round(s.overhead_s, 2), round(s.per_tuple_s * 1e5, 1), round(s.per_arrived_s * 1e6, 1)
    (0.4, 1.0, 2.0)
    """
    kept = _count("rows", rows)
    came = kept if arrived is None else _count("arrived", arrived)
    if came < kept:
        raise ConfigError(f"arrived ({arrived}) must be >= rows ({rows}): a batch keeps what came")
    _check_number("duration_s", duration_s, low=0, low_ok=True)
    if state.seen < config.warmup_batches:
        return replace(state, seen=state.seen + 1)

    lam = config.forgetting
    x = np.array([1.0, kept / config.rows_scale, came / config.rows_scale])
    y = float(duration_s)
    data = np.array(state.info, dtype=np.float64)
    data_vec = np.array(state.vec, dtype=np.float64)
    p_info, p_vec = _prior(config)
    info = p_info + data / state.noise_var
    theta = np.array(
        [
            state.overhead_s,
            state.per_tuple_s * config.rows_scale,
            state.per_arrived_s * config.rows_scale,
        ]
    )

    # Predictive spread of y at x: s^2 = x' A^-1 x + sigma^2.
    var_theta = float(x @ np.linalg.solve(info, x))
    resid = y - float(theta @ x)
    spread = math.sqrt(max(var_theta, 0.0) + state.noise_var)
    limit = config.outlier_sigmas * spread

    weight = 1.0
    run = 0
    shifting = False
    if abs(resid) > limit:
        side = 1 if resid > 0 else -1
        run = state.outlier_run + side if state.outlier_run * side > 0 else side
        if abs(run) >= config.shift_after:
            # A real change: keep the prior, discount older data, take this batch fully, and
            # keep doing so while the residuals stay on this side beyond the limit.
            g = config.shift_discount
            data, data_vec = g * data, g * data_vec
            shifting = True
        else:
            weight = limit / abs(resid)
    side = (resid > 0) - (resid < 0)
    sides = state.side_run + side if state.side_run * side > 0 else side
    biased = not shifting and config.bias_after > 0 and abs(sides) >= config.bias_after
    if biased:  # the line misses on one side batch after batch: refit from the recent data
        g = config.shift_discount
        data, data_vec = g * data, g * data_vec
        sides = 0

    noise_var = max(
        lam * state.noise_var + (1 - lam) * min(resid * resid, limit * limit),
        config.min_noise_s**2,
    )
    data = lam * data + weight * np.outer(x, x)
    data_vec = lam * data_vec + weight * x * y
    t = _solve_nonneg(p_info + data / noise_var, p_vec + data_vec / noise_var)
    frozen_info, frozen_vec = _freeze(data, data_vec)
    return CostModelState(
        info=frozen_info,
        vec=frozen_vec,
        noise_var=noise_var,
        overhead_s=float(t[0]),
        per_tuple_s=max(float(t[1]) / config.rows_scale, config.min_per_tuple_s),
        per_arrived_s=float(t[2]) / config.rows_scale,
        seen=state.seen + 1,
        used=state.used + 1,
        outlier_run=run,
        shifts=state.shifts + int(shifting and abs(state.outlier_run) < config.shift_after),
        side_run=sides,
        biases=state.biases + int(biased),
    )


def estimate(state: CostModelState) -> CostEstimate:
    """The current fitted costs of the plan.

    >>> estimate(initial_state(CostModelConfig())).overhead_s
    0.3
    """
    return CostEstimate(
        overhead_s=state.overhead_s,
        per_tuple_s=state.per_tuple_s,
        per_arrived_s=state.per_arrived_s,
    )
