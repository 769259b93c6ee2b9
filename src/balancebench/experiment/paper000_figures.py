"""Paper 000's experiments (§5), one figure each, as presets of the nightly sweep.

A figure is a sweep (its cell groups in paired, rotated rounds, every batch of every run
checked by the oracle) whose grid and some Params are fixed to the paper's experiment,
scaled to this machine (``PaperFigure.scale`` says how), and the paper-style figure drawn
from the sweep's per-cell means and Student-t 95% intervals over the rounds. One trigger
per figure: ``nightly_sweep`` with the Param ``figure`` (Airflow UI or REST),
``balancebench figure 3a`` (CLI), or ``make paper-figures`` for all of them (copied into
``docs/figures/``).

A figure fixes its grid and the Params it lists; every other Param (``min_rounds``,
``seed``, ``n_tuples`` of the TOPK stream, ...) comes from the trigger as usual.

Figs. 4 and 5 come from one sweep (``4-5``) under memory-driven scale-out (Param
``node_capacity_state_tuples``): nodes used, and the balance-adjustment time of the
scale-outs, against skew.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from balancebench.core.lazy import lazy_module

# Loaded on first use: the CLI reads its arguments without it (lazy.py).
pd = lazy_module("pandas")

#: The Param value that means "no figure: the grid as given".
NO_FIGURE: Final[str] = "none"
#: MLflow experiment of the figure sweeps (their history stays apart from the nightly's).
FIGURE_EXPERIMENT: Final[str] = "balancebench-paper-000"

#: Paper 000's join competitors (§5.1.5) and the reference every reader asks for.
_JOINS = ["hash", "qmmp", "mnrt", "dynamic", "bi", "bi6"]
#: Bi6 has 6 subgroups of at least one node per group: 12 nodes for every join figure.
_JOIN_NODES = [12]
_SKEWS = [0.4, 0.8, 1.2, 1.5]
#: Figs. 4-5's competitors (the paper's: MNRT, QMMP, Dynamic, Bi, Bi6) and hash.
_SCALE_OUT = ["hash", "qmmp", "mnrt", "dynamic", "bi", "bi6"]
_TPCH = {"tpch_scale_factor": 0.02, "n_batches": 4, "experiment": FIGURE_EXPERIMENT}
_TPCH_SCALE = (
    "TPC-H SF 0.02 (about 120k Lineitem rows; the paper loads 12 GB), 4 micro-batches, "
    "12 nodes as Spark partitions on 2 cores (Bi6 needs 12), every batch checked by the oracle"
)


@dataclass(frozen=True)
class PaperFigure:
    key: str
    title: str
    #: What the paper shows and says (translated; its numbers where the text gives them).
    claim: str
    grid: dict[str, list[Any]]
    #: Params the figure fixes (the rest come from the trigger).
    params: dict[str, Any]
    #: Y axes (run metrics summarised over the rounds), one panel each.
    metrics: tuple[str, ...]
    scale: str
    #: Strategies drawn for reference only (not in the paper's figure).
    reference: tuple[str, ...] = field(default=("hash",))
    #: The x axis: a grid axis with one value per cell (``zipf_s`` or ``tolerance``).
    x: str = "zipf_s"


def _join_figure(key: str, workload: str, title: str, claim: str, window_s: float) -> PaperFigure:
    """Figs. 3 and 6: the join competitors over the skews on 12 nodes; full history is
    execution time (Fig. 3), a window the tuples received per node (Fig. 6)."""
    windowed = window_s > 0
    return PaperFigure(
        key,
        title,
        claim,
        {"workloads": [workload], "strategies": _JOINS, "zipf_s": _SKEWS, "n_nodes": _JOIN_NODES},
        {**_TPCH, "window_s": window_s},
        ("avg_received_tuples_per_node_total",) if windowed else ("charged_s_total",),
        _TPCH_SCALE + ("; window 1 s of event time" if windowed else ""),
    )


FIGURES: Final[dict[str, PaperFigure]] = {
    "3a": _join_figure(
        "3a",
        "eq5",
        "Fig. 3(a): EQ5, execution time against skew (full history)",
        "MNRT and QMMP fastest at low skew (key placement cuts broadcast); QMMP's splits "
        "grow with skew and so does its time; Bi6 slows at z = 1.5 (hot keys fill their "
        "subgroup); Bi (full broadcast) slowest; Dynamic flat in skew.",
        0.0,
    ),
    "3b": _join_figure(
        "3b",
        "band",
        "Fig. 3(b): B_NCI band join, execution time against skew (full history)",
        "As Fig. 3(a), more marked: QMMP's key splits raise the band join's broadcast; "
        "Dynamic unaffected by the predicate or the skew.",
        0.0,
    ),
    "6a": _join_figure(
        "6a",
        "eq5",
        "Fig. 6(a): EQ5, tuples received per node against skew (windowed)",
        "Dynamic's per-node input is flat in skew (random in both dimensions) but it uses "
        "more nodes; MNRT routes with direction (fewest tuples per node); QMMP's splits "
        "add broadcast; Bi6 good at low skew, worse as its subgroups' broadcast grows "
        "(at z = 1 the largest key is half the data); Bi receives the same everywhere.",
        1.0,
    ),
    "6b": _join_figure(
        "6b",
        "band",
        "Fig. 6(b): B_NCI, tuples received per node against skew (windowed)",
        "As Fig. 6(a); Bi6's subgroup broadcast is most visible on the band join.",
        1.0,
    ),
    "4-5": PaperFigure(
        "4-5",
        "Figs. 4 and 5: nodes used and balance-adjustment time against skew (EQ5 loaded "
        "under memory-driven scale-out)",
        "Fig. 4: Dynamic uses the most nodes (powers of two, one node into four); MNRT and "
        "QMMP add nodes by the amount loaded and use fewer; Bi and Bi6 (memory-optimised) "
        "also few. Fig. 5: Dynamic's adjustment moves the most data and is slowest; QMMP "
        "plans faster and adjusts slightly faster than MNRT; Bi's random storage scales "
        "out most easily. No numbers in the text.",
        {
            "workloads": ["eq5"],
            "strategies": _SCALE_OUT,
            "zipf_s": _SKEWS,
            "n_nodes": [16],
        },
        {**_TPCH, "window_s": 0.0, "node_capacity_state_tuples": 12_000},
        ("nodes_used_max", "scale_out_adjustment_s_total"),
        "TPC-H SF 0.02 (about 120k Lineitem rows), 4 micro-batches, full history; a node "
        "holds 12,000 state tuples; at most 16 nodes (Dynamic's 1 -> 4 -> 16) as Spark "
        "partitions on 2 cores; every batch checked by the oracle",
    ),
    "7": PaperFigure(
        "7",
        "Fig. 7: TOPK, migration-plan time against the balance tolerance",
        "QMMP plans fast at every tolerance (it splits keys per tuple); MNRT, weighing the "
        "system's whole cost, is slightly slower; Readj (pairing nodes and trying key "
        "swaps) is the slowest, most so at strict tolerances. PKG never plans.",
        {
            "workloads": ["topk"],
            "strategies": ["qmmp", "mnrt", "readj"],
            "zipf_s": [1.0],
            "n_nodes": [8],
            "tolerance": [0.02, 0.05, 0.1, 0.2, 0.4],
        },
        {"experiment": FIGURE_EXPERIMENT},
        ("plan_time_ms_mean",),
        "topic stream of the trigger's n_tuples (sweep default 1M), z = 1, 8 nodes; plan "
        "time is the planning thread's CPU in plan() on the statistics the engine delivers",
        reference=(),
        x="tolerance",
    ),
    "8": PaperFigure(
        "8",
        "Fig. 8: TOPK, throughput and latency against skew (tolerance 0.05)",
        "The periodic merge of split keys' partial counts costs most where keys are split "
        "most (QMMP), lowering throughput; Readj's plan time at a strict tolerance hurts "
        "its overall performance.",
        {
            "workloads": ["topk"],
            "strategies": ["hash", "qmmp", "mnrt", "readj", "pkg"],
            "zipf_s": _SKEWS,
            "n_nodes": [8],
        },
        {"tolerance": 0.05, "experiment": FIGURE_EXPERIMENT},
        ("throughput_tuples_per_s", "capacity_tuples_per_s", "latency_p99_s"),
        "topic stream of the trigger's n_tuples (sweep default 1M; the paper: 10 GB of Weibo "
        "posts), 8 nodes on 2 cores, window 1 s",
    ),
}

#: Run metrics the figures plot that the sweep summarises besides its headline figures.
FIGURE_METRICS: Final[tuple[str, ...]] = tuple(
    sorted({m for f in FIGURES.values() for m in f.metrics})
)
#: What a figure's reading is traced to, besides its plotted metrics (mean and CI per
#: strategy and x, in ``paper000-fig<key>.components.csv``): the charged components, the
#: plan's wall, the imbalance, what moved and the capacity.
FIGURE_COMPONENTS: Final[tuple[str, ...]] = (
    "charged_s_total",
    "route_s_total",
    "makespan_s_total",
    "migration_s_total",
    "plan_time_ms_mean",
    "imbalance_max_over_mean_mean",
    "migrated_tuples_total",
    "capacity_tuples_per_s",
    "latency_p99_s",
    "node_work_r2",
)

_UNITS = {
    "charged_s_total": "processing time (s of CPU, everything charged)",
    "avg_received_tuples_per_node_total": "tuples received per node (count)",
    "throughput_tuples_per_s": "delivered throughput (tuples/s)",
    "capacity_tuples_per_s": "capacity (tuples/s)",
    "latency_p99_s": "latency p99 (s, replay clock)",
    "plan_time_ms_mean": "plan time (ms, planning thread's CPU)",
    "nodes_used_max": "nodes used (count, at the end of loading)",
    "scale_out_adjustment_s_total": "adjustment time (s of CPU charged)",
}
_X_LABELS = {"zipf_s": "Zipf skew z", "tolerance": "balance tolerance"}


def get_figure(key: str) -> PaperFigure:
    if key not in FIGURES:
        raise ValueError(f"figure: unknown {key!r}; allowed values: {[NO_FIGURE, *FIGURES]}")
    return FIGURES[key]


def with_figure(values: dict[str, Any]) -> dict[str, Any]:
    """Sweep Params with the figure's grid and Params in place (unchanged without one)."""
    key = values.get("figure", NO_FIGURE)
    if key in (None, NO_FIGURE):
        return dict(values)
    fig = get_figure(key)
    return {**values, "grid": {k: list(v) for k, v in fig.grid.items()}, **fig.params}


