"""Prometheus metrics of running nodes: ``spillway run --metrics-port PORT`` serves ``/metrics``.

:class:`HubCollector` turns a :class:`~spillway.telemetry.hub.Hub`'s boards into metric
families at every scrape (nothing is updated in between: a scrape reads one consistent
:class:`~spillway.telemetry.board.BoardState` per node). Every series carries a ``node`` label
(the board's name; ``spillway run`` names its node ``node``), so one endpoint can serve several
nodes. Names follow Prometheus's conventions (base units, ``_total`` counters, ``_ratio`` for
fractions in [0, 1]):

===================================================  ==============  =========================
metric                                               type            labels
===================================================  ==============  =========================
``spillway_query_sic``                               gauge           node, query
``spillway_query_kept_ratio``                        gauge           node, query
``spillway_query_arrival_rate_tuples_per_second``    gauge           node, query
``spillway_query_latency_p95_seconds``               gauge           node, query
``spillway_query_latency_target_seconds``            gauge           node, query
``spillway_result_latency_seconds``                  histogram       node, query
``spillway_tuples_arrived_total``                    counter         node, query, source
``spillway_tuples_kept_total``                       counter         node, query, source
``spillway_tuples_shed_total``                       counter         node, query, source
``spillway_capacity_tuples_per_second``              gauge           node
``spillway_capacity_measured_tuples_per_second``     gauge           node
``spillway_processed_tuples_per_second``             gauge           node
``spillway_utilisation_ratio``                       gauge           node
``spillway_jain_index``                              gauge           node
``spillway_batch_duration_seconds``                  histogram       node
``spillway_intervals_total``                         counter         node
``spillway_calibration_capacity_tuples_per_second``  gauge           node
``spillway_snapshot_time_seconds``                   gauge           node
``spillway_node_phase``                              gauge (0 or 1)  node, phase
``spillway_node_info``                               gauge (1)       node, policy, master
``spillway_class_kept_ratio``                        gauge           node, class
``spillway_class_latency_p95_seconds``               gauge           node, class
``spillway_class_latency_target_seconds``            gauge           node, class
``spillway_class_headroom``                          gauge           node, class
``spillway_class_share_ratio``                       gauge           node, class
``spillway_class_weight``                            gauge           node, class
``spillway_class_tuples_arrived_total``              counter         node, class
``spillway_class_tuples_shed_total``                 counter         node, class
``spillway_query_class_info``                        gauge (1)       node, query, class
===================================================  ==============  =========================

``spillway_query_sic`` is the query's result SIC over its latest complete STW (THEMIS Eq. 4);
kept, arrival rate and latency p95 are over the STW too (:class:`~spillway.status.QueryStatus`).
The counters count the run's tuples per source since the run began (the capacity
measurement's are not counted); ``spillway_capacity_tuples_per_second`` is the controller's
estimate, ``spillway_capacity_measured_tuples_per_second`` rows processed per second of
micro-batch time over the last STW. Every query's and the node's series exist from the start,
so a scrape during the capacity measurement finds them: a figure not known yet (before the
first snapshot, no result yet, no calibration) is NaN. docs/grafana/spillway.json is a Grafana dashboard over them.

The ``spillway_class_*`` series exist on a node with priority classes (``dilos`` policy), once
its run has begun (:class:`~spillway.status.ClassStatus`; ``class`` is the class number, 1 the
highest): the kept share of the decisions of the last STW, the row-weighted p95 response time
(arrival to result) of the batches that finished in it against the class's delay target D, the
class load manager's headroom H (CPU-seconds per second) and the class's share of the node's
capacity after the latest decision, its weight, and its tuples arrived and shed since the run
began (their ratio is the run report's class loss). ``spillway_query_class_info`` maps every
query to its class.

Examples
--------
>>> import numpy as np
>>> from spillway.events import DecisionEvent
>>> from spillway.status import NodeSnapshot, QueryStatus
>>> from spillway.telemetry import Hub, NodeBoard
>>> board = NodeBoard("node", queries=("q",), stw_s=10.0)
>>> board.observe("run", DecisionEvent(t=1.0, queries=("q",), lane_query=np.array([0]),
...     lane_source=np.array([0]), arrived=np.array([10]), kept=np.array([4])))
>>> board.tick(NodeSnapshot(t=1.0, capacity_tuples_per_s=5.0, processed_tuples_per_s=4.0,
...     jain=1.0, queries=(QueryStatus(name="q", kind="avg", arrival_rate=10.0,
...     kept_fraction=0.4, sic=0.4, latency_p95_s=1.0, latency_target_s=4.0, rows_in=10,
...     rows_kept=4),)))
>>> text = exposition(Hub([board]))
>>> print("\\n".join(ln for ln in text.splitlines() if ln.startswith(("spillway_query_sic",
...     "spillway_tuples_shed_total", "spillway_capacity_tuples"))))
spillway_query_sic{node="node",query="q"} 0.4
spillway_tuples_shed_total{node="node",query="q",source="0"} 6.0
spillway_capacity_tuples_per_second{node="node"} 5.0
"""

