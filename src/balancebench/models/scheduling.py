"""Paper 002 as a model: task scheduling on a heterogeneous Flink cluster.

Paper 002 (Wang, Zhao, Wang, "adaptive load balancing for heterogeneous Flink
clusters") replaces Flink's default round-robin slot assignment with an adaptive
scheduler: **SWPTS** (smooth weighted round robin over nodes weighted by their free CPU,
free memory and total memory, §3.2) for the initial placement, and **ACTS** (ant colony
task scheduling, §3.3) once the cluster's resource use exceeds ``eps`` = 80 %. Its
cluster (a master and two slaves, 4 cores / 4 GB and 2 cores / 2 GB, §4.2) cannot be
built here, so this module models it:

- **Input** (dataset ``tasks``): WordCount tasks (``tasks``: ``n_words`` per task) and
  the nodes (``nodes``: ``cores``, ``memory_gb``, ``capacity``). Without a dataset the
  same two tables are built from the ``input_*`` params (:func:`input_from_params`).
- **Per-task cost** ``cost_i`` (seconds on a node of capacity 1): Param ``task_costs_s``
  (the lead's Spark sweep fills it with the seconds of really running each task's
  WordCount on Spark once) or, when null, ``n_words_i * seconds_per_word`` (a model
  input, not a result). ``time[i][j] = cost_i / capacity_j`` (paper eq. 5).
- **Job runtime** = makespan of the placement: ``max_j sum_{i on j} time[i][j]`` (ACTS's
  own cost function, §3.3 "problem 1").
- **Node metrics** come from a :class:`NodeMetricsSource`: :class:`ProcNodeMetrics`
  reads this machine's ``/proc/stat`` (CPU use from the delta over a short interval) and
  ``/proc/meminfo`` (one node); :class:`ProfileNodeMetrics` models the dataset's nodes
  with a background load (``background_busy_cores``, ``background_mem_gb``).
- **Stream** (the paper's ad-join throughput/latency test, §4.3.2-4.3.3): events
  arrive Poisson at ``stream_rate_per_s`` for ``stream_duration_s``; an event belongs to
  task ``i`` (a campaign) with probability ``cost_i / sum(cost)`` and is served FIFO at
  that task's node, exponential service time of mean ``stream_service_s /
  capacity_j`` (one M/M/1-like queue per node, Lindley recursion in numpy).

Strategies: ``round_robin`` (Flink's default), ``swpts``, ``acts``, ``adaptive`` (the
paper's scheduler: SWPTS, then ACTS when the cluster use under the SWPTS placement
exceeds ``eps``).

Rules and choices:

- [reconstructed] Effective weight ``Ew = a*(1 - Cu) + b*(1 - Mu) + c*(memtotal /
  max memtotal)``, ``a + b + c = 1``; ``Mu = (memtotal - memfree) / memtotal`` (the
  paper's definition: ``MemFree``, not ``MemAvailable``). [interpreted] Defaults
  ``a = b = c = 1/3`` (the paper's values were lost in extraction).
- SWPTS is nginx's smooth weighted round robin: per pick every node does ``Cw += Ew``,
  the largest ``Cw`` wins (ties: the lower node index, as nginx), winner ``Cw -= sum(Ew)``.
  Metrics are read once and cached for the whole placement (§3.2).
- ACTS (§3.3, Algorithm 2-3): pheromone starts at 1; per iteration each ant assigns the
  tasks in order; for task ``i`` an ant with index ``<= bound_i`` takes the node with
  the most pheromone (ties: lower index), the others a uniformly random node;
  [reconstructed] ``bound_i = floor(ants * max_j phe[i][j] / sum_j phe[i][j])`` (plus
  1e-9 so a ratio that is a whole number of ants on paper is not rounded down); an
  ant's cost is its makespan; update: every entry times ``(1 - m%)``, the iteration's
  best ant's path times ``(1 + n%)``; the best assignment seen is returned.
  [interpreted] ``m`` and ``n`` were lost in extraction. ``m`` is not a parameter: a
  uniform evaporation scales each row alike and both decision rules (argmax, ``max /
  sum``) are scale-free per row, so no value of ``m`` can change a decision (the matrix
  is kept as reinforcement counts, exactly: see :func:`acts_schedule`). Default ``n = 5 %``,
  not that code's ``q = 2`` (+100 %): with +100 % one path's pheromone dominates after
  about 4 iterations, every ant then follows it, and the colony lands within 5 % of the
  optimum in only about half of the small random instances (a quarter of the 8-task
  ones), against the paper's claim that ACTS finds the global optimum in its 100
  iterations; with +5 % lock-in takes about 60 of the 100 iterations.
- [interpreted] ``acts_seed_round_robin`` (default true): the best-so-far starts as the
  round-robin placement, so ACTS never returns a longer makespan than round robin by
  construction. Pure ACTS (false) can lose to round robin: on 200 random instances of
  at most 8 tasks on 3 nodes it did in 1 (``n = 5 %``) and 9 (``n = 100 %``), since the
  colony samples only part of the space and, once one path's pheromone dominates, every
  ant follows it.
- [interpreted] Round robin: task ``i`` goes to slot ``i mod len(slots)`` with one slot
  per node in node order, i.e. every node gets the same number of tasks whatever its
  capacity (the paper: the default "treats all nodes as equal").
- [interpreted] Cluster resource use (the switch rule): while a placement runs, each
  running task keeps one core busy, so node ``j``'s CPU use is ``min(1, Cu_j + n_j /
  cores_j)`` (``n_j`` tasks placed on it); the cluster use is ``max(core-weighted mean
  CPU use, memory-weighted mean Mu)`` (tasks' memory is not modelled). ``adaptive``
  switches to ACTS (re-placing every task before it starts; no migration cost) when
  that use under the SWPTS placement is ``> eps``.
- [interpreted] Latency: the paper's ``handleTime - windowStart``; handleTime = the
  event's departure from its node; windowStart = the start of its tumbling window of
  ``stream_window_s`` (0 = the event's own arrival, i.e. sojourn time). Throughput =
  events handled by the end of the stream / its duration (the paper's count deltas
  over time). ``plan_time_ms``: wall time of the decision code (weights, placement,
  switch rule), not the metrics read (the paper caches it; ``/proc`` sampling sleeps).

Left out: Flink's slot sharing and co-location constraints, network transfer between
operators, task migration cost on an ACTS re-placement, the master node, JVM effects,
the Redis sink of the ad join, and the paper's TPC-C data (any text file can be cut
into tasks by the ``tasks`` generator). With ``node_metrics = proc`` the readings (and so
``cluster_use_share``) vary run to run; the placement on the single node does not.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from balancebench.generators.common import load_manifest, read_table
from balancebench.generators.tasks import CLUSTERS, word_shares
from balancebench.models.base import Model, ModelPoint, ModelResult
from balancebench.schema import number_spec

#: Most assignments (nodes ** tasks) :func:`brute_force_optimum` enumerates, in blocks of
#: ``BRUTE_FORCE_BLOCK``.
BRUTE_FORCE_LIMIT = 1 << 22
BRUTE_FORCE_BLOCK = 1 << 15
#: A run reports ``optimum_runtime_s`` only up to this many assignments (stays cheap).
RUN_OPTIMUM_LIMIT = 1 << 16
#: Points of the stream time series (equal bins over the stream's duration).
STREAM_BINS = 20
#: [interpreted] Default weight of each of the three terms of Ew.
ONE_THIRD = 1.0 / 3.0


# --- node metrics ------------------------------------------------------------------


@dataclass(frozen=True)
class NodeMetrics:
    """One node's reading: CPU use ``Cu`` and memory use ``Mu`` (0..1), total memory (GB),
    core count and capacity (relative speed; ``time = cost / capacity``)."""

    name: str
    cores: int
    capacity: float
    cpu_use: float
    mem_use: float
    mem_total_gb: float


class NodeMetricsSource(Protocol):
    """Where the scheduler's node metrics come from (paper §3.1's cluster monitor)."""

    def read(self) -> list[NodeMetrics]: ...


def parse_proc_stat_cpu(text: str) -> tuple[int, int]:
    """(busy, total) jiffies of the aggregate ``cpu`` line of ``/proc/stat``.

    Idle = ``idle + iowait``; guest times are already inside user/nice, so they are not
    added again.
    """
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
            values += [0] * (8 - len(values))
            total = sum(values)
            idle = values[3] + values[4]
            return total - idle, total
    raise ValueError("/proc/stat: no aggregate 'cpu' line")


def parse_proc_meminfo(text: str) -> tuple[float, float]:
    """(MemTotal, MemFree) of ``/proc/meminfo`` in GB (1 GB = 2**20 kB)."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key in ("MemTotal", "MemFree"):
            found[key] = float(rest.split()[0]) / float(1 << 20)
    if len(found) != 2:
        raise ValueError("/proc/meminfo: MemTotal or MemFree missing")
    return found["MemTotal"], found["MemFree"]


