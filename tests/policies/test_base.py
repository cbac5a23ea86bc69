"""What a policy tells the runtime it needs: needs_groups, needs_stats, sheds_always."""

from __future__ import annotations

import pytest

from spillway.policies import POLICIES, make_policy
from spillway.policies.base import Admission, Backlog, Policy, admit_all
from spillway.policies.cod import CoD
from spillway.policies.uniform import Uniform

FLAGS = ("needs_groups", "needs_stats", "sheds_always")


class KeepAll(Policy):
    def decide(self, backlog: Backlog, capacity: float) -> Admission:
        return admit_all(backlog)


def _flags(policy: Policy) -> tuple[bool, bool, bool]:
    return tuple(getattr(policy, f) for f in FLAGS)  # type: ignore[return-value]


def test_a_policy_needs_nothing_by_default_and_the_flags_are_read_only():
    p = KeepAll()
    assert _flags(p) == (False, False, False)
    for f in FLAGS:
        with pytest.raises(AttributeError):
            setattr(p, f, True)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_registered_policies_with_default_settings_are_asked_only_under_overload(name):
    policy = make_policy(name, seed=1)
    assert policy.sheds_always is False
    assert all(isinstance(v, bool) for v in _flags(policy))


@pytest.mark.parametrize(
    ("kind", "b", "flags"),
    [
        ("grouped", None, (True, False, False)),
        ("grouped", 0.98, (True, False, True)),
        ("join", 0.5, (True, False, True)),
        ("scalar", None, (False, True, False)),
        ("scalar", 0.0, (False, True, True)),
    ],
)
def test_cod_flags_follow_its_kind_and_shed_fraction(kind, b, flags):
    assert _flags(CoD(kind=kind, b=b)) == flags


def test_uniform_sheds_always_only_with_a_fixed_fraction():
    assert _flags(Uniform(b=0.9)) == (False, False, True)
    assert _flags(Uniform()) == (False, False, False)
