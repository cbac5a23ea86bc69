"""Window concepts (CoD Table II), concept drift between windows, and CoD's error metrics.

CoD defines a *concept* per window and per query kind (CoD §II-C, Table II):

- scalar aggregate: the mean and variance of the aggregated value, :func:`scalar_concept`;
- grouped aggregate: the frequency of every group, :func:`group_stats` (``count``);
- equi-join: the key frequencies of each input stream on their key intersection,
  :func:`join_frequencies`.

Drift is measured between consecutive windows of the Fig. 1 query (top-10 routes by mean fare),
whose concept is a set of keys (:func:`top_k_by_mean`): *overlap* = |C_w ∩ C_w+1| / |C_w| and
*distance* = |C_w \\ C_w+1| / |C_w| (CoD §I, Fig. 2: "mean set intersection" and "mean set
difference"; the paper defines both loosely, beside a "similarity … other than overlap").

Error metrics (CoD §VII-C3): the relative error of a scalar result, and for grouped results the
mean over the groups of the exact result of the per-group relative error, where a group missing
from the shed result counts 100 % (and is counted in ``missing``). Every per-group error is clipped
to [0, 1], the codomain CoD gives its error (Eq. 1).

Examples
--------
>>> import numpy as np
>>> keys = np.array([3, 3, 7, 9, 9, 9])
>>> vals = np.array([1.0, 3.0, 10.0, 4.0, 5.0, 6.0])
>>> s = group_stats(keys, vals)
>>> s.keys.tolist(), s.count.tolist(), s.mean.tolist()
([3, 7, 9], [2, 1, 3], [2.0, 10.0, 5.0])
>>> top_k_by_mean(keys, vals, 2).tolist()
[7, 9]
>>> concept_distance([7, 9], [7, 3]), concept_overlap([7, 9], [7, 3])
(0.5, 0.5)
>>> e = grouped_error(s, est_keys=np.array([3, 9]), est_means=np.array([2.0, 4.0]))
>>> round(e.mean, 4), e.missing
(0.4, 1)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from spillway.errors import ConfigError

__all__ = [
    "DriftSeries",
    "GroupStats",
    "GroupedError",
    "JoinConcept",
    "ScalarConcept",
    "concept_distance",
    "concept_overlap",
    "drift_series",
    "group_stats",
    "grouped_error",
    "join_frequencies",
    "relative_error",
    "scalar_concept",
    "top_k_by_mean",
]

#: Keys up to this many times the input length (plus a constant) are counted with np.bincount;
#: sparser keys go through np.unique.
_DENSE_FACTOR = 4
_DENSE_SLACK = 1 << 16


def _keys(keys: object, name: str = "keys") -> np.ndarray:
    k = np.asarray(keys)
    if k.ndim != 1:
        raise ConfigError(f"{name} must be one-dimensional, got shape {k.shape}")
    if k.size and not np.issubdtype(k.dtype, np.integer):
        raise ConfigError(f"{name} must be integers (group or join keys), got dtype {k.dtype}")
    return k.astype(np.int64, copy=False)


@dataclass(frozen=True, kw_only=True, eq=False)
class GroupStats:
    """Per-group count, sum, mean and variance of one window (the grouped concept).

    Attributes
    ----------
    keys : int64 (G,)
        Distinct keys, ascending.
    count : int64 (G,)
        Tuples per key: the group frequencies (CoD Table II, "Group Aggr.").
    total, mean, var : float64 (G,)
        Sum, mean and population variance of the values per key (zeros without values).
    inverse : int64 (n,)
        Index into ``keys`` of every input tuple.
    """

    keys: np.ndarray
    count: np.ndarray
    total: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    inverse: np.ndarray

    @property
    def n_groups(self) -> int:
        """Number of distinct keys G."""
        return int(self.keys.shape[0])


def group_stats(keys: object, values: object | None = None) -> GroupStats:
    """Group a window by key in one vectorised pass (np.bincount for dense keys).

    Parameters
    ----------
    keys : int array (n,)
    values : float array (n,) or None

    Returns
    -------
    GroupStats

    Raises
    ------
    ConfigError
        ``keys`` is not a 1-D integer array or ``values`` has another length.

    Examples
    --------
    >>> group_stats(np.array([5, 1, 5])).count.tolist()
    [1, 2]
    >>> group_stats(np.array([1, 2]), np.array([1.0]))
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: values must have one entry per key (2), got 1
    """
    k = _keys(keys)
    n = k.shape[0]
    if values is None:
        v = None
    else:
        v = np.asarray(values, dtype=np.float64)
        if v.shape != (n,):
            raise ConfigError(f"values must have one entry per key ({n}), got {v.shape[0]}")
    if n == 0:
        z = np.zeros(0)
        return GroupStats(
            keys=np.zeros(0, np.int64), count=np.zeros(0, np.int64), total=z, mean=z, var=z,
            inverse=np.zeros(0, np.int64),
        )  # fmt: skip
    kmin, kmax = int(k.min()), int(k.max())
    uk: np.ndarray
    inv: np.ndarray
    cnt: np.ndarray
    if kmin >= 0 and kmax <= _DENSE_FACTOR * n + _DENSE_SLACK:
        full = np.bincount(k, minlength=kmax + 1)
        uk = np.flatnonzero(full)
        remap = np.full(kmax + 1, -1, dtype=np.int64)
        remap[uk] = np.arange(uk.shape[0])
        inv = remap[k]
        cnt = full[uk].astype(np.int64)
    else:
        uk, inv, cnt = np.unique(k, return_inverse=True, return_counts=True)
        inv = inv.astype(np.int64).reshape(-1)
        cnt = cnt.astype(np.int64)
    g = uk.shape[0]
    tot: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    if v is None:
        tot = mean = var = np.zeros(g)
    else:
        tot = np.bincount(inv, weights=v, minlength=g)
        mean = tot / cnt
        dev = v - mean[inv]
        var = np.bincount(inv, weights=dev * dev, minlength=g) / cnt
    return GroupStats(
        keys=uk.astype(np.int64), count=cnt, total=tot, mean=mean, var=var, inverse=inv
    )


@dataclass(frozen=True, kw_only=True)
class ScalarConcept:
    """The scalar concept (μ, σ²) of a window and its size (CoD Table II, "Aggregation")."""

    n: int
    mean: float
    var: float

    @property
    def cv2(self) -> float:
        """Squared coefficient of variation σ²/μ² (inf when μ = 0 and σ² > 0)."""
        if self.var == 0:
            return 0.0
        return float("inf") if self.mean == 0 else self.var / self.mean**2


def scalar_concept(values: object) -> ScalarConcept:
    """Mean and population variance of a window's values.

    >>> c = scalar_concept([2.0, 4.0])
    >>> c.n, c.mean, c.var, c.cv2
    (2, 3.0, 1.0, 0.1111111111111111)
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if v.size == 0:
        return ScalarConcept(n=0, mean=0.0, var=0.0)
    return ScalarConcept(n=int(v.size), mean=float(v.mean()), var=float(v.var()))


