"""The overlay model as a :class:`~balancebench.models.contract.Model`: its Params schema,
metric definitions, the run (network, input, initial placement, simulation) and the figure
of paper 004's figures 1-4."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from balancebench.core.cost_model import plan_clock
from balancebench.core.schema import integer_spec, number_spec
from balancebench.generators.common import load_manifest, read_table
from balancebench.models.contract import Model, ModelPoint, ModelResult, registered
from balancebench.models.overlay.overlay_strategies import STRATEGIES
from balancebench.models.overlay.periods import simulate_overlay
from balancebench.models.overlay.source_chains import (
    build_input,
    period_rates,
    synthetic_onoff_phases,
)
from balancebench.models.overlay.topology import build_network

PARAM_SCHEMA: dict[str, dict[str, Any]] = {
    "nodes": integer_spec(
        100, "Hosts", "Hosts of the overlay (paper 004: 100).", minimum=2, maximum=10_000
    ),
    "subnets": integer_spec(
        10, "Subnets", "Subnets the hosts are split into (paper: 10).", minimum=1, maximum=10_000
    ),
    "k": integer_spec(
        8,
        "Tree arity k",
        "Children per inner node of the k-ary tree (paper: 8).",
        minimum=2,
        maximum=64,
    ),
    "eps": number_spec(
        0.1,
        "State threshold eps",
        "High: L >= Lbar + eps, low: L <= Lbar - eps (share of a host) [reconstructed value].",
        minimum=0.0,
        maximum=1.0,
    ),
    "period_s": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 3600,
        "default": 1.0,
        "title": "Period (s)",
        "description": "Statistics and balancing period (simulated seconds).",
    },
    "duration_s": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 1e7,
        "default": 20.0,
        "title": "Duration (s)",
        "description": "Simulated time (paper 004's figures: 20 s); at most the dataset's.",
    },
    "stats_window_periods": integer_spec(
        5,
        "Statistics window",
        "Periods of load history used by each round.",
        minimum=1,
        maximum=10_000,
    ),
    "target_load": number_spec(
        0.8,
        "Average load",
        "Expected offered work / capacity of all hosts (paper: 0.8; swept 0-0.8); the "
        "dataset's rates are rescaled to it.",
        minimum=0.0,
        maximum=1.0,
    ),
    "node_capacity_tuples_per_s": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 1e12,
        "default": 1000.0,
        "title": "Host capacity (tuples/s)",
        "description": "Source tuples per second one nominal host processes along chains.",
    },
    "chain_length": integer_spec(
        4,
        "Operators per source",
        "Chain of operators each source feeds [reconstructed].",
        minimum=1,
        maximum=100,
    ),
    "landmarks": integer_spec(
        4, "Landmarks", "Landmark hosts of the delay vectors (paper: n).", minimum=1, maximum=64
    ),
    "hilbert_bits": integer_spec(
        3,
        "Hilbert bits",
        "Quantisation bits per delay dimension (paper: 2^m >= k).",
        minimum=1,
        maximum=16,
    ),
    "intra_subnet_delay_s": number_spec(
        0.001,
        "Intra-subnet delay (s)",
        "Host-to-host delay in one subnet.",
        minimum=0.0,
        maximum=10.0,
    ),
    "inter_subnet_delay_s": number_spec(
        0.02,
        "Inter-subnet delay (s)",
        "Extra delay across two forwarding devices.",
        minimum=0.0,
        maximum=10.0,
    ),
    "delay_jitter": number_spec(
        0.5,
        "Delay jitter",
        "Edge delays x U[1 - jitter, 1 + jitter] [reconstructed].",
        minimum=0.0,
        maximum=0.99,
    ),
    "cpu_speed_spread": number_spec(
        0.0,
        "CPU speed spread",
        "Host speeds U[1 - s, 1 + s], mean 1 (0: identical).",
        minimum=0.0,
        maximum=0.9,
    ),
    "rho_cap": number_spec(
        0.95,
        "Utilisation cap",
        "M/M/1 inflation 1/(1 - min(rho, cap)) [reconstructed].",
        minimum=0.0,
        maximum=0.999,
    ),
    "operator_state_mb": number_spec(
        1.0,
        "Operator state (MB)",
        "State moved with an operator [reconstructed].",
        minimum=0.0,
        maximum=1e6,
    ),
    "intra_subnet_bandwidth_mb_per_s": number_spec(
        100.0,
        "Intra-subnet bandwidth (MB/s)",
        "Bandwidth of a migration inside a subnet [reconstructed].",
        exclusiveMinimum=0,
        maximum=1e6,
    ),
    "inter_subnet_bandwidth_mb_per_s": number_spec(
        5.0,
        "Inter-subnet bandwidth (MB/s)",
        "Bandwidth across forwarding devices (the paper throttles them).",
        exclusiveMinimum=0,
        maximum=1e6,
    ),
    "ldi_min_load": number_spec(
        0.01,
        "LDI remainder delta",
        "A low entry is kept while its remainder > delta.",
        minimum=0.0,
        maximum=1.0,
    ),
    "ldi_match_min_entries": integer_spec(
        1,
        "LDI list delta",
        "A tree node matches when its lists hold more entries.",
        minimum=0,
        maximum=10_000,
    ),
    "synthetic_sources": integer_spec(
        100,
        "Sources (no dataset)",
        "On/off sources when no dataset is given.",
        minimum=1,
        maximum=100_000,
    ),
}


class OverlayModel(Model):
    """Paper 004's overlay load balancing vs random and Borealis (see the package doc,
    :mod:`balancebench.models.overlay`)."""

    name: ClassVar[str] = "overlay"
    reference: ClassVar[str] = (
        "paper 004 (Wang, Rong, Ding, Computer Engineering 2008) §2 algorithm, §3 experiment"
    )
    strategies: ClassVar[tuple[str, ...]] = tuple(STRATEGIES)
    dataset: ClassVar[str] = "onoff"
    param_schema: ClassVar[dict[str, dict[str, Any]]] = PARAM_SCHEMA
    metric_definitions: ClassVar[dict[str, str]] = {
        "plan_time_ms": "Mean CPU time of one balancing round's decision code (the "
        "thread's, balancebench.core.cost_model.plan_clock), milliseconds.",
        "latency_p50_s": "Median tuple latency (queueing + network + migration pauses along "
        "the source's chain), simulated seconds. The model computes one mean latency per "
        "(source, period) and gives it to every tuple of that cell (weight = its tuples), so "
        "the percentiles are over cells: the spread within a cell is not modelled and p95/p99 "
        "understate a per-tuple tail.",
        "latency_p95_s": "95th percentile of the same per-(source, period) latency, "
        "tuple-weighted, seconds.",
        "latency_p99_s": "99th percentile of the same per-(source, period) latency, "
        "tuple-weighted, seconds.",
        "latency_s_mean": "Tuple-weighted mean of the same latency over the run, seconds.",
        "throughput_tuples_per_s": "Source tuples processed per simulated second (offered x "
        "share of offered work not left in backlogs at the end).",
        "imbalance_max_over_mean": "Mean over periods of max / mean - 1 of host load "
        "(utilisation in the period).",
        "load_fluctuation_mean": "Mean over periods of load_fluctuation (variance, share^2).",
        "load_spread_across_hosts_mean": "Mean over periods of load_spread_across_hosts.",
        "load_moved_total": "Sum over rounds of load_moved (share of a host).",
        "load_moved_mean": "Mean over rounds of load_moved (share of a host).",
        "average_load_mean": "Mean over periods of average_load (realized average load).",
        "moves": "Operator migrations over the run.",
        "messages": "Control messages over the run (load collection, LDI forwards, 2 per move).",
        "move_delay_mean_s": "Mean network delay between the two hosts of a migration, seconds.",
        "moves_intra_subnet_share": "Share of migrations inside one subnet.",
        "load_fluctuation": (
            "[per period] Paper 004's D(VN(i)): variance of each host's load (utilisation) "
            "over the last stats_window_periods periods, averaged over hosts."
        ),
        "load_spread_across_hosts": "[per period] std over hosts of host load (utilisation).",
        "load_moved": "[per round] sum over hosts of the operator load (window mean, share "
        "of the source host's capacity) moved out, divided by the hosts (paper: sum l_i / n).",
        "latency_s": "[per period] tuple-weighted mean latency of the period's tuples, seconds.",
        "latency_p95_s_by_period": "[per period] 95th percentile of the same latency, seconds.",
        "average_load": "[per period] mean host load (utilisation, share of capacity).",
    }

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        values = super().check_params(params)
        periods = values["duration_s"] / values["period_s"]
        if periods < 2:
            raise ValueError(
                f"overlay_duration_s: {values['duration_s']} s is {periods:.3g} periods of "
                f"overlay_period_s {values['period_s']}; allowed: at least 2 periods"
            )
        if periods > 1_000_000:
            raise ValueError(
                f"overlay_duration_s: {periods:.3g} periods; allowed: at most 1e6 periods"
            )
        if values["subnets"] > values["nodes"]:
            raise ValueError(
                f"overlay_subnets: {values['subnets']} subnets for {values['nodes']} hosts; "
                f"allowed: at most overlay_nodes"
            )
        if values["landmarks"] > values["nodes"]:
            raise ValueError(
                f"overlay_landmarks: {values['landmarks']} landmarks for {values['nodes']} "
                f"hosts; allowed: at most overlay_nodes"
            )
        if values["hilbert_bits"] * values["landmarks"] > 48:
            raise ValueError(
                f"overlay_hilbert_bits: {values['hilbert_bits']} bits x "
                f"{values['landmarks']} landmarks; allowed: product at most 48"
            )
        return values

    def source_rates(self, point: ModelPoint, params: dict[str, Any], seed: int) -> np.ndarray:
        """``(sources, periods)`` rates (tuples/s) rescaled to ``target_load``."""
        periods = int(params["duration_s"] / params["period_s"] + 1e-9)
        capacity = float(params["node_capacity_tuples_per_s"]) * int(params["nodes"])
        if point.dataset_dir is not None:
            manifest = load_manifest(point.dataset_dir)
            if manifest.generator != self.dataset:
                raise ValueError(
                    f"dataset_dir: a {manifest.generator!r} dataset; allowed: {self.dataset!r}"
                )
            onoff = manifest.params
            if params["duration_s"] > onoff["onoff_duration_s"] + 1e-9:
                raise ValueError(
                    f"overlay_duration_s: {params['duration_s']} s exceeds the dataset's "
                    f"onoff_duration_s {onoff['onoff_duration_s']}; allowed: at most that"
                )
            phases = read_table(point.dataset_dir, manifest, "phases").to_pandas()
        else:
            phases, onoff = synthetic_onoff_phases(
                int(params["synthetic_sources"]), params["duration_s"], capacity, seed
            )
        scale = (
            params["target_load"]
            * capacity
            / (onoff["onoff_target_load"] * onoff["onoff_capacity_tuples_per_s"])
        )
        rates = period_rates(phases, int(onoff["onoff_sources"]), params["period_s"], periods)
        return rates * scale

    def run(self, point: ModelPoint) -> ModelResult:
        params = self.check_params(point.params)
        self.check_strategy(point.strategy)
        strategy = registered(STRATEGIES, point.strategy)
        base = np.random.default_rng(point.seed)
        network_rng, input_rng, placement_rng, strategy_rng = base.spawn(4)
        network = build_network(params, network_rng)
        rates = self.source_rates(point, params, int(input_rng.integers(1 << 31)))
        data = build_input(rates, params, input_rng)
        nodes = int(params["nodes"])
        placement = placement_rng.integers(0, nodes, data.op_load.shape[0])
        initial_plan_ms = 0.0
        started = plan_clock()
        informed = strategy.initial_placement(data.op_load, network.speed, params)
        if informed is not None:  # the strategy's own start (borealis) replaces the random one
            placement = informed
            initial_plan_ms = (plan_clock() - started) * 1000
        result = simulate_overlay(data, network, point.strategy, placement, params, strategy_rng)
        result.info.update(
            sources=int(rates.shape[0]),
            operators=int(data.op_load.shape[0]),
            subnet_of_host=network.subnet.tolist(),
            landmarks=network.landmarks.tolist(),
            ring_id=network.ring_id.tolist(),
            ring_space=int(network.ring_space),
            tree_nodes=len(network.tree.nodes),
            tree_depth=int(network.tree.depth),
            initial_plan_time_ms=initial_plan_ms,
        )
        return result

    def figure(self, results: list[tuple[ModelPoint, ModelResult]]) -> Any:
        """Paper 004 figures 1-4: load fluctuation, load moved and latency over time (at
        the target load nearest 0.8), and latency vs average load (one line per strategy)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(2, 2, figsize=(11, 8))
        loads = sorted({float(p.params.get("target_load", 0.8)) for p, _ in results})
        shown = min(loads, key=lambda x: abs(x - 0.8)) if loads else 0.8
        panels = (
            (axes[0, 0], "load_fluctuation", 1.0, "Load fluctuation D(VN(i)) (variance)"),
            (axes[0, 1], "load_moved", 100.0, "Load moved (% of a host, mean over hosts)"),
            (axes[1, 0], "latency_s", 1.0, "Latency (s, tuple-weighted mean)"),
        )
        strategies = [s for s in self.strategies if any(p.strategy == s for p, _ in results)]
        for strategy in strategies:
            chosen = [
                r
                for p, r in results
                if p.strategy == strategy and float(p.params.get("target_load", 0.8)) == shown
            ]
            for ax, name, factor, label in panels:
                if not chosen:
                    continue
                n = min(len(r.time_s) for r in chosen)
                if name == "load_moved":
                    n -= 1  # no round follows the last period: its 0 is not a measurement
                values = np.mean([r.series[name][:n] for r in chosen], axis=0) * factor
                ax.plot(chosen[0].time_s[:n], values, label=strategy)
                ax.set_xlabel("Time (s)")
                ax.set_ylabel(label)
            xs, ys = [], []
            for load in loads:
                at = [
                    r.metrics["latency_s_mean"]
                    for p, r in results
                    if p.strategy == strategy and float(p.params.get("target_load", 0.8)) == load
                ]
                if at:
                    xs.append(load)
                    ys.append(float(np.mean(at)))
            axes[1, 1].plot(xs, ys, marker="o", label=strategy)
        axes[1, 1].set_xlabel("Average load (share of capacity)")
        axes[1, 1].set_ylabel("Latency (s, tuple-weighted mean)")
        if len(loads) < 2:
            axes[1, 1].set_title("latency vs load needs several target_load values")
        titles = ("Fig. 1 load fluctuation", "Fig. 2 load moved", "Fig. 3 latency over time")
        for (ax, *_), title in zip(panels, titles, strict=True):
            ax.set_title(f"{title} (load {shown:g})")
            ax.legend()
        axes[1, 1].legend()
        fig.suptitle("Paper 004 model: overlay load balancing")
        fig.tight_layout()
        return fig
