"""``BackpressureModel``: paper 003's Params schema, metric definitions, the run (input
packets -> ``packet_network.Network`` with the strategy from
``backpressure_strategies.STRATEGIES``) and the figure."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from balancebench.core.lazy import lazy_module
from balancebench.core.schema import array_spec, integer_spec, positive_number_spec, share_spec
from balancebench.models.backpressure.backpressure_strategies import STRATEGIES
from balancebench.models.backpressure.migration_rules import (
    BW_NORMALISATIONS,
    FLOW_CONTROLS,
    RECOVERY_RULES,
    STOP_RESUME,
    combine_partials,
    completed_fraction_series,
    expand_segments,
)
from balancebench.models.backpressure.packet_input import (
    PACKET_COLUMNS,
    load_packets,
    synthetic_packets,
)
from balancebench.models.backpressure.packet_network import (
    DATA_SOURCE_PAUSES,
    SERVICE_DISTRIBUTIONS,
    Network,
)
from balancebench.models.contract import Model, ModelPoint, ModelResult

# Loaded on first use: the model registry and its Params are read without it (lazy.py).
pd = lazy_module("pandas")

#: Paper 003 Fig. 7's volume (MB): its completion curve is drawn when a run includes it.
FIG7_TOTAL_MB = 1000.0

#: Items of the per-branch Params (one value per branch).
_BRANCH_NUMBER: dict[str, Any] = {"type": "number", "exclusiveMinimum": 0, "maximum": 1e9}
_BRANCH_INTEGER: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": 10**6}


class BackpressureModel(Model):
    """Paper 003: data migration vs credit-based flow control on a 5-node network."""

    name: ClassVar[str] = "backpressure"
    reference: ClassVar[str] = (
        "paper 003 (Sun, Ding, Xu 2022): §2 Algorithm 1, §2.1 detection and branch scores, "
        "§2.2 result correctness, §3 NS-3 experiment (Figs. 3-8, Tables 1-2)"
    )
    #: The keys of ``backpressure_strategies.STRATEGIES`` (credit, migration).
    strategies: ClassVar[tuple[str, ...]] = tuple(STRATEGIES)
    dataset: ClassVar[str] = "packets"
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "source_service_rate_mb_per_s": positive_number_spec(
            1000.0, "Source service rate (MB/s)", "[reconstructed] Splitter's service rate."
        ),
        "branch_service_rate_mb_per_s": array_spec(
            _BRANCH_NUMBER,
            [35.0, 45.0, 60.0],
            "Branch service rates (MB/s)",
            "[reconstructed] Each branch node's consumer rate (heterogeneous nodes). One value "
            "per branch.",
            minItems=1,
            maxItems=64,
        ),
        "sink_service_rate_mb_per_s": positive_number_spec(
            500.0, "Sink service rate (MB/s)", "[reconstructed] Output node's counting rate."
        ),
        "source_link_bandwidth_mb_per_s": array_spec(
            _BRANCH_NUMBER,
            [200.0, 150.0, 250.0],
            "Source -> branch bandwidths (MB/s)",
            "[reconstructed] Bandwidth of the link from the source to each branch. One value per "
            "branch.",
            minItems=1,
            maxItems=64,
        ),
        "sink_link_bandwidth_mb_per_s": array_spec(
            _BRANCH_NUMBER,
            [100.0, 150.0, 200.0],
            "Branch -> sink bandwidths (MB/s)",
            "[reconstructed] Bandwidth of the link from each branch to the sink. One value per "
            "branch.",
            minItems=1,
            maxItems=64,
        ),
        "source_link_delay_s": array_spec(
            _BRANCH_NUMBER,
            [0.002, 0.005, 0.003],
            "Source -> branch delays (s)",
            "[reconstructed] Propagation delay of the link from the source to each branch "
            "(signals back to the source take the same delay). One value per branch.",
            minItems=1,
            maxItems=64,
        ),
        "sink_link_delay_s": array_spec(
            _BRANCH_NUMBER,
            [0.004, 0.002, 0.006],
            "Branch -> sink delays (s)",
            "[reconstructed] Propagation delay of the link from each branch to the sink. One "
            "value per branch.",
            minItems=1,
            maxItems=64,
        ),
        "source_queue_packets": integer_spec(
            64,
            "Source queue (packets)",
            "[reconstructed] Fixed queue length of the source.",
            minimum=1,
            maximum=10**6,
        ),
        "branch_queue_packets": array_spec(
            _BRANCH_INTEGER,
            [32, 32, 32],
            "Branch queues (packets)",
            "[reconstructed] Fixed queue length of each branch node. One value per branch.",
            minItems=1,
            maxItems=64,
        ),
        "sink_queue_packets": integer_spec(
            64,
            "Sink queue (packets)",
            "[reconstructed] Fixed queue length of the sink.",
            minimum=1,
            maximum=10**6,
        ),
        "resume_share": share_spec(
            0.5,
            "Resume level",
            "Paper 003: a stopped node sends 'resume' when its queue is down to this share.",
        ),
        "service_time_distribution": {
            "type": "string",
            "enum": list(SERVICE_DISTRIBUTIONS),
            "default": "deterministic",
            "title": "Service times",
            "description": "[reconstructed] size / rate exactly, or exponential with that mean.",
        },
        "credit_interval_s": positive_number_spec(
            0.05,
            "Credit interval (s)",
            "[reconstructed] How often a receiver grants its free slots as credits.",
        ),
        "detection_interval_s": positive_number_spec(
            0.5,
            "Detection interval (s)",
            "[reconstructed] How often the migration strategy checks, scores and recovers.",
        ),
        "backpressure_queue_share": share_spec(
            0.8,
            "Back-pressure queue use",
            "Paper 003: a node is back-pressured above this queue use (and input > output).",
        ),
        "recovery_queue_share": share_spec(
            0.3,
            "Recovery queue use",
            "[reconstructed] Listed nodes below this queue use end the migration.",
        ),
        "recovery_rule": {
            "type": "string",
            "enum": list(RECOVERY_RULES),
            "default": "any_listed",
            "title": "Recovery rule",
            "description": "any_listed (the paper's step 5): default routing once any listed "
            "node is below the recovery level; all_listed: once every listed node is "
            "(a stricter reading); per_node: each listed node released alone.",
        },
        "alpha": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "default": 0.3,
            "title": "alpha (queue use weight)",
            "description": "Paper 003 Table 1 best: weight of Q_b in the branch score.",
        },
        "beta": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "default": 0.5,
            "title": "beta (I/O difference weight)",
            "description": "Paper 003 Table 1 best: weight of IOn_b; bandwidth gets 1-alpha-beta.",
        },
        "bw_normalisation": {
            "type": "string",
            "enum": list(BW_NORMALISATIONS),
            "default": "max",
            "title": "BWn normalisation",
            "description": "[interpreted] BWn in the branch score: BW / max over the branches, "
            "or min-max like IOn (the paper says only 'normalised').",
        },
        "migration_flow_control": {
            "type": "string",
            "enum": list(FLOW_CONTROLS),
            "default": STOP_RESUME,
            "title": "Migration's flow control",
            "description": "[interpreted] Flow control under the migration strategy: the paper's "
            "stop/resume nodes, or credits (isolates the effect of migration).",
        },
        "sample_interval_s": positive_number_spec(
            5.0, "Sample interval (s)", "Paper 003: completed fraction every 5 s."
        ),
        "synthetic_total_mb": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10**6,
            "default": 500,
            "title": "Synthetic traffic (MB)",
            "description": "Only without a dataset (unit tests): MB of synthetic_packets traffic.",
        },
        "total_mb": {
            "type": ["number", "null"],
            "exclusiveMinimum": 0,
            "maximum": 1e9,
            "default": None,
            "title": "Traffic volume (MB)",
            "description": "The first packets of the dataset (arrival order) up to this many MB; "
            "null = all of it. Lets one dataset (e.g. 5 GB) serve the paper's volumes 500 MB, "
            "1 GB, 2 GB, 5 GB as grid points.",
        },
        "data_source_pause": {
            "type": "string",
            "enum": list(DATA_SOURCE_PAUSES),
            "default": "shift",
            "title": "Data source pause",
            "description": "[interpreted, §3.1] shift: a stopped data source resumes generating "
            "where it stopped (the rest of the schedule moves by the pause); catch_up: the "
            "schedule keeps its times and the backlog is sent at once after a resume.",
        },
        "max_simulated_s": positive_number_spec(
            1e6, "Simulated time limit (s)", "Abort a run that has not finished by then."
        ),
    }
    metric_definitions: ClassVar[dict[str, str]] = {
        "plan_time_ms": "Mean CPU time of one decision (the thread's, "
        "balancebench.core.cost_model.plan_clock; ms): detection + "
        "scoring + routing for migration, one credit-grant round for credit.",
        "latency_p50_s": "Median packet latency: generated by the data source (its arrival "
        "time, moved by the pauses under data_source_pause=shift) -> counted at the sink "
        "(simulated s).",
        "latency_p95_s": "95th percentile of the packet latency (simulated s).",
        "latency_p99_s": "99th percentile of the packet latency (simulated s).",
        "latency_mean_s": "Mean packet latency (simulated s).",
        "throughput_mb_per_s": "Total volume / completion time (MB per simulated s).",
        "imbalance_max_over_mean": "Max over branch nodes of the MB the node processed, over "
        "the mean, minus 1.",
        "completion_time_s": "Simulated time at which the sink counted the last packet (paper "
        "003's 'delay time' of the whole task, s).",
        "total_mb": "Volume of the input packets (MB).",
        "migrated_packets": "Packets the source sent to a branch other than their tag's.",
        "migrated_mb": "Volume of those packets (MB).",
        "migrations": "Routing changes that sent a tag to a branch other than its own.",
        "recoveries": "Times listed nodes were released (default routing restored for them).",
        "backpressure_detections": "Branch nodes added to the back-pressure list.",
        "stop_signals": "Stop signals sent upstream over the network links (full queues).",
        "data_source_stops": "Times the full source queue paused the data source.",
        "data_source_paused_s": "Simulated time the data source was paused (s).",
        "credit_messages": "Credit grants sent upstream (credit flow control).",
        "max_queue_use_share": "Peak queue use (queued / capacity) over the branch nodes.",
        "source_blocked_s": "Simulated time the source's consumer waited on flow control "
        "(credits or resume) for its head packet (s).",
        "completed_fraction": "[series, every sample_interval_s] share of the total volume "
        "counted at the sink by that time (paper 003 Figs. 7-8).",
    }

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        params = super().check_params(params)
        lists = [k for k, s in self.param_schema.items() if s["type"] == "array"]
        lengths = {k: len(params[k]) for k in lists}
        if len(set(lengths.values())) > 1:
            # Name the lists that disagree with the most common length.
            common = max(set(lengths.values()), key=list(lengths.values()).count)
            odd = ", ".join(f"{self.name}_{k}" for k, n in lengths.items() if n != common)
            raise ValueError(
                f"{odd}: per-branch lists have lengths {lengths}; allowed: one value per "
                f"branch in every list ({common} here)"
            )
        if params["alpha"] + params["beta"] > 1 + 1e-12:
            raise ValueError(
                f"{self.name}_beta: alpha {params['alpha']} + beta {params['beta']} > 1; "
                f"allowed: alpha + beta <= 1 (bandwidth weight 1 - alpha - beta >= 0)"
            )
        if params["recovery_queue_share"] >= params["backpressure_queue_share"]:
            raise ValueError(
                f"{self.name}_recovery_queue_share: {params['recovery_queue_share']} is not "
                f"below backpressure_queue_share {params['backpressure_queue_share']}; "
                f"allowed: a recovery level below the back-pressure level"
            )
        return params

    def input_packets(self, point: ModelPoint, params: dict[str, Any]) -> pd.DataFrame:
        """The dataset's ``packets`` table, or ``synthetic_packets`` without a dataset."""
        if point.dataset_dir is not None:
            packets = load_packets(point.dataset_dir)
        else:
            rng = np.random.default_rng([point.seed, 3])
            packets = synthetic_packets(params["synthetic_total_mb"], rng)
        total_mb = params.get("total_mb")
        if total_mb is not None:
            volume = packets["size_mb"].cumsum().to_numpy()
            if volume[-1] + 1e-9 < total_mb:
                raise ValueError(
                    f"{self.name}_total_mb: {total_mb} MB but the input has {volume[-1]:g} MB; "
                    "allowed: at most the dataset's volume (raise packets_total_mb)"
                )
            packets = packets.iloc[: int(np.searchsorted(volume, total_mb - 1e-9) + 1)]
        return packets

    def check_packets(self, packets: pd.DataFrame, params: dict[str, Any]) -> None:
        """A non-empty table whose tags name branches of the topology."""
        branches = len(params["branch_service_rate_mb_per_s"])
        missing = [c for c in PACKET_COLUMNS if c not in packets.columns]
        if missing or len(packets) == 0:
            raise ValueError(
                f"packets: {len(packets)} rows, missing columns {missing}; allowed: >= 1 "
                f"packet with columns {list(PACKET_COLUMNS)}"
            )
        if packets["branch"].min() < 0 or packets["branch"].max() >= branches:
            raise ValueError(
                f"{self.name}_branch_service_rate_mb_per_s: packets name branches "
                f"{sorted(packets['branch'].unique().tolist())} but the topology has "
                f"{branches}; allowed: packets_branches = the length of the per-branch lists"
            )

    def run(self, point: ModelPoint) -> ModelResult:
        params = self.check_params(point.params)
        self.check_strategy(point.strategy)
        return self.simulate(self.input_packets(point, params), point.strategy, params, point.seed)

    def simulate(
        self, packets: pd.DataFrame, strategy: str, params: dict[str, Any], seed: int = 0
    ) -> ModelResult:
        """Run one strategy on a ``packets`` table (columns ``PACKET_COLUMNS``, arrival
        order, branches within the topology); ``params`` as returned by ``check_params``."""
        self.check_strategy(strategy)
        self.check_packets(packets, params)
        sim = Network(params, STRATEGIES[strategy], packets, np.random.default_rng(seed))
        sim.run()
        return self._result(sim, params)

    def _result(self, sim: Network, params: dict[str, Any]) -> ModelResult:
        latency = sim.counted_s - sim.created_s
        completion = float(np.max(sim.counted_s))
        total_mb = float(sim.size_mb.sum())
        processed_mb = np.array([node.sent_mb for node in sim.branches])
        imbalance = float(processed_mb.max() / processed_mb.mean() - 1.0)
        times, fraction = completed_fraction_series(
            sim.counted_s, sim.size_mb, params["sample_interval_s"]
        )
        p50, p95, p99 = np.percentile(latency, [50, 95, 99])
        plan_ms = 1000.0 * float(np.mean(sim.decision_times_s)) if sim.decision_times_s else 0.0
        metrics = {
            "plan_time_ms": plan_ms,
            "latency_p50_s": p50,
            "latency_p95_s": p95,
            "latency_p99_s": p99,
            "latency_mean_s": float(latency.mean()),
            "throughput_mb_per_s": total_mb / completion if completion > 0 else 0.0,
            "imbalance_max_over_mean": imbalance,
            "completion_time_s": completion,
            "total_mb": total_mb,
            "migrated_packets": sim.migrated_packets,
            "migrated_mb": sim.migrated_mb,
            "migrations": sim.migrations,
            "recoveries": sim.recoveries,
            "backpressure_detections": sim.detections,
            "stop_signals": sim.stop_signals,
            "data_source_stops": sim.data_source_stops,
            "credit_messages": sim.credit_messages,
            "max_queue_use_share": max(node.queue.peak_use_share for node in sim.branches),
            "source_blocked_s": sim.source.blocked_s,
            "data_source_paused_s": sim.source.inputs[0].stopped_total_s,
        }
        results = combine_partials(sim.sums, sim.counts, sim.maxima)
        info = {
            "strategy": sim.strategy.name,
            "flow_control": sim.network_mode,
            "packets": sim.n,
            "branch_processed_mb": processed_mb.tolist(),
            "peak_queue_use_share": {
                node.name: node.queue.peak_use_share
                for node in (sim.source, *sim.branches, sim.sink)
            },
            "tag_results": {str(tag): r for tag, r in results.items()},
            "segments": len(sim.segments),
            "segments_head": sim.segments[:50],
            "bookkeeping_consistent": expand_segments(sim.segments) == sim.off_home,
            "migration_log": sim.migration_log,
            "decisions": len(sim.decision_times_s),
        }
        return ModelResult(
            metrics=metrics,
            series={"completed_fraction": fraction},
            time_s=times,
            events=sim.events,
            info=info,
        )

    def figure(self, results: list[tuple[ModelPoint, ModelResult]]) -> Any:
        """Completed fraction vs time per strategy at 1 GB (paper 003 Fig. 7, when that
        volume was run) and at the largest volume (Fig. 8); with several totals also the
        completion time vs total volume (Table 2). A grid over the branch weights (alpha,
        beta) draws Table 1 instead (:meth:`_weights_figure`)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        checked = [self.check_params(p.params) for p, _ in results]
        weights = {(c["alpha"], c["beta"]) for c in checked}
        if len(weights) > 1:
            return self._weights_figure(results, checked)
        totals = sorted({r.metrics["total_mb"] for _, r in results})
        # A line per strategy and per value of any other Param the grid varies at one
        # volume (e.g. the recovery rule): named by the strategy alone, three rules read
        # "migration" thrice. Params that only follow the volume do not name a line.
        at_volume: dict[float, list[dict[str, Any]]] = {}
        for (_, result), params in zip(results, checked, strict=True):
            at_volume.setdefault(result.metrics["total_mb"], []).append(params)
        varied = sorted(
            k
            for k in checked[0]
            if any(len({repr(c[k]) for c in group}) > 1 for group in at_volume.values())
        )

        def line(point: ModelPoint, params: dict[str, Any]) -> str:
            return " · ".join([point.strategy, *(f"{k} {params[k]}" for k in varied)])

        # Fig. 7 is 1 GB, Fig. 8 the largest volume (5 GB in the paper).
        shown = [t for t in totals[:-1] if t == FIG7_TOTAL_MB] + [totals[-1]]
        panels = len(shown) + (1 if len(totals) > 1 else 0)
        fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.2), squeeze=False)
        for ax, total in zip(axes[0], shown, strict=False):
            for (point, result), params in zip(results, checked, strict=True):
                if result.metrics["total_mb"] != total or point.repetition != 0:
                    continue
                ax.plot(
                    [0.0, *result.time_s],
                    [0.0, *(100 * f for f in result.series["completed_fraction"])],
                    marker="o",
                    markersize=3,
                    label=line(point, params),
                )
            ax.set_xlabel("time (simulated s)")
            ax.set_ylabel("completed volume (%)")
            ax.set_title(f"completed fraction, {total:g} MB (repetition 0)")
            ax.legend()
            ax.grid(alpha=0.3)
        if len(totals) > 1:
            ax = axes[0][-1]
            rows = pd.DataFrame(
                [
                    {
                        "line": line(p, c),
                        "total_mb": r.metrics["total_mb"],
                        "completion_time_s": r.metrics["completion_time_s"],
                    }
                    for (p, r), c in zip(results, checked, strict=True)
                ]
            )
            means = rows.groupby(["line", "total_mb"])["completion_time_s"].mean()
            for name in means.index.get_level_values(0).unique():
                series = means.loc[name]
                ax.plot(series.index, series.to_numpy(), marker="o", label=name)
            ax.set_xlabel("total volume (MB)")
            ax.set_ylabel("completion time (simulated s, mean over the repetitions)")
            ax.set_title("completion time vs volume")
            ax.legend()
            ax.grid(alpha=0.3)
        fig.tight_layout()
        return fig

    def _weights_figure(
        self, results: list[tuple[ModelPoint, ModelResult]], checked: list[dict[str, Any]]
    ) -> Any:
        """Paper 003 Table 1 as a figure: completion time against alpha, one line per beta
        (mean over the repetitions, bars: Student-t 95% interval), one panel per strategy and
        BWn normalisation; ``checked`` are the points' checked params."""
        import matplotlib.pyplot as plt

        from balancebench.core.stats import repetition_stats
        from balancebench.plotting import spread_offsets

        rows = pd.DataFrame(
            [
                {
                    "panel": f"{p.strategy}, BWn {c['bw_normalisation']}",
                    "alpha": c["alpha"],
                    "beta": c["beta"],
                    "completion_time_s": r.metrics["completion_time_s"],
                }
                for (p, r), c in zip(results, checked, strict=True)
            ]
        )
        panels = sorted(rows["panel"].unique())
        fig, axes = plt.subplots(1, len(panels), figsize=(6.0 * len(panels), 4.2), squeeze=False)
        for ax, panel in zip(axes[0], panels, strict=True):
            part = rows[rows["panel"] == panel]
            xs = sorted(part["alpha"].unique())
            shifts = spread_offsets(part["beta"].nunique(), xs, 1 / 5)
            for shift, (beta, line) in zip(shifts, part.groupby("beta"), strict=True):
                stats = [
                    repetition_stats(g["completion_time_s"].tolist())
                    for _, g in line.groupby("alpha")
                ]
                alphas = np.array(sorted(line["alpha"].unique())) + shift
                mean = np.array([s["mean"] for s in stats])
                lo = mean - np.array([s["ci95_lo"] for s in stats])
                hi = np.array([s["ci95_hi"] for s in stats]) - mean
                label = f"beta (weight of IOn) = {beta:g}"
                ax.errorbar(alphas, mean, yerr=[lo, hi], marker="o", capsize=3, label=label)
            ax.set_xlabel("alpha (weight of the queue use Q in the branch score)")
            ax.set_ylabel("completion time (simulated s)")
            ax.set_xticks(xs)
            ax.set_title(panel.replace("min_max", "min-max").replace("BWn max", "BWn = BW / max"))
            ax.legend(fontsize=8)
            ax.grid(alpha=0.3)
        fig.tight_layout()
        return fig
