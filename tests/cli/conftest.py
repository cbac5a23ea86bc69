"""Shared pieces of the CLI tests: synthetic node records and a node double that replays them."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pandas as pd
import pytest

from spillway.config import NodeConfig, QuerySpec
from spillway.status import IntervalRecord, NodeSnapshot, QueryStatus


def synthetic_run(
    config: NodeConfig,
    n: int = 30,
    *,
    capacity: float = 1000.0,
    overload: float = 3.0,
    interval_latency: bool = True,
) -> tuple[list[IntervalRecord], list[NodeSnapshot], pd.DataFrame]:
    """Interval records, one snapshot per interval and result rows of an overloaded node.

    Query ``i`` keeps a share ``1 / (overload * (1 + 0.1 i))``; its latency is about
    ``1 + 3.2 i`` s, so with :func:`small_config` query 1 (top5, default 4 s target) misses its
    target and query 2 (8 s target) does not. Every fifth interval the node processes 70 % of
    the estimated capacity, otherwise 95 %. Window ``k`` is ``[k - 1, k)`` s and ends at
    interval ``k``. ``interval_latency=False`` leaves the records' latencies empty (the result
    rows still carry them).
    """
    names = [q.name for q in config.queries]
    records, snaps, rows = [], [], []
    epoch = pd.Timestamp("2025-01-01T00:00:00Z")
    for k in range(1, n + 1):
        t = float(k) * config.trigger_s
        kept = {nm: 1.0 / (overload * (1 + 0.1 * i)) for i, nm in enumerate(names)}
        lat = {nm: 1.0 + 3.2 * i + 0.01 * k for i, nm in enumerate(names)}
        ramp = min(t / config.stw_s, 1.0)
        sic = {nm: kept[nm] * ramp for nm in names}
        processed = int(capacity * (0.7 if k % 5 == 0 else 0.95))
        records.append(
            IntervalRecord(
                t=t,
                capacity_tuples=capacity,
                arrived_tuples=int(overload * capacity),
                admitted_tuples=int(capacity),
                processed_tuples=processed,
                batch_s=0.6,
                query_sic=sic,
                query_kept=kept,
                query_latency_s=lat if interval_latency else {},
            )
        )
        per_q = overload * capacity / len(names)
        statuses = tuple(
            QueryStatus(
                name=q.name,
                kind=q.kind,
                arrival_rate=per_q,
                kept_fraction=kept[q.name],
                sic=sic[q.name],
                latency_p95_s=lat[q.name],
                latency_target_s=q.latency_target_s or 3 * config.trigger_s + q.window_s,
                rows_in=int(per_q * k),
                rows_kept=int(per_q * k * kept[q.name]),
            )
            for q in config.queries
        )
        snaps.append(
            NodeSnapshot(
                t=t,
                capacity_tuples_per_s=capacity,
                processed_tuples_per_s=float(processed),
                jain=0.9,
                queries=statuses,
                policy=config.policy,
            )
        )
        for q in config.queries:
            ranks = 5 if q.kind == "top5" else 1
            for rank in range(1, ranks + 1):
                rows.append(
                    {
                        "query": q.name,
                        "kind": q.kind,
                        "window_start": epoch + pd.Timedelta(seconds=t - 1),
                        "rank": rank,
                        "value": 50.0 + rank,
                        "sic": sic[q.name] * q.window_s / config.stw_s / ranks,
                        "latency_s": lat[q.name],
                        "produced_at": epoch + pd.Timedelta(seconds=t + lat[q.name]),
                    }
                )
    return records, snaps, pd.DataFrame(rows)


class ReplayNode:
    """A node double for ``spillway run``: replays recorded snapshots, records how it was used.

    ``interrupt_after`` raises KeyboardInterrupt after that many ticks (a user's Ctrl-C).
    """

    instances: list[ReplayNode] = []

    def __init__(
        self,
        config: NodeConfig,
        *,
        records: Sequence[IntervalRecord],
        snaps: Sequence[NodeSnapshot],
        results: pd.DataFrame,
        interrupt_after: int | None = None,
    ) -> None:
        self.config = config
        self._records, self._snaps, self._results = list(records), list(snaps), results
        self.interrupt_after = interrupt_after
        self.ticks = 0
        self.stopped = False
        self.run_args: tuple[float, float] | None = None
        ReplayNode.instances.append(self)

    def run(
        self,
        duration_s: float,
        on_tick: Callable[[NodeSnapshot], None] | None = None,
        tick_s: float = 1.0,
        before_stop: Callable[[ReplayNode], None] | None = None,
    ) -> None:
        self.run_args = (duration_s, tick_s)
        for s in self._snaps:
            if s.t > duration_s + 1e-9:
                break
            if self.interrupt_after is not None and self.ticks >= self.interrupt_after:
                raise KeyboardInterrupt
            self.ticks += 1
            if on_tick is not None:
                on_tick(s)
        if before_stop is not None:
            before_stop(self)
        self.stopped = True

    def stop(self) -> None:
        self.stopped = True

    def snapshot(self) -> NodeSnapshot:
        return self._snaps[max(self.ticks - 1, 0)]

    def history(self) -> list[IntervalRecord]:
        return self._records[: self.ticks]

    def results(self) -> pd.DataFrame:
        upto = self._snaps[max(self.ticks - 1, 0)].t
        ws = self._results["window_start"]
        return self._results[(ws - ws.min()) / pd.Timedelta(seconds=1) < upto]


def small_config(**kw: object) -> NodeConfig:
    """Three queries (avg, top5, cov), 1 s trigger, 4 s STW."""
    queries = (
        QuerySpec(name="avg-gaussian", kind="avg", feed="gaussian"),
        QuerySpec(name="top5-cluster", kind="top5", feed="cluster", rate=20.0),
        QuerySpec(name="cov-cluster", kind="cov", feed="cluster", latency_target_s=8.0),
    )
    return NodeConfig(queries=queries, stw_s=4.0, **kw)  # type: ignore[arg-type]


@pytest.fixture
def replay_factory() -> Callable[..., Callable[[NodeConfig], ReplayNode]]:
    """``replay_factory(n=.., interrupt_after=..)`` -> a node factory for ``main``."""
    ReplayNode.instances = []

    def make(n: int = 12, interrupt_after: int | None = None) -> Callable[[NodeConfig], ReplayNode]:
        def factory(config: NodeConfig) -> ReplayNode:
            records, snaps, results = synthetic_run(config, n)
            return ReplayNode(
                config,
                records=records,
                snaps=snaps,
                results=results,
                interrupt_after=interrupt_after,
            )

        return factory

    return make


def finite(x: object) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)
