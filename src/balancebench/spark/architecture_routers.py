"""Join architectures on Spark: paper 000's Dynamic (join matrix) and BiStream (Bi, Bi6),
and paper 001's operator-set parallelism with the two schemes it is compared with.

The layouts and placement rules are the library's
(``balancebench.strategies.join_architectures``, where the papers and our
interpretations are documented); this module writes the same placement as Spark SQL
expressions (``hash(tuple_id, salt)``, ``pmod``, ``shiftright``, ``sequence``,
``transform``, ``explode``; no Python UDF), so Spark and numpy agree tuple for tuple
(``tests/spark/test_join_architectures_spark.py`` checks it).

- The layout is fixed at the first micro-batch from one aggregate of it (tuples per side,
  key range): the Dynamic grid shape, the BiStream group split and Bi6's key ranges.
- Routing emits, per tuple, a ``store`` row for each node that keeps it and a ``probe``
  row for each node it is joined at (Dynamic: the same ``m`` / ``n`` cells; BiStream:
  one store node, the other group's matching (sub)group nodes as probes). No routing
  table (``routing_table_entries = 0``).
- Memory-driven scale-out (Param ``node_capacity_state_tuples``): the layout starts at
  the architecture's smallest (``initial_layout``) and grows after a batch. BiStream's
  growth (``BiStream.grown``: nodes join subgroups, full nodes stop storing) moves no
  tuple; the store and probe expressions read the subgroups' member lists.
- Dynamic's growth (every node becomes four when a node's state exceeds
  ``max_state_tuples_per_node``, or the node capacity when that is null) is a
  row-by-row re-placement (:func:`regrid`): a copy whose node is in the tuple's new
  row / column stays, and one copy of each stored tuple (R: the copy in column 0 of its
  row; S: row 0 of its column) sends it to the nodes of its new row / column that held
  none; the next batch's exchange carries them (and counts them as moved).
- Paper 001 (``balancebench.strategies.operator_set``): ``operator_set`` and
  ``operator_parallel`` place on the ``n x n`` bucket matrix, one row per task with role
  ``both`` (a tuple stores and probes at each task of its row or column);
  ``operator_parallel`` first sends the batch through an exchange of its own (the
  stateless operators' instances), measured as routing work like the senders'.
  ``query_parallel`` stores a tuple at its instance and probes at every instance.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from balancebench.spark.routers import (
    BATCH_COLUMNS,
    BOTH,
    PROBE,
    STORE,
    BatchStats,
    Reassignment,
    RouteContext,
    SparkRouter,
    Split,
)
from balancebench.strategies import Strategy
from balancebench.strategies.join_architectures import (
    BI_KEY_SALT,
    BI_STORE_SALT,
    DYNAMIC_SALT,
    UNIT_BITS,
    BiStream,
    DynamicJoin,
    FirstBatch,
    Grid,
    Groups,
)
from balancebench.strategies.operator_set import (
    INSTANCE_SALT,
    SPLITTER_SALT,
    BucketMatrix,
    Instances,
    OperatorSetJoin,
    QueryParallelJoin,
)


def first_batch(batch: DataFrame) -> FirstBatch:
    """Tuples per side and key range of a batch (one Spark job)."""
    row = batch.agg(
        F.sum((F.col("side") == "R").cast("long")).alias("r"),
        F.sum((F.col("side") == "S").cast("long")).alias("s"),
        F.min("key").alias("lo"),
        F.max("key").alias("hi"),
    ).collect()[0]
    lo, hi = row["lo"], row["hi"]
    return FirstBatch(
        int(row["r"] or 0),
        int(row["s"] or 0),
        None if lo is None else int(lo),
        None if hi is None else int(hi),
    )


def _salted(column: str, salt: int) -> Column:
    return F.hash(F.col(column), F.lit(salt).cast("bigint"))


# ---- Dynamic ----------------------------------------------------------------------------
def dynamic_unit() -> Column:
    """``pmod(hash(tuple_id, DYNAMIC_SALT), 2^UNIT_BITS)`` (= ``dynamic_units``)."""
    return F.pmod(_salted("tuple_id", DYNAMIC_SALT), F.lit(1 << UNIT_BITS)).cast("bigint")


def cell_node(i: Column, j: Column, grid: Grid) -> Column:
    """Node of cell ``(i, j)`` (= ``Grid.cell_nodes``)."""
    g = grid.levels
    node = F.shiftright(i, g) * F.lit(grid.base_cols) + F.shiftright(j, g)
    base = grid.base_rows * grid.base_cols
    for level in range(1, g + 1):
        s = g - level
        bit_i = F.shiftright(i, s).bitwiseAND(F.lit(1))
        bit_j = F.shiftright(j, s).bitwiseAND(F.lit(1))
        node = node + (bit_i * F.lit(2) + bit_j) * F.lit(base * 4 ** (level - 1))
    return node.cast("int")


def _row(grid: Grid) -> Column:
    return F.shiftright(dynamic_unit(), UNIT_BITS - grid.row_bits)


def _col(grid: Grid) -> Column:
    return F.shiftright(dynamic_unit(), UNIT_BITS - grid.col_bits)


def dynamic_nodes(grid: Grid) -> Column:
    """Array of the cells of the tuple's row (R) or column (S)."""
    row, col = _row(grid), _col(grid)
    r_nodes = F.transform(
        F.sequence(F.lit(0), F.lit(grid.cols - 1)), lambda j: cell_node(row, j, grid)
    )
    s_nodes = F.transform(
        F.sequence(F.lit(0), F.lit(grid.rows - 1)), lambda i: cell_node(i, col, grid)
    )
    return F.when(F.col("side") == "R", r_nodes).otherwise(s_nodes)


