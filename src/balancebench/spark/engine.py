"""The micro-batch engine: a workload's stateful operator on ``N`` nodes, under a strategy.

Execution model (a strategy run inside a Spark application, alone or among a sweep's runs):

- **Replay.** The workload's stream (``balancebench.experiment.streams``) is cut into
  ``n_batches`` equal event-time micro-batches (``replay.batch_index``), laid out over
  the senders (partition ``s`` = sender ``s``'s tuples in arrival order, ``load_replay``).
- **Nodes.** A node is one Spark partition of the stateful stage: rows are placed with
  ``placement.partition_by_node`` so partition ``i`` holds exactly node ``i``'s rows (a
  per-node surrogate value whose Murmur3 hash lands in partition ``i``), and every
  later per-node computation reads that partitioning without another shuffle.
- **One main job per batch.** The strategy's :class:`~balancebench.spark.routers.SparkRouter`
  gives every tuple its node(s) and role (store / probe / both) as Spark SQL expressions,
  broadcast tables or, for per-sender strategies, a loop over each sender's tuples in
  its task (in the JVM, or in a Python worker where the JVM router is not available).
  The routed rows cross one exchange (the senders' map stage writes it), and each node's
  task then does everything the node does for the batch in one pass over its partition:
  it receives the rows, runs the operator, and updates its state, keeping its new rows
  as it reads them (``localCheckpoint(eager=False)``: the node stage stores them, no job
  of its own). An aggregation adds one stage: every key's partials merge at the key's
  home node. Every node stage pays a task's fixed cost (launch, deserialisation), so the
  engine runs as few as it can; :meth:`Engine.calibrate` measures that cost before the
  first batch of the first measured run on the loaded stream (``node_fixed_s``; the
  application's later runs of the same configuration reuse it). The batch's group may
  also run small jobs (broadcasting a routing table or a migration's segments, a
  layout's first look at the batch), charged as routing work (``rest_task_metrics.batch_work``).
- **State lives on its node across batches**, with the same partitioning. A join's stored
  tuples are kept in *pieces* of one side each, written once (a probe scans only the
  other side's pieces): a batch's stored rows are the rows its node stage received; a
  window join drops a piece once all its tuples are older than its time bounds reach
  (``TimeBounds.horizon``) and ignores older rows of a kept piece. Each side's pieces
  are merged like a binary counter (``merge_pieces``), inside the node stage that reads
  them next, so a node scans O(log batches) pieces, not one per batch. An aggregation's
  state is its partial counts (one row per node, key and age inside a window: the
  batches since they were counted, those older than the window's first batch dropped;
  one running count per node and key for full history), rewritten by each batch's node
  stage. Ages, not batch numbers: for a window that slides by one batch nothing in the
  stages' code changes from batch to batch, so Spark's generated classes are reused (a
  literal batch number made it generate new ones every batch, which the first tasks ran
  before the JVM had compiled them); a wider slide changes the age bound within each
  slide.
- **Operator.** What a node keeps and how its node stage updates it is the node state of
  the workload's operator (``spark.node_state``: partial counts for an aggregation,
  stored tuples for a join); the engine runs the batch around it. Aggregation: each node
  counts its tuples per key and adds them to its state; the window's answer merges the
  partials of every node per key at the key's home node ``F(k)`` (a split key's partials
  travel there; that merge is node work). The answer is the whole ``(key, count)``
  table of the window, for TOPK too: the oracle checks the whole table, and only for
  display takes its ``top_k`` keys by count (ties to the smaller key). Join (paper 000
  Algorithm 1, with MNRT's two-stream rule for split keys, ``routers``): each node joins
  the probes it received with the tuples it stores of the other side (its pieces and the
  batch's new stored tuples) on the operator's key range (``Operator.key_offsets``: the
  same key for an equi-join, keys within ``band_width`` for the band join; an equi-join
  on the probe's candidate keys, ``spark.join_keys``), keeping a pair only when the
  stored tuple arrived earlier (``tuple_id`` is the arrival order) and, for a window
  join, within its time bounds (``TimeBounds.holds``): every pair is produced exactly
  once, by the later tuple's probe at the node storing the earlier one. The batch's
  probes are the hash table and the stored tuples stream through it, so the stored
  history is read once per batch and never sorted.
- **Oracle.** After every batch the answer is compared as a multiset with plain Spark
  SQL on the raw tuples (``groupBy(key).count()`` over the window; the join of all
  tuples so far, keeping pairs whose later tuple is in this batch; ``spark.oracle``).
  Any difference fails the run.
- **Statistics and plan.** Each node reports, per key, the tuples it stored in the
  batch (``load``) and the state it holds (``state``); the strategy plans (timed, paper
  000's O1). **The plan's moves are carried out inside the next batch's exchange**
  (Megaphone's migration flows embedded in the data flow): the rows that move (partial
  counts, or stored tuples picked by a hash of their id) are read off the sending
  nodes' state by extra tasks of the exchange's map stage, tagged with the node they go
  to, and ride the exchange with the batch's tuples; the receiving node's stage keeps
  them with its new rows; the sending node leaves them out of its state (an
  aggregation's state update rewrites the state anyway; a join's pieces list the rows
  as gone, and a probe's pairs with a gone row are dropped). No Spark job of its own, and
  a plan that moves nothing adds nothing.
- **Measured per batch** (Spark's REST API, ``rest_task_metrics.batch_work``), by the batch
  job's structure: the routing stages' tasks (the senders); per node the rows its task
  read and, summed over the node stages, ``executorCpuTime`` (the node's work) and
  ``executorRunTime`` (wall); a migration's extra map tasks per sending node (CPU, rows,
  bytes). Why CPU time: the nodes are partitions sharing a few cores with the driver,
  the JIT and the GC, so a task's wall time is mostly waiting for a core (measured: 16M
  tuples, 8 nodes, 2 cores: wall 2-4x CPU, wall max/mean 1.3-2.3 on equal tuple counts
  where CPU max/mean is 1.04-1.2). The wall makespan is reported too
  (``makespan_wall_s``). A migration is charged what its rows cost in the stages they
  ride (``cost_model.attribute_migration``): per row the senders' cost of writing a row
  into the exchange at the sending node, the receiving node stage's cost per row read at
  the receiving node, plus bytes / bandwidth; the rest of the extra map tasks (scanning
  a node's state for the rows that move, which a keyed store would not do) is the
  engine's, reported apart (``migration_extract_s``). The cost model
  (``balancebench.core.cost_model``) turns these into the replay clock; the oracle,
  statistics, task-metric reads and job scheduling are the harness's own cost (``harness_s``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench.core import cost_model
from balancebench.core.hashing import partition_surrogates
from balancebench.spark.engine_config import EngineConfig
from balancebench.spark.loop import (
    BatchResult,
    MicroBatchLoop,
    PhaseClock,
    release,
)
from balancebench.spark.node_state import Flow, node_state_for
from balancebench.spark.oracle import check_batch
from balancebench.spark.placement import home_node
from balancebench.spark.replay_stream import batch_frame, kept_with
from balancebench.spark.rest_task_metrics import NODE, GroupWork, batch_work
from balancebench.spark.routers import (
    BATCH_COLUMNS,
    BatchStats,
    Reassignment,
    RouteContext,
    SparkRouter,
)

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
        #: What the nodes keep across batches and the node operator that updates it
        #: (partial counts for an aggregation, stored tuples for a join).
        self.node_state = node_state_for(config.workload.operator, self)
        self.state_key = np.zeros(0, dtype=np.int64)
        self.state_node = np.zeros(0, dtype=np.int32)
        #: The plan's moves after the last batch, carried out in the next batch's exchange.
        self.pending: Reassignment | None = None
        #: Rows materialised by the node stage that computes them (``keep_lazy``).
        self._lazy: list[DataFrame] = []
        #: The engine's fixed node cost per node stage (s, CPU of one task with no
        #: tuples and no state), measured by :meth:`calibrate` before the first batch.
        self.fixed_stage_s = np.zeros(self.node_stages)

    @property
    def node_stages(self) -> int:
        """Node stages of a batch: the fused receive/operator/state stage; an
        aggregation's merge of every key's partials at its home node follows it."""
        return self.node_state.node_stages

    @property
    def node_fixed_s(self) -> float:
        """Fixed node cost per node and batch (s): the calibrated stages summed."""
        return float(self.fixed_stage_s.sum())

    def conf(self) -> dict[str, str]:
        return dict(ENGINE_CONF)

    def start(self) -> None:
        """The fixed cost, calibrated by the first measured run of this configuration on
        this loaded stream and reused by the later ones: a property of the engine on this
        data, not of a strategy (calibration routes an empty batch by default routing), kept
        with the stream (``replay_stream.kept_with``) by engine configuration and node
        count (3 empty batches, about 1 s a run before)."""
        if self.config.warm_up:
            return
        kept = kept_with(self.stream, "fixed_costs")
        key = (repr(replace(self.config, warm_up=False)), self.n)
        if key not in kept:
            self.calibrate()
            kept[key] = self.fixed_stage_s
        self.fixed_stage_s = kept[key].copy()

    def close(self) -> None:
        """Release the state: a later run in the same application must not find this
        run's cached rows (an identical plan would be served from them, unmeasured)."""
        self.node_state.close()

    # ---- materialisation ------------------------------------------------------------------
    def keep_lazy(self, df: DataFrame, serialized: bool = False) -> DataFrame:
        """``df`` kept by the job that first computes it, inside the stage that computes
        it (``localCheckpoint(eager=False)``: the node stage stores its rows as it goes,
        no job of its own); :meth:`_settle` cuts their lineage after that job.

        ``serialized``: stored as bytes (memory, then disk). An aggregation's few
        thousand partial counts per node cost less that way than as objects, whose size
        the block store estimates as it goes (measured: 270 -> 215 ns of node CPU per
        tuple on the default TOPK run); a join's pieces are read back every batch, where
        deserialising them cost more (eq5, sf 0.1: 1.8 -> 2.4 us per tuple)."""
        level = StorageLevel.MEMORY_AND_DISK if serialized else None
        out = df.localCheckpoint(eager=False, storageLevel=level)
        self._lazy.append(out)
        return out

    def _settle(self) -> None:
        """After the batch's job: mark every lazily kept frame checkpointed (its rows are
        in memory, so no job runs), which cuts its lineage."""
        for df in self._lazy:
            rdd = df._jdf.queryExecution().analyzed().rdd()
            if not rdd.isCheckpointed():
                rdd.doCheckpoint()
        self._lazy = []

    def durable(self, df: DataFrame) -> DataFrame:
        """A copy of kept rows in reliable checkpoint files (their node tasks write them,
        reading the rows from memory), the in-memory one released."""
        out = df.checkpoint(eager=True)
        release(df)
        return out

    # ---- the fixed cost -----------------------------------------------------------------
    def calibrate(self, repeats: int = 3) -> None:
        """The engine's fixed node cost: a batch with no tuples and no state, through the
        same stages as every batch (default routing), ``repeats`` times; per node stage the
        median over nodes, then over repeats. Nothing is kept."""
        empty = self.stream.where(F.col("batch") == -1).select(*BATCH_COLUMNS)
        role = F.lit(self.node_state.calibration_role)
        routed = empty.withColumn("node", home_node("key", self.n)).withColumn("role", role)
        samples = []
        for i in range(repeats):
            group = self.group(-1, f"calibrate{i}")
            flow = self.node_state.flow(-1, routed, None, calibrating=True)
            release(self.keep(flow.answer))
            self._settle()
            work = batch_work(self.reader, group, self.n, self.node_stages, flow.route_partitions)
            release(flow.received)
            self.node_state.discard(flow)
            samples.append([float(np.median(s)) for s in work.stage_cpu_s])
        if samples and all(len(s) == self.node_stages for s in samples):
            self.fixed_stage_s = np.median(np.array(samples), axis=0)

    # ---- one batch ----------------------------------------------------------------------
    def batch(self, b: int, clock: PhaseClock) -> BatchResult:
        cfg = self.config
        moves, self.pending = self.pending, None
        batch = batch_frame(self.stream, b).select(*BATCH_COLUMNS)
        ctx = RouteContext(
            self.spark,
            cfg.workload.operator,
            self.n,
            cfg.band_width,
            self.senders,
            self.state_key,
            self.state_node,
        )
        entries = self.router.routing_table_entries
        group = self.group(b, "batch")
        routed = self.router.route(batch, ctx)
        flow = self.node_state.flow(b, routed, moves, calibrating=False)
        answer = self.keep(flow.answer)
        python_s = self.router.routing_cpu_s()
        self._settle()
        clock.lap("operator")
        durable = None
        if self.reliable_state:
            g_durable = self.group(b, "durable")
            self.node_state.make_durable(b, flow)
            clock.lap("durable")
            durable = self.work(g_durable, NODE)
        work = batch_work(self.reader, group, self.n, self.node_stages, flow.route_partitions)
        work.route_work_s += python_s
        clock.lap("task_metrics")
        self.group(b, "oracle")
        passed, result_rows, shown = check_batch(self.stream, cfg, b, answer)
        clock.lap("oracle")
        self.group(b, "stats")
        stats, arrival = self._stats(b, flow)
        if not work.retried_stages:
            self._check_received(arrival, work)
        node_state = stats.node_state(self.n)
        release(answer)
        self._commit(b, flow, stats)
        clock.lap("stats")
        node_work = work.node_cpu_s
        if durable is not None:
            node_work = node_work + durable.node_cpu_s
        migration = None
        if moves is not None:
            migration, node_work = cost_model.attribute_migration(
                node_cpu_s=node_work,
                stage_cpu_s=work.stage_cpu_s[0],
                stage_records=work.stage_records_read[0],
                fixed_s=float(self.fixed_stage_s[0]),
                moved_in_rows=arrival.moved_rows,
                extract_cpu_s=work.extract_cpu_s,
                extract_rows=work.extract_rows,
                extract_bytes=work.extract_bytes,
                send_cpu_per_row_s=work.send_cpu_per_row_s,
            )
        received_bytes = work.node_received_bytes
        if migration is not None:  # the migration's rows are charged as its own transfer
            received_bytes = np.maximum(received_bytes - migration.received_bytes, 0.0)
        stage_names = ["node"] if self.node_stages == 1 else ["node", "merge"]
        result = BatchResult(
            batch=b,
            input_tuples=self.batch_tuples(b),
            node_received=arrival.received,
            node_run_time_s=work.node_run_s + (durable.node_run_s if durable else 0.0),
            node_cpu_time_s=node_work,
            node_state=node_state,
            result_rows=result_rows,
            routing_table_entries=entries,
            oracle_passed=passed,
            answer=shown,
            route_work_s=work.route_work_s,
            senders=self.router.senders or self.senders,
            migration=migration,
            migrated_tuples=arrival.moved_tuples,
            node_fixed_s=self.node_fixed_s,
            received_bytes=received_bytes,
            sent_bytes=work.sender_bytes,
            extra={
                **{
                    f"node_work_{name}_s": float(cpu.sum())
                    for name, cpu in zip(stage_names, work.stage_cpu_s, strict=False)
                },
                **({"node_work_durable_s": float(durable.node_cpu_s.sum())} if durable else {}),
                "route_python_s": python_s,
                "route_wall_s": work.route_wall_s,
                "node_wall_s": work.node_wall_s,
                "route_executor_cpu_s": work.route_executor_cpu_s,
                "node_executor_cpu_s": work.node_executor_cpu_s,
                "node_gc_s": work.node_gc_s + (durable.node_gc_s if durable else 0.0),
                cost_model.CORE_WAIT: work.core_wait_s + (durable.core_wait_s if durable else 0.0),
                "retried_stages": float(
                    work.retried_stages + (durable.retried_stages if durable else 0)
                ),
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
                    self.pending = reassignment
                    self._track_moved_state(b, reassignment)
                    clock.lap("plan")
        return result

    def _check_received(self, arrival: Arrival, work: GroupWork) -> None:
        """The rows each node's task read from the exchange are its routed copies plus
        the rows a migration moved to it, and the exchange's map tasks read as a
        migration's (``rest_task_metrics.batch_work``, by ``Flow.route_partitions``) wrote the
        moved rows, no more, no less (a stage rerun after a lost executor may read a
        partition twice, so this is skipped then)."""
        read = arrival.received + arrival.moved_rows
        exchange = work.stage_records_read[0] if work.stage_records_read else np.zeros(self.n)
        if not np.array_equal(read, exchange):
            raise RuntimeError(
                f"{self.name}: tuples routed per node {arrival.received.tolist()} (and "
                f"{arrival.moved_rows.tolist()} moved in) differ from the rows Spark's node "
                f"tasks read {exchange.tolist()}"
            )
        moved, extracted = int(arrival.moved_rows.sum()), int(work.extract_rows.sum())
        if moved != extracted:
            raise RuntimeError(
                f"{self.name}: {moved} rows moved in, but the map tasks read as a "
                f"migration's wrote {extracted}: the exchange's senders and a migration's "
                "tasks are told apart wrongly"
            )

    def _commit(self, b: int, flow: Flow, stats: BatchStats) -> None:
        self.node_state.commit(flow)
        held = stats.state > 0
        self.state_key = stats.key[held]
        self.state_node = stats.node[held].astype(np.int32)

    def on_nodes(self, rows: DataFrame) -> DataFrame:
        """``rows`` laid out node ``i`` = partition ``i``. A union Spark does not see as
        co-partitioned comes out with one partition per child partition (measured: merged
        pieces after a migration had 16-592 partitions); every later probe join then
        reshuffled the whole piece, each batch. Such rows are shuffled to their nodes
        once, here."""
        part = rows._jdf.queryExecution().executedPlan().outputPartitioning()
        name = part.getClass().getSimpleName()
        if name == "HashPartitioning" and part.numPartitions() == self.n:
            return rows
        return rows.repartition(self.n, "_surrogate")

    def _track_moved_state(self, b: int, moves: Reassignment) -> None:
        """Where state is once the next batch's exchange has carried out a migration, for
        that batch's probes: a move adds its destination as a holder of the key (the
        source may still hold part of it)."""
        if moves.split is not None:
            frame = self.node_state.frame(b)
            assert frame is not None
            _, arrived = moves.split(frame)
            held = frame.select("key", "node").unionByName(arrived.select("key", "node"))
            held = held.distinct().toArrow()
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

    def _stats(self, b: int, flow: Flow) -> tuple[BatchStats, Arrival]:
        """Per (key, node): tuples stored in the batch (``load``) and state held after it;
        per node the copies it received, and the rows and tuples a migration moved to it.
        One Spark job over what the node stage kept (harness bookkeeping)."""
        # Grouped by the node's surrogate too: every frame here is laid out by it (node
        # ``i`` = partition ``i``), so Spark groups and joins inside each node's partition,
        # with no exchange (measured: 2 exchanges per batch before).
        by = ["_surrogate", "key", "node"]
        sent = self.node_state.sent(flow.received, by)
        state = self.node_state.frame(b, flow.state)
        if state is None:
            both = sent.withColumn("state", F.lit(0.0))
        else:
            weight = F.col("count") if "count" in state.columns else F.lit(1)
            sums = [F.sum(weight).cast("double").alias("state")]
            if "side" in state.columns:
                is_r = (F.col("side") == "R").cast("long")
                sums.append(F.sum(is_r).cast("double").alias("state_r"))
            held = state.groupBy(*by).agg(*sums)
            both = held.join(sent, by, "full").fillna(0.0)
        # In (key, node) order: Spark returns the rows in an order its physical plan sets,
        # and a planner breaks ties in its input's order, so unsorted, a change of plan
        # changed plans (measured: grouping by the surrogate changed QMMP's windowed eq5
        # moves). Sorted, a plan depends on the statistics alone.
        both = both.toArrow().sort_by([("key", "ascending"), ("node", "ascending")])
        node = both.column("node").to_numpy().astype(np.int32)

        def per_node(column: str) -> np.ndarray:
            values = both.column(column).to_numpy()
            return np.bincount(node, weights=values, minlength=self.n)

        arrival = Arrival(
            received=per_node("received").astype(np.int64),
            moved_rows=per_node("moved_rows").astype(np.int64),
            moved_tuples=float(per_node("moved_tuples").sum()),
        )
        stats = BatchStats(
            key=both.column("key").to_numpy().astype(np.int64),
            node=node,
            load=both.column("load").to_numpy().astype(np.float64),
            state=both.column("state").to_numpy().astype(np.float64),
        )
        if self.node_state.two_sides:
            state_r = both.column("state_r") if "state_r" in both.column_names else None
            stats.state_r = (
                np.zeros(len(node)) if state_r is None else state_r.to_numpy().astype(np.float64)
            )
        return stats, arrival


@dataclass
class Arrival:
    """Per node: the routed copies it received, the rows a migration moved to it, and
    (summed) the tuples those rows carry (stored tuples, or counted tuples)."""

    received: np.ndarray
    moved_rows: np.ndarray
    moved_tuples: float
