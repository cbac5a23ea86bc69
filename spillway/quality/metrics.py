"""Fairness, spread and error metrics used by the experiments and reports.

- :func:`jain_index`: Jain's fairness index over query SIC (THEMIS §7.2).
- :func:`sic_spread`: mean, std, IQR and 5-95 % range of per-query SIC (THEMIS Fig. 10;
  Fiscato §6.3 uses std, IQR and Q0.95-Q0.05).
- :func:`mean_absolute_relative_error`: degraded vs exact results (THEMIS §7.1).
- :func:`topk_distance`: normalised Kendall distance between top-k lists (Fagin, Kumar and
  Sivakumar, "Comparing top k lists", SODA 2003; THEMIS §7.1 TOP-5 error).
- :func:`covariance_error`: spread of degraded covariances around the exact one (THEMIS §7.1).
- :func:`spearman_rho`: rank correlation, e.g. of SIC against error (THEMIS §7.1).

All take numpy arrays and never clip SIC values (they can slightly exceed 1).

Examples
--------
>>> jain_index([0.5, 0.5, 0.5])
1.0
>>> topk_distance([1, 2, 3], [1, 3, 2])      # one swapped pair of 3 * 3 + 0.5 * 3 * 2
0.08333333333333333
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from spillway.errors import ConfigError

__all__ = [
    "SicSpread",
    "covariance_error",
    "jain_index",
    "mean_absolute_relative_error",
    "sic_spread",
    "spearman_rho",
    "topk_distance",
]


def _values(x: Any, name: str, *, allow_nan: bool = False) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    bad = np.isinf(arr) if allow_nan else ~np.isfinite(arr)
    if bad.any():
        raise ConfigError(f"{name} must be finite numbers, got {x!r}")
    return arr


def jain_index(values: Any, axis: int = -1) -> Any:
    """Jain's fairness index ``(sum x)^2 / (n * sum x^2)`` (THEMIS §7.2).

    1 when every value is equal, ``1/n`` when one of ``n`` is non-zero; in ``[1/n, 1]`` and
    unchanged by scaling every value by the same factor.

    Conventions: all-zero values are all equal, so their index is 1 (every query equally
    starved is fair); an empty set has no index and gives NaN.

    Parameters
    ----------
    values : array-like of float >= 0
        E.g. the SIC of every query; several rows are reduced along ``axis``.
    axis : int
        Axis holding the queries.

    Returns
    -------
    float, or ndarray when ``values`` has more than one dimension.

    Raises
    ------
    ConfigError
        On negative or non-finite values.

    Examples
    --------
    >>> jain_index([1.0, 0.0, 0.0, 0.0])
    0.25
    >>> jain_index([[0.2, 0.2], [0.0, 0.0]]).tolist()
    [1.0, 1.0]
    >>> jain_index([])
    nan
    """
    x = _values(values, "values")
    if x.size and x.min() < 0:
        raise ConfigError(f"Jain's index needs values >= 0, got a minimum of {x.min()}")
    if x.ndim == 0:
        x = x.reshape(1)
    n = x.shape[axis]
    if n == 0:
        out = np.full(np.delete(np.array(x.shape), axis % x.ndim), np.nan)
        return float(out) if out.ndim == 0 else out
    # The index is scale-free: divide by the largest value first, so squares of tiny values
    # (e.g. 1e-157) do not fall into subnormal floats and lose precision.
    top = x.max(axis=axis, keepdims=True)
    x = np.divide(x, top, out=np.zeros_like(x), where=top > 0)
    s = x.sum(axis=axis)
    sq = (x * x).sum(axis=axis)
    j = np.ones_like(s)
    np.divide(s * s, n * sq, out=j, where=sq > 0)
    return float(j) if np.ndim(j) == 0 else j


@dataclass(frozen=True)
class SicSpread:
    """Summary of per-query SIC values (THEMIS Fig. 10; Fiscato §6.3).

    Attributes
    ----------
    n : int
        Number of queries.
    mean, std : float
        Mean and population standard deviation (``ddof=0``).
    iqr : float
        Q0.75 - Q0.25 (linear interpolation).
    range_90 : float
        Q0.95 - Q0.05.
    jain : float
        :func:`jain_index` of the values.

    Examples
    --------
    >>> sic_spread([0.5, 0.5]).std, sic_spread([0.5, 0.5]).jain
    (0.0, 1.0)
    """

    n: int
    mean: float
    std: float
    iqr: float
    range_90: float
    jain: float


def sic_spread(values: Any) -> SicSpread:
    """Mean, std, IQR, 5-95 % range and Jain's index of per-query SIC.

    An empty input gives ``n = 0`` and NaN everywhere.

    Raises
    ------
    ConfigError
        On negative, non-finite or multi-dimensional values.

    Examples
    --------
    >>> s = sic_spread([0.2, 0.4, 0.6, 0.8])
    >>> s.n, round(s.mean, 3), round(s.iqr, 3)
    (4, 0.5, 0.3)
    """
    x = _values(values, "values")
    if x.ndim != 1:
        raise ConfigError(f"sic_spread needs a 1-D array of query SIC, got shape {x.shape}")
    if x.size == 0:
        nan = float("nan")
        return SicSpread(n=0, mean=nan, std=nan, iqr=nan, range_90=nan, jain=nan)
    q05, q25, q75, q95 = np.quantile(x, [0.05, 0.25, 0.75, 0.95])
    return SicSpread(
        n=int(x.size),
        mean=float(x.mean()),
        std=float(x.std()),
        iqr=float(q75 - q25),
        range_90=float(q95 - q05),
        jain=float(jain_index(x)),
    )


def mean_absolute_relative_error(
    approx: Any, exact: Any, *, zero_error: float = 1.0, missing_error: float = 1.0
) -> float:
    """Mean of ``|approx - exact| / |exact|`` over paired results (THEMIS §7.1).

    Pairs are aligned by the caller (e.g. by window). Guards, since the relative error is
    undefined there:

    - ``exact == 0``: the pair's error is 0 if ``approx`` is also 0, else ``zero_error``
      (default 1, a 100 % error, the convention CoD uses for a missing group);
    - ``approx`` NaN (no degraded result for that window): ``missing_error`` (default 1).

    Parameters
    ----------
    approx, exact : array-like of float, one shape
        Degraded and exact results.

    Returns
    -------
    float
        NaN when there are no pairs.

    Raises
    ------
    ConfigError
        On mismatched shapes, non-finite exact values, infinite approx values, or negative
        guard values.

    Examples
    --------
    >>> round(mean_absolute_relative_error([9.0, 0.0, float("nan")], [10.0, 0.0, 5.0]), 4)
    0.3667
    """
    a = _values(approx, "approx", allow_nan=True)
    e = _values(exact, "exact")
    if a.shape != e.shape:
        raise ConfigError(f"approx and exact must have one shape, got {a.shape} and {e.shape}")
    for name, v in (("zero_error", zero_error), ("missing_error", missing_error)):
        if not np.isfinite(v) or v < 0:
            raise ConfigError(f"{name} must be a finite number >= 0, got {v!r}")
    if a.size == 0:
        return float("nan")
    err = np.empty(a.shape, dtype=np.float64)
    missing = np.isnan(a)
    zero = (e == 0) & ~missing
    rel = ~missing & ~zero
    err[rel] = np.abs(a[rel] - e[rel]) / np.abs(e[rel])
    err[zero] = np.where(a[zero] == 0, 0.0, zero_error)
    err[missing] = missing_error
    return float(err.mean())


def _kendall_p(pos_a: np.ndarray, pos_b: np.ndarray, p: float) -> float:
    """Fagin et al. K^(p) from positions (inf = absent) of the union's elements."""
    iu, ju = np.triu_indices(pos_a.shape[0], k=1)
    ai, aj, bi, bj = pos_a[iu], pos_a[ju], pos_b[iu], pos_b[ju]
    in_a_i, in_a_j = np.isfinite(ai), np.isfinite(aj)
    in_b_i, in_b_j = np.isfinite(bi), np.isfinite(bj)
    # Compare orders with inf for absent: an element present in a list is ahead of one absent.
    with np.errstate(invalid="ignore"):  # inf - inf where both are absent; masked below
        order_a = np.sign(ai - aj, where=in_a_i | in_a_j, out=np.zeros_like(ai))
        order_b = np.sign(bi - bj, where=in_b_i | in_b_j, out=np.zeros_like(bi))
    both_a = in_a_i & in_a_j
    both_b = in_b_i & in_b_j
    # Case 4: both in one list, neither in the other: penalty p.
    case4 = (both_a & ~in_b_i & ~in_b_j) | (both_b & ~in_a_i & ~in_a_j)
    # Case 3: i only in one list and j only in the other: penalty 1.
    case3 = (in_a_i & ~in_b_i & in_b_j & ~in_a_j) | (in_a_j & ~in_b_j & in_b_i & ~in_a_i)
    # Cases 1 and 2: the orders are defined in both lists (the absent element ranks last):
    # penalty 1 if they disagree.
    rest = ~case3 & ~case4
    disagree = rest & (order_a * order_b < 0)
    return float(disagree.sum() + case3.sum() + p * case4.sum())


