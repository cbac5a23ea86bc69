"""Online cost model of one Spark plan: fixed overhead + per-tuple cost per micro-batch.

A micro-batch of ``rows`` tuples takes ``duration ≈ overhead + per_tuple · rows`` seconds
(docs/design.md, cost model). THEMIS (§6) keeps only the per-tuple average ("processing time per tuple, smoothed
with a moving average"); on Spark every micro-batch also pays a fixed cost (planning, scheduling
tasks, state-store commits, offset and commit logs), so both terms are fitted here.

Fit: exponentially weighted, regularised least squares, computed recursively in information
form (recursive least squares with forgetting factor ``λ``). After each observation

    A ← λ·A + (1 − λ)·A₀ + w·x·xᵀ / σ²,        b ← λ·b + (1 − λ)·A₀·θ₀ + w·x·y / σ²,

with regressor ``x = (1, rows / rows_scale)``, prior mean ``θ₀`` and prior information ``A₀``.
The prior keeps a constant weight ``A₀`` for ever (the ``(1 − λ)·A₀`` term exactly replaces what
forgetting removes), so when ``rows`` barely varies the split between overhead and per-tuple cost
is pulled toward the prior instead of drifting (no covariance wind-up), while the fitted line
still predicts the observed durations. The estimate is the non-negative minimiser of
``θᵀAθ − 2bᵀθ`` (two variables, solved exactly).

Robustness:

- the first ``warmup_batches`` observations are ignored (JIT compilation, Python worker start);
- an observation whose residual exceeds ``outlier_sigmas`` predictive standard deviations is
  down-weighted (Huber weight ``w = k·s/|r|``), so one slow batch (a GC pause) barely moves it;
- ``shift_after`` consecutive outliers on the same side are a real change (a heavier query was
  added): from then on, while residuals stay beyond the limit on that side, each observation gets
  full weight and older data are discounted by ``shift_discount`` (re-convergence takes a few
  batches instead of ``1 / (1 − λ)``);
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
>>> est = estimate(state)
>>> round(est.overhead_s, 2), round(est.per_tuple_s * 1e5, 2)
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
    forgetting : forgetting factor ``λ`` in (0, 1]; the data's memory is about ``1 / (1 − λ)``
        micro-batches (20 at the default 0.95). 1 means no forgetting.
    rows_scale : rows are divided by this before fitting, so both coefficients have similar
        magnitude (numerical conditioning only; it does not change the fit).
    noise_s : initial standard deviation of a batch duration around the line (s).
    min_noise_s : floor of the learned noise standard deviation (s).
    outlier_sigmas : residuals beyond this many predictive standard deviations are outliers.
    shift_after : this many consecutive outliers on one side are taken as a real change.
    shift_discount : factor in [0, 1] applied to older data when a change is detected.
    warmup_batches : the first observations ignored (JIT and worker warm-up).
    min_per_tuple_s : floor of the per-tuple estimate (s), so capacities stay finite.
    """

    prior_overhead_s: float = 0.3
    prior_overhead_std_s: float = 0.5
    prior_per_tuple_s: float = 2e-6
    prior_per_tuple_std_s: float = 2e-5
    forgetting: float = 0.95
    rows_scale: float = 10_000.0
    noise_s: float = 0.05
    min_noise_s: float = 0.002
    outlier_sigmas: float = 4.0
    shift_after: int = 3
    shift_discount: float = 0.1
    warmup_batches: int = 1
    min_per_tuple_s: float = 1e-9

    def __post_init__(self) -> None:
        _check_number("prior_overhead_s", self.prior_overhead_s, low=0, low_ok=True)
        _check_number("prior_overhead_std_s", self.prior_overhead_std_s, low=0, low_ok=False)
        _check_number("prior_per_tuple_s", self.prior_per_tuple_s, low=0, low_ok=False)
        _check_number("prior_per_tuple_std_s", self.prior_per_tuple_std_s, low=0, low_ok=False)
        _check_number("forgetting", self.forgetting, low=0, low_ok=False, high=1)
        _check_number("rows_scale", self.rows_scale, low=0, low_ok=False)
        _check_number("noise_s", self.noise_s, low=0, low_ok=False)
        _check_number("min_noise_s", self.min_noise_s, low=0, low_ok=False)
        _check_number("outlier_sigmas", self.outlier_sigmas, low=0, low_ok=False)
        _check_number("shift_discount", self.shift_discount, low=0, low_ok=True, high=1)
        _check_number("min_per_tuple_s", self.min_per_tuple_s, low=0, low_ok=False)
        for name in ("shift_after", "warmup_batches"):
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
    """Fitted cost of one plan's micro-batch: ``overhead_s + per_tuple_s · rows`` seconds.

    Examples
    --------
    >>> CostEstimate(overhead_s=0.5, per_tuple_s=1e-5).duration_s(20_000)
    0.7
    """

    overhead_s: float
    per_tuple_s: float

    def __post_init__(self) -> None:
        _check_number("CostEstimate.overhead_s", self.overhead_s, low=0, low_ok=True)
        _check_number("CostEstimate.per_tuple_s", self.per_tuple_s, low=0, low_ok=False)

    def duration_s(self, rows: float) -> float:
        """Predicted duration (s) of a micro-batch of ``rows`` tuples."""
        return self.overhead_s + self.per_tuple_s * float(rows)


