"""The local service against its own faults, each as a user meets it: the MLflow tracking
server killed while a run logs to it, the scheduler killed while a sweep's Spark
application runs and then PostgreSQL killed under the same sweep's rerun, and the disk
under PostgreSQL's data full. What the user sees is in the README's "What happens
when...".

Each fault is injected with SIGKILL to the component's process group (the pid files of
``infra/service.py``), and the service is brought back with ``infra/service.py start``
(``make airflow``), as a user would."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from balancebench.state import reaper, tracking
from tests.e2e.conftest import ROOT, TINY
from tests.e2e.test_service import JUST_PAST, Api, _free_port

pytestmark = [pytest.mark.slow, pytest.mark.service, pytest.mark.timeout(1800)]

SCRIPT = [sys.executable, str(ROOT / "infra" / "service.py")]
# Long enough to be killed in the middle of (the kill follows the first RUNNING round
# within a poll of about two seconds, and three rounds follow it, each of seconds):
# 2 strategies x 2 rounds of 4 batches of 10,000 tuples. No longer: every tuple more
# is CPU that `make test-faults`'s other files share on 2 cores.
ROUNDS = 2
LONG = {
    **TINY,
    "n_batches": 4,
    "strategies": ["hash", "qmmp"],
    "min_rounds": ROUNDS,
    "max_rounds": ROUNDS,
}


@pytest.fixture(scope="module")
def service(local_state):
    ports = {"AIRFLOW_PORT": _free_port(), "MLFLOW_PORT": _free_port()}
    env = {
        **os.environ,
        **{k: str(v) for k, v in ports.items()},
        "BALANCEBENCH_NIGHTLY_CRON": JUST_PAST.strftime("%M %H * * *"),  # a day away
    }
    started = subprocess.run(
        [*SCRIPT, "start"], env=env, capture_output=True, text=True, timeout=400, cwd=ROOT
    )
    assert started.returncode == 0, started.stdout[-3000:] + started.stderr[-3000:]
    folder = Path(local_state) / "service"
    password = (folder / "password").read_text().strip()
    api = Api(f"http://127.0.0.1:{ports['AIRFLOW_PORT']}", password)
    deadline = time.monotonic() + 180
    while not {"nightly_sweep", "balance_experiment", "generate_dataset"} <= {
        d["dag_id"] for d in api.call("GET", "/api/v2/dags")["dags"]
    }:
        assert time.monotonic() < deadline, "the DAGs were not parsed"
        time.sleep(2)
    for dag_id in ("balance_experiment", "generate_dataset"):
        api.call("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{ports['MLFLOW_PORT']}")
        patch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
        patch.setenv("MLFLOW_TRACKING_PASSWORD", password)
        yield {"api": api, "env": env, "folder": folder, "ports": ports, "local": local_state}
    stopped = subprocess.run(
        [*SCRIPT, "stop"], env=env, capture_output=True, text=True, timeout=200, cwd=ROOT
    )
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr


def _kill(service, component: str) -> None:
    """SIGKILL to a component's whole process group, as a crash or the OOM killer would;
    returns once the group is gone (a signal is delivered, not waited for)."""
    group = int((service["folder"] / f"{component}.pid").read_text())
    os.killpg(group, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while reaper.process_running(group) and time.monotonic() < deadline:
        time.sleep(0.2)


def _service_script(service, command: str) -> subprocess.CompletedProcess:
    """``infra/service.py start|stop|status`` on this module's service (``make airflow``,
    ``make airflow-stop``, ``make airflow-status``)."""
    return subprocess.run(
        [*SCRIPT, command],
        env=service["env"],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=ROOT,
    )


def _start_again(service) -> str:
    """``make airflow``, as the user runs it after a fault."""
    again = _service_script(service, "start")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    return again.stdout


def _runs(experiment: str):
    mlflow = tracking.store()
    found = mlflow.get_experiment_by_name(experiment)
    return mlflow.MlflowClient().search_runs([found.experiment_id], max_results=5000)


def _wait_for_a_running_round(experiment: str, since_ms: int = 0, timeout: float = 400) -> None:
    """Until a round run of the experiment started at or after ``since_ms`` (ms since the
    epoch) is RUNNING: an application is mid-batch (with ``since_ms``, a rerun's, not the
    rounds its interrupted predecessor left open)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        mlflow = tracking.store()
        if mlflow.get_experiment_by_name(experiment) is not None and any(
            r.info.status == "RUNNING"
            and r.data.tags.get(tracking.ROLE_TAG) == "round"
            and r.info.start_time >= since_ms
            for r in _runs(experiment)
        ):
            return
        time.sleep(2)
    raise AssertionError(f"no round of {experiment} started in {timeout} s")


