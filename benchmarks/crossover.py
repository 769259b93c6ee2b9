"""From which load per node does balancing pay? Capacity and p99 latency against tuples per
node and batch (issue 26).

    uv run python benchmarks/crossover.py                    # the preset below -> docs/figures
    uv run python benchmarks/crossover.py --workloads topk --loads 10000 100000 --max-rounds 5

The preset (:data:`PRESET`): ``topk`` (hash, qmmp, mnrt, readj, pkg) and ``eq5`` (the
planners and hash; pkg cannot join), Zipf s 1.0 and 1.4, about 10k, 100k and 1M tuples per
node and batch, ``--nodes`` nodes, ``--batches`` batches of 1 s (the input rate is the
load: tuples per node and batch x nodes per second), full history, every batch checked
by the oracle. TOPK is the topic stream (10k topics, no drift: skew is the only effect);
EQ5 is TPC-H at the scale factor that gives the load (Lineitem and Supplier both
streamed). One Spark session per point (dataset), its strategies in paired, rotated rounds
(``balancebench.experiment.rounds``: at least ``--min-rounds``, more until every strategy's verdict
against hash on capacity, node service, routing and p99 latency is decided, up to
``--max-rounds`` or the point's ``--point-minutes``), each run warmed up under its own
strategy first; per strategy the mean
and Student-t 95% interval over its rounds, and its verdict against hash on the paired
rounds (``balancebench.core.stats``). Besides the two plotted figures the table has what they
are made of (routing, node service, migration, plan: all charged CPU), so a verdict can be
traced to a component.

Written: ``docs/figures/crossover.png``, ``crossover.csv`` (a row per point and
strategy: means, intervals, verdicts) and ``crossover.rounds.csv`` (a row per point,
strategy and round: what the verdicts are computed from) (``--out`` elsewhere). Each
finished point is appended to ``crossover.points.csv`` and ``crossover.points-rounds.csv``
beside them as it ends, so an interrupted figure goes on from its last whole point with
``--resume`` (same settings; a point is re-run whole, never stitched from parts); they are
removed once the figure is whole.
"""

from __future__ import annotations

import argparse
import functools
import os
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from balancebench.core.schema import positive_int
from balancebench.core.stats import DEFAULT_MARGIN, columns_over
from balancebench.experiment.params import ExperimentSpec
from balancebench.experiment.rounds import RoundPolicy, group_verdicts, run_rounds, verdict_text
from balancebench.experiment.run_log import report_round, report_run, summarize
from balancebench.experiment.runs import LoadedCell

ROOT = Path(__file__).resolve().parents[1]
#: The figure's grid: strategies per workload, skews and loads (tuples per node and batch).
PRESET: dict[str, Any] = {
    "strategies": {
        "topk": ["hash", "qmmp", "mnrt", "readj", "pkg"],
        "eq5": ["hash", "qmmp", "mnrt", "readj"],
    },
    "skews": [1.0, 1.4],
    "loads": [10_000, 100_000, 1_000_000],
}
#: Lineitem rows per TPC-H scale factor (Supplier adds 10k per SF).
LINEITEM_PER_SF = 6_001_215
#: Run figures kept per round: the two plotted and what they are made of.
FIGURES = (
    "capacity_tuples_per_s",
    "latency_p99_s",
    "makespan_s_total",
    "route_s_total",
    "migration_s_total",
    "plan_time_ms_mean",
    "charged_s_total",
    "imbalance_max_over_mean_mean",
    "migrated_tuples_total",
)
#: The figures the network enters (``network_bandwidth_mb_per_s``): also recomputed from
#: the same runs under the CPU-only model (null bandwidth), kept as ``<figure>_cpu_only``.
NETWORK_FIGURES = (
    "capacity_tuples_per_s",
    "latency_p99_s",
    "route_s_total",
    "migration_s_total",
    "charged_s_total",
)
CPU_ONLY = "_cpu_only"