@dataclass(frozen=True, kw_only=True)
class CostModelState:
    """Picklable state of one plan's cost model (create it with :func:`initial_state`).

    Parameters
    ----------
    info : the information matrix ``A`` as ``(a00, a01, a11)`` (scaled units).
    vec : the vector ``b`` as ``(b0, b1)`` (scaled units).
    noise_var : learned variance of a duration around the fitted line (s²).
    overhead_s, per_tuple_s : the current estimate.
    seen : observations received (including the ignored warm-up ones).
    used : observations that entered the fit.
    outlier_run : consecutive outliers so far, signed by the side of the line they fell on.
    shifts : changes of the cost detected so far (see ``shift_after``).
    """

    info: tuple[float, float, float]
    vec: tuple[float, float]
    noise_var: float
    overhead_s: float
    per_tuple_s: float
    seen: int = 0
    used: int = 0
    outlier_run: int = 0
    shifts: int = 0


def _prior(config: CostModelConfig) -> tuple[tuple[float, float, float], tuple[float, float]]:
    a00 = 1.0 / config.prior_overhead_std_s**2
    a11 = 1.0 / (config.prior_per_tuple_std_s * config.rows_scale) ** 2
    theta1 = config.prior_per_tuple_s * config.rows_scale
    return (a00, 0.0, a11), (a00 * config.prior_overhead_s, a11 * theta1)


def initial_state(config: CostModelConfig) -> CostModelState:
    """The state before any observation: the estimate is the prior.

    >>> s = initial_state(CostModelConfig(prior_overhead_s=0.2))
    >>> s.overhead_s, s.used
    (0.2, 0)
    """
    info, vec = _prior(config)
    return CostModelState(
        info=info,
        vec=vec,
        noise_var=config.noise_s**2,
        overhead_s=config.prior_overhead_s,
        per_tuple_s=config.prior_per_tuple_s,
    )


def _solve_nonneg(
    info: tuple[float, float, float], vec: tuple[float, float]
) -> tuple[float, float]:
    """Minimise ``θᵀAθ − 2bᵀθ`` over ``θ >= 0`` (A symmetric positive definite, 2 x 2)."""
    a00, a01, a11 = info
    b0, b1 = vec
    det = a00 * a11 - a01 * a01

    def f(t0: float, t1: float) -> float:
        return a00 * t0 * t0 + 2 * a01 * t0 * t1 + a11 * t1 * t1 - 2 * (b0 * t0 + b1 * t1)

    t0 = (a11 * b0 - a01 * b1) / det
    t1 = (a00 * b1 - a01 * b0) / det
    if t0 >= 0 and t1 >= 0:
        return t0, t1
    candidates = [(max(b0 / a00, 0.0), 0.0), (0.0, max(b1 / a11, 0.0))]
    return min(candidates, key=lambda c: f(*c))


