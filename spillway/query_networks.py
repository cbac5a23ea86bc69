"""Pham's query networks as data: priority classes, queries, shared segments, input streams.

A :class:`QueryNetwork` says what a node hosts, not how: every :class:`StreamQuery` has a class,
a kind (``select``, ``select_project``, ``aggregate``, ``window_join``), the streams it reads and
how many operators it has; a :class:`SharedSegment` is a run of operators several queries share
(multi-query optimisation), owned by the highest-priority class among its readers, whose load
manager sheds at the segment's sources, while a lower class's load manager treats the first
operator after the segment as its source (Pham §6.1.4, Fig. 23). A Spark node maps the kinds
to its own query shapes later; nothing here runs anything.

==============  ================================================================================
network         definition (Pham section)
==============  ================================================================================
``qn-flat``     one query of 8 select/project operators + source + output, one class (§4.3.1)
``qn-complex``  60 groups of 4 queries on one stream per group, sharing a segment of the source
                and 2 select/project operators; each query 3 more operators and its output:
                60 · 19 = 1,140 operators (§4.3.1; the split of the 19 is not given)
``qn-a``        3 classes, priorities 6/3/1, D = 300/400/500 ms in the thesis, 3/4/5 trigger
                intervals here; each 11 queries: 5 aggregates, 2 window joins, 4 selects on
                13 streams (§6.2.1); ``shared=True``: classes 1 and 3 share a segment of 2
                sources and 2 selects (the Fig. 5 segment), read by 2 selects of each class
``qn-b``        QN-A with class 1 three times as large (§6.2.1)
==============  ================================================================================

Delay targets are in *intervals* (``target_intervals``): Pham's 300/400/500 ms (against a
150 ms load-management cycle) become 3, 4 and 5 trigger intervals on Spark, whose micro-batch
cannot answer within two intervals; the thesis's milliseconds are kept in ``paper_target_ms``
for reports.

Examples
--------
>>> qa = qn_a()
>>> [(c.name, c.priority, c.target_intervals) for c in qa.classes]
[('c1', 6, 3), ('c2', 3, 4), ('c3', 1, 5)]
>>> len(qa.queries), len(qa.streams_of("c3"))
(33, 13)
>>> qn_complex().operators
1140
>>> shared = qn_a(shared=True)
>>> s = shared.segments[0]
>>> s.owner, s.sources, len(s.readers)
('c1', ('shared.s1', 'shared.s2'), 4)
>>> inputs_for(shared, "SD_p")["shared.s1"]           # the segment follows class 3's rate
'SD_p-3'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from spillway.errors import ConfigError, UnknownNameError

#: Query kinds (Pham's operator types; a Spark node maps them to its query shapes).
KINDS = ("select", "select_project", "aggregate", "window_join")


def _name(what: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{what} must be a non-empty string, got {value!r}")
    return value


def _int(what: str, value: Any, low: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ConfigError(f"{what} must be an int >= {low}, got {value!r}")
    return value


@dataclass(frozen=True, kw_only=True)
class PriorityClass:
    """A class of queries: its priority and delay target.

    Parameters
    ----------
    name : the class name (``c1``, ...).
    priority : an int >= 1; higher is more important (its share is ``P_k / Σ P``).
    target_intervals : the delay target ``D`` in load-management (trigger) intervals.
    paper_target_ms : the thesis's target in milliseconds, for reports (None if none).
    """

    name: str
    priority: int
    target_intervals: int
    paper_target_ms: float | None = None

    def __post_init__(self) -> None:
        _name("class name", self.name)
        _int(f"class {self.name!r} priority", self.priority, 1)
        _int(f"class {self.name!r} target_intervals", self.target_intervals, 1)


@dataclass(frozen=True, kw_only=True)
class StreamQuery:
    """One continuous query.

    Parameters
    ----------
    name : unique in the network.
    klass : the name of its priority class.
    kind : one of :data:`KINDS`.
    sources : the streams it reads (a window join reads two).
    operators : its own operators (selects, projects, joins, windows, aggregates), not counting
        the sources, the output or a shared segment.
    segment : the shared segment it reads through, if any.
    """

    name: str
    klass: str
    kind: str
    sources: tuple[str, ...]
    operators: int = 1
    segment: str | None = None

    def __post_init__(self) -> None:
        _name("query name", self.name)
        if self.kind not in KINDS:
            raise UnknownNameError(
                f"query {self.name!r}: kind must be one of {', '.join(KINDS)}; got {self.kind!r}"
            )
        object.__setattr__(self, "sources", tuple(self.sources))
        if not self.sources:
            raise ConfigError(f"query {self.name!r} must read at least one stream, got none")
        need = 2 if self.kind == "window_join" else 1
        if len(self.sources) != need:
            raise ConfigError(
                f"query {self.name!r} ({self.kind}) reads {need} stream(s), got {len(self.sources)}"
            )
        _int(f"query {self.name!r} operators", self.operators, 0)


@dataclass(frozen=True, kw_only=True)
class SharedSegment:
    """Operators shared by several queries, owned by the highest-priority reader class.

    Parameters
    ----------
    name : unique in the network.
    owner : the class whose load manager sheds at the segment's sources.
    sources : the streams the segment reads.
    operators : the segment's operators besides its sources.
    readers : the queries reading through it.
    """

    name: str
    owner: str
    sources: tuple[str, ...]
    operators: int
    readers: tuple[str, ...]

    def __post_init__(self) -> None:
        _name("segment name", self.name)
        object.__setattr__(self, "sources", tuple(self.sources))
        object.__setattr__(self, "readers", tuple(self.readers))
        _int(f"segment {self.name!r} operators", self.operators, 0)
        if len(self.readers) < 2:
            raise ConfigError(
                f"segment {self.name!r} must be read by at least 2 queries, got {self.readers}"
            )


@dataclass(frozen=True, kw_only=True)
class QueryNetwork:
    """Classes, queries and shared segments of one workload (checked for consistency).

    Raises
    ------
    ConfigError
        Duplicate names, a query of an unknown class or segment, a segment whose owner is not
        its highest-priority reader class, or a reader reading streams outside the segment's.
    """

    name: str
    classes: tuple[PriorityClass, ...]
    queries: tuple[StreamQuery, ...]
    segments: tuple[SharedSegment, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        for f in ("classes", "queries", "segments"):
            object.__setattr__(self, f, tuple(getattr(self, f)))
        for what, items in (
            ("class", self.classes),
            ("query", self.queries),
            ("segment", self.segments),
        ):
            names = [i.name for i in items]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ConfigError(f"network {self.name!r}: duplicate {what} name(s) {dup}")
        classes = {c.name: c for c in self.classes}
        segments = {s.name: s for s in self.segments}
        queries = {q.name: q for q in self.queries}
        for q in self.queries:
            if q.klass not in classes:
                raise ConfigError(f"query {q.name!r}: unknown class {q.klass!r}")
            if q.segment is not None and q.segment not in segments:
                raise ConfigError(f"query {q.name!r}: unknown segment {q.segment!r}")
        for s in self.segments:
            for r in s.readers:
                if r not in queries or queries[r].segment != s.name:
                    raise ConfigError(f"segment {s.name!r}: reader {r!r} does not read it")
                if not set(queries[r].sources) <= set(s.sources):
                    raise ConfigError(
                        f"segment {s.name!r}: reader {r!r} reads {queries[r].sources}, "
                        f"outside the segment's sources {s.sources}"
                    )
            top = max((classes[queries[r].klass] for r in s.readers), key=lambda c: c.priority)
            if s.owner != top.name:
                raise ConfigError(
                    f"segment {s.name!r} must belong to its highest-priority reader class "
                    f"{top.name!r} (Pham §6.1.4), got {s.owner!r}"
                )

    @property
    def streams(self) -> tuple[str, ...]:
        """Every stream read, sorted."""
        return tuple(sorted({s for q in self.queries for s in q.sources}))

    def streams_of(self, klass: str) -> tuple[str, ...]:
        """The streams the queries of ``klass`` read (shared ones included), sorted."""
        return tuple(sorted({s for q in self.queries if q.klass == klass for s in q.sources}))

    def queries_of(self, klass: str) -> tuple[StreamQuery, ...]:
        """The queries of ``klass``."""
        return tuple(q for q in self.queries if q.klass == klass)

    @property
    def operators(self) -> int:
        """All operators: sources, the queries' own, shared segments' and one output per query."""
        return (
            len(self.streams)
            + sum(q.operators + 1 for q in self.queries)
            + sum(s.operators for s in self.segments)
        )

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (lists and dicts only), e.g. for a report or TOML."""
        return asdict(self)


