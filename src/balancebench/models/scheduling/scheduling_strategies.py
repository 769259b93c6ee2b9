"""The scheduling model's strategies, one function each, registered in :data:`STRATEGIES`.

Every strategy has the signature of :class:`PlaceStrategy`: from the Params, the node
readings (read once), the task x node time matrix and the round-robin placement it
decides a :class:`Placement`. ``SchedulingModel.run`` times exactly this call
(``plan_time_ms``) and looks the strategy up by name; the model's ``strategies`` are the
keys of :data:`STRATEGIES`.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import numpy as np

from balancebench.models.scheduling.algorithms import (
    acts_schedule,
    cluster_resource_use,
    effective_weights,
    round_robin,
    smooth_weighted_round_robin,
)
from balancebench.models.scheduling.node_readings import NodeMetrics


class Placement(NamedTuple):
    """A strategy's decision (unpacks as the tuple of these five fields)."""

    #: Node of every task.
    placement: list[int]
    #: Scheduling decisions made (one per task and pick, ``iterations x ants x tasks`` for
    #: the colony).
    decisions: int
    #: Cluster resource use (switch rule) with the strategy's initial placement running.
    cluster_use: float
    #: True if the placement came from ACTS.
    switched: bool
    #: SWPTS's effective weights when SWPTS ran, else None.
    weights: np.ndarray | None


class PlaceStrategy(Protocol):
    """The signature every strategy of :data:`STRATEGIES` has."""

    def __call__(
        self,
        params: dict[str, Any],
        readings: list[NodeMetrics],
        times: np.ndarray,
        rr_placement: list[int],
        rng: np.random.Generator,
    ) -> Placement: ...


def _use_of(readings: list[NodeMetrics], placement: list[int], n_nodes: int) -> float:
    """Cluster resource use with ``placement`` running."""
    return cluster_resource_use(readings, np.bincount(placement, minlength=n_nodes))


def _colony(
    params: dict[str, Any], times: np.ndarray, rr_placement: list[int], rng: np.random.Generator
) -> tuple[list[int], int]:
    """ACTS's placement of every task and its decisions (``iterations x ants x tasks``)."""
    placement, _ = acts_schedule(
        times,
        rng,
        iterations=params["acts_iterations"],
        ants=params["acts_ants"],
        reinforcement=params["acts_reinforcement_pct"] / 100.0,
        initial_best=rr_placement if params["acts_seed_round_robin"] else None,
    )
    return placement, params["acts_iterations"] * params["acts_ants"] * times.shape[0]


def place_round_robin(
    params: dict[str, Any],
    readings: list[NodeMetrics],
    times: np.ndarray,
    rr_placement: list[int],
    rng: np.random.Generator,
) -> Placement:
    """Flink's default: one slot per node in node order, task ``i`` on node ``i mod
    nodes``. Placed again here (not ``rr_placement``) so its plan time is timed too."""
    n_tasks, n_nodes = times.shape
    placement = round_robin(n_tasks, list(range(n_nodes)))
    return Placement(placement, n_tasks, _use_of(readings, placement, n_nodes), False, None)


def place_swpts(
    params: dict[str, Any],
    readings: list[NodeMetrics],
    times: np.ndarray,
    rr_placement: list[int],
    rng: np.random.Generator,
) -> Placement:
    """SWPTS (§3.2): smooth weighted round robin over the nodes' effective weights."""
    n_tasks, n_nodes = times.shape
    weights = effective_weights(
        readings, params["weight_cpu"], params["weight_mem"], params["weight_mem_total"]
    )
    placement = smooth_weighted_round_robin(weights, n_tasks)
    return Placement(placement, n_tasks, _use_of(readings, placement, n_nodes), False, weights)


def place_acts(
    params: dict[str, Any],
    readings: list[NodeMetrics],
    times: np.ndarray,
    rr_placement: list[int],
    rng: np.random.Generator,
) -> Placement:
    """ACTS (§3.3) from the start: its use is that of its own placement."""
    placement, decisions = _colony(params, times, rr_placement, rng)
    return Placement(placement, decisions, _use_of(readings, placement, times.shape[1]), True, None)


def place_adaptive(
    params: dict[str, Any],
    readings: list[NodeMetrics],
    times: np.ndarray,
    rr_placement: list[int],
    rng: np.random.Generator,
) -> Placement:
    """The paper's scheduler: SWPTS, re-placed by ACTS when the cluster use under the
    SWPTS placement is above ``eps`` (use and weights stay SWPTS's)."""
    initial = place_swpts(params, readings, times, rr_placement, rng)
    if initial.cluster_use <= params["eps"]:
        return initial
    placement, decisions = _colony(params, times, rr_placement, rng)
    return Placement(
        placement, initial.decisions + decisions, initial.cluster_use, True, initial.weights
    )


#: Strategy name -> its placement function; ``SchedulingModel.strategies`` is its keys.
STRATEGIES: dict[str, PlaceStrategy] = {
    "round_robin": place_round_robin,
    "swpts": place_swpts,
    "acts": place_acts,
    "adaptive": place_adaptive,
}
