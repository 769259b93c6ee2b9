"""The micro-batch engine: a workload's stateful operator on ``N`` nodes, under a strategy.

Execution model (a strategy run inside a Spark application, alone or among a sweep's runs):

- **Replay.** The workload's stream (``balancebench.streams``) is cut into
  ``n_batches`` equal event-time micro-batches (``replay.batch_index``), laid out over
  the senders (partition ``s`` = sender ``s``'s tuples in arrival order, ``load_replay``).
- **Nodes.** A node is one Spark partition of the stateful stage: rows are placed with
  ``placement.partition_by_node`` so partition ``i`` holds exactly node ``i``'s rows (a
  per-node surrogate value whose Murmur3 hash lands in partition ``i``), and every
  later per-node computation reads that partitioning without another shuffle.
- **One job per batch.** The strategy's :class:`~balancebench.spark.routers.SparkRouter`
  gives every tuple its node(s) and role (store / probe / both) as Spark SQL expressions,
  broadcast tables or, for per-sender strategies, a compiled loop in a Python worker.
  The routed rows cross one exchange (the senders' map stage writes it), and each node's
  task then does everything the node does for the batch in one pass over its partition:
  it receives the rows, runs the operator, and updates its state, keeping its new rows
  as it reads them (``localCheckpoint(eager=False)``: the node stage stores them, no job
  of its own). An aggregation adds one stage: every key's partials merge at the key's
  home node. Every node stage pays a task's fixed cost (launch, deserialisation), so the
  engine runs as few as it can; :meth:`Engine.calibrate` measures that cost before the
  first batch of the first measured run on the loaded stream (``node_fixed_s``; the
  application's later runs of the same configuration reuse it).
- **State lives on its node across batches**, with the same partitioning. A join's
  stored tuples are kept in *pieces* of one side each, written once (a probe scans only
  the other side's pieces): a batch's stored rows are the rows its node stage received;
  a window join drops a piece once all its tuples are older than ``window_s`` and
  ignores older rows of a kept piece. Each side's pieces are merged like a binary
  counter (``merge_pieces``), inside the node stage that reads them next, so a node
  scans O(log batches) pieces, not one per batch. An aggregation's state is its partial
  counts (one row per node, key and age inside a window: the batches since they were
  counted, older ones dropped; one running count per node and key for full history),
  rewritten by each batch's node stage. Ages, not batch numbers: nothing in the stages'
  code changes from batch to batch, so Spark's generated classes are reused (a literal
  batch number made it generate new ones every batch, which the first tasks ran before
  the JVM had compiled them).
- **Operator.** Aggregation: each node counts its tuples per key and adds them to its
  state; the window's answer merges the partials of every node per key at the key's
  home node ``F(k)`` (a split key's partials travel there; that merge is node work;
  TOPK: the ``top_k`` keys by count, ties to the smaller key). Join (paper 000
  Algorithm 1, with MNRT's two-stream rule for split keys, ``routers``): each node
  joins the probes it received with the tuples it stores of the other side (its pieces
  and the batch's new stored tuples) on the key (equi) or on ``|k1 - k2| <= band_width``
  (band, as an equi-join on the probe's ``2w + 1`` candidate keys), keeping a pair only
  when the stored tuple arrived earlier (``tuple_id`` is the arrival order) and, for a
  window join, within ``window_s``: every pair is produced exactly once, by the later
  tuple's probe at the node storing the earlier one. The batch's probes are the hash
  table and the stored tuples stream through it, so the stored history is read once per
  batch and never sorted.
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
- **Measured per batch** (Spark's REST API, ``task_metrics.batch_work``), by the batch
  job's structure: the routing stages' tasks (the senders); per node the rows its task
  read and, summed over the node stages, ``executorCpuTime`` (the node's work) and
  ``executorRunTime`` (wall); a migration's extra map tasks per sending node (CPU, rows,
  bytes). Why CPU time: the nodes are partitions sharing a few cores with the driver,
  the JIT and the GC, so a task's wall time is mostly waiting for a core (measured: 16M
  tuples, 8 nodes, 2 cores: wall 2-4x CPU, wall max/mean 1.3-2.3 on equal tuple counts
  where CPU max/mean is 1.04-1.2). The wall makespan is reported too
  (``makespan_wall_s``). A migration is charged what its rows cost in the stages they
  ride (``metrics.attribute_migration``): per row the senders' cost of writing a row
  into the exchange at the sending node, the receiving node stage's cost per row read at
  the receiving node, plus bytes / bandwidth; the rest of the extra map tasks (scanning
  a node's state for the rows that move, which a keyed store would not do) is the
  engine's, reported apart (``migration_extract_s``). The cost model
  (``balancebench.metrics``) turns these into the replay clock; the oracle, statistics,
  task-metric reads and job scheduling are the harness's own cost (``harness_s``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench import metrics
from balancebench.hashing import FRACTION_UNITS, partition_surrogates
from balancebench.spark.join_keys import candidate_keys
from balancebench.spark.loop import (
    BatchResult,
    MicroBatchLoop,
    PhaseClock,
    release,
)
from balancebench.spark.oracle import check_batch
from balancebench.spark.placement import home_node, partition_by_node
from balancebench.spark.replay_stream import EngineConfig, batch_frame
from balancebench.spark.routers import (
    BATCH_COLUMNS,
    BOTH,
    KEEPS,
    MOVED,
    PROBES,
    STORE,
    STORES,
    BatchStats,
    Reassignment,
    RouteContext,
    SparkRouter,
)
from balancebench.spark.task_metrics import NODE, GroupWork, batch_work

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


@dataclass
class Piece:
    """Stored join tuples of one side, kept on their nodes (partition ``i`` = node
    ``i``) and written once: a batch's stored rows are the rows its node stage received
    (kept as it read them); a merge writes its result in the node stage of the batch
    that needs it. ``newest_batch`` bounds their event times (for window expiry);
    ``span`` counts the batch pieces merged into it. One side per piece: a probe of side R
    scans only the stored S tuples (measured on eq5: with both sides in one piece, every
    probe join read the whole history, the big side's included, and filtered it row by
    row).

    A migration does not rewrite a piece: the rows it moved away are *gone* from it,
    listed as segments ``(key, node, [lo, hi))`` of the migration unit of ``tuple_id``
    (:func:`migration_unit`); a probe's pairs with a gone row are dropped after the join
    (work that grows with the pairs, not with the piece), and a merge leaves gone rows
    behind."""

    newest_batch: int
    side: str
    #: The stored rows (``BATCH_COLUMNS``, ``node``, ``_surrogate``).
    frame: DataFrame
    #: What holds them in memory (released once no piece is built on it).
    base: DataFrame
    span: int = 1
    #: The batch whose node stage wrote ``base``.
    written_in: int = -1
    #: How ``frame`` is read from ``base`` (None: it is ``base``).
    view: Callable[[DataFrame], DataFrame] | None = None
    #: Gone rows: per segment the key, node and unit range ``[lo, hi)``.
    gone_key: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    gone_node: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    gone_lo: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    gone_hi: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def rebase(self, base: DataFrame) -> None:
        """The same rows held by another copy (reliable files instead of memory)."""
        self.base = base
        self.frame = base if self.view is None else self.view(base)

    @property
    def has_gone(self) -> bool:
        return len(self.gone_key) > 0

    def forget(self, key: np.ndarray, node: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        """Rows that left the piece (segments as in the class docstring)."""
        self.gone_key = np.r_[self.gone_key, key].astype(np.int64)
        self.gone_node = np.r_[self.gone_node, node].astype(np.int32)
        self.gone_lo = np.r_[self.gone_lo, lo].astype(np.int64)
        self.gone_hi = np.r_[self.gone_hi, hi].astype(np.int64)

    def gone_table(self, spark: SparkSession, tag: int = 0) -> DataFrame:
        """The gone segments as a small table (``_gk, _gn, _glo, _ghi``, piece ``_gp``)."""
        return spark.createDataFrame(
            pa.table(
                {
                    "_gp": pa.array(np.full(len(self.gone_key), tag, np.int32)),
                    "_gk": pa.array(self.gone_key),
                    "_gn": pa.array(self.gone_node),
                    "_glo": pa.array(self.gone_lo),
                    "_ghi": pa.array(self.gone_hi),
                }
            )
        )

    def live(self, spark: SparkSession) -> DataFrame:
        """The rows still in the piece (the gone ones left out)."""
        if not self.has_gone:
            return self.frame
        return _drop_gone(self.frame, self.gone_table(spark))


def _kept_view(side: str) -> Callable[[DataFrame], DataFrame]:
    """A batch's new piece of ``side``: the rows its nodes received and keep."""

    def view(received: DataFrame) -> DataFrame:
        keeps = F.col("role").isin(*KEEPS) & (F.col("side") == side)
        return received.where(keeps).drop("role")

    return view


