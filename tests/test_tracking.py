"""The tracking API: opening the store has no side effect; closing what dead commands left
behind is an explicit call (``tracking.reap_orphans``) that the entry points make."""

from __future__ import annotations

import json
import socket

import pytest

from balancebench.state import reaper, tracking


def test_opening_the_store_closes_nothing_and_reap_orphans_closes_a_dead_owners_run(
    local_state, monkeypatch
):
    # Given a RUNNING run whose owner process is gone (a pid above the kernel's pid_max)
    monkeypatch.setattr(tracking, "_REAPED", set())
    dead = json.dumps({"host": socket.gethostname(), "pid": 99999999, "start": "1"})
    experiment = tracking.ensure_experiment("tracking-reap-explicit")
    run_id = tracking.client().create_run(experiment, tags={reaper.OWNER_TAG: dead}).info.run_id
    alive = tracking.client().create_run(experiment).info.run_id  # no owner: never judged

    # When the store is opened again, as any reader does
    tracking.store()
    # Then the run is left as it is
    assert tracking.client().get_run(run_id).info.status == "RUNNING"

    # When an entry point reaps
    tracking.reap_orphans("a test entry point")
    # Then the dead owner's run is closed KILLED with the reason, the other left running
    closed = tracking.client().get_run(run_id)
    assert closed.info.status == "KILLED"
    assert "a test entry point" in closed.data.tags[reaper.REASON_TAG]
    assert tracking.client().get_run(alive).info.status == "RUNNING"
    tracking.end_run(alive, "FINISHED")


