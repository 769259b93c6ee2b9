"""The comparison of one DAG run: a table (one row per strategy) and a figure.

One strategy order (the registry's) and one colour per strategy everywhere: the table,
the CSV, the figure, ``balancebench report`` and the sweep report.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from balancebench.core.lazy import lazy_module
from balancebench.core.metric_definitions import FIGURE_WORDS
from balancebench.plotting import strategy_color, strategy_order, verdict_point

# Loaded on first use: the CLI reads its arguments without it (lazy.py).
pd = lazy_module("pandas")

#: The comparison table's figures in order (each defined in ``metric_definitions``), with
#: the words the terminal and the report name them by (the unit follows from the name:
#: ``units``). The headline figures (``rounds.VERDICT_FIGURES``) take the verdict's words.
TABLE_WORDS: dict[str, str] = {
    "imbalance_max_over_mean_mean": "imbalance (max/mean node load)",
    "makespan_s_total": FIGURE_WORDS["makespan_s_total"],
    "makespan_over_ideal_mean": "node service / ideal",
    "route_s_total": FIGURE_WORDS["route_s_total"],
    "latency_p50_s": "p50 latency",
    "latency_p99_s": FIGURE_WORDS["latency_p99_s"],
    "throughput_tuples_per_s": FIGURE_WORDS["throughput_tuples_per_s"],
    "capacity_tuples_per_s": FIGURE_WORDS["capacity_tuples_per_s"],
    "sustainable_rate_tuples_per_s": "sustainable rate",
    "plan_time_ms_mean": FIGURE_WORDS["plan_time_ms_mean"],
    "routing_table_entries_max": "routing table entries",
    "migrated_tuples_total": "migrated tuples",
    "migration_bytes_total": "migrated bytes",
    "migration_s_total": "migration time",
    "harness_s_total": "harness, not charged",
    "avg_received_tuples_per_node_total": FIGURE_WORDS["avg_received_tuples_per_node_total"],
    "replication_factor_total": "replication factor",
    "state_tuples_max_node_max": "state tuples, largest node",
    "nodes_used_max": FIGURE_WORDS["nodes_used_max"],
    "result_rows_total": "result rows",
    "oracle_passed": "oracle passed",
}
#: Columns of the comparison table, in order.
TABLE_METRICS = list(TABLE_WORDS)
SERIES = ["imbalance_max_over_mean", "makespan_s"]

#: How a strategy run's metrics are named in MLflow, so its UI shows the headline first:
#: the comparison table's and the sweep's figures keep their names (top of the charts);
#: every other run-level figure is ``diag/<name>`` and every per-batch series
#: ``batch/<name>`` (the UI groups charts by the part before "/"). Definitions are
#: under the bare name in ``metric_definitions.json``.
DIAG_PREFIX, BATCH_PREFIX = "diag/", "batch/"


def logged_name(name: str, headline: frozenset[str] | set[str]) -> str:
    """A run-level metric's MLflow name: itself if headline, else ``diag/<name>``."""
    return name if name in headline else DIAG_PREFIX + name


def headline_metrics() -> frozenset[str]:
    """The run-level figures logged under their own names: the comparison table's and the
    figures the nightly sweep aggregates (regression, exact and paper-figure metrics)."""
    from balancebench.experiment.paper000_figures import FIGURE_METRICS
    from balancebench.experiment.regression import EXACT, TIMED

    return frozenset([*TABLE_METRICS, *TIMED, *EXACT, *FIGURE_METRICS])


def comparison_table(
    columns: dict[str, dict[str, float]], run_ids: dict[str, str] | None = None
) -> pd.DataFrame:
    """One row per strategy (registry order) from each cell's columns over its rounds
    (``round_runs.cell_columns``): every :data:`TABLE_METRICS` figure as its mean (the bare
    name) with ``_ci95_lo`` and ``_ci95_hi`` (Student t over the rounds), the rounds
    finished, and the cell's MLflow run."""
    rows = []
    for strategy, cols in columns.items():
        row: dict[str, Any] = {"strategy": strategy, "rounds_finished": cols.get("rounds_finished")}
        for m in TABLE_METRICS:
            row[m] = cols.get(f"{m}_mean")
            row[f"{m}_ci95_lo"] = cols.get(f"{m}_ci95_lo")
            row[f"{m}_ci95_hi"] = cols.get(f"{m}_ci95_hi")
        row["run_id"] = (run_ids or {}).get(strategy)
        rows.append(row)
    order = strategy_order([r["strategy"] for r in rows])
    ends = [c for m in TABLE_METRICS for c in (f"{m}_ci95_lo", f"{m}_ci95_hi")]
    table = pd.DataFrame(
        rows, columns=["strategy", "rounds_finished", *TABLE_METRICS, *ends, "run_id"]
    )
    return table.set_index("strategy").loc[order].reset_index()


