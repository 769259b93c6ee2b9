"""The papers' experiments: paper 000's through the ``nightly_sweep`` DAG (Param
``figure``), papers 001-004's under the models through the ``model_experiment`` DAG, and
paper 001's Figs. 6-7 (its parallelization schemes on the engine) through
``benchmarks/parallelization.py``.

    uv run python benchmarks/paper_figures.py              # all (paper 000: hours)
    uv run python benchmarks/paper_figures.py --only backpressure_volume
    uv run python benchmarks/paper_figures.py --only 000-3a --min-rounds 5 --max-rounds 8

Each paper 000 figure is one ``balancebench figure <key>`` (a real ``airflow dags test``
of the sweep: datasets, GX validation, one Spark application running each cell group's
strategies in paired, rotated rounds, every batch checked by the oracle, one MLflow run
per round), with a share of ``--minutes`` as the figure's budget for rounds beyond the
minimum. The figure, its table, its ``.components.csv`` (routing, node service,
migration, plan, imbalance per strategy and x, mean and interval: what a "not
reproduced" is traced to) and its ``.rounds.csv`` (every round's figures: what the
docs' readings are computed from) are copied to ``docs/figures/``. Each model
experiment is one ``balancebench run-model --conf ...`` (its CONF is below), with its
figure, summary table (mean and Student-t 95% interval per metric) and
``.repetitions.csv`` (every repetition's metrics; repetition r of every strategy shares
its seed, so they pair). Every figure's wall time and rounds go to
``docs/data/paper_figures.csv`` (one row per figure, the latest run), which the docs'
readings quote.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from balancebench.core.schema import positive_int
from balancebench.experiment.paper000_figures import FIGURE_EXPERIMENT, FIGURES
from balancebench.state import tracking
from balancebench.state.paths import results_dir

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "figures"

EXPERIMENTS: dict[str, dict] = {
    # Paper 002 Figs. 6-9: runtime, throughput, latency at parallelism 8 (and 16 below).
    # 10M words, so each task's measured Spark CPU time (~0.1-1 s) is well above the
    # empty job's and scales with the task's size (at the 200k default it is ms of noise).
    "scheduling_p8": {"model": "scheduling", "repetitions": 5, "tasks_total_words": 10_000_000},
    "scheduling_p16": {
        "model": "scheduling",
        "repetitions": 5,
        "tasks_total_words": 10_000_000,
        "tasks_sizes": [10, 8, 6, 10, 8, 6, 4, 4] * 2,
    },
    # Paper 002 Fig. 5: efficiency per switch threshold eps. Parallelism 2-8 on the paper's
    # 6 cores spans cluster use 0.5-1.0 under SWPTS, so adaptive switches at some eps.
    "scheduling_eps": {
        "model": "scheduling",
        "repetitions": 5,
        "tasks_total_words": 10_000_000,
        "grid": {
            "scheduling_eps": [0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
            "scheduling_parallelism": [2, 3, 4, 5, 6, 7, 8],
        },
    },
    # Paper 001 §5.2 Fig. 8: utilisation mean/std over time; the mean moves 2000 -> 8000 ...
    "elastic_mean_shift": {
        "model": "elastic",
        "repetitions": 5,
        "phone_stream_sigma_from": 100.0,
        "phone_stream_sigma_to": 100.0,
    },
    # ... and sigma shrinks 100 -> 25 in 25 steps (mean fixed).
    "elastic_sigma_shrink": {
        "model": "elastic",
        "repetitions": 5,
        "phone_stream_mean_from": 5000.0,
        "phone_stream_mean_to": 5000.0,
    },
    # Paper 003 Figs. 7-8 / Table 2: completion over time and vs volume, 500 MB - 5 GB.
    "backpressure_volume": {
        "model": "backpressure",
        "repetitions": 5,
        "packets_total_mb": 5000,
        # The packet trace is the one generated dataset, so with size / rate service times
        # every repetition would be the same number: exponential service times (each
        # repetition its own seed) make the repetitions samples.
        "backpressure_service_time_distribution": "exponential",
        "grid": {"backpressure_total_mb": [500, 1000, 2000, 5000]},
    },
    # Paper 003 Table 1: the alpha/beta grid at 5 GB (migration only), with BWn normalised
    # by the max and min-max (the paper says only "normalised").
    "backpressure_alpha_beta": {
        "model": "backpressure",
        "strategies": ["migration"],
        "repetitions": 5,
        "packets_total_mb": 5000,
        "backpressure_service_time_distribution": "exponential",
        "grid": {
            "backpressure_alpha": [0.1, 0.3, 0.5],
            "backpressure_beta": [0.1, 0.3, 0.5],
            "backpressure_bw_normalisation": ["max", "min_max"],
        },
    },
    # Paper 003's recovery step 5, read three ways, side by side (migration at 1 and 2 GB).
    "backpressure_recovery_rules": {
        "model": "backpressure",
        "strategies": ["migration"],
        "repetitions": 5,
        "packets_total_mb": 2000,
        "backpressure_service_time_distribution": "exponential",
        "grid": {
            "backpressure_recovery_rule": ["any_listed", "all_listed", "per_node"],
            "backpressure_total_mb": [1000, 2000],
        },
    },
    # Paper 004 Figs. 1-4: fluctuation, load moved, latency over time; latency vs load.
    "overlay_load": {
        "model": "overlay",
        "repetitions": 5,
        "grid": {"overlay_target_load": [0.2, 0.4, 0.6, 0.8]},
    },
}


PAPER_000 = [f"000-{key}" for key in FIGURES]
#: Paper 001 Figs. 6-7: query / operator / operator-set parallelism on the engine.
PAPER_001 = "001-6-7"


#: One row per figure: its rounds (or a model's repetitions: the fewest a compared point
#: had), runs and wall time when last made.
TIMINGS = ROOT / "docs" / "data" / "paper_figures.csv"
TIMING_COLUMNS = ("figure", "rounds", "runs", "wall_s", "made_utc", "source_run", "commit")


def record_timing(
    figure: str, rounds: int, runs: int, wall_s: float, source: str, commit: str
) -> None:
    """Replace ``figure``'s row of :data:`TIMINGS` (the other figures' rows stay)."""
    import csv
    from datetime import UTC, datetime

    rows = []
    if TIMINGS.exists():
        with TIMINGS.open(newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["figure"] != figure]
        for r in rows:  # rows made before 2026-11-28 counted "repetitions"
            if "repetitions" in r:
                r["rounds"] = r.pop("repetitions")
    made = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
    rows.append(
        dict(
            zip(
                TIMING_COLUMNS,
                [figure, rounds, runs, f"{wall_s:.0f}", made, source, commit],
                strict=True,
            )
        )
    )
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    with TIMINGS.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=TIMING_COLUMNS)
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: r["figure"]))


def paper_000_figure(cli: Path, name: str, args: argparse.Namespace) -> bool:
    key = name.removeprefix("000-")
    rounds = {"min_rounds": args.min_rounds, "max_rounds": args.max_rounds}
    conf = json.dumps({**rounds, "max_estimated_hours": args.minutes / 60})
    print(
        f"== paper 000 Fig. {key}: {FIGURES[key].title} ({args.min_rounds}-{args.max_rounds} "
        f"rounds, {args.minutes:g} min for rounds beyond the minimum)",
        flush=True,
    )
    started_ms = int(time.time() * 1000)
    started = time.perf_counter()
    commit = tracking.git_commit()
    done = subprocess.run([str(cli), "figure", key, "--conf", conf], cwd=ROOT)
    wall_s = time.perf_counter() - started
    sweep = tracking.latest_parent_run(FIGURE_EXPERIMENT, "nightly_sweep", started_ms, "sweep")
    drawn = None if sweep is None else sweep.get("tags.figure_path")
    # The sweep's parent FINISHED with its figure drawn means every round was measured;
    # the command still fails when the nightly regression gate (a check against earlier
    # runs, after the figure) flags a figure. That flag is printed, the figure kept.
    complete = isinstance(drawn, str) and sweep.get("status") == "FINISHED"
    if not complete:
        print(f"   FAILED ({done.returncode})", flush=True)
        return False
    if done.returncode != 0:
        print(
            f"   the figure's rounds are complete, but the sweep's regression check against "
            f"earlier runs flagged {sweep.get('tags.regressions', '?')} figure(s) (exit "
            f"{done.returncode}; report of sweep run {sweep['run_id']})",
            flush=True,
        )
    png = Path(drawn)
    copied = [png, *(png.with_suffix(s) for s in (".csv", ".components.csv", ".rounds.csv"))]
    for path in copied:
        shutil.copy(path, OUT / path.name)
    made = pd.read_csv(png.with_suffix(".rounds.csv"))
    runs = len(made)
    fewest = int(made.groupby(["strategy", "group"]).size().min())
    record_timing(f"000-{key}", fewest, runs, wall_s, f"sweep run {sweep['run_id']}", commit)
    print(
        f"   -> {OUT / png.name}, .csv, .components.csv, .rounds.csv ({runs} runs, "
        f"{wall_s / 60:.1f} min)",
        flush=True,
    )
    return True


def replot_paper_000(names: list[str]) -> None:
    """Redraw paper 000's figures from their committed tables (``docs/figures/*.csv`` and
    their rows of :data:`TIMINGS`): a change to how figures are drawn reaches the committed
    PNGs without measuring again. The numbers are the tables'; only the drawing changes."""
    from balancebench.experiment.paper000_figures import figure_caption, plot_figure
    from balancebench.orchestration.sweep_grid import SWEEP_PARAMS

    timings = pd.read_csv(TIMINGS, dtype=str).set_index("figure")
    for name in names:
        key = name.removeprefix("000-")
        fig, row = FIGURES[key], timings.loc[name]
        table = pd.read_csv(OUT / f"paper000-fig{key}.csv")
        caption = figure_caption(
            fig,
            str(row["rounds"]),
            SWEEP_PARAMS["seed"]["default"],  # paper_figures.py never sets another
            float(row["wall_s"]) / 60,
            str(row["source_run"])[:18],
            str(row["commit"]),
        )
        plot_figure(table, fig, OUT / f"paper000-fig{key}.png", caption)
        print(f"redrawn from its table: {OUT / f'paper000-fig{key}.png'}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    choices = [*PAPER_000, PAPER_001, *EXPERIMENTS]
    parser.add_argument("--only", nargs="*", default=choices, choices=choices)
    # Five rounds, fixed: on this machine a paper 000 figure's five rounds take about its
    # share of the hour (measured 2026-11-28: 4-5 min a cell group of six strategies), so
    # a stopping rule would add no round and only cost its stricter per-look level.
    parser.add_argument("--min-rounds", type=positive_int, default=5, help="paper 000 figures")
    parser.add_argument("--max-rounds", type=positive_int, default=5, help="paper 000 figures")
    parser.add_argument(
        "--minutes",
        type=float,
        default=60 / len(PAPER_000),
        help="a paper 000 figure's budget: rounds beyond the minimum start only within it",
    )
    parser.add_argument(
        "--replot",
        action="store_true",
        help="redraw paper 000's figures of --only from their committed tables; measure nothing",
    )
    args = parser.parse_args()
    if args.replot:
        replot_paper_000([n for n in args.only if n in PAPER_000])
        return
    if args.max_rounds < args.min_rounds:
        parser.error(f"--max-rounds: at least --min-rounds ({args.min_rounds})")
    if not 0 < args.minutes <= 600:
        parser.error("--minutes: more than 0, at most 600")
    OUT.mkdir(parents=True, exist_ok=True)
    cli = Path(sys.executable).parent / "balancebench"
    started = time.perf_counter()
    failed = []
    for name in args.only:
        if name in PAPER_000:
            if not paper_000_figure(cli, name, args):
                failed.append(name)
            continue
        item_started = time.perf_counter()
        commit = tracking.git_commit()
        if name == PAPER_001:
            print(f"== paper 001 Figs. 6-7: {ROOT / 'benchmarks' / 'parallelization.py'}")
            script = str(ROOT / "benchmarks" / "parallelization.py")
            done = subprocess.run([sys.executable, script, "--figure"], cwd=ROOT)
            if done.returncode:
                print("   FAILED", flush=True)
                failed.append(name)
                continue
            wall_s = time.perf_counter() - item_started
            made = pd.read_csv(OUT / "paper001-fig6-7.csv")
            runs = int(made["rounds"].sum())
            rounds = int(made["rounds"].min())
            source = "benchmarks/parallelization.py --figure"
            record_timing(name, rounds, runs, wall_s, source, commit)
            print(f"   done ({wall_s / 60:.1f} min)", flush=True)
            continue
        conf = {**EXPERIMENTS[name], "experiment": f"paper-{name}"}
        print(f"== {name}: {json.dumps(conf)}", flush=True)
        done = subprocess.run([str(cli), "run-model", "--conf", json.dumps(conf)], cwd=ROOT)
        latest = tracking.latest_parent_run(conf["experiment"])
        if done.returncode != 0 or latest is None:
            print(f"   FAILED ({done.returncode})", flush=True)
            failed.append(name)
            continue
        wall_s = time.perf_counter() - item_started
        folder = results_dir() / latest["run_id"]
        shutil.copy(folder / f"{conf['model']}.png", OUT / f"{name}.png")
        shutil.copy(folder / "model_summary.csv", OUT / f"{name}.csv")
        shutil.copy(folder / "model_repetitions.csv", OUT / f"{name}.repetitions.csv")
        points = len(pd.read_csv(folder / "model_summary.csv"))
        runs = points * conf["repetitions"]
        source = f"model run {latest['run_id']}"
        record_timing(name, conf["repetitions"], runs, wall_s, source, commit)
        print(f"   -> {OUT / name}.png, .csv ({wall_s / 60:.1f} min)", flush=True)
    total = time.perf_counter() - started
    print(
        f"== {len(args.only) - len(failed)} of {len(args.only)} made in {total / 60:.1f} min; "
        f"per figure: {TIMINGS}",
        flush=True,
    )
    if failed:
        print(f"   FAILED: {', '.join(failed)}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
