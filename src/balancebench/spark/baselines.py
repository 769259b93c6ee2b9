"""Spark-native baselines: what a Spark user runs instead of a load-balancing strategy.

Each baseline replays the same micro-batches as the engine (``engine.load_replay``),
answers with the same meaning (aggregation: the window's ``(key, count)`` table after
each batch; join: the batch's new pairs ``(r_id, s_id)``), is checked by the same oracle
(``oracle.check_batch``) and reports the same :class:`~balancebench.spark.loop.BatchResult`
per batch, through the same loop (``spark.loop``) and cost model. ``routing_table_entries``
and ``migrated_tuples`` are 0 and ``plan`` is None: Spark places the data itself.

**Nodes.** The ``n_nodes`` "nodes" are the ``n_nodes`` shuffle partitions of the stateful
stage (``spark.sql.shuffle.partitions = n_nodes``). A node's times are the summed
``executorCpuTime`` (``node_cpu_time_s``, what makespan uses, as in the engine) and
``executorRunTime`` (``node_run_time_s``) of its tasks in the *measured stages* of the
batch; its ``node_received`` the rows those tasks read (shuffle records, plus input
records for a stage that reads the kept tuples directly). The measured stages are, in the batch's
operator job group, every stage that reads a shuffle plus the final stage of the action;
stages that only scan and write a shuffle (the "routing" side) are the senders' routing
work (``route_s``), as in the engine; broadcast-collect jobs are neither.

- ``spark_streaming`` (the direct streaming peer). Each micro-batch is written as one
  folder of ``senders`` Parquet files (sender ``s``'s tuples of the batch in file ``s``,
  an empty file for a sender with none) and read by one continuous Structured Streaming
  query on ``local_dir()/streaming/<run>/in`` with ``maxFilesPerTrigger = senders``;
  after each folder ``processAllAvailable`` runs exactly one trigger. Every file is its
  own input partition (``spark.sql.files.openCostInBytes`` = the split size), so the
  trigger's map stage runs one task per sender, as the engine's routing stage does: the
  same senders pay the same per-task costs (with one file per batch it ran one task, and
  its routing per sender was that task's work / ``senders``). A ``foreachBatch`` sink sets the
  batch's job group and checkpoints (``keep``) the trigger's output, which executes the
  micro-batch: the stateful stage (``StateStoreRestore/Save`` or
  ``StreamingSymmetricHashJoin``, ``n_nodes`` tasks, task ``i`` = state store partition
  ``i`` = node ``i``) runs in that job (its tasks also cache the trigger's output rows).
  AQE is off inside streaming queries (Spark disables it), so the partitions are exactly
  the nodes. Each batch's folder is written up front (one Spark job) and renamed into the
  query's folder when its turn comes (one rename: the query never sees half a batch).

  *Aggregation*: ``groupBy(key).count()`` in update mode; with a window,
  ``groupBy(window(batch_ts, W s, 1 s), key).count()`` where ``batch_ts`` is the tuple's
  micro-batch index as seconds (so Spark's sliding windows of ``W = window_batches`` batches
  are exactly the engine's window) with a 0 s watermark on it; expired windows are
  evicted at the next trigger (no-data batches are off so each trigger is one file). The
  sink upserts the updated rows into a result table (what an update-mode sink does); the
  answer is its current window. Map-side partial aggregation runs before the shuffle, so
  the stateful stage reads partial counts (one per key and map task, per window for a
  sliding window), not tuples. *Join*: stream-stream inner join of R and S on the key,
  append mode, the trigger's output = the new pairs. A window join adds 1 ms watermarks on
  both sides' event times (micro-second timestamps of ``event_time_s``), the time-range
  condition ``|t_r - t_s| <= window_s`` (widened by 2 us for the timestamp rounding, the
  exact condition on the doubles is applied too) so Spark evicts expired state; full
  history has no watermark and the state grows. *Band join*: Spark rejects a stream-stream
  join without an equality predicate, so the side with fewer tuples overall is exploded
  into its ``2w + 1`` candidate keys and equi-joined (the engine's rewrite); its state holds
  the exploded rows. *State per node*: rows of the operator's state store per partition
  after the trigger, read with Spark's ``statestore`` data source (join: both sides' value
  rows; aggregation: one row per key, or per window and key).

- ``spark_aqe``: every micro-batch as a batch query, AQE and skew-join handling on (see
  :class:`~balancebench.strategies.spark_native.SparkAqe` for the thresholds), whatever
  plan Spark picks. The user keeps the tuples so far as one checkpointed (``keep``) piece
  per batch, spread round-robin over ``n_nodes`` partitions (the source's partitions).
  Aggregation: ``groupBy(key).count()`` over the window's pieces (full history: all).
  Join: ``new R ⋈ (earlier S ∪ new S)`` ∪ ``earlier R ⋈ new S`` on the key (band: on the
  new tuples' candidate keys; window: ``|t_r - t_s| <= window_s``), every pair once.
  *Nodes*: AQE may split a skewed partition into several tasks or coalesce small ones,
  so the stateful stage need not have ``n_nodes`` tasks. Its tasks are placed on
  ``n_nodes`` slots as Spark's FIFO scheduler would run them on ``n_nodes`` cores (task
  order, each to the least-loaded slot): split pieces of one hot partition run on
  different slots, which is what AQE is for; coalesced partitions run as one task on one
  slot. When Spark broadcasts a join side, the join runs in the scan tasks of the other
  side, which read the kept pieces (task ``j`` reads partition ``j mod n_nodes`` of a
  piece, node ``j mod n_nodes``): ``node_received`` is the rows they scan plus the
  broadcast rows, which every node receives. *State per node*: the rows of the kept
  pieces per partition (partition ``i`` of every piece = node ``i``): aggregation, the
  window's batches; join, every batch holding a tuple still inside the window (a piece is
  dropped once all its tuples are older than ``window_s`` before the next batch; older
  tuples of a kept piece are filtered out by the next query). The batch's extras report
  the broadcast rows, the skewed partitions and their splits, the coalesced partitions
  (from Spark's SQL metrics) and the effective thresholds.

- ``spark_salting``: the manual salting recipe per micro-batch (AQE off, broadcast off,
  ``n_nodes`` shuffle partitions, so the stage tasks are the nodes; a union of the two
  joins has ``2 n_nodes`` tasks, task ``j`` on node ``j mod n_nodes``). Aggregation:
  ``count`` by ``(key, salt)``, ``salt = hash(tuple_id) mod S``, then ``sum`` by key: both
  reduce stages are measured. Join: each of the two joins above salts its larger side
  (``hash(tuple_id) mod S``) and replicates its smaller side ``S`` times, joined on
  ``(key, salt)``; the replicas show in ``node_received``. State per node: as for AQE.
  Spark 4's optimizer rule ``CollapseGroupedSumOfCount`` folds the two-phase aggregate
  back into one count by key (dropping the salt); it is excluded for this baseline so the
  recipe runs as written. Map-side partial aggregation already shrinks a hot key's
  tuples to one partial count per map task, so salting a ``count`` mostly adds a shuffle.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench.paths import local_dir
from balancebench.spark.engine import EngineConfig, batch_frame
from balancebench.spark.loop import BatchResult, MicroBatchLoop, PhaseClock, release
from balancebench.spark.oracle import check_batch
from balancebench.spark.task_metrics import ROUTE, TaskMetricsReader
from balancebench.workloads import AGGREGATE, BAND_JOIN, check_strategy

#: Columns of the replay stream (``engine.load_replay``).
COLUMNS = ["side", "tuple_id", "key", "event_time_s", "payload", "batch"]
#: Split size of the streaming file source, also the cost of opening a file: each
#: sender's file of a batch is its own task (Spark's default split, 128 MiB).
FILE_SPLIT_BYTES = 128 * 1024 * 1024
#: Seed of the tuple-id hash that picks a tuple's salt (spark_salting).
SALT_SEED = 0x5A17
#: Spark's own defaults of the AQE settings the baselines touch (Spark 4.3 docs).
AQE_SPARK_DEFAULTS = {
    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": "256MB",
    "spark.sql.adaptive.skewJoin.skewedPartitionFactor": "5.0",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "64MB",
    "spark.sql.adaptive.coalescePartitions.minPartitionSize": "1MB",
}
SPARK_BROADCAST_THRESHOLD = "10MB"
EXCLUDED_RULES = "spark.sql.optimizer.excludedRules"
COLLAPSE_SUM_OF_COUNT = "org.apache.spark.sql.catalyst.optimizer.CollapseGroupedSumOfCount"
STATE_STORE_PROVIDERS = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}


class _Rest(TaskMetricsReader):
    """Jobs and SQL executions from the REST API, besides the task lists."""

    def job(self, job_id: int) -> dict:
        return self._get(f"/jobs/{job_id}")  # type: ignore[return-value]

    def sql_nodes(self, execution_id: int) -> list[dict]:
        """Plan nodes with their metrics of a finished SQL execution."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                data = self._get(f"/sql/{execution_id}?details=true&planDescription=false")
            except OSError:
                data = {}
            if isinstance(data, dict) and data.get("status") in ("COMPLETED", "FAILED"):
                return list(data.get("nodes", []))
            if time.monotonic() > deadline:
                return []
            time.sleep(0.05)


