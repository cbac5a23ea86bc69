"""The query coordinator's logic: result SIC over the STW, node liveness and reachability.

THEMIS gives every query a logically centralised *query coordinator* (§6) that sums the SIC of
the query's result tuples over the source time window (Eq. 4) and sends the value, every
shedding interval, to each node hosting one of the query's fragments (``updateSIC`` of
Algorithm 1). Fiscato's DISSP coordinator also watches the nodes of its query and notices
failed ones (§4.3). This module is that logic, pure and vectorised over all queries at once,
so the simulator (:mod:`spillway.sim`) and a Spark federation's coordinator service run the
same code; transport (delays, channels) is theirs.

- :class:`QueryLayout`: which node runs each fragment, how many sources it reads and where its
  output goes (edges from a fragment to the fragments that consume it).
- :class:`SicCoordinator`: records result tuples and node reports, and answers
  :meth:`SicCoordinator.update`, a :class:`SicUpdate` for the nodes.

Why it lives in ``quality/``
----------------------------
It is SIC accounting (Eq. 4 and the reach of Eq. 3 through a query graph) with no decision in
it and no Spark: ``policies/`` and ``control/`` decide, ``quality/`` measures. The node-side
half, the local projection of THEMIS §6, is :mod:`spillway.quality.projection`.

Decisions (not in the papers)
-----------------------------
*Eq. 4 exactly.* The sum covers results whose time is in ``[now - lag - STW, now - lag)`` for
any ``now`` (the slide-bucket ring of :class:`~spillway.quality.QuerySicLedger` is short by up
to a slide when asked off a boundary or late; see its Notes). A result's time is given by the
caller, not taken when it reaches the coordinator, so a delayed result counts in the window it
belongs to once it arrives. The simulator gives the time its root fragment produced it (THEMIS
``t^r_τ``, one window after its source tuples) with ``lag`` 0. A Spark federation gives the
result's *source* time (the start of the window it was computed from), because a micro-batch
there often spans several windows: counted when produced, a batch covering 7 s of source data
puts 7 s of SIC into the STW at once, and a query's value went above 1 (THEMIS §4's membership
rule wants the source tuples inside the STW). Queries younger than one STW are extrapolated
by ``STW / age``, as the ledger does.

*Where the STW ends: the nodes' progress.* With source times, the STW must end where the query's
results are complete. Each node reports, per fragment it hosts, how far it has processed in
source time (``done``: every result below it has been reported, or written to its link) and
the time its last processed batch's input was cut (``decided``: rows on a link later than that
were not read yet) (:meth:`SicCoordinator.progress`). A fragment's *watermark* ``E`` is its
``done``, capped, for every upstream fragment ``u`` on a live node, by the largest ``E_u`` the
coordinator had received by ``decided`` (what ``u`` had delivered before the cut; data a link
delivers after the cut is read by a later batch, so a later report lifts the cap): a root's
watermark only passes data its upstream links have delivered, hop by hop. A query's Eq. 4 sums
the STW ending at the least watermark of its live roots (all its roots when none lives), so a
late result is waited for, not lost, and nothing is counted before it is complete; a node that
stops reporting freezes only the queries it roots (an upstream on a lost node no longer caps
anything: its output is gone and the query's ceiling says so). With
:attr:`CoordinatorConfig.progress` (a Spark federation), a query without a watermark yet has
no complete STW and reads 0 (its STW ends at its origin): the STW ending a fixed ``lag`` ago
counted incomplete windows then. Without it (the simulator, whose result times are production
times) the STW ends ``lag`` (:attr:`CoordinatorConfig.lag_s`) before now. Results older than every query's
STW are dropped, and any older than :data:`RETAIN_S` behind the newest result (a watermark
stuck that long no longer holds the coordinator's memory).

*A node that stops reporting.* Every node reports to the coordinator (a heartbeat: each
shedding interval in the simulator). A node not heard from for more than ``timeout_s`` is
*lost*. Its fragments produce nothing, and so does every fragment whose output can no longer
reach a result (its only consumers are lost or themselves cut off): those are *orphaned*, and
a node should shed their tuples rather than spend capacity on work nobody receives.

*What the nodes balance when a node is lost.* Each fragment reaches the results with a weight
``w``: 1 for a live root, 0 for a lost fragment, otherwise the mean ``w`` of its consumers (a
replicated output gives each of ``k`` consumers ``1/k`` of the SIC, DISSP Assumption 9; a
partitioned one sends each ``1/k`` of the rows at full SIC: either way a consumer carries
``1/k``). A query's *ceiling* is ``sum(share_f * w_f)`` with ``share_f`` the fragment's sources
over the query's (Eq. 1 gives every source ``1/|S|``): 1 with every node alive, the most SIC the
query can still reach otherwise. :attr:`SicUpdate.balance` is ``sic / ceiling``: nodes balance
that, so a query that lost a third of its sources is served like the others on what it has
left, instead of drawing every node's capacity towards a SIC it can no longer reach; the
lost SIC still shows in :attr:`SicUpdate.sic`. A query with ceiling 0 has no result path.

References
----------
THEMIS (Kalyvianaki et al., SIGMOD 2016) §4 Eq. 4, §5.2 ``updateSIC``, §6 "query coordinator";
Fiscato, PhD thesis 2012, §4.3 (coordinator, failed nodes), Assumption 9 (replication).

Examples
--------
Query 0 is a chain: fragment 0 on node 0 feeds fragment 1 on node 1 (the root); query 1 runs
on node 1 alone.

>>> layout = QueryLayout(fragment_query=[0, 0, 1], fragment_node=[0, 1, 1],
...                      fragment_sources=[2, 2, 1], edge_from=[0], edge_to=[1])
>>> coord = SicCoordinator(layout, CoordinatorConfig(stw=StwConfig(stw_s=2.0, slide_s=0.5),
...                                                  timeout_s=1.0))
>>> coord.record(result_time=[0.5, 1.0, 1.5], query_index=[0, 1, 1], sic=[0.4, 0.5, 0.5])
>>> coord.heard(nodes=[0, 1], at=1.5)
>>> u = coord.update(now=2.0)
>>> u.sic.tolist(), u.ceiling.tolist(), u.lost_nodes
([0.4, 1.0], [1.0, 1.0], ())
>>> coord.heard(nodes=[1], at=3.5)          # node 0 falls silent
>>> u = coord.update(now=3.5)
>>> u.lost_nodes, u.ceiling.tolist(), u.balance.round(3).tolist()
((0,), [0.5, 1.0], [0.0, 0.5])
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spillway.errors import ConfigError
from spillway.quality.sic import StwConfig

#: Result chunks are kept this many STWs (and the lag) behind the newest result time, so a
#: window ending up to one STW before it (a late update) is still summed whole.
KEEP_STWS = 2.0

#: With progress reports, results are kept until every query's STW has passed them, but never
#: more than this many seconds behind the newest result time.
RETAIN_S = 600.0


def _ints(values: Any, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ConfigError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size and arr.dtype.kind not in "iu":
        raise ConfigError(f"{name} must hold whole numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.size and arr.min() < 0:
        raise ConfigError(f"{name} must be >= 0, got a value of {int(arr.min())}")
    return arr


@dataclass(frozen=True, kw_only=True, eq=False)
class QueryLayout:
    """The deployed query graphs as the coordinator sees them: fragments, nodes and edges.

    Parameters
    ----------
    fragment_query : int array (F,)
        Query of each fragment (``0 .. Q-1``; every query has at least one fragment).
    fragment_node : int array (F,)
        Node running each fragment (``0 .. N-1``).
    fragment_sources : int array (F,)
        Sources each fragment reads (``|S|`` of a query is their sum; at least 1 per query).
    edge_from, edge_to : int arrays (E,)
        Fragment ``edge_from[e]``'s output is consumed by fragment ``edge_to[e]`` (same query).
        A fragment without outgoing edges is a *root*: its output is the query's result.
    n_nodes : int, optional
        Number of nodes (default: the largest node index + 1).

    Raises
    ------
    ConfigError
        Mismatched lengths, an edge between queries or to itself, a cycle, a query without
        fragments or sources. (An acyclic graph always has a root: a fragment without
        outgoing edges.)

    Examples
    --------
    THEMIS's AVG-all tree: two leaves feed a root, 10 sources each.

    >>> t = QueryLayout(fragment_query=[0, 0, 0], fragment_node=[0, 1, 2],
    ...                 fragment_sources=[10, 10, 10], edge_from=[1, 2], edge_to=[0, 0])
    >>> t.root.tolist(), t.depth.tolist(), t.share.round(3).tolist()
    ([True, False, False], [0, 1, 1], [0.333, 0.333, 0.333])
    >>> QueryLayout(fragment_query=[0, 0], fragment_node=[0, 1], fragment_sources=[1, 1],
    ...             edge_from=[0, 1], edge_to=[1, 0])
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: the edges must not form a cycle (fragments 0, 1 are on one); every query graph is a DAG
    """

    fragment_query: np.ndarray
    fragment_node: np.ndarray
    fragment_sources: np.ndarray
    edge_from: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    edge_to: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    n_nodes: int | None = None
    _levels: list[np.ndarray] = field(init=False, repr=False)
    _out_deg: np.ndarray = field(init=False, repr=False)
    _q_sources: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        fq = _ints(self.fragment_query, "fragment_query")
        fn = _ints(self.fragment_node, "fragment_node")
        fs = _ints(self.fragment_sources, "fragment_sources")
        ef = _ints(self.edge_from, "edge_from")
        et = _ints(self.edge_to, "edge_to")
        n_f = fq.shape[0]
        if fn.shape[0] != n_f or fs.shape[0] != n_f:
            raise ConfigError(
                "fragment_query, fragment_node and fragment_sources must have one entry per "
                f"fragment, got lengths {n_f}, {fn.shape[0]}, {fs.shape[0]}"
            )
        if ef.shape != et.shape:
            raise ConfigError(
                f"edge_from and edge_to must have one length, got {ef.shape}, {et.shape}"
            )
        if ef.size and max(int(ef.max()), int(et.max())) >= n_f:
            raise ConfigError(f"edges must join fragments 0..{n_f - 1}")
        if ef.size and (fq[ef] != fq[et]).any():
            raise ConfigError("an edge must join two fragments of the same query")
        if ef.size and (ef == et).any():
            raise ConfigError("an edge must not lead from a fragment to itself")
        n_q = int(fq.max()) + 1 if n_f else 0
        if n_f and np.bincount(fq, minlength=n_q).min() == 0:
            raise ConfigError("every query index 0..Q-1 must have at least one fragment")
        q_src = np.bincount(fq, weights=fs, minlength=n_q)
        if n_q and q_src.min() < 1:
            bad = int(np.flatnonzero(q_src < 1)[0])
            raise ConfigError(f"query {bad} reads no source; every query needs at least one")
        n_nodes = int(fn.max()) + 1 if self.n_nodes is None and n_f else (self.n_nodes or 0)
        if isinstance(n_nodes, bool) or n_nodes < (int(fn.max()) + 1 if n_f else 0):
            raise ConfigError(f"n_nodes must exceed every fragment_node, got {self.n_nodes!r}")
        for name, v in (
            ("fragment_query", fq),
            ("fragment_node", fn),
            ("fragment_sources", fs),
            ("edge_from", ef),
            ("edge_to", et),
        ):
            object.__setattr__(self, name, v)
        object.__setattr__(self, "n_nodes", n_nodes)
        out_deg = np.bincount(ef, minlength=n_f)
        levels = _levels(n_f, ef, et, out_deg)
        object.__setattr__(self, "_levels", levels)
        object.__setattr__(self, "_out_deg", out_deg)
        object.__setattr__(self, "_q_sources", q_src)

    @property
    def n_fragments(self) -> int:
        """Number of fragments F."""
        return int(self.fragment_query.shape[0])

    @property
    def n_queries(self) -> int:
        """Number of queries Q."""
        return int(self._q_sources.shape[0])

    @property
    def query_sources(self) -> np.ndarray:
        """``|S|`` of every query: the sources of all its fragments (Q,)."""
        return self._q_sources.astype(np.int64)

    @property
    def share(self) -> np.ndarray:
        """Each fragment's share of its query's sources, ``sources / |S|`` (F,)."""
        return self.fragment_sources / self._q_sources[self.fragment_query]

    @property
    def root(self) -> np.ndarray:
        """Whether each fragment's output is its query's result (F,) bool."""
        return self._out_deg == 0

    @property
    def out_degree(self) -> np.ndarray:
        """Consumers of each fragment's output (F,)."""
        return self._out_deg.copy()

    @property
    def depth(self) -> np.ndarray:
        """Hops from each fragment to a root along the longest path (F,); roots are 0."""
        out = np.zeros(self.n_fragments, dtype=np.int64)
        for d, frags in enumerate(self._levels):
            out[frags] = d
        return out

    def reach(self, node_alive: Any) -> tuple[np.ndarray, np.ndarray]:
        """How much of each fragment's output reaches a result, given which nodes are alive.

        Parameters
        ----------
        node_alive : bool array (N,)

        Returns
        -------
        weight : float array (F,)
            1 for a live root, 0 for a fragment on a lost node, else the mean weight of its
            consumers (see the module notes).
        ceiling : float array (Q,)
            ``sum(share * weight)`` per query: the SIC it reaches with nothing shed.

        Examples
        --------
        >>> t = QueryLayout(fragment_query=[0, 0, 0], fragment_node=[0, 1, 2],
        ...                 fragment_sources=[10, 10, 10], edge_from=[1, 2], edge_to=[0, 0])
        >>> w, c = t.reach([True, True, False])
        >>> w.tolist(), c.round(3).tolist()
        ([1.0, 1.0, 0.0], [0.667])
        """
        alive = np.asarray(node_alive, dtype=bool)
        if alive.shape != (self.n_nodes,):
            raise ConfigError(
                f"node_alive must have one entry per node ({self.n_nodes}), got {alive.shape}"
            )
        frag_alive = alive[self.fragment_node]
        w = np.zeros(self.n_fragments)
        got = np.zeros(self.n_fragments)
        levels = self._levels
        ef, et, deg = self.edge_from, self.edge_to, self._out_deg
        for d, frags in enumerate(levels):
            if d == 0:
                w[frags] = 1.0
            else:
                w[frags] = got[frags] / deg[frags]
            w[frags] *= frag_alive[frags]
            if d + 1 < len(levels):
                into = np.isin(et, frags)
                np.add.at(got, ef[into], w[et[into]])
        ceiling = np.bincount(self.fragment_query, weights=self.share * w, minlength=self.n_queries)
        return w, ceiling


