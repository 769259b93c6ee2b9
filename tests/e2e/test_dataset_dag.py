"""`airflow dags test generate_dataset`: a real DAG run generates, validates and logs."""

from __future__ import annotations

import json

import pytest

from balancebench.generators import load_manifest
from balancebench.state import tracking

pytestmark = pytest.mark.slow


def test_generate_dataset_dag_logs_a_validated_dataset(airflow_cli):
    conf = {
        "dataset": "topic_stream",
        "n_tuples": 30_000,
        "n_keys": 300,
        "input_rate_tuples_per_s": 10_000.0,
        "experiment": "e2e-datasets",
    }
    done = airflow_cli("dags", "test", "generate_dataset", "-c", json.dumps(conf))
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    mlflow = tracking.store()
    exp = mlflow.get_experiment_by_name("e2e-datasets")
    runs = mlflow.search_runs([exp.experiment_id], filter_string="tags.dataset = 'topic_stream'")
    assert len(runs) == 1
    run = runs.iloc[0]
    assert run["status"] == "FINISHED"
    assert run["tags.validation"] == "passed"
    assert run["metrics.rows_events_tuples"] == 30_000
    assert run["metrics.validation_failed_expectations"] == 0
    assert run["params.topic_stream_drift_fraction"] == "0.1"
    manifest = load_manifest(run["params.dataset_dir"])
    assert manifest.digest == run["params.dataset_digest"]
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(run["run_id"])}
    assert {"dataset", "validation", "metric_definitions.json"} <= artifacts


def test_generate_dataset_dag_rejects_a_bad_param_before_any_work(airflow_cli):
    conf = {"dataset": "phone_stream", "phone_stream_sigma_to": -1, "experiment": "e2e-bad"}
    done = airflow_cli("dags", "test", "generate_dataset", "-c", json.dumps(conf))
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "phone_stream_sigma_to" in out
    assert tracking.store().get_experiment_by_name("e2e-bad") is None