def migration_unit(tuple_id: str = "tuple_id") -> Column:
    """``pmod(hash(tuple_id, MIGRATION_SALT), 2^20)``: which stored tuples of a part move."""
    salted = F.hash(F.col(tuple_id), F.lit(MIGRATION_SALT).cast("bigint"))
    return F.pmod(salted, F.lit(FRACTION_UNITS))


def _drop_gone(rows: DataFrame, gone: DataFrame, piece: Column | None = None) -> DataFrame:
    """``rows`` without those in a gone segment (of their piece, when ``piece`` is given)."""
    unit = migration_unit()
    cond = (
        (F.col("key") == F.col("_gk"))
        & (F.col("node") == F.col("_gn"))
        & (unit >= F.col("_glo"))
        & (unit < F.col("_ghi"))
    )
    if piece is not None:
        cond = cond & (piece == F.col("_gp"))
    return rows.join(F.broadcast(gone), cond, "left_anti")


def release_pieces(dropped: list[Piece], remaining: list[Piece]) -> None:
    """Free what holds the dropped pieces, unless a remaining piece is built on it (a
    batch's two side pieces share its received rows)."""
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


def _partitions(df: DataFrame) -> int:
    """Partitions of ``df``'s rows (planning only, no job)."""
    return int(df._jdf.queryExecution().toRdd().getNumPartitions())


