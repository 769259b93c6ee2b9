"""Per-task metrics from Spark itself, read from the running application's REST API.

``statusTracker()`` has no task durations, so after each job group we ask the UI's REST
API (``/api/v1/applications/<app>/stages/<id>/<attempt>/taskList``) for every task of its
stages and charge them by the group's role (:func:`group_work`). Spark updates the API from
its listener bus shortly after a job returns, so the reader polls until every task has
reported.

Fields used (Spark's own definitions): ``executorCpuTime`` (ns of CPU of the task's
thread), ``executorRunTime`` (ms the task ran on its executor, deserialisation excluded),
``shuffleReadMetrics.recordsRead`` (rows the task received from the shuffle),
``inputMetrics.recordsRead`` (rows read from cached or checkpointed blocks) and the shuffle
rows and bytes written (the senders' output and a migration's transfer; the bytes received
are derived from its rows, ``cost_model.attribute_migration``)."""

from __future__ import annotations

import datetime
import json
import time
import urllib.request
from dataclasses import dataclass, field

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
        #: The cores the application's tasks share (local[*]: the machine's).
        self.cores = max(1, int(sc.defaultParallelism))
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
            for cpu in task_cpu_s(self.stage_tasks(sid) or []).tolist():
                total += cpu
        return total


#: Roles of a job group (what its tasks' work is charged as, ``metric_definitions`` cost model).
#: ``route``: stages that write a shuffle (or do not run one task per node) are the
#: senders' routing work; the node-partitioned stages that read it are node work.
#: ``node``: every node-partitioned stage is node work. The engine's batch job is read
#: by its structure instead (:func:`batch_work`).
ROUTE, NODE = "route", "node"


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
    #: Summed executorCpuTime (s) of the routing tasks (the senders, and auxiliary jobs
    #: such as broadcasting a routing table). A Python worker's CPU is added by the
    #: engine, measured inside the worker (``routers.PerTupleRouter``).
    route_work_s: float = 0.0
    stages: int = 0
    #: Stages Spark ran more than once (a lost executor's partitions rerun): their
    #: records read may count a partition twice across attempts.
    retried_stages: int = 0
    #: Rows read from cached or checkpointed blocks by the node's tasks (its state).
    node_input_records: np.ndarray = None  # type: ignore[assignment]
    #: Per node stage (in order), per node: executorCpuTime (s) and shuffle rows read.
    stage_cpu_s: list[np.ndarray] = field(default_factory=list)
    stage_records_read: list[np.ndarray] = field(default_factory=list)
    #: A migration's source side in the exchange's map stage (:func:`batch_work`): per
    #: node, the CPU of the tasks that read its state and emit the rows that move, the
    #: rows and bytes they write into the exchange.
    extract_cpu_s: np.ndarray = None  # type: ignore[assignment]
    extract_rows: np.ndarray = None  # type: ignore[assignment]
    extract_bytes: np.ndarray = None  # type: ignore[assignment]
    #: The senders' tasks in the same map stage: CPU (s) and rows written (the cost of
    #: putting one row into the exchange).
    sender_cpu_s: float = 0.0
    sender_rows: int = 0
    #: Bytes the senders wrote into the exchange (the batch's tuples crossing links).
    sender_bytes: float = 0.0
    #: Executed sender tasks (for the calibration's fixed cost per sender).
    sender_tasks: int = 0
    #: The cores the tasks share, and a lower bound on how long the measured stages'
    #: tasks waited for one (:func:`core_wait_s`, summed over the stages).
    cores: int = 1
    core_wait_s: float = 0.0
    #: Summed ``jvmGcTime`` (s) of the node stages' tasks: the JVM's garbage collection
    #: while they ran (wall; shared by the tasks running at once). Noise diagnosis only.
    node_gc_s: float = 0.0
    #: Wall seconds of the batch's main job, from its stages' tasks (first launch to last
    #: finish, per stage, summed over the stages): the routing stages and the node
    #: stages. What the cost model is checked against (``cost_model_check``), never charged.
    route_wall_s: float = 0.0
    node_wall_s: float = 0.0
    #: The same stages' CPU on the executors that ran them (``cost_model_check``): per stage the
    #: busiest executor's summed executorCpuTime, summed over the stages, seconds. Where
    #: each executor has a core of its own and a stage ends when its slowest executor does,
    #: what the stages take in CPU, whatever else shares the machine's cores.
    route_executor_cpu_s: float = 0.0
    node_executor_cpu_s: float = 0.0

    def __post_init__(self) -> None:
        n = self.n_nodes
        for name in (
            "node_cpu_s",
            "node_run_s",
            "node_sent_bytes",
            "node_received_bytes",
            "extract_cpu_s",
            "extract_bytes",
        ):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros(n))
        for name in ("node_records_read", "node_input_records", "extract_rows"):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros(n, dtype=np.int64))

    @property
    def send_cpu_per_row_s(self) -> float:
        """CPU (s) the senders spent per row they wrote into the exchange (0: none)."""
        return self.sender_cpu_s / self.sender_rows if self.sender_rows else 0.0