def _levels(n_f: int, ef: np.ndarray, et: np.ndarray, out_deg: np.ndarray) -> list[np.ndarray]:
    """Fragments grouped by longest distance to a root (level 0 = roots); raises on a cycle."""
    remaining = out_deg.copy()
    level = np.flatnonzero(remaining == 0)
    done = np.zeros(n_f, dtype=bool)
    levels: list[np.ndarray] = []
    while level.size:
        levels.append(level)
        done[level] = True
        into = np.isin(et, level)
        np.subtract.at(remaining, ef[into], 1)
        level = np.flatnonzero((remaining == 0) & ~done)
    if not done.all():
        cyc = np.flatnonzero(~done)
        raise ConfigError(
            f"the edges must not form a cycle (fragments {', '.join(map(str, cyc[:5]))} are on "
            "one); every query graph is a DAG"
        )
    return levels


@dataclass(frozen=True, kw_only=True)
class CoordinatorConfig:
    """Settings of :class:`SicCoordinator`.

    Parameters
    ----------
    stw : StwConfig
        The source time window Eq. 4 sums over (THEMIS: 10 s sliding every 250 ms).
    timeout_s : float
        A node not heard from for longer than this is lost (> 0).
    lag_s : float
        Without ``progress``, Eq. 4 sums the STW ending this long before now (>= 0; default
        0, the STW ending now).
    progress : bool
        The nodes report their progress (a Spark federation): each query's STW ends at its
        watermark (module notes), ``lag_s`` is not used, and a query without a watermark yet
        (no STW complete) ends it at its origin, so it reads 0.

    Examples
    --------
    >>> CoordinatorConfig(timeout_s=0)
    Traceback (most recent call last):
    ...
    spillway.errors.ConfigError: timeout_s must be a finite number > 0 (seconds without a report before a node counts as lost), got 0
    """

    stw: StwConfig = field(default_factory=StwConfig)
    timeout_s: float = 1.0
    lag_s: float = 0.0
    progress: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.progress, bool):
            raise ConfigError(f"progress must be True or False, got {self.progress!r}")
        if not isinstance(self.stw, StwConfig):
            raise ConfigError(f"stw must be a StwConfig, got {type(self.stw).__name__}")
        lag = self.lag_s
        if isinstance(lag, bool) or not isinstance(lag, int | float) or not lag >= 0:
            raise ConfigError(
                "lag_s must be a finite number >= 0 (seconds between the end of the STW Eq. 4 "
                f"sums and now), got {lag!r}"
            )
        if not math.isfinite(lag):
            raise ConfigError(f"lag_s must be finite (seconds), got {lag!r}")
        t = self.timeout_s
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t <= 0:
            raise ConfigError(
                "timeout_s must be a finite number > 0 (seconds without a report before a node "
                f"counts as lost), got {t!r}"
            )


