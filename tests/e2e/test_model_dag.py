"""`airflow dags test model_experiment` on a small back-pressure sweep, read back from MLflow."""

from __future__ import annotations

import json
import os
import re

import pandas as pd
import pytest

from balancebench.state import tracking
from balancebench.state.paths import local_dir, results_dir

pytestmark = pytest.mark.slow


def test_model_dag_logs_one_child_per_strategy_and_point(airflow_cli):
    # Given a 2-point grid over the volume of one small packets dataset, 2 repetitions
    conf = {
        "model": "backpressure",
        "experiment": "e2e-models",
        "packets_total_mb": 300,
        "grid": {"backpressure_total_mb": [150, 300]},
        "repetitions": 2,
    }
    # When the DAG runs (generate -> GX -> spark-submit sweep -> compare)
    done = airflow_cli("dags", "test", "model_experiment", "-c", json.dumps(conf))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    # Then the parent finished, with one child per (strategy, volume)
    mlflow = tracking.store()
    exp = mlflow.get_experiment_by_name("e2e-models")
    parents = mlflow.search_runs(
        [exp.experiment_id], filter_string="tags.`balancebench.role` = 'parent'"
    )
    assert len(parents) == 1 and parents.iloc[0]["status"] == "FINISHED"
    parent = parents.iloc[0]["run_id"]
    children = tracking.child_runs(parent)
    assert len(children) == 4 and set(children["status"]) == {"FINISHED"}
    assert set(children["params.strategy"]) == {"credit", "migration"}
    # (a number Param, so in its declared type: the grid's 150 is 150.0, one key for both)
    assert set(children["params.point.total_mb"]) == {"150.0", "300.0"}
    assert set(children["params.spark_master"]) == {"local[*]"}
    # And every child has the common metrics and the model's, with their definitions
    for name in ("plan_time_ms", "latency_p99_s", "throughput_mb_per_s", "completion_time_s"):
        assert children[f"metrics.{name}"].notna().all(), name
    assert "params.overlay_nodes" not in children.columns  # only this model's Params
    client = mlflow.MlflowClient()
    artifacts = {a.path for a in client.list_artifacts(parent)}
    assert {"model_summary.csv", "backpressure.png"} <= artifacts
    # And more volume takes longer to complete, for both mechanisms
    summary = pd.read_csv(results_dir() / parent / "model_summary.csv")
    for _, rows in summary.groupby("strategy"):
        by_volume = rows.set_index("total_mb")["completion_time_s"]
        assert by_volume[300] > by_volume[150]
    # And the application's environment shows the heap its JVM was started with
    # (spark-submit's command line: the model sweep's 2g when the variable is unset),
    # not the registry's default for a JVM a session starts itself (4g).
    environment = _environment("balancebench-model-backpressure")
    started = re.search(
        r"--conf spark\.driver\.memory=(\S+)", environment["System Properties"]["sun.java.command"]
    )
    assert started and started.group(1) == os.environ.get("BALANCEBENCH_DRIVER_MEMORY", "2g")
    assert environment["Spark Properties"]["spark.driver.memory"] == started.group(1)


def _environment(app_name: str) -> dict:
    """The environment event of the newest Spark application of that name (its event
    log's ``SparkListenerEnvironmentUpdate``)."""
    logs = sorted((local_dir() / "spark-events").iterdir(), key=lambda p: p.stat().st_mtime)
    for log in reversed(logs):
        with log.open(encoding="utf-8") as events:
            for line in events:
                event = json.loads(line)
                if event["Event"] == "SparkListenerEnvironmentUpdate":
                    if event["Spark Properties"].get("spark.app.name") == app_name:
                        return event
                    break
    raise AssertionError(f"no event log of {app_name}")


def test_model_dag_rejects_a_foreign_strategy_before_any_work(airflow_cli):
    conf = {"model": "overlay", "strategies": ["credit"], "experiment": "e2e-models-bad"}
    done = airflow_cli("dags", "test", "model_experiment", "-c", json.dumps(conf))
    text = done.stdout + done.stderr
    assert "'credit' is not a overlay strategy" in text
    assert tracking.store().get_experiment_by_name("e2e-models-bad") is None
