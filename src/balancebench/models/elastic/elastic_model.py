"""The ``Model`` subclass: params schema, metric definitions, ``run`` and the Fig. 8 figure."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, ClassVar

import numpy as np

from balancebench.core.schema import integer_spec, number_spec
from balancebench.models.contract import Model, ModelPoint, ModelResult
from balancebench.models.elastic.elastic_strategies import STRATEGIES
from balancebench.models.elastic.phone_buckets import (
    SAMPLE_SCHEDULES,
    PhoneInput,
    read_phone_stream,
    sample_phone_stream,
    step_bucket_shares,
)
from balancebench.models.elastic.reconfiguration_rules import EPS, PROTOCOLS
from balancebench.models.elastic.time_steps import ElasticConfig, ElasticRun, simulate_elastic


class ElasticModel(Model):
    """Paper 001's elastic sub-cluster: thresholds, reconfiguration protocols, BalanceLoad."""

    name = "elastic"
    reference = "paper 001 §4 (reconfiguration, load balancing protocol 2), §5.2 Fig. 8"
    strategies: ClassVar[tuple[str, ...]] = tuple(STRATEGIES)
    dataset = "phone_stream"
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "protocol": {
            "type": "string",
            "enum": list(PROTOCOLS),
            "default": "window",
            "title": "elastic: reconfiguration protocol",
            "description": "window = window recreation (protocol 1), state = state recreation "
            "(checkpoint, serialize, buffer).",
        },
        "initial_nodes": integer_spec(
            15,
            "elastic: initial nodes",
            "Nodes at the start (paper: 15).",
            minimum=1,
            maximum=10_000,
        ),
        "min_nodes": integer_spec(
            1,
            "elastic: min nodes",
            "Fewest nodes decommissioning may leave.",
            minimum=1,
            maximum=10_000,
        ),
        "max_nodes": integer_spec(
            60,
            "elastic: max nodes",
            "Most nodes provisioning may reach (paper's cluster: 60).",
            minimum=1,
            maximum=10_000,
        ),
        "input_rate_tuples_per_s": number_spec(
            150_000.0,
            "elastic: input rate (tuples/s)",
            "Input rate of the sub-cluster (paper: 150,000 tuples/s).",
            exclusiveMinimum=0,
            maximum=1e12,
        ),
        "node_capacity_tuples_per_s": number_spec(
            14_286.0,
            "elastic: node capacity (tuples/s)",
            "Tuples/s one node processes at 100% CPU; default = 150,000 / (15 x TUT), so "
            "U_av starts at TUT.",
            exclusiveMinimum=0,
            maximum=1e12,
        ),
        "duration_s": number_spec(
            600.0,
            "elastic: duration (s)",
            "Simulated time (paper: >= 10 min stable phase).",
            exclusiveMinimum=0,
            maximum=1e7,
        ),
        "period_s": number_spec(
            5.0,
            "elastic: statistics period (s)",
            "Period of the master's statistics and decisions; the model's time step.",
            exclusiveMinimum=0,
            maximum=1e6,
        ),
        "tut": number_spec(
            0.7,
            "elastic: TUT",
            "Target utilisation of the new-configuration rule [interpreted value].",
            exclusiveMinimum=0,
            maximum=10,
        ),
        "uut": number_spec(
            0.9,
            "elastic: UUT",
            "Upper utilisation threshold: provision above it [interpreted value].",
            exclusiveMinimum=0,
            maximum=10,
        ),
        "lut": number_spec(
            0.5,
            "elastic: LUT",
            "Lower utilisation threshold: decommission below it [interpreted value].",
            minimum=0,
            maximum=10,
        ),
        "uit": number_spec(
            0.05,
            "elastic: UIT",
            "Imbalance threshold on the std of utilisation: BalanceLoad above it "
            "[interpreted value].",
            minimum=0,
            maximum=10,
        ),
        "min_improvement": number_spec(
            1e-3,
            "elastic: BalanceLoad min improvement",
            "BalanceLoad stops when a move lowers U_sd by less than this share of U_av.",
            minimum=0,
            maximum=1,
        ),
        "buckets": integer_spec(
            1024,
            "elastic: buckets",
            "Buckets B of the bucket map proxy.",
            minimum=1,
            maximum=65_536,
        ),
        "window_s": number_spec(
            10.0,
            "elastic: window (s)",
            "Window length of the per-number count [interpreted value].",
            exclusiveMinimum=0,
            maximum=1e6,
        ),
        "slide_s": number_spec(
            2.0,
            "elastic: slide (s)",
            "Slide of the window (= window: tumbling); window must be a multiple.",
            exclusiveMinimum=0,
            maximum=1e6,
        ),
        "transfer_latency_s": number_spec(
            0.05,
            "elastic: checkpoint latency (s)",
            "Fixed cost of shipping a checkpoint (state protocol) [interpreted value].",
            minimum=0,
            maximum=1e4,
        ),
        "bandwidth_mb_per_s": number_spec(
            1250.0,
            "elastic: bandwidth (MB/s)",
            "Link bandwidth for checkpoints (paper: 10 Gb Ethernet).",
            exclusiveMinimum=0,
            maximum=1e7,
        ),
        "tuple_bytes": number_spec(
            64.0,
            "elastic: tuple size (bytes)",
            "Serialized size of one state tuple [interpreted value].",
            exclusiveMinimum=0,
            maximum=1e9,
        ),
        "rate_step_at_s": number_spec(
            300.0,
            "elastic: rate step time (s)",
            "From this simulated time the input rate is multiplied by rate_step_factor.",
            minimum=0,
            maximum=1e7,
        ),
        "rate_step_factor": number_spec(
            1.0,
            "elastic: rate step factor",
            "Input-rate multiplier from rate_step_at_s (1 = constant rate; 2 = doubling).",
            exclusiveMinimum=0,
            maximum=1000,
        ),
        "sample_schedule": {
            "type": "string",
            "enum": list(SAMPLE_SCHEDULES),
            "default": "mean_shift",
            "title": "elastic: built-in stream",
            "description": "Without a dataset: mean_shift (mean 2000 -> 8000, sigma 100, 4 steps "
            "x 2 cycles) or sigma_shrink (mean 5000, sigma 100 -> 25 in 25 steps).",
        },
        "sample_tuples": integer_spec(
            200_000,
            "elastic: built-in stream tuples",
            "Tuples of the built-in stream (no dataset).",
            minimum=1_000,
            maximum=100_000_000,
        ),
    }
    metric_definitions: ClassVar[dict[str, str]] = {
        "utilization_mean": "[per period] mean over active nodes of offered utilisation U_i = "
        "tuples/s routed to node i (duplicates included) / node capacity (ratio).",
        "utilization_std": "[per period] population std over active nodes of U_i (ratio).",
        "utilization_max": "[per period] max over active nodes of U_i (ratio).",
        "nodes": "[per period] active nodes (count).",
        "moved_buckets": "[per period] buckets whose owner the decision at the period's end "
        "changed (count).",
        "backlog_tuples": "[per period] tuples queued on active nodes at the period's end.",
        "utilization_mean_mean": "Mean over periods of utilization_mean (ratio).",
        "utilization_std_mean": "Mean over periods of utilization_std (ratio).",
        "utilization_std_max": "Max over periods of utilization_std (ratio).",
        "utilization_std_above_uit_share": "Share of periods whose utilization_std exceeds UIT.",
        "nodes_mean": "Mean over periods of active nodes (count).",
        "nodes_max": "Max over periods of active nodes (count).",
        "nodes_final": "Active nodes in the last period (count).",
        "reconfigurations_total": "Decisions that changed the node count or moved a bucket "
        "(count).",
        "moved_buckets_total": "Bucket owner changes over the run (count).",
        "duplicated_tuples_total": "Tuples sent to both the old and the new task by window "
        "recreation, [startTS, endTS) of each moved bucket (tuples).",
        "reconfiguration_duration_s_mean": "Mean over reconfigurations of the longest protocol "
        "run among its buckets: endTS - startTS (window) or checkpoint transfer (state), s.",
        "serialized_state_tuples_total": "Tuples in the open windows of moved buckets that state "
        "recreation checkpoints and ships (tuples).",
        "buffered_tuples_total": "Tuples the new task buffers until the checkpoint arrives "
        "(state recreation, tuples).",
        "backlog_tuples_max": "Max over periods of backlog_tuples (tuples).",
        "plan_time_ms": "Mean CPU time of one controller decision (new-configuration rule, "
        "provision/offload, BalanceLoad), the thread's "
        "(balancebench.core.cost_model.plan_clock), ms; 0 for elastic_static.",
        "latency_p50_s": "Median tuple sojourn (M/M/1 per node and period, shifted by the fluid "
        "backlog wait; buffered tuples add half the transfer), simulated s.",
        "latency_p95_s": "95th percentile of the same sojourn, simulated s.",
        "latency_p99_s": "99th percentile of the same sojourn, simulated s.",
        "throughput_tuples_per_s": "Input tuples processed per simulated second (capacity-capped, "
        "backlog carried over, processing of duplicates excluded).",
        "imbalance_max_over_mean": "Mean over periods of max/mean - 1 of U_i over active nodes.",
    }

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        p = super().check_params(params)
        if not p["lut"] < p["tut"] < p["uut"]:
            raise ValueError(
                f"elastic_tut: lut={p['lut']}, tut={p['tut']}, uut={p['uut']} are not ordered; "
                "allowed: lut < tut < uut"
            )
        if not p["min_nodes"] <= p["initial_nodes"] <= p["max_nodes"]:
            raise ValueError(
                f"elastic_initial_nodes: {p['initial_nodes']} is outside [min_nodes, max_nodes] = "
                f"[{p['min_nodes']}, {p['max_nodes']}]; allowed: min_nodes <= initial_nodes "
                "<= max_nodes"
            )
        ratio = p["window_s"] / p["slide_s"]
        if ratio < 1 - EPS or abs(ratio - round(ratio)) > 1e-6:
            raise ValueError(
                f"elastic_window_s: {p['window_s']} is not a multiple of slide_s={p['slide_s']}; "
                "allowed: window_s = m x slide_s with integer m >= 1"
            )
        periods = p["duration_s"] / p["period_s"]
        if periods < 1 - EPS or abs(periods - round(periods)) > 1e-6:
            raise ValueError(
                f"elastic_period_s: duration_s={p['duration_s']} is not a multiple of "
                f"period_s={p['period_s']}; allowed: duration_s = j x period_s with integer j >= 1"
            )
        return p

    def run(self, point: ModelPoint) -> ModelResult:
        params = self.check_params(point.params)
        self.check_strategy(point.strategy)
        rng = np.random.default_rng(point.seed)
        if point.dataset_dir:
            stream = read_phone_stream(point.dataset_dir)
        else:
            stream = sample_phone_stream(params["sample_schedule"], params["sample_tuples"], rng)
        shares = step_bucket_shares(stream, params["buckets"])
        config = ElasticConfig.from_params(point.strategy, params)
        sim = simulate_elastic(shares, config, rng)
        return result_of(sim, config, stream, n_stream_tuples=len(stream.keys))

    def figure(self, results: list[tuple[ModelPoint, ModelResult]]) -> Any:
        return elastic_figure(results)