def topk_distance(a: Sequence[Any], b: Sequence[Any], p: float = 0.5) -> float:
    """Normalised Kendall distance ``K^(p)`` between two top-k lists (Fagin et al., SODA 2003).

    Over every pair of distinct elements of the two lists' union, ``K^(p)`` counts 1 when both
    lists order the pair differently (an element missing from a list ranks below all present
    ones), 1 when each element appears in only one, different, list, and ``p`` when both
    appear in one list and neither in the other. It is divided by its maximum, reached by two
    disjoint lists: ``k^2 + p * k * (k - 1)``, so the result lies in [0, 1]: 0 for equal lists,
    1 for disjoint ones, and symmetric.

    Choices: ``p = 0.5`` by default, Fagin et al.'s "neutral" penalty (for ``p`` in [1/2, 1]
    ``K^(p)`` is a near-metric). A shorter list (a degraded result with fewer rows) is padded
    to the other's length with placeholders absent from the other list, so a missing row costs
    like a wrong one and only equal lists are at distance 0.

    Parameters
    ----------
    a, b : sequences of hashable items, no duplicates
        Ranked lists, best first.
    p : float in [0, 1]
        Penalty for a pair whose order cannot be compared.

    Raises
    ------
    ConfigError
        When ``p`` is outside [0, 1] or a list repeats an element.

    Examples
    --------
    >>> topk_distance([1, 2, 3], [1, 2, 3]), topk_distance([1, 2], [3, 4])
    (0.0, 1.0)
    >>> topk_distance([1, 2], [2, 1]) == topk_distance([2, 1], [1, 2])
    True
    """
    if not isinstance(p, int | float) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise ConfigError(f"p must be a number in [0, 1] (Fagin et al. K^(p)), got {p!r}")
    la, lb = list(a), list(b)
    for name, lst in (("a", la), ("b", lb)):
        if len(set(lst)) != len(lst):
            raise ConfigError(f"top-k list {name} repeats an element: {lst!r}")
    if la == lb:
        return 0.0
    k = max(len(la), len(lb))
    # Placeholders: objects equal only to themselves, so no padding matches anything.
    ta: list[Any] = la + [object() for _ in range(k - len(la))]
    tb: list[Any] = lb + [object() for _ in range(k - len(lb))]
    index: dict[Any, int] = {}
    for item in ta + tb:
        index.setdefault(item, len(index))
    pos_a = np.full(len(index), np.inf)
    pos_b = np.full(len(index), np.inf)
    pos_a[[index[x] for x in ta]] = np.arange(k)
    pos_b[[index[x] for x in tb]] = np.arange(k)
    return _kendall_p(pos_a, pos_b, float(p)) / (k * k + p * k * (k - 1))


