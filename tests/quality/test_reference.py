"""Tests of the exact reference evaluator (THEMIS Fig. 2, DISSP Figs. 3.7-3.9, conservation)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spillway.errors import ConfigError
from spillway.quality.reference import Batch, Operator, OperatorGraph, Source

F = Fraction
NOT_A_FANOUT: Any = "copy"

# --- THEMIS Fig. 2 (§4, the worked SIC example) ---------------------------------------------


def _fig2(c_out: int = 2) -> OperatorGraph:
    return OperatorGraph(
        [
            Source(name="s1", n_tuples=4),
            Source(name="s2", n_tuples=2),
            Operator(name="b", inputs=("s1",), n_out=2),
            Operator(name="c", inputs=("s2",), n_out=c_out),
            Operator(name="a", inputs=("b", "c"), n_out=2),
        ]
    )


def test_themis_fig2_without_shedding_is_exactly_one() -> None:
    ev = _fig2().evaluate()
    assert ev.source_sic == {"s1": F(1, 8), "s2": F(1, 4)}
    assert ev.outputs["b"] == Batch(2, F(1, 2)) and ev.outputs["b"].per_row == F(1, 4)
    assert ev.outputs["c"].per_row == F(1, 4)
    assert ev.received["a"] == Batch(4, F(1))
    assert list(ev.results) == ["a"]
    assert ev.results["a"].n == 2 and ev.results["a"].per_row == F(1, 2)
    assert ev.query_sic == 1 and isinstance(ev.query_sic, Fraction)
    # Eq. 2 and Eq. 4 agree: sum over source tuples = sum over results.
    assert 4 * ev.source_sic["s1"] + 2 * ev.source_sic["s2"] == ev.query_sic


def test_themis_fig2_shedding_c_input_gives_one_half() -> None:
    ev = _fig2().evaluate(shed={("s1", "b"): 2, ("s2", "c"): 1})
    assert ev.received["b"] == Batch(2, F(1, 4))
    assert ev.received["c"] == Batch(1, F(1, 4))
    assert ev.query_sic == F(1, 2)
    assert ev.results["a"].per_row == F(1, 4)
    # Eq. 2 from the surviving source tuples: 0.125 + 0.125 + 0.25.
    assert F(1, 8) + F(1, 8) + F(1, 4) == ev.query_sic


def test_themis_fig2_shedding_a_derived_tuple_of_c_gives_one_half() -> None:
    # The paper's other reading: c processes both inputs but one of its outputs is shed, so
    # "one of the input source tuples of c does not contribute to the result".
    ev = _fig2().evaluate(shed={("s1", "b"): 2, ("c", "a"): 1})
    assert ev.received["c"] == Batch(2, F(1, 2))
    assert ev.edges[("c", "a")] == Batch(1, F(1, 4))
    assert ev.query_sic == F(1, 2)


def test_evaluator_float_mode() -> None:
    ev = _fig2().evaluate(shed={("s1", "b"): 2, ("s2", "c"): 1}, exact=False)
    assert isinstance(ev.query_sic, float) and ev.query_sic == pytest.approx(0.5)


# --- DISSP worked examples (Fiscato §3.5) -----------------------------------------------------


def _fig37(normalise: bool) -> OperatorGraph:
    return OperatorGraph(
        [
            Source(name="src1", n_tuples=2),
            Source(name="src2", n_tuples=4),
            Source(name="src3", n_tuples=3),
            Operator(name="avg1", inputs=("src1",), n_out=1),
            Operator(name="avg2", inputs=("src2",), n_out=1),
            Operator(name="avg3", inputs=("src3",), n_out=1),
            Operator(name="max", inputs=("avg1", "avg2", "avg3"), n_out=1),
        ],
        normalise=normalise,
    )


def test_dissp_fig37_fan_in_unnormalised() -> None:
    g = _fig37(normalise=False)
    ev = g.evaluate()
    assert ev.source_sic == {"src1": F(1, 2), "src2": F(1, 4), "src3": F(1, 3)}
    assert [ev.outputs[f"avg{i}"].total for i in (1, 2, 3)] == [1, 1, 1]
    assert ev.query_sic == 3
    lost = g.evaluate(shed={("src2", "avg2"): 1})
    assert lost.outputs["avg2"].total == F(3, 4)
    assert lost.query_sic == F(11, 4)


def test_dissp_fig37_fan_in_normalised() -> None:
    g = _fig37(normalise=True)
    assert g.evaluate().query_sic == 1
    assert g.evaluate(shed={("src2", "avg2"): 1}).query_sic == F(11, 12)


def test_dissp_fig38_split_computation() -> None:
    g = OperatorGraph(
        [
            Source(name="twitter", n_tuples=300),
            Operator(name="split", inputs=("twitter",), n_out=None, fanout="partition"),
            Operator(name="nlp1", inputs=("split",)),
            Operator(name="nlp2", inputs=("split",)),
            Operator(name="nlp3", inputs=("split",)),
            Operator(name="top10", inputs=("nlp1", "nlp2", "nlp3"), n_out=lambda n: min(10, n)),
        ]
    )
    ev = g.evaluate()
    for i in (1, 2, 3):
        assert ev.edges[("split", f"nlp{i}")] == Batch(100, F(1, 3))
        assert ev.edges[("split", f"nlp{i}")].per_row == F(1, 300)
        assert ev.outputs[f"nlp{i}"].per_row == F(1, 300)
    assert ev.results["top10"].n == 10 and ev.results["top10"].per_row == F(1, 10)
    assert ev.query_sic == 1


def _fig39(fanout: Literal["replicate", "partition"] = "replicate") -> OperatorGraph:
    return OperatorGraph(
        [
            Source(name="twitter", n_tuples=3),
            Operator(name="keyword", inputs=("twitter",), n_out=2, fanout=fanout),
            Operator(name="positive", inputs=("keyword",), n_out=1),
            Operator(name="negative", inputs=("keyword",), n_out=1),
            Operator(name="count_pos", inputs=("positive",), n_out=1),
            Operator(name="count_neg", inputs=("negative",), n_out=1),
            Operator(name="pos_result", inputs=("count_pos",)),
            Operator(name="neg_result", inputs=("count_neg",)),
            Operator(name="ratio", inputs=("count_pos", "count_neg"), n_out=1),
        ]
    )


def test_dissp_fig39_multiple_results_with_replication() -> None:
    ev = _fig39().evaluate()
    assert ev.source_sic["twitter"] == F(1, 3)
    assert ev.outputs["keyword"].per_row == F(1, 2)
    for consumer in ("positive", "negative"):
        copy = ev.edges[("keyword", consumer)]
        assert copy.n == 2 and copy.per_row == F(1, 4)  # each stream carries 1/2
    assert ev.outputs["positive"].per_row == ev.outputs["negative"].per_row == F(1, 2)
    assert ev.edges[("count_pos", "pos_result")].per_row == F(1, 4)
    assert ev.edges[("count_pos", "ratio")].per_row == F(1, 4)
    totals = {name: b.total for name, b in ev.results.items()}
    assert totals == {"pos_result": F(1, 4), "neg_result": F(1, 4), "ratio": F(1, 2)}
    assert ev.query_sic == 1


def test_partitioning_instead_of_replication_keeps_per_row_sic() -> None:
    # The same filter output split round robin: 1 row each, unchanged 1/2, total still 1.
    ev = _fig39(fanout="partition").evaluate()
    for consumer in ("positive", "negative"):
        assert ev.edges[("keyword", consumer)] == Batch(1, F(1, 2))
    assert ev.query_sic == 1


# --- Empty outputs ----------------------------------------------------------------------------


def test_unshed_filter_that_empties_the_window_does_not_look_degraded() -> None:
    g = OperatorGraph(
        [
            Source(name="s", n_tuples=10),
            Operator(name="having", inputs=("s",), n_out=0),
            Operator(name="count", inputs=("having",), n_out=1),
        ]
    )
    ev = g.evaluate()
    assert ev.outputs["having"] == Batch(0, F(1))  # the empty result carries the SIC
    assert ev.results["count"] == Batch(1, F(1))
    assert ev.query_sic == 1
    assert g.evaluate(shed={("s", "having"): 4}).query_sic == F(3, 5)


def test_empty_result_is_a_terminal_result_too() -> None:
    g = OperatorGraph([Source(name="s", n_tuples=3), Operator(name="f", inputs=("s",), n_out=0)])
    ev = g.evaluate()
    assert ev.results["f"] == Batch(0, F(1)) and ev.query_sic == 1


def test_empty_batch_cannot_be_shed() -> None:
    g = OperatorGraph(
        [
            Source(name="s", n_tuples=3),
            Operator(name="f", inputs=("s",), n_out=0),
            Operator(name="g", inputs=("f",), n_out=1),
        ]
    )
    with pytest.raises(ConfigError, match=r"cannot shed 1 rows on \('f', 'g'\): it carries 0"):
        g.evaluate(shed={("f", "g"): 1})


def test_empty_batch_partitioned_reaches_every_consumer() -> None:
    g = OperatorGraph(
        [
            Source(name="s", n_tuples=4),
            Operator(name="f", inputs=("s",), n_out=0, fanout="partition"),
            Operator(name="x", inputs=("f",), n_out=1),
            Operator(name="y", inputs=("f",), n_out=1),
        ]
    )
    ev = g.evaluate()
    assert ev.edges[("f", "x")] == ev.edges[("f", "y")] == Batch(0, F(1, 2))
    assert ev.query_sic == 1


def test_source_without_tuples_contributes_nothing() -> None:
    g = OperatorGraph(
        [
            Source(name="a", n_tuples=0),
            Source(name="b", n_tuples=5),
            Operator(name="u", inputs=("a", "b"), n_out=1),
        ]
    )
    ev = g.evaluate()
    assert ev.source_sic["a"] == 0 and ev.query_sic == F(1, 2)


# --- Conservation and additivity (property tests) ---------------------------------------------


@st.composite
def layered_graphs(draw: st.DrawFn) -> tuple[list[Source | Operator], int]:
    """Random DAGs: sources -> one operator each -> layers of operators -> results."""
    n_sources = draw(st.integers(1, 4))
    nodes: list[Source | Operator] = []
    frontier: list[str] = []
    for i in range(n_sources):
        nodes.append(Source(name=f"s{i}", n_tuples=draw(st.integers(1, 12))))
        nodes.append(Operator(name=f"in{i}", inputs=(f"s{i}",), n_out=draw(st.integers(0, 5))))
        frontier.append(f"in{i}")
    for layer in range(draw(st.integers(0, 3))):
        width = draw(st.integers(1, 3))
        new = []
        for j in range(width):
            inputs = draw(st.lists(st.sampled_from(frontier), min_size=1, unique=True))
            new.append(f"L{layer}_{j}")
            nodes.append(
                Operator(
                    name=new[-1],
                    inputs=tuple(inputs),
                    n_out=draw(st.one_of(st.none(), st.integers(0, 6))),
                )
            )
        frontier = new + [f for f in frontier if draw(st.booleans())]
    # Every operator replicates or partitions its output to its consumers, at random.
    final = [
        Operator(
            name=n.name,
            inputs=n.inputs,
            n_out=n.n_out,
            fanout=draw(st.sampled_from(["replicate", "partition"])),
        )
        if isinstance(n, Operator)
        else n
        for n in nodes
    ]
    return final, n_sources


@settings(max_examples=80, deadline=None)
@given(layered_graphs())
def test_unshed_query_sic_is_exactly_one_for_any_dag(graph: tuple[list, int]) -> None:
    nodes, _ = graph
    ev = OperatorGraph(nodes).evaluate()
    assert ev.query_sic == 1


@settings(max_examples=80, deadline=None)
@given(layered_graphs(), st.data())
def test_shedding_source_tuples_lowers_query_sic_by_their_sic(
    graph: tuple[list, int], data: st.DataObject
) -> None:
    nodes, n_sources = graph
    g = OperatorGraph(nodes)
    shed = {}
    lost = F(0)
    for i in range(n_sources):
        n = next(x.n_tuples for x in nodes if x.name == f"s{i}")
        m = data.draw(st.integers(0, n))
        shed[(f"s{i}", f"in{i}")] = m
        lost += F(m, n * n_sources)
    assert g.evaluate(shed=shed).query_sic == 1 - lost


# --- Evaluator errors -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "match"),
    [
        ([Source(name="s", n_tuples=1), Source(name="s", n_tuples=2)], "'s' is used twice"),
        (
            [Source(name="s", n_tuples=1), Operator(name="o", inputs=("x",))],
            "operator 'o' reads unknown node 'x'",
        ),
        (
            [Source(name="s", n_tuples=1), Operator(name="o", inputs=())],
            "operator 'o' has no inputs",
        ),
        (
            [Source(name="s", n_tuples=1), Operator(name="o", inputs=("s", "s"))],
            "operator 'o' lists an input twice",
        ),
        ([Source(name="s", n_tuples=1)], "source 's' feeds no operator"),
        (
            [
                Source(name="s", n_tuples=1),
                Operator(name="a", inputs=("s", "b")),
                Operator(name="b", inputs=("a",)),
            ],
            r"the graph has a cycle through \['a', 'b'\]",
        ),
        (
            [Source(name="s", n_tuples=-1), Operator(name="o", inputs=("s",))],
            "Source 's' n_tuples must be a whole number >= 0",
        ),
        (
            [Source(name="s", n_tuples=1), Operator(name="o", inputs=("s",), fanout=NOT_A_FANOUT)],
            "fanout must be 'replicate' or 'partition'",
        ),
        (["s"], "nodes must be Source or Operator, got str"),
    ],
)
def test_graph_rejects_malformed_queries(nodes: list, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        OperatorGraph(nodes)


def test_graph_rejects_bad_source_count() -> None:
    with pytest.raises(ConfigError, match="n_sources must be >= 1"):
        OperatorGraph(
            [Source(name="s", n_tuples=1), Operator(name="o", inputs=("s",))], n_sources=0
        )


def test_source_feeding_two_operators_is_rejected() -> None:
    g = OperatorGraph(
        [
            Source(name="s", n_tuples=2),
            Operator(name="a", inputs=("s",)),
            Operator(name="b", inputs=("s",)),
        ]
    )
    with pytest.raises(ConfigError, match="THEMIS connects each source to exactly one operator"):
        g.evaluate()


def test_split_must_match_consumers() -> None:
    g = OperatorGraph(
        [
            Source(name="s", n_tuples=4),
            Operator(name="p", inputs=("s",), fanout="partition", split=(4,)),
            Operator(name="x", inputs=("p",)),
            Operator(name="y", inputs=("p",)),
        ]
    )
    with pytest.raises(ConfigError, match="operator 'p' split has 1 parts for 2 consumers"):
        g.evaluate()
    g2 = OperatorGraph(
        [
            Source(name="s", n_tuples=4),
            Operator(name="p", inputs=("s",), fanout="partition", split=(1, 1)),
            Operator(name="x", inputs=("p",)),
            Operator(name="y", inputs=("p",)),
        ]
    )
    with pytest.raises(ConfigError, match=r"split \[1, 1\] must add up to the 4 rows"):
        g2.evaluate()


def test_explicit_split_is_used() -> None:
    g = OperatorGraph(
        [
            Source(name="s", n_tuples=4),
            Operator(name="p", inputs=("s",), fanout="partition", split=(3, 1)),
            Operator(name="x", inputs=("p",)),
            Operator(name="y", inputs=("p",)),
        ]
    )
    ev = g.evaluate()
    assert ev.edges[("p", "x")] == Batch(3, F(3, 4)) and ev.edges[("p", "y")] == Batch(1, F(1, 4))


def test_evaluate_rejects_bad_shedding() -> None:
    g = _fig2()
    with pytest.raises(ConfigError, match=r"cannot shed on \('s1', 'c'\): no such edge"):
        g.evaluate(shed={("s1", "c"): 1})
    with pytest.raises(ConfigError, match=r"cannot shed 5 rows on \('s1', 'b'\): it carries 4"):
        g.evaluate(shed={("s1", "b"): 5})
    with pytest.raises(ConfigError, match="must be a whole number >= 0"):
        g.evaluate(shed={("s1", "b"): -1})


def test_bad_output_count_function_is_reported() -> None:
    g = OperatorGraph(
        [Source(name="s", n_tuples=2), Operator(name="o", inputs=("s",), n_out=lambda n: n - 5)]
    )
    with pytest.raises(ConfigError, match="operator 'o' n_out must be a whole number >= 0"):
        g.evaluate()
