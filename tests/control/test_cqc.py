from __future__ import annotations

import math

import pytest

from spillway.control.aurora import AuroraConfig
from spillway.control.classes import ClassesConfig, initial_state, step
from spillway.control.cqc import lend_idle, water_fill
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
    ],
)
def test_errors(call, match):
    with pytest.raises(ConfigError, match=match):
        call()
