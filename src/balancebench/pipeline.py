"""The steps of the ``balance_experiment`` DAG as plain functions (no Airflow import).

``dags/balance_experiment.py`` only wires these together; each is testable without
Airflow. Data passed between steps is a small JSON-able dict (an Airflow XCom).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from balancebench import tracking
from balancebench.compare import SERIES, comparison_figure, comparison_table
from balancebench.experiment import RunSpec
from balancebench.generators import generate, generator_params
from balancebench.params import validate_dataset_params, validate_params
from balancebench.paths import datasets_dir, results_dir, validation_dir
from balancebench.validation import ValidationReport, validate_dataset


def generate_step(params: dict[str, Any], dag_id: str, run_id: str) -> dict[str, Any]:
    """Validate Params, write (or reuse) the dataset, open the MLflow parent run."""
    p = validate_params(params)  # also checks the (workload, dataset, strategies) choice
    dataset_dir, manifest, parent = _open_parent(p["dataset"], p, p, dag_id, run_id)
    client = tracking._mlflow().MlflowClient()
    for name, value in tracking.dataset_metrics(manifest).items():
        client.log_metric(parent, name, value)
    return {
        "dataset_dir": str(dataset_dir),
        "dataset_digest": manifest.digest,
        "row_count": manifest.row_count,
        "parent_run_id": parent,
        "params": p,
        "dag_id": dag_id,
        "run_id": run_id,
    }


def _open_parent(
    dataset: str,
    p: dict[str, Any],
    logged_params: dict[str, Any],
    dag_id: str,
    run_id: str,
) -> tuple[Path, Any, str]:
    """Write (or reuse) the seeded dataset, open the MLflow parent run tagged with its
    digest and attach its manifest; returns (dataset_dir, manifest, parent_run_id)."""
    dataset_dir, manifest = generate(dataset, datasets_dir(), generator_params(dataset, p))
    parent = tracking.start_parent_run(
        p["experiment"], logged_params, dag_id, run_id, manifest.digest
    )
    tracking._mlflow().MlflowClient().log_artifact(
        parent, str(Path(dataset_dir) / "manifest.json"), "dataset"
    )
    return Path(dataset_dir), manifest, parent


def generate_dataset_step(params: dict[str, Any], dag_id: str, run_id: str) -> dict[str, Any]:
    """The ``generate_dataset`` DAG's first step: check Params, write (or reuse) the
    dataset, and open an MLflow run (role ``dataset``) carrying its params and manifest."""
    p = validate_dataset_params(params)
    dataset_dir, manifest = generate(
        p["dataset"], datasets_dir(), generator_params(p["dataset"], p)
    )
    run = tracking.start_dataset_run(p["experiment"], p, dag_id, run_id, dataset_dir, manifest)
    return {
        "dataset": p["dataset"],
        "dataset_dir": str(dataset_dir),
        "dataset_digest": manifest.digest,
        "rows": {t: f["rows"] for t, f in manifest.tables.items()},
        "mlflow_run_id": run,
        "params": p,
    }


def validate_dataset_step(generated: dict[str, Any]) -> ValidationReport:
    """GX suites of a generated dataset; result and outcome logged to its MLflow run,
    which ends FINISHED or FAILED."""
    run = generated["mlflow_run_id"]
    report = validate_dataset(
        generated["dataset_dir"],
        validation_dir() / f"{run}.json",
        {"zipf_fit_tolerance": generated["params"]["zipf_fit_tolerance"]},
    )
    tracking.log_validation(run, report)
    tracking.end_run(run, "FINISHED" if report.success else "FAILED", report.message())
    return report


def validate_step(generated: dict[str, Any]) -> ValidationReport:
    """Run the GX suites; the full result goes to ``.local/validation`` and to MLflow."""
    parent = generated["parent_run_id"]
    report = validate_dataset(
        generated["dataset_dir"],
        validation_dir() / f"{parent}.json",
        {"zipf_fit_tolerance": generated["params"]["zipf_fit_tolerance"]},
    )
    tracking.log_validation(parent, report)
    if not report.success:
        tracking.end_run(parent, "FAILED", report.message())
    return report


def submit_args(generated: dict[str, Any]) -> list[list[str]]:
    """One ``spark_apps/run_workload.py`` argument list per strategy (mapped task input)."""
    return [
        RunSpec(
            dataset_dir=generated["dataset_dir"],
            strategy=s,
            params=generated["params"],
            parent_run_id=generated["parent_run_id"],
            dag_id=generated["dag_id"],
            dag_run_id=generated["run_id"],
        ).to_args()
        for s in generated["params"]["strategies"]
    ]


def compare_step(generated: dict[str, Any]) -> tuple[bool, str]:
    """Log the comparison table (CSV) and figure (PNG) to the parent and close it.

    Returns ``(complete, text)``: ``complete`` is False when a strategy has no finished
    child run (its Spark job failed); the parent is then closed as FAILED.
    """
    parent = generated["parent_run_id"]
    mlflow = tracking._mlflow()
    client = mlflow.MlflowClient()
    children = tracking.child_runs(parent)
    finished = children[children["status"] == "FINISHED"] if len(children) else children
    expected = generated["params"]["strategies"]
    done = set(finished["params.strategy"]) if len(finished) else set()
    missing = [s for s in expected if s not in done]
    if len(finished) == 0:
        tracking.end_run(parent, "FAILED", f"no strategy finished; missing {missing}")
        return False, f"no strategy finished; missing {missing}"
    table = comparison_table(finished)
    history = {
        row.strategy: {m: _history(client, row.run_id, m) for m in SERIES}
        for row in table.itertuples()
    }
    out = results_dir() / parent
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "comparison.csv"
    table.to_csv(csv, index=False)
    png = comparison_figure(table, history, out / "comparison.png")
    client.log_artifact(parent, str(csv))
    client.log_artifact(parent, str(png))
    text = table.drop(columns=["run_id"]).to_string(index=False)
    if missing:
        tracking.end_run(parent, "FAILED", f"strategies without a finished run: {missing}")
        return False, text
    tracking.end_run(parent, "FINISHED")
    return True, text


def _history(client: Any, run_id: str, metric: str) -> tuple[list[int], list[float]]:
    points = sorted(client.get_metric_history(run_id, metric), key=lambda m: m.step)
    return [m.step for m in points], [m.value for m in points]


# ---- model_experiment DAG (papers 001-004 models) ------------------------------------


def model_generate_step(params: dict[str, Any], dag_id: str, run_id: str) -> dict[str, Any]:
    """Check the sweep Params, write (or reuse) the model's dataset, open the parent run."""
    from balancebench.models import get_model
    from balancebench.models.sweep import grid_points, sweep_params, validate_model_params

    p = validate_model_params(params)
    dataset = get_model(p["model"]).dataset
    dataset_dir, manifest, parent = _open_parent(dataset, p, sweep_params(p), dag_id, run_id)
    tracking._mlflow().MlflowClient().set_tag(parent, "model", p["model"])
    return {
        "dataset_dir": str(dataset_dir),
        "dataset_digest": manifest.digest,
        "parent_run_id": parent,
        "params": p,
        "expected_children": len(p["strategies"]) * len(grid_points(p["grid"])),
        "dag_id": dag_id,
        "run_id": run_id,
    }


def model_submit_args(generated: dict[str, Any]) -> list[str]:
    """The ``spark_apps/run_model_sweep.py`` arguments of the sweep."""
    from balancebench.model_experiment import ModelSweepSpec

    return ModelSweepSpec(
        dataset_dir=generated["dataset_dir"],
        params=generated["params"],
        parent_run_id=generated["parent_run_id"],
        dag_id=generated["dag_id"],
        dag_run_id=generated["run_id"],
    ).to_args()


def model_compare_step(generated: dict[str, Any]) -> tuple[bool, str]:
    """Close the parent: FINISHED when every (strategy, point) has a finished child."""
    parent = generated["parent_run_id"]
    children = tracking.child_runs(parent)
    finished = children[children["status"] == "FINISHED"] if len(children) else children
    expected = generated["expected_children"]
    if len(finished) < expected:
        text = f"{len(finished)} of {expected} (strategy, point) runs finished"
        tracking.end_run(parent, "FAILED", text)
        return False, text
    cols = ["tags.mlflow.runName"] + sorted(
        c for c in finished.columns if c.startswith("metrics.") and not c.endswith("_rep_std")
    )
    text = finished[cols].to_string(index=False)
    tracking.end_run(parent, "FINISHED")
    return True, text
