"""The strategy contract: ``plan(loads, n_nodes, tolerance) -> MigrationPlan``.

A key-level strategy is a small subclass of :class:`Strategy`. It reads a
:class:`PlanView` of the window (rows grouped by node, node loads, mean, ``UL``, the
current router) and returns a :class:`Delta`: the rows whose load changes and the parts
it adds. The base class does the shared work once (the Params were checked at the door,
``ExperimentSpec.checked``): timing (``O1``), the physical moves, the router after the
plan (``O2``), the migrated state (``O3``) and the imbalance before and after. After a
plan the strategy routes with the new router.

**The window contract.** ``plan`` assumes the window was routed by the strategy's
current router: a key outside the routing table ``Y`` is whole on its home node, a key in
``Y`` is on (a subset of) its ``Y`` nodes. That is what a running system reports, and it
lets a plan touch only the keys it moves instead of hashing and sorting all ``K`` keys.
A strategy created without ``n_nodes`` has no router yet: its first plan *adopts* the
window's placement exactly (``adopt``), whatever it is (a bucket map, which cannot hold an
arbitrary placement, starts from its default map instead: ``BalanceLoadStrategy.adopt``).
"""

from __future__ import annotations

from abc import ABC
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from balancebench.core.cost_model import plan_clock
from balancebench.core.loads import KeyLoads, imbalance
from balancebench.core.operators import OPERATORS, Operator
from balancebench.core.routing_table import RoutingTable, segment_starts


@dataclass(frozen=True)
class PlanView:
    """One window as a strategy sees it (read-only)."""

    loads: KeyLoads  # rows grouped by node
    offsets: np.ndarray  # node d's rows: offsets[d]:offsets[d + 1]
    n_nodes: int
    tolerance: float
    node_loads: np.ndarray  # L(d)
    mean: float  # Lbar
    upper: float  # UL = (1 + tau) * Lbar
    eps: float  # float slack for comparisons of loads
    router: Any

    def rows(self, d: int) -> slice:
        return slice(int(self.offsets[d]), int(self.offsets[d + 1]))


@dataclass
class Delta:
    """What a plan changes: ``rows`` of the view get ``new_load``/``new_state``, and the
    parts ``add_*`` are added (summed with an existing part of the same key and node).
    ``router`` is set by strategies that route with something other than ``Y``."""

    rows: np.ndarray
    new_load: np.ndarray
    new_state: np.ndarray
    add_key: np.ndarray
    add_node: np.ndarray
    add_load: np.ndarray
    add_state: np.ndarray
    router: Any = None
    #: Optional: the row each added part was taken from (all of its load and state).
    #: A strategy that knows it lets the plan skip matching sources to sinks.
    add_src_row: np.ndarray | None = None
    #: Strategy-specific facts about the plan (e.g. why a budgeted search stopped).
    info: dict[str, Any] | None = None

    @classmethod
    def empty(cls) -> Delta:
        f, i = np.zeros(0), np.zeros(0, dtype=np.int64)
        return cls(i, f, f, i, i.astype(np.int32), f, f)


@dataclass(frozen=True)
class MigrationPlan:
    """A migration plan ``MP`` (paper 000, Algorithm 2) with its costs.

    ``moves`` are parallel arrays ``key, amount, from_node, to_node``: move ``amount`` of
    the key's load (tuples of the window) from one node to another, with the
    proportional share of the key's state on ``from_node``.
    """

    strategy: str
    n_nodes: int
    tolerance: float
    move_key: np.ndarray
    move_amount: np.ndarray
    move_from: np.ndarray
    move_to: np.ndarray
    #: The router after the plan (``RoutingTable`` for paper 000's strategies).
    routing_table: Any
    #: O1: CPU time of ``plan()`` in milliseconds (``cost_model.plan_clock``): grouping the
    #: loads by node, deciding the moves, building the router, and counting the migrated
    #: state (O3) and node loads after (plus any ``extra_plan_work_ms``); the imbalance and
    #: split-key counts are not included.
    plan_time_ms: float
    #: O3: state tuples that change node (``amount / load * state`` summed over moves).
    migrated_state_tuples: float
    #: Keys on more than one node after the plan.
    split_keys: int
    #: ``max L / mean L - 1`` before and after the plan.
    imbalance_before: float
    imbalance_after: float
    node_loads_before: np.ndarray = field(repr=False)
    node_loads_after: np.ndarray = field(repr=False)
    #: False when the strategy stopped (budget, no improving move) above the tolerance.
    reached_tolerance: bool = True
    #: Strategy-specific facts (``Delta.info``), e.g. readj's stop reason.
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def routing_table_entries(self) -> int:
        """O2: entries of the router after the plan (keys in ``Y``; moved buckets)."""
        return len(self.routing_table)

    @property
    def n_moves(self) -> int:
        return len(self.move_key)

    @property
    def moved_load(self) -> float:
        return float(self.move_amount.sum())


