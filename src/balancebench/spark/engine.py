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
  tuple its node(s) and role (store / probe / both), as Spark SQL expressions, broadcast
  tables and Arrow (per-sender strategies). The routed rows are shuffled once: the
  records each node's task reads are the tuples shipped to it (replicas included; a
  tuple stored and probing at one node is shipped there once).
- **State lives on its node across batches**, with the same partitioning. A join's
  stored tuples are kept in *pieces* of one side each, written once (a probe scans only
  the other side's pieces): a batch's stored rows stay in the
  cache its receive stage built, a merge or a migration checkpoints its result
  (``MicroBatchLoop.keep``: ``localCheckpoint``, or files that survive a lost executor
  with ``state_checkpoint`` reliable; the cache is rebuilt from lineage if lost); a node's
  task scans the union of its pieces of the side it probes (the union keeps
  the node partitioning), so a batch never rewrites state it did not change (a window
  join drops a piece once all its tuples are older than ``window_s`` and ignores older
  rows of a kept piece). Each side's pieces are merged like a binary counter (``merge_pieces``:
  the nodes' state update, measured as node work), so a node scans O(log batches)
  pieces, not one per batch. An aggregation's state is its partial counts (one row per
  node, key and batch slice inside a window, older slices dropped; one running count
  per node and key for full history), rewritten each batch.