def _task_log(service, path: str, task: str, attempt: int = 1) -> list[str]:
    """The events of one task attempt's log (Airflow writes one JSON object a line)."""
    dag_id, run_id = path.split("/dags/")[1].split("/dagRuns/")
    folder = service["local"] / "airflow" / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"
    lines = (folder / f"task_id={task}" / f"attempt={attempt}.log").read_text().splitlines()
    return [json.loads(line).get("event", "") for line in lines if line.startswith("{")]


def test_the_tracking_server_killed_mid_run_fails_the_task_in_one_line(service):
    """The MLflow server dies while a run logs to it: the task fails within a minute or
    two with one line naming the server (not minutes of retries and a urllib3 trace);
    after ``make airflow`` the next trigger works, and the runs the dead server left open
    are closed FAILED with that cause, none RUNNING."""
    api = service["api"]
    url = f"http://127.0.0.1:{service['ports']['MLFLOW_PORT']}"
    conf = {**LONG, "experiment": "e2e-fault-mlflow"}
    killed_run = api.trigger("balance_experiment", conf)
    _wait_for_a_running_round(conf["experiment"])
    _kill(service, "mlflow")
    killed_at = time.monotonic()
    state, tis, _ = api.wait(killed_run, timeout=600)
    assert state == "failed", tis
    assert time.monotonic() - killed_at < 240  # three retries of a few seconds per call
    events = _task_log(service, killed_run, "run_rounds/map_index=0")
    named = [e for e in events if "did not answer" in e]
    assert named == [
        f"balancebench: the MLflow tracking server at {url} did not answer (connection "
        "refused); this application stops."
    ], events[-10:]
    assert not any("Traceback" in e or "urllib3" in e for e in events)

    assert "mlflow: started" in _start_again(service)
    state, tis = api.run_dag(
        "balance_experiment",
        {
            **TINY,
            "strategies": ["hash"],
            "min_rounds": 1,
            "max_rounds": 1,
            "experiment": conf["experiment"],
        },
    )
    assert state == "success", tis
    runs = _runs(conf["experiment"])
    assert not [r for r in runs if r.info.status == "RUNNING"]
    dag_run_id = killed_run.rsplit("/", 1)[1]
    left = [r for r in runs if r.data.tags.get("airflow.run_id") == dag_run_id]
    assert {r.data.tags.get(tracking.ROLE_TAG) for r in left} >= {"parent", "cell", "round"}
    for run in left:
        if run.info.status == "FINISHED":
            assert run.data.tags[tracking.ROLE_TAG] == "round"  # measured before the kill
            continue
        assert run.info.status == "FAILED", run.data.tags
        assert run.data.tags[tracking.FAILURE_TAG].startswith(
            f"the MLflow tracking server at {url} did not answer"
        )
    assert not list((service["local"] / "pending-closes").glob("*.json"))


