"""The papers' experiments: paper 000's through the ``nightly_sweep`` DAG (Param
``figure``), papers 001-004's under the models through the ``model_experiment`` DAG, and
paper 001's Figs. 6-7 (its parallelization schemes on the engine) through
``benchmarks/parallelization.py``.

    uv run python benchmarks/paper_figures.py              # all (paper 000: hours)
    uv run python benchmarks/paper_figures.py --only backpressure_volume
    uv run python benchmarks/paper_figures.py --only 000-3a --repetitions 2
    uv run python benchmarks/paper_figures.py --only 000-3a 000-8 --in-session

Each paper 000 figure is one ``balancebench figure <key>`` (a real ``airflow dags test``
of the sweep: datasets, GX validation, one spark-submit per cell and repetition, every
batch checked by the oracle, MLflow); each model experiment one ``balancebench run-model
--conf ...``. The figure and its table are copied to ``docs/figures/`` (the README shows
them). The CONF of each model experiment is below, and ``balancebench.paper000`` holds
the paper 000 presets, so any figure can be re-made by hand.

``--in-session`` runs a paper 000 figure the side-by-side way instead (no Airflow, no
MLflow): the same preset, Params and oracle, one Spark session per x value, all its
strategies ``--repetitions`` times in rotated order on the once-loaded cell
(:meth:`LoadedCell.side_by_side`), each warmed up under its own strategy. It is minutes
where the sweep is hours, and its runs pay no per-submit start-up. Beside the figure it
writes ``paper000-fig<key>.components.csv``: routing, node service, migration, plan and
imbalance per (strategy, x), mean and CI, so every "not reproduced" can be traced to a
component.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from balancebench import tracking
from balancebench.paper000 import FIGURE_EXPERIMENT, FIGURES
from balancebench.params import validate_params
from balancebench.paths import results_dir
from balancebench.schema import positive_int

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "figures"

EXPERIMENTS: dict[str, dict] = {
    # Paper 002 Figs. 6-9: runtime, throughput, latency at parallelism 8 (and 16 below).
    # 10M words, so each task's measured Spark CPU time (~0.1-1 s) is well above the
    # empty job's and scales with the task's size (at the 200k default it is ms of noise).
    "scheduling_p8": {"model": "scheduling", "repetitions": 3, "tasks_total_words": 10_000_000},
    "scheduling_p16": {
        "model": "scheduling",
        "repetitions": 3,
        "tasks_total_words": 10_000_000,
        "tasks_sizes": [10, 8, 6, 10, 8, 6, 4, 4] * 2,
    },
    # Paper 002 Fig. 5: efficiency per switch threshold eps. Parallelism 2-8 on the paper's
    # 6 cores spans cluster use 0.5-1.0 under SWPTS, so adaptive switches at some eps.
    "scheduling_eps": {
        "model": "scheduling",
        "repetitions": 3,
        "tasks_total_words": 10_000_000,
        "grid": {
            "scheduling_eps": [0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
            "scheduling_parallelism": [2, 3, 4, 5, 6, 7, 8],
        },
    },
    # Paper 001 §5.2 Fig. 8: utilisation mean/std over time; the mean moves 2000 -> 8000 ...
    "elastic_mean_shift": {
        "model": "elastic",
        "repetitions": 2,
        "phone_stream_sigma_from": 100.0,
        "phone_stream_sigma_to": 100.0,
    },
    # ... and sigma shrinks 100 -> 25 in 25 steps (mean fixed).
    "elastic_sigma_shrink": {
        "model": "elastic",
        "repetitions": 2,
        "phone_stream_mean_from": 5000.0,
        "phone_stream_mean_to": 5000.0,
    },
    # Paper 003 Figs. 7-8 / Table 2: completion over time and vs volume, 500 MB - 5 GB.
    "backpressure_volume": {
        "model": "backpressure",
        "repetitions": 3,
        "packets_total_mb": 5000,
        "grid": {"backpressure_total_mb": [500, 1000, 2000, 5000]},
    },
    # Paper 003 Table 1: the alpha/beta grid at 5 GB (migration only), with BWn normalised
    # by the max and min-max (the paper says only "normalised").
    "backpressure_alpha_beta": {
        "model": "backpressure",
        "strategies": ["migration"],
        "repetitions": 2,
        "packets_total_mb": 5000,
        "grid": {
            "backpressure_alpha": [0.1, 0.3, 0.5],
            "backpressure_beta": [0.1, 0.3, 0.5],
            "backpressure_bw_normalisation": ["max", "min_max"],
        },
    },
    # Paper 004 Figs. 1-4: fluctuation, load moved, latency over time; latency vs load.
    "overlay_load": {
        "model": "overlay",
        "repetitions": 2,
        "grid": {"overlay_target_load": [0.2, 0.4, 0.6, 0.8]},
    },
}


PAPER_000 = [f"000-{key}" for key in FIGURES]
#: Paper 001 Figs. 6-7: query / operator / operator-set parallelism on the engine.
PAPER_001 = "001-6-7"


def paper_000_figure(cli: Path, name: str, repetitions: int) -> None:
    key = name.removeprefix("000-")
    conf = json.dumps({"repetitions": repetitions})
    print(f"== paper 000 Fig. {key}: {FIGURES[key].title} ({repetitions} repetitions)", flush=True)
    started_ms = int(time.time() * 1000)
    done = subprocess.run([str(cli), "figure", key, "--conf", conf], cwd=ROOT)
    sweep = tracking.latest_parent_run(FIGURE_EXPERIMENT, "nightly_sweep", started_ms, "sweep")
    drawn = None if sweep is None else sweep.get("tags.figure_path")
    if done.returncode != 0 or not isinstance(drawn, str):
        print(f"   FAILED ({done.returncode})", flush=True)
        return
    png = Path(drawn)
    shutil.copy(png, OUT / png.name)
    shutil.copy(png.with_suffix(".csv"), OUT / png.with_suffix(".csv").name)
    print(f"   -> {OUT / png.name}, .csv", flush=True)


#: What a figure's reading is traced to (mean and CI per strategy and x), besides its plotted
#: metrics: the charged components, the plan's wall, the imbalance and what moved.
COMPONENTS = (
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


def paper_000_in_session(name: str, repetitions: int) -> None:
    """One paper 000 figure, side by side in one Spark session per x value."""
    import os

    import pandas as pd

    from balancebench.experiment import LoadedCell, report_run
    from balancebench.paper000 import draw_figure, get_figure
    from balancebench.spark.session import get_session
    from balancebench.sweep import cell_params, cells, repetition_columns, validate_sweep_params

    key = name.removeprefix("000-")
    fig = get_figure(key)
    sweep = validate_sweep_params({"figure": key, "repetitions": repetitions})
    groups: dict[tuple, list] = {}
    for cell in cells(sweep["grid"]):
        groups.setdefault((cell.workload, cell.zipf_s, cell.n_nodes, cell.tolerance), []).append(
            cell
        )
    # every group's Params checked before any work
    points = {
        g: validate_params(
            {**cell_params(sweep, members[0]), "strategies": [c.strategy for c in members]}
        )
        for g, members in groups.items()
    }
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    print(f"== paper 000 Fig. {key} in one session per x ({repetitions} repetitions)", flush=True)
    started = time.perf_counter()
    rows = []
    for k, ((workload, skew, n_nodes, tolerance), params) in enumerate(points.items(), 1):
        names = params["strategies"]
        print(
            f"point {k} of {len(points)}: {workload}, s={skew:g}, N={n_nodes}"
            + ("" if tolerance is None else f", tol={tolerance:g}")
            + f" ({len(names)} strategies x {repetitions})",
            flush=True,
        )
        spark = get_session(f"balancebench-fig{key}-{k}", master="local[*]")
        loaded = LoadedCell(spark, params)
        runs = loaded.side_by_side(spark, names, repetitions, report_run(len(names) * repetitions))
        loaded.release()
        spark.stop()
        for strategy, summaries in runs.items():
            row = {
                "strategy": strategy,
                "zipf_s": skew,
                "n_nodes": n_nodes,
                "tolerance": params["tolerance"] if tolerance is None else tolerance,
                "repetitions_finished": float(len(summaries)),
            }
            row.update(repetition_columns(summaries, dict.fromkeys([*fig.metrics, *COMPONENTS])))
            rows.append(row)
    wall = time.perf_counter() - started
    table = pd.DataFrame(rows)
    caption = (
        f"{fig.scale}; {repetitions} repetitions, mean and bootstrap 95% CI; seed "
        f"{sweep['seed']}; side by side in one Spark session per x value, rotated order "
        f"(paper_figures.py --in-session); wall {wall / 60:.0f} min"
    )
    png = draw_figure(table, fig, OUT, caption)
    cols = ["strategy", fig.x] + [c for c in table if any(c.startswith(m) for m in COMPONENTS)]
    table[cols].sort_values([fig.x, "strategy"]).to_csv(
        OUT / f"{png.stem}.components.csv", index=False
    )
    print(f"   -> {png}, .csv, .components.csv (wall {wall / 60:.1f} min)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    choices = [*PAPER_000, PAPER_001, *EXPERIMENTS]
    parser.add_argument("--only", nargs="*", default=choices, choices=choices)
    parser.add_argument(
        "--repetitions", type=positive_int, default=3, help="per cell of a paper 000 figure"
    )
    parser.add_argument(
        "--in-session",
        action="store_true",
        help="paper 000 figures side by side in one Spark session per x value (no Airflow)",
    )
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    cli = Path(sys.executable).parent / "balancebench"
    for name in args.only:
        if name in PAPER_000 and args.in_session:
            paper_000_in_session(name, args.repetitions)
            continue
        if name in PAPER_000:
            paper_000_figure(cli, name, args.repetitions)
            continue
        if name == PAPER_001:
            print(f"== paper 001 Figs. 6-7: {ROOT / 'benchmarks' / 'parallelization.py'}")
            script = str(ROOT / "benchmarks" / "parallelization.py")
            done = subprocess.run([sys.executable, script, "--figure"], cwd=ROOT)
            print("   FAILED" if done.returncode else "   done", flush=True)
            continue
        conf = {**EXPERIMENTS[name], "experiment": f"paper-{name}"}
        print(f"== {name}: {json.dumps(conf)}", flush=True)
        done = subprocess.run([str(cli), "run-model", "--conf", json.dumps(conf)], cwd=ROOT)
        latest = tracking.latest_parent_run(conf["experiment"])
        if done.returncode != 0 or latest is None:
            print(f"   FAILED ({done.returncode})", flush=True)
            continue
        folder = results_dir() / latest["run_id"]
        shutil.copy(folder / f"{conf['model']}.png", OUT / f"{name}.png")
        shutil.copy(folder / "model_summary.csv", OUT / f"{name}.csv")
        print(f"   -> {OUT / name}.png, .csv", flush=True)


if __name__ == "__main__":
    main()