def _metric(node: dict, name: str) -> int:
    for m in node.get("metrics", []):
        if m.get("name") == name:
            text = str(m.get("value", "0")).split("\n")[-1].split(" ")[0].replace(",", "")
            try:
                return int(float(text))
            except ValueError:
                return 0
    return 0


def _bytes(value: str | None) -> int:
    """A Spark size setting ("256MB", "1", "-1") in bytes."""
    text = (value or "0").strip().upper().removesuffix("B")
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(float(text))


def _list_schedule(run_s: np.ndarray, n: int) -> np.ndarray:
    """Slot of each task when tasks start in index order, each on the least-loaded of
    ``n`` slots (Spark's FIFO scheduler on ``n`` cores); ties to the lower slot."""
    load = np.zeros(n)
    slots = np.zeros(len(run_s), dtype=np.int64)
    for j, t in enumerate(run_s):
        slot = int(np.argmin(load))
        slots[j] = slot
        load[slot] += t
    return slots


class _Baseline(MicroBatchLoop):
    """What the baselines share on top of the loop: measurement and the oracle."""

    #: Schedule tasks on slots when a stage's tasks are not the nodes (AQE only).
    adaptive = False

    def __init__(
        self,
        spark: SparkSession,
        stream: DataFrame,
        config: EngineConfig,
        strategy: Any,
        name: str,
        on_batch: Callable[[BatchResult], None] | None = None,
        harness_hook: Callable[[str], None] | None = None,
    ) -> None:
        # A strategy that cannot serve the workload is rejected before any Spark work.
        check_strategy(config.workload.name, strategy.name, strategy.operators)
        super().__init__(spark, stream, config, name, on_batch, harness_hook)
        self.settings = dict(getattr(strategy, "settings", {}) or {})
        self.op = config.workload.operator
        self.rest = _Rest(self.sc)
        self.side_totals = {
            s: sum(c for (_, side), c in self.counts.items() if side == s) for s in ("R", "S")
        }

    # ---- measurement --------------------------------------------------------------------
    def measure(self, group: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, float]]:
        """Per node: summed ``executorRunTime`` and ``executorCpuTime`` (s) and rows read
        in the measured stages of ``group`` (module docstring), and facts about the
        batch's plan (``route_work_s``: the CPU of its routing stages)."""
        n = self.n
        run = np.zeros(n)
        cpu = np.zeros(n)
        received = np.zeros(n, dtype=np.int64)
        info = {
            "stages_measured": 0.0,
            "tasks_measured": 0.0,
            "broadcast_rows": 0.0,
            "route_work_s": 0.0,
        }
        jobs = sorted(self.sc.statusTracker().getJobIdsForGroup(group))
        if not jobs:
            return run, cpu, received, info
        last = jobs[-1]
        last_tags: list[str] = []
        for job in jobs:
            data = self.rest.job(job)
            tags = [str(t) for t in data.get("jobTags", [])]
            if job == last:
                last_tags = tags
            if any(t.startswith("broadcast exchange") for t in tags):
                continue  # collecting a broadcast side: upstream of the nodes
            stage_ids = sorted(int(s) for s in data.get("stageIds", []))
            for sid in stage_ids:
                tasks = self.rest.stage_tasks(sid)
                if tasks is None:
                    continue  # skipped: computed by an earlier job
                shuffle = np.array(
                    [t["taskMetrics"]["shuffleReadMetrics"]["recordsRead"] for t in tasks]
                )
                final = job == last and sid == stage_ids[-1]
                run_s = np.array([t["taskMetrics"]["executorRunTime"] for t in tasks]) / 1e3
                cpu_s = np.array([t["taskMetrics"]["executorCpuTime"] for t in tasks]) / 1e9
                if shuffle.sum() == 0 and not final:
                    # Scans the input and writes a shuffle: the senders' routing.
                    info["route_work_s"] += float(cpu_s.sum())
                    continue
                inputs = np.array([t["taskMetrics"]["inputMetrics"]["recordsRead"] for t in tasks])
                if len(tasks) % n == 0 and not (self.adaptive and shuffle.sum() > 0):
                    slots = np.arange(len(tasks)) % n
                elif self.adaptive:
                    slots = _list_schedule(cpu_s if cpu_s.any() else run_s, n)
                else:
                    raise RuntimeError(
                        f"{self.name}: stage {sid} has {len(tasks)} tasks, not a multiple of "
                        f"the {n} nodes (AQE must be off)"
                    )
                np.add.at(run, slots, run_s)
                np.add.at(cpu, slots, cpu_s)
                np.add.at(received, slots, (shuffle + inputs).astype(np.int64))
                info["stages_measured"] += 1
                info["tasks_measured"] += len(tasks)
        if self.adaptive:
            root = [t for t in last_tags if "-execution-root-id-" in t]
            if root:
                nodes = self.rest.sql_nodes(int(root[0].rsplit("-", 1)[1]))
                bcast = sum(
                    _metric(x, "number of output rows")
                    for x in nodes
                    if x.get("nodeName") == "BroadcastExchange"
                )
                reads = [x for x in nodes if x.get("nodeName") == "AQEShuffleRead"]
                info["broadcast_rows"] = float(bcast)
                info["broadcast_exchanges"] = float(
                    sum(x.get("nodeName") == "BroadcastExchange" for x in nodes)
                )
                info["aqe_skewed_partitions"] = float(
                    sum(_metric(x, "number of skewed partitions") for x in reads)
                )
                info["aqe_skew_splits"] = float(
                    sum(_metric(x, "number of skewed partition splits") for x in reads)
                )
                info["aqe_coalesced_partitions"] = float(
                    sum(_metric(x, "number of coalesced partitions") for x in reads)
                )
                # Every node (executor) receives a broadcast side whole.
                received += bcast
        return run, cpu, received, info

    def finish(
        self,
        b: int,
        clock: PhaseClock,
        times: tuple[np.ndarray, np.ndarray],
        received: np.ndarray,
        state: np.ndarray,
        answer: DataFrame,
        extra: dict[str, float],
    ) -> BatchResult:
        self.group(b, "oracle")
        passed, result_rows, shown = check_batch(self.stream, self.config, b, answer)
        clock.lap("oracle")
        route_work_s = extra.pop("route_work_s", 0.0)
        return BatchResult(
            batch=b,
            input_tuples=self.batch_tuples(b),
            node_received=received,
            node_run_time_s=times[0],
            node_cpu_time_s=times[1],
            node_state=state.astype(np.float64),
            result_rows=result_rows,
            routing_table_entries=0,
            oracle_passed=passed,
            answer=shown,
            extra=extra,
            route_work_s=route_work_s,
            senders=self.senders,
        )

    def band_width(self) -> int:
        return self.config.band_width if self.op == BAND_JOIN else 0