class ProcNodeMetrics:
    """This machine as one node: CPU use from two ``/proc/stat`` reads ``interval_s``
    apart, memory use ``(MemTotal - MemFree) / MemTotal`` from ``/proc/meminfo``
    (paper §3.1 parses the same files); cores = ``os.cpu_count()`` = capacity."""

    def __init__(self, interval_s: float = 0.1, proc: str | Path = "/proc") -> None:
        self.interval_s = interval_s
        self.proc = Path(proc)

    def read(self) -> list[NodeMetrics]:
        busy0, total0 = parse_proc_stat_cpu((self.proc / "stat").read_text())
        time.sleep(self.interval_s)
        busy1, total1 = parse_proc_stat_cpu((self.proc / "stat").read_text())
        elapsed = total1 - total0
        cpu_use = (busy1 - busy0) / elapsed if elapsed > 0 else 0.0
        mem_total, mem_free = parse_proc_meminfo((self.proc / "meminfo").read_text())
        cores = os.cpu_count() or 1
        return [
            NodeMetrics(
                name=os.uname().nodename,
                cores=cores,
                capacity=float(cores),
                cpu_use=float(min(1.0, max(0.0, cpu_use))),
                mem_use=(mem_total - mem_free) / mem_total,
                mem_total_gb=mem_total,
            )
        ]


