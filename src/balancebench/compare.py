"""The comparison of one DAG run: a table (one row per strategy) and a figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

#: Columns of the comparison table, in order (all defined in ``metrics``).
TABLE_METRICS = [
    "imbalance_max_over_mean_mean",
    "makespan_s_total",
    "makespan_over_ideal_mean",
    "route_s_total",
    "latency_p50_s",
    "latency_p99_s",
    "throughput_tuples_per_s",
    "capacity_tuples_per_s",
    "sustainable_rate_tuples_per_s",
    "plan_time_ms_mean",
    "routing_table_entries_max",
    "migrated_tuples_total",
    "migration_bytes_total",
    "migration_s_total",
    "harness_s_total",
    "avg_received_tuples_per_node_total",
    "replication_factor_total",
    "state_tuples_max_node_max",
    "nodes_used_max",
    "result_rows_total",
    "oracle_passed",
]
SERIES = ["imbalance_max_over_mean", "makespan_s"]


def comparison_table(children: pd.DataFrame) -> pd.DataFrame:
    """One row per child run (strategy) from an ``mlflow.search_runs`` frame."""
    rows = []
    for _, run in children.iterrows():
        row: dict[str, Any] = {"strategy": run.get("params.strategy"), "run_id": run["run_id"]}
        for m in TABLE_METRICS:
            row[m] = run.get(f"metrics.{m}")
        rows.append(row)
    return pd.DataFrame(rows, columns=["strategy", *TABLE_METRICS, "run_id"])


def comparison_figure(table: pd.DataFrame, history: dict[str, dict[str, list]], path: Path) -> Path:
    """2x2 figure: per-batch imbalance and makespan per strategy, latency and plan time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for ax, metric, label in (
        (axes[0, 0], "imbalance_max_over_mean", "tuple imbalance (max/mean - 1)"),
        (axes[0, 1], "makespan_s", "makespan of the per-node stage (s)"),
    ):
        for strategy, series in history.items():
            steps, values = series.get(metric, ([], []))
            ax.plot(steps, values, marker="o", label=strategy)
        ax.set_xlabel("micro-batch")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend()
    names = table["strategy"].tolist()
    x = range(len(names))
    ax = axes[1, 0]
    width = 0.38
    ax.bar([i - width / 2 for i in x], table["latency_p50_s"], width, label="p50")
    ax.bar([i + width / 2 for i in x], table["latency_p99_s"], width, label="p99")
    ax.set_xticks(list(x), names)
    ax.set_ylabel("event-time latency (s)")
    ax.legend()
    ax = axes[1, 1]
    ax.bar(list(x), table["plan_time_ms_mean"])
    ax.set_xticks(list(x), names)
    ax.set_ylabel("mean plan time (ms)")
    fig.suptitle("balancebench: windowed TOPK under each strategy")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