def task_cpu_s(tasks: list[dict]) -> np.ndarray:
    """The tasks' ``executorCpuTime`` (s)."""
    return np.array([t["taskMetrics"]["executorCpuTime"] for t in tasks]) / 1e9


def core_wait_s(cpu_s: np.ndarray, cores: int) -> float:
    """A lower bound on how long one stage's tasks waited for a core (s): their CPU time
    (``cpu_s``: per task, or per node for a node stage) spread over the ``cores`` the
    application has, minus the longest. On a cluster with a core per node the nodes run
    side by side and the stage takes its longest; here ``n`` nodes' tasks queue for a few
    cores. Neither charged to a strategy nor the harness's own work: the part of
    ``harness_s`` that more cores would remove."""
    if len(cpu_s) == 0:
        return 0.0
    return max(0.0, float(np.sum(cpu_s)) / max(1, cores) - float(np.max(cpu_s)))


def add_route_stage(work: GroupWork, cpu_s: np.ndarray) -> None:
    """One routing stage's task CPU (s) into ``work``: charged as routing work, and its
    tasks' wait for a core."""
    work.route_work_s += float(np.sum(cpu_s))
    work.core_wait_s += core_wait_s(cpu_s, work.cores)


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
    work = GroupWork(n_nodes, cores=reader.cores)
    for sid in _group_stage_ids(reader, group):
        tasks = reader.stage_tasks(sid)
        if not tasks:
            continue
        if any(t.get("stageAttempts", 1) > 1 for t in tasks):
            work.retried_stages += 1
        metrics = [t["taskMetrics"] for t in tasks]
        cpu = task_cpu_s(tasks)
        writes = any(m["shuffleWriteMetrics"]["recordsWritten"] for m in metrics)
        if role == ROUTE and (writes or len(tasks) % n_nodes):
            add_route_stage(work, cpu)
            continue
        if len(tasks) % n_nodes:
            continue  # not one task per node: bookkeeping, not node work
        add_node_stage(work, tasks)
    return work


def add_node_stage(work: GroupWork, tasks: list[dict], nodes: np.ndarray | None = None) -> None:
    """One node stage's tasks into ``work``: every runner's node work is summed here.
    Task ``j`` runs on node ``partition j mod n``, or on ``nodes[j]`` when the caller
    places them (an adaptive plan's tasks are not the nodes' partitions)."""
    n_nodes = work.n_nodes
    metrics = [t["taskMetrics"] for t in tasks]
    cpu = task_cpu_s(tasks)
    run = np.array([m["executorRunTime"] for m in metrics]) / 1e3
    work.stages += 1
    if nodes is None:
        nodes = np.array([int(t.get("partitionId", t["index"])) for t in tasks]) % n_nodes
    np.add.at(work.node_cpu_s, nodes, cpu)
    np.add.at(work.node_run_s, nodes, run)
    np.add.at(
        work.node_records_read, nodes, [m["shuffleReadMetrics"]["recordsRead"] for m in metrics]
    )
    np.add.at(work.node_input_records, nodes, [m["inputMetrics"]["recordsRead"] for m in metrics])
    np.add.at(work.node_received_bytes, nodes, [_shuffle_bytes_read(m) for m in metrics])
    work.node_gc_s += sum(m.get("jvmGcTime", 0) for m in metrics) / 1e3
    stage = np.zeros(n_nodes)
    np.add.at(stage, nodes, cpu)
    work.stage_cpu_s.append(stage)
    # Per node: a node runs its own tasks one after another, on a cluster as here.
    work.core_wait_s += core_wait_s(stage, work.cores)
    read = np.zeros(n_nodes, dtype=np.int64)
    np.add.at(read, nodes, [m["shuffleReadMetrics"]["recordsRead"] for m in metrics])
    work.stage_records_read.append(read)


def busiest_executor_cpu_s(tasks: list[dict]) -> float:
    """The largest summed executorCpuTime (s) of one executor's tasks in a stage."""
    by: dict[str, float] = {}
    for task, cpu in zip(tasks, task_cpu_s(tasks).tolist(), strict=True):
        executor = str(task.get("executorId", "driver"))
        by[executor] = by.get(executor, 0.0) + cpu
    return max(by.values(), default=0.0)