def dynamic_rows(batch: DataFrame, grid: Grid) -> DataFrame:
    """A store and a probe row for each cell of each tuple's row / column."""
    placed = batch.select(*BATCH_COLUMNS, F.explode(dynamic_nodes(grid)).alias("node"))
    return placed.withColumn("role", F.explode(F.array(F.lit(STORE), F.lit(PROBE))))


def regrid(old: Grid, new: Grid) -> Split:
    """Dynamic's growth as a row-by-row re-placement (``Reassignment.placement``): a
    stored copy stays if its node is in the tuple's row (R) / column (S) of the grown
    grid ``new``; the tuple's first copy under ``old`` (R: column 0 of its row; S: row 0
    of its column) sends it to every node of its new row / column that held no copy."""

    def split(rows: DataFrame) -> tuple[DataFrame, DataFrame]:
        stay = rows.where(F.array_contains(dynamic_nodes(new), F.col("node")))
        first_copy = F.when(F.col("side") == "R", cell_node(_row(old), F.lit(0), old)).otherwise(
            cell_node(F.lit(0), _col(old), old)
        )
        lacking = F.array_except(dynamic_nodes(new), dynamic_nodes(old))
        go = rows.where(F.col("node") == first_copy).withColumn("node", F.explode(lacking))
        return stay, go

    return split


class ArchitectureRouter(SparkRouter):
    """Common part: the layout fixed at the first batch, its history, its description."""

    def __init__(
        self, strategy: Strategy, n_nodes: int, tolerance: float, capacity: int | None = None
    ) -> None:
        super().__init__(strategy, n_nodes, tolerance, capacity)
        self.layout: Any = None
        #: The layout each routed batch used, in order.
        self.layouts: list[Any] = []

    def _layout(self, batch: DataFrame, ctx: RouteContext) -> Any:
        if self.layout is None:
            first = first_batch(batch)
            if self.capacity is None:
                self.layout = self.strategy.layout(self.n_nodes, first, ctx.operator)
            else:  # memory-driven scale-out: the architecture's smallest layout first
                self.layout = self.strategy.initial_layout(self.n_nodes, first, ctx.operator)
        self.layouts.append(self.layout)
        return self.layout

    def nodes_used(self) -> int:
        return self.n_nodes if self.layout is None else int(self.layout.n_nodes)

    def info(self) -> dict[str, Any]:
        """The layout in use (for logging), with the strategy's Params."""
        out: dict[str, Any] = dict(self.strategy.params())
        if self.layout is not None:
            out.update(self.layout.describe())
        return out


