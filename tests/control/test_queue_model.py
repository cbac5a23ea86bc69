from __future__ import annotations

import math
import pickle

import pytest

from spillway.control.queue_model import (
    CapacitySchedule,
    ClassLoad,
    QueueModel,
    QueueModelConfig,
    _split,
)
from spillway.errors import ConfigError
from spillway.feeds.profiles import ConstantProfile


def one_class(rate=300.0, cost=0.005, capacity=1.0, noise=0.0, **kw) -> QueueModel:
    c = ClassLoad(profile=ConstantProfile(n_sources=1, rate=rate), cost_s=cost, target_s=2.0, **kw)
    return QueueModel(
        QueueModelConfig(classes=(c,), capacity=CapacitySchedule(base=capacity), load_noise=noise)
    )


def run(model, intervals, drops=(0.0,), state=None):
    state = state or model.initial_state()
    outs = []
    for _ in range(intervals):
        state, out = model.advance(state, drops)
        outs.append(out)
    return state, outs


def test_tuples_are_conserved():
    model = one_class(rate=400.0, cost=0.004)  # 1.6 CPU-s/s on 1.0
    state, outs = run(model, 20, drops=(0.25,))
    arrived = sum(o.stats[0].arrived for o in outs)
    dropped = sum(o.stats[0].dropped for o in outs)
    done = sum(o.metrics[0].results for o in outs)
    queued_tuples = sum(c[1] for c in state.queues[0])
    assert arrived == 4000 and dropped == 1000
    assert done + queued_tuples == pytest.approx(arrived - dropped)
    assert state.work[0] == pytest.approx(queued_tuples * 0.004)


def test_fifo_response_time_under_constant_overload():
    """1.5 CPU-s of work per second on 1.0: a tuple done at τ arrived at τ/1.5 (rt = τ/3)."""
    model = one_class()
    _, outs = run(model, 12)
    last = outs[-1]  # τ in [5.5, 6.0]: rt ≈ 5.75/3 plus latency and half a step
    assert last.stats[0].response_time_s == pytest.approx(5.75 / 3 + 0.02 + 0.025, abs=0.02)
    assert last.stats[0].queued_load == pytest.approx(0.5 * 6.0)


def test_no_queue_under_capacity_and_small_response_times():
    _, outs = run(one_class(rate=100.0), 10)
    assert all(o.stats[0].queued_load < 0.01 for o in outs[1:])
    assert max(o.stats[0].response_time_s for o in outs) < 0.05


def test_capacity_schedule_and_work_integral():
    c = CapacitySchedule.from_intervals(base=1.0, reduced=0.4, intervals=[(1.0, 2.0), (2.0, 3.0)])
    assert c.changes == ((1.0, 0.4), (3.0, 1.0))  # back-to-back intervals merge
    assert c.work(0.5, 3.5) == pytest.approx(0.5 + 0.8 + 0.5)
    forever = CapacitySchedule.from_intervals(base=1.0, reduced=0.5, intervals=[(4.0, math.inf)])
    assert forever.changes == ((4.0, 0.5),) and forever.at(1e6) == 0.5


def test_reduced_capacity_builds_a_queue():
    c = ClassLoad(profile=ConstantProfile(n_sources=1, rate=100.0), cost_s=0.008, target_s=1.0)
    model = QueueModel(
        QueueModelConfig(classes=(c,), capacity=CapacitySchedule(base=1.0, changes=((2.0, 0.4),)))
    )
    _, outs = run(model, 8)  # 0.8 of work per second: fine on 1.0, 0.4 s/s too much on 0.4
    assert outs[3].stats[0].queued_load < 0.01
    assert outs[7].stats[0].queued_load == pytest.approx(2.0 * 0.4, abs=0.02)
    assert outs[7].metrics[0].capacity == 0.4


def test_dropped_tuples_still_cost_and_fanout_multiplies_outputs():
    model = one_class(rate=200.0, cost=0.004, drop_cost_s=0.001, fanout=3.0)
    _, outs = run(model, 4, drops=(0.5,))
    s = outs[-1].stats[0]
    assert s.dropped == 50 and s.outputs == 3 * s.processed == 150
    assert s.load == pytest.approx(0.8)  # the raw load: every arrival at its full cost


def test_work_conserving_weighted_split():
    assert _split(1.0, [0.1, 5.0, 5.0], [6, 3, 1]) == pytest.approx([0.1, 0.675, 0.225])
    assert _split(1.0, [0.0, 0.0, 0.2], [6, 3, 1]) == pytest.approx([0.0, 0.0, 0.2])
    assert _split(1.0, [2.0, 2.0], [3, 1]) == pytest.approx([0.75, 0.25])


def test_load_noise_is_reproducible_and_bounded():
    a = run(one_class(noise=0.1), 30)[1]
    b = run(one_class(noise=0.1), 30)[1]
    loads = [o.stats[0].load for o in a]
    assert loads == [o.stats[0].load for o in b]
    assert len(set(loads)) > 20 and all(abs(x / 1.5 - 1) < 0.5 for x in loads)


def test_state_pickles_and_resumes_identically():
    model = one_class(rate=400.0)
    state, _ = run(model, 5, drops=(0.3,))
    again = pickle.loads(pickle.dumps(state))
    assert (
        run(model, 5, drops=(0.3,), state=state)[1] == run(model, 5, drops=(0.3,), state=again)[1]
    )


@pytest.mark.parametrize(
    ("drops", "shares", "match"),
    [
        ((0.1, 0.2), None, r"drops needs one fraction per class \(1\), got 2"),
        ((1.5,), None, r"drops\[0\] must be a finite number >= 0 and <= 1, got 1.5"),
        ((0.1,), (1.0, 1.0), r"shares needs one share per class \(1\), got 2"),
        ((0.1,), (0.0,), r"shares\[0\] must be a finite number > 0, got 0.0"),
    ],
)
def test_advance_errors(drops, shares, match):
    model = one_class()
    with pytest.raises(ConfigError, match=match):
        model.advance(model.initial_state(), drops, shares)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: CapacitySchedule(base=0.0), "capacity base must be a finite number > 0"),
        (
            lambda: CapacitySchedule(base=1.0, changes=((2.0, 0.5), (1.0, 0.7))),
            "capacity change times must be strictly increasing",
        ),
        (
            lambda: ClassLoad(
                profile=ConstantProfile(n_sources=1, rate=1.0), cost_s=0.0, target_s=1.0
            ),
            "cost_s must be a finite number > 0, got 0.0",
        ),
        (
            lambda: QueueModelConfig(classes=(), capacity=CapacitySchedule(base=1.0)),
            "classes must hold at least one ClassLoad, got none",
        ),
        (
            lambda: QueueModelConfig(
                classes=one_class().config.classes,
                capacity=CapacitySchedule(base=1.0),
                load_noise=0.9,
            ),
            r"load_noise must be a finite number >= 0 and <= 0.5, got 0.9",
        ),
    ],
)
def test_config_errors(build, match):
    with pytest.raises(ConfigError, match=match):
        build()
