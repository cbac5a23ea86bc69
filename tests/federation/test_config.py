from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spillway.errors import ConfigError, InputDataError
from spillway.federation.config import FederationConfig, FragmentEntry, load_federation

EXAMPLE = Path(__file__).resolve().parents[2] / "spillway" / "examples" / "federation.toml"


def _fed(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "nodes": [{"name": "a"}, {"name": "b"}],
        "queries": [
            {
                "name": "q",
                "fragments": [
                    {"name": "leaf", "node": "a", "sources": 2, "to": ["root"]},
                    {"name": "root", "node": "b", "sources": 2},
                ],
            }
        ],
    }
    data.update(over)
    return data


def test_the_shipped_example_is_three_nodes_of_the_complex_workload() -> None:
    fed = load_federation(EXAMPLE)
    layout = fed.layout()
    assert fed.nodes == ("a", "b", "c")
    assert [q.name for q in fed.queries] == ["avg-all", "top-5", "cov"]
    assert layout.n_fragments == 8
    assert layout.root.tolist() == [True, False, False, False, True, False, False, True]
    assert layout.query_sources.tolist() == [30, 40, 6]
    assert fed.coordinator().stw.stw_s == 10.0
    assert fed.coordinator().timeout_s == 1.0
    assert [(q.kind, q.feed) for q in fed.queries] == [
        ("avg_all", "cluster"), ("top5", "cluster"), ("cov", "cluster")
    ]  # fmt: skip
    assert FederationConfig.from_dict(fed.to_dict()) == fed
    assert fed.node_index("c") == 2
    assert fed.coordinated is True  # the shipped example: coordinated BALANCE-SIC everywhere
    assert fed.policies == ("balance-sic",) * 3


