"""A model sweep inside a Spark application, logged as MLflow children of the DAG's parent.

Called by ``spark_apps/run_model_sweep.py`` (the ``spark-submit`` entry point): expands
the Params into points (``balancebench.experiment.model_sweep``), measures the
scheduling model's per-task costs by running each WordCount task on Spark (the median
CPU time of 3 runs after a warm-up, less the empty job's;
``spark.scheduling_task_costs``) unless given, runs every point as one Spark task, logs
one child per (strategy, parameter point), and writes the summary table (CSV) and the
model's figure (PNG) to ``.local/results``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from balancebench.experiment.model_sweep import (
    log_sweep,
    model_points,
    repetition_rows,
    run_points_on_spark,
    sweep_figure,
    sweep_params,
    validate_model_params,
)
from balancebench.models import get_model
from balancebench.state import reaper, tracking
from balancebench.state.paths import results_dir


@dataclass(frozen=True)
class ModelSweepSpec:
    """Everything a sweep needs; serialised into the spark-submit arguments."""

    dataset_dir: str
    params: dict[str, Any]
    parent_run_id: str | None = None
    dag_id: str = ""
    dag_run_id: str = ""

    def to_args(self) -> list[str]:
        return ["--spec", json.dumps(self.__dict__, sort_keys=True)]

    @classmethod
    def from_json(cls, text: str) -> ModelSweepSpec:
        return cls(**json.loads(text))


def sweep_dir(parent_run_id: str | None) -> Path:
    return results_dir() / (parent_run_id or "no-parent")


def run_model_sweep(spec: ModelSweepSpec, master: str | None = None) -> dict[str, Any]:
    """Run the sweep on Spark and log it; returns the summary rows and output paths."""
    params = validate_model_params(spec.params)
    model = get_model(params["model"])

    from balancebench.spark.session import get_session

    started = time.perf_counter()
    tracking.reap_orphans()  # an entry point (spark-submit): before opening runs
    reaper.stop_with_launcher()
    spark = get_session(f"balancebench-model-{model.name}", master=master)
    sc = spark.sparkContext
    measured: dict[str, Any] = {}
    if model.name == "scheduling" and params.get("scheduling_task_costs_s") is None:
        from balancebench.spark.scheduling_task_costs import measure_wordcount_costs_detail

        measured = measure_wordcount_costs_detail(spark, spec.dataset_dir)
        params["scheduling_task_costs_s"] = measured["task_costs_s"]
    points = model_points(params, spec.dataset_dir)
    results = run_points_on_spark(spark, points)
    run_params = {
        **tracking.flat_params(sweep_params(params)),
        "dataset_dir": spec.dataset_dir,
        "git_commit": tracking.git_commit(),
        "spark_master": sc.master,
        "points": str(len(points)),
        **tracking.library_versions(),
    }
    out = sweep_dir(spec.parent_run_id)
    rows = log_sweep(params, results, spec.parent_run_id, run_params, out / "points")
    table = pd.DataFrame(rows)
    csv = out / "model_summary.csv"
    table.to_csv(csv, index=False)
    rounds_csv = out / "model_repetitions.csv"
    pd.DataFrame(repetition_rows(params, results)).to_csv(rounds_csv, index=False)
    caption = (
        f"{params['repetitions']} repetition(s) per point (lines: the mean or repetition 0; "
        f"the mean and Student-t 95% interval of every metric: model_summary.csv); seed "
        f"{params['seed']}; {len(points)} model runs in {time.perf_counter() - started:.0f} s "
        "wall on Spark"
    )
    png = sweep_figure(model.name, results, out / f"{model.name}.png", caption)
    if spec.parent_run_id:
        client = tracking.client()
        client.log_artifact(spec.parent_run_id, str(csv))
        client.log_artifact(spec.parent_run_id, str(rounds_csv))
        client.log_artifact(spec.parent_run_id, str(png))
        if measured:
            client.log_dict(spec.parent_run_id, measured, "measured_inputs.json")
    spark.stop()
    return {"rows": rows, "csv": str(csv), "figure": str(png), "points": len(points)}
