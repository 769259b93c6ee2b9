"""The tracking API: opening the store has no side effect; closing what dead commands left
behind is an explicit call (``tracking.reap_orphans``) that the entry points make."""

from __future__ import annotations

import json
import socket

from balancebench import reaper, tracking


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
        "from balancebench import tracking\n"
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
