"""Paper 002 as a model: task scheduling on a heterogeneous Flink cluster.

Paper 002 (Wang, Zhao, Wang, "adaptive load balancing for heterogeneous Flink
clusters") replaces Flink's default round-robin slot assignment with an adaptive
scheduler: **SWPTS** (smooth weighted round robin over nodes weighted by their free CPU,
free memory and total memory, §3.2) for the initial placement, and **ACTS** (ant colony
task scheduling, §3.3) once the cluster's resource use exceeds ``eps`` = 80 %. Its
cluster (a master and two slaves, 4 cores / 4 GB and 2 cores / 2 GB, §4.2) cannot be
built here, so this package models it:

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
  over time). ``plan_time_ms``: CPU time of the decision code (weights, placement,
  switch rule), not the metrics read (the paper caches it; ``/proc`` sampling sleeps).

Left out: Flink's slot sharing and co-location constraints, network transfer between
operators, task migration cost on an ACTS re-placement, the master node, JVM effects,
the Redis sink of the ad join, and the paper's TPC-C data (any text file can be cut
into tasks by the ``tasks`` generator). With ``node_metrics = proc`` the readings (and so
``cluster_use_share``) vary run to run; the placement on the single node does not.

Layout: ``node_readings`` (the readings and their sources), ``algorithms`` (SWPTS, round
robin, ACTS, makespan, the optimum, the switch rule's cluster use; pure), ``stream``
(the ad-join stream under a placement), ``tasks_and_nodes`` (tasks and nodes),
``scheduling_strategies`` (one placement function per strategy, registered in
``STRATEGIES``) and ``scheduling_model`` (``SchedulingModel``: Params, metrics, checks,
run, figures). The public names are
re-exported here.
"""

from balancebench.models.scheduling.algorithms import (
    BRUTE_FORCE_BLOCK,
    BRUTE_FORCE_LIMIT,
    acts_schedule,
    brute_force_optimum,
    cluster_resource_use,
    effective_weights,
    makespan,
    node_loads,
    round_robin,
    smooth_weighted_round_robin,
)
from balancebench.models.scheduling.node_readings import (
    NodeMetrics,
    NodeMetricsSource,
    ProcNodeMetrics,
    ProfileNodeMetrics,
    parse_proc_meminfo,
    parse_proc_stat_cpu,
    per_node,
)
from balancebench.models.scheduling.scheduling_model import (
    ONE_THIRD,
    RUN_OPTIMUM_LIMIT,
    STREAM_BINS,
    SchedulingModel,
)
from balancebench.models.scheduling.scheduling_strategies import (
    STRATEGIES,
    Placement,
    PlaceStrategy,
    place_acts,
    place_adaptive,
    place_round_robin,
    place_swpts,
)
from balancebench.models.scheduling.stream import (
    StreamResult,
    simulate_stream,
    stream_capacity_per_s,
)
from balancebench.models.scheduling.tasks_and_nodes import (
    SchedulingInput,
    input_from_dataset,
    input_from_params,
)

__all__ = [
    "BRUTE_FORCE_BLOCK",
    "BRUTE_FORCE_LIMIT",
    "ONE_THIRD",
    "RUN_OPTIMUM_LIMIT",
    "STRATEGIES",
    "STREAM_BINS",
    "NodeMetrics",
    "NodeMetricsSource",
    "PlaceStrategy",
    "Placement",
    "ProcNodeMetrics",
    "ProfileNodeMetrics",
    "SchedulingInput",
    "SchedulingModel",
    "StreamResult",
    "acts_schedule",
    "brute_force_optimum",
    "cluster_resource_use",
    "effective_weights",
    "input_from_dataset",
    "input_from_params",
    "makespan",
    "node_loads",
    "parse_proc_meminfo",
    "parse_proc_stat_cpu",
    "per_node",
    "place_acts",
    "place_adaptive",
    "place_round_robin",
    "place_swpts",
    "round_robin",
    "simulate_stream",
    "smooth_weighted_round_robin",
    "stream_capacity_per_s",
]
