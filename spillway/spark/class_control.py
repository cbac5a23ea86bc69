"""Priority classes on a Spark node: a load manager per class, optionally with DILoS.

With the ``dilos`` policy (``NodeConfig.class_control``) every query of the node belongs to a
priority class (1 = highest; weights 6/3/1 and delay targets ``D`` = 3, 4, 5 trigger intervals by
default, Pham's QN-A with 300/400/500 ms against a 150 ms cycle). Once per interval the
controller hands :func:`spillway.control.classes.step` one
:class:`~spillway.control.load_manager.IntervalStats` per class, measured as
:mod:`spillway.spark.load_control` measures them for the whole node, restricted to the class's
lanes (Pham §6.1, Fig. 3):

- ``arrived`` and ``load``: the class's arrivals (feeds' arrival clocks) and the executor time
  they need at the plan's fitted cost with nothing shed (kept and arrived cost, the terms the
  node's capacity is calibrated at); a plan's fixed overhead is split over the classes in
  proportion to their arrivals;
- ``processed`` and ``response_time_s``: the class's admitted rows of the micro-batches that
  finished, and their mean response time (arrival → result, Pham Def. 3): the feed time the
  batch finished minus the mean arrival time of the class's rows it held;
- ``queued_load``: the class's admitted tuples not yet processed plus its arrivals after the
  shedding in effect (as :mod:`spillway.spark.load_control` measures it).

Each class's drop fraction becomes the budget of that class's lanes: the policy is asked once
per class, over that class's backlog only, to keep ``(1 − drop_k)`` of it (the ``dilos`` policy
keeps a uniformly random subset, Pham §6.1.1). The class shares split the node's capacity
through the managers: class ``k``'s manager starts from ``share_k · H``.

- Separate per-class managers (``dilos`` False, Pham Table 8's third configuration): each class
  keeps its fixed share (weights 6/3/1) and its own manager; nothing is lent between the
  classes and no class sheds for another, so each class's drop is its own manager's.
- DILoS (``dilos`` True): the class scheduler lends what a class does not use to the others,
  every CRC (5 % reserve of the original share, quota conservation, Eq. 6.1 pushed onto the
  managers, :mod:`spillway.control.dilos`); with ``work_conserving`` (default) its scheduler
  also hands, within the interval, what a class that sheds nothing leaves idle (its manager's
  capacity minus its load) to the classes that shed, by their weights, as Pham's CQC does
  (§6.2.2, :mod:`spillway.control.cqc`).

The classes share micro-batches (below), so they share one response time: the class with the
strictest target ``D`` (class 1) would see it over its target first and its manager would shed
for the load of every class, while class 3, with the loosest target, shed nothing (class 1 lost
more than class 3 in real runs). Under DILoS the classes' drops are therefore put in priority
order (:func:`spillway.control.cqc.in_priority_order`): a class's drop above a lower class's is
shed by the lower classes instead, lowest first, so the lower classes absorb the node's loss
before a higher class loses anything more than they do (Pham §6.3's relative priority; in
Pham's CQC class 1 never waits for class 3's tuples at all). The separate managers do not hand
shedding down: that would be a class-level policy, which they do not have.

Three layouts (``ClassControlConfig.layout``) give Pham's Table 8 baselines on the same node,
measured the same way per class (only who decides the drops differs):

- ``per-class`` (default): one manager per class, as above (with ``dilos`` False: Pham's
  "separate load manager"; with it True: DILoS);
- ``common``: one manager for the whole node (capacity ``H``, the strictest class's target
  ``D``), fed the classes' summed statistics; its drop fraction is every class's (Pham's
  "common load manager", the state of the art that ignores the scheduler's priorities);
- ``none``: no load manager, nothing shed (Pham's "no load manager").

A class scheduler on lanes (``scheduler = "cqc"``)
-------------------------------------------------
By default every class's decided windows run in the next batch, so the node's batch holds the
work of every class: a class whose manager admits more than its share lengthens every class's
batch, and the classes' managers all see the same response time. With ``scheduler = "cqc"``
the controller runs Pham's CQC over the classes' windows (``NodeController._hold_back``,
:func:`spillway.control.cqc.dispatch`): each interval a class gets its weight's quota of the
batch (the interval less the plans' fixed costs, at the fitted costs), runs its due windows
oldest first while they fit, what a class leaves idle goes to the classes still waiting by
their weights, and the windows that do not fit wait for a later batch (a deficit round robin:
a window larger than a quota runs once the class's credit covers it). A waiting window's rows
are decided when it runs, at the class's drop then; each manager decides from the load that
arrived in the interval, its queued load counts the class's windows waiting, and its response
time is its own rows' (arrival → result), so a class that admits more than its quota waits
longer itself, and its manager, not class 1's, sees it. The cut each query's windows reached
is in every offset (``PlanOffset.cut``), so a restarted node resumes each class where it was.
Only generated feeds' windows are held back (a log's or a replayed file's are refused with
the scheduler for now).

Lanes or pools (``NodeConfig.class_plans``)
-------------------------------------------
By default (``lanes``) every class's lanes run in the node's one Spark plan (one micro-batch
per interval). A Spark plan is a single job, so the capacity split cannot come from a
scheduler inside the batch; it comes from each class's admitted work, which its manager keeps
within its capacity share. The classes then share micro-batches: their results come at the
same time and a class's latency differs from another's only by when its rows arrived, so "a
higher class has lower latency" is not applicable (:meth:`ClassControl.summary` says so).

With ``pools`` each class runs its own plan (streaming query) in a Spark FAIR scheduler pool
weighted by its class (:mod:`spillway.spark.pools`): separate micro-batches, each paying its
own fixed cost, which the controller charges wholly to its class (the per-class load above);
:meth:`ClassControl.summary` then compares the classes' p95 latencies (:func:`latency_order`).
Measured on ``local[2]`` (``dilos`` experiment, quick, SD_c at 2x the calibrated capacity,
Aurora, H = 0.8, seeds 0 and 1; docs/design.md "Lanes or pools"): the fitted fixed cost was
0.23-0.35 s per interval for the one plan and 0.43-0.56 s for EACH class plan, so class 1's and
2's loads (0.63-0.70 and 0.58-0.62 executor-s/s) exceeded their shares (0.48, 0.24) although
their arrivals were 0.54 of them: they lost 24-31 % and 58-61 % where lanes lost nothing, DILoS
had nothing to lend (class 3: 93-94 % lost, lanes 48-49 %), and the pool weights did not order
the latencies (p95 1.26-1.48 s, class 1 never lowest): a batch's time is mostly its fixed
cost, much of it driver-side (planning, the control channel, the Python sink), which the FAIR
scheduler does not schedule. Every class's p95 stayed within its D (3, 4, 5 s) either way. Lanes stay the default.

Examples
--------
>>> cfg = ClassControlConfig(manager="aurora", query_class=(1, 2, 3),
...                          settings={"capacity": 1.0}, dilos=False)
>>> cc = ClassControl(cfg, trigger_s=0.5, n_queries=3)
>>> [round(c, 2) for c in cc.capacities]         # H split 6/3/1
[0.6, 0.3, 0.1]
>>> d = cc.decide(t=1.0, interval_s=0.5, loads=[0.2, 0.3, 0.6], arrived=[10, 10, 10],
...               queued_loads=[0.1, 0.1, 0.1])
>>> [round(x, 3) for x in d.drops]               # class 3's Aurora: shed L − H of L
[0.0, 0.0, 0.833]
>>> cc.observe(2, rows=10, response_s=1.2)
>>> cc.note(arrived=[10, 10, 10], dropped=[0, 0, 7])
>>> cc.summary()["classes"]["3"]["loss"]
0.7
>>> lends = ClassControl(ClassControlConfig(manager="aurora", query_class=(1, 2, 3),
...                      settings={"capacity": 1.0}, dilos=True), trigger_s=0.5, n_queries=3)
>>> d = lends.decide(t=1.0, interval_s=0.5, loads=[0.2, 0.3, 0.6], arrived=[10, 10, 10],
...                  queued_loads=[0.1, 0.1, 0.1])
>>> [round(x, 3) for x in d.drops]               # DILoS's CQC: class 1's idle 0.4 to class 3
[0.0, 0.0, 0.167]
>>> common = ClassControl(ClassControlConfig(manager="aurora", query_class=(1, 2, 3),
...                       settings={"capacity": 1.0}, dilos=False, layout="common"),
...                       trigger_s=0.5, n_queries=3)
>>> d = common.decide(t=1.0, interval_s=0.5, loads=[0.3, 0.3, 0.6], arrived=[10, 10, 10],
...                   queued_loads=[0.1, 0.1, 0.1])
>>> [round(x, 3) for x in d.drops]               # one manager: L − H of L for every class
[0.167, 0.167, 0.167]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import takewhile
from typing import Any

import numpy as np

from spillway.control import classes
from spillway.control.dilos import DilosConfig, original_shares
from spillway.control.load_manager import (
    LoadManagerConfig,
    check_count,
    check_number,
    combine_stats,
)
from spillway.errors import ConfigError
from spillway.spark.load_control import LoadControlConfig
from spillway.status import ClassStatus

#: The capacity (headroom ``H``, in load units) split over the classes when the settings do not
#: give one: the load managers' default (Pham's ``H0 = 0.8``).
DEFAULT_CAPACITY = LoadManagerConfig.__dataclass_fields__["capacity"].default

#: Who decides the classes' drops (module docstring): one manager per class, one for the node,
#: or none.
LAYOUTS = ("per-class", "common", "none")

#: How the classes' admitted windows reach the batches (module docstring): all in the next
#: batch, or CQC's round robin holding back what a class cannot run within its quota.
SCHEDULERS = ("none", "cqc")

#: Why the latency comparison between classes is not made (module docstring).
SHARED_BATCHES = (
    "not applicable: every class runs in the node's one plan, so the classes share "
    "micro-batches and their results come together"
)


def latency_order(p95s: Sequence[float]) -> str:
    """Whether every class's p95 latency (class 1 first) is below the next lower class's: the
    verdict of "a higher class has lower latency" where the classes run in separate
    micro-batches (one plan per class, FAIR pools).

    >>> latency_order([1.5, 2.0, 4.25])
    'yes: p95 1.5 < 2 < 4.25 s'
    >>> latency_order([2.5, 2.0, math.nan])
    'no: p95 2.5, 2, nan s (class 1 not below class 2)'
    """
    text = ", ".join(f"{x:.3g}" for x in p95s)
    for c in range(len(p95s) - 1):
        if not p95s[c] < p95s[c + 1]:
            return f"no: p95 {text} s (class {c + 1} not below class {c + 2})"
    return "yes: p95 " + " < ".join(f"{x:.3g}" for x in p95s) + " s"


def weighted_quantile(values: Sequence[float], weights: Sequence[float], q: float) -> float:
    """The smallest value whose cumulative weight reaches ``q`` of the total (NaN when empty).

    >>> weighted_quantile([1.0, 3.0, 2.0], [1, 1, 8], 0.95)
    3.0
    >>> weighted_quantile([], [], 0.95)
    nan
    """
    if not values:
        return math.nan
    v = np.asarray(values, dtype=float)
    w = np.asarray(weights, dtype=float)
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(w[order])
    i = int(np.searchsorted(cum, q * cum[-1], side="left"))
    return float(v[order][min(i, len(v) - 1)])


def _p95(responses: Sequence[tuple[float, float, int]]) -> float:
    """The row-weighted p95 of measured batches' ``(feed time, response time, rows)``."""
    return weighted_quantile([r for _, r, _ in responses], [n for _, _, n in responses], 0.95)


