from __future__ import annotations

import math

import numpy as np
import pytest

from spillway.control.aurora import AuroraConfig
from spillway.control.classes import ClassesConfig, initial_state, step
from spillway.control.cqc import in_priority_order, lend_idle, water_fill
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