def test_commands_that_open_a_new_store_at_once_all_find_it_made(tmp_path, monkeypatch):
    """Four processes open one new local store at the same moment (as two `balancebench
    run` started together do): MLflow makes a new store's tables by migrating it, and
    two migrations at once fail one of them; the first open is serialized, so all four
    create their experiment."""
    import os
    import subprocess
    import sys
    import time

    start = time.time() + 3.0  # every process imported and waiting by then
    code = (
        "import sys, time\n"
        "from balancebench.state import tracking\n"
        "time.sleep(max(0.0, float(sys.argv[1]) - time.time()))\n"
        "tracking.ensure_experiment(f'at-once-{sys.argv[2]}')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env["BALANCEBENCH_LOCAL"] = str(tmp_path / "local")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(start), str(i)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(4)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], "\n".join(o[-800:] for o in outs)
    made = tmp_path / "local" / "mlflow" / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{made}")
    names = {e.name for e in tracking.client().search_experiments()}
    assert {f"at-once-{i}" for i in range(4)} <= names


def test_a_closed_run_prints_a_link_to_its_runs_table(local_state, capsys):
    # MLflow's own "View run" line opens its GenAI pages (issue 46); ours carries the view
    experiment = tracking.ensure_experiment("tracking-view-link")
    run_id = tracking.client().create_run(experiment).info.run_id
    tracking.end_run(run_id, "FINISHED")
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("View run ") and "(FINISHED)" in line
    assert line.endswith(f"/#/experiments/{experiment}/runs/{run_id}?workflowType=machine_learning")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # free once closed: nothing listens there


def test_a_tracking_server_that_does_not_answer_is_named_in_one_line(local_state, monkeypatch):
    """MLflow's client, after its retries, raises an unchained MlflowException; its
    failure is told as the server that did not answer, not as a 4-line urllib3 trace."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    url = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with pytest.raises(MlflowException) as refused:
        MlflowClient(tracking_uri=url).get_run("0" * 32)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
    line = tracking.unreachable(refused.value)
    assert line == f"the MLflow tracking server at {url} did not answer (connection refused)"
    assert tracking.failure_cause(refused.value) == line
    # A server that answers with an error is not one that does not answer.
    answered = MlflowException(
        "API request to endpoint /api/2.0/mlflow/runs/get failed with error code 500 != 200. "
        "Response body: 'connection refused by the database'"
    )
    assert tracking.unreachable(answered) is None
    assert tracking.unreachable(ConnectionError("API request to x failed with exception")) is None


def test_a_closing_the_server_missed_is_kept_and_done_when_it_answers(
    local_state, monkeypatch, capsys
):
    """A DAG step closes its runs while the tracking server is down: the closing is kept
    on disk and done, with its cause, by the next entry point that reaches the store; a
    closing kept for another store stays for that store."""
    store_uri = tracking.tracking_uri()
    experiment = tracking.ensure_experiment("tracking-pending-close")
    tags = {"airflow.dag_id": "balance_experiment", "airflow.run_id": "manual__pending"}
    open_run = tracking.client().create_run(experiment, tags=tags).info.run_id
    elsewhere = tracking.client().create_run(experiment, tags=tags).info.run_id

    # When the server does not answer
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    down = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", down)
    closed = tracking.close_runs_of_dag_run(
        "balance_experiment", "manual__pending", "FAILED", "ValueError: the step's cause"
    )
    # Then nothing is closed, the user is told, and the closing is kept
    assert closed == []
    assert f"the MLflow tracking server at {down} did not answer" in capsys.readouterr().out
    kept = sorted((local_state / "pending-closes").glob("*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["uri"] == down
    # (the same closing kept for this test's store, as a second entry)
    entry = {**json.loads(kept[0].read_text()), "uri": store_uri}
    (local_state / "pending-closes" / "9999999999999999999-1.json").write_text(json.dumps(entry))

    # When an entry point reaches this store again
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store_uri)
    monkeypatch.setattr(tracking, "_REAPED", set())
    tracking.reap_orphans("a test entry point")
    # Then the run is closed FAILED with the step's cause, and only this store's entry is gone
    run = tracking.client().get_run(open_run)
    assert run.info.status == "FAILED"
    assert run.data.tags[tracking.FAILURE_TAG].startswith("ValueError: the step's cause")
    assert tracking.client().get_run(elsewhere).info.status == "FAILED"  # same DAG run
    assert [p.name for p in (local_state / "pending-closes").glob("*.json")] == [kept[0].name]
    kept[0].unlink()


def test_the_services_runs_outlive_a_scheduler_restart_but_not_a_stop(tmp_path, monkeypatch):
    """Runs opened under the service are owned by its scheduler through its pid file: a
    scheduler restarted after a crash (a new pid in the file) still owns them, since the
    DAG runs go on under it; once the service is stopped (the file removed) nobody does."""
    import subprocess
    import sys

    pidfile = tmp_path / "scheduler.pid"
    crashed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    pidfile.write_text(str(crashed.pid))
    monkeypatch.delenv("BALANCEBENCH_OWNER_PID", raising=False)
    monkeypatch.setenv("BALANCEBENCH_OWNER_PIDFILE", str(pidfile))
    tag = reaper.owner_tags()[reaper.OWNER_TAG]
    assert reaper.owner_alive(tag)
    crashed.kill()
    crashed.wait()
    assert not reaper.owner_alive(tag)  # crashed, nothing restarted it
    successor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pidfile.write_text(str(successor.pid))  # `make airflow` started a new scheduler
        assert reaper.owner_alive(tag)
        pidfile.unlink()  # `make airflow-stop`
        assert not reaper.owner_alive(tag)
    finally:
        successor.kill()
        successor.wait()
    # An owner without a pid file (a command) is that process only.
    plain = json.dumps({"host": socket.gethostname(), "pid": crashed.pid, "start": "1"})
    assert not reaper.owner_alive(plain)


def test_a_rerun_application_supersedes_the_rounds_of_the_earlier_one(local_state, capsys):
    """Airflow runs an application's task again (its scheduler was lost mid-sweep): the
    round runs the earlier run left under the cells, finished or still RUNNING, are closed
    KILLED as superseded, and do not count as the cell's failures."""
    from balancebench.experiment.params import ExperimentSpec
    from balancebench.experiment.round_runs import failed_rounds, finished_rounds
    from balancebench.experiment.rounds import RoundPolicy
    from balancebench.experiment.run_spec import ROUND_TAG, GroupSpec, RunSpec
    from balancebench.experiment.runs import _Application

    client = tracking.client()
    experiment = tracking.ensure_experiment("tracking-supersede")
    cell = client.create_run(experiment).info.run_id
    parent = {"mlflow.parentRunId": cell, tracking.ROLE_TAG: "round", ROUND_TAG: "0"}
    earlier = [client.create_run(experiment, tags=parent).info.run_id for _ in range(3)]
    client.set_terminated(earlier[0], "FINISHED")
    client.set_terminated(earlier[1], "FAILED")  # (earlier[2] is left RUNNING)
    params = ExperimentSpec.checked({"strategies": ["hash"], "n_tuples": 1000})
    group = GroupSpec(
        "g",
        (RunSpec(dataset_dir="unused", strategy="hash", params=params, parent_run_id=cell),),
        RoundPolicy(min_rounds=1, max_rounds=1),
        str(local_state / "results"),
    )
    _Application(None, tracking.store(), 1)._supersede_earlier_rounds(group)
    for run_id in earlier:
        run = client.get_run(run_id)
        assert run.info.status == "KILLED"
        assert run.data.tags[reaper.SUPERSEDED_TAG] == "true"
        assert run.data.tags[reaper.REASON_TAG].startswith("superseded: its application ran")
    assert failed_rounds(cell) == 0 and finished_rounds(cell).empty
    assert "3 round run(s) of an earlier run of this application superseded" in (
        capsys.readouterr().out
    )
    # A round the rerun itself then finishes counts, and a real failure still does.
    again = client.create_run(experiment, tags=parent).info.run_id
    client.set_terminated(again, "FINISHED")
    failed = client.create_run(experiment, tags=parent).info.run_id
    client.set_terminated(failed, "FAILED")
    assert len(finished_rounds(cell)) == 1 and failed_rounds(cell) == 1


def test_runs_triggered_at_once_share_the_experiment_they_both_create(local_state, monkeypatch):
    """Six runs triggered at once each found their experiment missing and created it: all
    but one got RESOURCE_ALREADY_EXISTS, and their generate step failed. The others now
    take the one that was made."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    mlflow = tracking.store()
    real_get = mlflow.get_experiment_by_name
    looked: set[int] = set()
    lock = threading.Lock()

    def missing_at_first(name):  # each caller's first look finds nothing, as if all
        with lock:  # looked before any of them created it
            first = threading.get_ident() not in looked
            looked.add(threading.get_ident())
        return None if first else real_get(name)

    monkeypatch.setattr(mlflow, "get_experiment_by_name", missing_at_first)
    start = threading.Barrier(4)

    def make(_: int) -> str:
        start.wait()  # at once: one creates it, three find it taken
        return tracking.ensure_experiment("tracking-made-at-once")

    with ThreadPoolExecutor(4) as pool:
        ids = set(pool.map(make, range(4)))
    assert len(ids) == 1


def _cli(local_state, *args: str):
    import os
    import subprocess
    import sys
    from pathlib import Path

    cli = str(Path(sys.executable).parent / "balancebench")
    env = {**os.environ, "BALANCEBENCH_LOCAL": str(local_state)}
    return subprocess.run([cli, *args], env=env, capture_output=True, text=True, timeout=300)


def test_a_deleted_experiments_name_is_refused_in_one_line(local_state):
    # Given an experiment deleted in MLflow (it keeps its name until garbage collection)
    made = tracking.ensure_experiment("deleted-one")
    tracking.client().delete_experiment(made)
    # Then using its name again is refused, naming it and the two ways out
    with pytest.raises(tracking.DeletedExperiment) as found:
        tracking.ensure_experiment("deleted-one")
    assert str(found.value) == (
        f"experiment: 'deleted-one' was deleted in MLflow (id {made}); restore it "
        f"(`mlflow experiments restore --experiment-id {made}`, or Restore in the UI's "
        "deleted experiments) or pick another name"
    )
    # and the CLI says that line and exits 2 before Airflow runs anything
    done = _cli(local_state, "run", "--conf", json.dumps({"experiment": "deleted-one"}))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "experiment: 'deleted-one' was deleted in MLflow" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("status", "tag", "reason"),
    [
        ("KILLED", reaper.REASON_TAG, "its owner (pid 123) is gone"),
        ("FAILED", tracking.FAILURE_TAG, "the dataset failed validation: 2 expectations"),
        ("RUNNING", None, "it is still running; its table is written when it ends"),
    ],
)
def test_report_of_a_parent_that_did_not_finish_says_why_and_exits_1(
    local_state, status, tag, reason
):
    experiment = f"report-{status.lower()}"
    parent = tracking.start_parent_run(
        experiment, {"n_tuples": 1000}, "balance_experiment", f"manual__{status}", "sha256:none"
    )
    if tag is not None:
        tracking.client().set_tag(parent, tag, reason)
        tracking.client().set_terminated(parent, status)
    done = _cli(local_state, "report", "--experiment", experiment, "--parent", parent)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"parent run {parent} is {status}: {reason}" in done.stdout
    assert "comparison:   none (no strategy finished a round)" in done.stdout
    assert "comparison.csv" not in done.stdout  # no path to a file that is not there