@dataclass(frozen=True, kw_only=True, eq=False)
class JoinConcept:
    """Key frequencies of two streams on their key intersection (CoD Table II, "Equi-Join").

    Attributes
    ----------
    keys : int64 (K,) keys present in both streams, ascending.
    count_a, count_b : int64 (K,) frequency of each key in stream a and in stream b.
    outside_a, outside_b : tuples of each stream whose key has no partner (they cannot join).
    """

    keys: np.ndarray
    count_a: np.ndarray
    count_b: np.ndarray
    outside_a: int
    outside_b: int

    @property
    def join_size(self) -> int:
        """Exact number of result rows of the equi-join, Σ_k count_a·count_b."""
        return int((self.count_a * self.count_b).sum())


def join_frequencies(keys_a: object, keys_b: object) -> JoinConcept:
    """Per-stream key histograms restricted to the key intersection.

    >>> j = join_frequencies(np.array([1, 1, 2, 5]), np.array([1, 5, 5, 6]))
    >>> j.keys.tolist(), j.count_a.tolist(), j.count_b.tolist(), j.outside_a, j.outside_b
    ([1, 5], [2, 1], [1, 2], 1, 1)
    >>> j.join_size
    4
    """
    a, b = group_stats(_keys(keys_a, "keys_a")), group_stats(_keys(keys_b, "keys_b"))
    common, ia, ib = np.intersect1d(a.keys, b.keys, assume_unique=True, return_indices=True)
    ca, cb = a.count[ia], b.count[ib]
    return JoinConcept(
        keys=common,
        count_a=ca,
        count_b=cb,
        outside_a=int(a.count.sum() - ca.sum()),
        outside_b=int(b.count.sum() - cb.sum()),
    )


def top_k_by_mean(keys: object, values: object, k: int = 10) -> np.ndarray:
    """The concept of CoD's Fig. 1 query: the ``k`` keys with the highest mean value.

    Ties are broken by the smaller key, so the result is deterministic. Fewer than ``k`` keys in
    the window give all of them.

    >>> top_k_by_mean(np.array([1, 2, 3]), np.array([5.0, 9.0, 5.0]), 2).tolist()
    [2, 1]
    >>> top_k_by_mean(np.array([1]), np.array([1.0]), 0)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: k must be an int >= 1 (the size of the top-k concept), got 0
    """
    if not isinstance(k, int | np.integer) or isinstance(k, bool) or k < 1:
        raise ConfigError(f"k must be an int >= 1 (the size of the top-k concept), got {k!r}")
    s = group_stats(keys, values)
    order = np.lexsort((s.keys, -s.mean))
    return s.keys[order[:k]]


def _set(x: object, name: str) -> np.ndarray:
    arr = np.unique(_keys(x, name))
    return arr


def concept_overlap(prev: object, curr: object) -> float:
    """|C_w ∩ C_w+1| / |C_w|: the share of the previous concept still present (CoD §II-C).

    >>> concept_overlap([1, 2, 3, 4], [3, 4, 5, 6])
    0.5
    """
    p, c = _set(prev, "prev"), _set(curr, "curr")
    if p.size == 0:
        raise ConfigError("prev concept is empty: overlap and distance are relative to |C_w| > 0")
    return float(np.intersect1d(p, c, assume_unique=True).size / p.size)