def result_of(
    sim: ElasticRun, config: ElasticConfig, stream: PhoneInput, n_stream_tuples: int
) -> ModelResult:
    """The ``ModelResult`` of one simulation (metrics, series, info)."""
    std = np.asarray(sim.utilization_std)
    metrics = {
        "plan_time_ms": float(np.mean(sim.plan_times_ms)) if sim.plan_times_ms else 0.0,
        "latency_p50_s": sim.latency_s["p50"],
        "latency_p95_s": sim.latency_s["p95"],
        "latency_p99_s": sim.latency_s["p99"],
        "throughput_tuples_per_s": sim.processed_input_tuples / config.duration_s,
        "imbalance_max_over_mean": float(np.mean(sim.imbalance)),
        "utilization_mean_mean": float(np.mean(sim.utilization_mean)),
        "utilization_std_mean": float(std.mean()),
        "utilization_std_max": float(std.max()),
        "utilization_std_above_uit_share": float(np.mean(std > config.uit)),
        "nodes_mean": float(np.mean(sim.nodes)),
        "nodes_max": float(np.max(sim.nodes)),
        "nodes_final": float(sim.nodes[-1]),
        "reconfigurations_total": float(len(sim.reconfigurations)),
        "moved_buckets_total": float(np.sum(sim.moved_buckets)),
        "duplicated_tuples_total": sim.duplicated_tuples,
        "reconfiguration_duration_s_mean": float(np.mean(sim.durations_s))
        if sim.durations_s
        else 0.0,
        "serialized_state_tuples_total": sim.serialized_state_tuples,
        "buffered_tuples_total": sim.buffered_tuples,
        "backlog_tuples_max": float(np.max(sim.backlog_tuples)),
    }
    series = {
        "utilization_mean": sim.utilization_mean,
        "utilization_std": sim.utilization_std,
        "utilization_max": sim.utilization_max,
        "nodes": [float(n) for n in sim.nodes],
        "moved_buckets": [float(n) for n in sim.moved_buckets],
        "backlog_tuples": sim.backlog_tuples,
    }
    info = {
        "strategy": config.strategy,
        "protocol": config.protocol,
        "experiment": stream.experiment,
        "uit": config.uit,
        "stream_tuples": n_stream_tuples,
        "schedule_mu": [float(x) for x in stream.mu],
        "schedule_sigma": [float(x) for x in stream.sigma],
        "reconfigurations": sim.reconfigurations[:500],
        "reconfigurations_listed": min(len(sim.reconfigurations), 500),
        "buckets_per_node_final": sim.bucket_counts_final,
        "events_definition": "(period, bucket) rate updates + bucket moves + reconfigurations",
    }
    return ModelResult(
        metrics=metrics, series=series, time_s=sim.time_s, events=sim.events, info=info
    )


