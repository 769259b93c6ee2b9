"""Per-task metrics from Spark itself, read from the running application's REST API.

``statusTracker()`` has no task durations, so after each job we ask the UI's REST API
(``/api/v1/applications/<app>/stages/<id>/<attempt>/taskList``) for every task of the
stage that executed the per-node operator. Spark updates the API from its listener bus
shortly after a job returns, so the reader polls until every task has reported.

Fields used (Spark's own definitions): ``executorRunTime`` (ms the task ran on its
executor, deserialisation excluded), ``duration`` (ms from launch to finish), and
``shuffleReadMetrics.recordsRead`` (rows the task received from the shuffle).
"""

from __future__ import annotations

import json
import time
import urllib.request
from dataclasses import dataclass

import numpy as np
from pyspark import SparkContext

#: How long a stage of a finished job may be unknown to the REST API before it counts as
#: skipped (the listener bus delivers a completed stage within milliseconds here).
SKIPPED_GRACE_S = 2.0


@dataclass(frozen=True)
class StageTasks:
    """One row per partition (task index) of a stage."""

    stage_id: int
    run_time_s: np.ndarray
    duration_s: np.ndarray
    records_read: np.ndarray


class TaskMetricsReader:
    def __init__(self, sc: SparkContext, timeout_s: float = 60.0) -> None:
        if not sc.uiWebUrl:
            raise RuntimeError("Spark UI is disabled (spark.ui.enabled=false): no task metrics")
        self.sc = sc
        self.base = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
        self.timeout_s = timeout_s

    def _get(self, path: str) -> object:
        with urllib.request.urlopen(self.base + path, timeout=10) as resp:
            return json.load(resp)

    def shuffle_stage(self, job_group: str, n_tasks: int) -> StageTasks:
        """Metrics of the stage of ``job_group`` that read a shuffle with ``n_tasks`` tasks."""
        tracker = self.sc.statusTracker()
        deadline = time.monotonic() + self.timeout_s
        while True:
            stage_ids = sorted(
                {
                    sid
                    for job in tracker.getJobIdsForGroup(job_group)
                    for sid in (tracker.getJobInfo(job).stageIds if tracker.getJobInfo(job) else [])
                }
            )
            for sid in stage_ids:
                tasks = self._complete_stage(sid, n_tasks)
                if tasks is not None:
                    return tasks
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no complete shuffle-reading stage with {n_tasks} tasks in job group "
                    f"{job_group!r} (stages {stage_ids}) after {self.timeout_s}s"
                )
            time.sleep(0.05)

    def stage_tasks(self, stage_id: int, job_done: bool = True) -> list[dict] | None:
        """Every successful task of the stage's completed attempt (polled until the
        listener bus has delivered them); None for a skipped stage.

        A stage of a finished job that the REST API does not know after a short grace is
        a skipped one the UI store did not keep (it evicts stages without a completion
        time first once ``spark.ui.retainedStages`` is reached)."""
        started = time.monotonic()
        deadline = started + self.timeout_s
        attempts: list[dict] = []
        while True:
            try:
                attempts = self._get(f"/stages/{stage_id}")
            except OSError:
                attempts = []
            if any(a.get("status") == "SKIPPED" for a in attempts):
                return None
            if not attempts and job_done and time.monotonic() - started > SKIPPED_GRACE_S:
                return None
            for attempt in attempts:
                if attempt.get("status") != "COMPLETE":
                    continue
                n = attempt["numTasks"]
                tasks = self._get(
                    f"/stages/{stage_id}/{attempt['attemptId']}/taskList?length={10 * n + 100}"
                )
                done = {t["index"]: t for t in tasks if t.get("status") == "SUCCESS"}
                if len(done) == n:
                    return [done[i] for i in range(n)]
            if time.monotonic() > deadline:
                seen = [(a.get("status"), a.get("numTasks")) for a in attempts]
                raise TimeoutError(
                    f"stage {stage_id}: no complete task list after {self.timeout_s}s "
                    f"(REST attempts: {seen})"
                )
            time.sleep(0.05)

    def job_group_cpu_time_s(self, job_group: str) -> float:
        """Summed ``executorCpuTime`` (s) of every task of every executed stage of a
        finished job group (skipped stages count 0)."""
        tracker = self.sc.statusTracker()
        stage_ids = sorted(
            {
                sid
                for job in tracker.getJobIdsForGroup(job_group)
                for sid in (tracker.getJobInfo(job).stageIds if tracker.getJobInfo(job) else [])
            }
        )
        total = 0.0
        for sid in stage_ids:
            for t in self.stage_tasks(sid) or []:
                total += t["taskMetrics"]["executorCpuTime"] / 1e9
        return total

    def _complete_stage(self, stage_id: int, n_tasks: int) -> StageTasks | None:
        try:
            attempts = self._get(f"/stages/{stage_id}")
        except OSError:
            return None
        for attempt in attempts:
            if (
                attempt.get("status") != "COMPLETE"
                or attempt.get("numTasks") != n_tasks
                or attempt.get("shuffleReadRecords", 0) <= 0
            ):
                continue
            tasks = self._get(
                f"/stages/{stage_id}/{attempt['attemptId']}/taskList?length={10 * n_tasks + 100}"
            )
            done = {t["index"]: t for t in tasks if t.get("status") == "SUCCESS"}
            if len(done) != n_tasks:
                return None  # the listener bus has not delivered every task end yet
            rows = [done[i] for i in range(n_tasks)]
            return StageTasks(
                stage_id=stage_id,
                run_time_s=np.array([t["taskMetrics"]["executorRunTime"] for t in rows]) / 1e3,
                duration_s=np.array([t.get("duration", 0) for t in rows]) / 1e3,
                records_read=np.array(
                    [t["taskMetrics"]["shuffleReadMetrics"]["recordsRead"] for t in rows],
                    dtype=np.int64,
                ),
            )
        return None