class DynamicRouter(ArchitectureRouter):
    """Dynamic: the join matrix, growing 1-into-4 over the memory Param."""

    strategy: DynamicJoin

    def route(self, batch: DataFrame, ctx: RouteContext) -> DataFrame:
        return dynamic_rows(batch, self._layout(batch, ctx))

    def after_batch(self, stats: BatchStats) -> Reassignment | None:
        if self.layout is None:
            return None
        node_state = stats.node_state(self.n_nodes)
        grown = self.strategy.grown(self.layout, node_state, self.n_nodes, self.capacity)
        if grown is None:
            return None
        old, self.layout = self.layout, grown
        self.scaled_out = True
        return Reassignment.placement(regrid(old, grown))


# ---- BiStream ---------------------------------------------------------------------------
def subgroup(layout: Groups, side: str, key: Column) -> Column:
    """Subgroup of ``side``'s group for ``key`` (= ``Groups.subgroup_of``)."""
    k = layout.subgroups(side)
    if k == 1 or layout.key_rule == "none":
        return F.lit(0)
    if layout.key_rule == "hash":
        return F.pmod(F.hash(key, F.lit(BI_KEY_SALT).cast("bigint")), F.lit(k))
    above = [(key >= F.lit(int(b))).cast("int") for b in layout.boundaries(side)]
    return reduce(lambda a, b: a + b, above)


def _lits(values: np.ndarray) -> Column:
    return F.array(*[F.lit(int(v)) for v in values])


def bi_store_node(layout: Groups) -> Column:
    """ONE node per tuple: by the tuple-id hash among the storing nodes of its key's
    subgroup of its own group (= ``BiStream.store_nodes``)."""
    h = _salted("tuple_id", BI_STORE_SALT)
    nodes = {}
    for side in ("R", "S"):
        members, first = layout.flat(side, storing=True)
        q = subgroup(layout, side, F.col("key"))
        lo = F.element_at(_lits(first), q + 1)
        size = F.element_at(_lits(first), q + 2) - lo
        nodes[side] = F.element_at(_lits(members), lo + F.pmod(h, size) + 1)
    return F.when(F.col("side") == "R", nodes["R"]).otherwise(nodes["S"]).cast("int")


def bi_probe_nodes(layout: Groups, band_width: int) -> Column:
    """Array of the other group's nodes in the subgroup(s) matching the key."""
    key = F.col("key")
    ranges = {}
    for own, other in (("R", "S"), ("S", "R")):
        if layout.key_rule == "range":
            q1 = subgroup(layout, other, key - F.lit(band_width))
            q2 = subgroup(layout, other, key + F.lit(band_width))
        elif layout.key_rule == "hash":
            q1 = q2 = subgroup(layout, other, key)
        else:
            q1, q2 = F.lit(0), F.lit(layout.subgroups(other) - 1)
        members, first = layout.flat(other)
        lo = F.element_at(_lits(first), q1 + 1)
        hi = F.element_at(_lits(first), q2 + 2)
        ranges[own] = F.slice(_lits(members), lo + 1, hi - lo).cast("array<int>")
    return F.when(F.col("side") == "R", ranges["R"]).otherwise(ranges["S"])


def bi_rows(batch: DataFrame, layout: Groups, band_width: int) -> DataFrame:
    """The store row (position 0) and the probe rows of every tuple, in one pass."""
    copies = F.concat(F.array(bi_store_node(layout)), bi_probe_nodes(layout, band_width))
    placed = batch.select(*BATCH_COLUMNS, F.posexplode(copies).alias("_pos", "node"))
    role = F.when(F.col("_pos") == 0, F.lit(STORE)).otherwise(F.lit(PROBE))
    return placed.select(*BATCH_COLUMNS, "node", role.alias("role"))