def test_the_scheduler_then_postgresql_killed_mid_sweep_are_each_resumed(service):
    """One sweep, two faults one after the other, each while a Spark application of the
    sweep runs (one sweep rather than one a fault: an interrupted application and its
    rerun fewer, minutes of `make test-faults`'s two cores):

    1. the scheduler dies: the application stops (by itself when its Airflow process
       goes, else stopped by its rerun: it must not run on unwatched beside it); after
       ``make airflow`` the new scheduler runs the task again within a minute or two;
    2. while that rerun's application runs, PostgreSQL dies (SIGKILL to its postmaster):
       the scheduler, DAG processor and triggerer exit on their database errors and the
       application stops; ``make airflow-status`` shows what is missing and ``make
       airflow`` starts PostgreSQL again (its crash recovery) and the rest.

    The sweep then runs to success, each round counted once, nothing RUNNING."""
    import psutil

    api = service["api"]
    sweep = _sweep_conf("e2e-fault-scheduler-postgres")
    path = api.trigger("nightly_sweep", sweep)
    _wait_for_a_running_round(sweep["experiment"])
    application = [
        p
        for p in psutil.process_iter(["cmdline"])
        if "run_workload.py" in (line := " ".join(p.info["cmdline"] or []))
        and str(service["local"]) in line  # this service's (other tests run theirs)
    ]
    assert application
    _kill(service, "scheduler")
    restarted_ms = int(time.time() * 1000)
    assert "scheduler: started" in _start_again(service)
    _wait_for_a_running_round(sweep["experiment"], since_ms=restarted_ms, timeout=600)
    # The first application did not run on beside its rerun: it stopped itself when its
    # Airflow process went, or the rerun stopped it (reaper.stop_application).
    _, alive = psutil.wait_procs(application, timeout=5)
    assert not alive, alive

    postmaster = int((service["folder"] / "postgres" / "postmaster.pid").read_text().split()[0])
    os.kill(postmaster, signal.SIGKILL)
    deadline = time.monotonic() + 180
    while True:  # what the user finds: part of the service stopped
        found = _service_script(service, "status")
        if "scheduler: stopped" in found.stdout or time.monotonic() > deadline:
            break
        time.sleep(3)
    assert found.returncode == 3 and "postgres: stopped" in found.stdout, found.stdout
    assert "`make airflow` starts what is missing" in found.stdout
    again = _start_again(service)
    assert "postgres: started" in again, again
    state, tis, _ = api.wait(path, timeout=900)
    assert state == "success", tis
    _resumed_sweep_counts_each_round_once(sweep["experiment"], tis, interrupted=2)


def _sweep_conf(experiment: str) -> dict:
    grid = {"workloads": ["topk"], "strategies": ["hash", "qmmp"], "zipf_s": [1.0], "n_nodes": [4]}
    return {
        **{k: v for k, v in LONG.items() if k not in ("n_nodes", "strategies")},
        "grid": grid,
        "experiment": experiment,
    }


def _resumed_sweep_counts_each_round_once(
    experiment: str, tis: list[dict], interrupted: int
) -> None:
    """A sweep its scheduler ran again after ``interrupted`` faults: the last rerun's
    rounds count, exactly once a cell; the interrupted ones are superseded (KILLED, with
    the reason); the sweep's and cells' runs were never closed as orphans; nothing is
    RUNNING."""
    attempts = {t["task_id"]: t["try_number"] for t in tis}
    assert attempts["run_application"] == 1 + interrupted, tis  # run again each time
    runs = _runs(experiment)
    assert not [r for r in runs if r.info.status == "RUNNING"]
    by_role: dict[str, list] = {}
    for run in runs:
        by_role.setdefault(run.data.tags.get(tracking.ROLE_TAG), []).append(run)
    for run in by_role["sweep"] + by_role["cell"]:
        assert run.info.status == "FINISHED"
        assert reaper.REASON_TAG not in run.data.tags  # never closed as an orphan
    superseded = [r for r in by_role["round"] if reaper.SUPERSEDED_TAG in r.data.tags]
    assert superseded and all(r.info.status == "KILLED" for r in superseded)
    assert all(r.data.tags[reaper.REASON_TAG].startswith("superseded: ") for r in superseded)
    per_cell: dict[str, list[str]] = {}
    for run in by_role["round"]:
        if run.info.status == "FINISHED":
            per_cell.setdefault(run.data.tags["mlflow.parentRunId"], []).append(
                run.data.tags["balancebench.round"]
            )
    assert sorted(map(sorted, per_cell.values())) == [[str(r) for r in range(1, ROUNDS + 1)]] * 2


def _every_run() -> dict[str, str]:
    """Every run of the store and its status."""
    client = tracking.client()
    experiments = [e.experiment_id for e in client.search_experiments()]
    return {r.info.run_id: r.info.status for r in client.search_runs(experiments, max_results=5000)}


