"""Strategies on Spark: which node(s) every tuple of a batch is stored on and probes.

A :class:`SparkRouter` turns a batch ``(side, tuple_id, key, event_time_s, payload)``
into one row per copy, with ``node`` and ``role``: ``store`` (the node keeps the tuple
as state: a stored join tuple, or the node that counts it in an aggregation),
``probe`` (the node joins the tuple against what it stores) or ``both`` (one copy that
the node stores and probes with: a tuple is sent once to a node that does both). After
the batch it reads the batch's statistics and may say how state moves before the next
batch (:class:`Reassignment`).

Key-level strategies (paper 000 Algorithm 1, :class:`KeyLevelRouter`):

- storage routing ONE: ``placement.with_storage_node`` (home ``F(k)``, or one part of
  ``Y(k)`` chosen by the tuple-id hash, or the bucket owner for a bucket map);
- operator routing ALL (equi-join): every node of ``Y(k)`` **and every node that holds
  state of ``k``** (the same set, except when a plan left a key's older state on a node
  that no new tuple of the key goes to; probing it keeps every result pair);
- predicate routing (band join ``|k1 - k2| <= w``): the union of those node sets over
  the keys ``k - w .. k + w``;
- two-stream rule (equi-join, when the strategy names a replicated side for a split key,
  ``Strategy.replicated_sides``): a tuple of the key's small side is stored on every node
  of ``Y(k)`` and probes the same nodes plus every node holding state of ``k``; a tuple of
  the large side is stored ONE and probes only that node, which holds every small-side
  tuple of the key (the migration after each plan keeps that true: :class:`ReplicaSync`).

A stored tuple is on exactly one node and a later tuple probes every node that can hold
a match, so each result pair is produced exactly once (by the later tuple's probe). Under
the two-stream rule a small-side tuple is on every node of ``Y(k)`` and a large-side
tuple probes exactly one of them, or (arriving later) the small-side tuple probes every
node that holds large-side tuples of the key, each stored once: again exactly once.
"""

from __future__ import annotations

import math
import pickle
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.accumulators import AccumulatorParam
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench.core.hashing import FRACTION_UNITS, home_nodes
from balancebench.core.loads import KeyLoads
from balancebench.core.operators import Operator
from balancebench.core.routing_table import BucketMap, RoutingTable
from balancebench.spark import jvm_routing
from balancebench.spark.placement import (
    bucket_owner,
    home_node,
    partition_by_node,
    with_per_tuple_node,
    with_storage_node,
)
from balancebench.strategies import MigrationPlan, Strategy
from balancebench.strategies.base import NO_SIDE, SIDE_R, SIDE_S

BATCH_COLUMNS = ["side", "tuple_id", "key", "event_time_s", "payload"]
STORE, PROBE, BOTH = "store", "probe", "both"
#: A stored tuple a migration moves to this node in the batch's exchange (its state, not
#: a tuple of the batch: it is stored there and never probes).
MOVED = "moved"
#: Roles of the batch's tuples a node stores, and of the rows it probes with.
STORES, PROBES = (STORE, BOTH), (PROBE, BOTH)
#: Roles of every row a node keeps after the batch (its new tuples and what moved in).
KEEPS = (STORE, BOTH, MOVED)


@dataclass
class BatchStats:
    """What the nodes report after a batch: per (key, node) part, the tuples stored in
    the batch (``load``) and the state held after it (``state``)."""

    key: np.ndarray
    node: np.ndarray
    load: np.ndarray
    state: np.ndarray
    #: Joins: of ``state``, the rows of side R (the rest are side S).
    state_r: np.ndarray | None = None

    def loads(self) -> KeyLoads:
        return KeyLoads(self.key, self.node, self.load, self.state)

    def node_state(self, n_nodes: int) -> np.ndarray:
        """State tuples each of ``n_nodes`` nodes holds after the batch."""
        return np.bincount(self.node, weights=self.state, minlength=n_nodes)


#: Side names of the engine's rows, by the strategies' side codes.
SIDE_NAMES = {SIDE_R: "R", SIDE_S: "S"}