#: Sides of a join key under the two-stream rule (``Strategy.replicated_sides``).
NO_SIDE, SIDE_R, SIDE_S = 0, 1, 2


class Strategy(ABC):
    """Base of every strategy. Its family is ``kind`` (with ``per_tuple``), and the family
    decides the runner (``spark.runners``): a key-level planner sets ``name`` and
    ``_rebalance``; a per-tuple router ``per_tuple`` and ``route_sender``; a join
    architecture and a Spark-native baseline their own class attributes."""

    name: ClassVar[str]
    #: Paper section the class implements (shown in docs and logged as a tag).
    reference: ClassVar[str] = ""
    #: Operators this strategy can serve correctly (a workload checks this before any run).
    operators: ClassVar[frozenset[Operator]] = frozenset(OPERATORS.values())
    #: Whether ``plan`` can move data at all (``hash``, ``pkg`` never do).
    plans: ClassVar[bool] = True
    #: ``key_level`` (routes by key with ``routing``), ``join_architecture`` (Dynamic,
    #: BiStream: its own tuple placement) or ``spark_native`` (a Spark baseline).
    kind: ClassVar[str] = "key_level"
    #: A key-level strategy that routes each sender's tuples in order (``route_sender``)
    #: and never plans: pkg, dchoices, wchoices.
    per_tuple: ClassVar[bool] = False
    #: A per-tuple router the JVM's per-sender router (``spark/jvm/PerSenderRouting.java``)
    #: can run, configured by ``decision_settings``: the PKG family (``pkg.PkgStrategy``
    #: and its subclasses). Another per-tuple router runs ``route_sender`` in a Python
    #: worker.
    jvm_router: ClassVar[bool] = False
    #: Whether its nodes can join a running job (Param ``node_capacity_state_tuples``,
    #: joins only; ``strategies.SCALE_OUT`` lists them).
    scales_out: ClassVar[bool] = False
    #: JSON schema of the strategy's own parameters (name -> schema with ``default``);
    #: they become DAG Params ``<strategy>_<name>`` and are logged to MLflow.
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {}
    #: Busy work added to every plan (ms of driver CPU, charged as plan time). Only the
    #: nightly sweep's regression test sets it (``sweep_pipeline.TEST_SLOW_PLANS_ENV``).
    extra_plan_work_ms: float = 0.0

    def __init__(self, n_nodes: int | None = None, **params: Any) -> None:
        unknown = sorted(set(params) - set(self.param_schema))
        if unknown:
            raise TypeError(f"unknown parameter(s) {unknown}; allowed: {sorted(self.param_schema)}")
        self.settings = {k: spec["default"] for k, spec in self.param_schema.items()}
        self.settings.update(params)
        self.routing: Any = None
        if n_nodes is not None:
            self.routing = self.initial_router(n_nodes)

    @classmethod
    def check_n_nodes(cls, n_nodes: int, settings: dict[str, Any]) -> None:
        """``ValueError`` naming ``n_nodes`` if the strategy cannot take its shape on
        ``n_nodes`` nodes with these settings (checked at the door by the Params). Every
        strategy but Bi6 takes any ``N >= 1``."""
        return None

    def params(self) -> dict[str, object]:
        """The strategy's own parameters (logged to MLflow)."""
        return dict(self.settings)

    def initial_router(self, n_nodes: int) -> Any:
        """The router before any plan: base routing ``F(k)`` only."""
        return RoutingTable.empty(n_nodes)

    def routing_for(self, n_nodes: int) -> Any:
        """The current router (the initial one until the first plan or on a new N)."""
        if self.routing is None or self.routing.n_nodes != n_nodes:
            self.routing = self.initial_router(n_nodes)
        return self.routing

    def adopt(self, loads: KeyLoads, n_nodes: int) -> None:
        """Take the window's placement, whatever it is, as the current routing table."""
        key, node, load, _ = aggregate_parts(loads.key, loads.node, loads.load, loads.state)
        self.routing = RoutingTable.from_parts(key, node, load, n_nodes)

    def plan(self, loads: KeyLoads, n_nodes: int, tolerance: float) -> MigrationPlan:
        """Plan a migration for the window ``loads``; the strategy adopts its router.

        ``n_nodes`` (an integer in [1, ``schema.MAX_NODES``], and a shape the strategy can take:
        :meth:`check_n_nodes`) and ``tolerance`` (in (0, 10]) were checked once, with the
        other Params, at the door (``ExperimentSpec.checked``); they are not checked again
        here. That the window's loads lie on these nodes is an invariant of the engine."""
        loads.assert_on_nodes(n_nodes)
        if self.routing is None and self.plans:
            self.adopt(loads, n_nodes)
        router = self.routing_for(n_nodes)
        started = plan_clock()
        if self.extra_plan_work_ms > 0:
            _busy_work(started + self.extra_plan_work_ms / 1e3)
        grouped, offsets = loads.grouped_by_node(n_nodes)
        view = _view(grouped, offsets, n_nodes, float(tolerance), router)
        if not self.plans:
            elapsed = plan_clock() - started
            return _unchanged_plan(self.name, view, elapsed)
        delta = self._rebalance(view)
        plan = _finish_plan(self.name, view, delta, started)
        self.routing = plan.routing_table
        return plan

    def _rebalance(self, view: PlanView) -> Delta:
        """The moves of one plan as a :class:`Delta`; must conserve every key's load."""
        return Delta.empty()

    def replicated_sides(self, r_tuples: np.ndarray, s_tuples: np.ndarray) -> np.ndarray:
        """Paper 000's two-stream rule for split keys of an equi-join: per key (given
        the tuples each side of it holds), the side whose tuples are replicated to every
        node of ``Y(k)`` (``SIDE_R`` / ``SIDE_S``) or ``NO_SIDE`` (every probe goes to all
        nodes of ``Y(k)``, Algorithm 1). Off unless a strategy says otherwise."""
        return np.full(len(r_tuples), NO_SIDE, dtype=np.int8)


