"""A root fragment's results reported to the federation's query coordinator (THEMIS §6).

:class:`ResultReporter` is the ``foreachBatch`` sink of a fragment with no consumer: each batch
of result rows it receives (from :func:`spillway.spark.links.link_stream`, or its own plan) is
summed per window and reported with its SIC to the coordinator service
(:meth:`~spillway.federation.client.CoordinatorClient.report`, Eq. 4 over the STW on the
service's side), each window at its *source* time, its start (THEMIS §4: a result counts in the
STW of the source tuples it was computed from; counted when produced, a micro-batch spanning
several windows put more than one STW of SIC into one STW); the :class:`~spillway.federation.update.NodeUpdate` that comes back is kept
in :attr:`ResultReporter.update` for the node's controller to project its shedding over
(:class:`spillway.quality.LocalProjection`). A batch Spark replays (same ``batch_id``) is not
reported again: within the process's life, and across a restart when the reporter is given a
``state`` file (e.g. in the query's checkpoint folder), where the last reported batch id and the
SIC reported so far are replaced atomically (written aside, then renamed) after each report.

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> state = Path(tempfile.mkdtemp()) / "reported.json"
>>> _ = state.write_text('{"batch": 4, "reported_sic": 0.25}')
>>> ReportedBatches.load(state)
ReportedBatches(batch=4, reported_sic=0.25)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from spillway.errors import ConfigError, ControlChannelError, InputDataError
from spillway.events import ResultsEvent
from spillway.federation.client import CoordinatorClient
from spillway.federation.placement import LinkIn
from spillway.federation.update import NodeUpdate
from spillway.federation.view import CoordinatorView
from spillway.files import replace_text
from spillway.spark.coordinator import unix_seconds


@dataclass(frozen=True, kw_only=True)
class ReportedBatches:
    """What a reporter has reported: the last batch id and the SIC so far (a durable record).

    Parameters
    ----------
    batch : the last batch id reported (-1: none).
    reported_sic : the SIC reported so far.

    Raises
    ------
    ConfigError
        ``batch`` below -1 or ``reported_sic`` negative or not finite.
    """

    batch: int = -1
    reported_sic: float = 0.0

    def __post_init__(self) -> None:
        if self.batch < -1:
            raise ConfigError(f"batch must be a batch id >= -1 (-1: none), got {self.batch}")
        if not (np.isfinite(self.reported_sic) and self.reported_sic >= 0.0):
            raise ConfigError(f"reported_sic must be a finite SIC >= 0, got {self.reported_sic}")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ReportedBatches:
        """The record in ``path``; none reported when the file does not exist.

        Raises
        ------
        InputDataError
            The file is not a record :meth:`save` wrote (delete it only if the coordinator
            never received this root's results).
        """
        path = Path(path)
        if not path.exists():
            return cls()
        try:
            data = json.loads(path.read_text())
            return cls(batch=int(data["batch"]), reported_sic=float(data["reported_sic"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise InputDataError(
                f"the reported-batches file {str(path)!r} must hold the JSON object "
                f'{{"batch": int, "reported_sic": float}} a ResultReporter wrote, got an '
                f"unreadable record ({exc}); restore it, or delete it only if the coordinator "
                "never received this root's results"
            ) from exc

    def save(self, path: str | os.PathLike[str]) -> None:
        """Replace ``path`` with this record atomically (written aside, then renamed)."""
        replace_text(path, json.dumps({"batch": self.batch, "reported_sic": self.reported_sic}))

    def after(self, batch_id: int, sic: float, path: Path | None = None) -> ReportedBatches:
        """The record once batch ``batch_id`` has reported ``sic`` more, saved to ``path``
        (its folder made) when one is given.

        >>> ReportedBatches(batch=3, reported_sic=0.5).after(4, 0.25)
        ReportedBatches(batch=4, reported_sic=0.75)
        """
        done = ReportedBatches(batch=int(batch_id), reported_sic=self.reported_sic + float(sic))
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            done.save(path)
        return done


class ResultReporter:
    """Reports a root fragment's result SIC to the coordinator, each batch once.

    Parameters
    ----------
    client : the node's :class:`CoordinatorClient`.
    link : the root fragment's input (its ``query_id`` is the query's global index).
    clock : the node's clock (seconds), when a report is sent.
    state : a file keeping the last reported batch id and SIC across a restart
        (:class:`ReportedBatches`), e.g. in the query's checkpoint folder; None keeps them in
        memory only (a restarted node would report a replayed batch again). A crash between the
        coordinator's reply and the file's rename still reports that one batch twice.
    view : the node's :class:`~spillway.federation.view.CoordinatorView`: every update the
        coordinator returns is handed to it, for the node's controller to balance (THEMIS §6).
        With a view, a report that cannot reach the coordinator does not fail the batch: the
        view counts it (logged once), the batch's results wait for the next report (in memory:
        a restart in between loses them for the coordinator), and the node falls back to its
        local view once its last update is stale. Without one, the error is raised.

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
    InputDataError
        ``state`` exists but is not a record a reporter wrote.
    """

    def __init__(
        self,
        client: CoordinatorClient,
        link: LinkIn,
        *,
        clock: Callable[[], float],
        state: str | os.PathLike[str] | None = None,
        view: CoordinatorView | None = None,
    ) -> None:
        if not callable(clock):
            raise ConfigError(f"clock must be a callable returning seconds, got {clock!r}")
        if view is not None and not isinstance(view, CoordinatorView):
            raise ConfigError(f"view must be a CoordinatorView or None, got {type(view).__name__}")
        self.client, self.link, self.clock, self.view = client, link, clock, view
        self._waiting = (np.zeros(0), np.zeros(0))  # results not yet received (time, SIC)
        self.state = None if state is None else Path(state)
        self._done = ReportedBatches() if self.state is None else ReportedBatches.load(self.state)
        self.update: NodeUpdate | None = None

    @property
    def reported_sic(self) -> float:
        """The SIC reported so far."""
        return self._done.reported_sic

    def __call__(self, df: Any, batch_id: int) -> None:
        if batch_id <= self._done.batch:
            return  # a replay: reported already
        rows = df.groupBy("window_start").sum("sic").toPandas()
        new = rows.iloc[:, 1].to_numpy(dtype=np.float64) if len(rows) else np.zeros(0)
        start = unix_seconds(rows["window_start"]) if len(rows) else np.zeros(0)
        now = float(self.clock())
        times = np.concatenate([self._waiting[0], start])
        sic = np.concatenate([self._waiting[1], new])
        try:
            self.update = self.client.report(
                sent=now,
                result_time=times,
                query=np.full(sic.size, self.link.query_id, dtype=np.int64),
                sic=sic,
            )
        except ControlChannelError as exc:
            if self.view is None:
                raise
            self.view.unreachable(str(exc))
            self._waiting = (times, sic)
            self._done = self._done.after(batch_id, 0.0)  # sent with the next (in memory)
            return
        self._waiting = (np.zeros(0), np.zeros(0))
        if self.view is not None:
            self.view.receive(self.update)
        self._done = self._done.after(batch_id, float(sic.sum()), self.state)


class NodeReporter:
    """A spillway node's results reported to the coordinator, batch by batch (THEMIS §6).

    The node hosting its queries' roots (:class:`spillway.spark.node.Node` with
    ``federation=``) hands every new batch of its result store to this reporter (a
    :class:`~spillway.spark.sink.ResultStore` listener: a batch Spark replays replaces its rows
    and is not handed again). Each batch is summed per query and window and reported with the
    queries' global indices (:meth:`CoordinatorClient.report`, Eq. 4 on the service's side),
    each window at its source time (its start: see the module docstring); a batch without
    results is a heartbeat. The update that comes back goes to :attr:`view`,
    whose projection the node's controller balances. A report that does not reach the
    coordinator is counted by the view (logged once) and its results are sent with the next.

    Parameters
    ----------
    client : the node's :class:`CoordinatorClient`.
    view : the node's :class:`~spillway.federation.view.CoordinatorView`; its ``query_ids``
        map the node's query ids to the federation's.
    clock : the node's clock (seconds), when a report is sent; None until the node
        sets it (:class:`~spillway.spark.node.Node` gives its controller's ``now``).
    progress : a callable giving, per local query, ``(done, decided)`` in Unix seconds
        (:meth:`spillway.spark.controller.NodeController.processed`); None until the node
        sets it (:class:`~spillway.spark.node.Node` gives its controller's). With the
        view's ``fragment_ids``, every report carries the node's progress per fragment
        (:meth:`progress_report`), so the coordinator ends each query's STW where its
        results are complete.

    Raises
    ------
    ConfigError
        ``view`` is not a CoordinatorView, or ``clock`` is given and not callable.

    Examples
    --------
    >>> from spillway.quality.sic import StwConfig
    >>> view = CoordinatorView([3, 0], StwConfig(stw_s=4.0, slide_s=1.0), stale_s=2.0)
    >>> rep = NodeReporter(None, view)  # a node's client in practice
    >>> rep.view.query_ids.tolist(), rep.reports
    ([3, 0], 0)
    """

    def __init__(
        self,
        client: CoordinatorClient,
        view: CoordinatorView,
        *,
        clock: Callable[[], float] | None = None,
    ) -> None:
        if not isinstance(view, CoordinatorView):
            raise ConfigError(f"view must be a CoordinatorView, got {type(view).__name__}")
        if clock is not None and not callable(clock):
            raise ConfigError(f"clock must be a callable returning seconds, got {clock!r}")
        self.client, self.view, self.clock = client, view, clock
        self.progress: Callable[[], tuple[np.ndarray, np.ndarray]] | None = None
        #: Reports that reached the coordinator, and the SIC reported so far.
        self.reports = 0
        #: The record of the last reported batch (:meth:`keep_record`), None: in memory only.
        self.state: Path | None = None
        self._done = ReportedBatches()
        self._waiting = (np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0))

    def keep_record(self, path: str | os.PathLike[str]) -> None:
        """Keep the last batch the coordinator received and the SIC reported so far in
        ``path`` (:class:`ReportedBatches`, replaced after each report) and resume from what it
        holds: a batch Spark runs again after a restart, reported before the crash, is not
        reported a second time. :class:`~spillway.spark.node.Node` gives the file beside its
        checkpoint's results (the node's one plan: its batch ids grow). A crash between the
        coordinator's reply and the file's replacement still reports that one batch twice.

        Raises
        ------
        InputDataError
            ``path`` exists but is not a record a reporter wrote.

        >>> import tempfile
        >>> from spillway.quality.sic import StwConfig
        >>> path = Path(tempfile.mkdtemp()) / "reported.json"
        >>> ReportedBatches(batch=6, reported_sic=1.5).save(path)
        >>> rep = NodeReporter(None, CoordinatorView([0], StwConfig(stw_s=4.0, slide_s=1.0),
        ...                                          stale_s=2.0))
        >>> rep.keep_record(path)
        >>> rep.reported_sic
        1.5
        """
        self.state = Path(path)
        self._done = ReportedBatches.load(self.state)

    @property
    def reported_sic(self) -> float:
        """The SIC reported so far (from the record's, with :meth:`keep_record`)."""
        return self._done.reported_sic

    @property
    def waiting_sic(self) -> float:
        """SIC of results not yet received by the coordinator (its reports failed)."""
        return float(self._waiting[2].sum())

    def progress_report(self) -> dict[str, list[Any]]:
        """The node's progress per fragment, for :meth:`CoordinatorClient.report`:
        ``fragment`` (global indices), ``done`` and ``decided`` (the least over the
        fragment's local queries; NaN where one has processed nothing), ``done`` held below
        the oldest result still waiting to reach the coordinator. Empty without a
        ``progress`` callable or the view's ``fragment_ids``.

        >>> from spillway.quality.sic import StwConfig
        >>> view = CoordinatorView([0, 0, 1], StwConfig(stw_s=4.0, slide_s=1.0), stale_s=2.0,
        ...                        fragment_ids=[3, 3, 5])
        >>> rep = NodeReporter(None, view)
        >>> rep.progress = lambda: (np.array([12.0, 10.0, 11.0]), np.array([13.0, 13.0, 12.0]))
        >>> rep.progress_report()
        {'fragment': [3, 5], 'done': [10.0, 11.0], 'decided': [13.0, 12.0]}
        """
        frags = self.view.fragment_ids
        if self.progress is None or frags is None:
            return {"fragment": [], "done": [], "decided": []}
        done, decided = (np.asarray(a, dtype=np.float64) for a in self.progress())
        w_time, w_query, _ = self._waiting  # results a failed report left behind
        if w_time.size:
            held = np.full(self.view.query_ids.size, np.inf)
            for i, g in enumerate(self.view.query_ids.tolist()):
                mine = w_query == g
                if mine.any():
                    held[i] = float(w_time[mine].min())
            done = np.minimum(done, held)
        uniq, inv = np.unique(frags, return_inverse=True)
        out_done = np.full(uniq.size, np.inf)
        out_decided = np.full(uniq.size, np.inf)
        with np.errstate(invalid="ignore"):  # NaN (nothing processed) propagates
            np.minimum.at(out_done, inv, done)
            np.minimum.at(out_decided, inv, decided)
        return {
            "fragment": uniq.tolist(),
            "done": out_done.tolist(),
            "decided": out_decided.tolist(),
        }

    def __call__(self, event: ResultsEvent) -> None:
        if self.clock is None:
            raise ConfigError("the reporter has no clock yet: give one, or run it in a Node")
        if self.state is not None and event.batch_id <= self._done.batch:
            return  # a replay after a restart: the coordinator received it before the crash
        now = float(self.clock())
        q_local = np.asarray(event.query_id, dtype=np.int64)
        if q_local.size and event.sic is None:
            raise InputDataError(
                f"batch {event.batch_id} of plan {event.plan!r} has results without a sic "
                "column: the coordinator sums the SIC of result rows"
            )
        if q_local.size and not np.isfinite(event.window_start_s).all():
            raise InputDataError(
                f"batch {event.batch_id} of plan {event.plan!r} has results without a window "
                "start: the coordinator counts each result at its source time"
            )
        if q_local.size and (q_local.min() < 0 or q_local.max() >= self.view.query_ids.size):
            raise InputDataError(
                f"batch {event.batch_id} has query ids {sorted(set(q_local.tolist()))}, the view "
                f"maps {self.view.query_ids.size} queries: build it with the node's queries"
            )
        sic = np.zeros(0) if event.sic is None else np.asarray(event.sic, dtype=np.float64)
        # one entry per (query, window): a TOP-5 window's rows summed
        keys = (
            np.stack([q_local.astype(np.float64), event.window_start_s]) if q_local.size else None
        )
        q_new: np.ndarray = np.zeros(0, dtype=np.int64)
        s_new: np.ndarray = np.zeros(0)
        t_new: np.ndarray = np.zeros(0)
        if keys is not None:
            uniq, inv = np.unique(keys, axis=1, return_inverse=True)
            q_new = self.view.query_ids[uniq[0].astype(np.int64)]
            s_new = np.bincount(inv.ravel(), weights=sic, minlength=uniq.shape[1])
            t_new = uniq[1]
        times = np.concatenate([self._waiting[0], t_new])
        query = np.concatenate([self._waiting[1], q_new])
        total = np.concatenate([self._waiting[2], s_new])
        progress = self.progress_report()  # batches before this one: all reported by now
        try:
            update = self.client.report(
                sent=now, result_time=times, query=query, sic=total, **progress
            )
        except ControlChannelError as exc:
            self.view.unreachable(str(exc))
            self._waiting = (times, query, total)
            return
        self._waiting = (np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0))
        self.reports += 1
        self._done = self._done.after(event.batch_id, float(total.sum()), self.state)
        self.view.receive(update)


__all__ = ["NodeReporter", "ReportedBatches", "ResultReporter"]
