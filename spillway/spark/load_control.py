"""A Pham load manager driving the node's drop fraction from what Spark measured.

With ``NodeConfig.load_manager`` set, the node's controller does not ask its overload detector
how much to shed: once per interval it hands the load manager (Aurora, CTRL, SEaMLeSS or ALoMa,
the pure step functions in :mod:`spillway.control`) the statistics it measured on Spark over the
interval that just ended, and sheds the fraction the manager returns (the policy still chooses
*which* tuples: the manager decides how many). This module only measures and forwards; every
decision is the step function's.

What is measured, per interval ``T`` (one trigger interval times the batch span):

- ``arrived``: the tuples that arrived in the interval, counted from the feeds' arrival
  clocks, never from what Spark has read (Pham §4.4: arrival counts independent of processing);
- ``load`` (Pham Eq. 3.1, CPU-seconds per second): the executor time those arrivals need, from
  the plan's cost model fitted on measured micro-batches, ``(overhead + per_tuple · arrived) /
  T`` summed over the plans that receive tuples (or at the costs
  :meth:`~spillway.spark.controller.NodeController.freeze_load_costs` froze);
- ``processed`` and ``response_time_s``: rows of the micro-batches that finished in the
  interval, and their mean response time (Pham Def. 3, arrival → result): the feed time a
  batch finished minus the mean arrival time of its rows, weighted by rows. The mean arrival
  time of a decision's rows is the midpoint of the arrival span it covered (the feeds' rates
  are constant within an interval);
- ``undecided``: every one of those arrivals: the node decides them after they came, at the
  drop this step returns (CTRL counts them in its virtual queue at the drop in effect);
- ``queued_load`` (SEaMLeSS Eq. 4.1): CPU-seconds waiting: the admitted tuples not yet
  processed plus the interval's arrivals after the shedding in effect (the kept share of the
  last decision: Pham's AQSIOS sheds in the source operators, so unread tuples are read
  through the shedder),
  at the fitted costs. At their full cost the arrivals this decision sheds would sit in the
  queue and in ``load`` at once (``NodeController._work_and_queued``). A manager that decides
  one interval ahead (SEaMLeSS, ``retroactive``) has already decided the waiting arrivals'
  drop (:attr:`LoadControl.pending_drop`): they count at it, and it is the drop they get.

The delay target ``D`` is given in trigger intervals (``target_intervals``); on Spark it is
``D = target_intervals · trigger_s`` seconds (Pham's 300-500 ms against a 150 ms cycle become 2-4
intervals here).

Examples
--------
>>> cfg = LoadControlConfig(manager="aurora", target_intervals=3, settings={"capacity": 0.6})
>>> lc = LoadControl(cfg, trigger_s=0.5)
>>> lc.target_s
1.5
>>> lc.observe(rows=100, response_s=0.9)
>>> d = lc.decide(t=1.0, interval_s=0.5, load=1.2, arrived=200, queued_load=0.4)
>>> round(d.drop, 3)                            # Aurora: shed L − H = 0.6 of 1.2
0.5
>>> lc.records[-1]["response_time_s"], lc.records[-1]["processed"]
(0.9, 100)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from spillway.control import IntervalStats, LoadDecision, load_manager
from spillway.control.load_manager import check_number
from spillway.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class LoadControlConfig:
    """Which load manager decides the node's drop fraction, and its settings.

    Parameters
    ----------
    manager : a name in :data:`spillway.control.LOAD_MANAGERS` (aurora, ctrl, seamless, aloma).
    target_intervals : the delay target ``D`` in trigger intervals (> 0); managers with a
        ``target_s`` get ``target_intervals · trigger_s``.
    settings : the manager's own settings (its config class's fields, e.g. ``capacity`` for
        Aurora's and CTRL's ``H``); ``target_s`` is not one of them (use ``target_intervals``).

    >>> LoadControlConfig(manager="aloma", target_intervals=0)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: target_intervals must be a finite number > 0, got 0
    """

    manager: str
    target_intervals: float = 3.0
    settings: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        load_manager(self.manager)  # an unknown name fails here, listing the known ones
        check_number("target_intervals", self.target_intervals, low=0, low_ok=False)
        if not isinstance(self.settings, Mapping):
            raise ConfigError(
                f"load manager settings must be a table of settings, got {self.settings!r}"
            )
        object.__setattr__(self, "settings", dict(self.settings))
        if "target_s" in self.settings:
            raise ConfigError(
                "load manager settings must not set target_s: the delay target is given in "
                "trigger intervals, set target_intervals instead"
            )
        self.manager_config(1.0)  # the settings must fit the manager: fail now

    def manager_config(self, trigger_s: float) -> Any:
        """The manager's config for a node whose trigger interval is ``trigger_s``."""
        lm = load_manager(self.manager)
        settings = dict(self.settings)
        names = {f.name for f in fields(lm.config_class)}
        if "target_s" in names:
            settings["target_s"] = self.target_intervals * trigger_s
        if "control_period_s" in names:  # SEaMLeSS and ALoMa count trigger intervals, not batches
            settings.setdefault("control_period_s", trigger_s)
        if "retroactive" in names:  # a decision sheds the arrivals that came before it
            settings.setdefault("retroactive", True)
        return lm.config(**settings)


