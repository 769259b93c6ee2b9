"""Spark-native baselines: what a Spark user runs instead of a load-balancing strategy.

Each baseline replays the same micro-batches as the engine (``replay_stream.load_replay``),
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
operator job group, every stage that reads a shuffle plus the final stage of the action
(the batch queries add the node stage of the batch's ingest job, ``_ingest``);
stages that only scan and write a shuffle (the "routing" side) are the senders' routing
work (``route_s``), as in the engine; broadcast-collect jobs are neither.

The streaming peer is in ``spark.native_streaming``, the batch queries per micro-batch
(``spark_aqe``, ``spark_salting``) in ``spark.native_batch_queries``; this module holds
what they share: :class:`Baseline` (measurement per node, the oracle, the batch result).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from pyspark.sql import DataFrame, SparkSession

from balancebench.core.cost_model import CORE_WAIT
from balancebench.spark.engine_config import EngineConfig
from balancebench.spark.loop import BatchResult, MicroBatchLoop, PhaseClock
from balancebench.spark.oracle import check_batch
from balancebench.spark.rest_task_metrics import (
    GroupWork,
    TaskMetricsReader,
    add_node_stage,
    add_route_stage,
    task_cpu_s,
)

#: Columns of the replay stream (``replay_stream.load_replay``).
COLUMNS = ["side", "tuple_id", "key", "event_time_s", "payload", "batch"]


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


def sql_metric(node: dict, name: str) -> int:
    for m in node.get("metrics", []):
        if m.get("name") == name:
            text = str(m.get("value", "0")).split("\n")[-1].split(" ")[0].replace(",", "")
            try:
                return int(float(text))
            except ValueError:
                return 0
    return 0


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


class Baseline(MicroBatchLoop):
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
        # The node work is summed like the engine's (``rest_task_metrics.add_node_stage``);
        # what differs is which stages are the nodes': Spark plans these queries, so
        # their stages are told apart by their shuffles, not by a job the runner built.
        work = GroupWork(n, cores=self.reader.cores)
        info = {
            "stages_measured": 0.0,
            "tasks_measured": 0.0,
            "broadcast_rows": 0.0,
            "route_work_s": 0.0,
        }
        jobs = sorted(self.sc.statusTracker().getJobIdsForGroup(group))
        if not jobs:
            return work.node_run_s, work.node_cpu_s, work.node_records_read, info
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
                cpu_s = task_cpu_s(tasks)
                if shuffle.sum() == 0 and not final:
                    # Scans the input and writes a shuffle: the senders' routing.
                    add_route_stage(work, cpu_s)
                    continue
                if len(tasks) % n == 0 and not (self.adaptive and shuffle.sum() > 0):
                    slots = None  # task j on node partition j mod n
                elif self.adaptive:
                    slots = _list_schedule(cpu_s if cpu_s.any() else run_s, n)
                else:
                    raise RuntimeError(
                        f"{self.name}: stage {sid} has {len(tasks)} tasks, not a multiple of "
                        f"the {n} nodes (AQE must be off)"
                    )
                add_node_stage(work, tasks, slots)
                info["stages_measured"] += 1
                info["tasks_measured"] += len(tasks)
        info["route_work_s"] = work.route_work_s
        info[CORE_WAIT] = work.core_wait_s
        # Rows a node's tasks read: the shuffle's, and the kept tuples a stage scans.
        received = work.node_records_read + work.node_input_records
        if self.adaptive:
            root = [t for t in last_tags if "-execution-root-id-" in t]
            if root:
                nodes = self.rest.sql_nodes(int(root[0].rsplit("-", 1)[1]))
                bcast = sum(
                    sql_metric(x, "number of output rows")
                    for x in nodes
                    if x.get("nodeName") == "BroadcastExchange"
                )
                reads = [x for x in nodes if x.get("nodeName") == "AQEShuffleRead"]
                info["broadcast_rows"] = float(bcast)
                info["broadcast_exchanges"] = float(
                    sum(x.get("nodeName") == "BroadcastExchange" for x in nodes)
                )
                info["aqe_skewed_partitions"] = float(
                    sum(sql_metric(x, "number of skewed partitions") for x in reads)
                )
                info["aqe_skew_splits"] = float(
                    sum(sql_metric(x, "number of skewed partition splits") for x in reads)
                )
                info["aqe_coalesced_partitions"] = float(
                    sum(sql_metric(x, "number of coalesced partitions") for x in reads)
                )
                # Every node (executor) receives a broadcast side whole.
                received += bcast
        return work.node_run_s, work.node_cpu_s, received, info

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