from __future__ import annotations

import math
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from spillway.errors import ConfigError
from spillway.telemetry.board import PHASES, BoardState, Histogram
from spillway.telemetry.hub import Hub


def _buckets(h: Histogram) -> list[tuple[str, float]]:
    bounds = [repr(float(b)) for b in h.bounds] + ["+Inf"]
    return [(b, float(c)) for b, c in zip(bounds, h.counts, strict=True)]


class HubCollector(Collector):
    """A Prometheus collector reading every board of ``hub`` at each scrape."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    def collect(self) -> Iterator[Metric]:
        states = self.hub.states()
        yield from _query_gauges(states)
        yield from _counters(states)
        yield from _node_gauges(states)
        yield from _class_metrics(states)
        yield from _histograms(states)


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


def _add(metric: Any, labels: list[str], value: float | None) -> None:
    metric.add_metric(labels, math.nan if value is None else float(value))


def _query_gauges(states: list[BoardState]) -> Iterator[Metric]:
    lab = ["node", "query"]
    families = {
        "sic": _gauge("spillway_query_sic", "Result SIC over the latest complete STW", lab),
        "kept": _gauge("spillway_query_kept_ratio", "Tuples kept over decided, last STW", lab),
        "rate": _gauge(
            "spillway_query_arrival_rate_tuples_per_second", "Arrival rate, last STW", lab
        ),
        "p95": _gauge("spillway_query_latency_p95_seconds", "p95 result latency, last STW", lab),
        "target": _gauge("spillway_query_latency_target_seconds", "Result latency target", lab),
    }
    for st in states:
        by_name = {q.name: q for q in st.snapshot.queries} if st.snapshot is not None else {}
        for name in st.queries:
            labels = [st.name, name]
            q = by_name.get(name)
            _add(families["sic"], labels, q.sic if q else None)
            _add(families["kept"], labels, q.kept_fraction if q else None)
            _add(families["rate"], labels, q.arrival_rate if q else None)
            _add(families["p95"], labels, q.latency_p95_s if q else None)
            _add(families["target"], labels, q.latency_target_s if q else None)
    yield from families.values()


def _counters(states: list[BoardState]) -> Iterator[Metric]:
    labels = ["node", "query", "source"]
    arrived = CounterMetricFamily(
        "spillway_tuples_arrived",
        "Tuples that arrived, per source, since the run began",
        labels=labels,
    )
    kept = CounterMetricFamily(
        "spillway_tuples_kept", "Tuples admitted, per source, since the run began", labels=labels
    )
    shed = CounterMetricFamily(
        "spillway_tuples_shed", "Tuples shed, per source, since the run began", labels=labels
    )
    intervals = CounterMetricFamily(
        "spillway_intervals", "Shedding decisions (intervals) since the run began", labels=["node"]
    )
    for st in states:
        for c in st.counts:
            lab = [st.name, c.query, str(c.source)]
            arrived.add_metric(lab, c.arrived)
            kept.add_metric(lab, c.kept)
            shed.add_metric(lab, c.shed)
        intervals.add_metric([st.name], st.intervals)
    yield from (arrived, kept, shed, intervals)


def _node_gauges(states: list[BoardState]) -> Iterator[Metric]:
    node = ["node"]
    cap = _gauge("spillway_capacity_tuples_per_second", "Estimated capacity (cost model)", node)
    measured = _gauge(
        "spillway_capacity_measured_tuples_per_second",
        "Rows processed per second of micro-batch time, last STW",
        node,
    )
    processed = _gauge("spillway_processed_tuples_per_second", "Rows processed per second", node)
    util = _gauge("spillway_utilisation_ratio", "Processed over estimated capacity", node)
    jain = _gauge("spillway_jain_index", "Jain's fairness index over query SIC", node)
    cal = _gauge(
        "spillway_calibration_capacity_tuples_per_second",
        "Capacity measured by the last finished calibration round",
        node,
    )
    t = _gauge("spillway_snapshot_time_seconds", "Feed time of the latest snapshot", node)
    phase = _gauge("spillway_node_phase", "1 for the node's current phase", ["node", "phase"])
    info = _gauge(
        "spillway_node_info", "The node's policy and master", ["node", "policy", "master"]
    )
    for st in states:
        lab = [st.name]
        s = st.snapshot
        _add(cap, lab, s.capacity_tuples_per_s if s else None)
        _add(processed, lab, s.processed_tuples_per_s if s else None)
        _add(util, lab, s.utilisation if s else None)
        _add(jain, lab, s.jain if s else None)
        _add(t, lab, s.t if s else None)
        _add(measured, lab, st.capacity_measured_tuples_per_s)
        _add(cal, lab, st.calibration.capacity_tuples_per_s if st.calibration else None)
        for p in PHASES:
            phase.add_metric([st.name, p], 1.0 if st.phase == p else 0.0)
        policy = str(st.info.get("policy", s.policy if s is not None else ""))
        info.add_metric([st.name, policy, str(st.info.get("master", ""))], 1.0)
    yield from (cap, measured, processed, util, jain, cal, t, phase, info)


def _class_metrics(states: list[BoardState]) -> Iterator[Metric]:
    lab = ["node", "class"]
    gauges = {
        "kept_fraction": _gauge(
            "spillway_class_kept_ratio", "Tuples kept over decided, last STW", lab
        ),
        "latency_p95_s": _gauge(
            "spillway_class_latency_p95_seconds",
            "p95 response time (arrival to result), last STW",
            lab,
        ),
        "latency_target_s": _gauge(
            "spillway_class_latency_target_seconds", "The class's delay target D", lab
        ),
        "headroom": _gauge(
            "spillway_class_headroom", "The class load manager's headroom H (CPU-s per s)", lab
        ),
        "share": _gauge(
            "spillway_class_share_ratio", "The class's share of the node's capacity", lab
        ),
        "weight": _gauge("spillway_class_weight", "The class's priority weight", lab),
    }
    arrived = CounterMetricFamily(
        "spillway_class_tuples_arrived",
        "Tuples of the class decided since the run began",
        labels=lab,
    )
    shed = CounterMetricFamily(
        "spillway_class_tuples_shed", "Tuples of the class shed since the run began", labels=lab
    )
    info = _gauge(
        "spillway_query_class_info", "The priority class of each query", ["node", "query", "class"]
    )
    for st in states:
        for c in st.snapshot.classes if st.snapshot is not None else ():
            labels = [st.name, str(c.klass)]
            for attr, family in gauges.items():
                _add(family, labels, getattr(c, attr))
            arrived.add_metric(labels, c.arrived_total)
            shed.add_metric(labels, c.dropped_total)
            for q in c.queries:
                info.add_metric([st.name, q, str(c.klass)], 1.0)
    yield from (*gauges.values(), arrived, shed, info)


def _histograms(states: list[BoardState]) -> Iterator[Metric]:
    latency = HistogramMetricFamily(
        "spillway_result_latency_seconds",
        "Result latency: from a window's last tuple arriving to its result, one per window",
        labels=["node", "query"],
    )
    batch = HistogramMetricFamily(
        "spillway_batch_duration_seconds", "Micro-batch duration (batchDuration)", labels=["node"]
    )
    for st in states:
        for q, h in st.latency.items():
            latency.add_metric([st.name, q], _buckets(h), h.total)
        h = st.batch_duration
        batch.add_metric([st.name], _buckets(h), h.total)
    yield from (latency, batch)


class TimedRegistry(CollectorRegistry):
    """A registry that adds up the CPU its scrapes take (:attr:`cpu_s`, seconds).

    A scrape's work is the collection and the text formatting, interleaved as
    ``generate_latest`` iterates :meth:`collect`; the CPU of the scraping thread from the first
    metric to the last is counted (the HTTP request's parsing and sending are not: they are
    small beside it). It is what the endpoint costs the driver, measured, not estimated.

    >>> from spillway.telemetry.board import NodeBoard
    >>> reg = registry(Hub([NodeBoard("n", queries=("q",), stw_s=10.0)]))
    >>> _ = generate_latest(reg)
    >>> reg.cpu_s > 0.0
    True
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cpu_lock = threading.Lock()
        self._cpu_s = 0.0

    @property
    def cpu_s(self) -> float:
        """CPU seconds taken by every scrape so far."""
        with self._cpu_lock:
            return self._cpu_s

    def collect(self) -> Iterator[Metric]:
        began = time.thread_time()
        try:
            yield from super().collect()
        finally:
            with self._cpu_lock:
                self._cpu_s += time.thread_time() - began


