"""Priority classes on a node: a load manager per class deciding its lanes' budget (no JVM)."""

from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.policies import make_policy
from spillway.spark.class_control import ClassControl, ClassControlConfig
from spillway.spark.controller import ControllerConfig, NodeController
from spillway.spark.load_control import LoadControlConfig
from spillway.testing import ListFeed
from tests.spark.test_controller import _plans


def _controller(manager="aurora", query_class=(1, 2, 3), policy="random", **settings):
    cc = ClassControlConfig(
        manager=manager, query_class=query_class, settings=settings, dilos=False
    )
    cfg = ControllerConfig(clock="logical", stw_s=4.0, seed=9, class_control=cc)
    return NodeController(cfg, _plans(), make_policy(policy, seed=1), epoch_s=100.0)


def test_config_errors_name_the_setting():
    with pytest.raises(ConfigError, match="weights must give one priority per class"):
        ClassControlConfig(manager="aloma", query_class=(1,), weights=())
    with pytest.raises(ConfigError, match=r"weights\[1\] must be an int >= 1, got 0"):
        ClassControlConfig(
            manager="aloma", query_class=(1,), weights=(2, 0), target_intervals=(3, 4)
        )
    with pytest.raises(ConfigError, match="target_intervals needs one delay target per class"):
        ClassControlConfig(manager="aloma", query_class=(1,), target_intervals=(3,))
    with pytest.raises(ConfigError, match="query_class must give every query's class"):
        ClassControlConfig(manager="aloma", query_class=())
    with pytest.raises(ConfigError, match=r"query_class\[0\] must be a class from 1 to 3"):
        ClassControlConfig(manager="aloma", query_class=(0,))
    with pytest.raises(ConfigError, match="dilos must be true or false"):
        ClassControlConfig(manager="aloma", query_class=(1,), dilos="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="crc_cycles must be an int >= 1"):
        ClassControlConfig(manager="aloma", query_class=(1,), crc_cycles=0)
    with pytest.raises(ConfigError, match="settings must be a table of settings"):
        ClassControlConfig(manager="aloma", query_class=(1,), settings=[1])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="capacity must be a finite number > 0"):
        ClassControlConfig(manager="aloma", query_class=(1,), settings={"capacity": 0})
    with pytest.raises(ConfigError, match="layout must be one of per-class, common, none"):
        ClassControlConfig(manager="aloma", query_class=(1,), layout="shared")
    with pytest.raises(ConfigError, match="work_conserving must be true or false, got 'no'"):
        ClassControlConfig(manager="aloma", query_class=(1,), work_conserving="no")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="dilos .* needs layout 'per-class'.*set dilos false"):
        ClassControlConfig(manager="aloma", query_class=(1,), layout="common")
    with pytest.raises(ConfigError, match="target_intervals must be a finite number > 0"):
        ClassControlConfig(manager="aloma", query_class=(1,), target_intervals=(3, 0, 5))
    with pytest.raises(ConfigError, match="query_class gives 1 classes for a node of 3 queries"):
        ClassControl(
            ClassControlConfig(manager="aloma", query_class=(1,)), trigger_s=1.0, n_queries=3
        )
    with pytest.raises(ConfigError, match="class_control must be a ClassControlConfig or None"):
        ControllerConfig(class_control="dilos")  # type: ignore[arg-type]
    cc = ClassControlConfig(manager="aloma", query_class=(1, 2, 3))
    with pytest.raises(ConfigError, match="load_control and class_control are both set"):
        ControllerConfig(class_control=cc, load_control=LoadControlConfig(manager="aloma"))
    with pytest.raises(ConfigError, match="class_control needs a policy that decides per lane"):
        NodeController(ControllerConfig(class_control=cc), _plans(), make_policy("cod"))