def stage_wall_s(tasks: list[dict]) -> float:
    """Wall seconds from the stage's first task launch to its last task's end."""
    starts = [_rest_time_s(t["launchTime"]) for t in tasks]
    ends = [start + t.get("duration", 0) / 1e3 for start, t in zip(starts, tasks, strict=True)]
    return max(ends) - min(starts) if tasks else 0.0


def _rest_time_s(text: str) -> float:
    """Seconds since the epoch of a REST API time (``2026-11-29T03:00:00.123GMT``)."""
    return (
        datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%Z")
        .replace(tzinfo=datetime.UTC)
        .timestamp()
    )


def _shuffle_bytes_read(metrics: dict) -> float:
    """Bytes a task read from the exchange: local and remote blocks alike (on a cluster
    every node's blocks but its own cross a link; here every node is on one machine)."""
    read = metrics["shuffleReadMetrics"]
    return float(read.get("localBytesRead", 0) + read.get("remoteBytesRead", 0))


def _job_stage_tasks(reader: TaskMetricsReader, job: int) -> list[list[dict]]:
    """Task lists of a finished job's executed stages, in stage-id order (a parent stage
    is created, so numbered, before its children); skipped stages are left out."""
    info = reader.sc.statusTracker().getJobInfo(job)
    out = []
    for sid in sorted(info.stageIds if info else []):
        tasks = reader.stage_tasks(sid)
        if tasks:
            out.append(tasks)
    return out


def batch_work(
    reader: TaskMetricsReader, group: str, n_nodes: int, node_stages: int, route_partitions: int
) -> GroupWork:
    """Task metrics of the engine's batch job group, read by the job's structure.

    The batch's main job ends in ``node_stages`` stages of one task per node (task ``j``
    = node ``j mod n``, should Spark run several per node): the node stages (receive,
    operator and state update fused; an aggregation's merge at the keys' home nodes).
    Every stage before them is routing: the senders, and any stateless exchange a
    strategy adds. The last routing stage
    writes the exchange the node stages read; its partitions ``>= route_partitions``
    are not senders but the state of the nodes a migration moves rows off (partition
    ``route_partitions + j`` reads node ``j mod n``'s state): their CPU, rows and bytes
    are the migration's source side (``extract_*``). Other jobs of the group
    (broadcasting a routing table or a migration's segments, a layout's first look at
    the batch) are routing work, as in :func:`group_work`.
    """
    work = GroupWork(n_nodes, cores=reader.cores)
    jobs = sorted(reader.sc.statusTracker().getJobIdsForGroup(group))
    staged = [(job, _job_stage_tasks(reader, job)) for job in jobs]

    def is_main(stages: list[list[dict]]) -> bool:
        tail = stages[-node_stages:] if len(stages) > node_stages else []
        return bool(tail) and all(len(t) % n_nodes == 0 for t in tail)

    main = max((job for job, stages in staged if is_main(stages)), default=None)
    for job, stages in staged:
        for tasks in stages:
            if any(t.get("stageAttempts", 1) > 1 for t in tasks):
                work.retried_stages += 1
        if job != main:
            for tasks in stages:
                add_route_stage(work, task_cpu_s(tasks))
            continue
        routing, nodes = stages[:-node_stages], stages[-node_stages:]
        work.route_wall_s += sum(stage_wall_s(tasks) for tasks in routing)
        work.node_wall_s += sum(stage_wall_s(tasks) for tasks in nodes)
        work.route_executor_cpu_s += sum(busiest_executor_cpu_s(tasks) for tasks in routing)
        work.node_executor_cpu_s += sum(busiest_executor_cpu_s(tasks) for tasks in nodes)
        for i, tasks in enumerate(routing):
            # The whole stage's wait (its senders' and a migration's extract tasks alike).
            cpu_s = task_cpu_s(tasks)
            work.core_wait_s += core_wait_s(cpu_s, work.cores)
            last = i == len(routing) - 1
            for t, cpu in zip(tasks, cpu_s.tolist(), strict=True):
                m = t["taskMetrics"]
                part = int(t.get("partitionId", t["index"]))
                if last and part >= route_partitions:
                    node = (part - route_partitions) % n_nodes
                    write = m["shuffleWriteMetrics"]
                    work.extract_cpu_s[node] += cpu
                    work.extract_rows[node] += write["recordsWritten"]
                    work.extract_bytes[node] += write["bytesWritten"]
                    continue
                work.route_work_s += cpu
                if last:
                    work.sender_cpu_s += cpu
                    work.sender_rows += m["shuffleWriteMetrics"]["recordsWritten"]
                    work.sender_bytes += m["shuffleWriteMetrics"]["bytesWritten"]
                    work.sender_tasks += 1
        for tasks in nodes:
            add_node_stage(work, tasks)
    return work
