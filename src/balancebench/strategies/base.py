"""The strategy contract: ``plan(loads, n_nodes, tolerance) -> MigrationPlan``.

Every key-level strategy is a small subclass of :class:`Strategy` that implements
``_rebalance`` on a :class:`Parts` working copy (which node holds how much of which
key). The base class does the shared bookkeeping once: validation, timing (``O1``),
turning the before/after parts into physical moves, the routing table after the plan
(``O2``), the migrated state (``O3``) and the imbalance before and after. After a plan the
strategy routes with the new table (``strategy.routing``).
"""

from __future__ import annotations

import time
from abc import ABC
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from balancebench.loads import KeyLoads, imbalance
from balancebench.routing import RoutingTable, segment_starts

#: Operators a strategy can serve; a workload checks this before any run.
OPERATORS = ("aggregate", "equi_join", "band_join")


@dataclass
class Parts:
    """Mutable (key, node) -> load/state arrays a strategy rewrites while planning."""

    key: np.ndarray
    node: np.ndarray
    load: np.ndarray
    state: np.ndarray

    @classmethod
    def from_loads(cls, loads: KeyLoads) -> Parts:
        return cls(loads.key.copy(), loads.node.copy(), loads.load.copy(), loads.state.copy())


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
    routing_table: RoutingTable
    #: O1: wall time of ``plan()`` in milliseconds (``time.perf_counter``).
    plan_time_ms: float
    #: O3: state tuples that change node (``amount / load * state`` summed over moves).
    migrated_state_tuples: float
    #: Keys held by more than one node after the plan.
    split_keys: int
    #: ``max L / mean L - 1`` before and after the plan.
    imbalance_before: float
    imbalance_after: float
    node_loads_before: np.ndarray = field(repr=False)
    node_loads_after: np.ndarray = field(repr=False)

    @property
    def routing_table_entries(self) -> int:
        """O2: keys in the routing table after the plan."""
        return len(self.routing_table)

    @property
    def n_moves(self) -> int:
        return len(self.move_key)

    @property
    def moved_load(self) -> float:
        return float(self.move_amount.sum())

    def reached_tolerance(self) -> bool:
        return self.imbalance_after <= self.tolerance + 1e-9


class Strategy(ABC):
    """Base of every key-level strategy; subclasses set ``name`` and ``_rebalance``."""

    name: ClassVar[str]
    #: Paper section the class implements (shown in docs and logged as a tag).
    reference: ClassVar[str] = ""
    #: Operators this strategy can serve correctly.
    operators: ClassVar[frozenset[str]] = frozenset(OPERATORS)
    #: Whether ``plan`` can move data at all (``hash`` never does).
    plans: ClassVar[bool] = True

    def __init__(self, n_nodes: int | None = None) -> None:
        self.routing: RoutingTable | None = None
        if n_nodes is not None:
            _check_n_nodes(n_nodes)
            self.routing = RoutingTable.empty(n_nodes)

    def params(self) -> dict[str, object]:
        """The strategy's own parameters (logged to MLflow)."""
        return {}

    def routing_for(self, n_nodes: int) -> RoutingTable:
        """The current routing table; base routing only until the first plan."""
        if self.routing is None or self.routing.n_nodes != n_nodes:
            self.routing = RoutingTable.empty(n_nodes)
        return self.routing

    def plan(self, loads: KeyLoads, n_nodes: int, tolerance: float) -> MigrationPlan:
        """Plan a migration for the window ``loads``; the strategy adopts its routing table."""
        _check_n_nodes(n_nodes)
        if not (isinstance(tolerance, int | float) and 0 < tolerance <= 10):
            raise ValueError(f"tolerance must be a number in (0, 10], got {tolerance!r}")
        loads.check_nodes(n_nodes)
        started = time.perf_counter()
        if not self.plans:
            return _no_plan(self.name, loads, self.routing_for(n_nodes), float(tolerance), started)
        parts = self._rebalance(Parts.from_loads(loads), n_nodes, float(tolerance))
        plan = _finish_plan(self.name, loads, parts, n_nodes, float(tolerance), started)
        self.routing = plan.routing_table
        return plan

    def _rebalance(self, parts: Parts, n_nodes: int, tolerance: float) -> Parts:
        """Return the parts after migration; must conserve every key's load."""
        return parts


def _check_n_nodes(n_nodes: int) -> None:
    if not isinstance(n_nodes, int | np.integer) or n_nodes < 1:
        raise ValueError(f"n_nodes must be an integer >= 1, got {n_nodes!r}")