@dataclass(frozen=True, kw_only=True, eq=False)
class SicUpdate:
    """What the coordinator tells the nodes at one instant (THEMIS ``updateSIC``).

    Parameters
    ----------
    as_of : float
        The instant the values were computed.
    sic : float array (Q,)
        Every query's result SIC (Eq. 4), never clipped.
    ceiling : float array (Q,)
        The SIC each query can reach with the nodes that are alive (1 with all of them).
    lost_nodes : tuple of int
        Nodes not heard from within the timeout.
    orphaned : bool array (F,)
        Fragments on live nodes whose output no longer reaches any result.
    stw_end : float array (Q,), optional
        Where each query's STW ends: ``sic`` sums ``[stw_end - STW, stw_end)`` (its roots'
        watermark, or ``as_of - lag``); None: ``as_of``.
    """

    as_of: float
    sic: np.ndarray
    ceiling: np.ndarray
    lost_nodes: tuple[int, ...]
    orphaned: np.ndarray
    stw_end: np.ndarray | None = None

    @property
    def balance(self) -> np.ndarray:
        """``sic / ceiling`` (0 where the ceiling is 0): the value nodes balance (Q,).

        >>> u = SicUpdate(as_of=1.0, sic=np.array([0.2, 0.1]), ceiling=np.array([0.5, 0.0]),
        ...               lost_nodes=(1,), orphaned=np.zeros(3, dtype=bool))
        >>> u.balance.tolist()
        [0.4, 0.0]
        """
        out = np.zeros_like(self.sic)
        np.divide(self.sic, self.ceiling, out=out, where=self.ceiling > 0)
        return out