@dataclass(frozen=True, kw_only=True)
class ClassControlConfig:
    """The node's priority classes and the load manager each one gets.

    Parameters
    ----------
    manager : the load manager of every class (aurora, ctrl, seamless, aloma).
    query_class : each query's class (by query id), 1 = highest, up to ``len(weights)``.
    weights : each class's priority (ints >= 1), class 1 first (Pham QN-A: 6, 3, 1).
    target_intervals : each class's delay target ``D``, in trigger intervals (> 0).
    dilos : whether DILoS redistributes capacity between the classes (Pham §6.1.3); False:
        Pham's separate per-class managers, each class at its weights' share, nothing lent
        and nothing handed down (module notes).
    crc_cycles : trigger intervals per capacity redistribution cycle (Pham: 10 cycles); a
        decision counts as the trigger intervals it covered.
    settings : the manager's own settings; ``capacity`` is the node's headroom ``H``, split
        over the classes by their weights (default :data:`DEFAULT_CAPACITY`).
    layout : one of :data:`LAYOUTS`: a manager per class (default), one ``common`` manager
        for the node (Pham's common load manager), or ``none`` (nothing shed); ``dilos``
        needs ``per-class``.
    work_conserving : with ``dilos``, whether a class may also admit within the interval what
        the others leave idle (Pham's CQC, module notes; default True); False: DILoS lends only
        every CRC. The separate managers (``dilos`` False) never lend.
    scheduler : one of :data:`SCHEDULERS`: ``none`` (default), every class's decided windows
        run in the next batch; ``cqc``, CQC's weighted round robin over the classes' queued
        windows (:func:`spillway.control.cqc.dispatch`): the windows a class cannot run within
        its quota of the batch wait for later batches (module notes, "A class scheduler on
        lanes").

    >>> ClassControlConfig(manager="aloma", query_class=(1, 4))
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: query_class[1] must be a class from 1 to 3 (one per weight), got 4
    """

    manager: str
    query_class: tuple[int, ...]
    weights: tuple[int, ...] = (6, 3, 1)
    target_intervals: tuple[float, ...] = (3.0, 4.0, 5.0)
    dilos: bool = True
    crc_cycles: int = 10
    settings: Mapping[str, Any] = field(default_factory=dict)
    layout: str = "per-class"
    work_conserving: bool = True
    scheduler: str = "none"

    def __post_init__(self) -> None:
        for name in ("query_class", "weights", "target_intervals"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        if not self.weights:
            raise ConfigError("weights must give one priority per class, got none")
        for i, w in enumerate(self.weights):
            check_count(f"weights[{i}]", w, low=1)
        if len(self.target_intervals) != len(self.weights):
            raise ConfigError(
                f"target_intervals needs one delay target per class ({len(self.weights)}), "
                f"got {len(self.target_intervals)}"
            )
        if not self.query_class:
            raise ConfigError("query_class must give every query's class, got none")
        n = len(self.weights)
        for i, c in enumerate(self.query_class):
            if not isinstance(c, int) or isinstance(c, bool) or not 1 <= c <= n:
                raise ConfigError(
                    f"query_class[{i}] must be a class from 1 to {n} (one per weight), got {c!r}"
                )
        if not isinstance(self.dilos, bool):
            raise ConfigError(f"dilos must be true or false, got {self.dilos!r}")
        check_count("crc_cycles", self.crc_cycles, low=1)
        if not isinstance(self.settings, Mapping):
            raise ConfigError(
                f"load manager settings must be a table of settings, got {self.settings!r}"
            )
        object.__setattr__(self, "settings", dict(self.settings))
        if self.layout not in LAYOUTS:
            raise ConfigError(f"layout must be one of {', '.join(LAYOUTS)}, got {self.layout!r}")
        if not isinstance(self.work_conserving, bool):
            raise ConfigError(
                f"work_conserving must be true or false, got {self.work_conserving!r}"
            )
        if self.scheduler not in SCHEDULERS:
            raise ConfigError(
                f"scheduler must be one of {', '.join(SCHEDULERS)}, got {self.scheduler!r}"
            )
        if self.dilos and self.layout != "per-class":
            raise ConfigError(
                f"dilos redistributes capacity between per-class managers, so it needs layout "
                f"'per-class', got layout {self.layout!r} with dilos true: set dilos false"
            )
        self.classes_config(1.0)  # every class's manager must build: fail now

    @property
    def n_classes(self) -> int:
        """The number of classes (one per weight)."""
        return len(self.weights)

    def classes_config(self, trigger_s: float) -> classes.ClassesConfig:
        """The per-class managers (capacity ``share_k · H``, target ``D_k · trigger_s``) and
        the class scheduler, for a node whose trigger interval is ``trigger_s``."""
        h = check_number(
            "capacity", self.settings.get("capacity", DEFAULT_CAPACITY), low=0, low_ok=False
        )
        managers = []
        for share, d in zip(original_shares(self.weights), self.target_intervals, strict=True):
            lc = LoadControlConfig(
                manager=self.manager,
                target_intervals=d,
                settings={**self.settings, "capacity": h * share},
            )
            managers.append(_now(lc.manager_config(trigger_s), self.settings))
        dilos = DilosConfig(  # the CRC counts trigger intervals, not decisions
            priorities=self.weights, crc_cycles=self.crc_cycles, control_period_s=trigger_s
        )
        return classes.ClassesConfig(
            managers=tuple(managers),
            priorities=self.weights,
            dilos=dilos if self.dilos else None,
            # separate managers: fixed shares, nothing lent or handed down (module notes)
            work_conserving=self.dilos and self.work_conserving,
            priority_order=self.dilos,
        )

    def common_config(self, trigger_s: float) -> classes.ClassesConfig:
        """The ``common`` layout's one manager: capacity ``H``, the strictest target ``D``
        (class 1's by default), so that no class's target is looser than the one it keeps."""
        h = check_number(
            "capacity", self.settings.get("capacity", DEFAULT_CAPACITY), low=0, low_ok=False
        )
        lc = LoadControlConfig(
            manager=self.manager,
            target_intervals=min(self.target_intervals),
            settings={**self.settings, "capacity": h},
        )
        return classes.ClassesConfig(
            managers=(_now(lc.manager_config(trigger_s), self.settings),), priorities=(1,)
        )


def _now(manager: Any, settings: Mapping[str, Any]) -> Any:
    """``manager`` deciding the arrivals it reports on (``retroactive`` off unless set): a
    class's drop is the class scheduler's, not its manager's alone, and the classes' queued
    loads count the arrivals at the last drop applied, so deciding one interval ahead
    (:attr:`~spillway.spark.load_control.LoadControl.pending_drop`) is the node's one
    manager's."""
    if hasattr(manager, "retroactive") and "retroactive" not in settings:
        return replace(manager, retroactive=False)
    return manager


class ClassControl:
    """The classes' load managers with their state, fed what the node measured (not
    thread-safe: the controller calls it under its lock).

    ``shared_batches``: whether classes share micro-batches (lanes of one plan, the default)
    or each class runs its own plan (FAIR pools), where :meth:`summary` compares the classes'
    latencies (:func:`latency_order`)."""

    def __init__(
        self,
        config: ClassControlConfig,
        *,
        trigger_s: float,
        n_queries: int,
        shared_batches: bool = True,
    ) -> None:
        check_number("trigger_s", trigger_s, low=0, low_ok=False)
        if n_queries != len(config.query_class):
            raise ConfigError(
                f"query_class gives {len(config.query_class)} classes for a node of "
                f"{n_queries} queries: give one per query"
            )
        self.config = config
        self.trigger_s = float(trigger_s)
        self.shared_batches = bool(shared_batches)
        #: Each query's class index (0 = class 1).
        self.query_index = np.asarray(config.query_class, dtype=np.int64) - 1
        self._cfg = (
            config.common_config(trigger_s)
            if config.layout == "common"
            else config.classes_config(trigger_s)
        )
        self._state = classes.initial_state(self._cfg)
        n = config.n_classes
        self._rows = [0] * n
        self._timed = [0] * n
        self._weighted = [0.0] * n
        self._dropped_iv = [0] * n
        self.arrived = [0] * n
        self.dropped = [0] * n
        #: Per class, (feed time, response time, rows) of every measured batch.
        self.responses: list[list[tuple[float, float, int]]] = [[] for _ in range(n)]
        self.records: list[dict[str, Any]] = []
        #: Per decision, (feed time, tuples arrived per class, tuples dropped per class).
        self.decided: list[tuple[float, tuple[int, ...], tuple[int, ...]]] = []

    @property
    def capacities(self) -> list[float]:
        """Every class manager's current capacity (headroom) estimate, in load units (the
        ``common`` manager's for every class; NaN with no manager)."""
        n = self.config.n_classes
        if self.config.layout == "none":
            return [math.nan] * n
        lms = [classes._manager(m) for m in self._cfg.managers]
        caps = [float(lm.capacity_of(s)) for lm, s in zip(lms, self._state.managers, strict=True)]
        return caps * n if self.config.layout == "common" else caps

    def observe(self, c: int, *, rows: int, response_s: float | None, t: float = math.nan) -> None:
        """``rows`` admitted rows of class index ``c`` got results at feed time ``t``,
        ``response_s`` after their mean arrival (None: not known; the rows still count as
        processed)."""
        if rows <= 0:
            return
        self._rows[c] += int(rows)
        if response_s is not None and math.isfinite(response_s):
            r = max(float(response_s), 0.0)
            self._timed[c] += int(rows)
            self._weighted[c] += int(rows) * r
            self.responses[c].append((float(t), r, int(rows)))

    def note(self, *, arrived: Sequence[int], dropped: Sequence[int], t: float = math.nan) -> None:
        """A decision at feed time ``t`` covered ``arrived`` tuples per class and shed
        ``dropped`` of them."""
        a_c = [int(a) for a in arrived]
        d_c = [int(d) for d in dropped]
        for c, (a, d) in enumerate(zip(a_c, d_c, strict=True)):
            self.arrived[c] += a
            self.dropped[c] += d
            self._dropped_iv[c] += d
        self.decided.append((float(t), tuple(a_c), tuple(d_c)))

    def decide(
        self,
        *,
        t: float,
        interval_s: float,
        loads: Sequence[float],
        arrived: Sequence[int],
        queued_loads: Sequence[float],
    ) -> classes.ClassesDecision:
        """Step every class's manager (and DILoS) with the interval that ended at feed time
        ``t``; the measured batches since the last decision are consumed."""
        stats = []
        rts: list[float | None] = []
        for c in range(self.config.n_classes):
            rt = self._weighted[c] / self._timed[c] if self._timed[c] else None
            rts.append(rt)
            stats.append(
                classes.IntervalStats(
                    interval_s=interval_s,
                    load=max(float(loads[c]), 0.0),
                    arrived=int(arrived[c]),
                    dropped=self._dropped_iv[c],
                    processed=self._rows[c],
                    outputs=self._rows[c],
                    undecided=int(arrived[c]),  # decided after they came (load_control)
                    queued_load=max(float(queued_loads[c]), 0.0),
                    response_time_s=rt,
                )
            )
        d = self._step(stats)
        for c, s in enumerate(stats):
            self.records.append(
                {
                    "t": t,
                    "class": c + 1,
                    "load": s.load,
                    "arrived": s.arrived,
                    "dropped": s.dropped,
                    "processed": s.processed,
                    "response_time_s": rts[c],
                    "drop": d.drops[c],
                    "share": d.shares[c],
                    "capacity": d.capacities[c],
                    "lent": d.lent[c] if d.lent else 0.0,
                    "handed": d.handed[c] if d.handed else 0.0,
                    "redistributed": d.redistributed,
                }
            )
        n = self.config.n_classes
        self._rows, self._timed, self._weighted = [0] * n, [0] * n, [0.0] * n
        self._dropped_iv = [0] * n
        return d

    def _step(self, stats: Sequence[classes.IntervalStats]) -> classes.ClassesDecision:
        """The layout's decision: the per-class managers, the one common manager fed the
        summed statistics (its drop for every class), or nothing shed."""
        n = self.config.n_classes
        layout = self.config.layout
        if layout == "per-class":
            self._state, d = classes.step(self._cfg, self._state, stats)
            return d
        shares = original_shares(self.config.weights)
        if layout == "none":
            return classes.ClassesDecision(
                drops=(0.0,) * n, shares=shares, capacities=(math.nan,) * n,
                usage=(math.nan,) * n, redistributed=False, decisions=(),
            )  # fmt: skip
        total = combine_stats(stats)  # Pham's common load manager sees the summed statistics
        self._state, d = classes.step(self._cfg, self._state, [total])
        return classes.ClassesDecision(
            drops=d.drops * n, shares=shares, capacities=d.capacities * n, usage=d.usage * n,
            redistributed=False, decisions=d.decisions,
        )  # fmt: skip

    def status(
        self, *, t: float, window_s: float, queries: Sequence[str]
    ) -> tuple[ClassStatus, ...]:
        """Every class now (feed time ``t``, :class:`~spillway.status.ClassStatus`): its
        decisions (:meth:`note`) and measured batches (:meth:`observe`) of the ``window_s``
        seconds up to ``t``, its manager's headroom and its share after the latest decision;
        ``queries`` are the node's query names by query id.

        >>> cfg = ClassControlConfig(manager="aurora", query_class=(1, 2, 2),
        ...                          weights=(2, 1), target_intervals=(2.0, 4.0),
        ...                          settings={"capacity": 0.9}, dilos=False)
        >>> cc = ClassControl(cfg, trigger_s=0.5, n_queries=3)
        >>> for t in (1.0, 2.0, 3.0):
        ...     cc.observe(1, rows=10, response_s=t, t=t)
        ...     _ = cc.decide(t=t, interval_s=0.5, loads=[0.2, 0.5], arrived=[10, 20],
        ...                   queued_loads=[0.1, 0.1])
        ...     cc.note(arrived=[10, 20], dropped=[0, 5 * int(t)], t=t)
        >>> c1, c2 = cc.status(t=3.0, window_s=1.5, queries=("a", "b", "c"))
        >>> c2.klass, c2.queries, c2.arrived, c2.dropped, c2.latency_p95_s, c2.latency_target_s
        (2, ('b', 'c'), 40, 25, 3.0, 2.0)
        >>> c2.kept_fraction, c2.loss, round(c2.headroom, 2), round(c2.share, 3)
        (0.375, 0.5, 0.3, 0.333)
        >>> c1.latency_p95_s, c1.kept_fraction, c1.latency_target_s
        (nan, 1.0, 1.0)
        """
        lo = float(t) - float(window_s)
        n = self.config.n_classes
        arrived, dropped = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        for at, a, d in reversed(self.decided):
            if not at > lo:
                break
            if at <= t:
                arrived += a
                dropped += d
        latest = self.records[-n:]  # the last decision's, class 1 first
        shares = (
            [float(r["share"]) for r in latest]
            if len(latest) == n
            else list(original_shares(self.config.weights))
        )
        caps = self.capacities
        out = []
        for c in range(n):
            after = takewhile(lambda x: x[0] > lo, reversed(self.responses[c]))
            recent = [x for x in after if x[0] <= t]
            out.append(
                ClassStatus(
                    klass=c + 1,
                    weight=self.config.weights[c],
                    queries=tuple(
                        q for q, k in zip(queries, self.query_index, strict=True) if k == c
                    ),
                    arrived=int(arrived[c]),
                    dropped=int(dropped[c]),
                    latency_p95_s=_p95(recent),
                    latency_target_s=self.config.target_intervals[c] * self.trigger_s,
                    headroom=caps[c],
                    share=shares[c],
                    arrived_total=self.arrived[c],
                    dropped_total=self.dropped[c],
                )
            )
        return tuple(out)

    def summary(self, steady_s: float = 0.0) -> dict[str, Any]:
        """Per class: weight, ``D``, loss, row-weighted p95 and mean response time (each
        batch's rows counted at their mean response) of the batches that finished
        ``steady_s`` or more after the first decision (all of them when none did), whether
        p95 <= D, and the manager's headroom over time; plus the latency comparison's
        verdict."""
        t0 = self.records[0]["t"] if self.records else 0.0
        out: dict[str, Any] = {}
        n_c = self.config.n_classes
        for c in range(n_c):
            every = self.responses[c]
            resp = [x for x in every if x[0] - t0 >= steady_s] or every
            vals, rows = [r for _, r, _ in resp], [n for _, _, n in resp]
            p95 = _p95(resp)
            mean = float(np.average(vals, weights=rows)) if resp else math.nan
            d_s = self.config.target_intervals[c] * self.trigger_s
            recs = [r for r in self.records if r["class"] == c + 1]
            out[str(c + 1)] = {
                "weight": self.config.weights[c],
                "target_intervals": self.config.target_intervals[c],
                "target_s": d_s,
                "arrived": self.arrived[c],
                "dropped": self.dropped[c],
                "loss": self.dropped[c] / self.arrived[c] if self.arrived[c] else math.nan,
                "latency_p95_s": p95,
                "latency_mean_s": mean,
                "meets_target": None if math.isnan(p95) else bool(p95 <= d_s),
                "headroom": [[r["t"], r["capacity"]] for r in recs],
                "share": [[r["t"], r["share"]] for r in recs],
            }
        return {
            "manager": self.config.manager,
            "layout": self.config.layout,
            "dilos": self.config.dilos,
            "trigger_s": self.trigger_s,
            "classes": out,
            "latency_order": (
                SHARED_BATCHES
                if self.shared_batches
                else latency_order([out[str(c + 1)]["latency_p95_s"] for c in range(n_c)])
            ),
            "latency_after_s": steady_s,
        }
