from __future__ import annotations

import logging

import numpy as np
import pytest

from spillway.errors import ConfigError
from spillway.federation.update import NodeUpdate
from spillway.federation.view import CoordinatorView
from spillway.quality.sic import StwConfig

_STW = StwConfig(stw_s=4.0, slide_s=1.0)


def _update(as_of: float, sic=(0.9, 0.2), queries=(1, 4), ceiling=(1.0, 1.0)) -> NodeUpdate:
    return NodeUpdate(node=0, as_of=as_of, queries=np.array(queries), sic=np.array(sic),
                      ceiling=np.array(ceiling), lost_nodes=(),
                      orphaned=np.array([], dtype=np.int64))  # fmt: skip


def test_the_base_is_the_update_projected_over_the_nodes_own_admissions() -> None:
    view = CoordinatorView([4, 1], _STW, stale_s=3.0, lag_s=1.0)
    view.receive(_update(10.0))
    for t in range(8, 12):
        view.record(float(t), [0.05, 0.0])
    got = view.base(12.0)
    assert got is not None
    # query 4: 0.2 + own [8,12) 0.2 - own [5,9) 0.05; query 1: 0.9 unchanged
    np.testing.assert_allclose(got.base, [0.35, 0.9])
    assert view.counters() == {"used": 1, "fallbacks": 0, "local": 0, "failures": 0}


def test_a_ceiling_divides_the_base() -> None:
    view = CoordinatorView([4], _STW, stale_s=3.0)
    view.receive(_update(10.0, ceiling=(1.0, 0.5)))
    got = view.base(10.0)
    assert got is not None and got.base.tolist() == [0.4] and got.ceiling.tolist() == [0.5]


def test_no_update_or_a_stale_one_falls_back_counted_and_logged_once(caplog) -> None:
    view = CoordinatorView([1, 4], _STW, stale_s=2.0)
    with caplog.at_level(logging.WARNING, logger="spillway.federation"):
        assert view.base(5.0) is None
        view.receive(_update(10.0))
        assert view.base(12.0) is not None  # 2 s old: still counts
        assert view.base(12.5) is None  # older than stale_s
        assert view.base(13.0) is None
    assert view.counters() == {"used": 1, "fallbacks": 3, "local": 0, "failures": 0}
    falls = [r for r in caplog.records if "local view" in r.getMessage()]
    assert len(falls) == 1 and "no update" in falls[0].getMessage()


def test_an_unreachable_coordinator_is_counted_and_logged_once(caplog) -> None:
    view = CoordinatorView([1], _STW, stale_s=2.0)
    with caplog.at_level(logging.WARNING, logger="spillway.federation"):
        view.unreachable("connection refused")
        view.unreachable("connection refused")
    assert view.failures == 2
    assert sum("unreachable" in r.getMessage() for r in caplog.records) == 1


def test_an_older_update_does_not_replace_a_newer_one() -> None:
    view = CoordinatorView([1], _STW, stale_s=2.0)
    view.receive(_update(10.0, sic=(0.5, 0.1)))
    view.receive(_update(9.0, sic=(0.1, 0.1)))
    assert view.update is not None and view.update.as_of == 10.0


def test_bad_settings_and_updates_are_refused() -> None:
    with pytest.raises(ConfigError, match="stale_s must be a finite number of seconds > 0"):
        CoordinatorView([0], _STW, stale_s=0.0)
    with pytest.raises(ConfigError, match="query_ids must list each local query's global"):
        CoordinatorView([-1], _STW, stale_s=1.0)
    view = CoordinatorView([2], _STW, stale_s=1.0)
    with pytest.raises(ConfigError, match="update must be a NodeUpdate"):
        view.receive({"sic": [0.1]})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="query 2 has no fragment on node 0"):
        view.receive(_update(1.0))


def test_an_uncoordinated_view_never_balances_the_update_nor_orphans() -> None:
    """``coordinated = false`` (THEMIS Fig. 4, top): the node keeps the coordinator's updates
    but every decision balances its local view; counted as local, not as fallbacks."""
    view = CoordinatorView([1, 4], _STW, stale_s=3.0, fragment_ids=[0, 2], coordinated=False)
    u = NodeUpdate(node=0, as_of=10.0, queries=np.array([1, 4]), sic=np.array([0.9, 0.2]),
                   ceiling=np.array([1.0, 1.0]), lost_nodes=(2,), orphaned=np.array([2]))  # fmt: skip
    view.receive(u)
    assert view.update is u
    assert view.base(10.5) is None and view.base(11.0) is None
    assert view.orphaned(10.5).tolist() == [False, False]
    assert view.counters() == {"used": 0, "fallbacks": 0, "local": 2, "failures": 0}
    coordinated = CoordinatorView([1, 4], _STW, stale_s=3.0, fragment_ids=[0, 2])
    coordinated.receive(u)  # the same update, coordinated: balanced, and fragment 2 orphaned
    assert coordinated.base(10.5) is not None
    assert coordinated.orphaned(10.5).tolist() == [False, True]
    with pytest.raises(ConfigError, match="coordinated must be True or False"):
        CoordinatorView([1], _STW, stale_s=3.0, coordinated="no")  # type: ignore[arg-type]
