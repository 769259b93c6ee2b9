"""Windowed TOPK on Spark under a key-level strategy (paper 000's TOPK workload).

Execution of one run (see ``balancebench.replay`` for the clock):

1. The dataset is read once and cached with its micro-batch index.
2. For each micro-batch ``b``:
   a. the strategy's current routing table gives every tuple its node (Spark SQL,
      ``spark.routing.with_storage_node``), and the batch is shuffled so that Spark
      partition ``i`` is node ``i`` (``partition_by_node``);
   b. each node counts its tuples per key: the per-node partial count, the stateful
      stage whose task times the REST API reports (``makespan_s`` is their max);
   c. split keys' partials are merged (``groupBy(key).sum``) and the top ``k`` keys by
      count (ties: smaller key first) are the window's answer;
   d. the correctness oracle recomputes the count table and the top ``k`` with a plain
      ``groupBy(key).count()`` on the same batch; any difference raises
      :class:`OracleMismatch`;
   e. the per-(node, key) counts are handed to the strategy, whose plan (timed) gives
      the routing table for batch ``b + 1``.

Checks that the execution is what it claims: every row's ``spark_partition_id()``
equals its node, and the rows each task read from the shuffle equal the tuples routed to
its node.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench.loads import KeyLoads, imbalance
from balancebench.spark.routing import partition_by_node, with_per_tuple_node, with_storage_node
from balancebench.spark.task_metrics import TaskMetricsReader
from balancebench.strategies import MigrationPlan, Strategy


class OracleMismatch(AssertionError):
    """The balanced result differs from the plain Spark computation."""


@dataclass
class BatchResult:
    batch: int
    tuples: int
    node_tuples: np.ndarray
    node_run_time_s: np.ndarray
    routing_table_entries: int
    topk: list[tuple[int, int]]
    oracle_passed: bool
    wall_s: float
    plan: MigrationPlan | None = None

    @property
    def makespan_s(self) -> float:
        return float(self.node_run_time_s.max())

    @property
    def ideal_makespan_s(self) -> float:
        return float(self.node_run_time_s.mean())

    @property
    def imbalance_max_over_mean(self) -> float:
        return imbalance(self.node_tuples)


@dataclass
class TopkRun:
    batches: list[BatchResult] = field(default_factory=list)


def load_stream(
    spark: SparkSession, files: list[str], interval_s: float, n_batches: int
) -> DataFrame:
    """The stream with its micro-batch index (same IEEE expression as ``replay.batch_index``)."""
    df = spark.read.parquet(*files)
    batch = F.least(F.floor(F.col("event_time_s") / F.lit(interval_s)), F.lit(n_batches - 1))
    return df.withColumn("batch", batch.cast("bigint"))


def _sorted_counts(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    key = table.column("key").to_numpy()
    count = table.column("count").to_numpy().astype(np.int64)
    order = np.argsort(key, kind="stable")
    return key[order], count[order]


def _topk(df: DataFrame, k: int) -> list[tuple[int, int]]:
    rows = df.orderBy(F.col("count").desc(), F.col("key").asc()).limit(k).collect()
    return [(int(r["key"]), int(r["count"])) for r in rows]


def run_topk(
    spark: SparkSession,
    stream: DataFrame,
    strategy: Strategy,
    *,
    n_nodes: int,
    n_batches: int,
    tolerance: float,
    top_k: int,
    on_batch: object = None,
) -> TopkRun:
    """Replay ``stream`` (with a ``batch`` column) through ``strategy``; see module doc."""
    sc = spark.sparkContext
    reader = TaskMetricsReader(sc)
    run = TopkRun()
    per_tuple = getattr(strategy, "per_tuple", False)
    sender_states: dict[int, object] = {}
    for b in range(n_batches):
        started = time.perf_counter()
        group = f"balancebench-{strategy.name}-batch-{b}-{time.time_ns()}"
        table = strategy.routing_for(n_nodes)
        batch_df = stream.where(F.col("batch") == b).select("tuple_id", "key")
        routed_all = None
        if per_tuple:
            sc.setJobGroup(group + "-route", f"{strategy.name} batch {b}: per-sender routing")
            routed_all = with_per_tuple_node(
                batch_df, strategy, sender_states, n_nodes, int(strategy.settings["senders"])
            ).persist()
            for row in routed_all.where(F.col("tuple_id") < 0).select("sender", "state").collect():
                sender_states[int(row["sender"])] = pickle.loads(row["state"])
            with_node = routed_all.where(F.col("tuple_id") >= 0).select("tuple_id", "key", "node")
        else:
            with_node = with_storage_node(spark, batch_df, table)
        sc.setJobGroup(group, f"{strategy.name} batch {b}: route and count per node")
        routed = partition_by_node(with_node, n_nodes)
        partials_df = (
            routed.withColumn("pid", F.spark_partition_id())
            .groupBy("_surrogate", "pid", "node", "key")
            .count()
            .drop("_surrogate")
            .persist()
        )
        partials = partials_df.toArrow()
        stage = reader.shuffle_stage(group, n_nodes)

        node = partials.column("node").to_numpy().astype(np.int32)
        pid = partials.column("pid").to_numpy()
        if not np.array_equal(pid, node):
            raise RuntimeError(f"batch {b}: rows landed in a Spark partition other than their node")
        key = partials.column("key").to_numpy()
        count = partials.column("count").to_numpy().astype(np.int64)
        node_tuples = np.bincount(node, weights=count, minlength=n_nodes).astype(np.int64)
        if not np.array_equal(node_tuples, stage.records_read):
            raise RuntimeError(
                f"batch {b}: tuples per node {node_tuples.tolist()} differ from the rows "
                f"Spark's tasks read {stage.records_read.tolist()}"
            )

        sc.setJobGroup(group + "-merge", f"{strategy.name} batch {b}: merge partials, TOPK")
        merged_df = partials_df.groupBy("key").agg(F.sum("count").alias("count"))
        merged_key, merged_count = _sorted_counts(merged_df.toArrow())
        topk = _topk(merged_df, top_k)

        sc.setJobGroup(group + "-oracle", f"{strategy.name} batch {b}: oracle groupBy")
        reference_df = batch_df.groupBy("key").count()
        ref_key, ref_count = _sorted_counts(reference_df.toArrow())
        ref_topk = _topk(reference_df, top_k)
        oracle_passed = (
            np.array_equal(merged_key, ref_key)
            and np.array_equal(merged_count, ref_count)
            and topk == ref_topk
        )
        partials_df.unpersist()
        if routed_all is not None:
            routed_all.unpersist()
        result = BatchResult(
            batch=b,
            tuples=int(node_tuples.sum()),
            node_tuples=node_tuples,
            node_run_time_s=stage.run_time_s,
            routing_table_entries=len(table),
            topk=topk,
            oracle_passed=oracle_passed,
            wall_s=time.perf_counter() - started,
        )
        if oracle_passed and b < n_batches - 1:
            # The window holds every tuple it counted: state == load.
            loads = KeyLoads.from_counts(key, node, count.astype(np.float64))
            result.plan = strategy.plan(loads, n_nodes=n_nodes, tolerance=tolerance)
        run.batches.append(result)
        if callable(on_batch):
            on_batch(result)
        if not oracle_passed:
            raise OracleMismatch(
                f"batch {b}: {strategy.name} result differs from Spark's groupBy: "
                f"{len(merged_key)} vs {len(ref_key)} keys, "
                f"{int(merged_count.sum())} vs {int(ref_count.sum())} tuples, "
                f"top-{top_k} {topk[:3]}... vs {ref_topk[:3]}..."
            )
    return run
