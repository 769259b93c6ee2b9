"""`airflow dags test balance_experiment` on tiny data, then MLflow is read back."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from balancebench.core.metric_definitions import METRIC_DEFINITIONS
from balancebench.experiment.compare import headline_metrics
from balancebench.experiment.params import applicable_params, validate_params
from balancebench.generators import generate, generator_params
from balancebench.generators.common import MANIFEST, file_facts
from balancebench.state import tracking
from balancebench.state.paths import datasets_dir, results_dir, validation_dir
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


def test_dag_run_logs_one_child_per_strategy_with_its_rounds(local_state):
    # `balancebench run` is what `make run` calls: it migrates the embedded Airflow DB,
    # runs the DAG and prints the table and the verdicts.
    # Two strategies, a planner among them, in 2 rounds in one Spark application (the
    # default's five rounds of three run in `make run` itself).
    conf = {
        **TINY,
        "experiment": "e2e",
        "strategies": ["hash", "mnrt"],
        "min_rounds": 2,
        "max_rounds": 2,
    }
    done = subprocess.run(
        [str(BIN / "balancebench"), "run", "--conf", json.dumps(conf)],
        env={**os.environ, "COLUMNS": "80"},
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    out = done.stdout
    assert "results:" in out and re.search(r"p50 latency \((ms|s)\)", out), out[-3000:]
    # The verdicts first: every headline figure with its unit, hash's mean as the
    # baseline, mnrt's mean and verdict; in an 80-column terminal nothing wraps and no
    # number prints in e-notation.
    report = out[out.index("the verdicts: each strategy against the baseline") :]
    for words in ("capacity", "node service", "routing", "p99 latency"):
        assert re.search(rf"^{words}\s+(\S+ )?(tuples/s|s|ms|µs)\s*$", report, re.M), words
    assert len(re.findall(r"^  hash\s+\S.* \(baseline\)", report, re.M)) == 4, report
    verdict_rows = re.findall(r"^  mnrt\s+[\d,.]+ .*$", report.split("details:")[0], re.M)
    assert len(verdict_rows) == 4, report[:3000]
    assert all(re.search(r"faster|slower|equivalent|no clear|no ratio", r) for r in verdict_rows)
    tables = report[: report.index("results:")] + report[report.index("answer:") :]
    assert all(len(line) <= 80 for line in tables.splitlines()), tables
    assert not re.search(r"\de[+-]\d", tables), tables
    # It ends with the answer, one line per strategy in the verdicts' words.
    assert re.search(r"^  mnrt against hash: capacity ", report, re.M), report[-2000:]
    parents = _parents("e2e")
    assert len(parents) == 1
    parent = parents.iloc[0]
    assert parent["status"] == "FINISHED"
    assert parent["tags.validation"] == "passed"
    children = tracking.child_runs(parent["run_id"])
    assert sorted(children["params.strategy"]) == ["hash", "mnrt"]
    assert (children["status"] == "FINISHED").all()
    assert (children["tags.balancebench.role"] == "cell").all()
    # Each strategy's cell run: its rounds' figures as steps, their mean and interval.
    client = tracking.client()
    by = children.set_index("params.strategy")
    for strategy in ("hash", "mnrt"):
        steps = client.get_metric_history(by.loc[strategy, "run_id"], "round/latency_p99_s")
        assert sorted(m.step for m in steps) == [0, 1]
        mean = by.loc[strategy, "metrics.latency_p99_s_mean"]
        assert mean == sum(m.value for m in steps) / 2
        assert by.loc[strategy, "metrics.rounds_finished"] == 2
        assert by.loc[strategy, "tags.balancebench.rounds_stopped"] == "max_rounds (2) reached"
    verdict = by.loc["mnrt", "tags.verdict.capacity_tuples_per_s"]
    assert re.match(r"(\d+\.\d% (faster|slower)|equivalent within|no clear difference)", verdict)
    assert parent["tags.verdict.mnrt.capacity_tuples_per_s"] == verdict
    # The runs table's view (the printed experiment link) shows columns a cell run has.
    experiment = client.get_experiment(parent["experiment_id"])
    view = json.loads(experiment.tags[tracking.SHARED_VIEW_TAG + tracking.RUNS_VIEW_KEY])
    for column in view["selectedColumns"]:
        kind, name = re.fullmatch(r"(\w+)\.`(.+)`", column).groups()
        if kind != "attributes":
            assert pd.notna(by.loc["mnrt", f"{kind}.{name}"]), column
    # MLflow's description leads with the answer: a line per strategy, then the table.
    note = parent["tags.mlflow.note.content"]
    assert note.startswith("- mnrt against hash: "), note
    assert re.search(r"^\| capacity \(.*\) \| mean \| against hash \|$", note, re.M), note
    assert parent["metrics.latency_p99_s.mnrt"] > 0
    # One run per round under each cell, in rotated order: hash first, then mnrt first.
    rounds = pd.concat([tracking.child_runs(r) for r in children["run_id"]])
    assert len(rounds) == 4 and (rounds["status"] == "FINISHED").all()
    assert (rounds["tags.balancebench.role"] == "round").all()
    first = rounds.sort_values("tags.balancebench.run_index")["params.strategy"].tolist()
    assert first == ["hash", "mnrt", "mnrt", "hash"]
    # Headline figures under their names, the rest grouped: diag/<m> (run-level) or
    # batch/<m> (per-batch series): MLflow's charts draw each prefix as a section of its
    # own (the service test checks them in the browser).
    headline = headline_metrics()
    for m in REQUIRED:
        assert m in METRIC_DEFINITIONS
        names = [m] if m in headline else [f"diag/{m}", f"batch/{m}"]
        found = [n for n in names if f"metrics.{n}" in rounds]
        assert len(found) == 1, (m, found)
        assert rounds[f"metrics.{found[0]}"].notna().all(), m
    bare = [c[8:] for c in rounds if c.startswith("metrics.") and "/" not in c]
    assert set(bare) <= headline, set(bare) - headline
    assert (rounds["metrics.oracle_passed"] == 1.0).all()
    # Every run carries the Params that apply to it, and the provenance params; not
    # another dataset's, strategy's or workload's.
    applies = applicable_params(validate_params(conf), [])  # what every run shares
    for name in [*applies, "dataset_digest", "git_commit", "spark_master", "workload"]:
        assert rounds[f"params.{name}"].notna().all(), name
    assert "params.band_width" not in rounds and "params.pkg_senders" not in rounds
    assert not any(c.startswith("params.tpch_") for c in rounds)
    # Each Param once: no second copy under another name (strategy.<field> beside
    # <strategy>_<field> was one).
    assert not any(c.startswith("params.strategy.") for c in rounds)
    mnrt = rounds[rounds["params.strategy"] == "mnrt"]
    assert mnrt["params.mnrt_two_stream_ratio"].notna().all()
    assert rounds[rounds["params.strategy"] == "hash"]["params.mnrt_two_stream_ratio"].isna().all()
    assert "topk" in parent["tags.mlflow.runName"] and "N=4" in parent["tags.mlflow.runName"]
    assert set(rounds["params.n_tuples"]) == {str(TINY["n_tuples"])}
    # Planners balance the batches after the first; hash does not.
    one = rounds.set_index("params.strategy")
    mnrt_round = one.loc["mnrt"].iloc[0]
    assert (
        mnrt_round["metrics.batch/imbalance_max_over_mean"]
        < one.loc["hash"].iloc[0]["metrics.batch/imbalance_max_over_mean"]
    )
    history = client.get_metric_history(mnrt_round["run_id"], "batch/imbalance_max_over_mean")
    assert sorted(m.step for m in history) == [0, 1, 2]
    artifacts = {a.path for a in client.list_artifacts(parent["run_id"])}
    assert {
        "comparison.csv",
        "rounds.csv",
        "verdicts.csv",
        "comparison.png",
        "details.png",
        "metric_definitions.json",
        "validation",
    } <= artifacts
    verdicts = pd.read_csv(results_dir() / parent["run_id"] / "verdicts.csv")
    assert set(verdicts["strategy"]) == {"mnrt"} and set(verdicts["baseline"]) == {"hash"}
    assert (verdicts["rounds"] == 2).all()


def test_failed_validation_stops_before_spark(airflow_cli):
    conf = {**TINY, "seed": 99, "experiment": "e2e-bad-data"}
    p = validate_params(conf)
    # The dataset these Params name already exists, but its generator wrote a null key (its
    # manifest keeps the digests of those very bytes, so the cache check passes it: a file
    # changed after it was written would be written again instead, test_cached_datasets).
    folder, manifest = generate(p["dataset"], datasets_dir(), generator_params(p["dataset"], p))
    path = folder / manifest.files[0]
    table = pq.read_table(path)
    keys = table.column("key").to_pylist()
    keys[5] = None
    pq.write_table(table.set_column(2, "key", pa.array(keys, pa.int64())), path)
    facts = {**manifest.file_facts, path.name: file_facts(path)}
    (folder / MANIFEST).write_text(dataclasses.replace(manifest, file_facts=facts).to_json())

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
    # The root cause stays the parent's: the comparison that follows (all_done) finds no
    # rounds, and neither crashes nor overwrites it.
    assert parent["tags.balancebench.failure"].startswith("the dataset failed validation: ")
    assert "IndexError" not in out
    assert len(tracking.child_runs(parent["run_id"])) == 0
    saved = json.loads((validation_dir() / f"{parent['run_id']}.json").read_text())
    assert saved["success"] is False