def test_each_class_manager_gets_its_share_and_target():
    cfg = ClassControlConfig(manager="seamless", query_class=(1, 3), settings={"capacity": 1.0})
    managers = cfg.classes_config(0.5).managers
    assert [m.capacity for m in managers] == pytest.approx([0.6, 0.3, 0.1])
    assert [m.target_s for m in managers] == [1.5, 2.0, 2.5]
    assert cfg.classes_config(0.5).dilos is not None
    assert cfg.classes_config(0.5).dilos.control_period_s == 0.5  # the CRC counts intervals
    assert cfg.classes_config(0.5).managers[0].control_period_s == 0.5
    assert (
        ClassControlConfig(manager="aurora", query_class=(1,), dilos=False)
        .classes_config(1.0)
        .dilos
        is None
    )


def test_each_class_sheds_only_its_own_lanes_by_its_own_drop():
    # Aurora, H = 1.0 split 0.6/0.3/0.1: class 3's query sheds most; class 1 sheds least.
    c = _controller(capacity=0.2)
    c.latest_offset("avg", c.initial_offset("avg"))
    recs = {r["class"]: r for r in c.class_control.records}
    h = c.history()[-1]
    for q, cls in (("qa", 1), ("qb", 2), ("qc", 3)):
        kept = h.query_admitted[q] / h.query_arrived[q]
        assert kept == pytest.approx(1 - recs[cls]["drop"], abs=0.05), q
    assert recs[1]["drop"] <= recs[2]["drop"] <= recs[3]["drop"]
    assert recs[3]["drop"] > 0
    cc = c.class_control
    assert sum(cc.dropped) == h.arrived_tuples - h.admitted_tuples
    assert cc.arrived == [h.query_arrived["qa"], h.query_arrived["qb"], h.query_arrived["qc"]]


def test_measured_batches_give_each_class_its_response_time():
    c = _controller(capacity=50.0)  # nothing shed
    start = c.initial_offset("avg")
    off = c.latest_offset("avg", start)  # boundary 1: rows of [0, 1) s, mean arrival 0.5 s
    c.observe_batch("avg", rows=60, duration_s=0.2, end_offset=off, start_offset=start)
    cc = c.class_control
    ((t1, r1, n1),) = cc.responses[0]
    ((_, r2, n2),) = cc.responses[1]
    assert t1 == pytest.approx(1.0)
    assert (r1, r2) == (pytest.approx(0.5), pytest.approx(0.5))  # finished at feed time 1 s
    assert n1 + n2 == c.history()[-1].query_admitted["qa"] + c.history()[-1].query_admitted["qb"]
    assert cc.responses[2] == []  # class 3 runs in plan "max", whose batch is not done yet
    c.decide(2)
    assert [r["processed"] for r in cc.records[-3:]] == [n1, n2, 0]
    s = cc.summary()
    assert s["classes"]["1"]["latency_p95_s"] == pytest.approx(0.5)
    assert s["classes"]["1"]["meets_target"] is True
    assert np.isnan(s["classes"]["3"]["latency_p95_s"])
    assert s["classes"]["3"]["meets_target"] is None
    assert s["latency_order"].startswith("not applicable")
    assert len(s["classes"]["2"]["headroom"]) == 2
    assert cc.summary(steady_s=5.0)["classes"]["1"]["latency_p95_s"] == pytest.approx(0.5)
    cc.observe(0, rows=10, response_s=9.0, t=7.0)  # 6 s after the first decision (t = 1 s)
    assert cc.summary(steady_s=5.0)["classes"]["1"]["latency_p95_s"] == pytest.approx(9.0)
    assert cc.summary()["classes"]["1"]["latency_p95_s"] == pytest.approx(9.0)


def test_dilos_lends_class_one_s_unused_capacity_to_class_three():
    # class 1 (qa) is light, class 3 (qb, qc) heavy: with DILoS class 3's capacity grows.
    def run(dilos: bool) -> list[float]:
        cc = ClassControlConfig(
            manager="aurora",
            query_class=(1, 3, 3),
            dilos=dilos,
            crc_cycles=1,
            settings={"capacity": 0.3},
        )
        cfg = ControllerConfig(clock="logical", stw_s=4.0, seed=9, class_control=cc)
        c = NodeController(
            cfg, _plans(rate_a=4.0, rate_b=200.0), make_policy("random"), epoch_s=100.0
        )
        for k in range(1, 4):
            c.decide(k)
        return c.class_control.capacities

    with_dilos, without = run(True), run(False)
    assert without == pytest.approx([0.18, 0.09, 0.03])
    assert with_dilos[2] > without[2]
    assert sum(with_dilos) == pytest.approx(sum(without))


