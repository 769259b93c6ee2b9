"""The one micro-batch loop every runner uses (engine routers, join architectures,
Spark-native baselines), so every strategy is measured and charged the same way.

A runner subclasses :class:`MicroBatchLoop` and implements :meth:`MicroBatchLoop.batch`:
run batch ``b`` in Spark jobs, each under a job group named by :meth:`group`, and
return a :class:`BatchResult`, with the oracle's verdict on the batch's answer
(``oracle.check_batch``, which the runner calls: only it holds the answer). The loop owns
everything around it: the Spark SQL settings for the run (set, then restored), the phase
clock (driver wall per phase, where the harness's time goes), the callback, and the
failure on a mismatch. Every runner's results become the cost model's input in one place
(``BatchResult.costs``) and are charged by one function
(``balancebench.core.cost_model.clock``).
"""

from __future__ import annotations

import shutil
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pyspark.sql import DataFrame, SparkSession

from balancebench.core.cost_model import (
    CORE_WAIT,
    DEFAULT_BANDWIDTH_MB_PER_S,
    BatchCosts,
    MigrationWork,
)
from balancebench.core.loads import imbalance
from balancebench.spark.replay_stream import batch_frame, kept_with
from balancebench.spark.rest_task_metrics import GroupWork, TaskMetricsReader, group_work
from balancebench.state.environment import setting
from balancebench.state.paths import local_dir
from balancebench.strategies import MigrationPlan


def checkpoint_root() -> Path:
    """Where runs with ``reliable_state`` write their checkpoints: every executor must
    see it (on one machine any local folder; on a cluster of several machines a shared
    file system, ``BALANCEBENCH_CHECKPOINT_DIR``)."""
    return setting("BALANCEBENCH_CHECKPOINT_DIR") or local_dir() / "checkpoints"


class OracleMismatch(AssertionError):
    """The balanced result differs from the plain Spark computation."""


@dataclass
class BatchResult:
    """What one micro-batch produced and what it cost, as measured."""

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
    #: Driver wall time of the whole batch, its plan and migration included (s).
    wall_s: float = 0.0
    answer: Any = None
    plan: MigrationPlan | None = None
    #: State tuples moved inside this batch's exchange (the plan made after the
    #: previous batch), counted by Spark.
    migrated_tuples: float = 0.0
    extra: dict[str, float] = field(default_factory=dict)
    #: Summed executorCpuTime of each node's tasks in the batch's node stages (s): the
    #: work the node did. None when an executor could not measure it (then wall is used).
    node_cpu_time_s: np.ndarray | None = None
    #: Summed work of the routing-stage tasks (s) and the senders that share it.
    route_work_s: float = 0.0
    senders: int = 1
    #: The migration carried out inside this batch's exchange, as charged per node.
    migration: MigrationWork | None = None
    #: The runner's fixed node cost per node and batch (s; the engine's calibration),
    #: None for a runner that does not measure it.
    node_fixed_s: float | None = None
    #: Per node: bytes read from the exchange for the batch's tuples (a migration's rows
    #: apart), and the bytes the senders wrote for them; None / 0: not measured.
    received_bytes: np.ndarray | None = None
    sent_bytes: float = 0.0

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

    def costs(self, bandwidth_mb_per_s: float | None = DEFAULT_BANDWIDTH_MB_PER_S) -> BatchCosts:
        """The batch as the cost model's input (``cost_model.BatchCosts``)."""
        m = self.migration
        empty = np.zeros(0)
        return BatchCosts(
            batch=self.batch,
            input_tuples=self.input_tuples,
            node_work_s=self.node_work_s,
            route_work_s=self.route_work_s,
            senders=self.senders,
            plan_s=self.plan.plan_time_ms / 1e3 if self.plan is not None else 0.0,
            migration_work_s=m.work_s if m is not None else empty,
            migration_sent_bytes=m.sent_bytes if m is not None else empty,
            migration_received_bytes=m.received_bytes if m is not None else empty,
            driver_wall_s=self.wall_s,
            bandwidth_mb_per_s=bandwidth_mb_per_s,
            core_wait_s=self.extra.get(CORE_WAIT, 0.0),
            received_bytes=self.received_bytes if self.received_bytes is not None else empty,
            sent_bytes=self.sent_bytes,
        )


class PhaseClock:
    """Driver wall time per phase of a batch (``phase_<name>_s``). ``hook(name)`` runs
    after each phase is recorded (tests slow the harness with it)."""

    def __init__(self, hook: Callable[[str], None] | None = None) -> None:
        self.hook = hook
        self.started = self._clock = time.perf_counter()
        self.phases: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        key = f"phase_{name}_s"
        self.phases[key] = self.phases.get(key, 0.0) + now - self._clock
        self._clock = now
        if self.hook is not None:
            self.hook(name)

    @property
    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started