_TITLES = {
    "mean_shift": "mean moves 2000 -> 8000",
    "sigma_shrink": "sigma 100 -> 25 in 25 steps",
    "constant": "constant distribution",
}


def elastic_figure(results: list[tuple[ModelPoint, ModelResult]]) -> Any:
    """Fig. 8 of paper 001: utilisation mean (top) and std (bottom) over simulated time,
    one column per experiment, one line per strategy (and protocol when both occur),
    repetitions averaged; the grey dashed line is UIT."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    protocols = {r.info.get("protocol") for _, r in results}
    groups: dict[str, dict[str, list[ModelResult]]] = defaultdict(lambda: defaultdict(list))
    for point, res in results:
        label = point.strategy + (f" ({res.info.get('protocol')})" if len(protocols) > 1 else "")
        groups[res.info.get("experiment", "constant")][label].append(res)
    experiments = sorted(groups) or ["constant"]
    fig, axes = plt.subplots(
        2, len(experiments), figsize=(6 * len(experiments), 6.5), sharex="col", squeeze=False
    )
    for col, exp in enumerate(experiments):
        top, bottom = axes[0][col], axes[1][col]
        uit = None
        for index, (label, runs) in enumerate(sorted(groups[exp].items())):
            n = min(len(r.time_s) for r in runs)
            t = np.asarray(runs[0].time_s[:n])
            mean = np.mean([r.series["utilization_mean"][:n] for r in runs], axis=0)
            std = np.mean([r.series["utilization_std"][:n] for r in runs], axis=0)
            drawn = STRATEGIES.get(label.split(" ")[0])
            marker = drawn.marker if drawn else None
            every = max(1, n // 20)
            # A line style per label: equal series (e.g. elastic_scaling and elastic_static
            # before the first scale-out) stay visible on top of each other.
            style = {
                "marker": marker,
                "markevery": every,
                "ms": 4,
                "ls": _LINE_STYLES[index % len(_LINE_STYLES)],
                "lw": 2.2 - 0.5 * (index % 3),
                "label": label,
            }
            top.plot(t, mean, **style)
            bottom.plot(t, std, **style)
            uit = runs[0].info.get("uit", uit)
        if uit is not None:
            bottom.axhline(uit, color="grey", ls="--", lw=1, label="UIT")
        top.set_title(_TITLES.get(exp, exp))
        top.set_ylabel("CPU utilisation mean (ratio)")
        bottom.set_ylabel("CPU utilisation std (ratio)")
        bottom.set_xlabel("simulated time (s)")
    # One legend under the panels: inside a panel it covered the UIT line.
    handles, labels = axes[1][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=max(1, len(labels)), fontsize=8)
    fig.suptitle("Paper 001 Fig. 8: utilisation with and without load balancing (model)")
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


_LINE_STYLES = ("-", "--", ":", "-.")