# ---- spark_streaming -----------------------------------------------------------------------
class StreamingRunner(_Baseline):
    def conf(self) -> dict[str, str]:
        provider = str(self.settings.get("state_store", "hdfs"))
        if provider not in STATE_STORE_PROVIDERS:
            raise ValueError(
                f"spark_streaming_state_store: {provider!r}; allowed values: "
                f"{sorted(STATE_STORE_PROVIDERS)}"
            )
        return {
            "spark.sql.shuffle.partitions": str(self.n),
            "spark.sql.adaptive.enabled": "false",
            # One trigger per file: no extra trigger that only advances the watermark
            # (expired state is then evicted at the start of the next data trigger).
            "spark.sql.streaming.noDataMicroBatches.enabled": "false",
            "spark.sql.streaming.stateStore.providerClass": STATE_STORE_PROVIDERS[provider],
            # A file costs a whole split: Spark packs no two senders' files into one task.
            "spark.sql.files.openCostInBytes": str(FILE_SPLIT_BYTES),
            "spark.sql.files.maxPartitionBytes": str(FILE_SPLIT_BYTES),
        }

    def start(self) -> None:
        self.folder = local_dir() / "streaming" / f"{self.name}-{uuid.uuid4().hex[:12]}"
        self.inbox = self.folder / "in"
        self.inbox.mkdir(parents=True)
        self.checkpoint = self.folder / "checkpoint"
        self.outputs: dict[int, DataFrame] = {}
        self.sink_group: str | None = None
        self.last_batch_id = -1
        self.table: DataFrame | None = None
        self._stage_batches()
        self.query = self._query().start()

    def close(self) -> None:
        query = getattr(self, "query", None)
        if query is not None:
            query.stop()
        folder = getattr(self, "folder", None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    # The streaming query ----------------------------------------------------------------
    def _query(self) -> Any:
        cfg = self.config
        src = (
            self.spark.readStream.schema(self.schema)
            .option("maxFilesPerTrigger", self.senders)
            .parquet(str(self.inbox / "*"))  # one folder per batch
        )
        if self.op == AGGREGATE:
            windows = cfg.window_batches
            if windows is None:
                out = src.groupBy("key").count()
            else:
                out = (
                    src.withColumn("_bt", F.timestamp_seconds(F.col("batch")))
                    .withWatermark("_bt", "0 seconds")
                    .groupBy(F.window("_bt", f"{windows} seconds", "1 second"), "key")
                    .count()
                    .select(F.unix_seconds(F.col("window.start")).alias("_wstart"), "key", "count")
                )
            mode = "update"
        else:
            out = self._join(src)
            mode = "append"
        return (
            out.writeStream.outputMode(mode)
            .foreachBatch(self._sink)
            .option("checkpointLocation", str(self.checkpoint))
            .queryName(f"balancebench_{self.name}_{uuid.uuid4().hex[:8]}")
        )

    def _join(self, src: DataFrame) -> DataFrame:
        cfg = self.config
        width = self.band_width()
        # Band: the side with fewer tuples is exploded into its candidate keys.
        explode = "R" if self.side_totals["R"] <= self.side_totals["S"] else "S"

        def side(s: str) -> DataFrame:
            p = s.lower()
            df = src.where(F.col("side") == s)
            k = F.col("key")
            if width and s == explode:
                k = F.explode(F.sequence(F.col("key") - width, F.col("key") + width))
            cols = [
                F.col("tuple_id").alias(f"{p}_id"),
                k.alias(f"{p}_k"),
                F.col("event_time_s").alias(f"{p}_t"),
            ]
            if cfg.window_s > 0:
                micros = F.floor(F.col("event_time_s") * 1e6).cast("long")
                cols.append(F.timestamp_micros(micros).alias(f"{p}_et"))
                return df.select(*cols).withWatermark(f"{p}_et", "1 millisecond")
            return df.select(*cols)

        r, s = side("R"), side("S")
        cond = F.col("r_k") == F.col("s_k")
        if cfg.window_s > 0:
            slack = F.expr(f"INTERVAL {int(cfg.window_s * 1e6) + 2} MICROSECONDS")
            cond = (
                cond
                & (F.col("r_et") >= F.col("s_et") - slack)
                & (F.col("r_et") <= F.col("s_et") + slack)
                & (F.abs(F.col("r_t") - F.col("s_t")) <= F.lit(cfg.window_s))
            )
        return r.join(s, cond).select("r_id", "s_id")

    def _sink(self, output: DataFrame, batch_id: int) -> None:
        """foreachBatch: runs the trigger's plan in the batch's job group."""
        group = self.sink_group or f"balancebench-{self.name}-trigger{batch_id}"
        self.sc.setJobGroup(group, f"{self.name} trigger {batch_id}")
        self.outputs[batch_id] = self.keep(output)
        self.last_batch_id = batch_id

    # One batch --------------------------------------------------------------------------
    def _stage_batches(self) -> None:
        """Write every micro-batch as a folder of ``senders`` Parquet files (one Spark job:
        the stream's partition ``s`` is sender ``s`` and writes its rows of each batch as
        one file) into a staging folder; :meth:`_feed` renames batch ``b``'s folder into
        the query's folder."""
        self.staging = self.folder / "staging"
        self.sc.setJobGroup(f"balancebench-{self.name}-stage-{time.time_ns()}", "stage batches")
        rows = self.stream.select(*COLUMNS).withColumn("_part", F.col("batch"))
        rows.write.partitionBy("_part").parquet(str(self.staging))
        self.schema = self.stream.select(*COLUMNS).schema
        empty = pa.schema(
            [
                ("side", pa.string()),
                ("tuple_id", pa.int64()),
                ("key", pa.int64()),
                ("event_time_s", pa.float64()),
                ("payload", pa.int64()),
                ("batch", pa.int64()),
            ]
        ).empty_table()
        for b in range(self.config.n_batches):
            batch_dir = self.staging / f"_part={b}"
            batch_dir.mkdir(exist_ok=True)
            files = sorted(batch_dir.glob("part-*.parquet"))
            if len(files) > self.senders:
                raise RuntimeError(
                    f"{self.name}: batch {b} was written as {len(files)} files, "
                    f"expected at most one per sender ({self.senders})"
                )
            for s in range(len(files), self.senders):  # senders with no tuple in batch b
                pq.write_table(empty, batch_dir / f"part-empty-{s:05d}.parquet")

    def _feed(self, b: int) -> None:
        """Rename batch ``b``'s folder into the query's folder, its files stamped now (the
        file source orders by modification time)."""
        batch_dir = self.staging / f"_part={b}"
        for f in batch_dir.glob("*.parquet"):
            os.utime(f)
        batch_dir.rename(self.inbox / f"batch-{b:06d}")

    def batch(self, b: int, clock: PhaseClock) -> BatchResult:
        extra: dict[str, float] = {}
        self.group(b, "feed")
        self._feed(b)
        clock.lap("feed")
        self.sink_group = f"balancebench-{self.name}-b{b}-operator-{time.time_ns()}"
        before = self.last_batch_id
        self.query.processAllAvailable()
        if self.query.exception() is not None:
            raise RuntimeError(f"{self.name}: streaming query failed: {self.query.exception()}")
        if self.last_batch_id != before + 1:
            raise RuntimeError(
                f"{self.name}: batch {b} ran triggers {before + 1}..{self.last_batch_id}, "
                "expected exactly one"
            )
        batch_id = self.last_batch_id
        clock.lap("trigger")
        run, cpu, received, info = self.measure(self.sink_group)
        extra.update(info)
        clock.lap("task_metrics")
        self.group(b, "state")
        state = self._state(batch_id)
        extra["state_rows_total"] = float(state.sum())
        clock.lap("state")
        self.group(b, "sink")
        answer = self._answer(b, self.outputs.pop(batch_id))
        clock.lap("sink")
        return self.finish(b, clock, (run, cpu), received, state, answer, extra)

    def _state(self, batch_id: int) -> np.ndarray:
        """State store rows per partition after trigger ``batch_id`` (Spark's
        ``statestore`` data source)."""

        def read(**options: str) -> DataFrame:
            reader = self.spark.read.format("statestore").option("batchId", batch_id)
            for k, v in options.items():
                reader = reader.option(k, v)
            return reader.load(str(self.checkpoint)).select("partition_id")

        if self.op == AGGREGATE:
            rows = read()
        else:
            rows = read(joinSide="left").unionByName(read(joinSide="right"))
        counts = rows.groupBy("partition_id").count().collect()
        state = np.zeros(self.n, dtype=np.int64)
        for r in counts:
            state[int(r["partition_id"])] += int(r["count"])
        return state

    def _answer(self, b: int, output: DataFrame) -> DataFrame:
        """The join's new pairs, or the aggregation's window after upserting the
        trigger's updated rows into the result table."""
        if self.op != AGGREGATE:
            return output
        windows = self.config.window_batches
        if windows is None:
            updates = output.withColumn("_wstart", F.lit(0).cast("bigint"))
            current = 0
        else:
            updates = output
            current = b - windows + 1
        updates = updates.select("_wstart", "key", F.col("count").cast("bigint"))
        table = updates
        if self.table is not None:
            kept = self.table.where(F.col("_wstart") >= current)
            table = kept.join(updates.select("_wstart", "key"), ["_wstart", "key"], "left_anti")
            table = table.unionByName(updates)
        table = self.keep(table)
        self.table = table
        return table.where(F.col("_wstart") == current).select("key", "count")


# ---- batch queries per micro-batch (spark_aqe, spark_salting) -------------------------------
class _BatchQueries(_Baseline):
    """Keeps the tuples so far as per-batch pieces of ``n`` round-robin partitions."""

    def start(self) -> None:
        self.pieces: dict[int, DataFrame] = {}
        #: Rows per partition of each kept piece.
        self.piece_rows: dict[int, np.ndarray] = {}

    def close(self) -> None:
        for piece in getattr(self, "pieces", {}).values():
            release(piece)

    def horizon(self, b: int) -> float | None:
        """Oldest event time a join still needs after batch ``b`` (None: full history)."""
        if self.config.window_s <= 0:
            return None
        return (b + 1) * self.config.interval_s - self.config.window_s

    def kept_batches(self, b: int) -> list[int]:
        """Batches whose pieces the user keeps after batch ``b``."""
        cfg = self.config
        if self.op == AGGREGATE:
            first = 0 if cfg.window_batches is None else b - cfg.window_batches + 1
            return [j for j in sorted(self.pieces) if first <= j <= b]
        horizon = self.horizon(b)
        if horizon is None:
            return sorted(self.pieces)
        # Batch j's tuples are older than (j + 1) * interval (the last batch is never dropped).
        return [j for j in sorted(self.pieces) if (j + 1) * cfg.interval_s > horizon or j == b]

    def union(self, batches: list[int]) -> DataFrame | None:
        frames = [self.pieces[j] for j in batches]
        if not frames:
            return None
        out = frames[0]
        for f in frames[1:]:
            out = out.unionByName(f)
        return out

    def batch(self, b: int, clock: PhaseClock) -> BatchResult:
        extra: dict[str, float] = {}
        piece, ingest = self._ingest(b)
        clock.lap("ingest")
        earlier = self.union(sorted(self.pieces))
        self.pieces[b] = piece
        self.group(b, "prepare")  # building the query may run jobs (salting's hot keys)
        if self.op == AGGREGATE:
            query = self.aggregate(b, self.union(self.kept_batches(b)))
        else:
            query = self.join(b, piece, earlier)
        group = self.group(b, "operator")
        answer = self.keep(query)
        clock.lap("operator")
        run, cpu, received, info = self.measure(group)
        # Receiving the batch: its scan and shuffle are the senders', its n tasks the nodes'.
        info["route_work_s"] += ingest.route_work_s
        extra.update(info)
        clock.lap("task_metrics")
        state = self._drop_and_count(b)
        return self.finish(
            b,
            clock,
            (run + ingest.node_run_s, cpu + ingest.node_cpu_s),
            received,
            state,
            answer,
            extra,
        )

    def _ingest(self, b: int) -> tuple[DataFrame, Any]:
        """Batch ``b``'s tuples as the user keeps them: ``n`` round-robin partitions,
        checkpointed (``keep``); its rows per partition from the job's task metrics, and
        the job's measured work."""
        group = self.group(b, "ingest")
        rows = batch_frame(self.stream, b).select(*COLUMNS)
        piece = self.keep(rows.repartition(self.n))
        sizes = np.zeros(self.n, dtype=np.int64)
        for job in self.sc.statusTracker().getJobIdsForGroup(group):
            info = self.sc.statusTracker().getJobInfo(job)
            for sid in info.stageIds if info else []:
                tasks = self.rest.stage_tasks(sid)
                if tasks is not None and len(tasks) == self.n:
                    read = [t["taskMetrics"]["shuffleReadMetrics"]["recordsRead"] for t in tasks]
                    sizes = np.maximum(sizes, np.array(read, dtype=np.int64))
        if int(sizes.sum()) != self.batch_tuples(b):
            raise RuntimeError(
                f"{self.name}: batch {b} ingested {sizes.tolist()} rows per partition, "
                f"expected {self.batch_tuples(b)} in all"
            )
        self.piece_rows[b] = sizes
        return piece, self.work(group, ROUTE)

    def _drop_and_count(self, b: int) -> np.ndarray:
        """Drop the pieces the user no longer needs; kept tuples per node."""
        keep = set(self.kept_batches(b))
        for j in [j for j in self.pieces if j not in keep]:
            release(self.pieces.pop(j))
            self.piece_rows.pop(j, None)
        state = np.zeros(self.n, dtype=np.int64)
        for j in self.pieces:
            state += self.piece_rows[j]
        return state

    # Queries ------------------------------------------------------------------------------
    def aggregate(self, b: int, window: DataFrame | None) -> DataFrame:
        raise NotImplementedError

    def join(self, b: int, new: DataFrame, earlier: DataFrame | None) -> DataFrame:
        """``new R ⋈ (earlier S ∪ new S)`` ∪ ``earlier R ⋈ new S``: every pair whose later
        tuple is in batch ``b``, once."""
        cfg = self.config
        if earlier is not None and cfg.window_s > 0:
            earlier = earlier.where(F.col("event_time_s") >= b * cfg.interval_s - cfg.window_s)
        new_r, new_s = (new.where(F.col("side") == s) for s in ("R", "S"))
        old_s = None if earlier is None else earlier.where(F.col("side") == "S")
        all_s = new_s if old_s is None else old_s.unionByName(new_s)
        n_new = {s: self.counts.get((b, s), 0) for s in ("R", "S")}
        # Sizes the user knows: the batch's tuples and the kept earlier pieces.
        n_old = {
            s: sum(
                c
                for (j, side), c in self.counts.items()
                if side == s and j < b and j in self.pieces
            )
            for s in ("R", "S")
        }
        pairs = self.pairs(new_r, "R", all_s, n_new["R"], n_old["S"] + n_new["S"])
        if earlier is not None:
            old_r = earlier.where(F.col("side") == "R")
            pairs = pairs.unionByName(self.pairs(new_s, "S", old_r, n_new["S"], n_old["R"]))
        return pairs

    def pairs(
        self, new: DataFrame, new_side: str, other: DataFrame, n_new: int, n_other: int
    ) -> DataFrame:
        """Pairs of the batch's ``new`` tuples of one side with ``other`` tuples of the
        other side (band: on the new tuples' candidate keys)."""
        cfg = self.config
        width = self.band_width()
        k = F.col("key")
        if width:
            k = F.explode(F.sequence(F.col("key") - width, F.col("key") + width))
        a = new.select(
            F.col("tuple_id").alias("a_id"),
            k.alias("a_k"),
            F.col("event_time_s").alias("a_t"),
        )
        o = other.select(
            F.col("tuple_id").alias("o_id"),
            F.col("key").alias("o_k"),
            F.col("event_time_s").alias("o_t"),
        )
        a, o, cond = self.equi(a, o, n_new * (2 * width + 1), n_other)
        if cfg.window_s > 0:
            cond = cond & (F.abs(F.col("a_t") - F.col("o_t")) <= F.lit(cfg.window_s))
        r_id, s_id = ("a_id", "o_id") if new_side == "R" else ("o_id", "a_id")
        return a.join(o, cond).select(F.col(r_id).alias("r_id"), F.col(s_id).alias("s_id"))

    def equi(
        self, a: DataFrame, o: DataFrame, n_a: int, n_o: int
    ) -> tuple[DataFrame, DataFrame, Any]:
        """The equality part of a join of ``a`` (key ``a_k``) with ``o`` (key ``o_k``)."""
        return a, o, F.col("a_k") == F.col("o_k")


class AqeRunner(_BatchQueries):
    adaptive = True

    def conf(self) -> dict[str, str]:
        s = self.settings
        mode = str(s.get("thresholds", "scaled"))
        if mode not in ("scaled", "spark"):
            raise ValueError(f"spark_aqe_thresholds: {mode!r}; allowed values: ['scaled', 'spark']")
        conf = {
            "spark.sql.adaptive.enabled": "true",
            "spark.sql.adaptive.skewJoin.enabled": "true",
            "spark.sql.adaptive.coalescePartitions.enabled": "true",
            "spark.sql.shuffle.partitions": str(self.n),
            "spark.sql.autoBroadcastJoinThreshold": (
                SPARK_BROADCAST_THRESHOLD if s.get("broadcast", True) else "-1"
            ),
            **AQE_SPARK_DEFAULTS,
        }
        if mode == "scaled":
            # Byte floors off: a partition is skewed when larger than skew_factor x the
            # median, split into pieces of the mean non-skewed partition (AQE's target is
            # max(advisory, that mean)), and nothing is coalesced below a partition.
            conf.update(
                {
                    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": "1",
                    "spark.sql.adaptive.skewJoin.skewedPartitionFactor": str(
                        float(s.get("skew_factor", 2.0))
                    ),
                    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "1",
                    "spark.sql.adaptive.coalescePartitions.minPartitionSize": "1",
                }
            )
        return conf

    def measure(self, group: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, float]]:
        run, cpu, received, info = super().measure(group)
        conf = self.spark.conf
        for name, key in (
            ("aqe_skew_threshold_bytes", "skewJoin.skewedPartitionThresholdInBytes"),
            ("aqe_advisory_bytes", "advisoryPartitionSizeInBytes"),
            ("aqe_min_partition_bytes", "coalescePartitions.minPartitionSize"),
        ):
            info[name] = float(_bytes(conf.get(f"spark.sql.adaptive.{key}")))
        info["aqe_skew_factor"] = float(
            conf.get("spark.sql.adaptive.skewJoin.skewedPartitionFactor") or 0
        )
        info["broadcast_threshold_bytes"] = float(
            _bytes(conf.get("spark.sql.autoBroadcastJoinThreshold"))
        )
        return run, cpu, received, info

    def aggregate(self, b: int, window: DataFrame | None) -> DataFrame:
        assert window is not None
        return window.groupBy("key").agg(F.count(F.lit(1)).alias("count"))


