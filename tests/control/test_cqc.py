from __future__ import annotations

import math

import numpy as np
import pytest

from spillway.control.aurora import AuroraConfig
from spillway.control.classes import ClassesConfig, initial_state, step
from spillway.control.cqc import dispatch, in_priority_order, lend_idle, water_fill
from spillway.control.load_manager import IntervalStats
from spillway.errors import ConfigError


@pytest.mark.parametrize(
    ("amount", "wants"),
    [(0.4, (0.1, 0.1, 0.1)), (0.4, (0.0, 0.05, 1.0)), (1.0, (0.5, 0.5, 0.5)), (0.0, (1, 1, 1))],
)
def test_water_fill_gives_min_of_amount_and_wants_never_more_than_wanted(amount, wants):
    got = water_fill(amount, (6, 3, 1), wants)
    assert math.fsum(got) == pytest.approx(min(amount, math.fsum(wants)))
    assert all(0.0 <= g <= w + 1e-12 for g, w in zip(got, wants, strict=True))


def test_water_fill_splits_by_priority_among_the_busy():
    got = water_fill(0.5, (6, 3, 1), (1.0, 1.0, 1.0))
    assert got == pytest.approx([0.3, 0.15, 0.05])


def test_only_classes_shedding_nothing_lend_and_only_shedding_classes_borrow():
    # class 1 idle 0.3; class 2 sheds while below capacity (draining a queue): lends nothing
    r = lend_idle(priorities=(6, 3, 1), capacities=(0.5, 0.3, 0.1),
                  loads=(0.2, 0.2, 0.4), drops=(0.0, 0.1, 0.75))  # fmt: skip
    assert r.idle == pytest.approx(0.3)
    assert r.lent[0] == 0.0 and r.drops[0] == 0.0
    assert r.lent[1] == pytest.approx(0.02) and r.drops[1] == pytest.approx(0.0)
    assert r.lent[2] == pytest.approx(0.28) and r.drops[2] == pytest.approx(0.75 - 0.28 / 0.4)


def test_no_idle_capacity_leaves_the_drops_alone():
    r = lend_idle(priorities=(6, 3, 1), capacities=(0.5, 0.3, 0.1),
                  loads=(0.5, 0.4, 0.4), drops=(0.0, 0.25, 0.75))  # fmt: skip
    assert r.idle == 0.0 and r.drops == (0.0, 0.25, 0.75)


def test_a_separate_manager_per_class_uses_the_idle_capacity_when_work_conserving():
    managers = (AuroraConfig(capacity=0.48), AuroraConfig(capacity=0.24),
                AuroraConfig(capacity=0.08))  # fmt: skip
    stats = [IntervalStats(interval_s=1.0, load=x) for x in (0.2, 0.2, 0.6)]
    for wc, class3 in ((False, 1 - 0.08 / 0.6), (True, 1 - (0.08 + 0.28 + 0.04) / 0.6)):
        cfg = ClassesConfig(managers=managers, priorities=(6, 3, 1), work_conserving=wc)
        _, d = step(cfg, initial_state(cfg), stats)
        assert d.drops == pytest.approx((0.0, 0.0, class3))
        assert d.decisions[2].drop == pytest.approx(1 - 0.08 / 0.6)  # the manager's own


@pytest.mark.parametrize("seed", range(200))
def test_priority_order_keeps_the_shed_load_and_never_lets_a_higher_class_lose_more(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5))
    prio = tuple(int(p) for p in rng.integers(1, 4, size=n))
    loads = tuple(float(x) for x in rng.choice([0.0, 0.1, 0.5, 1.0], size=n) * rng.random(n))
    drops = tuple(float(x) for x in rng.random(n) * (rng.random(n) < 0.7))
    r = in_priority_order(priorities=prio, loads=loads, drops=drops, max_drops=(0.99,) * n)
    before = math.fsum(min(d, 0.99) * x for d, x in zip(drops, loads, strict=True))
    after = math.fsum(d * x for d, x in zip(r.drops, loads, strict=True))
    assert after == pytest.approx(math.fsum(d * x for d, x in zip(drops, loads, strict=True)))
    assert after >= before - 1e-12
    assert math.fsum(r.handed) == pytest.approx(0.0, abs=1e-12)
    for k in range(n):
        for j in range(n):
            if prio[k] > prio[j] and loads[k] > 0 and loads[j] > 0 and r.drops[j] < 0.99:
                assert r.drops[k] <= r.drops[j] + 1e-12, (k, j)
    ordered = all(
        d_k <= d_j
        for k, d_k in enumerate(drops) for j, d_j in enumerate(drops)
        if prio[k] > prio[j] and loads[k] > 0 and loads[j] > 0
    )  # fmt: skip
    if ordered:
        assert r.drops == drops


