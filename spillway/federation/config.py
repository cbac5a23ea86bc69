"""A federation file: nodes, queries and where each query's fragments run (fed.toml).

THEMIS's queries are split into fragments placed on different nodes (§3, §7); a fragment reads
its own sources and sends its output to a consumer fragment of the same query, the one without
a consumer producing the query's result. The file names them::

    [coordinator]          # THEMIS §7: STW 10 s sliding every 250 ms (the shedding interval)
    stw_s = 10.0
    slide_s = 0.25
    timeout_s = 1.0        # a node silent this long is lost
    coordinated = true     # false: every node balances its own local SIC only (Fig. 4, top)

    [[nodes]]
    name = "a"
    policy = "balance-sic" # the node's shedding policy (default balance-sic)
    cpu = 0.5              # optional: the cores the node may use (a cgroup quota, see cpu.py)
    probe_every = 4        # optional: a probe every 4 decisions (NodeConfig.probe_every)

    [[queries]]
    name = "avg"
    kind = "avg_all"       # what each fragment computes over its own sources (default avg)
    feed = "cluster"       # where their tuples come from (default gaussian)
    rate = 20.0            # tuples per second per source (default 50)
    fragments = [
      { name = "leaf", node = "a", sources = 10, to = ["root"] },
      { name = "root", node = "b", sources = 10 },
    ]

:meth:`FederationConfig.layout` turns it into the
:class:`~spillway.quality.coordination.QueryLayout` the coordinator runs on (nodes and queries
numbered in file order). A replicated output (``to`` naming several consumers) gives each
``1/k`` of the SIC (DISSP Assumption 9).

``coordinated = false`` keeps the coordinator running (it still computes every query's Eq. 4,
for the live view and the report) but the nodes ignore its values: each balances the SIC its
own fragments secured, THEMIS Fig. 4's uncoordinated nodes. A node's ``policy`` is a name of
:data:`spillway.policies.POLICIES` (``random`` sheds uniformly, ignoring SIC).

Examples
--------
>>> cfg = FederationConfig.from_dict({
...     "nodes": [{"name": "a"}, {"name": "b"}],
...     "queries": [{"name": "avg", "fragments": [
...         {"name": "leaf", "node": "a", "sources": 10, "to": ["root"]},
...         {"name": "root", "node": "b", "sources": 10}]}]})
>>> layout = cfg.layout()
>>> layout.fragment_node.tolist(), layout.edge_from.tolist(), layout.edge_to.tolist()
([0, 1], [0], [1])
>>> FederationConfig.from_dict(cfg.to_dict()) == cfg
True
>>> cfg.policy_of("b"), cfg.coordinated
('balance-sic', True)
>>> FederationConfig.from_dict({**cfg.to_dict(), "nodes": [{"name": "a", "policy": "random"},
...     {"name": "b", "policy": "fifo"}]})
Traceback (most recent call last):
...
spillway.errors.ConfigError: nodes[1].policy must be one of balance-sic, cod, dilos, random, uniform; got 'fifo'
>>> FederationConfig.from_dict({"nodes": [{"name": "a"}], "queries": [{"name": "q",
...     "fragments": [{"name": "f", "node": "z", "sources": 1}]}]})
Traceback (most recent call last):
...
spillway.errors.ConfigError: queries[0].fragments[0].node must name a node of [[nodes]] (a), got 'z'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from spillway.config import read_toml
from spillway.errors import ConfigError
from spillway.federation.cpu import check_cores
from spillway.policies import POLICIES
from spillway.quality.coordination import CoordinatorConfig, QueryLayout
from spillway.quality.sic import StwConfig

#: A node's shedding policy unless its ``[[nodes]]`` entry names one.
DEFAULT_POLICY = "balance-sic"


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where} must be a non-empty text, got {value!r}")
    return value


def _unknown(where: str, data: Mapping[str, Any], cls: type) -> None:
    known = {f.name for f in fields(cls)}
    extra = sorted(set(data) - known)
    if extra:
        raise ConfigError(f"{where} has unknown keys {extra}; known: {sorted(known)}")


def _table(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a table, got {value!r}")
    return value


def _tables(value: Any, where: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where} must be a non-empty list of tables, got {value!r}")
    return [_table(v, f"{where}[{i}]") for i, v in enumerate(value)]


@dataclass(frozen=True, kw_only=True)
class FragmentEntry:
    """One fragment: its name within the query, its node, its sources, its consumers."""

    name: str
    node: str
    sources: int
    to: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _name(self.name, "fragment name")
        _name(self.node, f"fragment {self.name!r} node")
        s = self.sources
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise ConfigError(
                f"fragment {self.name!r} sources must be an int >= 0 (the sources it reads; 0 "
                f"for a fragment fed only by others), got {s!r}"
            )
        if isinstance(self.to, str) or not all(isinstance(t, str) for t in self.to):
            raise ConfigError(
                f"fragment {self.name!r} to must be a list of fragment names, got {self.to!r}"
            )
        object.__setattr__(self, "to", tuple(self.to))


@dataclass(frozen=True, kw_only=True)
class QueryEntry:
    """One query and its fragments (names unique within it).

    ``kind``, ``feed`` and ``rate`` say what a node running the query's fragments computes
    over each fragment's own sources (a kind of :data:`spillway.config.DEFAULT_SOURCES`), where
    their tuples come from (a feed of :data:`spillway.feeds.FEEDS`) and how many tuples per
    second each source sends (``spillway federation node``).
    """

    name: str
    fragments: tuple[FragmentEntry, ...]
    kind: str = "avg"
    feed: str = "gaussian"
    rate: float = 50.0

    def __post_init__(self) -> None:
        _name(self.name, "query name")
        _name(self.kind, f"query {self.name!r} kind")
        _name(self.feed, f"query {self.name!r} feed")
        r = self.rate
        if isinstance(r, bool) or not isinstance(r, int | float) or not math.isfinite(r) or r <= 0:
            raise ConfigError(
                f"query {self.name!r} rate must be a number > 0 (tuples per second per "
                f"source), got {r!r}"
            )
        names = [f.name for f in self.fragments]
        if not names:
            raise ConfigError(f"query {self.name!r} needs at least one fragment")
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ConfigError(f"query {self.name!r} names fragments {dup} more than once")
        for f in self.fragments:
            bad = [t for t in f.to if t not in names]
            if bad:
                raise ConfigError(
                    f"query {self.name!r} fragment {f.name!r} sends to {bad}, which are not "
                    f"fragments of the query ({', '.join(names)})"
                )


@dataclass(frozen=True, kw_only=True)
class FederationConfig:
    """Nodes, queries with their fragments' placement, and the coordinator's settings.

    Parameters
    ----------
    nodes : tuple of str
        Node names, numbered in this order.
    queries : tuple of QueryEntry
        Numbered in this order; fragments in file order within each query.
    stw_s, slide_s : float
        The source time window of Eq. 4 and its slide (THEMIS: 10 s and 250 ms).
    timeout_s : float
        A node not heard from this long is lost.
    coordinated : bool
        Whether the nodes balance the coordinator's values (THEMIS §5.2 ``updateSIC``); False:
        each node balances its local SIC only (the coordinator still measures Eq. 4).
    policies : tuple of str
        Each node's shedding policy, in ``nodes`` order (empty: ``balance-sic`` everywhere).
    cpus : tuple of float or None
        Each node's CPU limit in cores, in ``nodes`` order (None: unlimited; empty: none
        limited): ``federation up`` runs the node in a cgroup with that quota
        (:mod:`spillway.federation.cpu`).
    probes : tuple of int
        Each node's ``probe_every`` (:class:`spillway.config.NodeConfig`; 0: no probes;
        empty: none probes).

    Each query's Eq. 4 sums the STW ending at its watermark, where its results are complete:
    the nodes report their progress (:class:`~spillway.quality.coordination.SicCoordinator`,
    "Where the STW ends"), so the file sets no lag (a ``lag_s`` is refused with that reason).

    Raises
    ------
    ConfigError
        Duplicate names, a fragment on an unknown node, a bad coordinator setting, or what
        :class:`~spillway.quality.coordination.QueryLayout` refuses (a cycle, a query without
        sources).
    """

    nodes: tuple[str, ...]
    queries: tuple[QueryEntry, ...]
    stw_s: float = 10.0
    slide_s: float = 0.25
    timeout_s: float = 1.0
    coordinated: bool = True
    policies: tuple[str, ...] = ()
    cpus: tuple[float | None, ...] = ()
    probes: tuple[int, ...] = ()
    _layout: QueryLayout = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        nodes = tuple(_name(n, f"nodes[{i}].name") for i, n in enumerate(self.nodes))
        if not nodes:
            raise ConfigError("nodes must list at least one node")
        dup = sorted({n for n in nodes if nodes.count(n) > 1})
        if dup:
            raise ConfigError(f"node names must be unique, got {dup} more than once")
        qnames = [q.name for q in self.queries]
        dupq = sorted({n for n in qnames if qnames.count(n) > 1})
        if not qnames or dupq:
            raise ConfigError(f"queries must list uniquely named queries, got {qnames}")
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "queries", tuple(self.queries))
        if not isinstance(self.coordinated, bool):
            raise ConfigError(
                f"coordinator coordinated must be true or false, got {self.coordinated!r}"
            )
        policies = tuple(self.policies) or (DEFAULT_POLICY,) * len(nodes)
        if len(policies) != len(nodes):
            raise ConfigError(
                f"policies must name one policy per node ({len(nodes)}), got {len(policies)}"
            )
        for i, p in enumerate(policies):
            if not isinstance(p, str) or p not in POLICIES:
                raise ConfigError(
                    f"nodes[{i}].policy must be one of {', '.join(sorted(POLICIES))}; got {p!r}"
                )
        object.__setattr__(self, "policies", policies)
        cpus = tuple(self.cpus) or (None,) * len(nodes)
        if len(cpus) != len(nodes):
            raise ConfigError(f"cpus must give one limit per node ({len(nodes)}), got {len(cpus)}")
        cpus = tuple(
            None if c is None else check_cores(c, f"nodes[{i}].cpu") for i, c in enumerate(cpus)
        )
        object.__setattr__(self, "cpus", cpus)
        probes = tuple(self.probes) or (0,) * len(nodes)
        if len(probes) != len(nodes):
            raise ConfigError(f"probes must give one per node ({len(nodes)}), got {len(probes)}")
        for i, every in enumerate(probes):
            if isinstance(every, bool) or not isinstance(every, int) or every < 0:
                raise ConfigError(f"nodes[{i}].probe_every must be an int >= 0, got {every!r}")
        object.__setattr__(self, "probes", probes)
        for qi, q in enumerate(self.queries):
            for fi, f in enumerate(q.fragments):
                if f.node not in nodes:
                    raise ConfigError(
                        f"queries[{qi}].fragments[{fi}].node must name a node of [[nodes]] "
                        f"({', '.join(nodes)}), got {f.node!r}"
                    )
        self.coordinator()  # validates stw_s, slide_s, timeout_s
        object.__setattr__(self, "_layout", self._build_layout())

    def coordinator(self) -> CoordinatorConfig:
        """The :class:`CoordinatorConfig` of the file's ``[coordinator]`` table."""
        for name in ("stw_s", "slide_s", "timeout_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ConfigError(f"coordinator {name} must be a number of seconds, got {v!r}")
        return CoordinatorConfig(
            stw=StwConfig(stw_s=float(self.stw_s), slide_s=float(self.slide_s)),
            timeout_s=float(self.timeout_s),
            progress=True,
        )

    def _build_layout(self) -> QueryLayout:
        node_ix = {n: i for i, n in enumerate(self.nodes)}
        fq: list[int] = []
        fn: list[int] = []
        fs: list[int] = []
        ef: list[int] = []
        et: list[int] = []
        for qi, q in enumerate(self.queries):
            base = len(fq)
            local = {f.name: base + i for i, f in enumerate(q.fragments)}
            for f in q.fragments:
                fq.append(qi)
                fn.append(node_ix[f.node])
                fs.append(f.sources)
                for t in f.to:
                    ef.append(local[f.name])
                    et.append(local[t])
        return QueryLayout(
            fragment_query=np.array(fq, dtype=np.int64),
            fragment_node=np.array(fn, dtype=np.int64),
            fragment_sources=np.array(fs, dtype=np.int64),
            edge_from=np.array(ef, dtype=np.int64),
            edge_to=np.array(et, dtype=np.int64),
            n_nodes=len(self.nodes),
        )

    def layout(self) -> QueryLayout:
        """The deployed query graphs as the coordinator sees them (nodes, queries numbered in
        file order)."""
        return self._layout

    def cpu_of(self, node: str) -> float | None:
        """The CPU limit of node ``node`` in cores (None: unlimited)."""
        return self.cpus[self.node_index(node)]

    def probe_every_of(self, node: str) -> int:
        """Node ``node``'s ``probe_every`` (0: no probes)."""
        return self.probes[self.node_index(node)]

    def policy_of(self, node: str) -> str:
        """The shedding policy of node ``node`` (:meth:`node_index` refuses an unknown one)."""
        return self.policies[self.node_index(node)]

    def node_index(self, name: str) -> int:
        """The number of node ``name``.

        Raises
        ------
        ConfigError
            No such node.
        """
        if name not in self.nodes:
            raise ConfigError(f"node must be one of {', '.join(self.nodes)}, got {name!r}")
        return self.nodes.index(name)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FederationConfig:
        """Build from the parsed TOML (``[coordinator]``, ``[[nodes]]``, ``[[queries]]``)."""
        data = _table(data, "the federation file")
        extra = sorted(set(data) - {"coordinator", "nodes", "queries"})
        if extra:
            raise ConfigError(
                f"the federation file has unknown tables {extra}; known: coordinator, nodes, "
                "queries"
            )
        coord = dict(_table(data.get("coordinator", {}), "[coordinator]"))
        if "lag_s" in coord:
            raise ConfigError(
                "[coordinator] lag_s is no longer used: each query's STW ends where its results "
                "are complete, as the nodes report their progress; remove it"
            )
        bad = sorted(set(coord) - {"stw_s", "slide_s", "timeout_s", "coordinated"})
        if bad:
            raise ConfigError(
                f"[coordinator] has unknown keys {bad}; known: coordinated, slide_s, stw_s, "
                "timeout_s"
            )
        nodes = []
        policies = []
        cpus = []
        probes = []
        for i, n in enumerate(_tables(data.get("nodes"), "nodes")):
            if "name" not in n or not set(n) <= {"name", "policy", "cpu", "probe_every"}:
                raise ConfigError(
                    f"nodes[{i}] must have the key 'name' and may have 'policy', 'cpu' and "
                    f"'probe_every', got {sorted(n)}"
                )
            nodes.append(n["name"])
            policies.append(n.get("policy", DEFAULT_POLICY))
            cpus.append(n.get("cpu"))
            probes.append(n.get("probe_every", 0))
        queries = []
        for qi, q in enumerate(_tables(data.get("queries"), "queries")):
            _unknown(f"queries[{qi}]", q, QueryEntry)
            frags = []
            for fi, f in enumerate(_tables(q.get("fragments"), f"queries[{qi}].fragments")):
                where = f"queries[{qi}].fragments[{fi}]"
                _unknown(where, f, FragmentEntry)
                to = f.get("to", [])
                if not isinstance(to, list):
                    raise ConfigError(f"{where}.to must be a list of fragment names, got {to!r}")
                frags.append(
                    FragmentEntry(
                        name=f.get("name"),  # type: ignore[arg-type]  # checked in the entry
                        node=f.get("node"),  # type: ignore[arg-type]
                        sources=f.get("sources"),  # type: ignore[arg-type]
                        to=tuple(to),
                    )
                )
            shape = {k: q[k] for k in ("kind", "feed", "rate") if k in q}
            queries.append(QueryEntry(name=q.get("name"), fragments=tuple(frags), **shape))  # type: ignore[arg-type]
        return cls(nodes=tuple(nodes), queries=tuple(queries), policies=tuple(policies),
                   cpus=tuple(cpus), probes=tuple(probes), **coord)  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """The TOML tables as a dict (:meth:`from_dict` round-trips it)."""
        return {
            "coordinator": {
                "stw_s": self.stw_s,
                "slide_s": self.slide_s,
                "timeout_s": self.timeout_s,
                "coordinated": self.coordinated,
            },
            "nodes": [
                {
                    "name": n,
                    "policy": p,
                    **({} if c is None else {"cpu": c}),
                    **({"probe_every": e} if e else {}),
                }
                for n, p, c, e in zip(
                    self.nodes, self.policies, self.cpus, self.probes, strict=True
                )
            ],
            "queries": [
                {
                    "name": q.name,
                    "kind": q.kind,
                    "feed": q.feed,
                    "rate": q.rate,
                    "fragments": [
                        {"name": f.name, "node": f.node, "sources": f.sources, "to": list(f.to)}
                        for f in q.fragments
                    ],
                }
                for q in self.queries
            ],
        }


def load_federation(path: str | Path) -> FederationConfig:
    """Read a federation file: :class:`~spillway.errors.InputDataError` when it cannot be
    read or is not TOML (:func:`spillway.config.read_toml`), ConfigError naming the value that
    breaks a rule."""
    return FederationConfig.from_dict(read_toml(path, "federation file"))


__all__ = ["FederationConfig", "FragmentEntry", "QueryEntry", "load_federation"]