def covariance_error(degraded: Any, exact: Any, *, relative: bool = False) -> float:
    """Spread of degraded covariances around the exact value (THEMIS §7.1, COV query).

    ``sqrt(mean((degraded - exact)^2))``: the standard deviation of the degraded values taken
    around the *exact* covariance rather than around their own mean, so a bias counts too (with
    random shedding the sample covariances scatter around the true one). ``exact`` may be one
    value or one per window. With ``relative=True`` it is divided by ``mean(|exact|)``.
    Windows whose degraded covariance is undefined (NaN: fewer than two tuples survived) are
    skipped; NaN when none is left.

    Raises
    ------
    ConfigError
        On shape mismatch, infinite values, non-finite exact values, or a relative error with
        an exact covariance of 0.

    Examples
    --------
    >>> covariance_error([1.0, 3.0], 2.0)
    1.0
    >>> covariance_error([1.0, 3.0, float("nan")], [2.0, 2.0, 2.0], relative=True)
    0.5
    """
    d = _values(degraded, "degraded", allow_nan=True)
    e = np.broadcast_to(_values(exact, "exact"), d.shape) if np.ndim(exact) == 0 else None
    if e is None:
        e = _values(exact, "exact")
        if e.shape != d.shape:
            raise ConfigError(
                f"degraded and exact must have one shape, got {d.shape} and {e.shape}"
            )
    ok = ~np.isnan(d)
    if not ok.any():
        return float("nan")
    err = float(np.sqrt(np.mean((d[ok] - e[ok]) ** 2)))
    if relative:
        scale = float(np.mean(np.abs(e[ok])))
        if scale == 0:
            raise ConfigError(
                "relative covariance error is undefined when the exact covariance is 0; "
                "use relative=False"
            )
        err /= scale
    return err


def _average_ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(x.shape[0], dtype=np.float64)
    ranks[order] = np.arange(1, x.shape[0] + 1)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return sums[inverse] / counts[inverse]


def spearman_rho(x: Any, y: Any) -> float:
    """Spearman's rank correlation, ties given their average rank.

    NaN when fewer than two pairs or when either side is constant (undefined).

    Raises
    ------
    ConfigError
        On mismatched lengths, multi-dimensional or non-finite input.

    Examples
    --------
    >>> spearman_rho([0.1, 0.5, 0.9], [0.8, 0.3, 0.1])
    -1.0
    >>> round(spearman_rho([1, 2, 2, 3], [1, 2, 3, 4]), 4)
    0.9487
    """
    a = _values(x, "x")
    b = _values(y, "y")
    if a.ndim != 1 or a.shape != b.shape:
        raise ConfigError(f"x and y must be 1-D of one length, got {a.shape} and {b.shape}")
    if a.size < 2:
        return float("nan")
    ra, rb = _average_ranks(a), _average_ranks(b)
    ra -= ra.mean()
    rb -= rb.mean()
    denom = float(np.sqrt((ra * ra).sum() * (rb * rb).sum()))
    if denom == 0:
        return float("nan")
    return float((ra * rb).sum() / denom)
