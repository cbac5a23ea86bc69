"""Query kinds a node config accepts: every registered Spark kind, GROUP-AVG included."""

from __future__ import annotations

import pytest

from spillway.config import DEFAULT_SOURCES, USER_KIND, NodeConfig, QuerySpec, load_config
from spillway.errors import ConfigError, UnknownNameError


def test_the_config_kinds_are_the_registered_query_kinds():
    from spillway.spark.exact import METRICS
    from spillway.spark.queries import QUERIES

    assert set(DEFAULT_SOURCES) - {USER_KIND} == set(QUERIES) == set(METRICS)
    assert DEFAULT_SOURCES["group_avg"] == 1


def test_a_group_avg_query_round_trips_and_loads_from_toml(tmp_path):
    q = QuerySpec(
        name="fares",
        kind="group_avg",
        feed="taxi",
        rate=5000.0,
        feed_options={"n_routes": 30, "pool_routes": 20, "pool_share": 0.4},
    )
    assert (
        q.n_sources == 1
        and QuerySpec(name="q", kind="group_avg", feed="x", sources=3).n_sources == 3
    )
    cfg = NodeConfig(queries=(q,))
    assert NodeConfig.from_dict(cfg.to_dict()) == cfg
    common = NodeConfig(queries=(q,), policy="dilos", load_manager="aurora",
                        class_redistribution=False, class_layout="common")  # fmt: skip
    assert common.class_control().layout == "common"
    assert NodeConfig.from_dict(common.to_dict()) == common
    with pytest.raises(ConfigError, match="dilos .* needs layout 'per-class'"):
        NodeConfig(queries=(q,), policy="dilos", load_manager="aurora", class_layout="none")
    path = tmp_path / "node.toml"
    path.write_text(
        '[[query]]\nname = "fares"\nkind = "group_avg"\nfeed = "taxi"\nrate = 5000.0\n'
        "[query.feed_options]\nn_routes = 30\npool_routes = 20\npool_share = 0.4\n"
    )
    assert load_config(path) == cfg


def test_an_unknown_kind_lists_group_avg():
    with pytest.raises(UnknownNameError, match=r"one of avg, avg_all, count, cov, group_avg, max"):
        QuerySpec(name="q", kind="group_mean", feed="taxi")


def test_policy_options_reach_the_policy_and_are_checked_when_read(tmp_path):
    from spillway.config import load_config
    from spillway.errors import ConfigError

    path = tmp_path / "node.toml"
    path.write_text(
        'policy = "cod"\nseed = 4\npolicy_options = { b = 0.97 }\n'
        '[[query]]\nname = "fares"\nkind = "group_avg"\nfeed = "taxi"\n'
    )
    cfg = load_config(path)
    policy = cfg.make_policy()
    assert (policy.config.b, policy.config.seed, policy.sheds_always) == (0.97, 4, True)
    assert NodeConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="policy 'random' has no setting b"):
        load_config(path, policy="random")
    with pytest.raises(
        ConfigError, match=r"b is the fraction of tuples shed and must be in \[0, 1\]"
    ):
        load_config(path, policy_options={"b": 1.5})
    with pytest.raises(ConfigError, match="policy_options must be a table"):
        NodeConfig(queries=cfg.queries, policy_options=[("b", 0.9)])


def test_a_user_query_loads_from_toml_with_its_function_and_sink(tmp_path):
    path = tmp_path / "node.toml"
    path.write_text(
        '[[query]]\nname = "fares"\nkind = "user"\nfeed = "taxi"\n'
        'function = "queries.py:mean_fare"\n'
        '[query.sink]\nkind = "parquet"\npath = "out/fares"\n'
    )
    q = load_config(path).queries[0]
    # the function's file is found beside the config file
    assert (q.kind, q.function) == ("user", f"{tmp_path}/queries.py:mean_fare")
    assert q.sink == {"kind": "parquet", "path": "out/fares"}
    assert NodeConfig.from_dict(NodeConfig(queries=(q,)).to_dict()).queries[0] == q