def test_the_lowest_class_takes_a_higher_class_s_excess_first_up_to_its_highest_drop():
    r = in_priority_order(priorities=(6, 3, 1), loads=(1.0, 0.5, 0.5),
                          drops=(0.6, 0.1, 0.1), max_drops=(0.9, 0.9, 0.9))  # fmt: skip
    # class 1 hands 0.5 down: class 3 takes 0.4 (to 0.9), class 2 the other 0.1 (to 0.3),
    # then class 1 is at class 2's old 0.1
    assert r.drops == pytest.approx((0.1, 0.3, 0.9))
    assert r.handed == pytest.approx((-0.5, 0.1, 0.4))
    full = in_priority_order(priorities=(2, 1), loads=(1.0, 0.5),
                             drops=(0.8, 0.9), max_drops=(0.99, 0.9))  # fmt: skip
    assert full.drops == (0.8, 0.9)  # class 2 cannot take more: class 1 keeps its shedding
    nothing = in_priority_order(priorities=(2, 1), loads=(1.0, 0.5),
                                drops=(0.9, 0.9), max_drops=(0.99, 0.9))  # fmt: skip
    assert nothing.drops == (0.9, 0.9)
    same = in_priority_order(priorities=(1, 1), loads=(1.0, 1.0),
                             drops=(0.5, 0.0), max_drops=(0.99, 0.99))  # fmt: skip
    assert same.drops == (0.5, 0.0)  # equal priorities: no order between them


def test_classes_step_puts_the_managers_drops_in_priority_order_only_when_asked():
    managers = (AuroraConfig(capacity=0.1), AuroraConfig(capacity=0.3),
                AuroraConfig(capacity=0.4))  # fmt: skip
    stats = [IntervalStats(interval_s=1.0, load=0.2) for _ in range(3)]
    for order, drops in ((False, (0.5, 0.0, 0.0)), (True, (0.0, 0.0, 0.5))):
        cfg = ClassesConfig(managers=managers, priorities=(6, 3, 1), priority_order=order)
        _, d = step(cfg, initial_state(cfg), stats)
        assert d.drops == pytest.approx(drops)
        assert d.decisions[0].drop == pytest.approx(0.5)  # the manager's own
        assert d.handed == (pytest.approx((-0.1, 0.0, 0.1)) if order else ())


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: water_fill(-1.0, (1,), (1.0,)), "amount must be a finite number >= 0, got -1.0"),
        (lambda: water_fill(1.0, (1, 2), (1.0,)), "one entry per class: got 2 and 1"),
        (lambda: water_fill(1.0, (0,), (1.0,)), r"weights\[0\] must be a finite number > 0"),
        (lambda: water_fill(1.0, (1,), (-1.0,)), r"wants\[0\] must be a finite number >= 0"),
        (
            lambda: lend_idle(priorities=(1,), capacities=(1.0, 1.0), loads=(1.0,), drops=(0.0,)),
            "one entry per class: got 1, 2, 1 and 1",
        ),
        (
            lambda: lend_idle(priorities=(0,), capacities=(1.0,), loads=(1.0,), drops=(0.0,)),
            r"priorities\[0\] must be an int >= 1, got 0",
        ),
        (
            lambda: lend_idle(priorities=(1,), capacities=(1.0,), loads=(1.0,), drops=(1.5,)),
            r"drops\[0\] must be a finite number >= 0 and <= 1, got 1.5",
        ),
        (
            lambda: lend_idle(priorities=(1,), capacities=(1.0,), loads=(math.nan,), drops=(0,)),
            r"loads\[0\] must be a finite number >= 0, got nan",
        ),
        (
            lambda: ClassesConfig(managers=(AuroraConfig(),), priorities=(1,), work_conserving=1),
            "work_conserving must be true or false, got 1",
        ),
        (
            lambda: ClassesConfig(managers=(AuroraConfig(),), priorities=(1,), priority_order=0),
            "priority_order must be true or false, got 0",
        ),
        (
            lambda: in_priority_order(priorities=(1,), loads=(1.0,), drops=(0.0,), max_drops=()),
            "one entry per class: got 1, 1, 1 and 0",
        ),
        (
            lambda: in_priority_order(
                priorities=(1,), loads=(1.0,), drops=(0.0,), max_drops=(1.2,)
            ),  # fmt: skip
            r"max_drops\[0\] must be a finite number >= 0 and <= 1, got 1.2",
        ),
    ],
)
def test_errors(call, match):
    with pytest.raises(ConfigError, match=match):
        call()


