"""Groups a bounded sample never saw: how many, estimated from the sample itself.

Under overload a per-group policy (CoD) decides on the group counts of a bounded sample of the
arrivals instead of all of them (``ControllerConfig.group_read``): a group with no tuple in the
sample is neither seen nor kept, so the result misses it without any window saying so. Its
number cannot be counted without reading every key, which is what the bounded read avoids;
it is estimated here from the sample's own frequencies, the way species richness is estimated
from a catch (Chao 1984):

- ``f1`` groups seen exactly once and ``f2`` seen exactly twice in a sample of ``n`` tuples;
- the groups present among the arrivals but absent from the sample number about
  ``(n - 1) / n * f1 * (f1 - 1) / (2 * (f2 + 1))`` (the bias-corrected Chao1 lower bound:
  Chao 1987; Colwell and Coddington 1994);
- the share of the arrivals that belong to seen groups, Good-Turing's sample coverage, is about
  ``1 - f1 / n`` (Good 1953).

Both assume tuples drawn independently of their group; the controller's sample is 64 runs of
consecutive tuples per lane, which satisfies it when a lane's keys are not clustered in arrival
order (a feed that sends one group in long bursts makes the estimate low). A sample that read
every arrival of a query leaves nothing unseen (:func:`unseen_groups` is then called with
``complete=True``).

Examples
--------
>>> round(unseen_groups([1, 1, 1, 2, 5, 9]), 3)   # f1 = 3, f2 = 1, n = 19
1.421
>>> unseen_groups([3, 4, 5])                      # no singleton: nothing is likely missing
0.0
>>> unseen_groups([1, 1, 1], complete=True)       # every arrival was read
0.0
>>> round(sample_coverage([1, 1, 1, 2, 5, 9]), 4)
0.8421

References
----------
A. Chao, "Nonparametric estimation of the number of classes in a population", Scandinavian
Journal of Statistics 11 (1984); A. Chao, "Estimating the population size for capture-recapture
data with unequal catchability", Biometrics 43 (1987); I. J. Good, "The population frequencies
of species and the estimation of population parameters", Biometrika 40 (1953); CoD (Slo et
al.) §VII-C2, "missing groups".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spillway.errors import ConfigError


def _counts(counts: Sequence[int] | np.ndarray) -> np.ndarray:
    c = np.asarray(counts)
    if c.ndim != 1 or (c.size and not np.issubdtype(c.dtype, np.integer)):
        raise ConfigError(
            f"group counts must be a 1-d sequence of integers, got {c.dtype} of shape {c.shape}"
        )
    if c.size and int(c.min()) < 1:
        raise ConfigError(
            f"group counts must be >= 1 (one entry per group the sample saw), got {int(c.min())}"
        )
    return c.astype(np.int64)


def unseen_groups(counts: Sequence[int] | np.ndarray, *, complete: bool = False) -> float:
    """Estimated number of groups among the arrivals that the sample saw no tuple of.

    Parameters
    ----------
    counts : per group the sample saw, its tuples in the sample (each >= 1).
    complete : the sample is every arrival (nothing can be unseen).

    Raises
    ------
    ConfigError
        ``counts`` is not 1-d integers, or holds a count below 1.

    >>> unseen_groups([])
    0.0
    >>> unseen_groups([0, 2])
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: group counts must be >= 1 (one entry per group the sample saw), got 0
    """
    c = _counts(counts)
    n = int(c.sum())
    if complete or n < 2 or int((c == 1).sum()) < 2:
        return 0.0
    f1 = int((c == 1).sum())
    f2 = int((c == 2).sum())
    return float((n - 1) / n * f1 * (f1 - 1) / (2.0 * (f2 + 1)))


def sample_coverage(counts: Sequence[int] | np.ndarray) -> float:
    """Good-Turing's estimate of the share of arrivals whose group the sample saw (1 for an
    empty sample: nothing arrived to miss).

    >>> sample_coverage([]), sample_coverage([1])
    (1.0, 0.0)
    """
    c = _counts(counts)
    n = int(c.sum())
    if n == 0:
        return 1.0
    return float(1.0 - (c == 1).sum() / n)


__all__ = ["sample_coverage", "unseen_groups"]
