"""A root fragment's results reported to the federation's query coordinator (THEMIS §6).

:class:`ResultReporter` is the ``foreachBatch`` sink of a fragment with no consumer: each batch
of result rows it receives (from :func:`spillway.spark.links.link_stream`, or its own plan) is
summed per window and reported with its SIC to the coordinator service
(:meth:`~spillway.federation.client.CoordinatorClient.report`, Eq. 4 over the STW on the
service's side); the :class:`~spillway.federation.update.NodeUpdate` that comes back is kept
in :attr:`ResultReporter.update` for the node's controller to project its shedding over
(:class:`spillway.quality.LocalProjection`). A batch Spark replays within the process's life
(same ``batch_id``) is not reported again.

Examples
--------
>>> ResultReporter.__name__
'ResultReporter'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from spillway.errors import ConfigError
from spillway.federation.client import CoordinatorClient
from spillway.federation.placement import LinkIn
from spillway.federation.update import NodeUpdate


class ResultReporter:
    """Reports a root fragment's result SIC to the coordinator, each batch once.

    Parameters
    ----------
    client : the node's :class:`CoordinatorClient`.
    link : the root fragment's input (its ``query_id`` is the query's global index).
    clock : the node's clock (seconds), the results' production time ``t^r_τ``.

    Attributes
    ----------
    update : NodeUpdate or None
        The last update the coordinator sent back.
    reported_sic : float
        The SIC reported so far.

    Raises
    ------
    ConfigError
        ``clock`` is not callable.
    """

    def __init__(
        self, client: CoordinatorClient, link: LinkIn, *, clock: Callable[[], float]
    ) -> None:
        if not callable(clock):
            raise ConfigError(f"clock must be a callable returning seconds, got {clock!r}")
        self.client, self.link, self.clock = client, link, clock
        self.update: NodeUpdate | None = None
        self.reported_sic = 0.0
        self._last_batch = -1

    def __call__(self, df: Any, batch_id: int) -> None:
        if batch_id <= self._last_batch:
            return  # a replay: reported already
        rows = df.groupBy("window_start").sum("sic").toPandas()
        sic = rows.iloc[:, 1].to_numpy(dtype=np.float64) if len(rows) else np.zeros(0)
        now = float(self.clock())
        self.update = self.client.report(
            sent=now,
            result_time=np.full(sic.size, now),
            query=np.full(sic.size, self.link.query_id, dtype=np.int64),
            sic=sic,
        )
        self.reported_sic += float(sic.sum())
        self._last_batch = int(batch_id)


__all__ = ["ResultReporter"]