def _decide_once(dilos: bool, loads, wc: bool = True) -> tuple[float, ...]:
    cc = ClassControl(
        ClassControlConfig(manager="aurora", query_class=(1, 2, 3), dilos=dilos,
                           settings={"capacity": 1.0}, work_conserving=wc),
        trigger_s=0.5, n_queries=3,
    )  # fmt: skip
    d = cc.decide(t=1.0, interval_s=0.5, loads=loads, arrived=[10, 10, 10],
                  queued_loads=[0.0, 0.0, 0.0])  # fmt: skip
    assert sum(r["lent"] for r in cc.records[-3:]) == pytest.approx(sum(d.lent))
    return d.drops


def test_dilos_admits_what_the_others_leave_idle_only_when_work_conserving():
    loads = [0.2, 0.3, 0.6]
    assert _decide_once(True, loads, wc=False) == pytest.approx((0.0, 0.0, 0.5 / 0.6))
    assert _decide_once(True, loads) == pytest.approx((0.0, 0.0, 0.1 / 0.6))  # class 1's idle


def test_separate_managers_keep_each_class_to_its_own_share():
    # Pham's separate per-class managers: fixed 6/3/1 shares, no lending. Before, class 1's
    # idle 0.4 went to class 3 (drop 0.167 instead of its manager's 0.833).
    assert _decide_once(False, [0.2, 0.3, 0.6]) == pytest.approx((0.0, 0.0, 0.5 / 0.6))


def test_separate_managers_do_not_hand_a_class_s_shedding_down():
    # class 1 over its share (0.9 against 0.6), classes 2 and 3 under theirs: class 1 sheds
    # what its manager decided. Before, classes 2 and 3 lent it their idle 0.25 and the
    # priority order handed the rest to class 3: drops (0, 0, 0.5).
    assert _decide_once(False, [0.9, 0.1, 0.05]) == pytest.approx((1 / 3, 0.0, 0.0))
    assert _decide_once(True, [0.9, 0.1, 0.05])[0] == pytest.approx(0.0)


def _layout(layout: str, capacity: float = 0.2):
    cc = ClassControlConfig(
        manager="aurora", query_class=(1, 2, 3), settings={"capacity": capacity},
        dilos=False, layout=layout,
    )  # fmt: skip
    cfg = ControllerConfig(clock="logical", stw_s=4.0, seed=9, class_control=cc)
    c = NodeController(cfg, _plans(), make_policy("dilos", seed=1), epoch_s=100.0)
    c.latest_offset("avg", c.initial_offset("avg"))
    return c


def test_common_manager_drops_the_same_fraction_of_every_class():
    c = _layout("common")
    drops = {r["class"]: r["drop"] for r in c.class_control.records}
    assert drops[1] == drops[2] == drops[3] > 0
    h = c.history()[-1]
    for q in ("qa", "qb", "qc"):
        kept = h.query_admitted[q] / h.query_arrived[q]
        assert kept == pytest.approx(1 - drops[1], abs=0.05), q
    caps = c.class_control.capacities
    assert caps == [pytest.approx(0.2)] * 3  # the node's H, not a class's share
    per_class = _layout("per-class")
    assert [r["drop"] for r in per_class.class_control.records][0] < drops[1]


def test_no_manager_sheds_nothing():
    c = _layout("none")
    h = c.history()[-1]
    assert h.admitted_tuples == h.arrived_tuples > 0
    assert all(r["drop"] == 0.0 for r in c.class_control.records)
    assert all(np.isnan(x) for x in c.class_control.capacities)
    assert c.class_control.summary()["layout"] == "none"


