"""The scheduling model's algorithms, pure functions of their inputs: effective weights
and SWPTS (smooth weighted round robin), round robin, ACTS (ant colony), makespan, the
brute-force optimum and the cluster resource use of the switch rule."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from balancebench.models.scheduling.node_readings import NodeMetrics

#: Most assignments (nodes ** tasks) :func:`brute_force_optimum` enumerates, in blocks of
#: ``BRUTE_FORCE_BLOCK``.
BRUTE_FORCE_LIMIT = 1 << 22
BRUTE_FORCE_BLOCK = 1 << 15


def effective_weights(metrics: Sequence[NodeMetrics], a: float, b: float, c: float) -> np.ndarray:
    """[reconstructed] ``Ew_j = a*(1 - Cu_j) + b*(1 - Mu_j) + c*(memtotal_j / max memtotal)``."""
    cpu = np.array([m.cpu_use for m in metrics], dtype=np.float64)
    mem = np.array([m.mem_use for m in metrics], dtype=np.float64)
    total = np.array([m.mem_total_gb for m in metrics], dtype=np.float64)
    return a * (1.0 - cpu) + b * (1.0 - mem) + c * (total / total.max())


def smooth_weighted_round_robin(weights: Sequence[float], picks: int) -> list[int]:
    """Node index of each of ``picks`` picks by nginx's smooth weighted round robin.

    Every pick: ``Cw += Ew`` for all nodes, the largest ``Cw`` wins (first on ties),
    the winner's ``Cw -= sum(Ew)``. Weights 3:1:2 give 0, 2, 0, 1, 2, 0.
    """
    effective = np.asarray(weights, dtype=np.float64)
    if effective.ndim != 1 or len(effective) == 0 or (effective < 0).any():
        raise ValueError("weights: expected one non-negative weight per node")
    current = np.zeros_like(effective)
    total = effective.sum()
    order: list[int] = []
    for _ in range(picks):
        current += effective
        best = int(np.argmax(current))  # argmax returns the first maximum: nginx's tie rule
        current[best] -= total
        order.append(best)
    return order


def round_robin(n_tasks: int, slots: Sequence[int]) -> list[int]:
    """Flink's default: task ``i`` takes slot ``i mod len(slots)``; ``slots`` lists the
    node of each slot in the order the scheduler hands them out."""
    if len(slots) == 0:
        raise ValueError("slots: expected at least one slot")
    return [int(slots[i % len(slots)]) for i in range(n_tasks)]


def node_loads(assignment: Sequence[int], time_matrix: np.ndarray) -> np.ndarray:
    """Finish time of every node: the summed ``time[i][j]`` of the tasks placed on it."""
    times = np.asarray(time_matrix, dtype=np.float64)
    nodes = np.asarray(assignment, dtype=np.int64)
    return np.bincount(nodes, weights=times[np.arange(len(nodes)), nodes], minlength=times.shape[1])


def makespan(assignment: Sequence[int], time_matrix: np.ndarray) -> float:
    """The latest node's finish time (the job runtime of the placement)."""
    return float(node_loads(assignment, time_matrix).max())