def qn_flat() -> QueryNetwork:
    """Pham QN-flat: one flat query of 8 select/project operators (§4.3.1); D = 2 s = 4 · 0.5 s."""
    return QueryNetwork(
        name="qn-flat",
        classes=(PriorityClass(name="c1", priority=1, target_intervals=4, paper_target_ms=2000.0),),
        queries=(
            StreamQuery(
                name="flat", klass="c1", kind="select_project", sources=("s0",), operators=8
            ),
        ),
        description="one query of 8 select/project operators, cost padded (Pham §4.3.1)",
    )


def qn_complex(groups: int = 60) -> QueryNetwork:
    """Pham QN-complex: ``groups`` groups of 4 queries sharing a stream and a segment (§4.3.1)."""
    _int("groups", groups, 1)
    queries, segments = [], []
    for g in range(groups):
        stream, seg = f"g{g}", f"g{g}.shared"
        names = [f"g{g}.q{i}" for i in range(4)]
        queries += [
            StreamQuery(
                name=n,
                klass="c1",
                kind="select_project",
                sources=(stream,),
                operators=3,
                segment=seg,
            )
            for n in names
        ]
        segments.append(
            SharedSegment(
                name=seg, owner="c1", sources=(stream,), operators=2, readers=tuple(names)
            )
        )
    return QueryNetwork(
        name="qn-complex",
        classes=(PriorityClass(name="c1", priority=1, target_intervals=4, paper_target_ms=2000.0),),
        queries=tuple(queries),
        segments=tuple(segments),
        description=f"{groups} groups of 4 select/project queries sharing a stream and 2 "
        "operators (Pham §4.3.1)",
    )