def test_a_node_names_its_policy_and_coordination_can_be_switched_off() -> None:
    fed = FederationConfig.from_dict(
        _fed(nodes=[{"name": "a", "policy": "random"}, {"name": "b"}],
             coordinator={"coordinated": False})
    )  # fmt: skip
    assert fed.policy_of("a") == "random" and fed.policy_of("b") == "balance-sic"
    assert fed.coordinated is False
    again = FederationConfig.from_dict(fed.to_dict())
    assert again == fed and again.to_dict()["coordinator"]["coordinated"] is False
    assert again.to_dict()["nodes"] == [
        {"name": "a", "policy": "random"}, {"name": "b", "policy": "balance-sic"}
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="node must be one of a, b, got 'z'"):
        fed.policy_of("z")


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (_fed(extra={}), r"unknown tables \['extra'\]"),
        (_fed(coordinator={"stw": 1}), r"\[coordinator\] has unknown keys \['stw'\]"),
        (_fed(coordinator={"timeout_s": 0}), "timeout_s must be a finite number > 0"),
        (_fed(coordinator={"lag_s": 20.0}), "lag_s is no longer used: each query's STW ends"),
        (_fed(coordinator={"stw_s": "10"}), "coordinator stw_s must be a number of seconds"),
        (_fed(nodes=[]), "nodes must be a non-empty list of tables"),
        (
            _fed(nodes=[{"name": "a", "cores": 2}]),
            "nodes\\[0\\] must have the key 'name' and may have 'policy'",
        ),
        (
            _fed(nodes=[{"name": "a", "cpu": 0}, {"name": "b"}]),
            r"nodes\[0\].cpu must be a number of cores > 0 \(e.g. 0.5\), got 0",
        ),
        (
            _fed(nodes=[{"name": "a"}, {"name": "b", "cpu": "half"}]),
            r"nodes\[1\].cpu must be a number of cores > 0",
        ),
        (
            _fed(nodes=[{"name": "a", "policy": "fifo"}, {"name": "b"}]),
            r"nodes\[0\].policy must be one of balance-sic, cod, dilos, random, uniform; got 'fifo'",
        ),
        (
            _fed(nodes=[{"name": "a"}, {"name": "b", "policy": ["random"]}]),
            r"nodes\[1\].policy must be one of",
        ),
        (_fed(coordinator={"coordinated": "no"}), "coordinated must be true or false, got 'no'"),
        (_fed(nodes=[{"name": "a"}, {"name": "a"}]), r"node names must be unique, got \['a'\]"),
        (_fed(queries=[{"name": "q", "fragments": []}]), "fragments must be a non-empty list"),
        (
            _fed(queries=[{"name": "q", "fragments": [{"name": "f", "node": "a", "sources": -1}]}]),
            "fragment 'f' sources must be an int >= 0",
        ),
        (
            _fed(queries=[{"name": "q", "fragments": [{"name": "f", "node": "a", "cpu": 1}]}]),
            r"queries\[0\].fragments\[0\] has unknown keys \['cpu'\]",
        ),
        (
            _fed(
                queries=[
                    {
                        "name": "q",
                        "fragments": [{"name": "f", "node": "a", "sources": 1, "to": "g"}],
                    }
                ]
            ),
            r"queries\[0\].fragments\[0\].to must be a list",
        ),
        (
            _fed(
                queries=[
                    {
                        "name": "q",
                        "fragments": [{"name": "f", "node": "a", "sources": 1, "to": ["g"]}],
                    }
                ]
            ),
            r"sends to \['g'\], which are not fragments of the query",
        ),
        (
            _fed(
                queries=[
                    {
                        "name": "q",
                        "fragments": [
                            {"name": "f", "node": "a", "sources": 1},
                            {"name": "f", "node": "b", "sources": 1},
                        ],
                    }
                ]
            ),
            r"names fragments \['f'\] more than once",
        ),
        (
            _fed(
                queries=[
                    {"name": "q", "fragments": [{"name": "f", "node": "a", "sources": 1}]},
                    {"name": "q", "fragments": [{"name": "f", "node": "a", "sources": 1}]},
                ]
            ),
            "queries must list uniquely named queries",
        ),
        (
            _fed(queries=[{"name": "q", "fragments": [{"name": "f", "node": "a", "sources": 0}]}]),
            "query 0 reads no source",
        ),
        (
            _fed(
                queries=[
                    {
                        "name": "q",
                        "fragments": [
                            {"name": "f", "node": "a", "sources": 1, "to": ["g"]},
                            {"name": "g", "node": "b", "sources": 1, "to": ["f"]},
                        ],
                    }
                ]
            ),
            "must not form a cycle",
        ),
        (
            _fed(
                queries=[
                    {
                        "name": "q",
                        "rate": 0,
                        "fragments": [{"name": "f", "node": "a", "sources": 1}],
                    }
                ]
            ),
            "query 'q' rate must be a number > 0",
        ),  # fmt: skip
        (
            _fed(
                queries=[
                    {
                        "name": "q",
                        "kind": "",
                        "fragments": [{"name": "f", "node": "a", "sources": 1}],
                    }
                ]
            ),
            "query 'q' kind must be a non-empty text",
        ),  # fmt: skip
    ],
)
def test_each_rule_names_what_is_wrong(data: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        FederationConfig.from_dict(data)


def test_entries_check_their_own_fields() -> None:
    with pytest.raises(ConfigError, match="fragment name must be a non-empty text"):
        FragmentEntry(name="", node="a", sources=1)
    with pytest.raises(ConfigError, match="to must be a list of fragment names"):
        FragmentEntry(name="f", node="a", sources=1, to="g")  # type: ignore[arg-type]
    fed = FederationConfig.from_dict(_fed())
    with pytest.raises(ConfigError, match="node must be one of a, b, got 'z'"):
        fed.node_index("z")


def test_unreadable_or_invalid_files_are_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputDataError, match="cannot read federation file"):
        load_federation(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[[nodes]\n")
    with pytest.raises(InputDataError, match="is not valid TOML"):
        load_federation(bad)


def test_a_nodes_cpu_limit_is_read_and_round_trips() -> None:
    fed = FederationConfig.from_dict(_fed(nodes=[{"name": "a", "cpu": 0.5}, {"name": "b"}]))
    assert fed.cpus == (0.5, None)
    assert (fed.cpu_of("a"), fed.cpu_of("b")) == (0.5, None)
    assert FederationConfig.from_dict(fed.to_dict()) == fed
    assert fed.to_dict()["nodes"] == [
        {"name": "a", "policy": "balance-sic", "cpu": 0.5},
        {"name": "b", "policy": "balance-sic"},
    ]


def test_a_nodes_probes_are_read_round_trip_and_reach_its_node_config() -> None:
    from spillway.kafka.connection import KafkaConnection
    from spillway.spark.fed_node import node_config

    fed = FederationConfig.from_dict(_fed(nodes=[{"name": "a", "probe_every": 4}, {"name": "b"}]))
    assert fed.probes == (4, 0) and fed.probe_every_of("a") == 4
    assert FederationConfig.from_dict(fed.to_dict()) == fed
    assert fed.to_dict()["nodes"][0] == {"name": "a", "policy": "balance-sic", "probe_every": 4}
    conn = KafkaConnection(bootstrap_servers="127.0.0.1:9")
    assert [node_config(fed, n, conn)[0].probe_every for n in ("a", "b")] == [4, 0]
    with pytest.raises(ConfigError, match=r"nodes\[1\].probe_every must be an int >= 0, got -1"):
        FederationConfig.from_dict(_fed(nodes=[{"name": "a"}, {"name": "b", "probe_every": -1}]))
