"""Per-task metrics from Spark itself, read from the running application's REST API.

``statusTracker()`` has no task durations, so after each job group we ask the UI's REST
API (``/api/v1/applications/<app>/stages/<id>/<attempt>/taskList``) for every task of its
stages and charge them by the group's role (:func:`group_work`). Spark updates the API from
its listener bus shortly after a job returns, so the reader polls until every task has
reported.

Fields used (Spark's own definitions): ``executorCpuTime`` (ns of CPU of the task's
thread), ``executorRunTime`` (ms the task ran on its executor, deserialisation excluded),
``shuffleReadMetrics.recordsRead`` (rows the task received from the shuffle) and the
shuffle bytes written and read (a migration's transfer)."""

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
            if (
                not attempts
                and job_done
                and time.monotonic() - started > SKIPPED_GRACE_S
                and not self._ran(stage_id)
            ):
                return None
            tasks = self._completed(stage_id, attempts)
            if tasks is not None:
                return tasks
            if time.monotonic() > deadline:
                seen = [(a.get("status"), a.get("numTasks")) for a in attempts]
                raise TimeoutError(
                    f"stage {stage_id}: no complete task list after {self.timeout_s}s "
                    f"(REST attempts: {seen})"
                )
            time.sleep(0.05)

    def _completed(self, stage_id: int, attempts: list[dict]) -> list[dict] | None:
        """One successful task per partition, once an attempt is complete and every
        complete attempt has reported all its tasks; None until then. Without a fault
        a stage has one attempt. After a lost executor Spark reruns only the lost
        partitions in a new attempt: a partition's latest success counts (work lost
        with the executor is not the strategy's), and ``partitionId`` is the node
        (``index`` is the task's place within its attempt)."""
        if not any(a.get("status") == "COMPLETE" for a in attempts):
            return None
        by_partition: dict[int, dict] = {}
        for attempt in sorted(attempts, key=lambda a: a["attemptId"]):
            if attempt.get("status") not in ("COMPLETE", "FAILED"):
                return None  # still running
            n = attempt["numTasks"]
            tasks = self._get(
                f"/stages/{stage_id}/{attempt['attemptId']}/taskList?length={10 * n + 100}"
            )
            done = [t for t in tasks if t.get("status") == "SUCCESS"]
            if attempt["status"] == "COMPLETE" and len({t["index"] for t in done}) < n:
                return None  # the listener bus has not delivered every task yet
            for t in sorted(done, key=lambda t: t["taskId"]):
                t["stageAttempts"] = len(attempts)
                by_partition[int(t.get("partitionId", t["index"]))] = t
        return [by_partition[p] for p in sorted(by_partition)]

    def _ran(self, stage_id: int) -> bool:
        """The driver's status tracker saw tasks of the stage complete: it ran, so the
        REST API will report it (wait for it rather than call it skipped)."""
        info = self.sc.statusTracker().getStageInfo(stage_id)
        return info is not None and info.numCompletedTasks > 0

    def job_group_cpu_time_s(self, job_group: str) -> float:
        """Summed ``executorCpuTime`` (s) of every task of every executed stage of a
        finished job group (skipped stages count 0)."""
        total = 0.0
        for sid in _group_stage_ids(self, job_group):
            for t in self.stage_tasks(sid) or []:
                total += t["taskMetrics"]["executorCpuTime"] / 1e9
        return total


#: Roles of a job group (what its tasks' work is charged as, ``metrics`` cost model).
#: ``route``: stages that write a shuffle (or do not run one task per node) are the
#: senders' routing work; the node-partitioned stages that read it are node work.
#: ``route_python``: every stage is routing work, measured by executorRunTime (the JVM
#: thread's CPU time misses the Python worker it waits for).
#: ``node``: every node-partitioned stage is node work. ``migrate``: the same, plus the
#: bytes each node's tasks write (send) and read (receive) through the shuffle.
ROUTE, ROUTE_PYTHON, NODE, MIGRATE = "route", "route_python", "node", "migrate"


@dataclass
class GroupWork:
    """Measured work of some job groups: per node (partition ``i`` = node ``i``; a stage
    of ``k * n`` tasks runs task ``j`` on node ``j mod n``) and at the senders."""

    n_nodes: int
    #: executorCpuTime (s) of the node's tasks: the work the node did.
    node_cpu_s: np.ndarray = None  # type: ignore[assignment]
    #: executorRunTime (s): wall time the node's tasks ran (waiting for a core included).
    node_run_s: np.ndarray = None  # type: ignore[assignment]
    #: Shuffle records the node's tasks read.
    node_records_read: np.ndarray = None  # type: ignore[assignment]
    node_sent_bytes: np.ndarray = None  # type: ignore[assignment]
    node_received_bytes: np.ndarray = None  # type: ignore[assignment]
    #: Summed work (s) of the routing tasks (CPU; run time for Python stages).
    route_work_s: float = 0.0
    stages: int = 0
    #: Stages Spark ran more than once (a lost executor's partitions rerun): their
    #: records read may count a partition twice across attempts.
    retried_stages: int = 0

    def __post_init__(self) -> None:
        n = self.n_nodes
        for name in ("node_cpu_s", "node_run_s", "node_sent_bytes", "node_received_bytes"):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros(n))
        if self.node_records_read is None:
            self.node_records_read = np.zeros(n, dtype=np.int64)


def _group_stage_ids(reader: TaskMetricsReader, group: str) -> list[int]:
    tracker = reader.sc.statusTracker()
    return sorted(
        {
            sid
            for job in tracker.getJobIdsForGroup(group)
            for sid in (tracker.getJobInfo(job).stageIds if tracker.getJobInfo(job) else [])
        }
    )


def group_work(reader: TaskMetricsReader, group: str, role: str, n_nodes: int) -> GroupWork:
    """Task metrics of one finished job group, charged by its ``role`` (see above).
    Skipped stages (already computed) count nothing."""
    work = GroupWork(n_nodes)
    for sid in _group_stage_ids(reader, group):
        tasks = reader.stage_tasks(sid)
        if not tasks:
            continue
        if any(t.get("stageAttempts", 1) > 1 for t in tasks):
            work.retried_stages += 1
        metrics = [t["taskMetrics"] for t in tasks]
        cpu = np.array([m["executorCpuTime"] for m in metrics]) / 1e9
        run = np.array([m["executorRunTime"] for m in metrics]) / 1e3
        writes = any(m["shuffleWriteMetrics"]["recordsWritten"] for m in metrics)
        if role == ROUTE_PYTHON:
            work.route_work_s += float(run.sum())
            continue
        if role == ROUTE and (writes or len(tasks) % n_nodes):
            work.route_work_s += float(cpu.sum())
            continue
        if len(tasks) % n_nodes:
            continue  # not one task per node: bookkeeping, not node work
        work.stages += 1
        nodes = np.array([int(t.get("partitionId", t["index"])) for t in tasks]) % n_nodes
        np.add.at(work.node_cpu_s, nodes, cpu)
        np.add.at(work.node_run_s, nodes, run)
        read = [m["shuffleReadMetrics"] for m in metrics]
        np.add.at(work.node_records_read, nodes, [r["recordsRead"] for r in read])
        if role == MIGRATE:
            np.add.at(
                work.node_sent_bytes,
                nodes,
                [m["shuffleWriteMetrics"]["bytesWritten"] for m in metrics],
            )
            np.add.at(
                work.node_received_bytes,
                nodes,
                [r.get("localBytesRead", 0) + r.get("remoteBytesRead", 0) for r in read],
            )
    return work