@dataclass
class Flow:
    """One batch's Spark work before its job runs: what the exchange carries and what
    the node stage(s) keep."""

    #: Partitions of the routed rows (the senders); the exchange's map stage has these
    #: first, then the partitions that read state a migration moves.
    route_partitions: int
    #: The operator's output, materialised by the batch's job (``MicroBatchLoop.keep``).
    answer: DataFrame
    #: Rows the node stage kept as it read them, for the statistics (aggregation: the
    #: batch's partial counts; join: the received rows).
    received: DataFrame
    #: The state after the batch (aggregation: partial counts; join: the pieces).
    state: Any


#: The calibrated fixed cost (``Engine.fixed_stage_s``) per loaded stream, by engine
#: configuration and node count: a property of the engine on this data, not of a strategy
#: (calibration routes an empty batch by default routing), so the runs of an application
#: share the first measured run's (3 empty batches, about 1 s a run before).
_FIXED_COSTS: weakref.WeakKeyDictionary[DataFrame, dict[tuple, np.ndarray]] = (
    weakref.WeakKeyDictionary()
)


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
        self.aggregates = config.workload.operator.aggregates
        #: Aggregation state: partial counts, one row per (node, key, age).
        self.state: DataFrame | None = None
        #: Join state: the stored tuples of each side, in pieces.
        self.pieces: list[Piece] = []
        self.state_key = np.zeros(0, dtype=np.int64)
        self.state_node = np.zeros(0, dtype=np.int32)
        #: The plan's moves after the last batch, carried out in the next batch's exchange.
        self.pending: Reassignment | None = None
        #: Rows materialised by the node stage that computes them (``_keep_lazy``).
        self._lazy: list[DataFrame] = []
        #: The engine's fixed node cost per node stage (s, CPU of one task with no
        #: tuples and no state), measured by :meth:`calibrate` before the first batch.
        self.fixed_stage_s = np.zeros(self.node_stages)

    @property
    def node_stages(self) -> int:
        """Node stages of a batch: the fused receive/operator/state stage; an
        aggregation's merge of every key's partials at its home node follows it."""
        return 2 if self.aggregates else 1

    @property
    def node_fixed_s(self) -> float:
        """Fixed node cost per node and batch (s): the calibrated stages summed."""
        return float(self.fixed_stage_s.sum())

    def conf(self) -> dict[str, str]:
        return dict(ENGINE_CONF)

    def start(self) -> None:
        """The fixed cost, calibrated by the first measured run of this configuration on
        this loaded stream and reused by the later ones (:data:`_FIXED_COSTS`)."""
        if self.config.warm_up:
            return
        kept = _FIXED_COSTS.setdefault(self.stream, {})
        key = (repr(replace(self.config, warm_up=False)), self.n)
        if key not in kept:
            self.calibrate()
            kept[key] = self.fixed_stage_s
        self.fixed_stage_s = kept[key].copy()

    def close(self) -> None:
        """Release the state: a later run in the same application must not find this
        run's cached rows (an identical plan would be served from them, unmeasured)."""
        release_pieces(self.pieces, [])
        self.pieces = []
        if self.state is not None:
            release(self.state)
            self.state = None

    # ---- materialisation ------------------------------------------------------------------
    def _keep_lazy(self, df: DataFrame, serialized: bool = False) -> DataFrame:
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

    def _durable(self, df: DataFrame) -> DataFrame:
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
        role = F.lit(STORE if self.aggregates else BOTH)
        routed = empty.withColumn("node", home_node("key", self.n)).withColumn("role", role)
        samples = []
        for i in range(repeats):
            group = self.group(-1, f"calibrate{i}")
            flow = self._flow(-1, routed, None, calibrating=True)
            release(self.keep(flow.answer))
            self._settle()
            work = batch_work(self.reader, group, self.n, self.node_stages, flow.route_partitions)
            release(flow.received)
            if self.aggregates:
                release(flow.state)
            else:
                release_pieces(flow.state, [])
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
        flow = self._flow(b, routed, moves)
        answer = self.keep(flow.answer)
        python_s = self.router.routing_cpu_s()
        self._settle()
        clock.lap("operator")
        durable = None
        if self.reliable_state:
            g_durable = self.group(b, "durable")
            self._make_durable(b, flow)
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
            migration, node_work = metrics.attribute_migration(
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
            extra={
                **{
                    f"node_work_{name}_s": float(cpu.sum())
                    for name, cpu in zip(stage_names, work.stage_cpu_s, strict=False)
                },
                **({"node_work_durable_s": float(durable.node_cpu_s.sum())} if durable else {}),
                "route_python_s": python_s,
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

    def _flow(
        self, b: int, routed: DataFrame, moves: Reassignment | None, calibrating: bool = False
    ) -> Flow:
        """The batch's rows through the exchange and the node stage(s), as a plan: the
        job that keeps ``Flow.answer`` runs it."""
        if self.aggregates:
            return self._aggregate(b, routed, moves, calibrating)
        return self._join(b, routed, moves, calibrating)

    def _check_received(self, arrival: Arrival, work: GroupWork) -> None:
        """The rows each node's task read from the exchange are its routed copies plus
        the rows a migration moved to it (a stage rerun after a lost executor may read a
        partition twice, so this is skipped then)."""
        read = arrival.received + arrival.moved_rows
        exchange = work.stage_records_read[0] if work.stage_records_read else np.zeros(self.n)
        if not np.array_equal(read, exchange):
            raise RuntimeError(
                f"{self.name}: tuples routed per node {arrival.received.tolist()} (and "
                f"{arrival.moved_rows.tolist()} moved in) differ from the rows Spark's node "
                f"tasks read {exchange.tolist()}"
            )

    def _state_frame(self, b: int, state: Any = None) -> DataFrame | None:
        """All state rows after batch ``b`` (aggregation: the partial counts; join: every
        piece's live rows, rows older than the window's horizon left out)."""
        if self.aggregates:
            return self.state if state is None else state
        pieces = self.pieces if state is None else state
        out = _union([p.live(self.spark) for p in pieces])
        horizon = self._horizon(b)
        if out is not None and horizon is not None:
            out = out.where(F.col("event_time_s") >= horizon)
        return out

    def _horizon(self, b: int) -> float | None:
        """Oldest event time a window join keeps after batch ``b`` (None: full history)."""
        cfg = self.config
        if cfg.window_s <= 0:
            return None
        return (b + 1) * cfg.interval_s - cfg.window_s

    def _make_durable(self, b: int, flow: Flow) -> None:
        """With ``reliable_state``: the state this batch wrote, copied to reliable
        checkpoint files by its node tasks (``MicroBatchLoop.keep``'s reliable form); the
        in-memory rows are released."""
        if self.aggregates:
            flow.state = self._durable(flow.state)
            return
        copies: dict[int, DataFrame] = {}
        for piece in flow.state:
            if piece.written_in != b:
                continue
            if id(piece.base) not in copies:
                copies[id(piece.base)] = self._durable(piece.base)
            piece.rebase(copies[id(piece.base)])
        if id(flow.received) in copies:
            flow.received = copies[id(flow.received)]

    def _commit(self, b: int, flow: Flow, stats: BatchStats) -> None:
        if self.aggregates:
            if self.state is not None:
                release(self.state)
            release(flow.received)
            self.state = flow.state
        else:
            release_pieces(self.pieces, flow.state)
            self.pieces = flow.state
        held = stats.state > 0
        self.state_key = stats.key[held]
        self.state_node = stats.node[held].astype(np.int32)

    def _on_nodes(self, rows: DataFrame) -> DataFrame:
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
            frame = self._state_frame(b)
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
        if self.aggregates:
            sent = flow.received.groupBy(*by).agg(
                F.sum("tuples").cast("double").alias("received"),
                F.sum("tuples").cast("double").alias("load"),
                F.sum("moved_rows").cast("double").alias("moved_rows"),
                F.sum("moved_count").cast("double").alias("moved_tuples"),
            )
        else:
            role = F.col("role")
            sent = flow.received.groupBy(*by).agg(
                F.sum((role != MOVED).cast("long")).cast("double").alias("received"),
                F.sum(role.isin(*STORES).cast("long")).cast("double").alias("load"),
                F.sum((role == MOVED).cast("long")).cast("double").alias("moved_rows"),
                F.sum((role == MOVED).cast("long")).cast("double").alias("moved_tuples"),
            )
        state = self._state_frame(b, flow.state)
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
        if not self.aggregates:
            state_r = both.column("state_r") if "state_r" in both.column_names else None
            stats.state_r = (
                np.zeros(len(node)) if state_r is None else state_r.to_numpy().astype(np.float64)
            )
        return stats, arrival

    # ---- aggregation --------------------------------------------------------------------
    def _aggregate(
        self, b: int, routed: DataFrame, moves: Reassignment | None, calibrating: bool
    ) -> Flow:
        """Each node counts its tuples per key into its partial counts (age 0; inside a
        window every older row ages by one batch and leaves the window at age
        ``window_batches``; full history keeps one running count), then every key's
        partials are merged at the key's home node ``F(k)``: a split key's partials travel
        there.

        A migration's partial counts ride the batch's exchange with its tuples (read off
        the sending nodes' state on the exchange's map side, tagged with the node they go
        to); the sending node leaves them out of its state update, which rewrites the
        state anyway. Both happen in the stages every batch runs."""
        cfg = self.config
        assert moves is None or moves.split is None, "re-placing every row is for joins"
        window = cfg.window_batches
        zero, one = F.lit(0).cast("bigint"), F.lit(1).cast("bigint")
        rows = routed.select(
            "key", "node", zero.alias("age"), one.alias("count"), F.lit(0).alias("_moved")
        )
        route_partitions = _partitions(rows)
        # A one-batch window keeps nothing from the last batch: no state to age or move.
        state = None if calibrating or window == 1 else self.state
        if state is not None and window is not None:
            # A batch older; out once the window has passed (before any row moves).
            aged = (F.col("age") + 1).alias("age")
            state = state.select("_surrogate", "node", "key", aged, "count")
            state = state.where(F.col("age") < window)
        if moves is not None and state is not None:
            state, arrived = self._split_counts(state, moves)
            rows = rows.unionByName(
                arrived.select("key", "node", "age", "count", F.lit(1).alias("_moved"))
            )
        moved = F.col("_moved") == 1
        counted = (
            partition_by_node(rows, self.n)
            .groupBy("_surrogate", "node", "key", "age")
            .agg(
                F.sum("count").alias("count"),
                F.sum(F.when(moved, 0).otherwise(1)).alias("tuples"),
                F.sum(F.col("_moved")).alias("moved_rows"),
                F.sum(F.when(moved, F.col("count")).otherwise(0)).alias("moved_count"),
            )
        )
        received = self._keep_lazy(counted, serialized=True)
        merged = received.select("_surrogate", "node", "key", "age", "count")
        if state is not None:
            merged = state.unionByName(merged)
        # One row per (node, key, age): a running count for full history.
        new_state = self._keep_lazy(
            merged.groupBy("_surrogate", "node", "key", "age").agg(F.sum("count").alias("count")),
            serialized=True,
        )
        per_node = new_state.groupBy("_surrogate", "node", "key").agg(F.sum("count").alias("count"))
        at_home = per_node.drop("_surrogate").withColumn("node", home_node("key", self.n))
        answer = (
            partition_by_node(at_home, self.n)
            .groupBy("_surrogate", "key")
            .agg(F.sum("count").alias("count"))
            .select("key", "count")
        )
        return Flow(route_partitions, answer, received, new_state)

    # ---- join ---------------------------------------------------------------------------
    def _join(
        self, b: int, routed: DataFrame, moves: Reassignment | None, calibrating: bool
    ) -> Flow:
        """Probes (``probe``/``both`` rows) pair with the stored tuples of the other side
        on their node: its pieces and the batch's own stored rows, which become one new
        piece per side. The probes are the hash table and the stored rows stream through
        it, so a node reads its history once per batch and never sorts it.

        One node stage: it receives the batch's rows (and a migration's, which ride the
        same exchange), keeps them as the new pieces, merges the pieces the binary counter
        says, and probes. A migration's rows are read off the sending nodes' pieces on
        the exchange's map side; the pieces list them as gone (:class:`Piece`)."""
        cfg = self.config
        rows = routed.select(*BATCH_COLUMNS, "node", "role")
        route_partitions = _partitions(rows)
        pieces = [] if calibrating else list(self.pieces)
        # Pieces whose every tuple is older than this batch's window are dropped.
        horizon = self._horizon(b - 1)
        pieces = [
            p for p in pieces if horizon is None or (p.newest_batch + 1) * cfg.interval_s > horizon
        ]
        if moves is not None and pieces:
            pieces, arrived = self._move_stored(b, pieces, moves)
            if arrived is not None:
                rows = rows.unionByName(arrived)
        received = self._keep_lazy(partition_by_node(rows, self.n))
        for side in SIDES:
            view = _kept_view(side)
            pieces.append(Piece(b, side, view(received), received, 1, b, view))
        pieces = self._merge(b, pieces)
        probe = received.where(F.col("role").isin(*PROBES)).drop("role")
        # The stored keys each probe meets (the operator's predicate, one row per key).
        match = candidate_keys(cfg.workload.operator, F.col("side"), cfg.band_width)
        probe = probe.withColumn("_match", match)
        found = []
        for side in SIDES:
            # One join per side: the union of a side's pieces keeps their node partitioning
            # (spark.sql.unionOutputPartitioning), so each node's task scans its own rows.
            mine = [p for p in pieces if p.side == side]
            stored = _union([p.frame.withColumn("_piece", F.lit(i)) for i, p in enumerate(mine)])
            if stored is None:
                continue
            other = "S" if side == "R" else "R"
            pairs = self._pairs(probe.where(F.col("side") == other), stored)
            gone = [p.gone_table(self.spark, i) for i, p in enumerate(mine) if p.has_gone]
            if gone:
                pairs = _drop_gone(pairs, _union(gone), F.col("_piece"))
            # The node's surrogate is kept with the pairs: Spark then sees both sides'
            # joins as one node partitioning (one task per node, not one per join).
            found.append(pairs.select("r_id", "s_id", "_surrogate"))
        pairs = _union(found)
        assert pairs is not None
        return Flow(route_partitions, pairs, received, pieces)

    def _merge(self, b: int, pieces: list[Piece]) -> list[Piece]:
        """Merge each side's newest pieces when ``merge_pieces`` says so: the merged rows
        are written by the node stage that reads them first (this batch's probe), the
        gone rows left behind."""
        out = list(pieces)
        for side in SIDES:
            own = [p for p in out if p.side == side]
            n = merge_pieces(own)
            if n == 0:
                continue
            merging = own[-n:]
            rows = _union([p.live(self.spark) for p in merging])
            assert rows is not None
            kept = self._keep_lazy(self._on_nodes(rows))
            newest = max(p.newest_batch for p in merging)
            merged = Piece(newest, side, kept, kept, sum(p.span for p in merging), b)
            gone = {id(p) for p in merging}
            out = [p for p in out if id(p) not in gone] + [merged]
        return out

    def _pairs(self, probe: DataFrame, stored: DataFrame) -> DataFrame:
        """Every probe with a stored tuple of the other side that arrived earlier (within
        the window), on the probe's node: ``r_id``, ``s_id`` and the stored tuple's
        ``key``, ``node``, ``tuple_id``, ``_piece`` (to leave gone rows out) and
        ``_surrogate`` (the node's partitioning)."""
        cfg = self.config
        p, s = probe.alias("p"), stored.alias("s")
        cond = (
            (F.col("p._surrogate") == F.col("s._surrogate"))
            & (F.col("p._match") == F.col("s.key"))
            & (F.col("s.tuple_id") < F.col("p.tuple_id"))
        )
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
            F.col("s.key").alias("key"),
            F.col("s.node").alias("node"),
            F.col("s.tuple_id").alias("tuple_id"),
            F.col("s._piece").alias("_piece"),
            F.col("s._surrogate").alias("_surrogate"),
        )

    # ---- migration ----------------------------------------------------------------------
    def _move_stored(
        self, b: int, pieces: list[Piece], moves: Reassignment
    ) -> tuple[list[Piece], DataFrame | None]:
        """Stored tuples a reassignment moves: the rows to ship (role ``moved``, their new
        node set), read off the pieces on the exchange's map side; the pieces either list
        them as gone (a plan's moves, the two-stream rule's sync) or, for a re-placement
        of every row (``Reassignment.split``), are rewritten by this batch's node stage."""
        columns = [*BATCH_COLUMNS, "node"]
        shipped: list[DataFrame] = []
        out: list[Piece] = []
        if moves.split is not None:
            for piece in pieces:
                stay, go = moves.split(piece.live(self.spark).select(*columns, "_surrogate"))
                shipped.append(go.select(*columns))
                kept = self._keep_lazy(self._on_nodes(stay))
                out.append(Piece(piece.newest_batch, piece.side, kept, kept, piece.span, b))
        else:
            seg = self._segment_table(moves)
            sync = self._sync_table(moves)
            gone = self._gone_segments(moves)
            for piece in pieces:
                live = piece.live(self.spark)
                plain = live
                if sync is not None:
                    plain, _, copies = self._split_replicas(live, sync)
                    shipped.append(copies.select(*columns))
                if seg is not None:
                    shipped.append(self._split_tuples(plain, seg).select(*columns))
                key, node, lo, hi = gone[piece.side]
                piece.forget(key, node, lo, hi)
                out.append(piece)
        rows = _union(shipped)
        if rows is None:
            return out, None
        return out, rows.withColumn("role", F.lit(MOVED))

    def _gone_segments(self, moves: Reassignment) -> dict[str, tuple[np.ndarray, ...]]:
        """Per side, the segments of stored rows that leave their node: a plan's segments
        (for keys whose side is not synced) and, for a synced (key, side), every node
        outside its targets (the whole unit range)."""
        synced: dict[str, dict[int, list[int]]] = {side: {} for side in SIDES}
        sync = moves.replicas
        if sync is not None:
            for k, side, targets in zip(sync.key.tolist(), sync.side, sync.targets, strict=True):
                synced[side][int(k)] = [int(t) for t in targets]
        out = {}
        for side in SIDES:
            keep = ~np.isin(moves.key, list(synced[side]))
            key = [moves.key[keep]]
            node = [moves.from_node[keep]]
            lo = [moves.lo_units[keep]]
            hi = [moves.hi_units[keep]]
            for k, targets in synced[side].items():
                off = np.setdiff1d(np.arange(self.n), targets)
                key.append(np.full(len(off), k, np.int64))
                node.append(off.astype(np.int32))
                lo.append(np.zeros(len(off), np.int64))
                hi.append(np.full(len(off), FRACTION_UNITS, np.int64))
            out[side] = (
                np.concatenate(key).astype(np.int64),
                np.concatenate(node).astype(np.int32),
                np.concatenate(lo).astype(np.int64),
                np.concatenate(hi).astype(np.int64),
            )
        return out

    def _segment_table(self, moves: Reassignment) -> DataFrame | None:
        if len(moves.key) == 0:
            return None
        return self.spark.createDataFrame(
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

    def _split_tuples(self, state: DataFrame, seg: DataFrame) -> DataFrame:
        """Stored tuples that move (a tuple moves by its migration unit falling in a moved
        segment of its part), their ``node`` set to where they go."""
        columns = state.columns
        unit = migration_unit()
        on_part = (state["key"] == seg["_mk"]) & (state["node"] == seg["_mfrom"])
        hit = on_part & (unit >= seg["_mlo"]) & (unit < seg["_mhi"])
        return (
            state.join(F.broadcast(seg), hit, "inner")
            .withColumn("node", F.col("_mto"))
            .select(*columns)
        )

    def _split_counts(self, state: DataFrame, moves: Reassignment) -> tuple[DataFrame, DataFrame]:
        """Partial counts: a part's count ``c`` splits by the moved shares, ``floor(c *
        hi) - floor(c * lo)`` per segment; the part's segments lie end to end from 0 up to
        ``H`` (``Reassignment.part_extent``), so what stays is ``c - floor(c * H)`` and the
        pieces sum to ``c`` exactly. The state holds one row per (node, key, age) (the
        node stage aggregates it), so each row splits on its own, with no aggregation.
        Returns the rows that stay (in place, for the node's state update) and those that
        move (``node`` set to where they go)."""
        columns = state.columns
        key, node, extent = moves.part_extent()
        parts = self.spark.createDataFrame(
            pa.table({"_pk": pa.array(key), "_pn": pa.array(node), "_ph": pa.array(extent)})
        )
        on_part = (state["key"] == parts["_pk"]) & (state["node"] == parts["_pn"])
        leaves = F.floor(F.col("count") * F.col("_ph") / FRACTION_UNITS)
        stay = (
            state.join(F.broadcast(parts), on_part, "left")
            .withColumn("count", (F.col("count") - F.coalesce(leaves, F.lit(0))).cast("bigint"))
            .where(F.col("count") > 0)
            .select(*columns)
        )
        seg = self._segment_table(moves)
        assert seg is not None
        on_seg = (state["key"] == seg["_mk"]) & (state["node"] == seg["_mfrom"])
        piece = F.floor(F.col("count") * F.col("_mhi") / FRACTION_UNITS) - F.floor(
            F.col("count") * F.col("_mlo") / FRACTION_UNITS
        )
        arrived = (
            state.join(F.broadcast(seg), on_seg, "inner")
            .select("key", F.col("_mto").alias("node"), "age", piece.cast("bigint").alias("count"))
            .where(F.col("count") > 0)
        )
        return stay, arrived


@dataclass
class Arrival:
    """Per node: the routed copies it received, the rows a migration moved to it, and
    (summed) the tuples those rows carry (stored tuples, or counted tuples)."""

    received: np.ndarray
    moved_rows: np.ndarray
    moved_tuples: float
