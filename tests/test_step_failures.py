"""A DAG step that raises closes the runs of its DAG run still RUNNING as FAILED with the
first line of the real cause (``pipeline.ends_runs_on_failure``), on the real MLflow
store: no run is left RUNNING for the next command to close with a guessed reason."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import pandas as pd
import pytest

from balancebench.experiment.params import ExperimentSpec
from balancebench.experiment.run_spec import ROUND_TAG
from balancebench.orchestration import pipeline
from balancebench.state import tracking


def _open_parent(dag_run: str, dataset_dir: str = "/nonexistent/dataset") -> dict:
    params = ExperimentSpec.checked({"experiment": "step-failures", "n_tuples": 1000})
    parent = tracking.start_parent_run(
        "step-failures", {"n_tuples": 1000}, "balance_experiment", dag_run, "sha256:none"
    )
    dataset = pipeline.Dataset(dataset_dir, "sha256:none", {"events": 1000})
    generated = pipeline.Generated(
        "balance_experiment", dag_run, parent, params.to_json(), {"topic_stream": dataset}
    )
    return generated.to_xcom()


def test_a_failing_validate_step_closes_its_parent_failed_with_the_cause(local_state, tmp_path):
    (tmp_path / "manifest.json").write_text("[1, 2]")
    generated = _open_parent("manual__validate", str(tmp_path))
    with pytest.raises(ValueError, match="not a dataset manifest"):
        pipeline.validate_step(generated)
    run = tracking.store().get_run(generated["run"])
    assert run.info.status == "FAILED"
    cause = run.data.tags[tracking.FAILURE_TAG]
    assert cause.startswith("ValueError: dataset_dir: manifest.json in")
    assert "failed: ValueError" in run.data.tags[tracking.NOTE_TAG]


def test_a_compare_step_that_cannot_write_names_the_storage_fault(local_state):
    """The comparison's folder is a file: the parent ends FAILED naming the path (the
    same path a full disk takes: an OSError turned into one line)."""
    generated = _open_parent("manual__compare")
    other = _open_parent("manual__other")  # another DAG run's parent: left alone
    client = tracking.client()
    experiment = client.get_run(generated["run"]).info.experiment_id
    cell = client.create_run(
        experiment, tags={"mlflow.parentRunId": generated["run"], tracking.ROLE_TAG: "cell"}
    ).info.run_id
    client.log_param(cell, "strategy", "hash")
    # One finished round of the strategy: the step has a comparison to write.
    round_run = client.create_run(
        experiment,
        tags={"mlflow.parentRunId": cell, tracking.ROLE_TAG: "round", ROUND_TAG: "0"},
    ).info.run_id
    client.log_metric(round_run, "capacity_tuples_per_s", 1e6)
    client.set_terminated(round_run, "FINISHED")
    blocked = local_state / "results"
    blocked.mkdir(parents=True, exist_ok=True)
    (blocked / generated["run"]).write_text("a file where a folder goes")
    with pytest.raises(OSError) as raised:
        pipeline.compare_step(generated)
    assert raised.value.errno in (errno.EEXIST, errno.ENOTDIR)
    run = tracking.store().get_run(generated["run"])
    assert run.info.status == "FAILED"
    assert generated["run"] in run.data.tags[tracking.FAILURE_TAG]
    assert tracking.store().get_run(other["run"]).info.status == "RUNNING"


def test_failure_cause_is_one_short_escaped_line():
    cause = tracking.failure_cause(ValueError("first \x1b[31mline\nsecond line" + "x" * 999))
    assert cause == "ValueError: first \\x1b[31mline"
    full = tracking.failure_cause(OSError(errno.ENOSPC, "No space left on device", "/data/x"))
    assert full.startswith("no space left on / (the file system that holds /data/x is full)")


def test_a_dag_run_that_ends_closes_the_runs_it_left_open(local_state):
    """The listener Airflow calls when a DAG run ends (marked failed or success by a
    user included) closes that DAG run's RUNNING MLflow runs as KILLED with Airflow's
    message, and no other DAG run's."""
    import sys
    import types
    from pathlib import Path

    from balancebench.orchestration.local_env import airflow_env

    # Airflow reads its plugins folder when first imported (as tests/test_dag.py does).
    os.environ.update(airflow_env())
    import airflow  # noqa: F401  (puts the plugins folder on sys.path)

    plugins = str(Path(__file__).resolve().parents[1] / "plugins")
    if plugins not in sys.path:  # Airflow imported earlier without the environment
        sys.path.append(plugins)  # kept: undoing it would also undo Airflow's own entry
    import spark_run

    stopped = _open_parent("manual__stopped")
    other = _open_parent("manual__other_run")
    dag_run = types.SimpleNamespace(dag_id="balance_experiment", run_id="manual__stopped")
    spark_run.MlflowRunsListener().on_dag_run_failed(
        dag_run=dag_run, msg="Dag Run's state was manually set to `failed`."
    )
    run = tracking.store().get_run(stopped["run"])
    assert run.info.status == "KILLED"
    assert "manually set to `failed`" in run.data.tags["balancebench.killed_reason"]
    assert tracking.store().get_run(other["run"]).info.status == "RUNNING"