class SaltingRunner(_BatchQueries):
    def conf(self) -> dict[str, str]:
        # Spark 4's optimizer folds "count by (key, salt), then sum by key" into one count
        # by key (CollapseGroupedSumOfCount), silently dropping the salt; the recipe needs
        # it off to run as written.
        excluded = self.spark.conf.get(EXCLUDED_RULES, None) or ""
        rules = [r for r in excluded.split(",") if r.strip()]
        if COLLAPSE_SUM_OF_COUNT not in rules:
            rules.append(COLLAPSE_SUM_OF_COUNT)
        return {
            "spark.sql.adaptive.enabled": "false",
            "spark.sql.shuffle.partitions": str(self.n),
            "spark.sql.autoBroadcastJoinThreshold": "-1",
            EXCLUDED_RULES: ",".join(rules),
        }

    @property
    def salts(self) -> int:
        salts = int(self.settings.get("salts", 0) or 0)
        return salts if salts > 0 else self.n

    def _hot(self, df: DataFrame, key: str) -> list[int] | None:
        """The ``hot_keys`` most frequent keys of ``df`` (None: salt every key)."""
        hot = int(self.settings.get("hot_keys", 0) or 0)
        if hot <= 0:
            return None
        top = df.groupBy(key).count().orderBy(F.col("count").desc(), F.col(key)).limit(hot)
        return [int(r[key]) for r in top.collect()]

    def _salt(self, key: str, tuple_id: str, hot: list[int] | None) -> Any:
        """``hash(tuple_id) mod S`` (hot keys only: other keys get salt 0)."""
        seed = F.lit(SALT_SEED).cast("bigint")
        salt = F.pmod(F.hash(F.col(tuple_id), seed), F.lit(self.salts))
        if hot is None:
            return salt
        return F.when(F.col(key).isin(hot), salt).otherwise(F.lit(0))

    def _replicas(self, key: str, hot: list[int] | None) -> Any:
        """One row per salt ``0..S-1`` (hot keys only: other keys only salt 0)."""
        every = F.sequence(F.lit(0), F.lit(self.salts - 1))
        if hot is None:
            return F.explode(every)
        return F.explode(F.when(F.col(key).isin(hot), every).otherwise(F.array(F.lit(0))))

    def aggregate(self, b: int, window: DataFrame | None) -> DataFrame:
        assert window is not None
        hot = self._hot(window, "key")
        partial = (
            window.withColumn("_salt", self._salt("key", "tuple_id", hot))
            .groupBy("key", "_salt")
            .agg(F.count(F.lit(1)).alias("_count"))
        )
        return partial.groupBy("key").agg(F.sum("_count").cast("bigint").alias("count"))

    def equi(
        self, a: DataFrame, o: DataFrame, n_a: int, n_o: int
    ) -> tuple[DataFrame, DataFrame, Any]:
        """Salt the larger side by its tuple id, replicate the smaller side per salt."""
        if n_a >= n_o:
            big, small, big_k, small_k, big_id = a, o, "a_k", "o_k", "a_id"
        else:
            big, small, big_k, small_k, big_id = o, a, "o_k", "a_k", "o_id"
        hot = self._hot(big, big_k)
        big = big.withColumn("_salt_" + big_k, self._salt(big_k, big_id, hot))
        small = small.withColumn("_salt_" + small_k, self._replicas(small_k, hot))
        a, o = (big, small) if big_k == "a_k" else (small, big)
        cond = (F.col("a_k") == F.col("o_k")) & (F.col("_salt_a_k") == F.col("_salt_o_k"))
        return a, o, cond