- **Operator.** Aggregation: each node counts its tuples per key and adds them to its
  state; the window's answer merges the partials of every node per key at the key's
  home node ``F(k)`` (a split key's partials travel there; that merge is node work;
  TOPK: the ``top_k`` keys by count, ties to the smaller key). Join (paper 000
  Algorithm 1, with MNRT's two-stream rule for split keys, ``routers``): each node
  joins the probes it received with the tuples it stores (its
  pieces of the other side and the batch's new stored tuples) on the key (equi) or on
  ``|k1 - k2| <= band_width`` (band, as an equi-join on the probe's ``2w + 1``
  candidate keys), keeping a pair only when the stored tuple arrived earlier
  (``tuple_id`` is the arrival order) and, for a window join, within ``window_s``:
  every pair is produced exactly once, by the later tuple's probe at the node storing
  the earlier one. The batch's probes are the hash table and the stored tuples stream
  through it, so the stored history is read once per batch and never sorted.
- **Oracle.** After every batch the answer is recomputed by plain Spark SQL on the raw
  tuples (``groupBy(key).count()`` over the window; the join of all tuples so far,
  keeping pairs whose later tuple is in this batch) and compared as a multiset. Any
  difference fails the run.
- **Statistics and plan.** Each node reports, per key, the tuples it stored in the
  batch (``load``) and the state it holds (``state``); the strategy plans (timed, paper
  000's O1) and the plan's moves are applied to the state before the next batch: a
  stored tuple moves by a hash of its id, a partial count is split by the moved share.
  The moved tuples are counted by Spark (``migrated_tuples``) in a job of their own
  (bookkeeping); the migration's measured work and bytes are charged by the cost model
  and delay the next batch like the plan time does.
- **Measured per batch** (Spark's REST API, ``task_metrics.group_work``), each job group
  by its role: the routing stage's tasks (the senders); per node the tuples read by its
  task and, summed over its tasks in the node stages (receive, operator, state update,
  merge), ``executorCpuTime`` (the node's work) and ``executorRunTime`` (wall); and per
  node the migration tasks' CPU with the shuffle bytes they write and read. Why CPU
  time: the nodes are partitions sharing a few cores with the driver, the JIT and the
  GC, so a task's wall time is mostly waiting for a core (measured: 16M tuples, 8 nodes,
  2 cores: wall 2-4x CPU, wall max/mean 1.3-2.3 on equal tuple counts where CPU max/mean
  is 1.04-1.2). The wall makespan is reported too (``makespan_wall_s``). The cost model
  (``balancebench.metrics``) turns these into the replay clock; the oracle, statistics,
  task-metric reads and job scheduling are the harness's own cost (``harness_s``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench.hashing import FRACTION_UNITS, partition_surrogates
from balancebench.spark.loop import (
    BatchResult,
    MicroBatchLoop,
    OracleMismatch,
    PhaseClock,
    release,
)
from balancebench.spark.routers import (
    BATCH_COLUMNS,
    PROBES,
    STORES,
    BatchStats,
    Reassignment,
    RouteContext,
    SparkRouter,
)
from balancebench.spark.routing import home_node, partition_by_node
from balancebench.spark.task_metrics import MIGRATE, NODE, ROUTE, ROUTE_PYTHON
from balancebench.workloads import AGGREGATE, BAND_JOIN, Workload

__all__ = ["BatchResult", "Engine", "EngineConfig", "OracleMismatch", "check_batch", "load_replay"]

#: Salt of the tuple-id hash that picks which stored tuples of a part migrate (distinct
#: from the storage-routing salt, so migration does not follow storage decisions).
MIGRATION_SALT = 0x316A7E
#: Spark SQL settings the engine needs while it runs (restored afterwards): joins inside
#: node partitions (no broadcast, co-partitioned on the surrogate alone), and no runtime
#: bloom filter: Spark adds one in front of a checkpointed piece (its size is unknown to
#: the optimizer), built by an extra aggregation of the probes every batch (measured:
#: it doubled the node work of a strategy with migrated pieces against one without).
ENGINE_CONF = {
    "spark.sql.optimizer.runtime.bloomFilter.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.unionOutputPartitioning": "true",
    "spark.sql.requireAllClusterKeysForCoPartition": "false",
    "spark.sql.adaptive.enabled": "false",
}
SIDES = ("R", "S")


@dataclass(frozen=True)
class EngineConfig:
    workload: Workload
    n_nodes: int
    n_batches: int
    interval_s: float
    window_s: float = 0.0
    band_width: int = 1
    top_k: int = 10
    #: Keep cross-batch state in reliable checkpoints (survives a lost executor) instead
    #: of ``localCheckpoint`` (``MicroBatchLoop.keep``; Param ``state_checkpoint``).
    reliable_state: bool = False
    #: Memory-driven scale-out: a node's capacity in state tuples (Param
    #: ``node_capacity_state_tuples``); None: every node from the start.
    node_capacity_state_tuples: int | None = None

    @property
    def window_batches(self) -> int | None:
        """Aggregation window in batches (None = full history)."""
        if self.window_s <= 0:
            return None
        return max(1, math.ceil(self.window_s / self.interval_s - 1e-9))


def with_batch(df: DataFrame, interval_s: float, n_batches: int) -> DataFrame:
    """The stream with its micro-batch (same IEEE expression as ``replay.batch_index``)."""
    batch = F.least(F.floor(F.col("event_time_s") / F.lit(interval_s)), F.lit(n_batches - 1))
    return df.withColumn("batch", batch.cast("bigint"))


@dataclass
class Piece:
    """Stored join tuples of one side, kept on their nodes (partition ``i`` = node
    ``i``) and written once: a batch's stored rows are its cached routed rows (caching
    them is the receive stage's work); a merge or a migration checkpoints them (``keep``).
    ``newest_batch`` bounds their event times (for window expiry); ``span`` counts the
    batch pieces merged into it. One side per piece: a probe of side R scans only the
    stored S tuples (measured on eq5: with both sides in one piece, every probe join read
    the whole history, the big side's included, and filtered it row by row)."""

    newest_batch: int
    side: str
    #: The stored rows (``BATCH_COLUMNS``, ``node``, ``_surrogate``).
    frame: DataFrame
    #: What holds them in memory (released once no piece is built on it).
    base: DataFrame
    span: int = 1

    @classmethod
    def written(cls, newest_batch: int, side: str, kept: DataFrame, span: int = 1) -> Piece:
        """A piece of rows already materialised by ``MicroBatchLoop.keep``: a checkpoint,
        not a cache entry (a cached plan would carry every earlier migration's plan in
        its own; measured: the driver ran out of memory by batch 6)."""
        return cls(newest_batch, side, kept, kept, span)


def release_pieces(dropped: list[Piece], remaining: list[Piece]) -> None:
    """Free what holds the dropped pieces, unless a remaining piece is built on it (a
    batch's two side pieces share its cached routed rows)."""
    still = {id(p.base) for p in remaining}
    freed: set[int] = set()
    for p in dropped:
        if id(p.base) not in still and id(p.base) not in freed:
            release(p.base)
            freed.add(id(p.base))


def merge_pieces(pieces: list[Piece]) -> int:
    """How many of the newest pieces to merge into one (0: none), as a binary counter
    over ``span``: the two newest merge when their spans are equal, and the result
    merges on while it equals the span of the piece before it (one write for the whole
    cascade). A node then scans O(log batches) pieces per batch instead of one per batch
    (measured: every extra piece costs each node task about 2 ms, whatever its size),
    and each stored tuple is rewritten O(log batches) times."""
    if len(pieces) < 2 or pieces[-1].span != pieces[-2].span:
        return 0
    merged, first = pieces[-1].span, len(pieces) - 1
    while first > 0 and pieces[first - 1].span == merged:
        merged += pieces[first - 1].span
        first -= 1
    return len(pieces) - first


def _union(frames: list[DataFrame]) -> DataFrame | None:
    return reduce(lambda a, b: a.unionByName(b), frames) if frames else None


class Engine(MicroBatchLoop):
    """Runs one workload under one router; see the module docstring."""

    def __init__(
        self,
        spark: SparkSession,
        stream: DataFrame,
        config: EngineConfig,
        router: SparkRouter,
        name: str,
        on_batch: Callable[[BatchResult], None] | None = None,
        harness_hook: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(spark, stream, config, name, on_batch, harness_hook)
        self.router = router
        self.surrogates = F.array(
            *[F.lit(int(v)).cast("bigint") for v in partition_surrogates(self.n)]
        )
        #: Aggregation state: partial counts per (node, key, slice).
        self.state: DataFrame | None = None
        #: Join state: the stored tuples of each side, in pieces.
        self.pieces: list[Piece] = []
        self.state_key = np.zeros(0, dtype=np.int64)
        self.state_node = np.zeros(0, dtype=np.int32)

    def conf(self) -> dict[str, str]:
        return dict(ENGINE_CONF)

    def close(self) -> None:
        """Release the state: a later run in the same application must not find this
        run's cached rows (an identical plan would be served from them, unmeasured)."""
        release_pieces(self.pieces, [])
        self.pieces = []
        if self.state is not None:
            release(self.state)
            self.state = None

    # ---- one batch ----------------------------------------------------------------------
    def batch(self, b: int, clock: PhaseClock) -> BatchResult:
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
        # Per-sender routing decisions (pkg & co.) run Spark jobs while the plan is built.
        g_prepare = self.group(b, "prepare")
        routed = partition_by_node(self.router.route(batch, ctx), self.n).persist()
        g_route = self.group(b, "route")
        routed.write.format("noop").mode("overwrite").save()
        clock.lap("route")
        if cfg.workload.operator == AGGREGATE:
            groups, state_after, answer = self._aggregate(b, routed)
        else:
            groups, state_after, answer = self._join(b, routed)
        clock.lap("operator")
        prepared = self.work(g_prepare, ROUTE_PYTHON if self.router.routes_in_python else ROUTE)
        received_work = self.work(g_route, ROUTE)
        stage_work = {
            "receive": received_work,
            **{k: self.work(g, NODE) for k, g in groups.items()},
        }
        node_work = list(stage_work.values())
        clock.lap("task_metrics")
        self.group(b, "oracle")
        passed, result_rows, shown = check_batch(self.stream, cfg, b, answer)
        clock.lap("oracle")
        self.group(b, "stats")
        stats, received = self._stats(b, routed, state_after)
        retried = sum(w.retried_stages for w in (prepared, received_work, *stage_work.values()))
        # A stage rerun after a lost executor may read a partition's records twice.
        if not retried and not np.array_equal(received, received_work.node_records_read):
            raise RuntimeError(
                f"{self.name}: tuples routed per node {received.tolist()} differ from the rows "
                f"Spark's node tasks read {received_work.node_records_read.tolist()}"
            )
        node_state = stats.node_state(self.n)
        if cfg.workload.operator == AGGREGATE:
            routed.unpersist()  # a join keeps its routed rows as the batch's new piece
        release(answer)
        self._commit(state_after, stats)
        clock.lap("stats")
        if cfg.workload.operator != AGGREGATE:
            g_compact = self.group(b, "compact")
            if self._compact():
                clock.lap("compact")
                stage_work["compact"] = self.work(g_compact, NODE)
                node_work.append(stage_work["compact"])
                clock.lap("task_metrics")
        result = BatchResult(
            batch=b,
            input_tuples=self.batch_tuples(b),
            node_received=received,
            node_run_time_s=sum(w.node_run_s for w in node_work),
            node_cpu_time_s=sum(w.node_cpu_s for w in node_work),
            node_state=node_state,
            result_rows=result_rows,
            routing_table_entries=entries,
            oracle_passed=passed,
            answer=shown,
            route_work_s=prepared.route_work_s + received_work.route_work_s,
            senders=self.router.senders or self.senders,
            extra={
                **{f"node_work_{k}_s": float(w.node_cpu_s.sum()) for k, w in stage_work.items()},
                "retried_stages": float(retried),
            },
        )
        if passed and b < cfg.n_batches - 1:
            self.router.scaled_out = False
            reassignment = self.router.after_batch(stats)
            clock.lap("plan")
            # Memory-driven scale-out: nodes joined after this batch (its migration, if
            # any, is the balance adjustment of paper 000 Fig. 5).
            result.extra["scaled_out"] = float(self.router.scaled_out)
            result.extra["nodes_active"] = float(self.router.nodes_used())
            if reassignment is not None:
                result.plan = reassignment.plan
                if len(reassignment):
                    g_migrate = self.group(b, "migrate")
                    arrived = self._migrate(b, reassignment)
                    result.migration = self.work(g_migrate, MIGRATE)
                    self.group(b, "migrate_count")
                    result.migrated_tuples = self._count_and_release(arrived)
                    self._track_moved_state(b, reassignment)
                    clock.lap("migrate")
        return result

    def _state_frame(self, b: int, state: Any = None) -> DataFrame | None:
        """All state rows after batch ``b`` (aggregation: the partial counts; join: every
        piece, rows older than the window's horizon left out)."""
        if self.config.workload.operator == AGGREGATE:
            return self.state if state is None else state
        pieces = self.pieces if state is None else state
        frames = [p.frame for p in pieces]
        horizon = self._horizon(b)
        out = _union(frames)
        if out is not None and horizon is not None:
            out = out.where(F.col("event_time_s") >= horizon)
        return out

    def _horizon(self, b: int) -> float | None:
        """Oldest event time a window join keeps after batch ``b`` (None: full history)."""
        cfg = self.config
        if cfg.window_s <= 0:
            return None
        return (b + 1) * cfg.interval_s - cfg.window_s

    def _commit(self, state_after: Any, stats: BatchStats) -> None:
        if self.config.workload.operator == AGGREGATE:
            if self.state is not None:
                release(self.state)
            self.state = state_after
        else:
            release_pieces(self.pieces, state_after)
            self.pieces = state_after
        held = stats.state > 0
        self.state_key = stats.key[held]
        self.state_node = stats.node[held].astype(np.int32)

    def _compact(self) -> bool:
        """Merge each side's newest pieces when ``merge_pieces`` says so (the nodes'
        state update: each node rewrites its own rows, no shuffle). Whether it merged."""
        merged_any = False
        for side in SIDES:
            own = [p for p in self.pieces if p.side == side]
            n = merge_pieces(own)
            if n == 0:
                continue
            merging = own[-n:]
            rows = _union([p.frame for p in merging])
            assert rows is not None
            rows = self._on_nodes(rows)
            merged = Piece.written(
                max(p.newest_batch for p in merging),
                side,
                self.keep(rows),
                sum(p.span for p in merging),
            )
            gone = {id(p) for p in merging}
            remaining = [p for p in self.pieces if id(p) not in gone]
            release_pieces(merging, remaining)
            self.pieces = [*remaining, merged]
            merged_any = True
        return merged_any

    def _on_nodes(self, rows: DataFrame) -> DataFrame:
        """``rows`` laid out node ``i`` = partition ``i``. A union Spark does not see as
        co-partitioned comes out with one partition per child partition (measured: merged
        pieces after a migration had 16-592 partitions); every later probe join then
        reshuffled the whole piece, each batch. Such rows are shuffled to their nodes
        once, here (node work of the merge or migration)."""
        part = rows._jdf.queryExecution().executedPlan().outputPartitioning()
        name = part.getClass().getSimpleName()
        if name == "HashPartitioning" and part.numPartitions() == self.n:
            return rows
        return rows.repartition(self.n, "_surrogate")

    def _track_moved_state(self, b: int, moves: Reassignment) -> None:
        """Where state is after a migration, for the next batch's probes: a move adds its
        destination as a holder of the key (the source may still hold part of it)."""
        if moves.state_rows is not None:
            frame = self._state_frame(b)
            assert frame is not None
            held = frame.select("key", "node").distinct().toArrow()
            self.state_key = held.column("key").to_numpy().astype(np.int64)
            self.state_node = held.column("node").to_numpy().astype(np.int32)
            return
        key = np.r_[self.state_key, moves.key].astype(np.int64)
        node = np.r_[self.state_node, moves.to_node].astype(np.int64)
        if moves.replicas is not None and len(moves.replicas):
            sync = moves.replicas
            reach = [len(t) for t in sync.targets]
            key = np.r_[key, np.repeat(sync.key, reach)]
            node = np.r_[node, np.concatenate([np.asarray(t, np.int64) for t in sync.targets])]
        packed = np.unique(key * self.n + node)
        self.state_key, self.state_node = packed // self.n, (packed % self.n).astype(np.int32)

    def _stats(self, b: int, routed: DataFrame, state_after: Any) -> tuple[BatchStats, np.ndarray]:
        """Per (key, node): tuples stored in the batch (``load``) and state held after it;
        and per node the tuples it received (stored and probe copies). One Spark job."""
        is_store = F.col("role").isin(*STORES).cast("long")
        sent = routed.groupBy("key", "node").agg(
            F.count(F.lit(1)).cast("double").alias("received"),
            F.sum(is_store).cast("double").alias("load"),
        )
        state = self._state_frame(b, state_after)
        if state is None:
            both = sent.withColumn("state", F.lit(0.0))
        else:
            weight = F.col("count") if "count" in state.columns else F.lit(1)
            sums = [F.sum(weight).cast("double").alias("state")]
            if "side" in state.columns:
                is_r = (F.col("side") == "R").cast("long")
                sums.append(F.sum(is_r).cast("double").alias("state_r"))
            held = state.groupBy("key", "node").agg(*sums)
            both = held.join(sent, ["key", "node"], "full").fillna(0.0)
        both = both.toArrow()
        joined = self.config.workload.operator != AGGREGATE
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
        if joined:
            state_r = both.column("state_r") if "state_r" in both.column_names else None
            stats.state_r = (
                np.zeros(len(node)) if state_r is None else state_r.to_numpy().astype(np.float64)
            )
        return stats, received

    # ---- aggregation --------------------------------------------------------------------
    def _aggregate(self, b: int, routed: DataFrame) -> tuple:
        """Each node counts its tuples per key into its partial counts (one slice per batch
        inside a window; one slice in all for full history), then every key's partials are
        merged at the key's home node ``F(k)``: a split key's partials travel there."""
        cfg = self.config
        g_op = self.group(b, "operator")
        window = cfg.window_batches
        slice_ = F.lit(b if window is not None else 0).cast("bigint")
        partial = (
            routed.groupBy("_surrogate", "node", "key")
            .agg(F.count(F.lit(1)).alias("count"))
            .withColumn("slice", slice_)
            .select("_surrogate", "node", "key", "slice", "count")
        )
        merged = partial if self.state is None else self.state.unionByName(partial)
        if window is not None:
            merged = merged.where(F.col("slice") > b - window)
        else:
            # Full history: one running count per (node, key), updated in place.
            merged = merged.groupBy("_surrogate", "node", "key", "slice").agg(
                F.sum("count").alias("count")
            )
        new_state = self.keep(merged)
        g_merge = self.group(b, "merge")
        per_node = new_state.groupBy("_surrogate", "node", "key").agg(F.sum("count").alias("count"))
        at_home = per_node.drop("_surrogate").withColumn("node", home_node("key", self.n))
        answer = (
            partition_by_node(at_home, self.n)
            .groupBy("_surrogate", "key")
            .agg(F.sum("count").alias("count"))
            .select("key", "count")
        )
        # The answer is materialised the way the baselines' sink does it.
        answer = self.keep(answer)
        return {"operator": g_op, "merge": g_merge}, new_state, answer

    # ---- join ---------------------------------------------------------------------------
    def _join(self, b: int, routed: DataFrame) -> tuple:
        """Probes (``probe``/``both`` rows) pair with the batch's stored rows and with the
        stored pieces of the other side; the probes are the hash table, the stored pieces
        stream through it, and the batch's stored rows become one new piece per side."""
        cfg = self.config
        g_op = self.group(b, "operator")
        store = routed.where(F.col("role").isin(*STORES)).drop("role")
        probe = routed.where(F.col("role").isin(*PROBES)).drop("role")
        width = cfg.band_width if cfg.workload.operator == BAND_JOIN else 0
        if width:
            probe = probe.withColumn(
                "_match", F.explode(F.sequence(F.col("key") - width, F.col("key") + width))
            )
        else:
            probe = probe.withColumn("_match", F.col("key"))
        # The side a probe pairs with, as an equality: Spark then hashes on (node, key,
        # side) instead of pairing every probe with its own side's stored tuples.
        probe = probe.withColumn(
            "_other_side", F.when(F.col("side") == "R", F.lit("S")).otherwise(F.lit("R"))
        )
        found = [self._pairs(probe, store, same_batch=True)]
        for side in SIDES:
            # One join per side: the union of a side's pieces keeps their node partitioning
            # (spark.sql.unionOutputPartitioning), so each node's task scans its own rows.
            stored = _union([p.frame for p in self.pieces if p.side == side])
            if stored is not None:
                found.append(self._pairs(probe.where(F.col("_other_side") == side), stored))
        pairs = _union(found)
        assert pairs is not None
        # The new pairs are materialised the way the baselines' sink does it.
        pairs = self.keep(pairs)
        horizon = self._horizon(b)
        kept = [
            p
            for p in self.pieces
            if horizon is None or (p.newest_batch + 1) * cfg.interval_s > horizon
        ]
        # The batch's stored rows stay where the receive stage cached them: no copy.
        kept += [Piece(b, side, store.where(F.col("side") == side), routed) for side in SIDES]
        return {"operator": g_op}, kept, pairs

    def _pairs(self, probe: DataFrame, stored: DataFrame, same_batch: bool = False) -> DataFrame:
        """``(r_id, s_id)`` of every probe with a stored tuple of the other side that
        arrived earlier (within the window), on the probe's node."""
        cfg = self.config
        p, s = probe.alias("p"), stored.alias("s")
        cond = (
            (F.col("p._surrogate") == F.col("s._surrogate"))
            & (F.col("p._match") == F.col("s.key"))
            & (F.col("s.tuple_id") < F.col("p.tuple_id"))
        )
        if same_batch:
            cond = cond & (F.col("p._other_side") == F.col("s.side"))
        if cfg.window_s > 0:
            cond = cond & (F.col("p.event_time_s") - F.col("s.event_time_s") <= cfg.window_s)
        # The batch's probes are the build side; stored tuples stream through.
        joined = s.join(p.hint("shuffle_hash"), cond)
        return joined.select(
            F.when(F.col("p.side") == "R", F.col("p.tuple_id"))
            .otherwise(F.col("s.tuple_id"))
            .alias("r_id"),
            F.when(F.col("p.side") == "R", F.col("s.tuple_id"))
            .otherwise(F.col("p.tuple_id"))
            .alias("s_id"),
        )

    # ---- migration ----------------------------------------------------------------------
    def _count_and_release(self, arrived: list[tuple[DataFrame, Any, bool]]) -> float:
        """State tuples that moved (harness bookkeeping, after the migration's jobs);
        releases the rows that are not themselves state."""
        total = 0.0
        for frame, weight, not_state in arrived:
            total += float(frame.agg(F.sum(weight)).collect()[0][0] or 0)
            if not_state:
                frame.unpersist()
        return total

    def _migrate(self, b: int, moves: Reassignment) -> list[tuple[DataFrame, Any, bool]]:
        """Apply a reassignment to the state; returns the rows that arrived on a new node
        (persisted, with their tuple weight and whether to release them after counting)."""
        if moves.state_rows is not None:
            return self._replace_state(b, moves.state_rows)
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
        if self.config.workload.operator == AGGREGATE:
            assert self.state is not None
            stay, arrived = self._split_counts(self.state, seg)
            arrived = arrived.persist()
            arrived.write.format("noop").mode("overwrite").save()
            new_state = self.keep(stay.unionByName(arrived))
            # Released once nothing reads it: the moved counts were computed from it.
            release(self.state)
            self.state = new_state
            return [(arrived, F.col("count"), True)]
        sync = self._sync_table(moves)
        staying: list[tuple[Piece, DataFrame]] = []
        movers: dict[str, list[DataFrame]] = {side: [] for side in SIDES}
        for piece in self.pieces:
            frame, kept_copies = piece.frame, None
            if sync is not None:
                frame, kept_copies, new_copies = self._split_replicas(frame, sync)
                movers[piece.side].append(new_copies)
            stay, arrived = self._split_tuples(frame, seg)
            if kept_copies is not None:
                stay = stay.unionByName(kept_copies)
            staying.append((piece, stay))
            movers[piece.side].append(arrived)
        # The moved rows travel to their nodes (the transfer), then join the newest piece
        # of their side, which the migration rewrites anyway: a piece of their own would
        # count as a batch in the pieces' binary counter and shift every later merge.
        moved: dict[str, DataFrame] = {}
        for side, frames in movers.items():
            rows = _union(frames)
            if rows is not None:
                moved[side] = rows.repartition(self.n, "_surrogate").persist()
                moved[side].write.format("noop").mode("overwrite").save()
        newest = {piece.side: i for i, (piece, _) in enumerate(staying)}
        stays = []
        for i, (piece, stay) in enumerate(staying):
            if newest[piece.side] == i and piece.side in moved:
                stay = stay.unionByName(moved[piece.side])
            kept = self.keep(self._on_nodes(stay))
            stays.append(Piece.written(piece.newest_batch, piece.side, kept, piece.span))
        # Released only now: the moving rows were read from them.
        release_pieces(self.pieces, [])
        self.pieces = stays
        return [(rows, F.lit(1), True) for rows in moved.values()]

    def _sync_table(self, moves: Reassignment) -> DataFrame | None:
        """The two-stream rule's sync (``routers.ReplicaSync``) as a broadcast table."""
        sync = moves.replicas
        if sync is None or len(sync) == 0:
            return None
        ints = pa.list_(pa.int32())
        return self.spark.createDataFrame(
            pa.table(
                {
                    "_yk": pa.array(sync.key),
                    "_yside": pa.array(sync.side, pa.string()),
                    "_ysrc": pa.array(sync.source),
                    "_yhave": pa.array(sync.have, ints),
                    "_ytargets": pa.array(sync.targets, ints),
                }
            )
        )

    def _split_replicas(
        self, state: DataFrame, sync: DataFrame
    ) -> tuple[DataFrame, DataFrame, DataFrame]:
        """Rows of a piece outside the sync (they move with the plan's segments); the
        synced rows that stay (on a target node); and the copies this piece sends: each
        source row to every target that does not hold it yet (already on their node)."""
        columns = state.columns
        match = (state["key"] == sync["_yk"]) & (state["side"] == sync["_yside"])
        tagged = state.join(F.broadcast(sync), match, "left")
        synced = F.col("_yk").isNotNull()
        plain = tagged.where(~synced).select(*columns)
        kept = tagged.where(synced & F.array_contains("_ytargets", F.col("node"))).select(*columns)
        source = (F.col("_ysrc") == -1) | (F.col("_ysrc") == F.col("node"))
        lacking = F.array_except(
            F.col("_ytargets"), F.array_union(F.col("_yhave"), F.array(F.col("node").cast("int")))
        )
        copies = (
            tagged.where(synced & source)
            .withColumn("node", F.explode(lacking))
            .withColumn("_surrogate", F.element_at(self.surrogates, F.col("node") + 1))
            .select(*columns)
        )
        return plain, kept, copies

    def _split_tuples(self, state: DataFrame, seg: DataFrame) -> tuple[DataFrame, DataFrame]:
        """Stored tuples that stay, and those that move (a tuple moves by a hash of its id
        falling in a moved segment of its part), already on their new node."""
        columns = state.columns
        unit = F.pmod(
            F.hash(F.col("tuple_id"), F.lit(MIGRATION_SALT).cast("bigint")),
            F.lit(FRACTION_UNITS),
        )
        on_part = (state["key"] == seg["_mk"]) & (state["node"] == seg["_mfrom"])
        hit = on_part & (unit >= seg["_mlo"]) & (unit < seg["_mhi"])
        tagged = state.join(F.broadcast(seg), hit, "left")
        stay = tagged.where(F.col("_mto").isNull()).select(*columns)
        arrived = (
            tagged.where(F.col("_mto").isNotNull())
            .withColumn("node", F.col("_mto"))
            .withColumn("_surrogate", F.element_at(self.surrogates, F.col("_mto") + 1))
            .select(*columns)
        )
        return stay, arrived

    def _split_counts(self, state: DataFrame, seg: DataFrame) -> tuple[DataFrame, DataFrame]:
        """Partial counts: a part's count splits by the moved shares, floor(c * hi) -
        floor(c * lo) per segment, so the pieces sum to at most c; the rest stays.

        A windowed state can hold several rows of one (node, key, slice): counts that
        arrived by an earlier migration next to the node's own. They are summed first,
        because what leaves is subtracted per (node, key, slice): subtracting it from each
        of two rows lost tuples (found by the oracle: MNRT on TOPK at tolerance 0.02)."""
        state = state.groupBy("_surrogate", "node", "key", "slice").agg(
            F.sum("count").cast("bigint").alias("count")
        )
        columns = state.columns
        on_part = (state["key"] == seg["_mk"]) & (state["node"] == seg["_mfrom"])
        piece = F.floor(F.col("count") * F.col("_mhi") / FRACTION_UNITS) - F.floor(
            F.col("count") * F.col("_mlo") / FRACTION_UNITS
        )
        moved = (
            state.join(F.broadcast(seg), on_part, "inner")
            .select("key", "slice", "_mfrom", F.col("_mto").alias("node"), piece.alias("count"))
            .where(F.col("count") > 0)
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
        return stay, arrived

    def _replace_state(
        self, b: int, state_rows: Callable[[DataFrame], DataFrame]
    ) -> list[tuple[DataFrame, Any, bool]]:
        """State rows recomputed by a join architecture (e.g. a grown grid): rows whose
        node is unchanged stay in place, the others (and new copies) are shipped. Moved
        tuples = rows on a node that did not hold them before."""
        state = self._state_frame(b)
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
        arrived.write.format("noop").mode("overwrite").save()  # counted after the release
        kept = kept.repartition(self.n, "_surrogate").persist()
        written = [
            Piece.written(
                b,
                side,
                self.keep(
                    kept.where(F.col("side") == side).unionByName(
                        arrived.where(F.col("side") == side)
                    )
                ),
            )
            for side in SIDES
        ]
        kept.unpersist()
        release_pieces(self.pieces, [])
        self.pieces = written
        return [(arrived, F.lit(1), True)]


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


def load_replay(
    spark: SparkSession, replay: Any, n_batches: int, senders: int = 1
) -> tuple[DataFrame, float]:
    """The replay stream as a cached DataFrame with ``batch``, and the batch interval:
    the stream's event-time span / ``n_batches`` (measured from the data, so a user's file
    needs no rate).

    The stream is spread over ``senders`` partitions, the upstream instances that route it:
    tuple ``i`` is sent by instance ``i mod senders`` (partition = sender), each instance's
    tuples in arrival order, so a batch's routing stage runs one task per sender and reads
    only that batch's cached rows (the cache's batch statistics prune the others)."""
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
    batched = with_batch(df, interval, n_batches)
    if senders > 1:
        sender = F.pmod(F.col("tuple_id"), F.lit(senders)).cast("int")
        placed = partition_by_node(batched.withColumn("_sender", sender), senders, "_sender")
        batched = placed.sortWithinPartitions("batch", "tuple_id").drop("_sender", "_surrogate")
    out = batched.persist()
    out.write.format("noop").mode("overwrite").save()
    return out, interval