class ProfileNodeMetrics:
    """Modelled nodes (the dataset's ``nodes`` table) under a background load: node
    ``j``'s ``Cu = min(1, busy_cores_j / cores_j)``, ``Mu = min(1, mem_gb_j /
    memory_gb_j)`` (e.g. the OS and the TaskManager JVM on every slave)."""

    def __init__(
        self,
        names: Sequence[str],
        cores: Sequence[int],
        memory_gb: Sequence[float],
        capacity: Sequence[float],
        background_busy_cores: float | Sequence[float] = 0.0,
        background_mem_gb: float | Sequence[float] = 0.0,
    ) -> None:
        n = len(names)
        self.names = list(names)
        self.cores = [int(c) for c in cores]
        self.memory_gb = [float(m) for m in memory_gb]
        self.capacity = [float(c) for c in capacity]
        self.busy_cores = per_node("background_busy_cores", background_busy_cores, n)
        self.mem_gb = per_node("background_mem_gb", background_mem_gb, n)

    def read(self) -> list[NodeMetrics]:
        return [
            NodeMetrics(
                name=self.names[j],
                cores=self.cores[j],
                capacity=self.capacity[j],
                cpu_use=min(1.0, self.busy_cores[j] / self.cores[j]),
                mem_use=min(1.0, self.mem_gb[j] / self.memory_gb[j]),
                mem_total_gb=self.memory_gb[j],
            )
            for j in range(len(self.names))
        ]


def per_node(field: str, value: float | Sequence[float], n_nodes: int) -> list[float]:
    """A scalar for every node, or one value per node (length checked)."""
    if isinstance(value, int | float):
        return [float(value)] * n_nodes
    values = [float(v) for v in value]
    if len(values) != n_nodes:
        raise ValueError(
            f"scheduling_{field}: {len(values)} values for {n_nodes} nodes; allowed: one "
            "number for every node or one per node"
        )
    return values


# --- the strategies' algorithms (pure) ---------------------------------------------


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


# --- the stream under a placement ----------------------------------------------------


@dataclass
class StreamResult:
    arrival_s: np.ndarray
    handled_s: np.ndarray
    latency_s: np.ndarray
    node: np.ndarray
    node_utilisation: np.ndarray


def simulate_stream(
    rng: np.random.Generator,
    assignment: Sequence[int],
    task_costs_s: np.ndarray,
    capacity: np.ndarray,
    rate_per_s: float,
    duration_s: float,
    service_s: float,
    window_s: float,
) -> StreamResult:
    """Ad-join-like stream: Poisson arrivals, event -> task with probability ``cost_i /
    sum``, FIFO at the task's node with exponential service of mean ``service_s /
    capacity_j``; per-node Lindley recursion ``W_n = C_n - min_{k<=n} C_k``."""
    n_events = int(rng.poisson(rate_per_s * duration_s))
    arrival = np.sort(rng.uniform(0.0, duration_s, n_events))
    share = task_costs_s / task_costs_s.sum()
    task = rng.choice(len(share), size=n_events, p=share)
    node = np.asarray(assignment, dtype=np.int64)[task]
    service = rng.exponential(1.0, n_events) * service_s / capacity[node]
    handled = np.empty(n_events)
    for j in range(len(capacity)):
        mine = np.flatnonzero(node == j)
        if len(mine) == 0:
            continue
        t, s = arrival[mine], service[mine]
        step = np.zeros(len(mine))
        step[1:] = s[:-1] - np.diff(t)
        climb = np.cumsum(step)  # C_0 = 0, so the running minimum is <= 0
        wait = climb - np.minimum.accumulate(climb)
        handled[mine] = t + wait + s
    window_start = arrival if window_s <= 0 else np.floor(arrival / window_s) * window_s
    busy = np.bincount(node, weights=service, minlength=len(capacity))
    return StreamResult(
        arrival_s=arrival,
        handled_s=handled,
        latency_s=handled - window_start,
        node=node,
        node_utilisation=busy / duration_s,
    )


def stream_capacity_per_s(
    assignment: Sequence[int], task_costs_s: np.ndarray, capacity: np.ndarray, service_s: float
) -> float:
    """The stream rate at which the busiest node reaches utilisation 1 (events/s)."""
    share = np.bincount(
        np.asarray(assignment, dtype=np.int64),
        weights=task_costs_s / task_costs_s.sum(),
        minlength=len(capacity),
    )
    used = share > 0
    return float((capacity[used] / (service_s * share[used])).min())


