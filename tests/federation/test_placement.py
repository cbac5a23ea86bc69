from __future__ import annotations

import pytest

from spillway.errors import ConfigError
from spillway.federation.config import load_federation
from spillway.federation.placement import all_topics, link_topic, node_links

EXAMPLE = "spillway/examples/federation.toml"


def test_the_example_federation_links_every_edge_once() -> None:
    fed = load_federation(EXAMPLE)
    topics = all_topics(fed)
    # avg-all: two leaves into root (2 partitions); top-5 and cov: one producer per consumer.
    assert topics == {
        "spillway-link.avg-all.root": 2,
        "spillway-link.top-5.last": 1,
        "spillway-link.cov.middle": 1,
        "spillway-link.cov.last": 1,
    }
    outs = [o for n in fed.nodes for o in node_links(fed, n).outputs]
    assert len(outs) == len(fed.layout().edge_from)
    assert sorted((o.topic, o.partition) for o in outs if "avg-all" in o.topic) == [
        ("spillway-link.avg-all.root", 0),
        ("spillway-link.avg-all.root", 1),
    ]
    assert all(o.share == 1.0 for o in outs)  # nothing replicated: SIC kept whole
    hosted = [f for n in fed.nodes for f in node_links(fed, n).fragments]
    assert len(hosted) == len(fed.layout().fragment_query)


def test_a_name_kafka_refuses_is_named() -> None:
    with pytest.raises(ConfigError, match="rename the query or fragment"):
        link_topic("my query", "root")