def _aggregate(key: np.ndarray, node: np.ndarray, *values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Sum ``values`` over equal (key, node) rows; returns sorted key, node, sums."""
    if len(key) == 0:
        return (key, node, *values)
    order = np.lexsort((node, key))
    key, node = key[order], node[order]
    starts = np.flatnonzero(np.r_[True, (key[1:] != key[:-1]) | (node[1:] != node[:-1])])
    sums = tuple(np.add.reduceat(v[order], starts) for v in values)
    return (key[starts], node[starts], *sums)


def _plan_moves(
    before: KeyLoads, after: Parts, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Physical moves ``key, amount, from, to`` that turn ``before`` into ``after``.

    Per key, nodes that lose load are sources and nodes that gain are sinks; both are
    laid end to end on the key's own axis and each overlap of a source with a sink is a
    move. Moving the net difference directly is what a real migration does, whatever
    intermediate steps the planning algorithm took.
    """
    key = np.r_[before.key, after.key]
    node = np.r_[before.node, after.node]
    delta = np.r_[-before.load, after.load]
    key, node, delta = _aggregate(key, node, delta)
    src = delta < -eps
    snk = delta > eps
    if not src.any() or not snk.any():
        e = np.zeros(0)
        return e.astype(np.int64), e, e.astype(np.int32), e.astype(np.int32)
    s_key, s_node = key[src], node[src]
    t_key, t_node = key[snk], node[snk]
    si, ti, width = lay_end_to_end(s_key, -delta[src], t_key, delta[snk], eps)
    return s_key[si], width, s_node[si], t_node[ti]


def lay_end_to_end(
    a_group: np.ndarray, a_amount: np.ndarray, b_group: np.ndarray, b_amount: np.ndarray, eps: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Overlaps of two sequences of amounts laid end to end, group by group.

    Rows of ``a`` and of ``b`` are sorted by group; within a group both start at 0. Returns
    ``(ai, bi, width)``: row ``ai`` of ``a`` and row ``bi`` of ``b`` overlap by ``width``
    (only overlaps wider than ``eps`` and inside one group). This is the two-pointer fill
    "pour a into b in order" done with sorts instead of a Python loop.
    """
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


def _local_ends(sorted_group: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """End position of each row on its group's own cumulative axis (rows sorted by group)."""
    cum = np.cumsum(amount)
    starts = segment_starts(sorted_group)
    base = np.r_[0.0, cum][starts]
    return cum - np.repeat(base, np.diff(np.r_[starts, len(sorted_group)]))


def _no_plan(
    name: str, loads: KeyLoads, routing: RoutingTable, tolerance: float, started: float
) -> MigrationPlan:
    """The plan of a strategy that never migrates: no moves, routing unchanged."""
    node_loads = loads.node_loads(routing.n_nodes)
    e = np.zeros(0)
    held = loads.key[loads.load > 0]
    held.sort()
    split = int(np.count_nonzero(np.diff(np.r_[segment_starts(held), len(held)]) > 1))
    return MigrationPlan(
        strategy=name,
        n_nodes=routing.n_nodes,
        tolerance=tolerance,
        move_key=e.astype(np.int64),
        move_amount=e,
        move_from=e.astype(np.int32),
        move_to=e.astype(np.int32),
        routing_table=routing,
        plan_time_ms=(time.perf_counter() - started) * 1e3,
        migrated_state_tuples=0.0,
        split_keys=split,
        imbalance_before=imbalance(node_loads),
        imbalance_after=imbalance(node_loads),
        node_loads_before=node_loads,
        node_loads_after=node_loads,
    )


def _finish_plan(
    name: str, before: KeyLoads, after: Parts, n_nodes: int, tolerance: float, started: float
) -> MigrationPlan:
    """Moves, routing table and costs of the parts a strategy returned."""
    total = float(before.load.sum())
    eps = 1e-12 * total + 1e-9
    key, node, load, state = _aggregate(after.key, after.node, after.load, after.state)
    m_key, m_amt, m_from, m_to = _plan_moves(before, Parts(key, node, load, state), eps)
    routing = RoutingTable.from_parts(key, node, load, n_nodes)
    loads_before = before.node_loads(n_nodes)
    loads_after = np.bincount(node, weights=load, minlength=n_nodes).astype(np.float64)
    migrated = _migrated_state(before, m_key, m_amt, m_from, n_nodes)
    held_keys = key[load > eps]
    split = int(np.count_nonzero(np.diff(np.r_[segment_starts(held_keys), len(held_keys)]) > 1))
    return MigrationPlan(
        strategy=name,
        n_nodes=n_nodes,
        tolerance=tolerance,
        move_key=m_key,
        move_amount=m_amt,
        move_from=m_from.astype(np.int32),
        move_to=m_to.astype(np.int32),
        routing_table=routing,
        plan_time_ms=(time.perf_counter() - started) * 1e3,
        migrated_state_tuples=migrated,
        split_keys=split,
        imbalance_before=imbalance(loads_before),
        imbalance_after=imbalance(loads_after),
        node_loads_before=loads_before,
        node_loads_after=loads_after,
    )


def _migrated_state(
    before: KeyLoads, m_key: np.ndarray, m_amt: np.ndarray, m_from: np.ndarray, n_nodes: int
) -> float:
    """O3: each move carries ``amount / load`` of the state its source part held."""
    if len(m_key) == 0:
        return 0.0
    order = np.lexsort((before.node, before.key))
    bk, bn = before.key[order], before.node[order]
    # Pack (rank of key, node) into one int64 to look up each move's source part.
    unique_keys = bk[segment_starts(bk)]
    packed = np.searchsorted(unique_keys, bk).astype(np.int64) * n_nodes + bn
    query = np.searchsorted(unique_keys, m_key).astype(np.int64) * n_nodes + m_from
    pos = np.searchsorted(packed, query)
    src_load = before.load[order][pos]
    src_state = before.state[order][pos]
    return float(np.sum(m_amt / src_load * src_state))