def test_class_status_is_the_decisions_and_batches_of_the_last_stw():
    c = _controller(capacity=0.2)
    start = c.initial_offset("avg")
    off = c.latest_offset("avg", start)  # decision 1: rows of [0, 1) s
    c.observe_batch("avg", rows=50, duration_s=0.2, end_offset=off, start_offset=start)
    for k in range(2, 8):
        c.decide(k)
    hist = c.history()
    status = c.class_status(7.0, 4.0)  # the decisions at t = 4, 5, 6, 7
    assert [s.klass for s in status] == [1, 2, 3]
    assert [s.queries for s in status] == [("qa",), ("qb",), ("qc",)]
    for s, q in zip(status, ("qa", "qb", "qc"), strict=True):
        recent = [h for h in hist if h.t > 3.0]
        assert len(recent) == 4
        assert s.arrived == sum(h.query_arrived[q] for h in recent)
        assert s.arrived - s.dropped == sum(h.query_admitted[q] for h in recent)
        assert s.arrived_total == sum(h.query_arrived[q] for h in hist)
        assert s.arrived_total - s.dropped_total == sum(h.query_admitted[q] for h in hist)
    assert status[2].kept_fraction < status[1].kept_fraction < status[0].kept_fraction < 1
    assert [s.headroom for s in status] == pytest.approx(c.class_control.capacities)
    assert [s.share for s in status] == pytest.approx([0.6, 0.3, 0.1])
    assert [s.latency_target_s for s in status] == [3.0, 4.0, 5.0]
    # the one measured batch finished at feed time 1 s: in an STW ending at 4 s, not at 7 s
    assert all(np.isnan(s.latency_p95_s) for s in status)
    early = c.class_status(4.0, 4.0)
    assert early[0].latency_p95_s == pytest.approx(0.5) and early[0].on_target
    assert np.isnan(early[2].latency_p95_s) and not early[2].on_target  # plan "max": no batch
    assert early[0].arrived == sum(h.query_arrived["qa"] for h in hist if h.t <= 4.0)


def test_a_node_without_classes_has_no_class_status():
    from tests.spark.test_controller import _controller as plain

    c = plain(capacity=50.0)
    c.decide(1)
    assert c.class_status(1.0, 4.0) == ()


def _shared_batch_losses(manager: str, loads, *, dilos: bool = True) -> list[float]:
    """Each class's loss on a plant whose classes share one FIFO batch (T = 1 s, true capacity
    1.0): every class's rows of an interval finish together, when the node has done the work
    admitted up to them, so every class measures the same response time (as on Spark)."""
    cc = ClassControl(
        ClassControlConfig(manager=manager, query_class=(1, 2, 3), dilos=dilos,
                           settings={"capacity": 0.8}),
        trigger_s=1.0, n_queries=3,
    )  # fmt: skip
    drops, admitted, done, pending = (0.0, 0.0, 0.0), 0.0, 0.0, []
    for i, load in enumerate(loads):
        t = i + 1.0
        arrived = [int(x * 1000) for x in load]
        kept = [a * (1 - d) for a, d in zip(arrived, drops, strict=True)]
        cc.note(arrived=arrived, dropped=[a - k for a, k in zip(arrived, kept, strict=True)], t=t)
        admitted += sum(x * (1 - d) for x, d in zip(load, drops, strict=True))
        pending.append((admitted, t - 0.5, kept))
        done = min(admitted, done + 1.0)
        while pending and pending[0][0] <= done + 1e-12:
            _, mid, rows = pending.pop(0)
            for c in range(3):
                cc.observe(c, rows=int(rows[c]), response_s=t - mid, t=t)
        queued = admitted - done
        drops = cc.decide(t=t, interval_s=1.0, loads=load, arrived=arrived,
                          queued_loads=[queued / 3 + x for x in load]).drops  # fmt: skip
    return [cc.summary()["classes"][str(c)]["loss"] for c in (1, 2, 3)]


def _bounded_pareto(rng: np.random.Generator, lo: float, hi: float) -> float:
    return lo * hi / (hi - rng.random() * (hi - lo))