# CQC's round robin over queued windows (dispatch): the class scheduler on lanes


def _rounds(queues, capacity, arrivals, n):
    """Run ``n`` intervals: each class gets ``arrivals[k]`` new windows of its size each
    interval; returns per interval the windows run and the queue lengths after."""
    q = [list(x) for x in queues]
    credit = None
    out = []
    for _ in range(n):
        for k, new in enumerate(arrivals):
            q[k].extend(new)
        d = dispatch(priorities=(6, 3, 1), capacity=capacity, queues=q, credit=credit)
        for k, m in enumerate(d.windows):
            del q[k][:m]
        credit = d.credit
        out.append((d, [len(x) for x in q]))
    return out


def test_a_batch_never_holds_more_than_the_capacity_and_what_was_carried():
    rng = np.random.default_rng(3)
    credit = [0.0, 0.0, 0.0]
    for _ in range(200):
        queues = [list(rng.uniform(0, 0.4, rng.integers(0, 6))) for _ in range(3)]
        cap = float(rng.uniform(0, 2))
        d = dispatch(priorities=(6, 3, 1), capacity=cap, queues=queues, credit=credit)
        assert math.fsum(d.used) <= cap + math.fsum(credit) + 1e-9
        for k in range(3):  # whole windows, oldest first
            assert d.used[k] == pytest.approx(math.fsum(queues[k][: d.windows[k]]))
        credit = list(d.credit)


def test_a_class_within_its_quota_runs_its_whole_queue_however_loaded_the_others_are():
    d = dispatch(priorities=(6, 3, 1), capacity=1.0, queues=((0.3, 0.25), (0.2,), (0.2,) * 40))
    assert d.windows[:2] == (2, 1)
    assert d.windows[2] == 1  # class 3: its 0.1 and the 0.15 the others left, one window


def test_work_conserving_idle_quota_goes_to_the_waiting_classes_by_priority():
    # class 1 idle: its 0.6 goes to classes 2 and 3 by 3:1 (0.45 and 0.15 more)
    d = dispatch(priorities=(6, 3, 1), capacity=1.0, queues=((), (0.25,) * 8, (0.05,) * 20))
    assert d.windows == (0, 3, 5)
    assert d.used[1] <= 0.3 + 0.45 + 1e-9 and d.used[2] <= 0.1 + 0.15 + 1e-9


def test_an_overloaded_class_waits_and_the_others_keep_their_latency():
    # class 3 brings 5 windows of 0.1 s an interval; its quota and what 1 and 2 leave run 4
    runs = _rounds(((), (), ()), 1.0, ([0.4], [0.2], [0.1] * 5), 30)
    for d, left in runs:
        assert d.windows[:2] == (1, 1) and left[:2] == [0, 0]  # classes 1, 2 never wait
    waits = [left[2] for _, left in runs]
    assert waits == list(range(1, 31))  # class 3's queue grows by a window an interval


def test_a_window_larger_than_a_quota_runs_once_the_credit_covers_it():
    runs = _rounds(((), (), (2.0,)), 1.0, ([0.6], [0.3], []), 30)
    ran = [i for i, (d, _) in enumerate(runs) if d.windows[2]]
    assert ran == [19]  # 0.1 a round, 20 rounds: no class starves
    assert runs[19][0].credit[2] == 0.0


def test_dispatch_refuses_a_queue_per_class_missing_or_a_negative_window():
    with pytest.raises(ConfigError, match="one queue per class"):
        dispatch(priorities=(6, 3, 1), capacity=1.0, queues=((), ()))
    with pytest.raises(ConfigError, match=r"queues\[1\]\[0\]"):
        dispatch(priorities=(6, 3), capacity=1.0, queues=((), (-0.1,)))
    with pytest.raises(ConfigError, match="capacity"):
        dispatch(priorities=(1,), capacity=math.nan, queues=((),))