def observe(
    config: CostModelConfig, state: CostModelState, rows: int, duration_s: float
) -> CostModelState:
    """Fold one finished micro-batch of ``rows`` tuples lasting ``duration_s`` into the model.

    Parameters
    ----------
    config : the model's settings.
    state : the state returned by the previous call (or :func:`initial_state`).
    rows : tuples the micro-batch processed (``numInputRows``), ``>= 0``.
    duration_s : its processing time in seconds, ``>= 0``.

    Returns
    -------
    CostModelState
        The new state; ``state`` itself is unchanged.

    Raises
    ------
    ConfigError
        ``rows`` or ``duration_s`` is negative, not finite, or not a number.

    Examples
    --------
    >>> cfg = CostModelConfig(warmup_batches=1)
    >>> s = observe(cfg, initial_state(cfg), 1000, 30.0)  # warm-up batch: ignored
    >>> s.seen, s.used, s.overhead_s == cfg.prior_overhead_s
    (1, 0, True)
    """
    if (
        isinstance(rows, bool)
        or not isinstance(rows, int | float)
        or not math.isfinite(rows)
        or rows < 0
        or rows != int(rows)
    ):
        raise ConfigError(f"rows must be a whole number >= 0 (tuples in the batch), got {rows!r}")
    _check_number("duration_s", duration_s, low=0, low_ok=True)
    if state.seen < config.warmup_batches:
        return replace(state, seen=state.seen + 1)

    lam = config.forgetting
    x1 = float(rows) / config.rows_scale
    y = float(duration_s)
    a00, a01, a11 = state.info
    b0, b1 = state.vec
    (p00, _, p11), (pb0, pb1) = _prior(config)

    # Predictive spread of y at x: s^2 = x' A^-1 x + sigma^2.
    det = a00 * a11 - a01 * a01
    var_theta = (a11 - 2 * a01 * x1 + a00 * x1 * x1) / det
    theta1 = state.per_tuple_s * config.rows_scale
    resid = y - (state.overhead_s + theta1 * x1)
    spread = math.sqrt(var_theta + state.noise_var)
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
            a00, a01, a11 = p00 + g * (a00 - p00), g * a01, p11 + g * (a11 - p11)
            b0, b1 = pb0 + g * (b0 - pb0), pb1 + g * (b1 - pb1)
            shifting = True
        else:
            weight = limit / abs(resid)

    w = weight / state.noise_var
    noise_var = max(
        lam * state.noise_var + (1 - lam) * min(resid * resid, limit * limit),
        config.min_noise_s**2,
    )
    info = (
        lam * a00 + (1 - lam) * p00 + w,
        lam * a01 + w * x1,
        lam * a11 + (1 - lam) * p11 + w * x1 * x1,
    )
    vec = (lam * b0 + (1 - lam) * pb0 + w * y, lam * b1 + (1 - lam) * pb1 + w * x1 * y)
    t0, t1 = _solve_nonneg(info, vec)
    return CostModelState(
        info=info,
        vec=vec,
        noise_var=noise_var,
        overhead_s=t0,
        per_tuple_s=max(t1 / config.rows_scale, config.min_per_tuple_s),
        seen=state.seen + 1,
        used=state.used + 1,
        outlier_run=run,
        shifts=state.shifts + int(shifting and abs(state.outlier_run) < config.shift_after),
    )


def estimate(state: CostModelState) -> CostEstimate:
    """The current fitted costs of the plan.

    >>> estimate(initial_state(CostModelConfig())).overhead_s
    0.3
    """
    return CostEstimate(overhead_s=state.overhead_s, per_tuple_s=state.per_tuple_s)