def verdict_figure(rows: Sequence[Any], path: Path, title: str, margin: float) -> Path:
    """The answer at a glance (the parent run's figure): a forest plot, one panel per
    headline figure, each strategy's change against the baseline on the paired rounds
    with its interval, signed so that right is better on every panel; the ±``margin``
    equivalence band shaded, 0 (no change) drawn, a decided verdict a filled marker and
    an open one hollow, the verdict's words beside it. ``rows``: ``round_runs.VerdictRow``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from balancebench.core.metric_definitions import figure_words

    figures = list(dict.fromkeys(r.figure for r in rows))
    names = list(dict.fromkeys(r.strategy for r in rows))
    base = rows[0].baseline if rows else ""
    panels = max(1, len(figures))
    fig, axes = plt.subplots(panels, 1, figsize=(11, 1.3 + panels * (0.55 + 0.45 * len(names))))
    axes = list(axes) if panels > 1 else [axes]
    for ax, figure in zip(axes, figures, strict=False):
        ax.axvspan(-margin * 100, margin * 100, color="0.88", zorder=0)
        ax.axvline(0, color="0.3", lw=1)
        for y, name in enumerate(names):
            row = next((r for r in rows if r.figure == figure and r.strategy == name), None)
            words = row.text if row is not None else "no verdict"
            # The verdict's words in a column right of the panel, level with its bar.
            ax.text(1.02, y, words, transform=ax.get_yaxis_transform(), va="center", fontsize=9)
            if row is None or row.verdict.ratio is None:
                continue
            verdict_point(ax, y, row.verdict, strategy_color(name), across=True, size=8)
        ax.set_yticks(range(len(names)), names)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_title(figure_words(figure), loc="left", fontsize=10, fontweight="bold")
        ax.grid(alpha=0.3, axis="x")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:+.0f}%" if v else "0"))
        left, right = ax.get_xlim()
        ax.set_xlim(min(left, -margin * 200), max(right, margin * 200))
    axes[-1].set_xlabel(f"change against {base}, right is better; 0: no change")
    fig.suptitle(
        f"{title}\nfilled: decided; hollow: open; grey band: equivalent within ±{margin:.0%}",
        fontsize=9,
        x=0.02,
        ha="left",
    )
    fig.tight_layout()
    fig.subplots_adjust(right=0.62)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def comparison_figure(
    table: pd.DataFrame, history: dict[str, dict[str, list]], path: Path, title: str = ""
) -> Path:
    """The details figure (``details.png``; the answer is :func:`verdict_figure`'s), 2x3,
    one colour per strategy: per-batch imbalance and makespan (mean over the rounds);
    latency; plan time; migration cost (left out where nothing migrated); delivered
    throughput and capacity (bars: the mean over the rounds, whiskers: its 95% Student-t
    interval). Every axis starts at 0."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = table["strategy"].tolist()
    colors = [strategy_color(n) for n in names]
    x = list(range(len(names)))
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for ax, metric, label in (
        (axes[0, 0], "imbalance_max_over_mean", "tuple imbalance (max/mean - 1)"),
        (axes[0, 1], "makespan_s", "slowest node's work per batch (s)"),
    ):
        for strategy in names:
            steps, values = history.get(strategy, {}).get(metric, ([], []))
            ax.plot(steps, values, marker="o", label=strategy, color=strategy_color(strategy))
        ax.set_xlabel("micro-batch")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)  # from 0: a 10% spread is drawn as 10%, not magnified
        ax.grid(alpha=0.3)
        ax.legend()

    def numbers(column: str) -> pd.Series:
        """A column as floats, NaN where unmeasured (a strategy whose round failed leaves
        None, which makes the column objects)."""
        return pd.to_numeric(table[column], errors="coerce")

    def spread(column: str, scale: float) -> list[list[float]] | None:
        """Error bars: the mean's interval over the rounds (None where not known)."""
        lo, hi = f"{column}_ci95_lo", f"{column}_ci95_hi"
        if lo not in table or table[lo].isna().all():
            return None
        mean = numbers(column).fillna(0.0)
        return [
            list(((mean - numbers(lo).fillna(mean)) * scale).clip(lower=0)),
            list(((numbers(hi).fillna(mean) - mean) * scale).clip(lower=0)),
        ]

    def bars(ax: Any, column: str, label: str, scale: float = 1.0, hatch: str = "") -> None:
        ax.bar(
            x,
            numbers(column).fillna(0.0) * scale,
            color=colors,
            hatch=hatch,
            yerr=spread(column, scale),
            capsize=3,
        )
        ax.set_xticks(x, names)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, axis="y")

    def pair(ax: Any, first: str, second: str, label: str, scale: float, names2: tuple) -> None:
        # Two figures per strategy side by side; the second hatched, same colour.
        width = 0.38
        for offset, column, hatch, text in (
            (-1, first, "", names2[0]),
            (1, second, "//", names2[1]),
        ):
            ax.bar(
                [i + offset * width / 2 for i in x],
                numbers(column).fillna(0.0) * scale,
                width,
                color=colors,
                hatch=hatch,
                label=text,
                yerr=spread(column, scale),
                capsize=3,
            )
        ax.set_xticks(x, names)
        ax.set_ylabel(label)
        ax.legend()

    pair(
        axes[0, 2],
        "latency_p50_s",
        "latency_p99_s",
        "event-time latency (s), lower is better",
        1.0,
        ("p50", "p99 (hatched)"),
    )
    bars(axes[1, 0], "plan_time_ms_mean", "mean plan time (ms), lower is better")
    if numbers("migration_s_total").fillna(0.0).abs().sum() > 0:
        bars(axes[1, 1], "migration_s_total", "migration cost, sum (s), lower is better")
    else:  # nothing migrated: no empty panel (the title says so)
        axes[1, 1].remove()
        title = f"{title}; no strategy migrated"
    pair(
        axes[1, 2],
        "throughput_tuples_per_s",
        "capacity_tuples_per_s",
        "M tuples/s, higher is better",
        1e-6,
        ("delivered", "capacity (hatched)"),
    )
    fig.suptitle(title or "balancebench comparison")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