def test_a_callable_function_and_sink_are_named_in_the_configs_dict():
    def mean_fare(rows):
        return rows

    q = QuerySpec(name="q", kind="user", feed="taxi", function=mean_fare, sink=print)
    d = NodeConfig(queries=(q,)).to_dict()["queries"][0]
    assert d["function"].endswith(
        ":test_a_callable_function_and_sink_are_named_in_the_configs_dict.<locals>.mean_fare"
    )
    assert d["sink"] == "builtins:print"


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"kind": "user"}, "a user query needs a function"),
        ({"kind": "user", "function": "no_colon"}, "function must be a callable or"),
        (
            {"kind": "user", "function": "m:f", "sink": "parquet"},
            "sink must be a table with a kind",
        ),
        ({"kind": "user", "function": "m:f", "sink": {"path": "x"}}, "sink must be a table"),
        ({"kind": "avg", "function": "m:f"}, "function only apply to kind = 'user'"),
        ({"kind": "avg", "sink": {"kind": "console"}}, "sink only apply to kind = 'user'"),
    ],
)
def test_function_and_sink_belong_to_user_queries(kw, match):
    with pytest.raises(ConfigError, match=match):
        QuerySpec(name="q", feed="taxi", **kw)


def test_the_step_example_steps_every_query_from_half_to_three_times_the_capacity():
    from pathlib import Path

    import spillway

    cfg = load_config(Path(spillway.__file__).parent / "examples" / "step_random.toml")
    cfg.check_feeds()
    assert cfg.policy == "random" and cfg.overload == 0.5
    assert {q.kind for q in cfg.queries} == {"avg", "max", "count", "avg_all", "top5", "cov"}
    for q in cfg.queries:
        assert q.profile == "step"
        assert [cfg.overload * f for f in q.profile_options["factors"]] == [1.0, 3.0]


def test_load_manager_settings_are_checked_when_the_config_is_made():
    qs = (QuerySpec(name="q", kind="avg", feed="gaussian"),)
    assert NodeConfig(queries=qs).load_control() is None
    lc = NodeConfig(queries=qs, load_manager="ctrl", load_manager_options={"capacity": 0.7})
    assert lc.load_control().settings == {"capacity": 0.7}
    with pytest.raises(ConfigError, match="load_manager_options are set but load_manager is not"):
        NodeConfig(queries=qs, load_manager_options={"capacity": 0.7})
    with pytest.raises(ConfigError, match="load_manager_options must be a table"):
        NodeConfig(queries=qs, load_manager="ctrl", load_manager_options=0.7)  # type: ignore[arg-type]
    with pytest.raises(UnknownNameError, match="unknown load manager 'pid'"):
        NodeConfig(queries=qs, load_manager="pid")
    with pytest.raises(ConfigError, match="target_intervals must be a finite number > 0"):
        NodeConfig(queries=qs, load_manager="aloma", load_target_intervals=0)


def test_priority_classes_need_the_dilos_policy_and_a_load_manager():
    q = QuerySpec(name="q", kind="avg", feed="gaussian", priority_class=2)
    with pytest.raises(ConfigError, match=r"priority_class must be an int >= 1 \(1 = highest\)"):
        QuerySpec(name="q", kind="avg", feed="gaussian", priority_class=0)
    with pytest.raises(ConfigError, match=r"sic_sources must be an int >= 1 \(the sources of"):
        QuerySpec(name="q", kind="avg", feed="gaussian", sic_sources=0)
    with pytest.raises(ConfigError, match="set priority_class but the policy is 'random'"):
        NodeConfig(queries=(q,), policy="random")
    with pytest.raises(ConfigError, match='policy "dilos" runs one load manager per priority'):
        NodeConfig(queries=(q,), policy="dilos")
    with pytest.raises(ConfigError, match=r"query_class\[0\] must be a class from 1 to 1"):
        NodeConfig(
            queries=(q,),
            policy="dilos",
            load_manager="aloma",
            class_weights=(1,),
            class_target_intervals=(3,),
        )
    cfg = NodeConfig(
        queries=(q,),
        policy="dilos",
        load_manager="ctrl",
        class_redistribution=False,
        load_manager_options={"capacity": 0.5},
    )
    assert cfg.load_control() is None
    cc = cfg.class_control()
    assert cc.manager == "ctrl" and not cc.dilos and cc.settings == {"capacity": 0.5}
    assert NodeConfig.from_dict(cfg.to_dict()) == cfg