def _all_rows_readable(service) -> dict[str, int]:
    """Every table of both databases read in full (a damaged page is an error): rows per
    ``database.table``."""
    import psycopg2

    secrets = json.loads((service["folder"] / "secrets.json").read_text())
    socket_dir = (service["folder"] / "postgres" / "postmaster.pid").read_text().splitlines()[4]
    counts = {}
    for database in ("airflow", "mlflow"):
        con = psycopg2.connect(
            dbname=database, user="postgres", password=secrets["postgres"], host=socket_dir
        )
        try:
            with con.cursor() as cur:
                cur.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
                )
                for (table,) in cur.fetchall():
                    cur.execute(f'SELECT count(*) FROM "{table}"')
                    counts[f"{database}.{table}"] = cur.fetchone()[0]
        finally:
            con.close()
    return counts


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root)")
def test_postgresql_on_a_full_disk_is_named_and_loses_nothing(service):
    """The disk under PostgreSQL's data fills up (its folder on a small tmpfs, filled by
    a ballast file): ``make airflow`` refuses with one line naming the disk and what it
    has free; once space returns, ``make airflow`` brings the service back, every table
    reads in full, what was stored before is unchanged, and the next trigger works."""
    api, folder = service["api"], service["folder"]
    before = {k: v for k, v in _every_run().items() if v != "RUNNING"}  # ended ones
    pg = folder / "postgres"
    _service_script(service, "stop").check_returncode()
    kept = folder / "postgres.before-tmpfs"
    pg.rename(kept)
    pg.mkdir()
    used = int(
        subprocess.run(
            ["du", "-sb", str(kept)], capture_output=True, text=True, check=True
        ).stdout.split()[0]
    )
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={used + 160 * 2**20}", "tmpfs", str(pg)], check=True
    )
    try:
        subprocess.run(["cp", "-a", f"{kept}/.", str(pg)], check=True)
        subprocess.run(["chown", "--reference", str(kept), str(pg)], check=True)
        subprocess.run(["chmod", "--reference", str(kept), str(pg)], check=True)
        _start_again(service)
        rows_before = _all_rows_readable(service)
        ballast = pg / "ballast"
        fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o600)
        try:  # the disk fills up
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * 2**20)
            os.ftruncate(fd, max(0, os.fstat(fd).st_size - 8 * 2**20))  # 8 MiB left
        finally:
            os.close(fd)
        refused = _service_script(service, "start")
        assert refused.returncode == 1
        assert f"the disk under PostgreSQL's data ({pg}) has " in refused.stderr
        assert "MiB free" in refused.stderr and "free space and re-run" in refused.stderr
        # A DAG run tried on the full disk: whatever it managed, it ends once space
        # returns. A dataset's run (Airflow's and MLflow's tables written as a strategy
        # run's are, no Spark application: its CPU is `make test-faults`'s bound), on the
        # full disk for a minute or until it has ended.
        dataset = {k: TINY[k] for k in ("n_tuples", "n_keys", "input_rate_tuples_per_s")}
        tried = api.trigger("generate_dataset", {**dataset, "experiment": "e2e-fault-disk"})
        on_full_disk = time.monotonic() + 60
        while api.call("GET", tried)["state"] not in ("success", "failed"):
            if time.monotonic() > on_full_disk:
                break
            time.sleep(3)
        ballast.unlink()  # space returns
        _start_again(service)
        rows_after = _all_rows_readable(service)
        assert all(rows_after[t] >= n for t, n in rows_before.items())
        assert {k: v for k, v in _every_run().items() if k in before} == before
        assert api.wait(tried, timeout=900)[0] in ("success", "failed")
        small = {**TINY, "strategies": ["hash"], "min_rounds": 1, "max_rounds": 1}
        state, tis = api.run_dag("balance_experiment", {**small, "experiment": "e2e-fault-disk"})
        assert state == "success", tis
        assert not [r for r in _runs("e2e-fault-disk") if r.info.status == "RUNNING"]
    finally:
        _service_script(service, "stop")
        subprocess.run(["umount", "-l", str(pg)], check=True)
        pg.rmdir()
        kept.rename(pg)
    _start_again(service)  # as the fixture left it, for its own stop