def test_a_strategy_with_a_failed_round_gets_no_verdict_and_fails_its_run(local_state):
    """As in its Spark application (``rounds.Rounds.failed``), a strategy whose round run
    failed is not judged: its cell and the parent end FAILED, its verdicts are left out,
    and the others are judged on their paired rounds (here: 5 each, mnrt clearly faster)."""
    params = ExperimentSpec.checked(
        {"experiment": "step-failures", "n_tuples": 1000, "strategies": ["hash", "qmmp", "mnrt"]}
    )
    parent = tracking.start_parent_run(
        "step-failures", {"n_tuples": 1000}, "balance_experiment", "manual__rounds", "sha256:x"
    )
    dataset = pipeline.Dataset("/nonexistent", "sha256:x", {"events": 1000})
    generated = pipeline.Generated(
        "balance_experiment", "manual__rounds", parent, params.to_json(), {"t": dataset}
    ).to_xcom()
    client = tracking.client()
    experiment = client.get_run(parent).info.experiment_id
    noise = [1.0, 1.3, 0.8, 1.2, 0.9]
    for strategy, scale in (("hash", 1.0), ("qmmp", 0.9), ("mnrt", 0.7)):
        cell = client.create_run(
            experiment, tags={"mlflow.parentRunId": parent, tracking.ROLE_TAG: "cell"}
        ).info.run_id
        client.log_param(cell, "strategy", strategy)
        for r, n in enumerate(noise):
            run = client.create_run(
                experiment,
                tags={"mlflow.parentRunId": cell, tracking.ROLE_TAG: "round", ROUND_TAG: str(r)},
            ).info.run_id
            client.log_metric(run, "makespan_s_total", scale * n)
            client.log_metric(run, "capacity_tuples_per_s", 1e6 / (scale * n))
            client.set_terminated(run, "FINISHED")
        if strategy == "qmmp":  # its sixth round's Spark run failed
            run = client.create_run(
                experiment,
                tags={"mlflow.parentRunId": cell, tracking.ROLE_TAG: "round", ROUND_TAG: "5"},
            ).info.run_id
            client.set_terminated(run, "FAILED")
    complete, text = pipeline.compare_step(generated)
    assert not complete
    assert tracking.store().get_run(parent).info.status == "FAILED"
    cells = tracking.child_runs(parent).set_index("params.strategy")
    assert cells.loc["qmmp", "status"] == "FAILED" and cells.loc["mnrt", "status"] == "FINISHED"
    assert pd.isna(cells.loc["qmmp", "tags.verdict.makespan_s_total"])  # no verdict
    assert cells.loc["mnrt", "tags.verdict.makespan_s_total"] == ("30.0% faster [30.0%, 30.0%]")
    assert "qmmp" not in text and "mnrt" in text


def test_a_spark_jvm_killed_by_a_signal_is_named_with_its_strategy_and_signal():
    plugins = str(Path(__file__).resolve().parents[1] / "plugins")
    if plugins not in sys.path:
        sys.path.append(plugins)
    from spark_run import killed_by_signal

    hook = "Cannot execute: spark-submit --master local[*] ... Error code is: -{}."
    lines = [
        "[balancebench progress] application setup (session): 3.2 s",
        "[balancebench progress] round 1 (of 2-2), run 2 of at least 4: qmmp",
        "[balancebench progress] qmmp · round 1: batch 3 of 6 checked by the oracle; 9 tuples",
    ]
    assert killed_by_signal("\n".join([hook.format(9), *lines])) == (
        "the Spark JVM of qmmp was killed by SIGKILL (signal 9: the OOM killer, or a user); "
        "its last progress line: qmmp · round 1: batch 3 of 6 checked by the oracle; 9 tuples"
    )
    # Before its first batch: the strategy is the round's; before any round: not named
    assert killed_by_signal("\n".join([hook.format(15), *lines[:2]])).startswith(
        "the Spark JVM of qmmp was killed by SIGTERM (signal 15); its last progress line: "
    )
    assert killed_by_signal(hook.format(9)) == (
        "the Spark JVM (spark-submit) was killed by SIGKILL (signal 9: the OOM killer, or a user)"
    )
    assert killed_by_signal("Cannot execute: spark-submit ... Error code is: 1.") is None
