"""The scheduling model (paper 002) as a :class:`~balancebench.models.contract.Model`: its
Params schema, metric definitions, parameter checks, one run and the two figures. The
specification is the docstring of :mod:`balancebench.models.scheduling`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, ClassVar

import numpy as np

from balancebench.core.cost_model import plan_clock
from balancebench.core.schema import number_spec
from balancebench.generators.tasks import CLUSTERS
from balancebench.models.contract import Model, ModelPoint, ModelResult
from balancebench.models.scheduling.algorithms import (
    brute_force_optimum,
    makespan,
    node_loads,
    round_robin,
)
from balancebench.models.scheduling.node_readings import (
    NodeMetricsSource,
    ProcNodeMetrics,
    ProfileNodeMetrics,
)
from balancebench.models.scheduling.scheduling_strategies import STRATEGIES
from balancebench.models.scheduling.stream import simulate_stream, stream_capacity_per_s
from balancebench.models.scheduling.tasks_and_nodes import (
    SchedulingInput,
    input_from_dataset,
    input_from_params,
)

#: A run reports ``optimum_runtime_s`` only up to this many assignments (stays cheap).
RUN_OPTIMUM_LIMIT = 1 << 16
#: Points of the stream time series (equal bins over the stream's duration).
STREAM_BINS = 20
#: [interpreted] Default weight of each of the three terms of Ew.
ONE_THIRD = 1.0 / 3.0

#: Items of a per-node background amount (cores or GB busy on each node).
_PER_NODE_AMOUNT: dict[str, Any] = {"type": "number", "minimum": 0, "maximum": 1e6}


class SchedulingModel(Model):
    """Paper 002: round robin vs SWPTS vs ACTS vs the adaptive switch on a modelled
    heterogeneous cluster (see the docstring of :mod:`balancebench.models.scheduling`)."""

    name = "scheduling"
    reference = (
        "paper 002 (Wang, Zhao, Wang, adaptive load balancing for heterogeneous Flink "
        "clusters) §3.2 SWPTS, §3.3 ACTS, §4.3 runtime/throughput/latency"
    )
    #: The keys of :data:`~balancebench.models.scheduling.scheduling_strategies.STRATEGIES`.
    strategies = tuple(STRATEGIES)
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
        "plan_time_ms": "CPU time of the strategy's decision code (effective weights, "
        "placement, switch rule; ACTS when used), the thread's "
        "(balancebench.core.cost_model.plan_clock), milliseconds.",
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

        started = plan_clock()
        placement, decisions, use, switched, weights = STRATEGIES[point.strategy](
            params, readings, times, rr_placement, rng
        )
        plan_time_ms = (plan_clock() - started) * 1e3

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

    # --- figure ---

    def figure(self, results: list[tuple[ModelPoint, ModelResult]]) -> Any:
        """Paper 002 Figs. 6-9 as grouped bars per workload (cluster, parallelism = tasks),
        one bar per strategy (mean over repetitions): job runtime (Figs. 6-7), the
        stream's throughput ceiling (Fig. 8; below it the handled rate just equals the
        offered rate, so the ceiling is what a placement changes) and p99 latency (Fig. 9; the
        docs' readings give p99 too)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        if len({self._eps(point) for point, _ in results}) > 1:
            return self._eps_figure(results, plt)
        panels = (
            ("job_runtime_s", "job runtime (simulated s)"),
            ("stream_capacity_per_s", "stream throughput ceiling (events/s)"),
            ("latency_p99_s", "stream latency p99 (simulated s)"),
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
