"""Strategies on Spark: which node(s) every tuple of a batch is stored on and probes.

A :class:`SparkRouter` turns a batch ``(side, tuple_id, key, event_time_s, payload)``
into one row per copy, with ``node`` and ``role``: ``store`` (the node keeps the tuple
as state: a stored join tuple, or the node that counts it in an aggregation),
``probe`` (the node joins the tuple against what it stores) or ``both`` (one copy that
the node stores and probes with: a tuple is sent once to a node that does both). After
the batch it reads the batch's statistics and may say how state moves before the next
batch (:class:`Reassignment`).

Key-level strategies (paper 000 Algorithm 1, :class:`KeyLevelRouter`):

- storage routing ONE: ``routing.with_storage_node`` (home ``F(k)``, or one part of
  ``Y(k)`` chosen by the tuple-id hash, or the bucket owner for a bucket map);
- operator routing ALL (equi-join): every node of ``Y(k)`` **and every node that holds
  state of ``k``** (the same set, except when a plan left a key's older state on a node
  that no new tuple of the key goes to; probing it keeps every result pair);
- predicate routing (band join ``|k1 - k2| <= w``): the union of those node sets over
  the keys ``k - w .. k + w``.

A stored tuple is on exactly one node and a later tuple probes every node that can hold
a match, so each result pair is produced exactly once (by the later tuple's probe).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench.hashing import FRACTION_UNITS, home_nodes
from balancebench.loads import KeyLoads
from balancebench.routing import BucketMap, RoutingTable
from balancebench.spark.routing import (
    bucket_owner,
    home_node,
    with_per_tuple_node,
    with_storage_node,
)
from balancebench.strategies import MigrationPlan, Strategy
from balancebench.workloads import AGGREGATE, BAND_JOIN

BATCH_COLUMNS = ["side", "tuple_id", "key", "event_time_s", "payload"]
STORE, PROBE, BOTH = "store", "probe", "both"
#: Roles of the rows a node stores, and of the rows it probes with.
STORES, PROBES = (STORE, BOTH), (PROBE, BOTH)


@dataclass
class BatchStats:
    """What the nodes report after a batch: per (key, node) part, the tuples stored in
    the batch (``load``) and the state held after it (``state``)."""

    key: np.ndarray
    node: np.ndarray
    load: np.ndarray
    state: np.ndarray

    def loads(self) -> KeyLoads:
        return KeyLoads(self.key, self.node, self.load, self.state)


@dataclass
class Reassignment:
    """How state moves between batches, in one of two forms.

    - Key-level (a plan's moves): for some (key, from node) parts, segments ``[lo, hi)``
      of ``[0, 2^20)`` and the node each segment goes to. A stored tuple moves by a hash
      of its id; a partial count is split by segment widths.
    - ``state_rows``: a function of the state DataFrame returning the new state rows
      (same columns, ``node`` set; copies may be added or dropped), e.g. Dynamic's grid
      growth; the engine keeps rows whose node is unchanged and ships the others.
    """

    key: np.ndarray
    from_node: np.ndarray
    to_node: np.ndarray
    lo_units: np.ndarray
    hi_units: np.ndarray
    plan: MigrationPlan | None = None
    state_rows: Callable[[DataFrame], DataFrame] | None = None

    @classmethod
    def rows(cls, state_rows: Callable[[DataFrame], DataFrame]) -> Reassignment:
        """A reassignment that replaces the state by ``state_rows(state)`` (same columns,
        ``node`` set; ``_surrogate`` is recomputed by the engine)."""
        z = np.zeros(0, dtype=np.int64)
        return cls(z, z.astype(np.int32), z.astype(np.int32), z, z, None, state_rows)

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
        return len(self.key) + (1 if self.state_rows is not None else 0)


@dataclass
class RouteContext:
    """What a router may use to route a batch."""

    spark: SparkSession
    operator: str
    n_nodes: int
    band_width: int = 1
    #: State held after the previous batch, per (key, node) with state > 0.
    state_key: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    state_node: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))


class SparkRouter(ABC):
    """One strategy's placement of tuples on the nodes of the stateful stage."""

    #: Senders of the routing stage (None: the input partitions of the stream).
    senders: int | None = None
    #: The routing decisions run in Python workers (their work is measured as run time).
    routes_in_python: bool = False

    def __init__(self, strategy: Strategy, n_nodes: int, tolerance: float) -> None:
        self.strategy = strategy
        self.n_nodes = n_nodes
        self.tolerance = tolerance

    @property
    def routing_table_entries(self) -> int:
        return 0

    @abstractmethod
    def route(self, batch: DataFrame, ctx: RouteContext) -> DataFrame:
        """``batch`` plus ``node`` (int) and ``role`` (``store``/``probe``), one row per copy."""

    def after_batch(self, stats: BatchStats) -> Reassignment | None:
        """The batch's statistics; how state moves before the next batch (or None)."""
        return None

    def nodes_used(self) -> int:
        return self.n_nodes


def _with_role(df: DataFrame, role: str) -> DataFrame:
    return df.withColumn("role", F.lit(role))


class KeyLevelRouter(SparkRouter):
    """Paper 000's Algorithm 1 for any strategy with a key router (``Y`` or a bucket map)."""

    def __init__(self, strategy: Strategy, n_nodes: int, tolerance: float) -> None:
        super().__init__(strategy, n_nodes, tolerance)
        self.table = strategy.routing_for(n_nodes)

    @property
    def routing_table_entries(self) -> int:
        return len(self.table)

    def default_node(self, key: Column | str) -> Column:
        if isinstance(self.table, BucketMap):
            return bucket_owner(key, self.table)
        return home_node(key, self.n_nodes)

    def _default_nodes_np(self, keys: np.ndarray) -> np.ndarray:
        if isinstance(self.table, BucketMap):
            return self.table.storage_nodes(keys)
        return home_nodes(keys, self.n_nodes)

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
        stored = with_storage_node(ctx.spark, batch, self.table)
        if ctx.operator == AGGREGATE:
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
        """One row per (tuple, node) it is sent to: the storage node first (``both`` when
        the tuple also probes there, else ``store``), then each other probe node
        (``probe``); unique by construction (no shuffle to dedupe)."""
        width = ctx.band_width if ctx.operator == BAND_JOIN else 0
        keys, nodes = self.band_probe_table(keys, nodes, width)
        defaults = F.array_distinct(
            F.array(*[self.default_node(F.col("key") + o) for o in range(-width, width + 1)])
        )
        if len(keys):
            # One row per key with its probe nodes, so the join does not multiply tuples.
            order = np.argsort(keys, kind="stable")
            uk, first = np.unique(keys[order], return_index=True)
            sets = np.split(nodes[order].astype(np.int32), first[1:])
            table = ctx.spark.createDataFrame(
                pa.table(
                    {
                        "_pk": pa.array(uk),
                        "_pnodes": pa.array([s.tolist() for s in sets], pa.list_(pa.int32())),
                    }
                )
            )
            probes = stored.join(F.broadcast(table), stored["key"] == table["_pk"], "left")
            node_set = F.coalesce(F.col("_pnodes"), defaults)
        else:
            probes, node_set = stored, defaults
        copies = F.array_union(F.array(F.col("node").cast("int")), node_set.cast("array<int>"))
        placed = probes.select(
            *BATCH_COLUMNS,
            F.array_contains(node_set, F.col("node")).alias("_probes_home"),
            F.posexplode(copies).alias("_pos", "_copy"),
        )
        role = (
            F.when(F.col("_pos") > 0, F.lit(PROBE))
            .when(F.col("_probes_home"), F.lit(BOTH))
            .otherwise(F.lit(STORE))
        )
        return placed.select(*BATCH_COLUMNS, F.col("_copy").alias("node"), role.alias("role"))

    def after_batch(self, stats: BatchStats) -> Reassignment | None:
        loads = stats.loads()
        plan = self.strategy.plan(loads, n_nodes=self.n_nodes, tolerance=self.tolerance)
        self.table = self.strategy.routing_for(self.n_nodes)
        return Reassignment.from_plan(plan, loads)


class PerTupleRouter(SparkRouter):
    """``pkg``, ``dchoices``, ``wchoices``: every sender routes its tuples in order
    (``routing.with_per_tuple_node``); aggregations only; no plan, no migration."""

    routes_in_python = True

    def __init__(self, strategy: Strategy, n_nodes: int, tolerance: float) -> None:
        super().__init__(strategy, n_nodes, tolerance)
        self.sender_states: dict[int, Any] = {}
        self._pending: DataFrame | None = None
        self.senders = int(strategy.settings["senders"])

    def route(self, batch: DataFrame, ctx: RouteContext) -> DataFrame:
        import pickle

        routed = with_per_tuple_node(
            batch.select("tuple_id", "key"),
            self.strategy,
            self.sender_states,
            self.n_nodes,
            int(self.strategy.settings["senders"]),
        ).persist()
        for row in routed.where(F.col("tuple_id") < 0).select("sender", "state").collect():
            self.sender_states[int(row["sender"])] = pickle.loads(row["state"])
        self._pending = routed
        nodes = routed.where(F.col("tuple_id") >= 0).select("tuple_id", "node")
        return _with_role(batch.join(nodes, "tuple_id"), STORE)

    def after_batch(self, stats: BatchStats) -> Reassignment | None:
        if self._pending is not None:
            self._pending.unpersist()
            self._pending = None
        plan = self.strategy.plan(stats.loads(), n_nodes=self.n_nodes, tolerance=self.tolerance)
        return Reassignment.from_plan(plan, stats.loads())