class LoadControl:
    """One load manager with its state, fed the node's measured statistics (not thread-safe:
    the controller calls it under its lock)."""

    def __init__(self, config: LoadControlConfig, *, trigger_s: float) -> None:
        check_number("trigger_s", trigger_s, low=0, low_ok=False)
        self.config = config
        self.target_s = config.target_intervals * trigger_s
        self._lm = load_manager(config.manager)
        self._cfg = config.manager_config(trigger_s)
        self._state = self._lm.initial_state(self._cfg)
        self._rows = 0
        self._timed = 0
        self._weighted_s = 0.0
        self._dropped = 0
        self.records: list[dict[str, Any]] = []

    @property
    def capacity(self) -> float:
        """The manager's current capacity (headroom) estimate, in load units."""
        return float(self._lm.capacity_of(self._state))

    @property
    def pending_drop(self) -> float | None:
        """The drop the manager already decided for the arrivals waiting now, or None: a
        ``retroactive`` SEaMLeSS decides one interval ahead, so the node counts the waiting
        arrivals in the queued load at the drop they will get, not at the last one applied."""
        ahead = self._lm.pending_drop(self._cfg, self._state)
        return None if ahead is None else float(ahead)

    def observe(self, *, rows: int, response_s: float | None) -> None:
        """A micro-batch of ``rows`` rows finished, ``response_s`` after its rows' mean arrival
        (None: not known; the rows still count as processed)."""
        if rows <= 0:
            return
        self._rows += int(rows)
        if response_s is not None and math.isfinite(response_s):
            self._timed += int(rows)
            self._weighted_s += int(rows) * max(float(response_s), 0.0)

    def note_dropped(self, n: int) -> None:
        """``n`` arrived tuples were shed (reported with the next interval's statistics)."""
        self._dropped += max(int(n), 0)

    def decide(
        self, *, t: float, interval_s: float, load: float, arrived: int, queued_load: float
    ) -> LoadDecision:
        """Step the manager with the interval that ended at feed time ``t``; the measured
        batches since the last decision are consumed."""
        rt = self._weighted_s / self._timed if self._timed else None
        stats = IntervalStats(
            interval_s=interval_s,
            load=max(load, 0.0),
            arrived=int(arrived),
            dropped=self._dropped,
            processed=self._rows,
            outputs=self._rows,
            undecided=int(arrived),  # the node decides the interval's arrivals after they came
            queued_load=max(queued_load, 0.0),
            response_time_s=rt,
        )
        self._state, decision = self._lm.step(self._cfg, self._state, stats)
        self.records.append(
            {
                "t": t,
                "load": stats.load,
                "arrived": stats.arrived,
                "dropped": stats.dropped,
                "processed": stats.processed,
                "queued_load": stats.queued_load,
                "response_time_s": rt,
                "drop": decision.drop,
                "capacity": decision.capacity,
            }
        )
        self._rows, self._timed, self._weighted_s, self._dropped = 0, 0, 0.0, 0
        return decision