class SicCoordinator:
    """Eq. 4 per query, node liveness and reachability, for every query of a layout.

    Parameters
    ----------
    layout : QueryLayout
    config : CoordinatorConfig
    origin_s : float or array (Q,)
        When each query was deployed: Eq. 4 is extrapolated while a query is younger than one
        STW, and every node counts as heard from at the earliest origin.

    Raises
    ------
    ConfigError
        A wrong layout or config type, or origins of the wrong shape or not finite.

    Examples
    --------
    >>> layout = QueryLayout(fragment_query=[0], fragment_node=[0], fragment_sources=[1])
    >>> c = SicCoordinator(layout, CoordinatorConfig(stw=StwConfig(stw_s=4.0, slide_s=1.0)))
    >>> c.record([0.5, 1.5], [0, 0], [0.25, 0.25])
    >>> c.query_sic(2.0).tolist(), c.query_sic(4.0).tolist(), c.query_sic(5.0).tolist()
    ([1.0], [0.5], [0.25])
    """

    def __init__(self, layout: QueryLayout, config: CoordinatorConfig, origin_s: Any = 0.0) -> None:
        if not isinstance(layout, QueryLayout):
            raise ConfigError(f"layout must be a QueryLayout, got {type(layout).__name__}")
        if not isinstance(config, CoordinatorConfig):
            raise ConfigError(f"config must be a CoordinatorConfig, got {type(config).__name__}")
        self.layout = layout
        self.config = config
        origin = np.asarray(origin_s, dtype=np.float64)
        q = layout.n_queries
        if origin.ndim > 1 or (origin.ndim == 1 and origin.shape[0] != q):
            raise ConfigError(
                f"origin_s must be one time or one per query ({q}), got shape {origin.shape}"
            )
        if not np.isfinite(origin).all():
            raise ConfigError(f"origin_s must be finite (seconds), got {origin_s!r}")
        self._origin = np.array(np.broadcast_to(origin, (q,)), dtype=np.float64)
        start = float(self._origin.min()) if q else 0.0
        self._heard = np.full(int(layout.n_nodes or 0), start)
        self._chunks: deque[_Chunk] = deque()
        self._newest = -math.inf
        n_f = layout.n_fragments
        self._done = np.full(n_f, np.nan)  # per fragment: reported progress (module notes)
        self._decided = np.full(n_f, np.nan)
        self._mark = np.full(n_f, np.nan)  # the fragments' watermarks E
        self._marks: list[deque[tuple[float, float]]] = [deque() for _ in range(n_f)]
        self._floor = -math.inf  # no query's STW starts before this any more
        self._reach_key: bytes | None = None
        self._reach: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0))
        self.expired = 0

    def record(self, result_time: Any, query_index: Any, sic: Any) -> None:
        """Record result tuples (or a window's result rows summed into one), any queries.

        Parameters
        ----------
        result_time : float array (R,)
            Each result's time: when it was produced (THEMIS ``t^r_τ``), or its source time
            (see the module notes).
        query_index : int array (R,)
        sic : float array (R,), >= 0

        Raises
        ------
        ConfigError
            Mismatched shapes, unknown queries, negative or non-finite values.
        """
        t = np.atleast_1d(np.asarray(result_time, dtype=np.float64))
        q = np.atleast_1d(np.asarray(query_index))
        s = np.atleast_1d(np.asarray(sic, dtype=np.float64))
        if t.ndim != 1 or q.shape != t.shape or s.shape != t.shape:
            raise ConfigError(
                "result_time, query_index and sic must be 1-D arrays of one length, got shapes "
                f"{t.shape}, {q.shape}, {s.shape}"
            )
        if t.size == 0:
            return
        if not np.isfinite(t).all():
            raise ConfigError("result_time must be finite (seconds)")
        if q.dtype.kind not in "iu" or q.min() < 0 or q.max() >= self.layout.n_queries:
            raise ConfigError(f"query_index must be ints in 0..{self.layout.n_queries - 1}")
        if not np.isfinite(s).all() or s.min() < 0:
            raise ConfigError("sic must be finite and >= 0")
        self._chunks.append(_Chunk(t, q.astype(np.int64), s))
        self._newest = max(self._newest, float(t.max()))
        keep_from = self._newest - KEEP_STWS * self.config.stw.stw_s - self.config.lag_s
        if self.config.progress or np.isfinite(self._mark).any():  # keep what an STW needs
            keep_from = max(min(keep_from, self._floor), self._newest - RETAIN_S)
        while self._chunks and self._chunks[0].t_max < keep_from:
            self.expired += int(self._chunks.popleft().t.size)

    def progress(self, fragments: Any, done: Any, decided: Any, at: float) -> None:
        """Record how far the nodes have processed their fragments (module notes).

        Parameters
        ----------
        fragments : int array (K,)
            Fragments (layout indices) a node hosts.
        done : float array (K,)
            Source time below which every result of the fragment has been reported or sent
            downstream (NaN: nothing yet).
        decided : float array (K,)
            When the input of the fragment's last processed batch was cut (the node's clock):
            rows its links delivered after it are not in ``done`` yet.
        at : float
            The coordinator's clock when the report arrived.

        Raises
        ------
        ConfigError
            Mismatched shapes, unknown fragments, infinite times or ``at``.

        Examples
        --------
        A leaf (fragment 1) feeds a root (fragment 0): the root's watermark waits for what the
        leaf had delivered when the root cut its input.

        >>> layout = QueryLayout(fragment_query=[0, 0], fragment_node=[0, 1],
        ...                      fragment_sources=[1, 1], edge_from=[1], edge_to=[0])
        >>> c = SicCoordinator(layout, CoordinatorConfig(timeout_s=100.0))
        >>> c.progress([1], done=[20.0], decided=[25.0], at=30.0)  # leaf done to 20 at 30
        >>> c.progress([0], done=[28.0], decided=[29.0], at=31.0)  # cut before 30: not read
        >>> c.watermark(31.0).tolist()
        [nan]
        >>> c.progress([0], done=[33.0], decided=[34.0], at=36.0)  # cut after: all of it
        >>> c.watermark(36.0).tolist()
        [20.0]
        """
        f = _ints(np.atleast_1d(np.asarray(fragments)), "fragments")
        d = np.atleast_1d(np.asarray(done, dtype=np.float64))
        c = np.atleast_1d(np.asarray(decided, dtype=np.float64))
        if d.shape != f.shape or c.shape != f.shape:
            raise ConfigError(
                "fragments, done and decided must be 1-D arrays of one length, got shapes "
                f"{f.shape}, {d.shape}, {c.shape}"
            )
        if f.size and f.max() >= self.layout.n_fragments:
            raise ConfigError(f"fragments must be in 0..{self.layout.n_fragments - 1}")
        if np.isinf(d).any() or np.isinf(c).any() or not math.isfinite(float(at)):
            raise ConfigError("done, decided and at must be finite seconds (NaN: nothing yet)")
        ok = ~np.isnan(d) & ~np.isnan(c)
        self._done[f[ok]] = np.fmax(self._done[f[ok]], d[ok])
        self._decided[f[ok]] = np.fmax(self._decided[f[ok]], c[ok])
        self._propagate(float(at))

    def _delivered(self, frag: int, by: float) -> float:
        """The largest watermark of ``frag`` the coordinator had by ``by`` (NaN: none)."""
        best = math.nan
        for at, mark in self._marks[frag]:
            if at > by:
                break
            best = mark
        return best

    def _propagate(self, at: float) -> None:
        """Every fragment's watermark from the leaves to the roots, as of ``at``."""
        lay = self.layout
        alive = self.node_alive(at)[lay.fragment_node]
        for level in reversed(lay._levels):  # leaves first
            for f in level.tolist():
                mark = self._done[f]
                for u in lay.edge_from[lay.edge_to == f].tolist():
                    if alive[u]:  # a lost upstream's output is gone: no cap
                        got = self._delivered(u, self._decided[f])
                        mark = math.nan if math.isnan(got) else min(mark, got)
                if not np.isnan(mark) and not mark <= self._mark[f]:
                    self._mark[f] = mark
                    self._marks[f].append((at, float(mark)))
                    while len(self._marks[f]) > 1 and self._marks[f][1][0] <= at - RETAIN_S:
                        self._marks[f].popleft()

    def watermark(self, now: float) -> np.ndarray:
        """Every query's watermark: the least of its live roots' (all its roots' when none
        lives), NaN while one has not reported progress (Q,)."""
        lay = self.layout
        root = lay.root
        live = root & self.node_alive(now)[lay.fragment_node]
        has_live = np.bincount(lay.fragment_query[live], minlength=lay.n_queries) > 0
        use = np.where(has_live[lay.fragment_query], live, root)
        mark = np.where(use, self._mark, np.inf)
        out = np.full(lay.n_queries, np.inf)
        with np.errstate(invalid="ignore"):  # NaN propagates: a root not heard of yet
            np.minimum.at(out, lay.fragment_query, mark)
        return out

    def stw_end(self, now: float) -> np.ndarray:
        """Where each query's STW ends at ``now``: its watermark; for a query without one,
        its origin with ``progress`` (no STW complete yet), else ``now - lag``; never after
        ``now`` (Q,)."""
        now = float(now)
        if not math.isfinite(now):
            raise ConfigError(f"now must be finite (seconds), got {now!r}")
        mark = self.watermark(now)
        none = self._origin if self.config.progress else now - self.config.lag_s
        return np.where(np.isnan(mark), none, np.minimum(mark, now))

    def heard(self, nodes: Any, at: float) -> None:
        """Record reports (heartbeats) from ``nodes`` sent at time ``at``.

        >>> layout = QueryLayout(fragment_query=[0], fragment_node=[1], fragment_sources=[1])
        >>> c = SicCoordinator(layout, CoordinatorConfig(timeout_s=1.0))
        >>> c.heard([1], at=5.0); c.node_alive(now=5.5).tolist(), c.node_alive(now=7.0).tolist()
        ([False, True], [False, False])
        """
        n = _ints(np.atleast_1d(nodes), "nodes")
        n_nodes = int(self.layout.n_nodes or 0)
        if n.size and n.max() >= n_nodes:
            raise ConfigError(f"nodes must be in 0..{n_nodes - 1}")
        at_f = float(at)
        if not math.isfinite(at_f):
            raise ConfigError(f"at must be finite (seconds), got {at!r}")
        np.maximum.at(self._heard, n, at_f)

    def node_alive(self, now: float) -> np.ndarray:
        """Whether each node was heard from within ``timeout_s`` before ``now`` (N,)."""
        return (float(now) - self._heard) <= self.config.timeout_s

    def query_sic(self, now: float) -> np.ndarray:
        """Every query's result SIC over ``[end - STW, end)`` (THEMIS Eq. 4), ``end`` its
        :meth:`stw_end` at ``now``, (Q,).

        Extrapolated by ``STW / age`` for queries younger than one STW at ``end`` (0 before
        their origin); never clipped.

        >>> layout = QueryLayout(fragment_query=[0], fragment_node=[0], fragment_sources=[1])
        >>> cfg = CoordinatorConfig(stw=StwConfig(stw_s=4.0, slide_s=1.0), lag_s=2.0)
        >>> c = SicCoordinator(layout, cfg, origin_s=-10.0)
        >>> c.record([0.5, 3.5, 4.5], [0, 0, 0], [0.25, 0.25, 0.25])
        >>> c.query_sic(6.0).tolist(), c.query_sic(7.0).tolist()   # [0, 4), then [1, 5)
        ([0.5], [0.5])
        """
        end = self.stw_end(now)
        n_q = self.layout.n_queries
        stw = self.config.stw.stw_s
        lo = end - stw
        lo_min, lo_max = (float(lo.min()), float(lo.max())) if n_q else (0.0, 0.0)
        end_min, end_max = (float(end.min()), float(end.max())) if n_q else (0.0, 0.0)
        if n_q:
            self._floor = max(self._floor, lo_min)
        raw = np.zeros(n_q)
        for c in self._chunks:
            if c.t_max < lo_min or c.t_min >= end_max:
                continue
            if c.t_min >= lo_max and c.t_max < end_min:
                raw += c.totals(n_q)
            else:
                inside = (c.t >= lo[c.q]) & (c.t < end[c.q])
                raw += np.bincount(c.q[inside], weights=c.s[inside], minlength=n_q)
        age = end - self._origin
        scale = np.where(age >= stw, 1.0, 0.0)
        young = (age > 0) & (age < stw)
        scale[young] = stw / age[young]
        return raw * scale

    def update(self, now: float) -> SicUpdate:
        """The message for the nodes at ``now``: Eq. 4, ceilings, lost nodes, orphans.

        Reachability is recomputed only when the set of live nodes changes.
        """
        alive = self.node_alive(now)
        key = np.packbits(alive).tobytes()
        if key != self._reach_key:
            self._reach = self.layout.reach(alive)
            self._reach_key = key
        w, ceiling = self._reach
        frag_alive = alive[self.layout.fragment_node]
        return SicUpdate(
            as_of=float(now),
            stw_end=self.stw_end(now),
            sic=self.query_sic(now),
            ceiling=ceiling.copy(),
            lost_nodes=tuple(int(n) for n in np.flatnonzero(~alive)),
            orphaned=frag_alive & (w <= 0),
        )


class _Chunk:
    """Results recorded together, with their per-query totals cached once needed whole."""

    __slots__ = ("_totals", "q", "s", "t", "t_max", "t_min")

    def __init__(self, t: np.ndarray, q: np.ndarray, s: np.ndarray) -> None:
        self.t, self.q, self.s = t, q, s
        self.t_min, self.t_max = float(t.min()), float(t.max())
        self._totals: np.ndarray | None = None

    def totals(self, n_q: int) -> np.ndarray:
        if self._totals is None:
            self._totals = np.bincount(self.q, weights=self.s, minlength=n_q)
        return self._totals


__all__ = ["CoordinatorConfig", "QueryLayout", "SicCoordinator", "SicUpdate"]