class BiStreamRouter(ArchitectureRouter):
    """Bi / Bi6: R and S groups (and subgroups); the layout is fixed unless memory-driven
    scale-out grows it (``after_batch``); no migration."""

    strategy: BiStream

    def route(self, batch: DataFrame, ctx: RouteContext) -> DataFrame:
        layout = self._layout(batch, ctx)
        width = ctx.operator.key_reach(ctx.band_width)
        return bi_rows(batch, layout, width)

    def after_batch(self, stats: BatchStats) -> Reassignment | None:
        """Memory-driven growth (``BiStream.grown``): nodes join subgroups and full nodes
        stop storing; stored tuples never move (random storage needs no migration)."""
        if self.capacity is None or self.layout is None:
            return None
        node_state = stats.node_state(self.n_nodes)
        grown = self.strategy.grown(self.layout, node_state, self.capacity, self.n_nodes)
        if grown is not None:
            self.scaled_out = grown.member_count > self.layout.member_count
            self.layout = grown
        return None


# ---- paper 001: operator-set parallelism and its comparison ----------------------------
def _pmod_hash(column: str, salt: int, n: int) -> Column:
    return F.pmod(_salted(column, salt), F.lit(n))


def matrix_rows(batch: DataFrame, layout: BucketMatrix) -> DataFrame:
    """One ``both`` row per task of the tuple's row (R, bucket ``b0``) or column (S,
    bucket ``b1``) of ``BMP[b0, b1]`` (= ``OperatorSetJoin.store_nodes``)."""
    n = layout.n
    bucket = _pmod_hash("tuple_id", SPLITTER_SALT, n)
    along = F.sequence(F.lit(0), F.lit(n - 1))
    r_nodes = F.transform(along, lambda j: bucket * F.lit(n) + j)
    s_nodes = F.transform(along, lambda i: i * F.lit(n) + bucket)
    nodes = F.when(F.col("side") == "R", r_nodes).otherwise(s_nodes)
    placed = batch.select(*BATCH_COLUMNS, F.explode(nodes.cast("array<int>")).alias("node"))
    return placed.withColumn("role", F.lit(BOTH))


def instance_rows(batch: DataFrame, layout: Instances) -> DataFrame:
    """A probe row for every instance, ``both`` at the instance the tuple enters."""
    entered = _pmod_hash("tuple_id", INSTANCE_SALT, layout.n)
    placed = batch.select(
        *BATCH_COLUMNS,
        entered.alias("_entered"),
        F.explode(F.sequence(F.lit(0), F.lit(layout.n - 1))).alias("node"),
    )
    role = F.when(F.col("node") == F.col("_entered"), F.lit(BOTH)).otherwise(F.lit(PROBE))
    return placed.select(*BATCH_COLUMNS, "node", role.alias("role"))


class OperatorSetRouter(ArchitectureRouter):
    """``operator_set`` / ``operator_parallel``: the bucket matrix; the latter behind an
    exchange of its own (``strategy.exchanges`` = 2)."""

    strategy: OperatorSetJoin

    def route(self, batch: DataFrame, ctx: RouteContext) -> DataFrame:
        layout = self._layout(batch, ctx)
        if self.strategy.exchanges > 1:  # the stateless operators' own instances
            batch = batch.repartition(self.n_nodes, _salted("tuple_id", INSTANCE_SALT))
        return matrix_rows(batch, layout)

    def after_batch(self, stats: BatchStats) -> Reassignment | None:
        return None


class QueryParallelRouter(ArchitectureRouter):
    """``query_parallel``: stored at the instance a tuple enters, probing at every one."""

    strategy: QueryParallelJoin

    def route(self, batch: DataFrame, ctx: RouteContext) -> DataFrame:
        return instance_rows(batch, self._layout(batch, ctx))

    def after_batch(self, stats: BatchStats) -> Reassignment | None:
        return None