def brute_force_optimum(time_matrix: np.ndarray) -> tuple[list[int], float]:
    """The minimum-makespan assignment by enumerating all ``nodes ** tasks`` of them
    (first in lexicographic order on ties), in numpy blocks."""
    times = np.asarray(time_matrix, dtype=np.float64)
    n_tasks, n_nodes = times.shape
    total = n_nodes**n_tasks
    if total > BRUTE_FORCE_LIMIT:
        raise ValueError(
            f"time_matrix: {n_nodes}**{n_tasks} assignments; allowed: <= {BRUTE_FORCE_LIMIT}"
        )
    place_values = n_nodes ** np.arange(n_tasks - 1, -1, -1, dtype=np.int64)  # task 0 first
    best_code, best_span = 0, math.inf
    for start in range(0, total, BRUTE_FORCE_BLOCK):
        codes = np.arange(start, min(total, start + BRUTE_FORCE_BLOCK), dtype=np.int64)
        spans = _ant_makespans((codes[:, None] // place_values[None, :]) % n_nodes, times)
        k = int(np.argmin(spans))
        if spans[k] < best_span:
            best_code, best_span = int(codes[k]), float(spans[k])
    return ((best_code // place_values) % n_nodes).tolist(), best_span


def _ant_makespans(paths: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Makespan of every row of ``paths`` (rows x tasks, node per task)."""
    rows, n_tasks = paths.shape
    n_nodes = times.shape[1]
    task_times = times[np.arange(n_tasks)[None, :], paths]
    flat = (np.arange(rows)[:, None] * n_nodes + paths).ravel()
    loads = np.bincount(flat, weights=task_times.ravel(), minlength=rows * n_nodes)
    return loads.reshape(rows, n_nodes).max(axis=1)


def acts_schedule(
    time_matrix: np.ndarray,
    rng: np.random.Generator,
    iterations: int = 100,
    ants: int = 10,
    *,
    reinforcement: float = 0.05,
    initial_best: Sequence[int] | None = None,
) -> tuple[list[int], float]:
    """ACTS (paper 002 §3.3): the best assignment the ants found and its makespan.

    ``reinforcement`` ``n`` is a fraction (0.05 = 5 %). The paper's evaporation ``m`` is
    not an input: it cannot change a decision (below), so it was removed rather than
    range-checked and ignored.
    ``initial_best`` (e.g. the round-robin placement) seeds the best-so-far only; the
    pheromone still starts at 1 everywhere.

    After ``t`` iterations the pheromone is ``phe[i][j] = (1 - m)^t * (1 + n)^r[i][j]``
    with ``r[i][j]`` the times the path was reinforced, so it is kept as the counts
    ``r``: the common factor ``(1 - m)^t`` cancels in both decision rules (argmax and
    ``max / sum``), which keeps ties exact (float products in a different order would
    break them at random) and the values in range however long the colony runs.
    """
    times = np.asarray(time_matrix, dtype=np.float64)
    n_tasks, n_nodes = times.shape
    reinforced = np.zeros((n_tasks, n_nodes), dtype=np.int64)  # r[i][j]; phe = 1 at start
    ant_index = np.arange(ants)[:, None]
    tasks = np.arange(n_tasks)
    if initial_best is not None:
        best_path = [int(j) for j in initial_best]
        best_span = makespan(best_path, times)
    else:
        best_path, best_span = [], math.inf
    for _ in range(iterations):
        top = reinforced.max(axis=1)
        greedy = np.argmax(reinforced, axis=1)  # the most pheromone; first node on ties
        # phe / max phe of the row = (1 + n)^(r - max r); so max / sum = 1 / that row's sum.
        relative = (1.0 + reinforcement) ** (reinforced - top[:, None]).astype(np.float64)
        # + 1e-9: a ratio that is a whole number of ants on paper (10 x 1/2) must not fall
        # one short through rounding.
        bound = np.floor(ants / relative.sum(axis=1) + 1e-9)
        random_nodes = rng.integers(0, n_nodes, size=(ants, n_tasks))
        paths = np.where(ant_index <= bound[None, :], greedy[None, :], random_nodes)
        spans = _ant_makespans(paths, times)
        winner = int(np.argmin(spans))  # the iteration's best ant (first on ties)
        if spans[winner] < best_span:
            best_path, best_span = paths[winner].tolist(), float(spans[winner])
        # Evaporation (every entry x (1 - m)) is the common factor; reinforcement of the
        # iteration's best path (x (1 + n)) adds one to its counts.
        reinforced[tasks, paths[winner]] += 1
    return best_path, best_span


def cluster_resource_use(
    metrics: Sequence[NodeMetrics], tasks_per_node: Sequence[int] | None = None
) -> float:
    """[interpreted] Cluster use with ``tasks_per_node`` running (one busy core each):
    ``max(core-weighted mean of min(1, Cu_j + n_j / cores_j), memory-weighted mean Mu_j)``."""
    cores = np.array([m.cores for m in metrics], dtype=np.float64)
    running = np.zeros(len(metrics)) if tasks_per_node is None else np.asarray(tasks_per_node)
    cpu = np.minimum(1.0, np.array([m.cpu_use for m in metrics]) + running / cores)
    mem_total = np.array([m.mem_total_gb for m in metrics], dtype=np.float64)
    mem = np.array([m.mem_use for m in metrics], dtype=np.float64)
    return float(max((cpu * cores).sum() / cores.sum(), (mem * mem_total).sum() / mem_total.sum()))