def figure_table(cells: pd.DataFrame, fig: PaperFigure) -> pd.DataFrame:
    """One row per (strategy, x): each plotted metric's mean and Student-t 95% interval
    over the rounds, and how many finished."""
    cols = ["strategy", "zipf_s", "n_nodes", "tolerance", "rounds_finished"]
    for m in fig.metrics:
        cols += [f"{m}_mean", f"{m}_ci95_lo", f"{m}_ci95_hi"]
    present = [c for c in cols if c in cells]
    return cells[present].sort_values(["strategy", fig.x]).reset_index(drop=True)


def components_table(cells: pd.DataFrame, fig: PaperFigure) -> pd.DataFrame:
    """One row per (strategy, x): each of :data:`FIGURE_COMPONENTS`' mean, std and
    Student-t 95% interval over the rounds (the columns the cells have)."""
    cols = ["strategy", fig.x, "rounds_finished"]
    for m in FIGURE_COMPONENTS:
        cols += [f"{m}_mean", f"{m}_std", f"{m}_ci95_lo", f"{m}_ci95_hi"]
    present = [c for c in cols if c in cells]
    return cells[present].sort_values(["strategy", fig.x]).reset_index(drop=True)


def draw_figure(cells: pd.DataFrame, fig: PaperFigure, out_dir: Path, caption: str) -> Path:
    """The paper-style figure (PNG), its table (CSV) and its components table
    (``.components.csv``) in ``out_dir``; returns the PNG (drawn by :func:`plot_figure`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    table = figure_table(cells, fig)
    stem = f"paper000-fig{fig.key}"
    table.to_csv(out_dir / f"{stem}.csv", index=False)
    components_table(cells, fig).to_csv(out_dir / f"{stem}.components.csv", index=False)
    path = out_dir / f"{stem}.png"
    plot_figure(table, fig, path, caption)
    return path


def figure_caption(
    fig: PaperFigure, rounds: str, seed: int, wall_min: float, source: str, commit: str
) -> str:
    """A figure's caption: its scale, rounds, seed, wall time, the run it came from and the
    commit it was made on (``plot_figure`` adds what its bars are)."""
    return (
        f"{fig.scale}; {rounds} paired rounds, mean; seed {seed}; {wall_min:.0f} min wall; "
        f"{source}; made on commit {commit[:10]}"
    )


#: One marker per line, so lines with equal values (Figs. 4-5: 8 = 8 = 8 nodes) stay
#: visible on top of each other.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")


def deterministic_metrics(table: pd.DataFrame, fig: PaperFigure) -> list[str]:
    """The plotted metrics whose interval is empty at every point: the same value in every
    round (a count for one dataset), so the figure has no bars to show."""
    found = []
    for metric in fig.metrics:
        lo, hi = table.get(f"{metric}_ci95_lo"), table.get(f"{metric}_ci95_hi")
        if lo is not None and hi is not None and bool(((hi - lo).fillna(0) == 0).all()):
            found.append(metric)
    return found


def plot_figure(table: pd.DataFrame, fig: PaperFigure, path: Path, caption: str) -> str:
    """Draw ``table`` (:func:`figure_table`'s rows, e.g. a committed ``paper000-fig*.csv``)
    to ``path``; returns the caption as drawn (with what its bars are).

    One panel per metric, ``fig.x`` on x (a tolerance axis is logarithmic: its values
    0.02-0.4 crowd the left end of a linear one), one line per strategy in its fixed colour
    and marker with the Student-t interval as error bars, reference strategies (not in the
    paper's figure) dashed, one legend for all panels. The strategies' points are spread a
    little along x (at most a third of the smallest step between x values), so equal
    values do not hide each other's lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, MaxNLocator, NullLocator

    from balancebench.core.units import is_count
    from balancebench.plotting import spread_offsets, strategy_color, strategy_order

    names = strategy_order(table["strategy"].unique().tolist())
    xs = sorted(table[fig.x].unique())
    log_x = fig.x == "tolerance"
    if log_x:  # spread in log space: a relative step
        steps = spread_offsets(len(names), np.log(xs).tolist(), 1 / 3)
        dodge = {s: float(np.exp(o)) for s, o in zip(names, steps, strict=True)}
    else:
        dodge = dict(zip(names, spread_offsets(len(names), xs, 1 / 3), strict=True))
    n = len(fig.metrics)
    plot, axes = plt.subplots(1, n, figsize=(5.2 * n, 4.3), squeeze=False)
    for ax, metric in zip(axes.flat, fig.metrics, strict=True):
        mean, lo, hi = f"{metric}_mean", f"{metric}_ci95_lo", f"{metric}_ci95_hi"
        for i, strategy in enumerate(names):
            part = table[table["strategy"] == strategy].dropna(subset=[mean])
            if part.empty:
                continue
            x = part[fig.x] * dodge[strategy] if log_x else part[fig.x] + dodge[strategy]
            ax.errorbar(
                x,
                part[mean],
                yerr=[(part[mean] - part[lo]).fillna(0), (part[hi] - part[mean]).fillna(0)],
                marker=_MARKERS[i % len(_MARKERS)],
                markersize=6,
                markerfacecolor="none" if i % 2 else strategy_color(strategy),
                capsize=3,
                color=strategy_color(strategy),
                linestyle="--" if strategy in fig.reference else "-",
                label=f"{strategy} (reference)" if strategy in fig.reference else strategy,
            )
        if log_x:
            ax.set_xscale("log")
            ax.xaxis.set_major_locator(FixedLocator(xs))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xticklabels([f"{x:g}" for x in xs])
        else:
            ax.set_xticks(xs)
        ax.set_xlabel(_X_LABELS[fig.x])
        ax.set_ylabel(_UNITS.get(metric, metric))
        # Every axis starts at 0 (all figures are times, rates or counts): on an axis
        # from 486k to 494k tuples/s a 1% difference filled the panel. An interval that
        # reaches below 0 is cut there.
        top = table[[hi, mean]].max(axis=None)
        ax.set_ylim(0, 1.08 * top if top > 0 else 1)
        if is_count(metric):  # nodes, tuples: no tick at 2.5 nodes
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    columns = min(len(labels), 3 * n)  # a one-panel figure's legend wraps, not overflows
    legend_rows = -(-len(labels) // max(columns, 1))
    plot.legend(handles, labels, loc="lower center", ncol=max(columns, 1), fontsize=8)
    if deterministic_metrics(table, fig) == list(fig.metrics):
        caption += "; no bars: the same value in every round (deterministic for this dataset)"
    else:
        caption += "; bars: Student-t 95% interval over the rounds"
    wrapped = "\n".join(textwrap.wrap(caption, int(13 * 5.2 * n)))  # fits the figure width
    plot.suptitle(f"{fig.title}\n{wrapped}", fontsize=9)
    plot.tight_layout(rect=(0, 0.02 + 0.055 * legend_rows, 1, 1))
    plot.savefig(path, dpi=110)
    plt.close(plot)
    return caption