def release(df: DataFrame) -> None:
    """Free what holds ``df``'s rows: its cache entry, or the blocks of a
    ``localCheckpoint`` (``DataFrame.unpersist`` does not reach those: the checkpointed
    RDD under the plan keeps them until the application ends). A reliable checkpoint's
    files stay until the run's checkpoint folder is removed (``MicroBatchLoop.run``)."""
    plan = df._jdf.queryExecution().analyzed()
    if plan.getClass().getName().endswith(".LogicalRDD"):
        plan.rdd().unpersist(False)
    else:
        df.unpersist()


@contextmanager
def session_conf(spark: SparkSession, conf: dict[str, str]) -> Iterator[None]:
    """Set Spark SQL settings for the block and restore the previous values after it."""
    saved = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


class MicroBatchLoop(ABC):
    """Replays ``config.n_batches`` micro-batches of ``stream``; see the module docstring."""

    def __init__(
        self,
        spark: SparkSession,
        stream: DataFrame,
        config: Any,
        name: str,
        on_batch: Callable[[BatchResult], None] | None = None,
        harness_hook: Callable[[str], None] | None = None,
    ) -> None:
        self.spark = spark
        self.sc = spark.sparkContext
        self.stream = stream
        self.config = config
        self.name = name
        self.on_batch = on_batch
        self.harness_hook = harness_hook
        self.n = config.n_nodes
        self.reader = TaskMetricsReader(self.sc)
        # A property of the loaded stream, so counted once for all the runs on it (a Spark
        # job and a plan per run before: 0.2-0.6 s of each run's wall).
        layout = kept_with(stream, "layout")
        if not layout:  # both or neither: a failure here leaves nothing half-kept
            rows = stream.groupBy("batch", "side").count().collect()
            layout.update(
                counts={(int(r["batch"]), str(r["side"])): int(r["count"]) for r in rows},
                senders=max(1, batch_frame(stream, 0).rdd.getNumPartitions()),
            )
        #: Senders of the routing stage: the partitions of a batch of the replayed stream.
        self.senders: int = layout["senders"]
        #: Input tuples per (batch, side), counted once per loaded stream.
        self.counts: dict[tuple[int, str], int] = layout["counts"]

    def batch_tuples(self, b: int) -> int:
        return sum(c for (batch, _), c in self.counts.items() if batch == b)

    def conf(self) -> dict[str, str]:
        """Spark SQL settings while the runner runs."""
        return {}

    def start(self) -> None:
        """Before the first batch."""
        return None

    def close(self) -> None:
        """After the last batch (also on failure)."""
        return None

    @abstractmethod
    def batch(self, b: int, clock: PhaseClock) -> BatchResult:
        """Run batch ``b`` (its oracle check, plan and migration included)."""

    @property
    def reliable_state(self) -> bool:
        return bool(getattr(self.config, "reliable_state", False))

    def keep(self, df: DataFrame) -> DataFrame:
        """Materialise rows that later jobs read (cross-batch state, a batch's answer) and
        cut their lineage. ``localCheckpoint``: blocks in the executors' memory, lost with
        their executor. With ``reliable_state``: ``checkpoint``, files in the run's
        checkpoint folder that survive a lost executor (Spark re-reads them); the files
        are written by the node tasks that computed the rows, so the cost is node work."""
        if self.reliable_state:
            return df.checkpoint(eager=True)
        return df.localCheckpoint(eager=True)

    @contextmanager
    def _checkpoint_folder(self) -> Iterator[None]:
        """The run's reliable checkpoints in a folder of their own, removed afterwards."""
        if not self.reliable_state:
            yield
            return
        folder = checkpoint_root() / f"{self.sc.applicationId}-{self.name}-{time.time_ns()}"
        folder.mkdir(parents=True, exist_ok=True)
        self.sc.setCheckpointDir(str(folder))
        try:
            yield
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def run(self) -> list[BatchResult]:
        with session_conf(self.spark, self.conf()), self._checkpoint_folder():
            self.start()
            try:
                return [self._one(b) for b in range(self.config.n_batches)]
            finally:
                self.close()

    def _one(self, b: int) -> BatchResult:
        clock = PhaseClock(self.harness_hook)
        result = self.batch(b, clock)
        result.wall_s = clock.elapsed_s
        result.extra.update(clock.phases)
        if self.on_batch is not None:
            self.on_batch(result)
        if not result.oracle_passed:
            raise OracleMismatch(
                f"batch {b}: {self.name} on {self.config.workload.name} differs from plain "
                f"Spark SQL: {result.answer}"
            )
        return result

    def group(self, b: int, phase: str) -> str:
        """Start a job group for the batch's phase; Spark jobs until the next call run in it."""
        group = f"balancebench-{self.name}-b{b}-{phase}-{time.time_ns()}"
        self.sc.setJobGroup(group, f"{self.name} batch {b}: {phase}")
        return group

    def work(self, group: str, role: str) -> GroupWork:
        """Measured work of a finished job group (``rest_task_metrics.group_work``)."""
        return group_work(self.reader, group, role, self.n)