def registry(hub: Hub) -> TimedRegistry:
    """A registry holding only ``hub``'s metrics (not the process's default collectors)."""
    reg = TimedRegistry(auto_describe=False)
    reg.register(HubCollector(hub))
    return reg


def exposition(hub: Hub) -> str:
    """The Prometheus text exposition of ``hub`` (what ``/metrics`` serves)."""
    return generate_latest(registry(hub)).decode()


class MetricsServer:
    """``/metrics`` over HTTP in a background thread (prometheus-client's own server).

    Parameters
    ----------
    hub : the boards to export.
    host : the address to listen on (``127.0.0.1``: this machine only).
    port : the port; 0 picks a free one (:attr:`port` says which).
    """

    def __init__(self, hub: Hub, *, host: str = "127.0.0.1", port: int = 0) -> None:
        if not (isinstance(port, int) and 0 <= port <= 65535):
            raise ConfigError(f"--metrics-port must be a port number in [0, 65535], got {port!r}")
        self._registry = registry(hub)
        try:
            self._httpd, self._thread = start_http_server(port, addr=host, registry=self._registry)
        except (OSError, socket.gaierror) as e:
            raise ConfigError(
                f"--metrics-port {port}: cannot listen on {host}:{port} ({e.strerror or e}); "
                "pass a free port, or 0 to pick one"
            ) from None
        self.host = host
        self.port = int(self._httpd.server_port)

    @property
    def url(self) -> str:
        """Where the metrics are served."""
        return f"http://{self.host}:{self.port}/metrics"

    @property
    def cpu_s(self) -> float:
        """CPU seconds the scrapes took so far (:class:`TimedRegistry`)."""
        return self._registry.cpu_s

    def close(self) -> None:
        """Stop serving."""
        self._httpd.shutdown()
        self._httpd.server_close()
        if isinstance(self._thread, threading.Thread):
            self._thread.join(timeout=5)
