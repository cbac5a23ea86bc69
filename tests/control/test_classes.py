from __future__ import annotations

import pickle

import pytest

from spillway.control.aloma import AlomaConfig
from spillway.control.aurora import AuroraConfig
from spillway.control.classes import ClassesConfig, initial_state, step
from spillway.control.dilos import DilosConfig
from spillway.control.load_manager import IntervalStats, LoadManagerConfig, combine_stats
from spillway.errors import ConfigError


def stats(*loads: float, rt: float | None = 0.1) -> list[IntervalStats]:
    return [IntervalStats(interval_s=0.15, load=x, response_time_s=rt) for x in loads]


def test_without_dilos_the_shares_stay_at_the_priorities():
    cfg = ClassesConfig(
        managers=(AlomaConfig(capacity=0.6), AlomaConfig(capacity=0.3), AlomaConfig(capacity=0.1)),
        priorities=(6, 3, 1),
    )
    state = initial_state(cfg)
    for _ in range(30):
        state, d = step(cfg, state, stats(0.1, 0.1, 0.5))
    assert d.shares == pytest.approx((0.6, 0.3, 0.1)) and not d.redistributed
    assert d.usage == pytest.approx(
        tuple(s.load / c for s, c in zip(stats(0.1, 0.1, 0.5), d.capacities, strict=True))
    )


def test_dilos_moves_capacity_every_crc_and_pushes_it_to_the_managers():
    cfg = ClassesConfig(
        managers=(
            AuroraConfig(capacity=0.6),
            AuroraConfig(capacity=0.3),
            AuroraConfig(capacity=0.1),
        ),
        priorities=(6, 3, 1),
        dilos=DilosConfig(priorities=(6, 3, 1), crc_cycles=10),
    )
    state = initial_state(cfg)
    flags = []
    for _ in range(20):
        state, d = step(cfg, state, stats(0.2, 0.2, 0.5))
        flags.append(d.redistributed)
    assert flags == [False] * 9 + [True] + [False] * 9 + [True]
    assert sum(d.shares) == pytest.approx(1.0)
    assert d.shares[2] > 0.4
    assert d.capacities == pytest.approx(d.shares)  # Aurora's H follows the share (Eq. 6.1)
    assert d.drops[0] == d.drops[1] == 0.0


def test_state_pickles_and_resumes_identically():
    cfg = ClassesConfig(
        managers=(AlomaConfig(capacity=0.5), AlomaConfig(capacity=0.5)),
        priorities=(1, 1),
        dilos=DilosConfig(priorities=(1, 1), crc_cycles=2),
    )
    state = initial_state(cfg)
    for i in range(5):
        state, _ = step(cfg, state, stats(0.2 + i / 10, 0.9, rt=0.1 * i + 0.05))
    copy = pickle.loads(pickle.dumps(state))
    seq = [stats(0.3, 1.2, rt=2.0), stats(0.2, 1.5, rt=3.0), stats(0.1, 0.4, rt=0.1)]
    a = [step(cfg, state, s)[1] for s in seq]
    b = [step(cfg, copy, s)[1] for s in seq]
    assert a == b


def test_combine_stats_for_a_common_manager():
    merged = combine_stats(stats(0.2, 0.3, rt=None))
    assert merged.load == pytest.approx(0.5) and merged.response_time_s is None
    with pytest.raises(ConfigError, match="combine_stats needs at least one IntervalStats"):
        combine_stats([])
    with pytest.raises(ConfigError, match=r"needs one interval length, got \[0.15, 1.0\]"):
        combine_stats([*stats(0.1), IntervalStats(interval_s=1.0, load=0.1)])


class Unregistered(LoadManagerConfig):
    pass


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"managers": (), "priorities": ()}, "managers must hold one load-manager config"),
        (
            {"managers": (AuroraConfig(),), "priorities": (1, 2)},
            r"priorities needs one priority per class \(1\), got 2",
        ),
        (
            {"managers": (AuroraConfig(),), "priorities": (0,)},
            r"priorities\[0\] must be an int >= 1, got 0",
        ),
        (
            {"managers": (Unregistered(),), "priorities": (1,)},
            "managers must be configs of registered load managers, got Unregistered",
        ),
        (
            {
                "managers": (AuroraConfig(),),
                "priorities": (2,),
                "dilos": DilosConfig(priorities=(1,)),
            },
            r"dilos.priorities \(1,\) must equal priorities \(2,\)",
        ),
    ],
)
def test_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        ClassesConfig(**kwargs)


def test_stats_per_class_are_required():
    cfg = ClassesConfig(managers=(AuroraConfig(),), priorities=(1,))
    with pytest.raises(ConfigError, match=r"stats needs one IntervalStats per class \(1\), got 2"):
        step(cfg, initial_state(cfg), stats(0.1, 0.2))
