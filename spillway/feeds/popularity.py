"""Zipf popularity whose ranking drifts by epoch: the key mix of the taxi and tasks feeds.

``n`` items (routes, task classes) share the tuples by a Zipf law of exponent ``s`` over
popularity ranks (rank 1 the most frequent). Time is cut into epochs; every item holds a hashed
score that it redraws once every ``1 / drift`` epochs on average (at its own hashed phase), and
the ranking follows the scores, so each epoch a fraction ``drift`` of the items moves. This is
how CoD's workloads (DEBS 2015 routes, GCM task classes; CoD §VII-B, Table III) keep a skewed
but shifting group mix. Everything is a pure function of (seed, stream, epoch) through
:mod:`spillway.feeds.hashing`.

Examples
--------
>>> p = DriftingZipf(seed=1, stream="demo", n=4, s=1.0, drift=1.0)
>>> p.cdf.round(2).tolist()                        # the most popular item takes 48 %
[0.48, 0.72, 0.88, 1.0]
>>> top = int(p.order(0)[0])
>>> float(p.share(0)[top].round(2)), int(p.draw(np.array([0.3]), np.array([0]))[0]) == top
(0.48, True)
"""

from __future__ import annotations

import numpy as np

from spillway.feeds import hashing
from spillway.feeds.options import count_of


def zipf_cdf(n: int, s: float) -> np.ndarray:
    """Cumulative Zipf probabilities of ranks 1..n (exponent ``s``), last entry exactly 1.

    >>> zipf_cdf(3, 1.0).round(3).tolist()
    [0.545, 0.818, 1.0]
    """
    w = np.arange(1, n + 1, dtype=np.float64) ** (-s)
    c = np.cumsum(w)
    c /= c[-1]
    return c


class DriftingZipf:
    """Zipf shares of ``n`` items over a ranking that drifts by epoch.

    Parameters
    ----------
    seed : seed of the phases and scores.
    stream : prefix of the hash streams (``"<stream>.pop.phase"``, ``"<stream>.pop.score"``).
    n : number of items, ids ``0 .. n - 1``.
    s : Zipf exponent (> 0; larger is more skewed).
    drift : fraction of the items whose score is redrawn per epoch, [0, 1].
    """

    def __init__(self, *, seed: int, stream: str, n: int, s: float, drift: float) -> None:
        self.seed, self.stream, self.n, self.drift = seed, stream, n, drift
        self.cdf = zipf_cdf(n, s)
        self.phase = hashing.uniform(seed, f"{stream}.pop.phase", np.arange(n), 0)

    def order(self, epoch: int) -> np.ndarray:
        """Item ids from the most to the least frequent at ``epoch`` (an int >= 0)."""
        e = count_of("epoch", epoch, low=0)
        refresh = np.floor(e * self.drift + self.phase).astype(np.int64)
        score = hashing.uniform(self.seed, f"{self.stream}.pop.score", np.arange(self.n), refresh)
        return np.argsort(-score, kind="stable")

    def share(self, epoch: int) -> np.ndarray:
        """Expected share of the tuples of every item at ``epoch`` (sums to 1)."""
        share = np.empty(self.n)
        share[self.order(epoch)] = np.diff(np.concatenate(([0.0], self.cdf)))
        return share

    def draw(self, u: np.ndarray, epoch: np.ndarray) -> np.ndarray:
        """Items (int64) of tuples with uniforms ``u`` in (0, 1) arriving in epochs ``epoch``."""
        rank = np.minimum(np.searchsorted(self.cdf, u, side="right"), self.n - 1)
        out = np.empty(rank.shape, dtype=np.int64)
        for e in np.unique(epoch):
            at = epoch == e
            out[at] = self.order(int(e))[rank[at]]
        return out