# --- input --------------------------------------------------------------------------


@dataclass
class SchedulingInput:
    """Tasks (words per task) and nodes (profile) the model schedules."""

    n_words: np.ndarray
    node_names: list[str]
    cores: list[int]
    memory_gb: list[float]
    capacity: list[float]
    cluster: str


def input_from_params(params: dict[str, Any]) -> SchedulingInput:
    """The ``tasks`` generator's tables without generating text: ``input_total_words``
    split by ``input_task_sizes`` (largest remainder), nodes of ``input_cluster``."""
    profile = CLUSTERS[params["input_cluster"]]
    return SchedulingInput(
        n_words=word_shares(params["input_task_sizes"], params["input_total_words"]).astype(
            np.float64
        ),
        node_names=[name for name, _, _ in profile],
        cores=[cores for _, cores, _ in profile],
        memory_gb=[mem for _, _, mem in profile],
        capacity=[float(cores) for _, cores, _ in profile],
        cluster=params["input_cluster"],
    )


def input_from_dataset(dataset_dir: str | Path) -> SchedulingInput:
    """``tasks`` (``n_words`` by ``task_id``) and ``nodes`` of a generated ``tasks`` dataset."""
    manifest = load_manifest(dataset_dir)
    tasks = read_table(dataset_dir, manifest, "tasks", ["task_id", "n_words"]).to_pandas()
    tasks = tasks.sort_values("task_id")
    nodes = read_table(dataset_dir, manifest, "nodes").to_pandas().sort_values("node")
    return SchedulingInput(
        n_words=tasks["n_words"].to_numpy(dtype=np.float64),
        node_names=nodes["name"].astype(str).tolist(),
        cores=nodes["cores"].astype(int).tolist(),
        memory_gb=nodes["memory_gb"].astype(float).tolist(),
        capacity=nodes["capacity"].astype(float).tolist(),
        cluster=str(manifest.params.get("tasks_cluster", "")),
    )


# --- the model ---------------------------------------------------------------------


#: Items of a per-node background amount (cores or GB busy on each node).
_PER_NODE_AMOUNT: dict[str, Any] = {"type": "number", "minimum": 0, "maximum": 1e6}


