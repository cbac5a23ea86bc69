"""The contract every registered load manager keeps (spillway.control docstring)."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from spillway.control import LOAD_MANAGERS, IntervalStats, load_manager
from spillway.errors import ConfigError, UnknownNameError
from tests.control.plants import constant_node, run_one, settings_for

NAMES = sorted(LOAD_MANAGERS)


def stats_sequence(seed: int, n: int = 80) -> list[IntervalStats]:
    """Random but plausible statistics: loads around and above capacity, lagging delays."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        load = float(rng.uniform(0.0, 3.0))
        arrived = int(rng.integers(0, 400))
        rt = None if rng.random() < 0.1 else float(rng.uniform(0.0, 5.0))
        out.append(
            IntervalStats(
                interval_s=0.5,
                load=load,
                arrived=arrived,
                dropped=int(rng.integers(0, arrived + 1)),
                processed=int(rng.integers(0, 300)),
                outputs=int(rng.integers(0, 300)),
                queued_load=float(rng.uniform(0, 4)),
                response_time_s=rt,
            )
        )
    return out


def decisions(name, stats, state=None):
    lm = LOAD_MANAGERS[name]
    cfg = lm.config(**settings_for(name, 1.0))
    state = lm.initial_state(cfg) if state is None else state
    out = []
    for s in stats:
        state, d = lm.step(cfg, state, s)
        out.append(d)
    return state, out


@pytest.mark.parametrize("name", NAMES)
def test_registry_names_match(name):
    lm = LOAD_MANAGERS[name]
    assert lm.name == name == lm.config_class.name
    assert load_manager(name) is lm


def test_unknown_name_is_refused():
    with pytest.raises(UnknownNameError, match="unknown load manager 'x'; known: aloma"):
        load_manager("x")


@pytest.mark.parametrize("name", NAMES)
def test_config_round_trips_and_is_frozen(name):
    lm = LOAD_MANAGERS[name]
    cfg = lm.config(**settings_for(name, 0.9), max_drop=0.95)
    as_dict = dataclasses.asdict(cfg)
    assert lm.config(**as_dict) == cfg == type(cfg)(**as_dict)
    assert pickle.loads(pickle.dumps(cfg)) == cfg
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.capacity = 2.0  # type: ignore[misc]


@pytest.mark.parametrize("name", NAMES)
def test_unknown_setting_is_refused(name):
    with pytest.raises(ConfigError, match=f"load manager '{name}' has no setting headroom"):
        LOAD_MANAGERS[name].config(headroom=0.9)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("capacity", 0.0, "capacity must be a finite number"),
        ("capacity", float("nan"), "capacity must be a finite number"),
        ("max_drop", 0.0, r"max_drop must be a finite number > 0 and <= 1, got 0.0"),
        ("max_drop", 1.01, r"max_drop must be a finite number > 0 and <= 1, got 1.01"),
    ],
)
def test_common_settings_are_checked(name, field, value, match):
    with pytest.raises(ConfigError, match=match):
        LOAD_MANAGERS[name].config(**{field: value})


@pytest.mark.parametrize("name", NAMES)
def test_snapshot_restore_gives_identical_next_decisions(name):
    stats = stats_sequence(1)
    mid, _ = decisions(name, stats[:40])
    snap = pickle.loads(pickle.dumps(mid))
    _, first = decisions(name, stats[40:], mid)
    _, again = decisions(name, stats[40:], snap)
    assert first == again


@pytest.mark.parametrize("name", NAMES)
def test_a_drop_decided_ahead_is_the_drop_the_next_step_applies(name):
    # The Spark node counts the waiting arrivals at pending_drop (spark/load_control.py), so a
    # manager that reports one must shed them at it; one that decides at once reports none.
    lm = LOAD_MANAGERS[name]
    cfg = lm.config(**settings_for(name, 1.0))
    ahead = "retroactive" in {f.name for f in dataclasses.fields(cfg)}
    cfg = dataclasses.replace(cfg, retroactive=True) if ahead else cfg
    state, pending = lm.initial_state(cfg), []
    for s in stats_sequence(5):
        before = lm.pending_drop(cfg, state)
        state, d = lm.step(cfg, state, s)
        if before is not None:
            assert d.drop == before
            pending.append(before)
    assert (len(pending) == 79) if ahead else not pending  # every step after the first


@pytest.mark.parametrize("name", NAMES)
def test_same_input_same_decisions(name):
    stats = stats_sequence(2)
    assert decisions(name, stats)[1] == decisions(name, stats)[1]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [3, 4])
def test_drop_within_bounds_and_shed_within_load(name, seed):
    _, out = decisions(name, stats_sequence(seed, 200))
    lm = LOAD_MANAGERS[name]
    max_drop = lm.config(**settings_for(name, 1.0)).max_drop
    for d in out:
        assert 0.0 <= d.drop <= max_drop
        assert 0.0 <= d.shed_load <= d.load + 1e-12
        assert d.capacity > 0


@pytest.mark.parametrize("name", NAMES)
def test_nothing_shed_well_under_capacity(name):
    run = run_one(constant_node(0.4, capacity=1.0), name, 60.0, **settings_for(name, 1.0))
    assert max(run.traces[0].drop) == 0.0
    assert run.classes[0].dropped == 0


@pytest.mark.parametrize("name", NAMES)
def test_shedding_grows_with_load(name):
    mean_drop = []
    for load in (1.2, 1.6, 2.4):
        run = run_one(constant_node(load, capacity=1.0), name, 120.0, **settings_for(name, 1.0))
        tr = run.traces[0]
        late = [d for t, d in zip(tr.time_s, tr.drop, strict=True) if t > 60.0]
        mean_drop.append(sum(late) / len(late))
    assert 0 < mean_drop[0] < mean_drop[1] < mean_drop[2]


@pytest.mark.parametrize("name", NAMES)
def test_rescale_multiplies_the_capacity(name):
    lm = LOAD_MANAGERS[name]
    cfg = lm.config(capacity=0.6)
    state = lm.rescale(cfg, lm.initial_state(cfg), 1.5)
    assert lm.capacity_of(state) == pytest.approx(0.9)
    with pytest.raises(ConfigError, match="rescale factor must be a finite number > 0, got -1"):
        lm.rescale(cfg, state, -1)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("load", [1.25, 2.0])
def test_step_overload_converges_to_the_ideal_drop(name, load):
    """A step to a constant overload: in the long run exactly the excess ``1 − C/L`` is shed."""
    run = run_one(constant_node(load, capacity=1.0), name, 120.0, **settings_for(name, 1.0))
    tr = run.traces[0]
    late = [d for t, d in zip(tr.time_s, tr.drop, strict=True) if t > 60.0]
    assert sum(late) / len(late) == pytest.approx(1.0 - 1.0 / load, abs=0.02)
    assert tr.window_violation_s(60.0) <= 0.1 * 2.0