def test_classes_sharing_a_batch_lose_in_priority_order_at_aloma_s_targets():
    # ALoMa, 15 s at half the capacity, then 1.2x: the shared response time passes class 1's
    # D (3 s) before class 3's (5 s). Before the classes' drops were put in priority order,
    # class 1 lost 7.9 %, class 2 5.2 %, class 3 nothing.
    flat = [[(0.5 if i < 15 else 1.2) / 3] * 3 for i in range(40)]
    losses = _shared_batch_losses("aloma", flat)
    assert losses[0] <= losses[1] <= losses[2]
    assert losses[2] > 0.05 and losses[0] == 0.0


def test_classes_sharing_a_batch_lose_in_priority_order_on_pareto_rates():
    # Aurora on Pareto rates (SD_p-like; class 1's range changes every 15 s): class 1 lost
    # 19.2 % against class 2's 1.3 % and class 3's 7.3 % before the drops were put in order.
    rng = np.random.default_rng(0)
    ranges = [(0.1, 0.3), (0.3, 0.6), (0.05, 0.2), (0.4, 0.8)]
    pareto = [
        [_bounded_pareto(rng, *ranges[(i // 15) % 4]), _bounded_pareto(rng, 0.8 / 3, 1.3 / 3),
         _bounded_pareto(rng, 0.1, 0.8 / 3)]
        for i in range(80)
    ]  # fmt: skip
    losses = _shared_batch_losses("aurora", pareto)
    assert losses[0] <= losses[1] <= losses[2]
    assert losses[2] > 0.1


def test_class_managers_decide_the_arrivals_they_report_on():
    # The node's one SEaMLeSS decides one interval ahead (spark/load_control.py); a class's
    # drop is the class scheduler's, so the classes' SEaMLeSS decide now unless told otherwise.
    cc = ClassControlConfig(manager="seamless", query_class=(1, 2, 3))
    assert [m.retroactive for m in cc.classes_config(0.5).managers] == [False] * 3
    told = ClassControlConfig(manager="seamless", query_class=(1,), settings={"retroactive": True})
    assert told.classes_config(0.5).managers[0].retroactive


def _three_classes(scheduler: str) -> NodeController:
    """A node of three classes (one query each) in one plan, nothing shed (layout none), at
    the prior's 0.2 s of fixed cost and 10 ms a tuple: classes 1 and 2 bring 0.2 s of work a
    1 s interval each, class 3 0.6 s, against 0.8 s free."""
    from dataclasses import replace

    from spillway.spark.controller import DEFAULT_COST_MODEL, PlanQuery, PlanSpec
    from tests.spark.test_controller import _steady

    plan = PlanSpec(
        name="p",
        kind="avg",
        window_s=1.0,
        queries=(
            PlanQuery(query_id=0, name="q1", feed=_steady(1, 20.0, seconds=60.0)),
            PlanQuery(query_id=1, name="q2", feed=_steady(1, 20.0, seconds=60.0)),
            PlanQuery(query_id=2, name="q3", feed=_steady(1, 60.0, seconds=60.0)),
        ),
    )
    cc = ClassControlConfig(manager="aurora", query_class=(1, 2, 3), dilos=False,
                            layout="none", scheduler=scheduler)  # fmt: skip
    costs = replace(DEFAULT_COST_MODEL, prior_overhead_s=0.2, prior_per_tuple_s=0.01,
                    prior_overhead_std_s=1e-6, prior_per_tuple_std_s=1e-9)  # fmt: skip
    cfg = ControllerConfig(clock="logical", stw_s=4.0, seed=9, class_control=cc,
                           cost_model=costs, capacity_reach=None)  # fmt: skip
    return NodeController(cfg, [plan], make_policy("random", seed=1), epoch_s=100.0)


def _scheduled(scheduler: str, decisions: int = 40):
    """:func:`_three_classes` for ``decisions`` intervals, every batch measured as taking its
    fitted time. Returns the controller, per decision each class's arrivals decided, and the
    last offset."""
    c = _three_classes(scheduler)
    start, decided, off = c.initial_offset("p"), [], None
    for _ in range(decisions):
        off = c.latest_offset("p", start)
        h = c.history()[-1]
        decided.append([h.query_arrived[q] for q in ("q1", "q2", "q3")])
        c.observe_batch("p", rows=h.admitted_tuples, duration_s=0.2 + 0.01 * h.admitted_tuples,
                        end_offset=off, start_offset=start)  # fmt: skip
        start = off
    return c, decided, off


def test_the_class_scheduler_holds_back_the_overloaded_class_and_only_it_waits():
    c, decided, _ = _scheduled("cqc")
    assert all(d[0] == 20 and d[1] == 20 for d in decided)  # classes 1, 2: every window now
    ran = [d[2] // 60 for d in decided]
    # class 3: its quota and what 1 and 2 leave (0.4 s an interval) run 2 of its 0.6 s
    # windows every 3 intervals, and never more than one window beyond the 0.8 s free
    assert sum(ran) == pytest.approx(len(ran) * 2 / 3, abs=1)
    assert max(20 + 20 + d[2] for d in decided) * 0.01 <= 0.8 + 0.6
    s = c.class_control.summary()["classes"]
    assert s["1"]["latency_p95_s"] == pytest.approx(0.5)
    assert s["2"]["latency_p95_s"] == pytest.approx(0.5)
    assert s["3"]["latency_p95_s"] > 10.0  # a third of its windows wait longer every interval
    assert c.class_control.arrived[2] == sum(d[2] for d in decided)


def test_without_a_scheduler_every_class_waits_for_the_same_batch():
    c, decided, _ = _scheduled("none", decisions=10)
    assert all(d == [20, 20, 60] for d in decided)
    s = c.class_control.summary()["classes"]
    assert s["1"]["latency_p95_s"] == s["3"]["latency_p95_s"]


def test_a_restarted_node_resumes_each_class_from_its_own_cut():
    c, _, off = _scheduled("cqc", decisions=12)
    done, _ = c.processed()
    assert done[2] < done[0] == done[1]  # class 3 is behind
    again = _three_classes("cqc")
    again.latest_offset("p", off)  # Spark hands the restarted node its last offset
    h = again.history()[-1]
    # the decision after the restart starts each query where its cut was: class 3's windows
    # held back are still to run, none decided twice, none skipped
    ends = [int(x) for x in off["end"]]
    assert [h.query_arrived[q] for q in ("q1", "q2")] == [20, 20]
    assert h.query_arrived["q3"] % 60 == 0
    assert again.processed()[0][2] >= done[2]
    assert ends[2] == int(round((done[2] - 100.0) * 60))


class _Recorded(ListFeed):
    """A replayed file's feed: windows in the data's own time."""

    def event_clock(self):
        return (1_700_000_000.0, 60.0)


def test_the_class_scheduler_refuses_feeds_whose_windows_it_cannot_hold_back():
    from spillway.spark.controller import PlanQuery, PlanSpec

    plan = PlanSpec(name="p", kind="avg", window_s=1.0, queries=(
        PlanQuery(query_id=0, name="live", feed=ListFeed(times=[[0.1]], values=[[1.0]])),
        PlanQuery(query_id=1, name="replayed", feed=_Recorded(times=[[0.1]], values=[[1.0]])),
    ))  # fmt: skip
    cc = ClassControlConfig(manager="aurora", query_class=(1, 2), weights=(2, 1),
                            target_intervals=(3, 4), scheduler="cqc")  # fmt: skip
    with pytest.raises(ConfigError, match="query 'replayed' reads a log or replays a file"):
        NodeController(ControllerConfig(clock="logical", class_control=cc), [plan],
                       make_policy("random"))  # fmt: skip
    with pytest.raises(ConfigError, match="scheduler must be one of none, cqc, got 'drr'"):
        ClassControlConfig(manager="aurora", query_class=(1,), scheduler="drr")
