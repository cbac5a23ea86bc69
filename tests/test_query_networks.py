from __future__ import annotations

import pytest

from spillway.errors import ConfigError, UnknownNameError
from spillway.feeds.inputs import INPUTS
from spillway.query_networks import (
    NETWORKS,
    SETUPS,
    PriorityClass,
    QueryNetwork,
    SharedSegment,
    StreamQuery,
    inputs_for,
    qn_a,
    qn_b,
    qn_complex,
    qn_flat,
)

C1 = PriorityClass(name="c1", priority=6, target_intervals=3)
C3 = PriorityClass(name="c3", priority=1, target_intervals=5)


def test_qn_flat():
    n = qn_flat()
    assert n.operators == 10  # 8 + source + output
    assert n.classes[0].target_intervals == 4  # D = 2 s at T = 0.5 s


def test_qn_complex_has_1140_operators_in_60_sharing_groups():
    n = qn_complex()
    assert n.operators == 1140 and len(n.queries) == 240 and len(n.streams) == 60
    assert all(len(s.readers) == 4 and len(s.sources) == 1 for s in n.segments)
    assert qn_complex(groups=2).operators == 38


@pytest.mark.parametrize("shared", [False, True])
def test_qn_a_classes_and_queries(shared):
    n = qn_a(shared=shared)
    assert [(c.priority, c.target_intervals, c.paper_target_ms) for c in n.classes] == [
        (6, 3, 300.0),
        (3, 4, 400.0),
        (1, 5, 500.0),
    ]
    for klass in ("c1", "c2", "c3"):
        kinds = [q.kind for q in n.queries_of(klass)]
        assert (kinds.count("aggregate"), kinds.count("window_join"), kinds.count("select")) == (
            5,
            2,
            4,
        )
        assert len(n.streams_of(klass)) == 13  # Pham §6.2.2: class 3 has 13 stream sources
    assert len(n.segments) == (1 if shared else 0)


def test_qn_a_shared_segment_belongs_to_class_1_and_follows_class_3s_input():
    n = qn_a(shared=True)
    seg = n.segments[0]
    assert seg.owner == "c1" and seg.operators == 2 and len(seg.sources) == 2
    assert {q.split(".")[0] for q in seg.readers} == {"c1", "c3"}
    table = inputs_for(n, "SD_p")
    assert table["shared.s1"] == table["c3.s1"] == "SD_p-3"
    assert table["c1.s1"] == "SD_p-1" and table["c2.s1"] == "SD_p-2"
    assert set(inputs_for(n, "SD_c").values()) == {"SD_c"}
    assert inputs_for(n, "SD_r")["c1.s1"] == "SD_r-1"


def test_every_setup_names_known_inputs():
    for setup in SETUPS:
        for net in (qn_flat(), qn_a(shared=True)):
            if setup.startswith("S_") or setup == "SD_c" or net.name.startswith("qn-a"):
                assert set(inputs_for(net, setup).values()) <= set(INPUTS)


def test_qn_b_triples_class_1():
    n = qn_b()
    assert n.name == "qn-b" and len(n.queries_of("c1")) == 33 and len(n.queries_of("c3")) == 11
    assert set(NETWORKS) == {"qn-flat", "qn-complex", "qn-a", "qn-b"}


def test_round_trips_to_a_plain_dict():
    d = qn_a(shared=True).to_dict()
    assert d["segments"][0]["owner"] == "c1" and len(d["queries"]) == 33


@pytest.mark.parametrize(
    ("build", "exc", "match"),
    [
        (
            lambda: PriorityClass(name="", priority=1, target_intervals=1),
            ConfigError,
            "class name must be a non-empty string",
        ),
        (
            lambda: PriorityClass(name="c", priority=0, target_intervals=1),
            ConfigError,
            "class 'c' priority must be an int >= 1, got 0",
        ),
        (
            lambda: StreamQuery(name="q", klass="c1", kind="median", sources=("s",)),
            UnknownNameError,
            "query 'q': kind must be one of select",
        ),
        (
            lambda: StreamQuery(name="q", klass="c1", kind="window_join", sources=("s",)),
            ConfigError,
            r"query 'q' \(window_join\) reads 2 stream\(s\), got 1",
        ),
        (
            lambda: StreamQuery(name="q", klass="c1", kind="select", sources=()),
            ConfigError,
            "query 'q' must read at least one stream",
        ),
        (
            lambda: SharedSegment(
                name="g", owner="c1", sources=("s",), operators=1, readers=("a",)
            ),
            ConfigError,
            "segment 'g' must be read by at least 2 queries",
        ),
        (
            lambda: QueryNetwork(name="n", classes=(C1, C1), queries=()),
            ConfigError,
            r"duplicate class name\(s\) \['c1'\]",
        ),
        (
            lambda: QueryNetwork(
                name="n",
                classes=(C1,),
                queries=(StreamQuery(name="q", klass="c9", kind="select", sources=("s",)),),
            ),
            ConfigError,
            "query 'q': unknown class 'c9'",
        ),
        (
            lambda: QueryNetwork(
                name="n",
                classes=(C1, C3),
                queries=(
                    StreamQuery(name="a", klass="c1", kind="select", sources=("s",), segment="g"),
                    StreamQuery(name="b", klass="c3", kind="select", sources=("s",), segment="g"),
                ),
                segments=(
                    SharedSegment(
                        name="g", owner="c3", sources=("s",), operators=1, readers=("a", "b")
                    ),
                ),
            ),
            ConfigError,
            r"must belong to its highest-priority reader class 'c1' \(Pham §6.1.4\)",
        ),
        (
            lambda: QueryNetwork(
                name="n",
                classes=(C1,),
                queries=(
                    StreamQuery(name="a", klass="c1", kind="select", sources=("t",), segment="g"),
                    StreamQuery(name="b", klass="c1", kind="select", sources=("s",), segment="g"),
                ),
                segments=(
                    SharedSegment(
                        name="g", owner="c1", sources=("s",), operators=1, readers=("a", "b")
                    ),
                ),
            ),
            ConfigError,
            r"reader 'a' reads \('t',\), outside the segment's sources",
        ),
        (lambda: qn_complex(groups=0), ConfigError, "groups must be an int >= 1, got 0"),
        (lambda: inputs_for(qn_flat(), "SD_x"), UnknownNameError, "unknown input setup 'SD_x'"),
        (
            lambda: inputs_for(
                QueryNetwork(
                    name="n",
                    classes=(PriorityClass(name="x", priority=1, target_intervals=1),),
                    queries=(StreamQuery(name="q", klass="x", kind="select", sources=("s",)),),
                ),
                "SD_p",
            ),
            UnknownNameError,
            "input setup 'SD_p' has no input for class 'x'",
        ),
    ],
)
def test_errors(build, exc, match):
    with pytest.raises(exc, match=match):
        build()