def point_params(workload: str, skew: float, load: int, args: argparse.Namespace) -> ExperimentSpec:
    """The checked Params of one point: ``load`` tuples per node and batch."""
    per_batch = load * args.nodes
    total = per_batch * args.batches
    common = {
        "workload": workload,
        "strategies": PRESET["strategies"][workload],
        "zipf_s": skew,
        "n_nodes": args.nodes,
        "n_senders": args.nodes,
        "n_batches": args.batches,
        "window_s": 0.0,
        "input_rate_tuples_per_s": float(per_batch),
        "warmup_batches": 2,
        "seed": 1,
    }
    if workload == "eq5":
        sf = max(0.001, round(total / (LINEITEM_PER_SF + 10_000), 4))
        return ExperimentSpec.checked({**common, "tpch_scale_factor": sf})
    return ExperimentSpec.checked(
        {
            **common,
            "n_tuples": total,
            "n_keys": 10_000,
            "topic_stream_drift_period_s": 0.0,
        }
    )


def draw(table: pd.DataFrame, per_round: pd.DataFrame, path: Path, caption: str) -> None:
    """Each strategy's change against hash in capacity and p99 latency, against load: one
    row of panels per (workload, skew), the paired verdict's interval around each point
    (filled: decided; hollow: open), the equivalence band shaded, above 0 is better
    (more capacity, lower p99). The CPU-only model is drawn only where it differs from the
    1 GbE one (the caption says so where it does not)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    from balancebench.plotting import strategy_color, strategy_order, verdict_point

    first = table.iloc[0]
    policy = RoundPolicy(int(first["min_rounds"]), int(first["max_rounds"]), float(first["margin"]))
    margin = policy.margin
    figures = ["capacity_tuples_per_s", "latency_p99_s"]
    # The verdicts as the reading has them (point_verdicts), per network model.
    verdicts = {"": point_verdicts(per_round, policy)}
    cpu = [f + CPU_ONLY for f in figures if f + CPU_ONLY in per_round]
    if cpu and not all(np.allclose(per_round[c], per_round[c[: -len(CPU_ONLY)]]) for c in cpu):
        figures += cpu
        verdicts[CPU_ONLY] = point_verdicts(cpu_only_rounds(per_round), policy)
    else:
        caption += " The CPU-only model gives the same figures here: not drawn."
    rows = table[["workload", "zipf_s"]].drop_duplicates().values.tolist()
    fig, axes = plt.subplots(
        len(rows),
        len(figures),
        figsize=(5.2 * len(figures), 2.9 * len(rows) + 1.2),
        squeeze=False,
    )
    for (workload, skew), line in zip(rows, axes, strict=True):
        part = per_round[(per_round["workload"] == workload) & (per_round["zipf_s"] == skew)]
        loads = sorted(part["load_per_node"].unique())
        names = [n for n in strategy_order(part["strategy"].unique().tolist()) if n != "hash"]
        for ax, figure in zip(line, figures, strict=True):
            ax.axhspan(-margin * 100, margin * 100, color="0.88", zorder=0)
            ax.axhline(0, color="0.3", lw=1)
            model = CPU_ONLY if figure.endswith(CPU_ONLY) else ""
            for k, name in enumerate(names):
                for x_i, load in enumerate(loads):
                    point = verdicts[model].get((workload, skew, load), {})
                    v = point.get((name, figure.removesuffix(CPU_ONLY)))
                    if v is None or v.ratio is None:
                        continue
                    x = x_i + (k - (len(names) - 1) / 2) * 0.12
                    label = name if x_i == 0 else None
                    verdict_point(ax, x, v, strategy_color(name), across=False, label=label)
            ax.set_xticks(range(len(loads)), [f"{int(v):,}" for v in loads])
            ax.set_xlim(-0.5, len(loads) - 0.5)
            ax.set_xlabel("tuples per node and batch")
            what = "capacity" if figure.startswith("capacity") else "p99 latency"
            said = ", CPU only" if model else ""
            ax.set_ylabel(f"{what}{said}: change vs hash")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:+.0f}%" if v else "0"))
            ax.set_title(f"{workload}, Zipf s = {skew:g}", fontsize=9, loc="left")
            ax.grid(alpha=0.3, axis="y")
    handles, labels = [], []
    for ax in axes.flat:  # one legend: every strategy drawn somewhere
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    fig.legend(handles, labels, loc="lower center", ncol=max(1, len(labels)), fontsize=8)
    fig.suptitle("\n".join(textwrap.wrap(caption, 150)), fontsize=8)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def caption_of(table: pd.DataFrame) -> str:
    """The figure's caption from its table (settings and wall), so a redraw says the same."""
    first = table.iloc[0]
    wall = table.drop_duplicates(["workload", "zipf_s", "load_per_node"])["point_wall_s"].sum()
    return (
        "Each strategy's change against hash (above 0 is better: more capacity, lower p99) "
        f"against tuples per node and batch; {int(first['nodes'])} nodes as Spark partitions "
        f"on 2 cores, {int(first['batches'])} batches of 1 s at the load's rate, full "
        f"history; paired verdicts over {int(first['min_rounds'])}-{int(first['max_rounds'])} "
        "rotated rounds (one Spark session per point), filled where decided, hollow where "
        f"open, grey band: equivalent within ±{float(first['margin']):.0%}; wall "
        f"{wall / 60:.0f} min; every batch checked by the oracle; 1 GbE links charged at "
        "125 MB/s."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="*", default=list(PRESET["strategies"]))
    parser.add_argument("--skews", nargs="*", type=float, default=PRESET["skews"])
    parser.add_argument("--loads", nargs="*", type=positive_int, default=PRESET["loads"])
    parser.add_argument("--nodes", type=positive_int, default=4)
    parser.add_argument("--batches", type=positive_int, default=3)
    parser.add_argument("--min-rounds", type=positive_int, default=5)
    parser.add_argument("--max-rounds", type=positive_int, default=10)
    parser.add_argument("--margin", type=float, default=DEFAULT_MARGIN, help="equivalence, ±share")
    parser.add_argument(
        "--point-minutes",
        type=float,
        default=8.0,
        help="a point's budget: rounds beyond --min-rounds start only within it",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "figures")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the whole points of an interrupted run (crossover.points.csv) and run the rest",
    )
    parser.add_argument(
        "--replot",
        action="store_true",
        help="redraw crossover.png from the committed crossover.csv and crossover.rounds.csv "
        "in --out; run nothing",
    )
    args = parser.parse_args()
    if args.replot:
        table = pd.read_csv(args.out / "crossover.csv")
        per_round = pd.read_csv(args.out / "crossover.rounds.csv")
        draw(table, per_round, args.out / "crossover.png", caption_of(table))
        print(f"redrawn from its tables: {args.out / 'crossover.png'}")
        return
    if args.min_rounds < 2:
        parser.error("--min-rounds: at least 2 (an interval needs them)")
    if args.max_rounds < args.min_rounds:
        parser.error(f"--max-rounds: at least --min-rounds ({args.min_rounds})")
    if not 0 <= args.margin < 0.5:
        parser.error("--margin: a share in [0, 0.5)")
    if not 0 < args.point_minutes <= 600:
        parser.error("--point-minutes: more than 0, at most 600")
    unknown = sorted(set(args.workloads) - set(PRESET["strategies"]))
    if unknown:
        parser.error(f"--workloads: {unknown}; allowed values: {sorted(PRESET['strategies'])}")
    if args.batches < 2:
        parser.error("--batches: at least 2 (a plan is carried out in the batch after it)")
    try:  # every point checked before any work: the message names the Param
        points = {
            (w, s, load): point_params(w, s, load, args)
            for w in args.workloads
            for s in args.skews
            for load in args.loads
        }
    except ValueError as exc:
        parser.error(str(exc))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from balancebench.spark.session import get_session

    args.out.mkdir(parents=True, exist_ok=True)
    done_path = args.out / "crossover.points.csv"
    rounds_path = args.out / "crossover.points-rounds.csv"
    settings = {
        "nodes": args.nodes,
        "batches": args.batches,
        "min_rounds": args.min_rounds,
        "max_rounds": args.max_rounds,
        "margin": args.margin,
    }
    policy = RoundPolicy(
        args.min_rounds, args.max_rounds, args.margin, budget_s=args.point_minutes * 60
    )
    try:
        done = finished_points(done_path, settings) if args.resume else pd.DataFrame()
        done_rounds = (
            pd.read_csv(rounds_path) if args.resume and rounds_path.exists() else pd.DataFrame()
        )
    except ValueError as exc:
        parser.error(str(exc))
    if not args.resume:
        done_path.unlink(missing_ok=True)
        rounds_path.unlink(missing_ok=True)
    started = time.perf_counter()
    kept = (
        done.drop_duplicates(["workload", "zipf_s", "load_per_node"])
        if len(done)
        else pd.DataFrame(columns=["workload", "zipf_s", "load_per_node", "point_wall_s"])
    )
    kept_points = set(kept[["workload", "zipf_s", "load_per_node"]].itertuples(index=False))
    wall_before = float(kept["point_wall_s"].sum())
    rows = done.to_dict("records")
    round_rows = done_rounds.to_dict("records")
    for k, ((workload, skew, load), params) in enumerate(points.items(), 1):
        names = params["strategies"]
        if (workload, skew, load) in kept_points:
            print(
                f"point {k} of {len(points)}: {workload}, s={skew}, {load:,}: kept from {done_path}"
            )
            continue
        point_started = time.perf_counter()
        print(
            f"point {k} of {len(points)}: {workload}, s={skew}, {load:,} tuples per node "
            f"and batch ({len(names)} strategies, {args.min_rounds}-{args.max_rounds} rounds)",
            flush=True,
        )
        spark = get_session(f"balancebench-crossover-{k}", master="local[*]")
        cell = LoadedCell(spark, params)
        rounds = run_rounds(
            names,
            functools.partial(both_networks, spark, cell),
            policy,
            report_run(),
            report_round(),
        )
        cell.release()
        spark.stop()
        point_wall_s = time.perf_counter() - point_started
        where = {"workload": workload, "zipf_s": skew, "load_per_node": load}
        verdicts = rounds.verdicts()
        cpu_only = group_verdicts(
            {n: dict(enumerate(map(cpu_only_figures, rounds.summaries[n]))) for n in names},
            rounds.baseline,
            policy,
            exhausted=True,
        )
        point_rows = []
        for name in names:
            row = {
                **where,
                "strategy": name,
                "rounds": len(rounds.summaries[name]),
                "rounds_stopped": rounds.stopped,
                **settings,
                "point_wall_s": point_wall_s,
                **columns_over(rounds.summaries[name], FIGURES),
                **columns_over(rounds.summaries[name], [f + CPU_ONLY for f in NETWORK_FIGURES]),
            }
            for (other, figure), v in verdicts.items():
                if other == name:
                    row[f"{figure}_verdict"] = verdict_text(figure, v)
            for (other, figure), v in cpu_only.items():
                if other == name and figure in NETWORK_FIGURES:
                    row[f"{figure}{CPU_ONLY}_verdict"] = verdict_text(figure, v)
            point_rows.append(row)
        kept_figures = [*FIGURES, *(f + CPU_ONLY for f in NETWORK_FIGURES)]
        new_rounds = [
            {**where, "strategy": name, "round": r, **{f: summary[f] for f in kept_figures}}
            for name in names
            for r, summary in enumerate(rounds.summaries[name])
        ]
        # appended whole after the point: an interruption loses at most the running point
        for path, part in ((done_path, point_rows), (rounds_path, new_rounds)):
            pd.DataFrame(part).to_csv(path, mode="a", header=not path.exists(), index=False)
        rows.extend(point_rows)
        round_rows.extend(new_rounds)
    wall = wall_before + time.perf_counter() - started
    table = pd.DataFrame(rows)
    table.to_csv(args.out / "crossover.csv", index=False)
    per_round = pd.DataFrame(round_rows)
    per_round.to_csv(args.out / "crossover.rounds.csv", index=False)
    for path in (done_path, rounds_path):  # the whole figure is in crossover.csv now
        path.unlink(missing_ok=True)
    draw(table, per_round, args.out / "crossover.png", caption_of(table))
    print(f"\nwrote {args.out / 'crossover.png'} and crossover.csv (wall {wall / 60:.1f} min)")
    print_reading(per_round, policy)


