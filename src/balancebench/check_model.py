"""``balancebench check-model``: the cost model against nodes that really run side by side.

Every figure this project reports is the cost model's charge (``metric_definitions.BatchCosts``):
the routing CPU per sender plus the slowest node's CPU, measured on emulated nodes that
share a few cores. This check runs a cell where each sender and each node has a core of
its own (``n_nodes`` = ``n_senders`` = the executors' cores: here ``local-cluster`` with
2 executors of 1 core, on a user's cluster N workers), and compares, per batch and per
strategy, the model's charge with the measured wall time of the same stages (their
tasks' first launch to last end, ``rest_task_metrics.stage_wall_s``):

- routing: ``route_s`` (CPU per sender) against the routing stages' wall;
- nodes: the slowest node's CPU in the node stages against the node stages' wall.

"run nodes" sits between the two: the slowest node's ``executorRunTime`` (its tasks
running, on a core or waiting for one, for a shuffle fetch, for the GC). It prints the
median and the worst relative error ``|model - measured| / measured`` over
the batches whose measured node stages take at least :data:`MIN_NODE_STAGE_S`, and
whether the strategies rank the same under the model and under the measured wall (paired
rounds, the one statistics function, :func:`balancebench.stats.verdict`).

What it checks and what it does not: the wall of parallel tasks includes what the model
leaves out on purpose or cannot see (task launch and deserialization, shuffle fetch
waits, the JVM's garbage collection, the driver between stages); it does not include the
harness's driver work between jobs (the oracle, statistics), which neither side counts.
The network here is the loopback: the model is checked CPU-only
(``network_bandwidth_mb_per_s`` null), the link's share untested.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from balancebench.experiment import LoadedCell
from balancebench.experiment_params import ExperimentSpec
from balancebench.rounds import rotated_rounds
from balancebench.stats import DECIDED, LOWER, Outcome, Verdict, verdict

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


@dataclass(frozen=True)
class BatchCheck:
    """One measured batch: the model's charge and the measured wall, in seconds."""

    strategy: str
    round: int
    batch: int
    model_route_s: float
    measured_route_s: float
    model_node_s: float
    measured_node_s: float
    #: Between the two: the slowest node's executorRunTime in the node stages (its tasks
    #: running, on a core or waiting for one, for a fetch, for the GC), seconds.
    run_node_s: float = 0.0

    @property
    def model_s(self) -> float:
        return self.model_route_s + self.model_node_s

    @property
    def measured_s(self) -> float:
        return self.measured_route_s + self.measured_node_s


def batch_checks(batches: Sequence[Any], strategy: str, round_: int) -> list[BatchCheck]:
    """The model's charge (CPU only) and the measured wall of each batch."""
    out = []
    for b in batches:
        costs = b.costs(None)
        out.append(
            BatchCheck(
                strategy=strategy,
                round=round_,
                batch=b.batch,
                model_route_s=costs.routing_s,
                measured_route_s=float(b.extra["route_wall_s"]),
                model_node_s=costs.service_s - costs.routing_s,
                measured_node_s=float(b.extra["node_wall_s"]),
                run_node_s=float(b.makespan_wall_s),
            )
        )
    return out


def relative_errors(checks: Sequence[BatchCheck], part: str) -> np.ndarray:
    """``|model - measured| / measured`` of ``part`` ("node", "route" or "total") over
    the batches whose measured node stages take at least :data:`MIN_NODE_STAGE_S`."""
    kept = [c for c in checks if c.measured_node_s >= MIN_NODE_STAGE_S]
    model = np.array([_part(c, part, "model") for c in kept])
    measured = np.array([_part(c, part, "measured") for c in kept])
    return np.abs(model - measured) / measured if len(kept) else np.zeros(0)


def _part(check: BatchCheck, part: str, side: str) -> float:
    if part == "total":
        return check.model_s if side == "model" else check.measured_s
    return float(getattr(check, f"{side}_{part}_s"))


def rankings(checks: Sequence[BatchCheck], baseline: str) -> dict[str, tuple[Verdict, Verdict]]:
    """Per strategy other than ``baseline``: its verdict against the baseline under the
    model and under the measured wall (per round, the sum over its batches; paired)."""
    names = sorted({c.strategy for c in checks} - {baseline})
    rounds = sorted({c.round for c in checks})

    def per_round(name: str, side: str) -> list[float]:
        return [
            sum(getattr(c, f"{side}_s") for c in checks if c.strategy == name and c.round == r)
            for r in rounds
        ]

    return {
        name: tuple(  # type: ignore[misc]
            verdict(per_round(baseline, side), per_round(name, side), LOWER)
            for side in ("model", "measured")
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


def report(checks: Sequence[BatchCheck], baseline: str) -> list[str]:
    """The printed lines: per strategy the mean charge and wall, the errors, the ranking."""
    lines = [
        f"{'strategy':>10} {'batches':>7} {'model route':>12} {'wall route':>11} "
        f"{'model nodes':>12} {'run nodes':>10} {'wall nodes':>11}  (mean seconds per batch)"
    ]
    for name in sorted({c.strategy for c in checks}):
        mine = [c for c in checks if c.strategy == name]
        mean = {
            k: float(np.mean([getattr(c, k) for c in mine]))
            for k in (
                "model_route_s",
                "measured_route_s",
                "model_node_s",
                "run_node_s",
                "measured_node_s",
            )
        }
        lines.append(
            f"{name:>10} {len(mine):>7} {mean['model_route_s']:>12.3f} "
            f"{mean['measured_route_s']:>11.3f} {mean['model_node_s']:>12.3f} "
            f"{mean['run_node_s']:>10.3f} {mean['measured_node_s']:>11.3f}"
        )
    for part in ("node", "route", "total"):
        err = relative_errors(checks, part)
        if len(err):
            lines.append(
                f"|model - measured| / measured, {part}: median {np.median(err):.1%}, "
                f"worst {err.max():.1%} ({len(err)} batches with node stages >= "
                f"{MIN_NODE_STAGE_S * 1e3:.0f} ms)"
            )
    node_err = relative_errors(checks, "node")
    if len(node_err):
        met = "met" if np.median(node_err) <= 0.15 else "MISSED"
        lines.append(f"target: median node error <= 15%: {met}")
    for name, (model, measured) in rankings(checks, baseline).items():
        same = same_ranking(model, measured)
        if same is None:
            ranked = model.outcome in (Outcome.FASTER, Outcome.SLOWER)
            agree = "measured undecided" if ranked else "model undecided"
        else:
            agree = "same" if same else "DIFFERENT"
        lines.append(
            f"{name} against {baseline}: model {model.text()}; measured {measured.text()}: {agree}"
        )
    return lines
