"""Exact reference evaluator of SIC over a small query DAG (THEMIS Eqs. 1, 3, 4; DISSP §3.5).

:class:`OperatorGraph` takes sources (:class:`Source`) and operators (:class:`Operator`), fires
every operator once on everything it receives in one source time window (STW), and follows
SIC from the sources (THEMIS Eq. 1) through each firing (THEMIS Eq. 3, the rules of
:mod:`spillway.quality.propagation`) to the query's results (THEMIS Eq. 4). By default it
computes with :class:`fractions.Fraction`, so worked examples of the papers (THEMIS Fig. 2,
Fiscato Figs. 3.7-3.9) and invariants such as "with nothing shed a query's SIC is exactly 1"
are checked exactly rather than to a tolerance.

It is a test oracle, not part of the data path: the Spark helpers (:mod:`spillway.spark.sic_ops`)
apply the same per-operator rules to DataFrames, and their tests check them against
:mod:`spillway.quality.propagation`.

- Shedding is given per edge, ``{(producer, consumer): rows dropped}``: source edges are input
  shedding, operator edges drop derived tuples.
- An operator with several consumers replicates its output (each copy carries ``SIC / k``,
  Fiscato Assumption 9) or partitions it (each row goes to one consumer unchanged).
- A firing with no output rows emits an empty result that carries its input SIC (DISSP
  Assumption 6; see :mod:`spillway.quality.propagation`).

Examples
--------
Fiscato Fig. 3.8, cut to two branches: 300 tweets split round robin over two NLP operators
feeding a top-10. Shedding 50 of one branch's 150 rows costs their 50/300 of the query's SIC.

>>> g = OperatorGraph([
...     Source(name="twitter", n_tuples=300),
...     Operator(name="split", inputs=("twitter",), fanout="partition"),
...     Operator(name="nlp1", inputs=("split",)), Operator(name="nlp2", inputs=("split",)),
...     Operator(name="top10", inputs=("nlp1", "nlp2"), n_out=lambda n: min(10, n)),
... ])
>>> ev = g.evaluate(shed={("split", "nlp2"): 50})
>>> ev.edges[("split", "nlp2")], ev.results["top10"].per_row, ev.query_sic
(Batch(n=100, total=Fraction(1, 3)), Fraction(1, 12), Fraction(5, 6))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from spillway.errors import ConfigError
from spillway.quality.propagation import _count, partition_totals, replicate, spread

__all__ = ["Batch", "Evaluation", "Operator", "OperatorGraph", "Source"]


@dataclass(frozen=True, kw_only=True)
class Source:
    """A source that sends ``n_tuples`` tuples in the STW, each ``1/(n_tuples * |S|)``.

    >>> Source(name="cpu", n_tuples=4000)
    Source(name='cpu', n_tuples=4000)
    """

    name: str
    n_tuples: int


@dataclass(frozen=True, kw_only=True)
class Operator:
    """An operator that fires once on everything it receives.

    Parameters
    ----------
    name : str
        Unique name.
    inputs : tuple of str
        Names of the producers it reads (sources or operators).
    n_out : int, callable or None
        Rows of its firing: a fixed number, a function of the number of input rows (e.g.
        ``lambda n: min(10, n)`` for a top-10), or None for as many rows as it received
        (map, split). ``0`` emits an empty result carrying the input SIC.
    fanout : "replicate" or "partition"
        How its output reaches several consumers: every consumer gets a copy with SIC / k
        (replicate), or each row goes to one consumer unchanged (partition).
    split : tuple of int, optional
        Rows per consumer when partitioning, in consumer order; default round robin.

    Examples
    --------
    >>> top10 = Operator(name="top10", inputs=("nlp1", "nlp2"), n_out=lambda n: min(10, n))
    >>> top10.fanout, top10.n_out(4)
    ('replicate', 4)
    """

    name: str
    inputs: tuple[str, ...]
    n_out: int | Callable[[int], int] | None = None
    fanout: Literal["replicate", "partition"] = "replicate"
    split: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Batch:
    """Rows on a stream that share one SIC, with their total (DISSP Def. 3.4).

    An empty batch (``n == 0``) may still carry SIC: the empty result of a firing.

    >>> from fractions import Fraction
    >>> Batch(2, Fraction(1, 2)).per_row, Batch(0, Fraction(1, 2)).per_row
    (Fraction(1, 4), Fraction(1, 2))
    """

    n: int
    total: Any

    @property
    def per_row(self) -> Any:
        """SIC of each row (``total / n``; the total itself for an empty batch)."""
        return spread(self.total, self.n)


@dataclass(frozen=True)
class Evaluation:
    """What :meth:`OperatorGraph.evaluate` computed.

    Attributes
    ----------
    query_sic : number
        Sum of the SIC of every result, empty results included (THEMIS Eq. 4).
    source_sic : dict
        Per-tuple SIC of every source (Eq. 1).
    received : dict
        What each operator fired on, after shedding on its input edges.
    outputs : dict
        Each operator's firing output, before fan-out.
    edges : dict
        What travelled on every (producer, consumer) edge, after shedding.
    results : dict
        Output of every terminal operator (those with no consumers).

    Examples
    --------
    >>> g = OperatorGraph(
    ...     [Source(name="s", n_tuples=3), Operator(name="f", inputs=("s",), n_out=1)]
    ... )
    >>> ev = g.evaluate(shed={("s", "f"): 1})
    >>> ev.query_sic, ev.received["f"], ev.results["f"].per_row
    (Fraction(2, 3), Batch(n=2, total=Fraction(2, 3)), Fraction(2, 3))
    """

    query_sic: Any
    source_sic: dict[str, Any]
    received: dict[str, Batch]
    outputs: dict[str, Batch]
    edges: dict[tuple[str, str], Batch]
    results: dict[str, Batch] = field(default_factory=dict)


class OperatorGraph:
    """A query DAG evaluated for one STW, to check SIC propagation exactly.

    Every operator fires once on all it receives (one atomic window). Shedding removes rows on
    an edge before the consumer fires. Query SIC is the sum over the terminal operators'
    outputs, which are the query's results (a multi-result query is one query, Fiscato A9).

    Parameters
    ----------
    nodes : sequence of Source and Operator
        In any order; consumers of a node are ordered as they appear here.
    n_sources : int, optional
        ``|S|`` for Eq. 1 (default: the number of sources in the graph).
    normalise : bool
        False gives each source a total of 1 instead of ``1/|S|`` (Fiscato's un-normalised
        exposition in Fig. 3.7).

    Raises
    ------
    ConfigError
        On duplicate or unknown names, cycles, operators without inputs, unused sources, bad
        counts or splits.

    Examples
    --------
    THEMIS Fig. 2: sources of 4 and 2 tuples, operators b and c feeding the root a.

    >>> g = OperatorGraph([
    ...     Source(name="s1", n_tuples=4), Source(name="s2", n_tuples=2),
    ...     Operator(name="b", inputs=("s1",), n_out=2),
    ...     Operator(name="c", inputs=("s2",), n_out=2),
    ...     Operator(name="a", inputs=("b", "c"), n_out=2),
    ... ])
    >>> g.evaluate().query_sic, g.evaluate(shed={("s1", "b"): 2, ("s2", "c"): 1}).query_sic
    (Fraction(1, 1), Fraction(1, 2))
    """

    def __init__(
        self,
        nodes: Sequence[Source | Operator],
        *,
        n_sources: int | None = None,
        normalise: bool = True,
    ) -> None:
        self.nodes: dict[str, Source | Operator] = {}
        for node in nodes:
            if not isinstance(node, Source | Operator):
                raise ConfigError(f"nodes must be Source or Operator, got {type(node).__name__}")
            if node.name in self.nodes:
                raise ConfigError(f"node name {node.name!r} is used twice; names must be unique")
            self.nodes[node.name] = node
        self.consumers: dict[str, list[str]] = {name: [] for name in self.nodes}
        for node in self.nodes.values():
            if isinstance(node, Source):
                _count(node.n_tuples, f"Source {node.name!r} n_tuples")
                continue
            if not node.inputs:
                raise ConfigError(f"operator {node.name!r} has no inputs; give it a producer")
            if len(set(node.inputs)) != len(node.inputs):
                raise ConfigError(f"operator {node.name!r} lists an input twice: {node.inputs}")
            for src in node.inputs:
                if src not in self.nodes:
                    raise ConfigError(f"operator {node.name!r} reads unknown node {src!r}")
                self.consumers[src].append(node.name)
            if node.fanout not in ("replicate", "partition"):
                raise ConfigError(
                    f"operator {node.name!r} fanout must be 'replicate' or 'partition', "
                    f"got {node.fanout!r}"
                )
        for name, node in self.nodes.items():
            if isinstance(node, Source) and not self.consumers[name]:
                raise ConfigError(f"source {name!r} feeds no operator; connect or remove it")
        self.order = self._topological_order()
        sources = [n for n in self.nodes.values() if isinstance(n, Source)]
        if n_sources is None:
            n_sources = len(sources)
        if _count(n_sources, "n_sources") < 1:
            raise ConfigError("n_sources must be >= 1")
        self.n_sources = int(n_sources)
        self.normalise = bool(normalise)

    def _topological_order(self) -> list[str]:
        indeg = {
            name: (0 if isinstance(n, Source) else len(n.inputs)) for name, n in self.nodes.items()
        }
        ready = [name for name, d in indeg.items() if d == 0]
        order: list[str] = []
        while ready:
            name = ready.pop(0)
            order.append(name)
            for c in self.consumers[name]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        if len(order) != len(self.nodes):
            stuck = sorted(set(self.nodes) - set(order))
            raise ConfigError(f"the graph has a cycle through {stuck}; a query must be a DAG")
        return order

    def evaluate(
        self, shed: Mapping[tuple[str, str], int] | None = None, *, exact: bool = True
    ) -> Evaluation:
        """Propagate SIC from the sources to the results for one STW.

        Parameters
        ----------
        shed : mapping of (producer, consumer) to int, optional
            Rows dropped on each edge before the consumer fires (source edges: input shedding;
            operator edges: derived tuples shed downstream).
        exact : bool
            Compute with :class:`fractions.Fraction` (default) or floats.

        Raises
        ------
        ConfigError
            When an edge does not exist or more rows are shed than it carries.

        Examples
        --------
        >>> g = OperatorGraph(
        ...     [Source(name="s", n_tuples=4), Operator(name="avg", inputs=("s",), n_out=1)]
        ... )
        >>> g.evaluate(shed={("s", "avg"): 1}).query_sic, g.evaluate(exact=False).query_sic
        (Fraction(3, 4), 1.0)
        """
        shed = dict(shed or {})
        for edge, m in shed.items():
            if edge[0] not in self.consumers or edge[1] not in self.consumers[edge[0]]:
                raise ConfigError(f"cannot shed on {edge}: no such edge in the graph")
            _count(m, f"shed[{edge}]")
        one: Any = Fraction(1) if exact else 1.0
        per_source = one / self.n_sources if self.normalise else one
        source_sic: dict[str, Any] = {}
        outputs: dict[str, Batch] = {}
        received: dict[str, Batch] = {}
        edges: dict[tuple[str, str], Batch] = {}
        inbox: dict[str, list[Batch]] = {name: [] for name in self.nodes}
        for name in self.order:
            node = self.nodes[name]
            if isinstance(node, Source):
                n = int(node.n_tuples)
                source_sic[name] = per_source / n if n else per_source * 0
                out = Batch(n, per_source if n else per_source * 0)
            else:
                got = inbox[name]
                n_in = sum(b.n for b in got)
                total = sum((b.total for b in got), start=one * 0)
                received[name] = Batch(n_in, total)
                n_out = self._rows(node, n_in)
                out = Batch(n_out, total)
            outputs[name] = out
            for consumer, part in zip(self.consumers[name], self._fan_out(node, out), strict=True):
                m = shed.get((name, consumer), 0)
                if m > part.n:
                    raise ConfigError(
                        f"cannot shed {m} rows on {(name, consumer)}: it carries {part.n}"
                    )
                kept = Batch(part.n - m, part.total - part.per_row * m if m else part.total)
                edges[(name, consumer)] = kept
                inbox[consumer].append(kept)
        results = {n: outputs[n] for n in self.order if not self.consumers[n]}
        q = sum((b.total for b in results.values()), start=one * 0)
        return Evaluation(
            query_sic=q,
            source_sic=source_sic,
            received=received,
            outputs=outputs,
            edges=edges,
            results=results,
        )

    @staticmethod
    def _rows(node: Operator, n_in: int) -> int:
        if node.n_out is None:
            return n_in
        n = node.n_out(n_in) if callable(node.n_out) else node.n_out
        return int(_count(n, f"operator {node.name!r} n_out"))

    def _fan_out(self, node: Source | Operator, out: Batch) -> list[Batch]:
        k = len(self.consumers[node.name])
        if k == 0:
            return []
        if isinstance(node, Source) or node.fanout == "replicate":
            if isinstance(node, Source) and k > 1:
                raise ConfigError(
                    f"source {node.name!r} feeds {k} operators; THEMIS connects each source to "
                    "exactly one operator (add an explicit replicate/partition operator)"
                )
            return [Batch(out.n, replicate(out.total, k))] * k
        split = node.split
        if split is None:
            split = tuple(out.n // k + (1 if j < out.n % k else 0) for j in range(k))
        if len(split) != k:
            raise ConfigError(
                f"operator {node.name!r} split has {len(split)} parts for {k} consumers"
            )
        totals = partition_totals(out.total, out.n, split)
        return [Batch(int(p), t) for p, t in zip(split, totals, strict=True)]