@dataclass
class Replicas:
    """Keys under the two-stream rule: per key (sorted) the replicated side
    (``SIDE_R``/``SIDE_S``) and the nodes of ``Y(k)``, each of which holds every tuple of
    that side of the key."""

    key: np.ndarray
    side: np.ndarray
    nodes: list[np.ndarray]

    @classmethod
    def none(cls) -> Replicas:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int8), [])

    def __len__(self) -> int:
        return len(self.key)

    def lookup(self) -> dict[int, tuple[int, np.ndarray]]:
        return {
            int(k): (int(s), n) for k, s, n in zip(self.key, self.side, self.nodes, strict=True)
        }


@dataclass
class ReplicaSync:
    """How the replicated sides' stored tuples change with a plan, per (key, side): the
    tuples stay only on ``targets`` and are copied to every target that lacks them, from
    ``source`` (a node holding all of them, or -1: each tuple's one stored copy);
    ``have`` are the nodes that already hold all of them. These rows never move with the
    plan's segments (their placement is this sync's alone)."""

    key: np.ndarray
    side: list[str]
    source: np.ndarray
    have: list[list[int]]
    targets: list[list[int]]

    def __len__(self) -> int:
        return len(self.key)


def replica_sync(before: Replicas, after: Replicas) -> ReplicaSync:
    """The sync from the rule's placement ``before`` a plan to ``after`` it. A side that
    stays replicated keeps its copies on the nodes of ``Y(k)`` that remain and gains the
    new ones; a side that stops being replicated keeps one copy (on its lowest holder,
    already there); a side that starts is copied from each tuple's stored node."""
    rows: list[tuple[int, str, int, list[int], list[int]]] = []
    old, new = before.lookup(), after.lookup()
    for k in sorted(set(old) | set(new)):
        o_side, held = old.get(k, (NO_SIDE, np.zeros(0, np.int32)))
        n_side, target = new.get(k, (NO_SIDE, np.zeros(0, np.int32)))
        held_l, target_l = sorted(int(x) for x in held), sorted(int(x) for x in target)
        if o_side != NO_SIDE and o_side != n_side:
            rows.append((k, SIDE_NAMES[o_side], held_l[0], held_l, held_l[:1]))
        if n_side != NO_SIDE:
            if o_side == n_side:
                rows.append((k, SIDE_NAMES[n_side], held_l[0], held_l, target_l))
            else:
                rows.append((k, SIDE_NAMES[n_side], -1, [], target_l))
    return ReplicaSync(
        np.array([r[0] for r in rows], dtype=np.int64),
        [r[1] for r in rows],
        np.array([r[2] for r in rows], dtype=np.int32),
        [r[3] for r in rows],
        [r[4] for r in rows],
    )


#: A re-placement of stored rows, row by row (no shuffle): ``split(rows)`` returns the
#: rows that stay where they are and the rows to ship (``node`` set to where they go;
#: copies may be added). Columns as the state's (``BATCH_COLUMNS``, ``node``, ...).
Split = Callable[[DataFrame], tuple[DataFrame, DataFrame]]


