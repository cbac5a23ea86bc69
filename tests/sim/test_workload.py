"""THEMIS's complex workload and the placements."""

from __future__ import annotations

import numpy as np
import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.sim.workload import KINDS, WorkloadConfig, build, offered_load


def node_counts(d) -> np.ndarray:  # type: ignore[no-untyped-def]
    return np.bincount([f.node for q in d.queries for f in q.fragments], minlength=d.n_nodes)


def test_fixed_fragments_give_about_the_target() -> None:
    for k in range(1, 7):
        d = build(WorkloadConfig(n_nodes=18, n_fragments=2000, fragments=k))
        assert abs(d.n_fragments - 2000) <= k
        assert {len(q.fragments) for q in d.queries} == {k}


def test_mixed_fragments_cover_the_range() -> None:
    d = build(WorkloadConfig(n_nodes=18, n_fragments=2000, fragments=(1, 6), seed=4))
    assert 2000 <= d.n_fragments <= 2005
    assert {len(q.fragments) for q in d.queries} == set(range(1, 7))


def test_kinds_are_dealt_in_turn_with_their_shapes() -> None:
    d = build(WorkloadConfig(n_nodes=6, n_queries=9, fragments=3))
    assert [q.kind for q in d.queries[:3]] == ["avg_all", "top5", "cov"]
    for q in d.queries:
        spec = KINDS[q.kind]
        assert all(f.sources == spec.sources and f.rows_out == spec.rows_out for f in q.fragments)
        roots = [i for i, f in enumerate(q.fragments) if not f.downstream]
        assert len(roots) == 1
        if spec.shape == "tree":
            assert roots == [0] and all(f.downstream == (0,) for f in q.fragments[1:])
        else:
            assert roots == [2] and q.fragments[0].downstream == (1,)


def test_placements() -> None:
    bal = build(
        WorkloadConfig(n_nodes=10, n_fragments=2000, fragments=(1, 3), placement="balanced")
    )
    assert node_counts(bal).max() - node_counts(bal).min() <= 1
    zipf = build(WorkloadConfig(n_nodes=18, n_fragments=2000, fragments=1, placement="zipf"))
    load = node_counts(zipf)
    assert load[0] > 3 * load[-1]
    rnd = build(WorkloadConfig(n_nodes=18, n_fragments=2000, fragments=1, placement="random"))
    assert node_counts(rnd).max() < 2 * node_counts(rnd).min()
    for d in (bal, zipf, rnd):
        for q in d.queries:
            nodes = [f.node for f in q.fragments]
            assert len(set(nodes)) == len(nodes)


def test_seed_changes_the_deployment_and_repeats_it() -> None:
    a = build(WorkloadConfig(n_nodes=5, n_queries=20, fragments=(1, 3), seed=1))
    b = build(WorkloadConfig(n_nodes=5, n_queries=20, fragments=(1, 3), seed=1))
    c = build(WorkloadConfig(n_nodes=5, n_queries=20, fragments=(1, 3), seed=2))
    assert a == b and a != c


def test_offered_load() -> None:
    d = build(WorkloadConfig(n_nodes=3, n_queries=3, fragments=1, placement="balanced"))
    assert sorted(offered_load(d, 150.0).tolist()) == [300.0, 1500.0, 3000.0]


@pytest.mark.parametrize(
    ("kwargs", "err", "match"),
    [
        ({"n_nodes": 0}, ConfigError, "n_nodes must be an int >= 1"),
        ({"n_fragments": 10, "n_queries": 5}, ConfigError, "not both"),
        ({"n_queries": 0}, ConfigError, "n_queries must be an int >= 1"),
        ({"fragments": (3, 1)}, ConfigError, "1 <= lo <= hi"),
        ({"fragments": (1, 2, 3)}, ConfigError, "an int or a pair"),
        ({"fragments": 30}, ConfigError, "must not exceed n_nodes"),
        ({"kinds": ("avg",)}, UnknownNameError, "kinds must be among"),
        ({"placement": "round-robin"}, UnknownNameError, "placement must be one of"),
        ({"zipf_s": -1.0}, ConfigError, "zipf_s must be"),
        ({"capacity": 0.0}, ConfigError, "capacity must be"),
        ({"seed": -1}, ConfigError, "seed must be"),
    ],
)
def test_errors(kwargs: dict, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        WorkloadConfig(**kwargs)
