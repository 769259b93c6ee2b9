"""`airflow dags test balance_experiment` on tiny data, then MLflow is read back."""

from __future__ import annotations

import json
import os
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from balancebench import tracking
from balancebench.compare import headline_metrics
from balancebench.experiment_params import applicable_params, validate_params
from balancebench.generators import generate, generator_params
from balancebench.metrics import METRIC_DEFINITIONS
from balancebench.paths import datasets_dir, results_dir, validation_dir
from tests.e2e.conftest import BIN, ROOT, TINY

pytestmark = pytest.mark.slow

REQUIRED = [
    "plan_time_ms",
    "plan_time_ms_mean",
    "plan_time_ms_max",
    "imbalance_max_over_mean",
    "makespan_s",
    "ideal_makespan_s",
    "throughput_tuples_per_s",
    "latency_p50_s",
    "latency_p99_s",
    "routing_table_entries",
    "migrated_tuples",
    "wall_s",
    "oracle_passed",
    "latency_p95_s",
    "nodes_used",
    "avg_received_tuples_per_node",
    "replication_factor",
    "state_tuples_max_node",
    "result_rows",
    "nodes_used_max",
    "avg_received_tuples_per_node_total",
    "replication_factor_total",
    "state_tuples_max_node_max",
    "result_rows_total",
    # the cost model (issue 12)
    "route_s",
    "service_s",
    "harness_s",
    "harness_s_total",
    "migration_s_total",
    "migration_bytes_total",
    "capacity_tuples_per_s",
    "sustainable_rate_tuples_per_s",
    # costs that grow with the work (issue 26)
    "node_fixed_s",
    "node_work_per_tuple_us",
    "node_work_residual_s",
    "migration_extract_s_total",
]


def _parents(experiment: str):
    mlflow = tracking.store()
    exp = mlflow.get_experiment_by_name(experiment)
    runs = mlflow.search_runs(
        [exp.experiment_id], filter_string="tags.`balancebench.role` = 'parent'"
    )
    return runs


def test_dag_run_logs_one_child_per_strategy(local_state):
    # `balancebench run` is what `make run` calls: it migrates the embedded Airflow DB,
    # runs the DAG and prints the table.
    # Two strategies, a planner among them: each is one spark-submit, and make test's
    # time is near its bound (the default's three run in `make run` itself).
    conf = {**TINY, "experiment": "e2e", "strategies": ["hash", "mnrt"]}
    done = subprocess.run(
        [str(BIN / "balancebench"), "run", "--conf", json.dumps(conf)],
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    assert "results:" in done.stdout and "latency_p50_s" in done.stdout, done.stdout[-3000:]
    parents = _parents("e2e")
    assert len(parents) == 1
    parent = parents.iloc[0]
    assert parent["status"] == "FINISHED"
    assert parent["tags.validation"] == "passed"
    children = tracking.child_runs(parent["run_id"])
    assert sorted(children["params.strategy"]) == ["hash", "mnrt"]
    assert (children["status"] == "FINISHED").all()
    # Headline figures under their names, the rest grouped: diag/<m> (run-level) or
    # batch/<m> (per-batch series): MLflow's charts draw each prefix as a section of its
    # own (the service test checks them in the browser).
    headline = headline_metrics()
    for m in REQUIRED:
        assert m in METRIC_DEFINITIONS
        names = [m] if m in headline else [f"diag/{m}", f"batch/{m}"]
        found = [n for n in names if f"metrics.{n}" in children]
        assert len(found) == 1, (m, found)
        assert children[f"metrics.{found[0]}"].notna().all(), m
    bare = [c[8:] for c in children if c.startswith("metrics.") and "/" not in c]
    assert set(bare) <= headline, set(bare) - headline
    assert (children["metrics.oracle_passed"] == 1.0).all()
    # Every child carries the Params that apply to it, and the provenance params; not
    # another dataset's, strategy's or workload's.
    applies = applicable_params(validate_params(conf), [])  # what every child shares
    for name in [*applies, "dataset_digest", "git_commit", "spark_master", "workload"]:
        assert children[f"params.{name}"].notna().all(), name
    assert "params.band_width" not in children and "params.pkg_senders" not in children
    assert not any(c.startswith("params.tpch_") for c in children)
    # Each Param once: no second copy under another name (strategy.<field> beside
    # <strategy>_<field> was one).
    assert not any(c.startswith("params.strategy.") for c in children)
    mnrt = children[children["params.strategy"] == "mnrt"].iloc[0]
    assert mnrt["params.mnrt_two_stream_ratio"] is not None
    assert (
        children[children["params.strategy"] == "hash"]["params.mnrt_two_stream_ratio"].isna().all()
    )
    # The parent says who won each figure, and why it exists.
    assert parent["tags.winner.latency_p99_s"] in {"hash", "mnrt"}
    assert "topk" in parent["tags.mlflow.runName"] and "N=4" in parent["tags.mlflow.runName"]
    assert "Best per figure" in parent["tags.mlflow.note.content"]
    assert parent["metrics.latency_p99_s.mnrt"] > 0
    assert set(children["params.n_tuples"]) == {str(TINY["n_tuples"])}
    # Planners balance the batches after the first; hash does not.
    by = children.set_index("params.strategy")
    assert (
        by.loc["mnrt", "metrics.batch/imbalance_max_over_mean"]
        < by.loc["hash", "metrics.batch/imbalance_max_over_mean"]
    )
    client = tracking.client()
    history = client.get_metric_history(by.loc["mnrt", "run_id"], "batch/imbalance_max_over_mean")
    assert sorted(m.step for m in history) == [0, 1, 2]
    artifacts = {a.path for a in client.list_artifacts(parent["run_id"])}
    assert {
        "comparison.csv",
        "comparison.png",
        "metric_definitions.json",
        "validation",
    } <= artifacts
    assert (results_dir() / parent["run_id"] / "comparison.csv").exists()


def test_failed_validation_stops_before_spark(airflow_cli):
    conf = {**TINY, "seed": 99, "experiment": "e2e-bad-data"}
    p = validate_params(conf)
    # The dataset these Params name already exists, but someone broke it: a null key.
    folder, manifest = generate(p["dataset"], datasets_dir(), generator_params(p["dataset"], p))
    path = folder / manifest.files[0]
    table = pq.read_table(path)
    keys = table.column("key").to_pylist()
    keys[5] = None
    pq.write_table(table.set_column(2, "key", pa.array(keys, pa.int64())), path)

    done = airflow_cli("dags", "test", "balance_experiment", "-c", json.dumps(conf))
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert "expect_column_values_to_not_be_null({'column': 'key'})" in out
    assert "run_rounds" not in {
        line.split("task_id=")[-1].split()[0]
        for line in out.splitlines()
        if "[DAG TEST] starting" in line
    }
    parent = _parents("e2e-bad-data").iloc[0]
    assert parent["status"] == "FAILED"
    assert parent["tags.validation"] == "failed"
    assert len(tracking.child_runs(parent["run_id"])) == 0
    saved = json.loads((validation_dir() / f"{parent['run_id']}.json").read_text())
    assert saved["success"] is False