@dataclass(frozen=True)
class NodeTimes:
    """Per node, summed over the node stages of some job groups."""

    #: executorRunTime (s): wall time the node's tasks ran.
    run_time_s: np.ndarray
    #: executorCpuTime (s): CPU time of the node's task threads.
    cpu_time_s: np.ndarray
    records_read: np.ndarray
    stages: int


def node_times(reader: TaskMetricsReader, groups: list[str], n_nodes: int) -> NodeTimes:
    """Task metrics of the *node stages* of ``groups``, summed per node.

    A node stage runs one task per node: its tasks read node-partitioned data (partition
    ``i`` = node ``i``; a union of such inputs has ``k * n`` tasks, task ``j`` on node
    ``j mod n``) and it writes no shuffle (a stage that writes a shuffle is upstream of the
    nodes: reading input, routing). Skipped stages (already computed) are ignored.
    """
    run = np.zeros(n_nodes)
    cpu = np.zeros(n_nodes)
    read = np.zeros(n_nodes, dtype=np.int64)
    stages = 0
    tracker = reader.sc.statusTracker()
    for group in groups:
        stage_ids = sorted(
            {
                sid
                for job in tracker.getJobIdsForGroup(group)
                for sid in (tracker.getJobInfo(job).stageIds if tracker.getJobInfo(job) else [])
            }
        )
        for sid in stage_ids:
            tasks = reader.stage_tasks(sid)
            if tasks is None or len(tasks) % n_nodes:
                continue
            if any(t["taskMetrics"]["shuffleWriteMetrics"]["recordsWritten"] for t in tasks):
                continue
            stages += 1
            for t in tasks:
                node = t["index"] % n_nodes
                metrics = t["taskMetrics"]
                run[node] += metrics["executorRunTime"] / 1e3
                cpu[node] += metrics["executorCpuTime"] / 1e9
                read[node] += metrics["shuffleReadMetrics"]["recordsRead"]
    return NodeTimes(run, cpu, read, stages)
