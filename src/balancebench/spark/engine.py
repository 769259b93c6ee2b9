"""The micro-batch engine: a workload's stateful operator on ``N`` nodes, under a strategy.

Execution model (one Spark application per strategy run):

- **Replay.** The workload's stream (``balancebench.streams``) is cut into
  ``n_batches`` equal event-time micro-batches (``replay.batch_index``). Each
  micro-batch is processed by a few Spark jobs, one after the other.
- **Nodes.** A node is one Spark partition of the stateful stage: rows are placed with
  ``routing.partition_by_node`` so partition ``i`` holds exactly node ``i``'s rows (a
  per-node surrogate value whose Murmur3 hash lands in partition ``i``), and every
  later per-node computation reads that partitioning without another shuffle.
- **Routing.** The strategy's :class:`~balancebench.spark.routers.SparkRouter` gives every
  tuple its node(s) and role (store / probe), as Spark SQL expressions, broadcast
  tables and Arrow (per-sender strategies). The routed rows are shuffled once: the
  records each node's task reads are the tuples shipped to it (replicas included).
- **State lives on its node across batches**, as a ``localCheckpoint``-ed DataFrame
  with the same partitioning: the stored tuples of a full-history join, the window
  contents of a window join (tuples older than ``window_s`` before the next batch are
  dropped), the partial counts of an aggregation (one row per node, key and batch
  slice; slices older than the window are dropped).
- **Operator.** Aggregation: each node counts its tuples per key and adds them to its
  state; the window's answer merges the partials of every node per key (TOPK: the
  ``top_k`` keys by count, ties to the smaller key). Join (paper 000 Algorithm 1): each
  node joins the probes it received with the tuples it stores (its state and the
  batch's new stored tuples) on the key (equi) or on ``|k1 - k2| <= band_width``
  (band, as an equi-join on the probe's ``2w + 1`` candidate keys), keeping a pair
  only when the stored tuple arrived earlier (``tuple_id`` is the arrival order) and,
  for a window join, within ``window_s``: every pair is produced exactly once, by the
  later tuple's probe at the node storing the earlier one.
- **Oracle.** After every batch the answer is recomputed by plain Spark SQL on the raw
  tuples (``groupBy(key).count()`` over the window; the join of all tuples so far,
  keeping pairs whose later tuple is in this batch) and compared as a multiset
  (``exceptAll`` both ways; TOPK also as a list). Any difference fails the run.
- **Statistics and plan.** Each node reports, per key, the tuples it stored in the
  batch (``load``) and the state it holds (``state``); the strategy plans (timed, paper
  000's O1) and the plan's moves are applied to the state before the next batch: a
  stored tuple moves by a hash of its id, a partial count is split by the moved share;
  the moved tuples are counted by Spark (``migrated_tuples``), and the migration's wall
  time delays the next batch like the plan time does.
- **Measured per batch** (Spark's REST API, ``task_metrics``): per node the tuples read
  by its task and, summed over its tasks in the node stages (receive, operator, state
  update), ``executorCpuTime`` (the node's work) and ``executorRunTime`` (wall). Makespan
  = max over nodes of the CPU time, ideal = mean. Why CPU time: the nodes are partitions
  sharing a few cores with the driver, the JIT and the GC, so a task's wall time is
  mostly waiting for a core (measured: 16M tuples, 8 nodes, 2 cores: wall 2-4x CPU, wall
  max/mean 1.3-2.3 on equal tuple counts where CPU max/mean is 1.04-1.2). The wall
  makespan is reported too (``makespan_wall_s``). The replay clock
  (``balancebench.replay``) turns the makespans into event-time latency with backlog.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench.hashing import FRACTION_UNITS, partition_surrogates
from balancebench.loads import imbalance
from balancebench.spark.routers import (
    BATCH_COLUMNS,
    PROBE,
    STORE,
    BatchStats,
    Reassignment,
    RouteContext,
    SparkRouter,
)
from balancebench.spark.routing import partition_by_node
from balancebench.spark.task_metrics import TaskMetricsReader, node_times
from balancebench.strategies import MigrationPlan
from balancebench.workloads import AGGREGATE, BAND_JOIN, Workload

#: Salt of the tuple-id hash that picks which stored tuples of a part migrate (distinct
#: from the storage-routing salt, so migration does not follow storage decisions).
MIGRATION_SALT = 0x316A7E
#: Spark SQL settings the engine needs while it runs (restored afterwards): joins inside
#: node partitions (no broadcast, co-partitioned on the surrogate alone).
ENGINE_CONF = {
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.requireAllClusterKeysForCoPartition": "false",
    "spark.sql.adaptive.enabled": "false",
}


class OracleMismatch(AssertionError):
    """The balanced result differs from the plain Spark computation."""


@dataclass(frozen=True)
class EngineConfig:
    workload: Workload
    n_nodes: int
    n_batches: int
    interval_s: float
    window_s: float = 0.0
    band_width: int = 1
    top_k: int = 10

    @property
    def window_batches(self) -> int | None:
        """Aggregation window in batches (None = full history)."""
        if self.window_s <= 0:
            return None
        return max(1, math.ceil(self.window_s / self.interval_s - 1e-9))


@dataclass
class BatchResult:
    batch: int
    input_tuples: int
    #: Tuples each node's task read from the routing shuffle (replicas included).
    node_received: np.ndarray
    #: Summed executorRunTime (wall) of each node's tasks in the batch's node stages (s).
    node_run_time_s: np.ndarray
    #: State tuples held by each node after the batch (before the plan's migration).
    node_state: np.ndarray
    result_rows: int
    routing_table_entries: int
    oracle_passed: bool
    wall_s: float
    answer: Any = None
    plan: MigrationPlan | None = None
    #: State tuples the plan made after this batch moved (counted by Spark).
    migrated_tuples: float = 0.0
    #: Wall time of applying that migration (s), before the next batch.
    migrate_s: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)
    #: Summed executorCpuTime of each node's tasks in the batch's node stages (s): the
    #: work the node did. None when an executor could not measure it (then wall is used).
    node_cpu_time_s: np.ndarray | None = None

    @property
    def node_work_s(self) -> np.ndarray:
        """What makespan is computed from: CPU time where measured, else wall run time."""
        return self.node_cpu_time_s if self.node_cpu_time_s is not None else self.node_run_time_s

    @property
    def makespan_s(self) -> float:
        return float(self.node_work_s.max())

    @property
    def ideal_makespan_s(self) -> float:
        return float(self.node_work_s.mean())

    @property
    def makespan_wall_s(self) -> float:
        return float(self.node_run_time_s.max())

    @property
    def imbalance_max_over_mean(self) -> float:
        return imbalance(self.node_received)

    @property
    def received_tuples(self) -> int:
        return int(self.node_received.sum())

    @property
    def nodes_used(self) -> int:
        return int(np.count_nonzero((self.node_received > 0) | (self.node_state > 0)))

    @property
    def replication_factor(self) -> float:
        return self.received_tuples / self.input_tuples if self.input_tuples else 0.0


def with_batch(df: DataFrame, interval_s: float, n_batches: int) -> DataFrame:
    """The stream with its micro-batch (same IEEE expression as ``replay.batch_index``)."""
    batch = F.least(F.floor(F.col("event_time_s") / F.lit(interval_s)), F.lit(n_batches - 1))
    return df.withColumn("batch", batch.cast("bigint"))


class Engine:
    """Runs one workload under one router; see the module docstring."""

    def __init__(
        self,
        spark: SparkSession,
        stream: DataFrame,
        config: EngineConfig,
        router: SparkRouter,
        name: str,
        on_batch: Callable[[BatchResult], None] | None = None,
    ) -> None:
        self.spark = spark
        self.sc = spark.sparkContext
        self.stream = stream
        self.config = config
        self.router = router
        self.name = name
        self.on_batch = on_batch
        self.reader = TaskMetricsReader(self.sc)
        self.n = config.n_nodes
        self.surrogates = F.array(
            *[F.lit(int(v)).cast("bigint") for v in partition_surrogates(self.n)]
        )
        counts = stream.groupBy("batch").count().collect()
        #: Input tuples per batch (counted once).
        self.batch_tuples = {int(r["batch"]): int(r["count"]) for r in counts}
        self.state: DataFrame | None = None
        self.state_key = np.zeros(0, dtype=np.int64)
        self.state_node = np.zeros(0, dtype=np.int32)

    # ---- the loop ---------------------------------------------------------------------
    def run(self) -> list[BatchResult]:
        saved = {k: self.spark.conf.get(k, None) for k in ENGINE_CONF}
        for k, v in ENGINE_CONF.items():
            self.spark.conf.set(k, v)
        try:
            return [self._batch(b) for b in range(self.config.n_batches)]
        finally:
            for k, v in saved.items():
                if v is None:
                    self.spark.conf.unset(k)
                else:
                    self.spark.conf.set(k, v)

    def _group(self, b: int, phase: str) -> str:
        group = f"balancebench-{self.name}-b{b}-{phase}-{time.time_ns()}"
        self.sc.setJobGroup(group, f"{self.name} batch {b}: {phase}")
        return group

    def _batch(self, b: int) -> BatchResult:
        started = time.perf_counter()
        cfg = self.config
        batch = self.stream.where(F.col("batch") == b).select(*BATCH_COLUMNS)
        ctx = RouteContext(
            self.spark,
            cfg.workload.operator,
            self.n,
            cfg.band_width,
            self.state_key,
            self.state_node,
        )
        entries = self.router.routing_table_entries
        phases: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            phases[f"phase_{name}_s"] = now - clock
            clock = now

        # Routing decisions (per-sender strategies run Spark jobs here) are upstream work;
        # the measured "route" group is the shuffle that ships the copies to the nodes.
        self._group(b, "prepare")
        routed = partition_by_node(self.router.route(batch, ctx), self.n).persist()
        g_route = self._group(b, "route")
        routed.write.format("noop").mode("overwrite").save()
        lap("route")
        if cfg.workload.operator == AGGREGATE:
            groups, new_state, answer = self._aggregate(b, routed)
        else:
            groups, new_state, answer = self._join(b, routed)
        lap("operator")
        times = node_times(self.reader, [g_route, *groups], self.n)
        lap("task_metrics")
        self._group(b, "oracle")
        passed, result_rows, shown = self._oracle(b, answer)
        lap("oracle")
        self._group(b, "stats")
        stats, received = self._stats(routed, new_state)
        if not np.array_equal(received, times.records_read):
            raise RuntimeError(
                f"{self.name}: tuples routed per node {received.tolist()} differ from the rows "
                f"Spark's node tasks read {times.records_read.tolist()}"
            )
        node_state = np.bincount(stats.node, weights=stats.state, minlength=self.n)
        routed.unpersist()
        answer.unpersist()
        self._set_state(new_state, stats)
        lap("stats")
        result = BatchResult(
            batch=b,
            input_tuples=self.batch_tuples.get(b, 0),
            node_received=received,
            node_run_time_s=times.run_time_s,
            node_cpu_time_s=times.cpu_time_s,
            node_state=node_state,
            result_rows=result_rows,
            routing_table_entries=entries,
            oracle_passed=passed,
            wall_s=time.perf_counter() - started,
            answer=shown,
            extra=phases,
        )
        if passed and b < cfg.n_batches - 1:
            reassignment = self.router.after_batch(stats)
            if reassignment is not None:
                result.plan = reassignment.plan
                if len(reassignment):
                    moved_started = time.perf_counter()
                    result.migrated_tuples = self._migrate(b, reassignment)
                    self._track_moved_state(reassignment)
                    result.migrate_s = time.perf_counter() - moved_started
        if self.on_batch is not None:
            self.on_batch(result)
        if not passed:
            raise OracleMismatch(
                f"batch {b}: {self.name} on {cfg.workload.name} differs from plain Spark SQL: "
                f"{shown}"
            )
        return result

    def _track_moved_state(self, moves: Reassignment) -> None:
        """Where state is after a migration, for the next batch's probes: a move adds its
        destination as a holder of the key (the source may still hold part of it)."""
        if moves.state_rows is not None:
            assert self.state is not None
            held = self.state.select("key", "node").distinct().toArrow()
            self.state_key = held.column("key").to_numpy().astype(np.int64)
            self.state_node = held.column("node").to_numpy().astype(np.int32)
            return
        key = np.r_[self.state_key, moves.key].astype(np.int64)
        node = np.r_[self.state_node, moves.to_node].astype(np.int64)
        packed = np.unique(key * self.n + node)
        self.state_key, self.state_node = packed // self.n, (packed % self.n).astype(np.int32)

    def _set_state(self, new_state: DataFrame, stats: BatchStats) -> None:
        if self.state is not None:
            self.state.unpersist()
        self.state = new_state
        held = stats.state > 0
        self.state_key = stats.key[held]
        self.state_node = stats.node[held].astype(np.int32)

    def _stats(self, routed: DataFrame, state: DataFrame) -> tuple[BatchStats, np.ndarray]:
        """Per (key, node): tuples stored in the batch (``load``) and state held after it;
        and per node the tuples it received (stored and probe copies). One Spark job."""
        is_store = (F.col("role") == STORE).cast("long")
        sent = routed.groupBy("key", "node").agg(
            F.count(F.lit(1)).cast("double").alias("received"),
            F.sum(is_store).cast("double").alias("load"),
        )
        weight = F.col("count") if "count" in state.columns else F.lit(1)
        held = state.groupBy("key", "node").agg(F.sum(weight).cast("double").alias("state"))
        both = held.join(sent, ["key", "node"], "full").fillna(0.0).toArrow()
        node = both.column("node").to_numpy().astype(np.int32)
        received = np.bincount(
            node, weights=both.column("received").to_numpy(), minlength=self.n
        ).astype(np.int64)
        stats = BatchStats(
            key=both.column("key").to_numpy().astype(np.int64),
            node=node,
            load=both.column("load").to_numpy().astype(np.float64),
            state=both.column("state").to_numpy().astype(np.float64),
        )
        return stats, received

    # ---- aggregation --------------------------------------------------------------------
    def _aggregate(self, b: int, routed: DataFrame) -> tuple:
        cfg = self.config
        g_op = self._group(b, "operator")
        partial = (
            routed.groupBy("_surrogate", "node", "key")
            .agg(F.count(F.lit(1)).alias("count"))
            .withColumn("slice", F.lit(b).cast("bigint"))
            .select("_surrogate", "node", "key", "slice", "count")
        )
        merged = partial if self.state is None else self.state.unionByName(partial)
        if cfg.window_batches is not None:
            merged = merged.where(F.col("slice") > b - cfg.window_batches)
        new_state = merged.localCheckpoint(eager=True)
        self._group(b, "merge")
        answer = new_state.groupBy("key").agg(F.sum("count").alias("count")).persist()
        answer.write.format("noop").mode("overwrite").save()
        return [g_op], new_state, answer

    # ---- join ---------------------------------------------------------------------------
    def _join(self, b: int, routed: DataFrame) -> tuple:
        cfg = self.config
        g_op = self._group(b, "operator")
        store = routed.where(F.col("role") == STORE).drop("role")
        probe = routed.where(F.col("role") == PROBE).drop("role")
        width = cfg.band_width if cfg.workload.operator == BAND_JOIN else 0
        if width:
            probe = probe.withColumn(
                "_match", F.explode(F.sequence(F.col("key") - width, F.col("key") + width))
            )
        else:
            probe = probe.withColumn("_match", F.col("key"))
        # The side a probe pairs with, as an equality: Spark then hashes on (node, key,
        # side) instead of pairing every probe with its own side's stored tuples of the key
        # and filtering afterwards (quadratic in a hot key's tuples).
        probe = probe.withColumn(
            "_other_side", F.when(F.col("side") == "R", F.lit("S")).otherwise(F.lit("R"))
        )
        stored_sources = [store] if self.state is None else [self.state, store]
        pairs = None
        for stored in stored_sources:
            p, s = probe.alias("p"), stored.alias("s")
            cond = (
                (F.col("p._surrogate") == F.col("s._surrogate"))
                & (F.col("p._match") == F.col("s.key"))
                & (F.col("p._other_side") == F.col("s.side"))
                & (F.col("s.tuple_id") < F.col("p.tuple_id"))
            )
            if cfg.window_s > 0:
                cond = cond & (F.col("p.event_time_s") - F.col("s.event_time_s") <= cfg.window_s)
            found = p.join(s, cond).select(
                F.when(F.col("p.side") == "R", F.col("p.tuple_id"))
                .otherwise(F.col("s.tuple_id"))
                .alias("r_id"),
                F.when(F.col("p.side") == "R", F.col("s.tuple_id"))
                .otherwise(F.col("p.tuple_id"))
                .alias("s_id"),
            )
            pairs = found if pairs is None else pairs.unionByName(found)
        pairs = pairs.persist()
        pairs.write.format("noop").mode("overwrite").save()
        g_state = self._group(b, "state")
        merged = store if self.state is None else self.state.unionByName(store)
        if cfg.window_s > 0:
            horizon = (b + 1) * cfg.interval_s - cfg.window_s
            merged = merged.where(F.col("event_time_s") >= horizon)
        new_state = merged.localCheckpoint(eager=True)
        return [g_op, g_state], new_state, pairs

    def _oracle(self, b: int, answer: DataFrame) -> tuple[bool, int, Any]:
        return check_batch(self.stream, self.config, b, answer)

    # ---- migration ----------------------------------------------------------------------
    def _replace_state(self, state_rows: Callable[[DataFrame], DataFrame]) -> float:
        """State rows recomputed by a join architecture (e.g. a grown grid): rows whose
        node is unchanged stay in place, the others (and new copies) are shipped. Moved
        tuples = rows on a node that did not hold them before."""
        state = self.state
        assert state is not None
        columns = state.columns
        fresh = state_rows(state).select(*[c for c in columns if c != "_surrogate"])
        fresh = fresh.withColumn(
            "_surrogate", F.element_at(self.surrogates, F.col("node") + 1)
        ).select(*columns)
        old = state.select("tuple_id", "side", F.col("node").alias("_old_node"))
        tagged = fresh.join(old, ["tuple_id", "side"], "left").withColumn(
            "_kept", F.col("_old_node") == F.col("node")
        )
        tagged = tagged.groupBy(*columns).agg(F.max("_kept").alias("_kept"))
        kept = tagged.where(F.col("_kept")).select(*columns)
        arrived = tagged.where(~F.coalesce(F.col("_kept"), F.lit(False))).select(*columns)
        arrived = arrived.repartition(self.n, "_surrogate").persist()
        moved_tuples = arrived.count()
        new_state = kept.repartition(self.n, "_surrogate").unionByName(arrived)
        new_state = new_state.localCheckpoint(eager=True)
        arrived.unpersist()
        state.unpersist()
        self.state = new_state
        return float(moved_tuples)

    def _migrate(self, b: int, moves: Reassignment) -> float:
        """Apply a reassignment to the state; returns the state tuples that moved."""
        self._group(b, "migrate")
        if moves.state_rows is not None:
            return self._replace_state(moves.state_rows)
        seg = self.spark.createDataFrame(
            pa.table(
                {
                    "_mk": pa.array(moves.key),
                    "_mfrom": pa.array(moves.from_node),
                    "_mto": pa.array(moves.to_node),
                    "_mlo": pa.array(moves.lo_units),
                    "_mhi": pa.array(moves.hi_units),
                }
            )
        )
        state = self.state
        assert state is not None
        columns = state.columns
        is_count = "count" in columns
        on_part = (state["key"] == seg["_mk"]) & (state["node"] == seg["_mfrom"])
        if is_count:
            # A partial count of a part splits by the moved shares: floor(c * hi) -
            # floor(c * lo) per segment, so the pieces sum to at most c; the rest stays.
            piece = F.floor(F.col("count") * F.col("_mhi") / FRACTION_UNITS) - F.floor(
                F.col("count") * F.col("_mlo") / FRACTION_UNITS
            )
            moved = (
                state.join(F.broadcast(seg), on_part, "inner")
                .select("key", "slice", "_mfrom", F.col("_mto").alias("node"), piece.alias("count"))
                .where(F.col("count") > 0)
                .persist()
            )
            gone = moved.groupBy("key", "slice", "_mfrom").agg(F.sum("count").alias("_gone"))
            gone = gone.withColumnRenamed("key", "_gkey").withColumnRenamed("slice", "_gslice")
            stay = (
                state.join(
                    F.broadcast(gone),
                    (state["key"] == gone["_gkey"])
                    & (state["slice"] == gone["_gslice"])
                    & (state["node"] == gone["_mfrom"]),
                    "left",
                )
                .withColumn("count", F.col("count") - F.coalesce(F.col("_gone"), F.lit(0)))
                .where(F.col("count") > 0)
                .select(*columns)
            )
            arrived = (
                moved.groupBy("key", "node", "slice")
                .agg(F.sum("count").cast("bigint").alias("count"))
                .withColumn("_surrogate", F.element_at(self.surrogates, F.col("node") + 1))
                .select(*columns)
                .repartition(self.n, "_surrogate")
            )
            weight = F.col("count")
        else:
            unit = F.pmod(
                F.hash(F.col("tuple_id"), F.lit(MIGRATION_SALT).cast("bigint")),
                F.lit(FRACTION_UNITS),
            )
            hit = on_part & (unit >= seg["_mlo"]) & (unit < seg["_mhi"])
            tagged = state.join(F.broadcast(seg), hit, "left")
            stay = tagged.where(F.col("_mto").isNull()).select(*columns)
            arrived = (
                tagged.where(F.col("_mto").isNotNull())
                .withColumn("node", F.col("_mto"))
                .withColumn("_surrogate", F.element_at(self.surrogates, F.col("_mto") + 1))
                .select(*columns)
                .repartition(self.n, "_surrogate")
            )
            weight = F.lit(1)
        arrived = arrived.persist()
        moved_tuples = arrived.agg(F.sum(weight)).collect()[0][0] or 0
        new_state = stay.unionByName(arrived).localCheckpoint(eager=True)
        arrived.unpersist()
        if is_count:
            moved.unpersist()
        self.state.unpersist()
        self.state = new_state
        return float(moved_tuples)


def expected_answer(stream: DataFrame, config: EngineConfig, b: int) -> DataFrame:
    """Plain Spark SQL over the raw tuples: what batch ``b`` must produce.

    Aggregation: ``(key, count)`` over the window's batches. Join: the pairs
    ``(r_id, s_id)`` of all tuples so far whose later tuple is in batch ``b``.
    """
    if config.workload.operator == AGGREGATE:
        first = 0 if config.window_batches is None else b - config.window_batches + 1
        window = stream.where((F.col("batch") >= first) & (F.col("batch") <= b))
        return window.groupBy("key").agg(F.count(F.lit(1)).alias("count"))
    upto = stream.where(F.col("batch") <= b)
    r = upto.where(F.col("side") == "R").alias("r")
    s = upto.where(F.col("side") == "S").alias("s")
    if config.workload.operator == BAND_JOIN:
        cond = F.abs(F.col("r.key") - F.col("s.key")) <= config.band_width
    else:
        cond = F.col("r.key") == F.col("s.key")
    if config.window_s > 0:
        cond = cond & (F.abs(F.col("r.event_time_s") - F.col("s.event_time_s")) <= config.window_s)
    cond = cond & (F.greatest(F.col("r.batch"), F.col("s.batch")) == b)
    return r.join(s, cond).select(
        F.col("r.tuple_id").alias("r_id"), F.col("s.tuple_id").alias("s_id")
    )


def check_batch(
    stream: DataFrame, config: EngineConfig, b: int, answer: DataFrame
) -> tuple[bool, int, Any]:
    """The correctness oracle of batch ``b``: ``answer`` (aggregation ``(key, count)``;
    join ``(r_id, s_id)``) equals :func:`expected_answer` as a multiset. Returns
    ``(passed, result_rows, what to show)`` (TOPK: the top list).

    One Spark job: the answer, grouped by its columns with a multiplicity, is full-outer
    joined with the expected rows (grouped the same way); any row whose multiplicities
    differ is a lost, extra or duplicated tuple.
    """
    expected = expected_answer(stream, config, b)
    if config.workload.operator == AGGREGATE:
        cols = ["key", "count"]
        got = answer.select("key", F.col("count").cast("bigint").alias("count"))
    else:
        cols = ["r_id", "s_id"]
        got = answer.select(*cols)
    mine = got.groupBy(*cols).agg(F.count(F.lit(1)).alias("_got"))
    theirs = expected.groupBy(*cols).agg(F.count(F.lit(1)).alias("_want"))
    diff = mine.join(theirs, cols, "full").select(
        F.coalesce(F.col("_got"), F.lit(0)).alias("_got"),
        F.coalesce(F.col("_want"), F.lit(0)).alias("_want"),
    )
    row = diff.agg(
        F.sum("_got").alias("rows"),
        F.sum("_want").alias("expected"),
        F.sum((F.col("_got") != F.col("_want")).cast("long")).alias("differ"),
    ).collect()[0]
    rows, want, differ = int(row["rows"] or 0), int(row["expected"] or 0), int(row["differ"] or 0)
    same = differ == 0
    if config.workload.operator == AGGREGATE and config.workload.top_k:
        top = _topk(got, config.top_k)  # equal count tables have equal TOPK lists
        return same, len(top), top if same else f"{differ} keys differ; top {top}"
    what = "keys" if config.workload.operator == AGGREGATE else "new pairs"
    shown = f"{rows} {what}" if same else f"{rows} {what}, expected {want}; {differ} differ"
    return same, rows, shown


def _topk(df: DataFrame, k: int) -> list[tuple[int, int]]:
    rows = df.orderBy(F.col("count").desc(), F.col("key").asc()).limit(k).collect()
    return [(int(r["key"]), int(r["count"])) for r in rows]


def load_replay(spark: SparkSession, replay: Any, n_batches: int) -> tuple[DataFrame, float]:
    """The replay stream as a cached DataFrame with ``batch``, and the batch interval:
    the stream's event-time span / ``n_batches`` (measured from the data, so a user's file
    needs no rate)."""
    raw = spark.read.parquet(*replay.files)
    types = {
        "side": "string",
        "tuple_id": "bigint",
        "key": "bigint",
        "event_time_s": "double",
        "payload": "bigint",
    }
    cols = []
    for name, source in replay.columns.items():
        value = F.lit(source[1:]) if source.startswith("=") else F.col(source)
        cols.append(value.cast(types[name]).alias(name))
    df = raw.select(*cols)
    span = df.agg(F.max("event_time_s")).collect()[0][0] or 0.0
    interval = float(span) / n_batches if span > 0 else 1.0
    out = with_batch(df, interval, n_batches).persist()
    out.write.format("noop").mode("overwrite").save()
    return out, interval
