"""Paper 001 Figs. 6-7: query, operator and operator-set parallelism of a windowed join.

    uv run python benchmarks/parallelization.py                 # band join, N = 4, 9, 16
    uv run python benchmarks/parallelization.py --nodes 4 9 --sf 0.01

The three schemes (``balancebench.strategies.operator_set``: ``query_parallel``,
``operator_parallel``, ``operator_set``) run the TPC-H band join with a window (paper 001's
query is a windowed Cartesian product; ours keeps a band predicate so the oracle has an
answer to check) in the micro-batch engine, one Spark session, every batch checked by the
oracle, each scheme at each node count ``N`` (the paper's instances). Printed per run,
from the measured batches (``balancebench.experiment.run_log.summarize``; definitions in
``balancebench.core.metric_definitions``):

- Fig. 6: the CPU split into communication (the senders' routing work, a stateless stage
  of its own for ``operator_parallel``, and the nodes' receive stage), tuple processing
  (the other node stages) and idle (the nodes of the layout waiting for the slowest);
- Fig. 7 (top): capacity (input tuples / everything charged) against ``N``;
- Fig. 7 (bottom): node CPU use against the input rate, *derived*: at rate ``r`` the
  nodes are busy ``min(1, r / capacity)`` of the time, since every charged cost scales
  with the tuples (the paper measured it; a sweep of the engine over rates would give the
  same line, measured at more cost).

The schemes run in paired, rotated rounds at each ``N`` (``balancebench.experiment.rounds``:
``--rounds`` of them; a cell's first run pays the JVM's warm-up on the new data), every
share and figure printed is the median over the rounds, and the table carries the mean
and Student-t 95% interval of the capacity and the CPU; the rounds themselves go to
``paper001-fig6-7.rounds.csv`` (the docs' verdicts on the paired rounds are computed
from it).

The figure and its tables go to ``docs/figures/paper001-fig6-7.png`` / ``.csv`` /
``.rounds.csv`` with ``--figure``. Paper 001 ran 30-60 instances on 4 servers; here ``N``
is Spark partitions on 2 cores, so work is CPU time and the shares, not wall clock, are
what compares.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import pandas as pd

from balancebench.core.schema import positive_int
from balancebench.core.stats import columns_over
from balancebench.experiment.params import ExperimentSpec
from balancebench.experiment.rounds import RoundPolicy
from balancebench.experiment.run_log import report_run
from balancebench.experiment.runs import LoadedCell

SCHEMES = ("query_parallel", "operator_parallel", "operator_set")
ROOT = Path(__file__).resolve().parents[1]
SPLIT = ("cpu_communication_s_total", "cpu_processing_s_total", "cpu_idle_s_total")


def cell_params(n_nodes: int, args: argparse.Namespace) -> ExperimentSpec:
    """The checked Params of one node count's runs (the dataset's among them)."""
    return ExperimentSpec.checked(
        {
            "workload": "band",
            "strategies": list(SCHEMES),
            "n_nodes": n_nodes,
            "n_batches": args.batches,
            "n_senders": args.senders,
            "window_s": args.window,
            "tpch_scale_factor": args.sf,
            "zipf_s": args.skew,
            "input_rate_tuples_per_s": args.rate,
            "seed": 1,
        }
    )


def draw(table: pd.DataFrame, rounds: pd.DataFrame, path: Path) -> None:
    """Figs. 6-7 from the table (capacity: mean and Student-t interval over the rounds)
    and the rounds (Fig. 6's shares: each part's mean over the rounds over the mean
    total), the same means the docs' readings give."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from balancebench.plotting import strategy_color

    top = int(table["n_nodes"].max())
    at_top = table[table["n_nodes"] == top].set_index("strategy").loc[list(SCHEMES)]
    parts = rounds[rounds["n_nodes"] == top].groupby("strategy")[list(SPLIT)].mean()
    parts = parts.loc[list(SCHEMES)]
    shares = parts.div(parts.sum(axis=1), axis=0)
    fig, (split, cap, use) = plt.subplots(1, 3, figsize=(14.0, 4.2))
    bottom = np.zeros(len(SCHEMES))
    for column, label in zip(SPLIT, ("communication", "tuple processing", "idle"), strict=True):
        share = shares[column].to_numpy()
        split.bar(SCHEMES, share, bottom=bottom, label=label)
        bottom += share
    split.set_ylabel(f"share of node + sender CPU (N = {top}, means)")
    split.set_title("Fig. 6: where the CPU goes", fontsize=9)
    # Under the bars: inside the panel it covered query_parallel's communication share.
    split.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3)
    mean, lo, hi = (f"capacity_tuples_per_s_{s}" for s in ("mean", "ci95_lo", "ci95_hi"))
    rates = np.linspace(0.0, 1.2 * table[hi].max(), 60)
    for scheme in SCHEMES:
        part = table[table["strategy"] == scheme].sort_values("n_nodes")
        colour = strategy_color(scheme)
        cap.errorbar(
            part["n_nodes"],
            part[mean],
            yerr=[part[mean] - part[lo], part[hi] - part[mean]],
            marker="o",
            capsize=3,
            color=colour,
            label=scheme,
        )
        capacity = float(at_top.loc[scheme, mean])
        use.plot(rates, np.minimum(1.0, rates / capacity), color=colour, label=scheme)
    cap.set_ylim(bottom=0)
    cap.set_xlabel("instances N (nodes)")
    cap.set_ylabel("capacity (tuples/s, everything charged)")
    cap.set_title("Fig. 7 (top): throughput vs instances (mean, Student-t 95%)", fontsize=9)
    cap.legend(fontsize=8)
    use.set_xlabel("input rate (tuples/s)")
    use.set_ylabel(f"node CPU use (derived, N = {top})")
    use.set_title("Fig. 7 (bottom): CPU use vs input load (from the mean capacity)", fontsize=9)
    n_rounds = int(table["rounds"].min())
    fig.suptitle(
        "Paper 001 Figs. 6-7 (band join with a window, micro-batch engine on Spark; "
        f"{n_rounds} paired rounds per N, CPU time)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=positive_int, nargs="+", default=[4, 9, 16])
    parser.add_argument("--sf", type=float, default=0.02, help="TPC-H scale factor")
    parser.add_argument("--batches", type=positive_int, default=4)
    parser.add_argument("--senders", type=positive_int, default=8)
    parser.add_argument("--window", type=float, default=1.0, help="window of the join (s)")
    parser.add_argument("--skew", type=float, default=0.0, help="Zipf s of the join key")
    parser.add_argument("--rate", type=float, default=200_000.0, help="input tuples per s")
    parser.add_argument(
        "--rounds", type=positive_int, default=5, help="rotated rounds per N (median, verdicts)"
    )
    parser.add_argument("--figure", action="store_true", help="write docs/figures/paper001-*")
    parser.add_argument(
        "--replot",
        action="store_true",
        help="redraw docs/figures/paper001-fig6-7.png from its committed tables; run nothing",
    )
    args = parser.parse_args()
    if args.replot:
        out_dir = ROOT / "docs" / "figures"
        table = pd.read_csv(out_dir / "paper001-fig6-7.csv")
        rounds = pd.read_csv(out_dir / "paper001-fig6-7.rounds.csv")
        draw(table, rounds, out_dir / "paper001-fig6-7.png")
        print(f"redrawn from its tables: {out_dir / 'paper001-fig6-7.png'}")
        return
    try:  # every input checked before any work: the message names the Param
        cells = [cell_params(n, args) for n in args.nodes]
    except ValueError as exc:
        parser.error(str(exc))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from balancebench.spark.session import get_session

    spark = get_session("balancebench-parallelization", master="local[*]")
    rows, round_rows = [], []
    for params in cells:
        n = params["n_nodes"]
        cell = LoadedCell(spark, params)  # the executor a sweep's cell group runs on
        policy = RoundPolicy(args.rounds, args.rounds, figures=("capacity_tuples_per_s",))
        summaries = cell.side_by_side(spark, SCHEMES, policy, report_run(f"N={n}: ")).summaries
        round_rows += [
            {
                "n_nodes": n,
                "strategy": name,
                "round": r,
                "cpu_s_total": sum(o[c] for c in SPLIT),
                **{k: o[k] for k in ("capacity_tuples_per_s", *SPLIT)},
            }
            for name in SCHEMES
            for r, o in enumerate(summaries[name])
        ]
        for name in SCHEMES:
            out = {k: float(np.median([o[k] for o in summaries[name]])) for k in summaries[name][0]}
            total = sum(out[c] for c in SPLIT)
            row = {"n_nodes": n, "strategy": name, **{c: out[c] for c in SPLIT}}
            row.update({c.replace("_s_total", "_share"): out[c] / total for c in SPLIT})
            row.update(
                capacity_tuples_per_s=out["capacity_tuples_per_s"],
                nodes_used_max=out["nodes_used_max"],
                replication_factor_total=out["replication_factor_total"],
                result_rows_total=out["result_rows_total"],
                oracle_passed=min(o["oracle_passed"] for o in summaries[name]) == 1.0,
                rounds=len(summaries[name]),
            )
            # mean and Student-t 95% interval over the rounds
            per_run = [{**o, "cpu_s_total": sum(o[c] for c in SPLIT)} for o in summaries[name]]
            row.update(columns_over(per_run, ["capacity_tuples_per_s", "cpu_s_total"]))
            rows.append(row)
            print(
                f"N={n:<3} {name:>17}: nodes used {int(row['nodes_used_max'])}, copies/tuple "
                f"{row['replication_factor_total']:.2f}, CPU communication "
                f"{row['cpu_communication_share']:.0%} / processing "
                f"{row['cpu_processing_share']:.0%} / idle {row['cpu_idle_share']:.0%} "
                f"({total:.2f} s), capacity {row['capacity_tuples_per_s']:,.0f} tuples/s "
                f"(median of {len(summaries[name])}), "
                f"oracle {'ok' if row['oracle_passed'] else 'FAILED'}",
                flush=True,
            )
        cell.release()
    spark.stop()
    table = pd.DataFrame(rows)
    if args.figure:
        out_dir = ROOT / "docs" / "figures"
        table.to_csv(out_dir / "paper001-fig6-7.csv", index=False)
        round_table = pd.DataFrame(round_rows)
        round_table.to_csv(out_dir / "paper001-fig6-7.rounds.csv", index=False)
        draw(table, round_table, out_dir / "paper001-fig6-7.png")
        print(f"-> {out_dir / 'paper001-fig6-7.png'}, .csv, .rounds.csv")


if __name__ == "__main__":
    main()