def concept_distance(prev: object, curr: object) -> float:
    """|C_w \\ C_w+1| / |C_w|: the share of the previous concept that changed (CoD Fig. 2).

    >>> concept_distance([1, 2, 3, 4], [3, 4, 5, 6])
    0.5
    >>> concept_distance([], [1])
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: prev concept is empty: overlap and distance are relative to |C_w| > 0
    """
    return 1.0 - concept_overlap(prev, curr)


@dataclass(frozen=True, kw_only=True, eq=False)
class DriftSeries:
    """Distance and overlap between every pair of consecutive windows (W - 1 values each)."""

    distance: np.ndarray
    overlap: np.ndarray

    @property
    def distance_mean(self) -> float:
        """Mean concept distance (nan without pairs)."""
        return float(self.distance.mean()) if self.distance.size else float("nan")

    @property
    def distance_max(self) -> float:
        """Largest concept distance (nan without pairs)."""
        return float(self.distance.max()) if self.distance.size else float("nan")

    @property
    def overlap_mean(self) -> float:
        """Mean concept overlap (nan without pairs)."""
        return float(self.overlap.mean()) if self.overlap.size else float("nan")


def drift_series(concepts: Sequence[object]) -> DriftSeries:
    """Concept distance and overlap between consecutive windows' concepts (CoD Fig. 2).

    >>> d = drift_series([[1, 2], [2, 3], [2, 3]])
    >>> d.distance.tolist(), d.overlap_mean
    ([0.5, 0.0], 0.75)
    """
    ov = np.array(
        [concept_overlap(a, b) for a, b in zip(concepts[:-1], concepts[1:], strict=True)],
        dtype=np.float64,
    )
    return DriftSeries(distance=1.0 - ov, overlap=ov)


def relative_error(exact: float, estimate: float | None) -> float:
    """|estimate − exact| / |exact|, clipped to [0, 1]; a missing estimate (None/nan) is 1.

    An exact value of 0 gives 0 when the estimate is 0 too, else 1 (CoD §VII-C3, DEC metric).

    >>> relative_error(100.0, 95.0), relative_error(100.0, None), relative_error(2.0, 9.0)
    (0.05, 1.0, 1.0)
    """
    if estimate is None or not np.isfinite(estimate):
        return 1.0
    if exact == 0:
        return 0.0 if estimate == 0 else 1.0
    return float(min(1.0, abs(estimate - exact) / abs(exact)))


@dataclass(frozen=True, kw_only=True, eq=False)
class GroupedError:
    """CoD's grouped error of one window.

    Attributes
    ----------
    mean : float
        Mean over the exact result's groups of the per-group relative error (missing = 1).
    missing : int
        Groups of the exact result absent from the shed result.
    n_groups : int
        Groups of the exact result.
    per_group : float64 (G,)
        Per-group errors in the order of the exact result's keys.
    """

    mean: float
    missing: int
    n_groups: int
    per_group: np.ndarray


def grouped_error(exact: GroupStats, est_keys: object, est_means: object) -> GroupedError:
    """Per-group relative error of a shed grouped result against the exact one (CoD §VII-C3).

    Groups absent from ``est_keys`` count 100 % error; keys of the estimate that are not in the
    exact result are ignored (shedding cannot create groups). An exact result without groups has
    error 0.

    Parameters
    ----------
    exact : GroupStats
        The window with nothing shed (:func:`group_stats`).
    est_keys, est_means : arrays (M,)
        Keys and mean values of the shed result.

    Examples
    --------
    >>> ex = group_stats(np.array([1, 2, 2]), np.array([10.0, 4.0, 6.0]))
    >>> grouped_error(ex, np.array([1, 2]), np.array([11.0, 5.0])).per_group.tolist()
    [0.1, 0.0]
    >>> grouped_error(ex, np.array([2]), np.array([5.0, 1.0]))
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: est_keys and est_means must have the same length, got 1 and 2
    """
    ek = _keys(est_keys, "est_keys")
    em = np.asarray(est_means, dtype=np.float64).reshape(-1)
    if ek.shape[0] != em.shape[0]:
        raise ConfigError(
            f"est_keys and est_means must have the same length, got {ek.shape[0]} and {em.shape[0]}"
        )
    g = exact.n_groups
    if g == 0:
        return GroupedError(mean=0.0, missing=0, n_groups=0, per_group=np.zeros(0))
    pos = np.searchsorted(exact.keys, ek)
    ok = (pos < g) & (exact.keys[np.minimum(pos, g - 1)] == ek)
    est = np.full(g, np.nan)
    est[pos[ok]] = em[ok]
    have = np.isfinite(est)
    truth = exact.mean
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(est - truth) / np.abs(truth)
    rel = np.where(truth == 0, np.where(est == 0, 0.0, 1.0), rel)
    per = np.where(have, np.minimum(rel, 1.0), 1.0)
    return GroupedError(
        mean=float(per.mean()), missing=int(g - have.sum()), n_groups=g, per_group=per
    )
