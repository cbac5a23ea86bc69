"""The policy registry and make_policy (spillway.policies)."""

from __future__ import annotations

import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.policies import POLICIES, make_policy
from spillway.policies.balance_sic import BalanceSIC, BalanceSICConfig
from spillway.policies.base import Policy, PolicyConfig
from spillway.policies.random_shed import RandomShedding


def test_registry_holds_the_thesis_policies():
    assert POLICIES["random"] is RandomShedding
    assert POLICIES["balance-sic"] is BalanceSIC
    assert all(issubclass(cls, Policy) for cls in POLICIES.values())


def test_make_policy_passes_settings_and_configs():
    p = make_policy("balance-sic", seed=4, mode="exact")
    assert isinstance(p, BalanceSIC) and p.config == BalanceSICConfig(seed=4, mode="exact")
    cfg = BalanceSICConfig(seed=9, update_sic=False)
    assert make_policy("balance-sic", config=cfg).config is cfg


def test_unknown_name_lists_known_names_on_one_line():
    with pytest.raises(UnknownNameError, match=r"unknown policy 'fifo'; known policies: ") as e:
        make_policy("fifo")
    message = str(e.value)
    assert "\n" not in message and all(name in message for name in POLICIES)
    assert isinstance(e.value, KeyError) and isinstance(e.value, ConfigError)


def test_unhashable_name_is_an_unknown_name():
    with pytest.raises(UnknownNameError, match="unknown policy"):
        make_policy(["random"])  # type: ignore[arg-type]


def test_unknown_setting_names_the_valid_ones():
    with pytest.raises(
        ConfigError, match="policy 'balance-sic' has no setting speed; its settings"
    ):
        make_policy("balance-sic", speed=2)


def test_config_and_settings_together_are_refused():
    with pytest.raises(ConfigError, match="pass either a config or keyword settings"):
        make_policy("random", config=PolicyConfig(seed=1), seed=2)


def test_wrong_config_class_is_refused():
    with pytest.raises(ConfigError, match="BalanceSIC needs a BalanceSICConfig, got PolicyConfig"):
        make_policy("balance-sic", config=PolicyConfig())
