"""One node of a federation file on Spark: its fragments as a :class:`~spillway.spark.node.Node`.

``spillway federation node FED.toml --node NAME`` runs what this module builds: one Spark
application (its own session, checkpoints and capacity) hosting the node's fragments
(:func:`~spillway.federation.placement.node_links`). Each hosted fragment becomes up to two of
the node's queries, so the one controller sheds across all of them (THEMIS §6: one input
buffer per node):

- ``<query>.<fragment>``: the fragment's own sources (``sources`` of the file, the query's
  ``kind``, ``feed`` and ``rate``), each tuple carrying its share of the *whole* query's SIC
  (``sic_sources``: THEMIS Eq. 1 counts every fragment's sources);
- ``<query>.<fragment>.in``: the fragment's link topic, the upstream fragments' rows read with
  the Kafka feed's ``sic_column``, so they keep the SIC they carry (THEMIS Eq. 3 across nodes).

A fragment with consumers sends the results of its queries downstream (:class:`LinkForwarder`:
summed per window, one Kafka transaction per batch and link, a replicated output's SIC divided
among its copies); a fragment without consumers produces its query's results, reported to the
coordinator (:class:`RootReporter`), whose updates the controller balances
(:class:`~spillway.federation.view.CoordinatorView`). A :class:`Heartbeat` thread tells the
coordinator the node is alive between result batches, so a node is lost when its process is,
not when a micro-batch runs long.

References
----------
THEMIS (Kalyvianaki et al., SIGMOD 2016) §3, Eq. 1, Eq. 3, §6; Fiscato, PhD thesis 2012,
Assumption 9 (replicated outputs).

Examples
--------
>>> from spillway.federation import load_federation
>>> from spillway.kafka.connection import KafkaConnection
>>> fed = load_federation("spillway/examples/federation.toml")
>>> conn = KafkaConnection(bootstrap_servers="127.0.0.1:9092")
>>> cfg, local = node_config(fed, "a", conn, prefix="demo")
>>> [(q.name, q.sources, q.sic_sources) for q in cfg.queries]
[('avg-all.root', 10, 30), ('avg-all.root.in', None, None), ('cov.middle', 2, 6), ('cov.middle.in', None, None)]
>>> [(lq.fragment, lq.query_id, lq.role, lq.root) for lq in local]
[('avg-all/root', 0, 'sources', True), ('avg-all/root', 0, 'link', True), ('cov/middle', 2, 'sources', False), ('cov/middle', 2, 'link', False)]
>>> [lq.fragment_index for lq in local]  # avg-all's 1st of 3, cov's 2nd of 3 (5 before it)
[0, 0, 6, 6]
>>> cfg.policy
'balance-sic'
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from spillway.config import NodeConfig, QuerySpec
from spillway.errors import ConfigError, ControlChannelError
from spillway.events import ResultsEvent
from spillway.federation.client import CoordinatorClient
from spillway.federation.config import FederationConfig
from spillway.federation.link import LinkWriter
from spillway.federation.placement import LINK_PREFIX, LinkOut, fragment_id, node_links
from spillway.federation.view import CoordinatorView
from spillway.kafka.connection import KafkaConnection
from spillway.spark.fed_results import NodeReporter
from spillway.spark.links import LINK_SCHEMA


@dataclass(frozen=True, kw_only=True)
class LocalQuery:
    """One of the node's queries: the fragment it belongs to and what it reads.

    ``query_id`` is the federated query's index (file order); ``role`` is ``"sources"`` (the
    fragment's own sources) or ``"link"`` (its upstream fragments' rows); ``root`` says the
    fragment produces its query's results; ``fragment_index`` is the fragment's global index
    (the coordinator's layout: every query's fragments in file order).
    """

    name: str
    fragment: str
    query_id: int
    role: str
    root: bool
    fragment_index: int = -1


def node_config(
    fed: FederationConfig,
    node: str,
    conn: KafkaConnection,
    *,
    prefix: str = LINK_PREFIX,
    trigger_s: float = 1.0,
    master: str = "local[1]",
    seed: int = 0,
    checkpoint_dir: str | None = None,
) -> tuple[NodeConfig, tuple[LocalQuery, ...]]:
    """The :class:`NodeConfig` running ``node``'s fragments, and what each of its queries is.

    The node sheds with its ``[[nodes]]`` entry's ``policy`` (:meth:`FederationConfig.policy_of`).

    Raises
    ------
    ConfigError
        No such node, a node hosting no fragment, or a query's kind, feed or rate the node
        refuses (the message names the query).
    """
    links = node_links(fed, node, prefix=prefix)
    if not links.fragments:
        raise ConfigError(f"node {node!r} hosts no fragment: place one on it or remove the node")
    inputs = {i.fragment: i for i in links.inputs}
    specs: list[QuerySpec] = []
    local: list[LocalQuery] = []
    index = -1  # the fragment's global index (FederationConfig.layout's numbering)
    for qi, q in enumerate(fed.queries):
        total = sum(f.sources for f in q.fragments)
        for f in q.fragments:
            index += 1
            if f.node != node:
                continue
            fid = fragment_id(q.name, f.name)
            base = f"{q.name}.{f.name}"
            if f.sources > 0:
                specs.append(
                    QuerySpec(name=base, kind=q.kind, feed=q.feed, sources=f.sources,
                              rate=float(q.rate), sic_sources=total)
                )  # fmt: skip
                local.append(
                    LocalQuery(
                        name=base,
                        fragment=fid,
                        query_id=qi,
                        role="sources",
                        root=not f.to,
                        fragment_index=index,
                    )  # fmt: skip
                )
            if fid in inputs:
                options = {
                    **conn.spark_options(),
                    "subscribe": inputs[fid].topic,
                    "startingOffsets": "earliest",
                    "schema": LINK_SCHEMA,
                    "value_column": "sic",
                    "sic_column": "sic",
                }
                specs.append(QuerySpec(name=f"{base}.in", kind="avg", feed="kafka",
                                       feed_options=options))  # fmt: skip
                local.append(
                    LocalQuery(name=f"{base}.in", fragment=fid, query_id=qi, role="link",
                               root=not f.to, fragment_index=index)
                )  # fmt: skip
    cfg = NodeConfig(
        queries=tuple(specs),
        policy=fed.policy_of(node),
        probe_every=fed.probe_every_of(node),
        trigger_s=trigger_s,
        stw_s=fed.stw_s,
        seed=seed,
        master=master,
        checkpoint_dir=checkpoint_dir,
    )
    return cfg, tuple(local)


class RootReporter(NodeReporter):
    """A :class:`NodeReporter` reporting the rows of the node's root fragments only (an upstream
    fragment's results are partial: they reach the coordinator through their root).

    Parameters
    ----------
    client, view, clock : as :class:`NodeReporter`.
    roots : the node's query ids (local) whose results are their query's results.
    """

    def __init__(
        self,
        client: CoordinatorClient,
        view: CoordinatorView,
        *,
        roots: Any,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(client, view, clock=clock)
        self.roots = np.asarray(sorted(roots), dtype=np.int64)

    def __call__(self, event: ResultsEvent) -> None:
        keep = np.isin(np.asarray(event.query_id, dtype=np.int64), self.roots)
        super().__call__(
            ResultsEvent(
                plan=event.plan,
                batch_id=event.batch_id,
                query_id=event.query_id[keep],
                window_start_s=event.window_start_s[keep],
                latency_s=event.latency_s[keep],
                sic=None if event.sic is None else event.sic[keep],
            )
        )


class LinkForwarder:
    """A result-store listener sending upstream fragments' results to their consumers.

    Every new batch of the node's results: the rows of each fragment with consumers (its
    sources' and its link input's queries together) summed per window, then written to each of
    its links with a :class:`~spillway.federation.link.LinkWriter` under the batch's id (a
    replayed batch is recognised and not written again), the SIC times the link's share.

    Parameters
    ----------
    conn : the cluster.
    outputs : the node's links (:attr:`~spillway.federation.placement.NodeLinks.outputs`).
    local : the node's queries (:func:`node_config`).

    Attributes
    ----------
    written : int
        Rows written so far over every link.
    """

    def __init__(
        self,
        conn: KafkaConnection,
        outputs: tuple[LinkOut, ...],
        local: tuple[LocalQuery, ...],
        *,
        timeout_s: float = 30.0,
    ) -> None:
        self._writers = [
            (o, LinkWriter(conn, o.topic, fragment=o.fragment, partition=o.partition,
                           timeout_s=timeout_s))
            for o in outputs
        ]  # fmt: skip
        self._ids = {
            o.fragment: np.array([i for i, q in enumerate(local) if q.fragment == o.fragment])
            for o in outputs
        }
        self.written = 0

    def __call__(self, event: ResultsEvent) -> None:
        if event.sic is None:
            return
        qid = np.asarray(event.query_id, dtype=np.int64)
        for out, writer in self._writers:
            mine = np.isin(qid, self._ids[out.fragment])
            if not mine.any():
                continue
            rows = (
                pd.DataFrame({"window_start": event.window_start_s[mine], "sic": event.sic[mine]})
                .groupby("window_start", as_index=False)["sic"]
                .sum()
            )
            rows.insert(0, "query_id", out.query_id)
            rows["sic"] = rows["sic"] * out.share
            if writer.write(int(event.batch_id), rows):
                self.written += len(rows)

    def close(self) -> None:
        """Flush every writer."""
        for _, w in self._writers:
            w.close()


class Heartbeat:
    """A thread reporting the node alive every ``interval_s`` (an empty report, THEMIS §6's
    dissemination riding on it: the update goes to ``view``), with the node's progress when
    given ``progress`` (e.g. :meth:`~spillway.spark.fed_results.NodeReporter.progress_report`:
    a batch Spark committed moves its queries' watermark at the next beat, not the next batch).

    A failed report is counted by the view (logged once) and retried at the next beat.
    """

    def __init__(
        self,
        client: CoordinatorClient,
        view: CoordinatorView,
        *,
        interval_s: float,
        clock: Callable[[], float] = time.time,
        progress: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        if not interval_s > 0:
            raise ConfigError(f"interval_s must be > 0 seconds, got {interval_s!r}")
        self.client, self.view, self.interval_s, self.clock = client, view, interval_s, clock
        self.progress = progress
        self.beats = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="spillway-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        """Start beating; returns self."""
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                extra = {} if self.progress is None else self.progress()
                self.view.receive(self.client.report(sent=float(self.clock()), **extra))
                self.beats += 1
            except ControlChannelError as exc:
                self.view.unreachable(str(exc))

    def stop(self) -> None:
        """Stop beating and close the client."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        self.client.close()


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _stw_sic(results: pd.DataFrame, stw_s: float) -> dict[str, float]:
    """Per query, the SIC its results carry over an STW: their SIC over the time they span
    (first window's start to last window's end) times the STW (THEMIS Eq. 4 as a rate, so a
    fragment's share of its query's SIC: at most its share of the query's sources)."""
    if results.empty:
        return {}
    start = pd.to_datetime(results["window_start"], utc=True).astype("int64") / 1e9
    frame = pd.DataFrame({"query": results["query"], "start": start, "sic": results["sic"]})
    out = {}
    for name, g in frame.groupby("query"):
        span = float(g["start"].max() - g["start"].min()) + 1.0  # 1 s windows
        out[str(name)] = round(float(g["sic"].sum()) / max(span, stw_s) * stw_s, 6)
    return out


def node_status(node: Any, local: tuple[LocalQuery, ...], /, **extra: Any) -> dict[str, Any]:
    """What ``spillway federation up`` shows of a running node (JSON-ready): per query its
    fragment, role, kept share and rows over the recent STW, rows decided and kept since the
    start, its local result SIC (Eq. 4 over the STW: results over what arrived, the kept
    share), the SIC its results carry over an STW (``stw_sic``: the fragment's part of its
    query's SIC), p95 latency against its target, how far Spark has processed it (``done_s``:
    Unix seconds, every window before it decided; a link's ``committed``: per partition the
    offset the last acknowledged batch ends at), plus the node's capacity estimate, processed
    rate and policy (the dashboard's node panel, :mod:`spillway.federation.dashboard`), plus
    ``extra``."""
    snap = node.snapshot()
    hist = node.history()
    stw_sic = _stw_sic(node.results(), node.config.stw_s)
    done, _ = node.controller.processed()
    committed = node.controller.log_positions()
    queries = []
    for lq, qs, d in zip(local, snap.queries, done, strict=True):
        queries.append({
            "name": lq.name, "fragment": lq.fragment, "query_id": lq.query_id, "kind": qs.kind,
            "role": lq.role, "root": lq.root, "kept_fraction": float(qs.kept_fraction),
            "arrival_rate": _finite(qs.arrival_rate),
            "latency_target_s": _finite(qs.latency_target_s),
            "arrived_recent": int(qs.rows_in), "kept_recent": int(qs.rows_kept),
            "sic": _finite(qs.sic), "stw_sic": stw_sic.get(lq.name),
            "latency_p95_s": _finite(qs.latency_p95_s),
            "arrived_total": int(sum(r.query_arrived.get(lq.name, 0) for r in hist)),
            "kept_total": int(sum(r.query_admitted.get(lq.name, 0) for r in hist)),
            "done_s": _finite(d), **({"committed": committed[lq.name]}
                                     if lq.name in committed else {}),
        })  # fmt: skip
    return {
        "t": time.time(),
        "capacity_tuples_per_s": _finite(snap.capacity_tuples_per_s),
        "processed_tuples_per_s": _finite(snap.processed_tuples_per_s),
        "policy": snap.policy,
        "intervals": len(hist),
        "queries": queries,
        **extra,
    }


__all__ = [
    "Heartbeat",
    "LinkForwarder",
    "LocalQuery",
    "RootReporter",
    "node_config",
    "node_status",
]