def _busy_work(until: float) -> None:
    """Spin on the CPU until :func:`plan_clock` reaches ``until`` (real work, not a
    sleep: the plan's clock and the machine both see it)."""
    x = 0
    while plan_clock() < until:
        x += 1


def _view(
    loads: KeyLoads, offsets: np.ndarray, n_nodes: int, tolerance: float, router: Any
) -> PlanView:
    starts = offsets[:-1]
    nonempty = offsets[1:] > starts
    node_loads = np.zeros(n_nodes)
    if nonempty.any():
        node_loads[nonempty] = np.add.reduceat(loads.load, starts[nonempty])
    total = float(node_loads.sum())
    mean = total / n_nodes
    return PlanView(
        loads=loads,
        offsets=offsets,
        n_nodes=n_nodes,
        tolerance=tolerance,
        node_loads=node_loads,
        mean=mean,
        upper=(1.0 + tolerance) * mean,
        eps=1e-12 * total + 1e-9,
        router=router,
    )


def aggregate_parts(
    key: np.ndarray, node: np.ndarray, *values: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Sum ``values`` over equal (key, node) rows; returns sorted key, node, sums."""
    if len(key) == 0:
        return (key, node, *values)
    order = np.lexsort((node, key))
    key, node = key[order], node[order]
    starts = np.flatnonzero(np.r_[True, (key[1:] != key[:-1]) | (node[1:] != node[:-1])])
    sums = tuple(np.add.reduceat(v[order], starts) for v in values)
    return (key[starts], node[starts], *sums)


def lay_end_to_end(
    a_group: np.ndarray, a_amount: np.ndarray, b_group: np.ndarray, b_amount: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Overlaps of two sequences of amounts laid end to end, group by group.

    Rows of ``a`` and of ``b`` are sorted by group; within a group both start at 0. Returns
    ``(ai, bi, width)``: row ``ai`` of ``a`` and row ``bi`` of ``b`` overlap by ``width``
    (only overlaps wider than ``eps`` and inside one group). This is the two-pointer fill
    "pour a into b in order" done with sorts instead of a Python loop.
    """
    if len(a_group) and len(b_group) and _single_group(a_group, b_group):
        return _pour(a_amount, b_amount, eps)
    a_end = _local_ends(a_group, a_amount)
    b_end = _local_ends(b_group, b_amount)
    ev_group = np.r_[a_group, b_group]
    ev_pos = np.r_[a_end, b_end]
    ev_is_a = np.r_[np.ones(len(a_group), bool), np.zeros(len(b_group), bool)]
    order = np.lexsort((~ev_is_a, ev_pos, ev_group))
    ev_group, ev_pos, ev_is_a = ev_group[order], ev_pos[order], ev_is_a[order]
    first_of_group = np.r_[True, ev_group[1:] != ev_group[:-1]]
    width = ev_pos - np.where(first_of_group, 0.0, np.r_[0.0, ev_pos[:-1]])
    # The segment ending at event j lies in the row of a (of b) whose index is the number
    # of a-ends (b-ends) before j, because rows are sorted by group, then position.
    ai = np.cumsum(ev_is_a) - ev_is_a
    bi = np.cumsum(~ev_is_a) - ~ev_is_a
    ok = (width > eps) & (ai < len(a_group)) & (bi < len(b_group))
    ai, bi, width = ai[ok], bi[ok], width[ok]
    ok = a_group[ai] == b_group[bi]
    return ai[ok], bi[ok], width[ok]


def _single_group(a_group: np.ndarray, b_group: np.ndarray) -> bool:
    g = a_group[0]
    return bool((a_group == g).all() and (b_group == g).all())


def _pour(
    a_amount: np.ndarray, b_amount: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``lay_end_to_end`` for one group: merge the two sorted end positions by insertion
    (O(n)) instead of sorting them; ties put a's end first, as the general case does."""
    a_end = np.cumsum(a_amount)
    b_end = np.cumsum(b_amount)
    at = np.searchsorted(a_end, b_end, side="right")
    ev_pos = np.insert(a_end, at, b_end)
    ev_is_a = np.insert(np.ones(len(a_end), bool), at, np.zeros(len(b_end), bool))
    width = ev_pos - np.r_[0.0, ev_pos[:-1]]
    ai = np.cumsum(ev_is_a) - ev_is_a
    bi = np.cumsum(~ev_is_a) - ~ev_is_a
    ok = (width > eps) & (ai < len(a_end)) & (bi < len(b_end))
    return ai[ok], bi[ok], width[ok]


def _local_ends(sorted_group: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """End position of each row on its group's own cumulative axis (rows sorted by group)."""
    cum = np.cumsum(amount)
    starts = segment_starts(sorted_group)
    base = np.r_[0.0, cum][starts]
    return cum - np.repeat(base, np.diff(np.r_[starts, len(sorted_group)]))


def plan_moves(
    before: tuple[np.ndarray, np.ndarray, np.ndarray],
    after: tuple[np.ndarray, np.ndarray, np.ndarray],
    eps: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Physical moves ``key, amount, from, to`` turning ``before`` parts into ``after``.

    Per key, nodes that lose load are sources and nodes that gain are sinks; both are
    laid end to end on the key's own axis and each overlap of a source with a sink is a
    move. Moving the net difference directly is what a real migration does, whatever
    intermediate steps the planning algorithm took.
    """
    key = np.r_[before[0], after[0]]
    node = np.r_[before[1], after[1]]
    delta = np.r_[-before[2], after[2]]
    key, node, delta = aggregate_parts(key, node, delta)
    src = delta < -eps
    snk = delta > eps
    if not src.any() or not snk.any():
        e = np.zeros(0)
        return e.astype(np.int64), e, e.astype(np.int32), e.astype(np.int32)
    s_key, s_node = key[src], node[src]
    t_key, t_node = key[snk], node[snk]
    si, ti, width = lay_end_to_end(s_key, -delta[src], t_key, delta[snk], eps)
    return s_key[si], width, s_node[si], t_node[ti]


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    values = np.sort(values)
    return values[segment_starts(values)]


def _direct_finish(view: PlanView, delta: Delta) -> tuple | None:
    """Moves and routing table straight from a delta whose added parts name their source
    rows (in row order), when every touched key is outside ``Y`` (so, by the window
    contract, whole on its home node: the row it came from). None when that does not
    hold; the general path then matches sources to sinks."""
    router = view.router
    if delta.add_src_row is None or delta.router is not None:
        return None
    if not isinstance(router, RoutingTable):
        return None
    loads = view.loads
    rows = np.asarray(delta.rows, dtype=np.int64)
    keys = loads.key[rows]
    if len(router) and np.isin(keys, router.keys).any():
        return None
    src = np.asarray(delta.add_src_row, dtype=np.int64)
    moves = (delta.add_key, delta.add_load, loads.node[src], delta.add_node)
    # Parts after the plan, grouped by key (keys sorted): what stays home, then pieces.
    # Laid out by counting (no sort of the parts): each row's segment is its home part
    # followed by its pieces, segments in key order.
    # Needs rows strictly increasing and pieces in row order (QMMP's pool order).
    if (len(rows) > 1 and not (np.diff(rows) > 0).all()) or (
        len(src) > 1 and (np.diff(src) < 0).any()
    ):
        return None
    by_key = np.argsort(keys)
    row_pos = np.searchsorted(rows, src)
    pieces = np.bincount(row_pos, minlength=len(rows))
    stays = delta.new_load > 0  # the row keeps a part on its (home) node
    seg_len = stays + pieces
    seg_start = np.empty(len(rows), dtype=np.int64)
    seg_start[by_key] = np.cumsum(seg_len[by_key]) - seg_len[by_key]
    first_piece = np.cumsum(pieces) - pieces
    piece_pos = seg_start[row_pos] + stays[row_pos] + (np.arange(len(src)) - first_piece[row_pos])
    size = int(stays.sum()) + len(src)
    part_key = np.empty(size, dtype=np.int64)
    part_node = np.empty(size, dtype=np.int32)
    part_load = np.empty(size, dtype=np.float64)
    part_home = np.empty(size, dtype=np.int32)
    row_node = loads.node[rows]
    home_pos = seg_start[stays]
    part_key[home_pos], part_key[piece_pos] = keys[stays], delta.add_key
    part_node[home_pos], part_node[piece_pos] = row_node[stays], delta.add_node
    part_load[home_pos], part_load[piece_pos] = delta.new_load[stays], delta.add_load
    part_home[home_pos], part_home[piece_pos] = row_node[stays], row_node[row_pos]
    changed = RoutingTable.from_grouped_parts(
        view.n_nodes, part_key, part_node, part_load, part_home
    )
    routing = router.replace(keys[by_key], changed)
    node_loads_after = (
        view.node_loads
        - np.bincount(
            loads.node[rows], weights=loads.load[rows] - delta.new_load, minlength=view.n_nodes
        )
        + np.bincount(delta.add_node, weights=delta.add_load, minlength=view.n_nodes)
    )
    return moves, float(np.sum(delta.add_state)), routing, node_loads_after


def _finish_plan(name: str, view: PlanView, delta: Delta, started: float) -> MigrationPlan:
    """Moves, router and costs of a strategy's delta (touching only the keys it moved)."""
    direct = _direct_finish(view, delta)
    if direct is not None:
        (m_key, m_amt, m_from, m_to), migrated, router_after, node_loads_after = direct
        return _plan(
            name,
            view,
            started,
            m_key,
            m_amt,
            m_from,
            m_to,
            router_after,
            migrated,
            node_loads_after,
            delta.info,
        )
    loads = view.loads
    rows = np.asarray(delta.rows, dtype=np.int64)
    touched = _sorted_unique(np.r_[loads.key[rows], delta.add_key])
    router = view.router
    before_rows = rows
    if isinstance(router, RoutingTable) and len(router) and len(touched):
        in_y = touched[np.isin(touched, router.keys)]
        if len(in_y):  # a key of Y may have parts on rows the strategy did not touch
            before_rows = np.union1d(rows, np.flatnonzero(np.isin(loads.key, in_y)))
    before_rows = _sorted_unique(before_rows)
    b_key, b_node = loads.key[before_rows], loads.node[before_rows]
    b_load, b_state = loads.load[before_rows], loads.state[before_rows]
    a_load, a_state = b_load.copy(), b_state.copy()
    pos = np.searchsorted(before_rows, rows)
    a_load[pos] = delta.new_load
    a_state[pos] = delta.new_state
    a_key, a_node, a_load, a_state = aggregate_parts(
        np.r_[b_key, delta.add_key],
        np.r_[b_node, delta.add_node].astype(np.int32),
        np.r_[a_load, delta.add_load],
        np.r_[a_state, delta.add_state],
    )
    m_key, m_amt, m_from, m_to = plan_moves(
        (b_key, b_node, b_load), (a_key, a_node, a_load), view.eps
    )
    if delta.router is not None:
        router_after = delta.router
    else:
        changed = RoutingTable.from_parts(a_key, a_node, a_load, view.n_nodes)
        base = router if isinstance(router, RoutingTable) else RoutingTable.empty(view.n_nodes)
        router_after = base.replace(touched, changed)
    migrated = _migrated_state((b_key, b_node, b_load, b_state), m_key, m_amt, m_from, view.n_nodes)
    node_loads_after = (
        view.node_loads
        - np.bincount(b_node, weights=b_load, minlength=view.n_nodes)
        + np.bincount(a_node, weights=a_load, minlength=view.n_nodes)
    )
    return _plan(
        name,
        view,
        started,
        m_key,
        m_amt,
        m_from,
        m_to,
        router_after,
        migrated,
        node_loads_after,
        delta.info,
    )


def _plan(
    name: str,
    view: PlanView,
    started: float,
    m_key: np.ndarray,
    m_amt: np.ndarray,
    m_from: np.ndarray,
    m_to: np.ndarray,
    router_after: Any,
    migrated: float,
    node_loads_after: np.ndarray,
    info: dict[str, Any] | None,
) -> MigrationPlan:
    plan_time_ms = (plan_clock() - started) * 1e3
    imb_after = imbalance(node_loads_after)
    return MigrationPlan(
        strategy=name,
        n_nodes=view.n_nodes,
        tolerance=view.tolerance,
        move_key=np.asarray(m_key, dtype=np.int64),
        move_amount=np.asarray(m_amt, dtype=np.float64),
        move_from=np.asarray(m_from).astype(np.int32),
        move_to=np.asarray(m_to).astype(np.int32),
        routing_table=router_after,
        plan_time_ms=plan_time_ms,
        migrated_state_tuples=migrated,
        split_keys=router_after.split_keys,
        imbalance_before=imbalance(view.node_loads),
        imbalance_after=imb_after,
        node_loads_before=view.node_loads,
        node_loads_after=node_loads_after,
        reached_tolerance=imb_after <= view.tolerance + 1e-9,
        info=dict(info or {}),
    )


def _unchanged_plan(name: str, view: PlanView, elapsed_s: float) -> MigrationPlan:
    """The plan of a strategy that never migrates: no moves, router unchanged."""
    e = np.zeros(0)
    held = view.loads.key[view.loads.load > 0]
    _, counts = np.unique(held, return_counts=True)
    imb = imbalance(view.node_loads)
    return MigrationPlan(
        strategy=name,
        n_nodes=view.n_nodes,
        tolerance=view.tolerance,
        move_key=e.astype(np.int64),
        move_amount=e,
        move_from=e.astype(np.int32),
        move_to=e.astype(np.int32),
        routing_table=view.router,
        plan_time_ms=elapsed_s * 1e3,
        migrated_state_tuples=0.0,
        split_keys=int(np.count_nonzero(counts > 1)),
        imbalance_before=imb,
        imbalance_after=imb,
        node_loads_before=view.node_loads,
        node_loads_after=view.node_loads,
        reached_tolerance=imb <= view.tolerance + 1e-9,
    )


def _migrated_state(
    before: tuple[np.ndarray, ...],
    m_key: np.ndarray,
    m_amt: np.ndarray,
    m_from: np.ndarray,
    n_nodes: int,
) -> float:
    """O3: each move carries ``amount / load`` of the state its source part held."""
    if len(m_key) == 0:
        return 0.0
    b_key, b_node, b_load, b_state = before
    order = np.lexsort((b_node, b_key))
    bk, bn = b_key[order], b_node[order]
    # Pack (rank of key, node) into one int64 to look up each move's source part.
    unique_keys = bk[segment_starts(bk)]
    packed = np.searchsorted(unique_keys, bk).astype(np.int64) * n_nodes + bn
    query = np.searchsorted(unique_keys, m_key).astype(np.int64) * n_nodes + m_from
    pos = np.searchsorted(packed, query)
    return float(np.sum(m_amt / b_load[order][pos] * b_state[order][pos]))