def both_networks(spark: Any, cell: LoadedCell, name: str, _round: int) -> dict[str, float]:
    """One run's summary at the point's bandwidth (1 GbE), with :data:`NETWORK_FIGURES`
    recomputed from the same batches under the CPU-only model (``_cpu_only``)."""
    batches, summary = cell.run(spark, name)
    alone = summarize(batches, cell.times, cell.batch_of, cell.interval_s, None)
    return {**summary, **{f + CPU_ONLY: alone[f] for f in NETWORK_FIGURES}}


def cpu_only_figures(summary: dict[str, float]) -> dict[str, float]:
    """A summary whose network figures are the CPU-only model's (for the verdicts)."""
    return {**summary, **{f: summary[f + CPU_ONLY] for f in NETWORK_FIGURES}}


def finished_points(path: Path, settings: dict[str, Any]) -> pd.DataFrame:
    """The whole points of an interrupted run with the same settings (empty if none)."""
    if not path.exists():
        return pd.DataFrame()
    done = pd.read_csv(path)
    if not (done[list(settings)] == pd.Series(settings)).all(axis=None):
        raise ValueError(
            f"--resume: {path} was made with other settings; remove it or match "
            f"--nodes/--batches/--min-rounds/--max-rounds/--margin ({settings})"
        )
    return done.reset_index(drop=True)


