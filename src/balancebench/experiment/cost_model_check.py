"""``balancebench check-model``: the cost model against nodes that run on executors of
their own.

Every figure this project reports is the cost model's charge (``cost_model.BatchCosts``):
the routing CPU per sender plus the slowest node's CPU, measured on emulated nodes. This
check runs a cell where each sender and each node is on an executor of its own
(``n_nodes`` = ``n_senders`` = the executors' cores: here ``local-cluster`` with 2
executors of 1 core, on a user's cluster its workers) and compares, per batch and per
strategy, the model's charge with what the same stages cost on the executors that ran
them:

- **on any machine, in CPU** (``executorCpuTime``, which sharing a core does not change):
  per stage the busiest executor's summed CPU (``rest_task_metrics.busiest_executor_cpu_s``),
  summed over the stages, against the model's charge (routing: the senders' CPU /
  senders; nodes: the slowest node's CPU in the node stages). This checks the model's
  accounting: that a sender's share and the slowest node are what an executor of its own
  would spend, tasks placed as Spark places them, stage after stage;
- **in wall time, only where every executor has a core of its own and the driver one
  more**: the same stages' first task launch to last end (``route_wall_s``,
  ``node_wall_s``) and the slowest node's ``executorRunTime`` between them. Elsewhere (2
  executors and a driver on this machine's 2 cores: tasks on a CPU 43% of their run time,
  measured) the wall measures the machine, not the model, and the check says so in one
  line: the cores it needs and the cores it found.

It prints the median and the worst relative error ``|model - measured| / measured`` over
the batches whose measured node stages take at least :data:`MIN_NODE_STAGE_S` of CPU,
and whether the strategies rank the same under the model and under the measurement
(paired rounds, the one statistics function, :func:`balancebench.core.stats.verdict`).

What it does not check: the wall of parallel tasks includes what the model leaves out on
purpose or cannot see (task launch and deserialization, shuffle fetch waits, the JVM's
garbage collection, the driver between stages), which only a cluster's wall comparison
shows; neither side counts the harness's driver work between jobs (the oracle,
statistics). The network here is the loopback: the model is checked CPU-only
(``network_bandwidth_mb_per_s`` null), the link's share untested.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from balancebench.core.stats import DECIDED, LOWER, Outcome, Verdict, verdict
from balancebench.experiment.params import ExperimentSpec
from balancebench.experiment.rounds import rotated_rounds
from balancebench.experiment.runs import LoadedCell

#: The checked cell's Params unless the user's say otherwise: two nodes and two senders,
#: one core each, the default run's strategies, a CPU-only model.
CHECK_DEFAULTS: Final[dict[str, Any]] = {
    "n_nodes": 2,
    "n_senders": 2,
    "strategies": ["hash", "qmmp", "mnrt"],
    "network_bandwidth_mb_per_s": None,
    "n_tuples": 1_200_000,
    "input_rate_tuples_per_s": 200_000.0,
    "warmup_batches": 2,
}
#: The default master: 2 executors of 1 core and 2 GiB each, started by Spark for the
#: application and stopped with it.
DEFAULT_MASTER: Final[str] = "local-cluster[2,1,2048]"
#: Batches whose measured node stages are shorter are left out of the error (a stage of
#: a few ms is mostly task launch, which the model leaves out on purpose).
MIN_NODE_STAGE_S: Final[float] = 0.05
#: The target of the CPU comparison: the median error of the nodes and of the total.
TARGET_MEDIAN_ERROR: Final[float] = 0.15


@dataclass(frozen=True)
class Cores:
    """The cores a wall comparison needs (a core per executor core, one for the driver)
    and the cores found where they must be (this machine's, when the executors run here)."""

    needed: int
    found: int
    where: str

    @property
    def enough(self) -> bool:
        return self.found >= self.needed

    def line(self) -> str:
        return (
            f"wall time: not compared here; every executor needs a core of its own and the "
            f"driver one more: {self.needed} cores {self.where}, {self.found} found"
        )


@dataclass(frozen=True)
class BatchCheck:
    """One measured batch: the model's charge, the same stages' CPU on the executors that
    ran them, and their wall, in seconds."""

    strategy: str
    round: int
    batch: int
    model_route_s: float
    model_node_s: float
    #: Per stage the busiest executor's CPU, summed over the routing (node) stages.
    executor_route_s: float
    executor_node_s: float
    wall_route_s: float = 0.0
    wall_node_s: float = 0.0
    #: Between the two: the slowest node's executorRunTime in the node stages (its tasks
    #: running, on a core or waiting for one, for a fetch, for the GC), seconds.
    run_node_s: float = 0.0

    def total(self, side: str) -> float:
        return float(getattr(self, f"{side}_route_s") + getattr(self, f"{side}_node_s"))


#: The measured sides a charge is compared with.
SIDES: Final[tuple[str, ...]] = ("executor", "wall")


def batch_checks(batches: Sequence[Any], strategy: str, round_: int) -> list[BatchCheck]:
    """The model's charge (CPU only), the executors' CPU and the wall of each batch."""
    out = []
    for b in batches:
        costs = b.costs(None)
        out.append(
            BatchCheck(
                strategy=strategy,
                round=round_,
                batch=b.batch,
                model_route_s=costs.routing_s,
                model_node_s=costs.service_s - costs.routing_s,
                executor_route_s=float(b.extra["route_executor_cpu_s"]),
                executor_node_s=float(b.extra["node_executor_cpu_s"]),
                wall_route_s=float(b.extra["route_wall_s"]),
                wall_node_s=float(b.extra["node_wall_s"]),
                run_node_s=float(b.makespan_wall_s),
            )
        )
    return out


def relative_errors(checks: Sequence[BatchCheck], part: str, side: str = "executor") -> np.ndarray:
    """``|model - measured| / measured`` of ``part`` ("node", "route" or "total") against
    ``side`` ("executor": CPU, or "wall") over the batches whose node stages took at least
    :data:`MIN_NODE_STAGE_S` of the busiest executor's CPU."""
    kept = [c for c in checks if c.executor_node_s >= MIN_NODE_STAGE_S]
    model = np.array([_part(c, part, "model") for c in kept])
    measured = np.array([_part(c, part, side) for c in kept])
    return np.abs(model - measured) / measured if len(kept) else np.zeros(0)


def _part(check: BatchCheck, part: str, side: str) -> float:
    if part == "total":
        return check.total(side)
    return float(getattr(check, f"{side}_{part}_s"))


def rankings(
    checks: Sequence[BatchCheck], baseline: str, side: str = "executor"
) -> dict[str, tuple[Verdict, Verdict]]:
    """Per strategy other than ``baseline``: its verdict against the baseline under the
    model and under the measurement ``side`` (per round, the sum over its batches; paired)."""
    names = sorted({c.strategy for c in checks} - {baseline})
    rounds = sorted({c.round for c in checks})

    def per_round(name: str, of: str) -> list[float]:
        return [
            sum(c.total(of) for c in checks if c.strategy == name and c.round == r) for r in rounds
        ]

    return {
        name: tuple(  # type: ignore[misc]
            verdict(per_round(baseline, of), per_round(name, of), LOWER) for of in ("model", side)
        )
        for name in names
    }


def same_ranking(model: Verdict, measured: Verdict) -> bool | None:
    """Whether the measured wall agrees where both verdicts are decided and the model's
    says faster or slower; None where the model's or the measured one is not decided (a
    measurement too noisy to decide neither confirms nor contradicts the model)."""
    if model.outcome not in (Outcome.FASTER, Outcome.SLOWER):
        return None
    if measured.outcome not in DECIDED:
        return None
    return measured.outcome == model.outcome


def run_check(spark: Any, params: ExperimentSpec, rounds: int) -> list[BatchCheck]:
    """``rounds`` rotated rounds of the Params' strategies on one loaded cell."""
    cell = LoadedCell(spark, params)
    names = list(params.strategies)
    checks: list[BatchCheck] = []
    try:
        for r in range(rounds):
            for name in rotated_rounds(names, 1, first=r):
                print(f"check-model: round {r + 1} of {rounds}, {name}", flush=True)
                batches, _ = cell.run(spark, name)
                checks += batch_checks(batches, name, r)
    finally:
        cell.release()
    return checks


def report(checks: Sequence[BatchCheck], baseline: str, cores: Cores) -> list[str]:
    """The printed lines: the verdict on the model's accounting first (its median error
    against the executors' CPU), then per strategy the mean charge and measurements, the
    errors, the ranking; the wall only where ``cores`` suffice, else one line why not."""
    node_err = relative_errors(checks, "node")
    total_err = relative_errors(checks, "total")
    lines = []
    if len(node_err):
        worst = max(float(np.median(node_err)), float(np.median(total_err)))
        met = "met" if worst <= TARGET_MEDIAN_ERROR else "MISSED"
        lines.append(
            f"the model against the executors' CPU: median error {np.median(node_err):.1%} "
            f"(nodes), {np.median(total_err):.1%} (routing + nodes); target <= "
            f"{TARGET_MEDIAN_ERROR:.0%}: {met}"
        )
    sides = SIDES if cores.enough else ("executor",)
    head = f"{'strategy':>10} {'batches':>7} {'model route':>12} {'exec route':>11}"
    head += f" {'model nodes':>12} {'exec nodes':>11}"
    if cores.enough:
        head += f" {'wall route':>11} {'run nodes':>10} {'wall nodes':>11}"
    lines.append(head + "  (mean seconds per batch; exec: the busiest executor's CPU)")
    keys = ["model_route_s", "executor_route_s", "model_node_s", "executor_node_s"]
    if cores.enough:
        keys += ["wall_route_s", "run_node_s", "wall_node_s"]
    for name in sorted({c.strategy for c in checks}):
        mine = [c for c in checks if c.strategy == name]
        row = f"{name:>10} {len(mine):>7}"
        for k, width in zip(keys, (12, 11, 12, 11, 11, 10, 11), strict=False):
            row += f" {float(np.mean([getattr(c, k) for c in mine])):>{width}.3f}"
        lines.append(row)
    for side in sides:
        what = "the executors' CPU" if side == "executor" else "the wall"
        for part in ("node", "route", "total"):
            err = relative_errors(checks, part, side)
            if len(err):
                lines.append(
                    f"|model - measured| / measured against {what}, {part}: median "
                    f"{np.median(err):.1%}, worst {err.max():.1%} ({len(err)} batches with node "
                    f"stages >= {MIN_NODE_STAGE_S * 1e3:.0f} ms of CPU)"
                )
    if not cores.enough:
        lines.append(cores.line())
    for side in sides:
        what = "executors' CPU" if side == "executor" else "wall"
        for name, (model, measured) in rankings(checks, baseline, side).items():
            same = same_ranking(model, measured)
            if same is None:
                ranked = model.outcome in (Outcome.FASTER, Outcome.SLOWER)
                agree = "measured undecided" if ranked else "model undecided"
            else:
                agree = "same" if same else "DIFFERENT"
            lines.append(
                f"{name} against {baseline}: model {model.text()}; {what} {measured.text()}: "
                f"{agree}"
            )
    return lines


def cores_for(spark: Any, master: str) -> Cores:
    """What a wall comparison needs of ``master``'s application: a core per executor core
    and one for the driver, on this machine when the executors run here
    (``local-cluster``, or a ``spark://`` cluster on the loopback); else the driver's one
    here (the executors' cores are the workers')."""
    import os

    from balancebench.spark.rest_task_metrics import TaskMetricsReader

    here = len(os.sched_getaffinity(0))
    executors = [
        e
        for e in TaskMetricsReader(spark.sparkContext)._get("/executors")  # type: ignore[union-attr]
        if e.get("id") != "driver"
    ]
    hosts = {str(e.get("hostPort", "")).rsplit(":", 1)[0] for e in executors}
    local = master.startswith("local-cluster") or hosts <= {"127.0.0.1", "localhost", "[::1]"}
    if local:
        needed = sum(int(e.get("totalCores", 1)) for e in executors) + 1
        return Cores(needed, here, "on this machine")
    return Cores(1, here, "for the driver on this machine (the executors' are the workers')")