QN_A_CLASSES = (
    PriorityClass(name="c1", priority=6, target_intervals=3, paper_target_ms=300.0),
    PriorityClass(name="c2", priority=3, target_intervals=4, paper_target_ms=400.0),
    PriorityClass(name="c3", priority=1, target_intervals=5, paper_target_ms=500.0),
)


def _class_queries(klass: str, prefix: str, shared: tuple[str, ...] = ()) -> list[StreamQuery]:
    """Pham QN-A's 11 queries of one class: 5 aggregates, 2 window joins, 4 selects."""
    out = [
        StreamQuery(
            name=f"{prefix}.agg{i}",
            klass=klass,
            kind="aggregate",
            sources=(f"{prefix}.s{i}",),
            operators=2,
        )  # window + aggregate
        for i in range(1, 6)
    ]
    out += [
        StreamQuery(
            name=f"{prefix}.join{j}",
            klass=klass,
            kind="window_join",
            sources=(f"{prefix}.s{4 + 2 * j}", f"{prefix}.s{5 + 2 * j}"),
            operators=3,
        )  # two windows + join
        for j in (1, 2)
    ]
    for i in range(1, 5):
        if i > 4 - len(shared):
            src = shared[i - (5 - len(shared))]
            out.append(
                StreamQuery(
                    name=f"{prefix}.sel{i}",
                    klass=klass,
                    kind="select",
                    sources=(src,),
                    operators=0,
                    segment="c1c3",
                )
            )
        else:
            out.append(
                StreamQuery(
                    name=f"{prefix}.sel{i}",
                    klass=klass,
                    kind="select",
                    sources=(f"{prefix}.s{9 + i}",),
                    operators=1,
                )
            )
    return out