def point_verdicts(per_round: pd.DataFrame, policy: RoundPolicy) -> dict[tuple, dict]:
    """Per point (workload, skew, load): every strategy's verdicts against hash, from the
    rounds table (what the crossover reading in docs/results/crossover.md is rendered from)."""
    out = {}
    for point, part in per_round.groupby(["workload", "zipf_s", "load_per_node"]):
        rounds = {
            str(name): {int(r["round"]): dict(r) for _, r in runs.iterrows()}
            for name, runs in part.groupby("strategy")
        }
        out[point] = group_verdicts(rounds, "hash", policy, exhausted=True)
    return out


def cpu_only_rounds(per_round: pd.DataFrame) -> pd.DataFrame:
    """The rounds table with the network figures of the CPU-only model in their place
    (the rounds that have them: points recorded before them have none)."""
    known = per_round.dropna(subset=[f + CPU_ONLY for f in NETWORK_FIGURES])
    return known.assign(**{f: known[f + CPU_ONLY] for f in NETWORK_FIGURES})


def print_reading(per_round: pd.DataFrame, policy: RoundPolicy) -> None:
    """Per (workload, skew, load): each strategy's capacity and p99 against hash's."""
    tables = [("1 GbE", per_round)]
    columns = [f + CPU_ONLY for f in NETWORK_FIGURES]
    if set(columns) <= set(per_round):  # points recorded before them (--resume) have none
        tables.append(("CPU only", cpu_only_rounds(per_round)))
    for network, table in tables:
        print(f"\nverdicts against hash on the paired rounds, {network} (capacity; p99 latency)")
        for (workload, skew, load), found in point_verdicts(table, policy).items():
            names = dict.fromkeys(name for name, _ in found)
            print(f"  {workload} s={skew} {load:>9,}:")
            for n in names:
                print(
                    f"    {n}: {found[(n, 'capacity_tuples_per_s')].text()}; "
                    f"{found[(n, 'latency_p99_s')].text()}"
                )


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