@dataclass
class Reassignment:
    """How state moves, decided after a batch and carried out inside the next batch's
    exchange (``spark.engine``), in one of two forms.

    - Key-level (a plan's moves): for some (key, from node) parts, segments ``[lo, hi)``
      of ``[0, 2^20)`` and the node each segment goes to; a part's segments are laid end
      to end from 0 (:meth:`from_plan`). A stored tuple moves by a hash of its id; a
      partial count is split by segment widths.
    - ``split``: a row-by-row re-placement of every stored row (:data:`Split`), e.g.
      Dynamic's grid growth; rows whose node is unchanged stay, the others are shipped.
    """

    key: np.ndarray
    from_node: np.ndarray
    to_node: np.ndarray
    lo_units: np.ndarray
    hi_units: np.ndarray
    plan: MigrationPlan | None = None
    split: Split | None = None
    #: The two-stream rule's copies (key-level joins only).
    replicas: ReplicaSync | None = None

    @classmethod
    def placement(cls, split: Split) -> Reassignment:
        """A reassignment that re-places every stored row by ``split`` (:data:`Split`)."""
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z.astype(np.int32), z.astype(np.int32), z, z, None, split)

    def part_extent(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(key, from node, hi)`` per part that sends: its segments cover ``[0, hi)``
        (they are laid end to end from 0), so a part keeps what lies at or above ``hi``."""
        if len(self.key) == 0:
            z = np.zeros(0, dtype=np.int64)
            return z, z.astype(np.int32), z
        packed = self.key.astype(np.int64) * (1 << 32) + self.from_node.astype(np.int64)
        order = np.lexsort((self.lo_units, packed))
        packed, lo, hi = packed[order], self.lo_units[order], self.hi_units[order]
        first = np.r_[True, packed[1:] != packed[:-1]]
        chained = np.where(first, lo == 0, lo == np.r_[0, hi[:-1]])
        if not chained.all():
            raise ValueError("moves: a part's segments must be laid end to end from 0")
        last = np.r_[packed[1:] != packed[:-1], True]
        parts = packed[last]
        return parts >> 32, (parts & 0xFFFFFFFF).astype(np.int32), hi[last]

    @classmethod
    def from_plan(cls, plan: MigrationPlan, loads: KeyLoads) -> Reassignment:
        """Segments of a plan's moves: part ``(k, d)`` sends ``amount / load(k, d)`` of its
        state to each destination, in move order; the rest stays."""
        if plan.n_moves == 0:
            z = np.zeros(0, dtype=np.int64)
            return cls(z, z.astype(np.int32), z.astype(np.int32), z, z, plan)
        part_load = {
            (int(k), int(d)): float(v)
            for k, d, v in zip(loads.key, loads.node, loads.load, strict=True)
        }
        keys, froms, tos, los, his = [], [], [], [], []
        cursor: dict[tuple[int, int], int] = {}
        for k, amount, f, t in zip(
            plan.move_key.tolist(),
            plan.move_amount.tolist(),
            plan.move_from.tolist(),
            plan.move_to.tolist(),
            strict=True,
        ):
            load = part_load.get((k, f), 0.0)
            if load <= 0:
                continue
            lo = cursor.get((k, f), 0)
            width = int(round(min(amount / load, 1.0) * FRACTION_UNITS))
            hi = min(lo + width, FRACTION_UNITS)
            if hi > lo:
                keys.append(k)
                froms.append(f)
                tos.append(t)
                los.append(lo)
                his.append(hi)
            cursor[(k, f)] = hi
        return cls(
            np.array(keys, dtype=np.int64),
            np.array(froms, dtype=np.int32),
            np.array(tos, dtype=np.int32),
            np.array(los, dtype=np.int64),
            np.array(his, dtype=np.int64),
            plan,
        )

    def __len__(self) -> int:
        synced = len(self.replicas) if self.replicas is not None else 0
        return len(self.key) + synced + (1 if self.split is not None else 0)


@dataclass
class RouteContext:
    """What a router may use to route a batch."""

    spark: SparkSession
    operator: Operator
    n_nodes: int
    band_width: int = 1
    #: Partitions of the batch: partition ``s`` holds sender ``s``'s tuples
    #: (``tuple_id mod senders == s``) in arrival order (``replay_stream.load_replay``).
    senders: int = 1
    #: State held after the previous batch, per (key, node) with state > 0.
    state_key: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    state_node: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))


class SparkRouter(ABC):
    """One strategy's placement of tuples on the nodes of the stateful stage."""

    #: Senders of the routing stage (None: the input partitions of the stream).
    senders: int | None = None
    #: The routing decisions run in Python workers (their CPU is measured inside them).
    routes_in_python: bool = False

    def __init__(
        self, strategy: Strategy, n_nodes: int, tolerance: float, capacity: int | None = None
    ) -> None:
        self.strategy = strategy
        self.n_nodes = n_nodes
        self.tolerance = tolerance
        #: Memory-driven scale-out (Param ``node_capacity_state_tuples``): the state tuples
        #: a node holds before nodes join; None: all ``n_nodes`` from the start.
        self.capacity = capacity
        #: Nodes joined after the last batch (set by ``after_batch``, read by the engine).
        self.scaled_out = False

    @property
    def routing_table_entries(self) -> int:
        return 0

    @abstractmethod
    def route(self, batch: DataFrame, ctx: RouteContext) -> DataFrame:
        """``batch`` plus ``node`` (int) and ``role`` (``store``/``probe``/``both``), one row
        per copy."""

    def after_batch(self, stats: BatchStats) -> Reassignment | None:
        """The batch's statistics; how state moves in the next batch (or None)."""
        return None

    def routing_cpu_s(self) -> float:
        """CPU seconds the batch's routing spent outside Spark's JVM task threads (a
        Python worker's), read after the batch's job; 0 for routing in Spark SQL."""
        return 0.0

    def nodes_used(self) -> int:
        return self.n_nodes


def rehome(active: int) -> Split:
    """Every stored tuple on its key's home among ``active`` nodes (a scale-out of a
    key-level strategy without a planner, :meth:`KeyLevelRouter._scale_out`): a tuple
    already there stays, the others move there. Such a strategy stores each tuple once."""

    def split(rows: DataFrame) -> tuple[DataFrame, DataFrame]:
        home = home_node("key", active)
        return rows.where(F.col("node") == home), rows.where(F.col("node") != home).withColumn(
            "node", home
        )

    return split


def _with_role(df: DataFrame, role: str) -> DataFrame:
    return df.withColumn("role", F.lit(role))


class KeyLevelRouter(SparkRouter):
    """Paper 000's Algorithm 1 for any strategy with a key router (``Y`` or a bucket map)."""

    def __init__(
        self, strategy: Strategy, n_nodes: int, tolerance: float, capacity: int | None = None
    ) -> None:
        super().__init__(strategy, n_nodes, tolerance, capacity)
        #: Nodes in use: all of them, or under scale-out 1 at first, more as state grows
        #: (:meth:`_scale_out`). Base routing and plans run over nodes ``0 .. active - 1``.
        self.active = n_nodes if capacity is None else 1
        self.table = strategy.routing_for(self.active)
        #: Split keys under the two-stream rule (equi-joins).
        self.replicas = Replicas.none()
        self.operator: Operator | None = None

    @property
    def routing_table_entries(self) -> int:
        return len(self.table)

    def nodes_used(self) -> int:
        return self.active

    def default_node(self, key: Column | str, spark: SparkSession) -> Column:
        if isinstance(self.table, BucketMap):
            return bucket_owner(key, self.table, spark)
        return home_node(key, self.active)

    def _default_nodes_np(self, keys: np.ndarray) -> np.ndarray:
        if isinstance(self.table, BucketMap):
            return self.table.storage_nodes(keys)
        return home_nodes(keys, self.active)

    def probe_table(self, ctx: RouteContext) -> tuple[np.ndarray, np.ndarray]:
        """``(key, node)`` pairs of every key whose probe set is not just its default node:
        the nodes of ``Y(k)`` plus the nodes holding state of ``k`` (plus the default
        node when a key with such state is outside ``Y``)."""
        key_parts: list[np.ndarray] = []
        node_parts: list[np.ndarray] = []
        if isinstance(self.table, RoutingTable) and len(self.table):
            rows = self.table.part_rows()
            key_parts.append(rows["key"])
            node_parts.append(rows["node"].astype(np.int32))
        sk, sn = ctx.state_key, ctx.state_node
        if len(sk):
            off = sn != self._default_nodes_np(sk)
            if isinstance(self.table, RoutingTable) and len(self.table):
                off |= np.isin(sk, self.table.keys)
            key_parts.append(sk[off])
            node_parts.append(sn[off].astype(np.int32))
        if not key_parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int32)
        keys = np.concatenate(key_parts)
        nodes = np.concatenate(node_parts)
        if isinstance(self.table, RoutingTable) and len(self.table):
            outside = ~np.isin(keys, self.table.keys)
        else:
            outside = np.ones(len(keys), bool)
        # New tuples of a key outside Y are stored on its default node: probe it too.
        uk = np.unique(keys[outside])
        keys = np.r_[keys, uk]
        nodes = np.r_[nodes, self._default_nodes_np(uk).astype(np.int32)]
        packed = np.unique(keys.astype(np.int64) * self.n_nodes + nodes)
        return packed // self.n_nodes, (packed % self.n_nodes).astype(np.int32)

    def route(self, batch: DataFrame, ctx: RouteContext) -> DataFrame:
        self.operator = ctx.operator
        stored = with_storage_node(ctx.spark, batch, self.table)
        if ctx.operator.aggregates:
            return _with_role(stored, STORE)
        keys, nodes = self.probe_table(ctx)
        return self._copies(stored, ctx, keys, nodes)

    def band_probe_table(
        self, keys: np.ndarray, nodes: np.ndarray, width: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Complete probe node sets for every key that has a special key within
        ``width``: the union over ``k - width .. k + width`` of each key's probe nodes
        (the table's for special keys, the default node otherwise). Other keys probe the
        default nodes of their ``2 * width + 1`` candidate keys (done in SQL)."""
        if width == 0 or len(keys) == 0:
            return keys, nodes
        offsets = np.arange(-width, width + 1)
        special = np.unique(keys)
        probing = np.unique((special[:, None] + offsets[None, :]).ravel())
        cand = (probing[:, None] + offsets[None, :]).ravel()
        owner = np.repeat(probing, len(offsets))
        in_table = np.isin(cand, special)
        # Candidates outside the table: their default node.
        out_k = owner[~in_table]
        out_n = self._default_nodes_np(cand[~in_table]).astype(np.int32)
        # Candidates in the table: every node the table lists for them.
        order = np.argsort(keys, kind="stable")
        sk, sn = keys[order], nodes[order]
        starts = np.searchsorted(sk, cand[in_table], side="left")
        ends = np.searchsorted(sk, cand[in_table], side="right")
        counts = ends - starts
        idx = np.repeat(starts, counts) + (
            np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        )
        in_k = np.repeat(owner[in_table], counts)
        in_n = sn[idx]
        packed = np.unique(np.r_[out_k, in_k].astype(np.int64) * self.n_nodes + np.r_[out_n, in_n])
        return packed // self.n_nodes, (packed % self.n_nodes).astype(np.int32)

    def _copies(
        self, stored: DataFrame, ctx: RouteContext, keys: np.ndarray, nodes: np.ndarray
    ) -> DataFrame:
        """One row per (tuple, node) it is sent to, with its role there (``both`` when
        the tuple is stored and probes at that node, else ``store`` or ``probe``); unique
        by construction (no shuffle to dedupe). A tuple is stored on its storage node,
        or on every node of ``Y(k)`` if its side is its key's replicated side; it probes
        its key's probe nodes, or only its storage node if the other side of its key is
        the replicated one."""
        width = ctx.operator.key_reach(ctx.band_width)
        keys, nodes = self.band_probe_table(keys, nodes, width)
        defaults = F.array_distinct(
            F.array(
                *[self.default_node(F.col("key") + o, ctx.spark) for o in range(-width, width + 1)]
            )
        )
        home = F.array(F.col("node").cast("int"))
        store_set, node_set = home, defaults
        if len(keys):
            # One row per key with its probe nodes, so the join does not multiply tuples.
            order = np.argsort(keys, kind="stable")
            uk, first = np.unique(keys[order], return_index=True)
            sets = np.split(nodes[order].astype(np.int32), first[1:])
            rule = self.replicas.lookup() if ctx.operator.two_stream_rule else {}
            side = [SIDE_NAMES[rule[k][0]] if k in rule else None for k in uk.tolist()]
            spread = [rule[k][1].tolist() if k in rule else None for k in uk.tolist()]
            table = ctx.spark.createDataFrame(
                pa.table(
                    {
                        "_pk": pa.array(uk),
                        "_pnodes": pa.array([s.tolist() for s in sets], pa.list_(pa.int32())),
                        "_rside": pa.array(side, pa.string()),
                        "_rnodes": pa.array(spread, pa.list_(pa.int32())),
                    }
                )
            )
            stored = stored.join(F.broadcast(table), stored["key"] == table["_pk"], "left")
            node_set = F.coalesce(F.col("_pnodes"), defaults)
            if rule:
                replicated = F.col("side") == F.col("_rside")
                store_set = F.when(replicated, F.col("_rnodes")).otherwise(home)
                node_set = F.when(~replicated, home).otherwise(node_set)
        store_set, node_set = store_set.cast("array<int>"), node_set.cast("array<int>")
        placed = stored.select(
            *BATCH_COLUMNS,
            store_set.alias("_stores"),
            node_set.alias("_probes"),
            F.explode(F.array_union(store_set, node_set)).alias("_copy"),
        )
        stores = F.array_contains(F.col("_stores"), F.col("_copy"))
        probes = F.array_contains(F.col("_probes"), F.col("_copy"))
        role = (
            F.when(stores & probes, F.lit(BOTH)).when(stores, F.lit(STORE)).otherwise(F.lit(PROBE))
        )
        return placed.select(*BATCH_COLUMNS, F.col("_copy").alias("node"), role.alias("role"))

    def after_batch(self, stats: BatchStats) -> Reassignment | None:
        grown = self._scale_out(stats)
        if grown is not None:
            return grown
        loads = stats.loads()
        plan = self.strategy.plan(loads, n_nodes=self.active, tolerance=self.tolerance)
        return self._moves(plan, loads, stats)

    def _moves(self, plan: MigrationPlan, loads: KeyLoads, stats: BatchStats) -> Reassignment:
        """A plan's moves, the new table, and the two-stream rule's copies after it."""
        self.table = self.strategy.routing_for(self.active)
        moves = Reassignment.from_plan(plan, loads)
        if (
            self.operator is not None
            and self.operator.two_stream_rule
            and stats.state_r is not None
        ):
            after = self.two_stream(stats)
            if len(self.replicas) or len(after):
                moves.replicas = replica_sync(self.replicas, after)
            self.replicas = after
        return moves

    def _scale_out(self, stats: BatchStats) -> Reassignment | None:
        """Memory-driven scale-out (paper 000 §4, last paragraph: the algorithm treats a
        new node as empty and moves load to it). When a node holds more than
        ``capacity`` state tuples after a batch, the active nodes grow to
        ``max(active + 1, ceil(all state / capacity))`` (at most ``n_nodes``) and the base
        routing becomes ``pmod(hash(k), active)``. Then the balance adjustment:

        - a planner (``qmmp``, ``mnrt``, ``readj``) adopts the current placement as its
          routing table (nothing moves by the base change: every key off its new home
          gets an entry) and plans on the *state* per (key, node) as the load, so its own
          moves fill the empty nodes; that plan is the adjustment paper 000 Fig. 5 times
          (the next batches plan on batch loads again);
        - ``hash`` (no planner) moves every stored tuple to its key's new home (one copy
          each) with an empty table. Our base is modular hashing, not the consistent
          hashing the paper names as an example, so that moves about ``1 - 1/active`` of
          the state, not ``1/active``."""
        if self.capacity is None or self.active >= self.n_nodes or len(stats.state) == 0:
            return None
        node_state = stats.node_state(self.n_nodes)
        if float(node_state.max()) <= self.capacity:
            return None
        needed = math.ceil(float(node_state.sum()) / self.capacity)
        self.active = min(self.n_nodes, max(self.active + 1, needed))
        self.scaled_out = True
        if self.strategy.plans:
            memory = KeyLoads(stats.key, stats.node, stats.state.astype(np.float64), stats.state)
            self.strategy.adopt(memory, self.active)
            plan = self.strategy.plan(memory, n_nodes=self.active, tolerance=self.tolerance)
            return self._moves(plan, memory, stats)
        self.table = self.strategy.routing_for(self.active)  # a new N: an empty table
        self.replicas = Replicas.none()
        return Reassignment.placement(rehome(self.active))

    def two_stream(self, stats: BatchStats) -> Replicas:
        """The split keys of the (new) table under the two-stream rule: the strategy
        picks each key's replicated side from the tuples each side holds (a side that is
        replicated now is counted once, on the node holding most of it)."""
        if not isinstance(self.table, RoutingTable) or len(self.table) == 0:
            return Replicas.none()
        rows = self.table.part_rows()
        packed = np.unique(rows["key"] * self.n_nodes + rows["node"])
        part_key, part_node = packed // self.n_nodes, (packed % self.n_nodes).astype(np.int32)
        split, first, count = np.unique(part_key, return_index=True, return_counts=True)
        keep = count > 1
        split, first, count = split[keep], first[keep], count[keep]
        if len(split) == 0:
            return Replicas.none()
        assert stats.state_r is not None
        r_part = stats.state_r
        s_part = stats.state - stats.state_r
        held = np.isin(stats.key, split)
        k, r, s = stats.key[held], r_part[held], s_part[held]
        pos = np.searchsorted(split, k)
        current = self.replicas.lookup()
        was = np.array([current.get(int(x), (NO_SIDE, None))[0] for x in split], np.int8)
        r_tot, s_tot = np.zeros(len(split)), np.zeros(len(split))
        np.add.at(r_tot, pos, np.where(was[pos] == SIDE_R, 0.0, r))
        np.add.at(s_tot, pos, np.where(was[pos] == SIDE_S, 0.0, s))
        np.maximum.at(r_tot, pos, np.where(was[pos] == SIDE_R, r, 0.0))
        np.maximum.at(s_tot, pos, np.where(was[pos] == SIDE_S, s, 0.0))
        side = self.strategy.replicated_sides(r_tot, s_tot)
        on = side != NO_SIDE
        nodes = [part_node[f : f + c] for f, c in zip(first[on], count[on], strict=True)]
        return Replicas(split[on], side[on].astype(np.int8), nodes)


class SenderReports(AccumulatorParam):
    """What each sender's Python worker reports after routing its tuples of a batch:
    ``{sender: (pickled new state, CPU seconds)}`` (a sender's later report replaces an
    earlier one: a rerun task reports the same)."""

    def zero(self, value: dict) -> dict:
        return {}

    def addInPlace(self, a: dict, b: dict) -> dict:  # noqa: N802 - PySpark's name
        a.update(b)
        return a


class PerTupleRouter(SparkRouter):
    """``pkg``, ``dchoices``, ``wchoices``: every sender routes its tuples in arrival order;
    aggregations only (the rows are the key and its node); no plan, no migration.

    Where ``make setup`` compiled the JVM router (``jvm_routing``), each sender's task
    routes its partition inside the JVM (``mapPartitions``): its CPU is the routing
    stage's ``executorCpuTime``, as for any routing in Spark SQL. Otherwise (or with
    ``jvm=False``) a Python worker does (``placement.with_per_tuple_node``, a
    ``mapInArrow`` over the batch's sender partitions) and measures its own process CPU
    (``executorCpuTime`` sees the JVM's threads only). Both report each sender's new
    state through an accumulator; :meth:`routing_cpu_s` reads it after the batch's job.

    The senders are the stream's (``n_senders``) unless the strategy names its own
    (``<strategy>_senders``): then the batch first goes to those senders, by ``tuple_id
    mod senders``, through an exchange of its own (routing work)."""

    routes_in_python = True

    def __init__(
        self,
        strategy: Strategy,
        n_nodes: int,
        tolerance: float,
        capacity: int | None = None,
        jvm: bool | None = None,
    ) -> None:
        super().__init__(strategy, n_nodes, tolerance, capacity)
        self.sender_states: dict[int, Any] = {}
        own = strategy.settings.get("senders")
        self.senders = None if own is None else int(own)
        #: None: the JVM path where the session loads it; False: always Python.
        self.jvm = jvm
        self._reports: Any = None
        self._jvm_routed: Any = None

    def uses_jvm(self, spark: SparkSession) -> bool:
        path = jvm_routing.path_for(spark, self.strategy, self.n_nodes)[0]
        return self.jvm is not False and path == "jvm"

    def route(self, batch: DataFrame, ctx: RouteContext) -> DataFrame:
        senders = self.senders or ctx.senders
        if senders != ctx.senders:
            sender = F.pmod(F.col("tuple_id"), F.lit(senders)).cast("int")
            batch = (
                partition_by_node(batch.withColumn("_sender", sender), senders, "_sender")
                .sortWithinPartitions("tuple_id")
                .drop("_sender", "_surrogate")
            )
        self.routes_in_python = not self.uses_jvm(ctx.spark)
        if not self.routes_in_python:
            routed, self._jvm_routed = jvm_routing.route(
                batch, self.strategy, self.sender_states, self.n_nodes
            )
            return _with_role(routed, STORE)
        self._reports = ctx.spark.sparkContext.accumulator({}, SenderReports())
        routed = with_per_tuple_node(
            batch, self.strategy, self.sender_states, self.n_nodes, self._reports
        )
        return _with_role(routed, STORE)

    def routing_cpu_s(self) -> float:
        """After the batch's job: keep each sender's new state; the CPU seconds the
        senders' Python workers spent routing the batch (0 on the JVM path: the tasks'
        executorCpuTime holds it)."""
        if self._jvm_routed is not None:
            new_state = self.strategy.new_sender_state
            self.sender_states.update(jvm_routing.collect_states(self._jvm_routed, new_state))
            self._jvm_routed = None
            return 0.0
        if self._reports is None:
            return 0.0
        total = 0.0
        for sender, (blob, cpu_s) in self._reports.value.items():
            self.sender_states[int(sender)] = pickle.loads(blob)
            total += float(cpu_s)
        self._reports = None
        return total

    def after_batch(self, stats: BatchStats) -> Reassignment | None:
        plan = self.strategy.plan(stats.loads(), n_nodes=self.n_nodes, tolerance=self.tolerance)
        return Reassignment.from_plan(plan, stats.loads())
