"""The papers' experiments under the models, run through the ``model_experiment`` DAG.

    uv run python benchmarks/paper_figures.py              # all; about 15 min here
    uv run python benchmarks/paper_figures.py --only backpressure_volume

Each experiment is one ``balancebench run-model --conf ...`` (a real ``airflow dags test``
run: dataset, GX validation, a Spark sweep, MLflow); its figure and summary table are
copied to ``docs/figures/<experiment>.png`` / ``.csv`` (the README shows them). The CONF of
each experiment is below, so any figure can be re-made by hand.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from balancebench import tracking
from balancebench.paths import results_dir

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
    # Paper 003 Table 1: the alpha/beta grid at 5 GB (migration only).
    "backpressure_alpha_beta": {
        "model": "backpressure",
        "strategies": ["migration"],
        "repetitions": 2,
        "packets_total_mb": 5000,
        "grid": {"backpressure_alpha": [0.1, 0.3, 0.5], "backpressure_beta": [0.1, 0.3, 0.5]},
    },
    # Paper 004 Figs. 1-4: fluctuation, load moved, latency over time; latency vs load.
    "overlay_load": {
        "model": "overlay",
        "repetitions": 2,
        "grid": {"overlay_target_load": [0.2, 0.4, 0.6, 0.8]},
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(EXPERIMENTS), choices=list(EXPERIMENTS))
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    cli = Path(sys.executable).parent / "balancebench"
    for name in args.only:
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