class SchedulingModel(Model):
    """Paper 002: round robin vs SWPTS vs ACTS vs the adaptive switch on a modelled
    heterogeneous cluster (see the module docstring)."""

    name = "scheduling"
    reference = (
        "paper 002 (Wang, Zhao, Wang, adaptive load balancing for heterogeneous Flink "
        "clusters) §3.2 SWPTS, §3.3 ACTS, §4.3 runtime/throughput/latency"
    )
    strategies = ("round_robin", "swpts", "acts", "adaptive")
    dataset = "tasks"
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "weight_cpu": number_spec(
            ONE_THIRD,
            "SWPTS: CPU weight a",
            "Weight a of (1 - CPU use) in Ew. a + b + c must be 1.",
            minimum=0,
            maximum=1,
        ),
        "weight_mem": number_spec(
            ONE_THIRD,
            "SWPTS: memory weight b",
            "Weight b of (1 - mem use) in Ew. a + b + c must be 1.",
            minimum=0,
            maximum=1,
        ),
        "weight_mem_total": number_spec(
            ONE_THIRD,
            "SWPTS: total-memory weight c",
            "Weight c of memtotal / max memtotal in Ew. a + b + c must be 1.",
            minimum=0,
            maximum=1,
        ),
        "eps": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "default": 0.8,
            "title": "Adaptive: switch threshold eps",
            "description": "adaptive re-places with ACTS when the cluster resource use under "
            "the SWPTS placement is above eps (paper: 80%, its Fig. 5).",
        },
        "parallelism": {
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": 100_000,
            "default": None,
            "title": "Parallelism (tasks)",
            "description": "The job's first p tasks of the dataset (null: all of them); at "
            "most the dataset's task count. A grid over it varies the cluster use, e.g. for "
            "the eps sweep of paper 002 Fig. 5.",
        },
        "acts_iterations": {
            "type": "integer",
            "minimum": 1,
            "maximum": 100_000,
            "default": 100,
            "title": "ACTS: iterations",
            "description": "Iterations of the ant colony (paper: 100).",
        },
        "acts_ants": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10_000,
            "default": 10,
            "title": "ACTS: ants",
            "description": "Ants per iteration (paper: 10).",
        },
        "acts_reinforcement_pct": {
            "type": "number",
            "minimum": 0,
            "maximum": 10_000,
            "default": 5,
            "title": "ACTS: reinforcement n%",
            "description": "The iteration's best ant's path gains n% per iteration (value "
            "lost in the paper; [interpreted] 5; 100 = doubles, locks in after ~4 iterations).",
        },
        "acts_seed_round_robin": {
            "type": "boolean",
            "default": True,
            "title": "ACTS: start from round robin",
            "description": "[interpreted] The best-so-far starts as the round-robin "
            "placement, so ACTS is never worse than round robin. False = the paper's ACTS.",
        },
        "node_metrics": {
            "type": "string",
            "enum": ["profile", "proc"],
            "default": "profile",
            "title": "Node metrics source",
            "description": "profile: the dataset's nodes under the background load below; "
            "proc: this machine as one node, read from /proc/stat and /proc/meminfo.",
        },
        "background_busy_cores": {
            **number_spec(
                0.5,
                "Profile: background busy cores",
                "Cores kept busy on each node before the job (OS, TaskManager): one number for "
                "every node or one per node. CPU use = busy / cores (capped at 1).",
                minimum=0,
                maximum=1e6,
            ),
            "type": ["number", "array"],
            "items": _PER_NODE_AMOUNT,
            "minItems": 1,
        },
        "background_mem_gb": {
            **number_spec(
                1.0,
                "Profile: background memory (GB)",
                "Memory used on each node before the job (default: Flink 1.4's 1 GB TaskManager "
                "heap): one number or one per node. Memory use = used / memory_gb (capped at 1).",
                minimum=0,
                maximum=1e6,
            ),
            "type": ["number", "array"],
            "items": _PER_NODE_AMOUNT,
            "minItems": 1,
        },
        "task_costs_s": {
            "type": ["array", "null"],
            "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e9},
            "minItems": 1,
            "default": None,
            "title": "Per-task cost (s)",
            "description": "Seconds of each task on a capacity-1 node, e.g. measured by "
            "running its WordCount on Spark once; one per task. Null: n_words x "
            "seconds_per_word.",
        },
        "seconds_per_word": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1e3,
            "default": 1e-6,
            "title": "Seconds per word",
            "description": "Model input (not a result): WordCount cost per word on a "
            "capacity-1 node, used when task_costs_s is null. Runtime ratios do not depend "
            "on it.",
        },
        "stream_rate_per_s": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1e7,
            "default": 3600.0,
            "title": "Stream: arrival rate (events/s)",
            "description": "Poisson rate of the ad-join-like stream.",
        },
        "stream_duration_s": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1e5,
            "default": 10.0,
            "title": "Stream: duration (s)",
            "description": "Simulated seconds of arrivals; rate x duration must stay <= 1e7.",
        },
        "stream_service_s": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1e3,
            "default": 0.001,
            "title": "Stream: service time (s)",
            "description": "Mean service time of one event on a capacity-1 node "
            "(exponential; divided by the node's capacity).",
        },
        "stream_window_s": {
            "type": "number",
            "minimum": 0,
            "maximum": 1e5,
            "default": 0.0,
            "title": "Stream: window (s)",
            "description": "Tumbling window whose start the latency counts from (paper: "
            "handleTime - windowStart); 0 = from the event's arrival.",
        },
        "input_task_sizes": {
            "type": "array",
            "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 1e12},
            "minItems": 1,
            "maxItems": 100_000,
            "default": [10, 8, 6, 10, 8, 6, 4, 4],
            "title": "No dataset: task sizes",
            "description": "Used only without a dataset: relative task sizes (as tasks_sizes).",
        },
        "input_total_words": {
            "type": "integer",
            "minimum": 1,
            "maximum": 2_000_000_000,
            "default": 200_000,
            "title": "No dataset: total words",
            "description": "Used only without a dataset: words over all tasks.",
        },
        "input_cluster": {
            "type": "string",
            "enum": sorted(CLUSTERS),
            "default": "paper002",
            "title": "No dataset: node profile",
            "description": "Used only without a dataset: node profile (as tasks_cluster).",
        },
    }
    metric_definitions: ClassVar[dict[str, str]] = {
        "plan_time_ms": "Wall time of the strategy's decision code (effective weights, "
        "placement, switch rule; ACTS when used), time.perf_counter, milliseconds.",
        "latency_p50_s": "Median over stream events of handleTime - windowStart (simulated s).",
        "latency_p95_s": "95th percentile of the same latency (simulated s).",
        "latency_p99_s": "99th percentile of the same latency (simulated s).",
        "throughput_tuples_per_s": "Stream events handled by the end of the stream divided by "
        "its duration (events per simulated second).",
        "imbalance_max_over_mean": "Max over nodes of the node's busy time in the job (summed "
        "cost_i / capacity_j of its tasks) divided by the mean over nodes, minus 1.",
        "job_runtime_s": "Makespan of the placement: max over nodes of the summed "
        "cost_i / capacity_j of its tasks (simulated s).",
        "ideal_runtime_s": "sum of task costs / sum of capacities: the runtime of a perfectly "
        "divisible job (simulated s; a lower bound).",
        "efficiency_share": "ideal_runtime_s / job_runtime_s: how close the placement comes "
        "to a perfectly divisible job (1 = every node busy to the end; paper 002 Fig. 5's "
        "'efficiency', which the paper does not define).",
        "round_robin_runtime_s": "Makespan of the round-robin placement of the same tasks "
        "(the baseline, simulated s).",
        "runtime_over_round_robin": "job_runtime_s / round_robin_runtime_s.",
        "runtime_reduction_vs_round_robin_share": "1 - runtime_over_round_robin (paper 002's "
        "headline: about 0.08).",
        "optimum_runtime_s": "Minimum makespan over all placements (brute force; only when "
        "nodes ** tasks <= 65,536).",
        "runtime_over_optimum": "job_runtime_s / optimum_runtime_s (same condition).",
        "cluster_use_share": "Cluster resource use (switch rule, 0..1) with the strategy's "
        "initial placement running (adaptive: the SWPTS placement).",
        "switched_to_acts": "1 if the final placement came from ACTS (acts always, adaptive "
        "when cluster_use_share > eps), else 0.",
        "fastest_node_task_share": "Share of the tasks placed on the node(s) of the largest "
        "capacity.",
        "stream_node_utilisation_max_share": "Max over nodes of the node's stream busy time / "
        "stream duration (> 1: the node cannot keep up).",
        "stream_capacity_per_s": "Arrival rate at which the first node saturates under the "
        "placement: min over used nodes of capacity_j / (stream_service_s x the node's share "
        "of events) (events/s; the throughput ceiling of the placement).",
        "stream_throughput_per_s": "[series] Events handled in each of 20 equal time bins "
        "divided by the bin width (events per simulated second).",
        "stream_latency_mean_s": "[series] Mean latency of the events handled in each bin "
        "(simulated s; 0 for a bin with none).",
    }

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        values = super().check_params(params)
        total = values["weight_cpu"] + values["weight_mem"] + values["weight_mem_total"]
        if abs(total - 1.0) > 1e-6:
            raise ValueError(
                f"scheduling_weight_cpu: a + b + c = {total:g} (weight_cpu + weight_mem + "
                "weight_mem_total); allowed: weights summing to 1"
            )
        if values["stream_rate_per_s"] * values["stream_duration_s"] > 1e7:
            raise ValueError(
                "scheduling_stream_duration_s: stream_rate_per_s x stream_duration_s = "
                f"{values['stream_rate_per_s'] * values['stream_duration_s']:g} events; "
                "allowed: <= 1e7"
            )
        return values

    def check_sweep(self, params: dict[str, Any]) -> list[str]:
        tasks = len(params["tasks_sizes"])
        key = "scheduling_parallelism"
        asked = [params[key], *params["grid"].get(key, [])]
        return [
            f"{key}: {p}; allowed: null or at most the dataset's {tasks} tasks (tasks_sizes)"
            for p in dict.fromkeys(asked)
            if p is not None and p > tasks
        ]

    # --- wiring ---

    def run(self, point: ModelPoint) -> ModelResult:
        self.check_strategy(point.strategy)
        params = self.check_params(point.params)
        # Separate streams: the ad-join events are the same for every strategy at a seed
        # (common random numbers), whatever the ants drew.
        rng = np.random.default_rng([point.seed, 0])
        stream_rng = np.random.default_rng([point.seed, 1])
        data = (
            input_from_dataset(point.dataset_dir)
            if point.dataset_dir
            else input_from_params(params)
        )
        costs = self._task_costs(params, data)
        if params["parallelism"] is not None:
            if params["parallelism"] > len(costs):
                raise ValueError(
                    f"scheduling_parallelism: {params['parallelism']}; allowed: null or at "
                    f"most the dataset's {len(costs)} tasks"
                )
            costs = costs[: params["parallelism"]]
        n_tasks = len(costs)
        source = self._metrics_source(params, data)
        readings = source.read()  # read once, cached for the whole placement (§3.2)
        capacity = np.array([m.capacity for m in readings], dtype=np.float64)
        times = costs[:, None] / capacity[None, :]  # paper eq. 5
        n_nodes = len(readings)
        rr_placement = round_robin(n_tasks, list(range(n_nodes)))

        started = time.perf_counter()
        placement, decisions, use, switched, weights = self._place(
            point.strategy, params, readings, times, rr_placement, rng
        )
        plan_time_ms = (time.perf_counter() - started) * 1e3

        loads = node_loads(placement, times)
        runtime = float(loads.max())
        rr_runtime = makespan(rr_placement, times)
        stream = simulate_stream(
            stream_rng,
            placement,
            costs,
            capacity,
            params["stream_rate_per_s"],
            params["stream_duration_s"],
            params["stream_service_s"],
            params["stream_window_s"],
        )
        duration = params["stream_duration_s"]
        if len(stream.latency_s) == 0:
            raise ValueError(
                f"{self.name}_stream_rate_per_s: {params['stream_rate_per_s']}/s over "
                f"{params['stream_duration_s']} s drew no event, so there is no latency to "
                "measure; allowed: a rate x duration of at least a few events"
            )
        latency = stream.latency_s
        fastest = capacity == capacity.max()
        tasks_per_node = np.bincount(placement, minlength=n_nodes)
        metrics = {
            "plan_time_ms": plan_time_ms,
            "latency_p50_s": float(np.percentile(latency, 50)),
            "latency_p95_s": float(np.percentile(latency, 95)),
            "latency_p99_s": float(np.percentile(latency, 99)),
            "throughput_tuples_per_s": float((stream.handled_s <= duration).sum() / duration),
            "imbalance_max_over_mean": float(loads.max() / loads.mean() - 1.0),
            "job_runtime_s": runtime,
            "ideal_runtime_s": float(costs.sum() / capacity.sum()),
            "efficiency_share": float(costs.sum() / capacity.sum()) / runtime,
            "round_robin_runtime_s": rr_runtime,
            "runtime_over_round_robin": runtime / rr_runtime,
            "runtime_reduction_vs_round_robin_share": 1.0 - runtime / rr_runtime,
            "cluster_use_share": use,
            "switched_to_acts": float(switched),
            "fastest_node_task_share": float(tasks_per_node[fastest].sum() / n_tasks),
            "stream_node_utilisation_max_share": float(stream.node_utilisation.max()),
            "stream_capacity_per_s": stream_capacity_per_s(
                placement, costs, capacity, params["stream_service_s"]
            ),
        }
        optimum = None
        if n_nodes**n_tasks <= RUN_OPTIMUM_LIMIT:
            optimum = brute_force_optimum(times)[1]
            metrics["optimum_runtime_s"] = optimum
            metrics["runtime_over_optimum"] = runtime / optimum
        edges = np.linspace(0.0, duration, STREAM_BINS + 1)
        handled_bin = np.searchsorted(edges, stream.handled_s, side="right") - 1
        inside = (handled_bin >= 0) & (handled_bin < STREAM_BINS)
        counts = np.bincount(handled_bin[inside], minlength=STREAM_BINS)
        latency_sums = np.bincount(
            handled_bin[inside], weights=stream.latency_s[inside], minlength=STREAM_BINS
        )
        width = duration / STREAM_BINS
        return ModelResult(
            metrics=metrics,
            series={
                "stream_throughput_per_s": (counts / width).tolist(),
                "stream_latency_mean_s": np.divide(
                    latency_sums, counts, out=np.zeros(STREAM_BINS), where=counts > 0
                ).tolist(),
            },
            time_s=edges[1:].tolist(),
            events=int(decisions + len(stream.arrival_s)),
            info={
                "cluster": data.cluster,
                "n_tasks": n_tasks,
                "n_nodes": n_nodes,
                "node_metrics": params["node_metrics"],
                "nodes": [asdict(m) for m in readings],
                "effective_weights": None if weights is None else weights.tolist(),
                "task_costs_s": costs.tolist(),
                "task_costs_from": "task_costs_s"
                if params["task_costs_s"] is not None
                else "n_words x seconds_per_word",
                "placement": [int(j) for j in placement],
                "tasks_per_node": tasks_per_node.tolist(),
                "node_busy_s": loads.tolist(),
                "round_robin_placement": rr_placement,
                "stream_events": int(len(stream.arrival_s)),
                "stream_node_utilisation": stream.node_utilisation.tolist(),
                "decisions": int(decisions),
            },
        )

    def _task_costs(self, params: dict[str, Any], data: SchedulingInput) -> np.ndarray:
        n_tasks = len(data.n_words)
        if params["task_costs_s"] is None:
            return data.n_words * params["seconds_per_word"]
        costs = np.asarray(params["task_costs_s"], dtype=np.float64)
        if len(costs) != n_tasks:
            raise ValueError(
                f"scheduling_task_costs_s: {len(costs)} costs for {n_tasks} tasks; allowed: "
                "one cost per task of the dataset, or null"
            )
        return costs

    def _metrics_source(self, params: dict[str, Any], data: SchedulingInput) -> NodeMetricsSource:
        if params["node_metrics"] == "proc":
            return ProcNodeMetrics()
        return ProfileNodeMetrics(
            data.node_names,
            data.cores,
            data.memory_gb,
            data.capacity,
            params["background_busy_cores"],
            params["background_mem_gb"],
        )

    def _place(
        self,
        strategy: str,
        params: dict[str, Any],
        readings: list[NodeMetrics],
        times: np.ndarray,
        rr_placement: list[int],
        rng: np.random.Generator,
    ) -> tuple[list[int], int, float, bool, np.ndarray | None]:
        """(placement, decisions, cluster use, ACTS used?, effective weights)."""
        n_tasks, n_nodes = times.shape
        if strategy == "round_robin":  # placed again here so its plan time is timed too
            placement = round_robin(n_tasks, list(range(n_nodes)))
            use = cluster_resource_use(readings, np.bincount(placement, minlength=n_nodes))
            return placement, n_tasks, use, False, None
        weights = effective_weights(
            readings, params["weight_cpu"], params["weight_mem"], params["weight_mem_total"]
        )
        initial = smooth_weighted_round_robin(weights, n_tasks)
        use = cluster_resource_use(readings, np.bincount(initial, minlength=n_nodes))
        if strategy == "swpts" or (strategy == "adaptive" and use <= params["eps"]):
            return initial, n_tasks, use, False, weights
        if strategy == "acts":  # ACTS from the start: its use is that of its own placement
            weights = None
        placement, _ = acts_schedule(
            times,
            rng,
            iterations=params["acts_iterations"],
            ants=params["acts_ants"],
            reinforcement=params["acts_reinforcement_pct"] / 100.0,
            initial_best=rr_placement if params["acts_seed_round_robin"] else None,
        )
        decisions = params["acts_iterations"] * params["acts_ants"] * n_tasks
        if strategy == "acts":
            use = cluster_resource_use(readings, np.bincount(placement, minlength=n_nodes))
            return placement, decisions, use, True, None
        return placement, n_tasks + decisions, use, True, weights

    # --- figure ---

    def figure(self, results: list[tuple[ModelPoint, ModelResult]]) -> Any:
        """Paper 002 Figs. 6-9 as grouped bars per workload (cluster, parallelism = tasks),
        one bar per strategy (mean over repetitions): job runtime (Figs. 6-7), the
        stream's throughput ceiling (Fig. 8; below it the handled rate just equals the
        offered rate, so the ceiling is what a placement changes) and p95 latency (Fig. 9)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        if len({self._eps(point) for point, _ in results}) > 1:
            return self._eps_figure(results, plt)
        panels = (
            ("job_runtime_s", "job runtime (simulated s)"),
            ("stream_capacity_per_s", "stream throughput ceiling (events/s)"),
            ("latency_p95_s", "stream latency p95 (simulated s)"),
        )
        groups: dict[tuple[str, int], dict[str, list[ModelResult]]] = {}
        for point, result in results:
            key = (str(result.info.get("cluster", "")), int(result.info.get("n_tasks", 0)))
            groups.setdefault(key, {}).setdefault(point.strategy, []).append(result)
        workloads = sorted(groups, key=lambda k: (k[1], k[0]))
        strategies = [s for s in self.strategies if any(s in g for g in groups.values())]
        fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6))
        width = 0.8 / max(1, len(strategies))
        x = np.arange(len(workloads))
        for ax, (metric, label) in zip(axes, panels, strict=True):
            for k, strategy in enumerate(strategies):
                values = [
                    float(np.mean([r.metrics[metric] for r in groups[w].get(strategy, [])]))
                    if groups[w].get(strategy)
                    else np.nan
                    for w in workloads
                ]
                ax.bar(x + (k - (len(strategies) - 1) / 2) * width, values, width, label=strategy)
            ax.set_xticks(x, [f"{c}\n{n} tasks" if c else f"{n} tasks" for c, n in workloads])
            ax.set_xlabel("cluster, parallelism (tasks)")
            ax.set_ylabel(label)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=max(1, len(strategies)))
        fig.suptitle("Paper 002 model: runtime, throughput, latency per scheduling strategy")
        fig.tight_layout(rect=(0, 0.08, 1, 1))
        return fig

    def _eps(self, point: ModelPoint) -> float:
        return float(self.check_params(point.params)["eps"])

    def _eps_figure(self, results: list[tuple[ModelPoint, ModelResult]], plt: Any) -> Any:
        """Paper 002 Fig. 5 (efficiency per threshold eps): per strategy, the mean over the
        other grid points (e.g. parallelism) and repetitions of ``efficiency_share`` at
        each eps; beside it, the share of those points where ``adaptive`` switched to
        ACTS. Only ``adaptive`` reads eps: the other strategies are flat references."""
        by_eps: dict[str, dict[float, list[ModelResult]]] = {}
        for point, result in results:
            by_eps.setdefault(point.strategy, {}).setdefault(point.params["eps"], []).append(result)
        strategies = [s for s in self.strategies if s in by_eps]
        fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.6))
        for strategy in strategies:
            eps = sorted(by_eps[strategy])
            mean = [
                np.mean([r.metrics["efficiency_share"] for r in by_eps[strategy][e]]) for e in eps
            ]
            left.plot(eps, mean, marker="o", label=strategy)
        left.set_xlabel("switch threshold eps (cluster resource use)")
        left.set_ylabel("efficiency (ideal / job runtime)")
        left.legend()
        if "adaptive" in by_eps:
            eps = sorted(by_eps["adaptive"])
            switched = [
                np.mean([r.metrics["switched_to_acts"] for r in by_eps["adaptive"][e]]) for e in eps
            ]
            right.plot(eps, switched, marker="o", color="tab:red")
        right.set_xlabel("switch threshold eps (cluster resource use)")
        right.set_ylabel("adaptive: share of runs on ACTS")
        right.set_ylim(-0.05, 1.05)
        fig.suptitle("Paper 002 Fig. 5 (model): efficiency per switch threshold")
        fig.tight_layout()
        return fig