def qn_a(shared: bool = False, class1_scale: int = 1) -> QueryNetwork:
    """Pham QN-A (§6.2.1): 3 classes × 11 queries; with ``shared`` classes 1 and 3 share a
    segment of 2 sources and 2 selects; ``class1_scale`` copies of class 1's queries (QN-B: 3).
    """
    _int("class1_scale", class1_scale, 1)
    seg_sources = ("shared.s1", "shared.s2") if shared else ()
    queries: list[StreamQuery] = []
    for copy in range(class1_scale):
        prefix = "c1" if copy == 0 else f"c1x{copy + 1}"
        queries += _class_queries("c1", prefix, seg_sources if copy == 0 else ())
    queries += _class_queries("c2", "c2")
    queries += _class_queries("c3", "c3", seg_sources)
    segments: tuple[SharedSegment, ...] = ()
    if shared:
        readers = tuple(q.name for q in queries if q.segment == "c1c3")
        # one shared select per stream: two readers (c1 and c3) per stream
        segments = (
            SharedSegment(
                name="c1c3", owner="c1", sources=seg_sources, operators=2, readers=readers
            ),
        )
    name = {1: "qn-a", 3: "qn-b"}.get(class1_scale, f"qn-a-x{class1_scale}")
    return QueryNetwork(
        name=name + ("-shared" if shared else ""),
        classes=QN_A_CLASSES,
        queries=tuple(queries),
        segments=segments,
        description="3 classes (6/3/1, D = 3/4/5 intervals) × 11 queries: 5 aggregates, "
        "2 window joins, 4 selects (Pham §6.2.1)",
    )


def qn_b(shared: bool = False) -> QueryNetwork:
    """Pham QN-B: QN-A with class 1 three times as large (§6.2.1)."""
    return qn_a(shared=shared, class1_scale=3)


#: Every network by name.
NETWORKS = {
    "qn-flat": qn_flat,
    "qn-complex": qn_complex,
    "qn-a": qn_a,
    "qn-b": qn_b,
}

#: Input setups: per class name, the input stream of :data:`spillway.feeds.inputs.INPUTS`.
SETUPS: dict[str, Mapping[str, str]] = {
    "S_c": {"*": "S_c"},
    "S_step": {"*": "S_step"},
    "S_r": {"*": "S_r"},
    "SD_c": {"*": "SD_c"},
    "SD_p": {"c1": "SD_p-1", "c2": "SD_p-2", "c3": "SD_p-3"},
    "SD_r": {"c1": "SD_r-1", "c2": "SD_p-2", "c3": "SD_p-3"},
}


def inputs_for(network: QueryNetwork, setup: str) -> dict[str, str]:
    """The input stream (a name in ``spillway.feeds.inputs.INPUTS``) of every stream.

    A stream takes its reader class's input; a shared segment's stream takes the input of its
    *lowest*-priority reader class, so that class's workload does not change with sharing
    (Pham §6.2.1: "the query segment that can be shared with class 3 has the same input rate
    as class 3").

    Raises
    ------
    UnknownNameError
        ``setup`` is not in :data:`SETUPS`, or names no input for a class of the network.
    """
    if setup not in SETUPS:
        raise UnknownNameError(f"unknown input setup {setup!r}; known: {', '.join(SETUPS)}")
    table = SETUPS[setup]
    prio = {c.name: c.priority for c in network.classes}
    out: dict[str, str] = {}
    for stream in network.streams:
        readers = [q.klass for q in network.queries if stream in q.sources]
        klass = min(readers, key=lambda k: prio[k])
        name = table.get(klass, table.get("*"))
        if name is None:
            raise UnknownNameError(f"input setup {setup!r} has no input for class {klass!r}")
        out[stream] = name
    return out
