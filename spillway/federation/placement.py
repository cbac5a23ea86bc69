"""Which fragments a node hosts and the Kafka links between them (from the federation file).

A fragment whose ``to`` names consumers sends its output rows to each of them through a *link
topic*, one per consuming fragment, ``<prefix>.<query>.<consumer>``; every upstream fragment
of that consumer writes its own partition (numbered by its position in the query, among the
consumer's producers), as :class:`~spillway.federation.link.LinkWriter` requires one writer a
partition. A replicated output (``to`` naming ``k`` consumers) gives each copy ``1/k`` of the
rows' SIC (DISSP Assumption 9; THEMIS Eq. 3): :attr:`LinkOut.share`. A consumer adds the SIC of
what it receives, so SIC is carried across nodes, never created.

Examples
--------
>>> from spillway.federation.config import FederationConfig
>>> cfg = FederationConfig.from_dict({
...     "nodes": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
...     "queries": [{"name": "avg", "fragments": [
...         {"name": "leaf", "node": "a", "sources": 10, "to": ["root", "copy"]},
...         {"name": "root", "node": "b", "sources": 10},
...         {"name": "copy", "node": "c", "sources": 0}]}]})
>>> a = node_links(cfg, "a")
>>> [(o.fragment, o.topic, o.partition, o.share) for o in a.outputs]
[('avg/leaf', 'spillway-link.avg.root', 0, 0.5), ('avg/leaf', 'spillway-link.avg.copy', 0, 0.5)]
>>> b = node_links(cfg, "b")
>>> b.fragments, [(i.fragment, i.topic, i.partitions) for i in b.inputs]
(('avg/root',), [('avg/root', 'spillway-link.avg.root', 1)])
>>> node_links(cfg, "z")
Traceback (most recent call last):
...
spillway.errors.ConfigError: node must be one of a, b, c, got 'z'
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spillway.errors import ConfigError
from spillway.federation.config import FederationConfig

#: The default prefix of link topic names.
LINK_PREFIX = "spillway-link"

_TOPIC_TEXT = re.compile(r"^[A-Za-z0-9._-]+$")


def fragment_id(query: str, fragment: str) -> str:
    """The federation-wide name of a fragment, ``<query>/<fragment>``."""
    return f"{query}/{fragment}"


def link_topic(query: str, consumer: str, *, prefix: str = LINK_PREFIX) -> str:
    """The topic feeding fragment ``consumer`` of ``query``.

    Raises
    ------
    ConfigError
        A name with characters Kafka refuses in topic names (only letters, digits, ``.``,
        ``_`` and ``-``): rename the query or fragment.
    """
    topic = f"{prefix}.{query}.{consumer}"
    if not _TOPIC_TEXT.match(topic) or len(topic) > 249:
        raise ConfigError(
            f"link topic {topic!r} (prefix.query.fragment) must be at most 249 letters, digits, "
            "'.', '_' or '-'; rename the query or fragment"
        )
    return topic


@dataclass(frozen=True, kw_only=True)
class LinkOut:
    """One upstream fragment's copy of its output to one consumer."""

    fragment: str
    query_id: int
    topic: str
    partition: int
    share: float


@dataclass(frozen=True, kw_only=True)
class LinkIn:
    """The link topic a hosted consumer fragment reads (one partition per producer)."""

    fragment: str
    query_id: int
    topic: str
    partitions: int


@dataclass(frozen=True, kw_only=True)
class NodeLinks:
    """A node's hosted fragments (``<query>/<fragment>``), their outputs and inputs."""

    node: str
    fragments: tuple[str, ...]
    outputs: tuple[LinkOut, ...]
    inputs: tuple[LinkIn, ...]


def all_topics(cfg: FederationConfig, *, prefix: str = LINK_PREFIX) -> dict[str, int]:
    """Every link topic of the federation and its number of partitions (its producers)."""
    out: dict[str, int] = {}
    for node in cfg.nodes:
        for i in node_links(cfg, node, prefix=prefix).inputs:
            out[i.topic] = i.partitions
    return out


def node_links(cfg: FederationConfig, node: str, *, prefix: str = LINK_PREFIX) -> NodeLinks:
    """The fragments ``node`` hosts and their links (queries and fragments in file order).

    Raises
    ------
    ConfigError
        No such node, or a name unfit for a topic (:func:`link_topic`).
    """
    cfg.node_index(node)
    frags: list[str] = []
    outs: list[LinkOut] = []
    ins: list[LinkIn] = []
    for qi, q in enumerate(cfg.queries):
        producers: dict[str, list[str]] = {f.name: [] for f in q.fragments}
        for f in q.fragments:
            for t in f.to:
                producers[t].append(f.name)
        for f in q.fragments:
            if f.node != node:
                continue
            frags.append(fragment_id(q.name, f.name))
            for t in f.to:
                outs.append(
                    LinkOut(
                        fragment=fragment_id(q.name, f.name),
                        query_id=qi,
                        topic=link_topic(q.name, t, prefix=prefix),
                        partition=producers[t].index(f.name),
                        share=1.0 / len(f.to),
                    )
                )
            if producers[f.name]:
                ins.append(
                    LinkIn(
                        fragment=fragment_id(q.name, f.name),
                        query_id=qi,
                        topic=link_topic(q.name, f.name, prefix=prefix),
                        partitions=len(producers[f.name]),
                    )
                )
    return NodeLinks(node=node, fragments=tuple(frags), outputs=tuple(outs), inputs=tuple(ins))


__all__ = [
    "LINK_PREFIX",
    "LinkIn",
    "LinkOut",
    "NodeLinks",
    "all_topics",
    "fragment_id",
    "link_topic",
    "node_links",
]
