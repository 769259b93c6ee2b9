"""The local Airflow service as its users run it (``make airflow``): started by its own
script, a sweep triggered through the authenticated REST API twice (the second time one
cell slowed on purpose, which exactly that cell's regression flag must catch; the first
time with six manual ``balance_experiment`` runs triggered at once beside it, the
whole service's peak memory printed), MLflow read back through its server,
Airflow's and MLflow's data found in the service's PostgreSQL, the report page opened in a
real headless browser, and everything stopped."""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from balancebench.orchestration.sweep_grid import DEFAULT_GRID
from balancebench.orchestration.sweep_pipeline import TEST_SLOW_PLANS_ENV
from balancebench.state import tracking
from tests.e2e.conftest import ROOT, TINY, listening_ports, only_loopback
from tests.e2e.service_memory import COMPONENTS, PeakMemory

# Sweeps of one spark-submit (two runs) each, a manual run and a sweep typed in the form:
# on a machine the other test workers share, the module takes up to about 15 minutes (the
# plugin's default limit is 900 s a test).
pytestmark = [pytest.mark.slow, pytest.mark.service, pytest.mark.timeout(2400)]

CELLS = {"workloads": ["topk"], "strategies": ["hash", "qmmp"], "zipf_s": [1.0], "n_nodes": [4]}
SLOW = "topk · qmmp · s=1 · N=4"
SWEEP = {
    **{k: v for k, v in TINY.items() if k != "n_nodes"},  # n_nodes is a grid axis here
    "grid": CELLS,
    "min_rounds": 1,
    "max_rounds": 1,
    "experiment": "e2e-nightly",
    # The figure the test slows. The suite runs on 3 workers sharing 2 cores, so the
    # other timed figures move with the neighbours' load, not with the code.
    "regression_metrics": ["plan_time_ms_mean"],
}
# Triggered by hand, MANUAL_RUNS times at once, while the first sweep runs: the DAG runs'
# tasks share the scheduler, the executor's slots, Airflow's database and the MLflow server.
MANUAL = {
    **TINY,
    "strategies": ["hash"],
    "min_rounds": 1,
    "max_rounds": 1,
    "experiment": "e2e-concurrent-service",
}
MANUAL_RUNS = 6
# Triggered beside them: two strategies, two rounds, so its note and MLflow description
# carry verdicts (undecided at two rounds, but worded) for the browser to read.
VERDICT_RUN = {
    **TINY,
    "strategies": ["hash", "qmmp"],
    "min_rounds": 2,
    "max_rounds": 2,
    "experiment": "e2e-verdicts",
}
JUST_PAST = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=3)
# What a database in trouble writes (SQLAlchemy's wrapper of driver errors, PostgreSQL's
# lock and serialization failures, SQLite's lock).
DB_ERRORS = ("OperationalError", "deadlock detected", "could not serialize", "database is locked")


def _free_port() -> int:
    """A free port below Linux's ephemeral range (32768-60999): a port the kernel hands
    out for binding 0 may be handed again, to another test worker's service or to an
    outgoing connection, before the service binds it (it happened: two services at once)."""
    import random

    while True:
        port = random.randint(20_000, 32_000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


class Api:
    """Airflow's REST API with a token from the login (Simple auth manager)."""

    def __init__(self, base: str, password: str) -> None:
        self.base = base
        self.token = self.call("POST", "/auth/token", {"username": "admin", "password": password})[
            "access_token"
        ]

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        headers = {"Content-Type": "application/json"}
        if getattr(self, "token", None):
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=60) as resp:
            return json.loads(resp.read() or b"null")

    def trigger(self, dag_id: str, conf: dict) -> str:
        """Start a DAG run; returns its path in the API."""
        run = self.call(
            "POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf}
        )
        return f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}"

    def wait(self, path: str, timeout: float = 1100) -> tuple[str, list[dict], dict]:
        """State, task instances and the DAG run itself, once it has finished."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.call("GET", path)
            if run["state"] in ("success", "failed"):
                return (
                    run["state"],
                    self.call("GET", path + "/taskInstances")["task_instances"],
                    run,
                )
            time.sleep(3)
        raise AssertionError(f"{path} did not finish in {timeout} s")

    def run_dag(self, dag_id: str, conf: dict) -> tuple[str, list[dict]]:
        return self.wait(self.trigger(dag_id, conf))[:2]


def _postgres(folder: Path) -> tuple[int, Path]:
    """The service's PostgreSQL: its postmaster's pid and its socket's folder."""
    lines = (folder / "postgres" / "postmaster.pid").read_text().splitlines()
    return int(lines[0]), Path(lines[4])


def _postgres_pids(folder: Path) -> list[int]:
    """The postmaster and its children (each of which is its own process group)."""
    postmaster = _postgres(folder)[0]
    found = subprocess.run(["pgrep", "-P", str(postmaster)], capture_output=True, text=True)
    return [postmaster, *(int(p) for p in found.stdout.split())]


@pytest.fixture(scope="module")
def service(local_state):
    ports = {"AIRFLOW_PORT": _free_port(), "MLFLOW_PORT": _free_port()}
    # Two timed runs at once (a user may ask for it; the default is 1): the test only
    # alarms on plan time, which the neighbours' load does not move by a millisecond.
    env = {
        **os.environ,
        **{k: str(v) for k, v in ports.items()},
        "BALANCEBENCH_TIMED_CONCURRENCY": "2",
        # The nightly schedule's slot 3 minutes ago: Airflow's default would start that
        # slot's sweep at once, as `make airflow` at 02:16 did with 02:00. The next slot is
        # a day away, so the test's own sweeps run alone.
        "BALANCEBENCH_NIGHTLY_CRON": JUST_PAST.strftime("%M %H * * *"),
        # The regression alarm's test hook (no Param of a form): the file a sweep reads.
        TEST_SLOW_PLANS_ENV: str(Path(local_state) / "slow-plans.json"),
    }
    script = [sys.executable, str(ROOT / "infra" / "service.py")]
    started = subprocess.run(
        [*script, "start"], env=env, capture_output=True, text=True, timeout=400, cwd=ROOT
    )
    folder = Path(local_state) / "service"
    assert started.returncode == 0, started.stdout[-3000:] + started.stderr[-3000:]
    password = (folder / "password").read_text().strip()
    assert password not in started.stdout + started.stderr  # never printed
    assert oct((folder / "password").stat().st_mode)[-3:] == "600"
    # Running it twice is safe: nothing new starts.
    again = subprocess.run(
        [*script, "start"], env=env, capture_output=True, text=True, timeout=400, cwd=ROOT
    )
    assert again.returncode == 0 and again.stdout.count("already running") == 6, again.stdout
    # MLflow's user database holds the admin password's hash.
    assert oct((folder / "mlflow-auth.db").stat().st_mode)[-3:] == "600"
    status = subprocess.run([*script, "status"], env=env, capture_output=True, text=True, cwd=ROOT)
    assert status.returncode == 0 and "postgres: running" in status.stdout, status.stdout
    assert "Airflow DB postgresql+psycopg2://" in status.stdout
    assert "MLflow store postgresql+psycopg2://" in status.stdout
    pids = [int((folder / f"{c}.pid").read_text()) for c in COMPONENTS]
    pg_pids = _postgres_pids(folder)
    with pytest.MonkeyPatch.context() as patch:
        # This process reads MLflow as the tasks write it: through the service's server.
        patch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{ports['MLFLOW_PORT']}")
        patch.setenv("MLFLOW_TRACKING_USERNAME", "admin")
        patch.setenv("MLFLOW_TRACKING_PASSWORD", password)
        yield {
            "api": f"http://127.0.0.1:{ports['AIRFLOW_PORT']}",
            "password": password,
            "banner": started.stdout,
            "ports": ports,
            "folder": folder,
            "slow_plans": Path(env[TEST_SLOW_PLANS_ENV]),
        }
    stopped = subprocess.run(
        [*script, "stop"], env=env, capture_output=True, text=True, timeout=200, cwd=ROOT
    )
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert stopped.stdout.rstrip().endswith(f"postgres: stopped (pid {pg_pids[0]})")  # last
    for pid in pids:  # every process group it started is gone
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    for pid in pg_pids:  # and PostgreSQL, every process of it
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not any(_listening(p) for p in ports.values())
    # A stopped service is not a failure: `make airflow-status` says so and exits 0.
    status = subprocess.run([*script, "status"], env=env, capture_output=True, text=True, cwd=ROOT)
    assert status.returncode == 0 and "service: stopped" in status.stdout, status.stdout


@pytest.fixture(scope="module")
def sweeps(service):
    api = Api(service["api"], service["password"])
    # Authentication is on: no token, no answer.
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(service["api"] + "/api/v2/dags", timeout=30)
    assert denied.value.code in (401, 403)
    deadline = time.monotonic() + 180
    wanted = {"nightly_sweep", "balance_experiment"}
    while not wanted <= {d["dag_id"] for d in api.call("GET", "/api/v2/dags")["dags"]}:
        assert time.monotonic() < deadline, "nightly_sweep or balance_experiment was not parsed"
        time.sleep(2)
    api.call("PATCH", "/api/v2/dags/balance_experiment", {"is_paused": False})  # as the UI does
    # The history, with MANUAL_RUNS manual runs triggered at once while it runs, the
    # whole service's memory sampled meanwhile.
    with PeakMemory(service["folder"]) as memory:
        sweep_run = api.trigger("nightly_sweep", SWEEP)
        with concurrent.futures.ThreadPoolExecutor(MANUAL_RUNS) as pool:
            manual_runs = list(
                pool.map(lambda _: api.trigger("balance_experiment", MANUAL), range(MANUAL_RUNS))
            )
        verdict_run = api.trigger("balance_experiment", VERDICT_RUN)
        first = api.wait(sweep_run)
        manuals = [api.wait(run) for run in manual_runs]
        verdicts = api.wait(verdict_run)
    # One round each: the regression rule needs one earlier result, and the two
    # cells of a sweep already run side by side (make test-faults' time is near its bound).
    service["slow_plans"].write_text(json.dumps({SLOW: 1500}))
    second = api.run_dag("nightly_sweep", SWEEP)
    return {
        "first": first[:2],
        "second": second,
        "concurrent": (first, manuals),
        "verdicts": verdicts,
        "memory": memory,
    }


def _sweep_parents():
    mlflow = tracking.store()
    exp = mlflow.get_experiment_by_name("e2e-nightly")
    return mlflow.search_runs(
        [exp.experiment_id],
        filter_string="tags.`balancebench.role` = 'sweep'",
        order_by=["attributes.start_time ASC"],
    )


def _chromium(p):
    chromium = shutil.which("chromium")
    assert chromium, "make browser installs Debian's chromium"
    return p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])


def _airflow_page(browser, service):
    """A page of Airflow's UI, logged in as a user does."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(service["api"] + "/auth/login")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", service["password"])
    page.keyboard.press("Enter")
    page.wait_for_url(lambda url: "/auth/login" not in url, timeout=60_000)
    return page


def _mlflow_page(browser, service):
    """A page of MLflow's UI, through its login (HTTP basic auth)."""
    context = browser.new_context(
        http_credentials={"username": "admin", "password": service["password"]},
        viewport={"width": 1400, "height": 900},
    )
    return context.new_page()


def _banner_mlflow_link(service) -> str:
    """The MLflow UI address ``make airflow``'s banner prints."""
    return re.search(r"^MLflow UI:\s+(\S+)", service["banner"], re.M).group(1)


def _field(dialog, param: str):
    """A Param's field in the trigger form, its section opened (the form shows at most
    one section at a time)."""
    field = dialog.locator(f"input[name=element_{param}]")
    for section in ("Sweep", "Rounds", "Experiment", "Dataset", "Sweep"):
        if field.is_visible():
            break
        dialog.get_by_role("button", name=section, exact=True).click()
        dialog.page.wait_for_timeout(500)  # the section's opening animation
    return field


def test_sweep_runs_under_the_scheduler_and_lands_in_mlflow(service, sweeps):
    state, tis = sweeps["first"]
    assert state == "success", tis
    # One task (one Spark application) for the workload and N, named after its cells.
    names = [t["rendered_map_index"] for t in tis if t["task_id"] == "run_application"]
    assert names == ["application 1 of 1: topk · N=4 · s=1 (1 cell group(s) x 1-1 rounds)"]
    parents = _sweep_parents()
    assert len(parents) == 2
    parent = parents.iloc[0]
    assert parent["status"] == "FINISHED"
    assert "cells" in parent["tags.mlflow.note.content"]
    cells = tracking.child_runs(parent["run_id"])
    assert sorted(cells["tags.mlflow.runName"]) == ["topk · hash · s=1 · N=4", SLOW]
    positions = []
    for _, cell in cells.iterrows():
        reps = tracking.child_runs(cell["run_id"])
        assert len(reps) == 1 and (reps["status"] == "FINISHED").all()
        assert (reps["params.timed_concurrency"] == "2").all()  # logged as asked
        positions += list(reps["tags.balancebench.run_index"])
        lo, mean, hi = (cell[f"metrics.latency_p99_s_{s}"] for s in ("ci95_lo", "mean", "ci95_hi"))
        # One round has a mean and no interval (Student t needs two): never a made-up one.
        assert mean > 0 and math.isnan(lo) and math.isnan(hi)
        assert cell["metrics.rounds_finished"] == 1
        assert cell["tags.balancebench.rounds_stopped"] == "max_rounds (1) reached"
        # Only the Params that apply: no other dataset's or strategy's fields.
        params = [c for c in cells.columns if c.startswith("params.") and cell[c] is not None]
        assert not any(
            p.startswith(("params.pkg_", "params.packets_", "params.tpch_")) for p in params
        )
        assert cell["tags.regression"] == "no"
    assert sorted(positions) == ["1", "2"]  # both ran in the group's one application
    artifacts = tracking.client().list_artifacts(parent["run_id"], "report")
    # named as the run's description names them, whole in MLflow's file tree
    assert {Path(a.path).name for a in artifacts} == {
        "report.html",
        "report.txt",
        "report.csv",
        "report.rounds.csv",
    }


def test_the_slowed_cell_and_only_it_is_flagged(service, sweeps):
    state, tis = sweeps["second"]
    by_task = {t["task_id"]: t["state"] for t in tis if t["task_id"] != "run_application"}
    assert by_task["summarize"] == "success"
    assert by_task["check_regressions"] == "failed"  # Airflow's alerting applies
    assert state == "failed"
    parent = _sweep_parents().iloc[1]
    cells = tracking.child_runs(parent["run_id"]).set_index("tags.mlflow.runName")
    assert cells.loc[SLOW, "tags.regression"] == "yes"
    assert "plan_time_ms_mean" in cells.loc[SLOW, "tags.regressed_metrics"]
    assert cells.loc["topk · hash · s=1 · N=4", "tags.regression"] == "no"
    # The slow-down changed timings only: results and plans are the same.
    assert (cells["tags.changed_exact_figures"] == "-").all()
    assert parent["tags.regressions"] != "0"


def test_manual_runs_triggered_at_once_beside_a_sweep_all_finish_without_a_database_error(
    service, sweeps, record_property
):
    """Six ``balance_experiment`` runs triggered through the REST API at the same moment,
    while a sweep runs: every one finishes (their Spark tasks wait for the DAG's slots,
    ``BALANCEBENCH_TIMED_CONCURRENCY``), no task fails, no service log holds a database
    error, and the whole service's peak memory is printed (target: at most 16 GiB)."""
    (sweep_state, sweep_tis, sweep), manuals = sweeps["concurrent"]
    assert sweep_state == "success", sweep_tis
    for state, tis, _ in manuals:
        assert state == "success", tis
        assert {t["state"] for t in tis} == {"success"}, tis
    # They did run at the same time (ISO 8601 times in UTC compare as text).
    assert all(m["start_date"] < sweep["end_date"] for _, _, m in manuals)
    # Each run's note: its answer (one strategy here: none) and its MLflow page.
    for _, _, manual in manuals:
        assert manual["note"].startswith("no verdicts (one strategy"), manual["note"]
        assert "\n\nMLflow: http://127.0.0.1:" in manual["note"], manual["note"]
    mlflow = tracking.store()
    exp = mlflow.get_experiment_by_name(MANUAL["experiment"])
    parents = mlflow.search_runs(
        [exp.experiment_id], filter_string="tags.`balancebench.role` = 'parent'"
    )
    assert list(parents["status"]) == ["FINISHED"] * MANUAL_RUNS
    for parent in parents["run_id"]:
        assert list(tracking.child_runs(parent)["status"]) == ["FINISHED"]
    for log in sorted(service["folder"].glob("*.log")):
        text = log.read_text(errors="replace")
        assert not [e for e in DB_ERRORS if e in text], log
    memory = sweeps["memory"]
    record_property("printed", memory.line() + f" ({MANUAL_RUNS} runs and a sweep at once)")
    assert memory.samples > 10 and memory.peak_bytes <= 16 * 2**30, memory.line()


def _query(folder: Path, database: str, sql: str, args: tuple = ()) -> list[tuple]:
    """Rows of ``sql`` in one of the service's databases, with its password."""
    import psycopg2

    password = json.loads((folder / "secrets.json").read_text())["postgres"]
    con = psycopg2.connect(
        dbname=database, user="postgres", password=password, host=str(_postgres(folder)[1])
    )
    try:
        with con.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()
    finally:
        con.close()


def test_airflow_and_mlflow_keep_their_data_in_postgresql(service, sweeps):
    """What the API server, the scheduler and the MLflow server wrote is in the service's
    PostgreSQL, which asks for a password."""
    import psycopg2

    folder = service["folder"]
    with pytest.raises(psycopg2.OperationalError, match="password"):
        psycopg2.connect(dbname="airflow", user="postgres", host=str(_postgres(folder)[1]))
    # The DAG runs the API server created, in the state the scheduler left them.
    (_, _, sweep), manuals = sweeps["concurrent"]
    ids = (sweep["dag_run_id"], *(manual["dag_run_id"] for _, _, manual in manuals))
    runs = _query(folder, "airflow", "SELECT run_id, state FROM dag_run WHERE run_id IN %s", (ids,))
    assert dict(runs) == dict.fromkeys(ids, "success")
    # The runs the tasks logged through the MLflow server.
    parent = _sweep_parents().iloc[0]["run_id"]
    found = _query(
        folder,
        "mlflow",
        "SELECT e.name, r.status FROM runs r JOIN experiments e USING (experiment_id) "
        "WHERE r.run_uuid = %s",
        (parent,),
    )
    assert found == [("e2e-nightly", "FINISHED")]
    counts = _query(
        folder,
        "mlflow",
        "SELECT count(*) FROM runs r JOIN experiments e USING (experiment_id) WHERE e.name = %s",
        (MANUAL["experiment"],),
    )
    # Each manual run's parent, its one cell and that cell's one round.
    assert counts == [(3 * MANUAL_RUNS,)]


def test_the_service_listens_on_loopback_only(service, sweeps):
    folder = service["folder"]
    pids = []
    for component in COMPONENTS:
        group = int((folder / f"{component}.pid").read_text())
        found = subprocess.run(["pgrep", "-g", str(group)], capture_output=True, text=True)
        pids += [int(p) for p in found.stdout.split()]
    assert pids
    pg_pids = _postgres_pids(folder)
    assert only_loopback(pids + pg_pids) == []
    # PostgreSQL has no TCP port at all: only its Unix socket, in the service's folder.
    assert listening_ports(pg_pids) == set()
    sockets = subprocess.run(["ss", "-lxpH"], capture_output=True, text=True).stdout
    paths = [line.split()[4] for line in sockets.splitlines() if f"pid={pg_pids[0]}," in line]
    assert paths == [str((folder / "postgres").resolve() / ".s.PGSQL.5432")]


def test_the_mlflow_server_runs_no_job_runner(service, sweeps):
    # MLflow 3's default starts a job runner and huey consumers for GenAI jobs nobody here
    # submits (7 processes, about 1.4 GB): only the server's own processes may run
    group = int((service["folder"] / "mlflow.pid").read_text())
    found = subprocess.run(["pgrep", "-g", str(group)], capture_output=True, text=True)
    commands = [
        Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        for pid in found.stdout.split()
        if Path(f"/proc/{pid}/cmdline").exists()
    ]
    assert commands, "the MLflow server's process group is empty"
    runners = ("huey", "mlflow.server.jobs")  # _job_runner, _executor_runner, consumers
    assert not [c for c in commands if any(r in c for r in runners)], commands


def test_the_report_page_renders_in_a_real_browser(service, sweeps):
    from playwright.sync_api import sync_playwright

    parent = _sweep_parents().iloc[1]
    page_path = Path(parent["tags.report_path"])
    assert page_path.exists()
    errors: list[str] = []
    with sync_playwright() as p:
        browser = _chromium(p)
        page = browser.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_path.as_uri())
        widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.naturalWidth)")
        rows = page.locator("table#cells tr").count()
        regressed = page.locator("table#cells tr.regressed").all_inner_texts()
        flagged = page.locator("#regressions li").all_inner_texts()
        links = page.eval_on_selector_all("table#cells a", "as => as.map(a => a.href)")
        few = page.locator("#few").all_inner_texts()
        few = few[0] if few else ""
        few_cells = page.locator("table#cells td.few").count()
        verdicts = page.locator("figcaption li li").all_inner_texts()
        captions = page.locator("figcaption").all_inner_texts()
        history = page.locator("table#history tr").all_inner_texts()
        # The cell's link, followed as a reader does: MLflow's page of that run.
        mlflow = _mlflow_page(browser, service)
        mlflow.goto(links[0])
        mlflow.get_by_role("tab", name="Model metrics").wait_for(timeout=60_000)
        run_page = mlflow.url
        browser.close()
    assert errors == []
    assert widths and all(w > 0 for w in widths)  # every figure decoded and drawn
    assert rows == 3  # header + two cells
    assert len(regressed) == 1 and SLOW in regressed[0]
    assert any(SLOW in line and "plan_time_ms_mean" in line for line in flagged)
    assert all("/#/experiments/" in link for link in links) and len(links) == 2
    assert "/runs/" in run_page and "workflowType=machine_learning" in run_page
    # One round a cell: no interval, so no verdict is decided and none is in bold.
    assert few == "" and few_cells == 0
    assert verdicts and all("qmmp vs hash: no ratio (1 round(s)" in v for v in verdicts)
    assert captions and all("bars: Student-t 95% interval" in c for c in captions)
    # What the regression check compared against, per cell: tonight, the baseline and
    # the earlier run it came from.
    checked = {row.split("\t")[0]: row.split("\t") for row in history[1:]}
    assert set(checked) == {SLOW, "topk · hash · s=1 · N=4"}, history
    for label, (_, earlier, figure, _, baseline, *_, runs, verdict) in checked.items():
        assert (earlier, figure) == ("1", "plan_time_ms_mean"), history
        assert float(baseline) > 0 and re.search(r"\([0-9a-f]{8}\)", runs), history
        assert verdict.strip() == ("regressed" if label == SLOW else "ok"), history


def test_every_dag_can_be_triggered_from_the_ui_on_its_defaults(service):
    """The real trigger form, in a real browser: logged in, the dialog's Trigger button
    is enabled without touching a field, and the fields come in sections, the first-run
    ones open."""
    from playwright.sync_api import sync_playwright

    enabled, sections = {}, {}
    with sync_playwright() as p:
        browser = _chromium(p)
        page = _airflow_page(browser, service)
        for dag_id in (
            "balance_experiment",
            "nightly_sweep",
            "model_experiment",
            "generate_dataset",
        ):
            page.goto(f"{service['api']}/dags/{dag_id}")
            page.get_by_role("button", name="Trigger").first.click()
            dialog = page.get_by_role("dialog")
            dialog.wait_for()
            submit = dialog.get_by_role("button", name="Trigger", exact=True)
            submit.wait_for()
            page.wait_for_timeout(1000)  # the form validates its fields once rendered
            enabled[dag_id] = submit.is_enabled()
            # The form opens on what a first run sets ("Run Parameters"); the rest waits in
            # collapsed sections.
            sections[dag_id] = (
                dialog.get_by_role("button", name="Run Parameters").count(),
                dialog.locator("input[name=element_seed]").is_visible(),
                dialog.locator("input[name=element_warmup_batches]").is_visible(),
            )
            if dag_id == "balance_experiment":
                page.screenshot(path=str(service["folder"] / "trigger-form.png"))
            page.keyboard.press("Escape")
        browser.close()
    assert enabled == dict.fromkeys(enabled, True)
    assert all(opened >= 1 and seed and not warmup for opened, seed, warmup in sections.values())


def test_starting_the_service_started_no_sweep(service, sweeps):
    """The nightly schedule's slot had just passed when the service started: no sweep ran
    for it (only the test's own, triggered by hand); the next is a day later."""
    api = Api(service["api"], service["password"])
    dag = api.call("GET", "/api/v2/dags/nightly_sweep")
    assert dag["is_paused"] is False  # scheduled: it would have run, had its slot come
    runs = api.call("GET", "/api/v2/dags/nightly_sweep/dagRuns")["dag_runs"]
    assert runs and {r["run_type"] for r in runs} == {"manual"}, runs
    slot = JUST_PAST.replace(second=0, microsecond=0) + datetime.timedelta(days=1)
    next_run = dag["next_dagrun_run_after"].replace("Z", "+00:00")
    assert datetime.datetime.fromisoformat(next_run) == slot


def test_mlflow_opens_on_the_runs_table_with_the_headline_apart(service, sweeps):
    """MLflow as a user meets it through a link balancebench prints: the experiment's runs
    table (not the GenAI overview); on a strategy run's charts the per-batch series and the
    diagnostics each in a section of its own, the headline figures apart."""
    from playwright.sync_api import sync_playwright

    mlflow = tracking.store()
    exp = mlflow.get_experiment_by_name(MANUAL["experiment"])
    parent = mlflow.search_runs(
        [exp.experiment_id], filter_string="tags.`balancebench.role` = 'parent'"
    ).iloc[0]
    cell = tracking.child_runs(parent["run_id"]).iloc[0]
    child = tracking.child_runs(cell["run_id"]).iloc[0]  # the cell's one round
    metrics = mlflow.MlflowClient().get_run(child["run_id"]).data.metrics
    per_section = {
        "batch": sum(k.startswith("batch/") for k in metrics),
        "diag": sum(k.startswith("diag/") for k in metrics),
        "Model metrics": sum("/" not in k for k in metrics),  # MLflow's unprefixed section
    }
    assert sum(per_section.values()) == len(metrics)
    with sync_playwright() as p:
        browser = _chromium(p)
        page = _mlflow_page(browser, service)
        page.goto(tracking.ui_link(exp.experiment_id))
        name = page.get_by_role("link", name=parent["tags.mlflow.runName"])
        name.wait_for(timeout=60_000)
        table_url, table_text = page.url, page.inner_text("body")
        page.goto(tracking.ui_link(exp.experiment_id, child["run_id"]))
        page.get_by_role("tab", name="Model metrics").click()
        deadline = time.monotonic() + 60
        while True:  # until every section has drawn its heading and count
            sections = re.findall(r"\n([\w ]+)\n\((\d+)\)", page.inner_text("body"))
            if len(sections) >= 3 or time.monotonic() > deadline:
                break
            page.wait_for_timeout(500)
        browser.close()
    assert f"/#/experiments/{exp.experiment_id}/runs?" in table_url
    assert "Token Usage" not in table_text and "Model training" in table_text
    assert [(n, int(c)) for n, c in sections] == list(per_section.items()), sections


def test_the_verdict_leads_the_run_note_and_mlflow_within_two_clicks(service, sweeps):
    """A two-strategy run, read in Chromium as a user does: the Airflow DAG run's note
    leads with the verdict line and ends with the MLflow link; that link opens the parent
    run, whose description leads with the same verdict; from MLflow's experiment list the
    description is two clicks away (experiment, parent); the runs table the printed
    experiment link opens shows the ratio columns. Screenshots of each page go to the
    service folder."""
    from playwright.sync_api import sync_playwright

    state, tis, run = sweeps["verdicts"]
    assert state == "success", tis
    verdict_line, link = run["note"].split("\n\nMLflow: ")
    assert verdict_line.startswith("qmmp against ") and "capacity" in verdict_line, run["note"]
    mlflow = tracking.store()
    exp = mlflow.get_experiment_by_name(VERDICT_RUN["experiment"])
    parent = mlflow.search_runs(
        [exp.experiment_id], filter_string="tags.`balancebench.role` = 'parent'"
    ).iloc[0]
    assert link == tracking.ui_link(exp.experiment_id, parent["run_id"])
    shown = verdict_line.splitlines()[0][:40]  # what a page shows of the first line
    folder = service["folder"]
    with sync_playwright() as p:
        browser = _chromium(p)
        airflow = _airflow_page(browser, service)
        airflow.goto(f"{service['api']}/dags/balance_experiment/runs/{run['dag_run_id']}")
        # The note's first line shows in the run's header (the whole note, with the
        # link, opens from it).
        airflow.get_by_text(shown).first.wait_for(timeout=60_000)
        airflow.screenshot(path=str(folder / "airflow-run-note.png"))
        page = _mlflow_page(browser, service)
        page.goto(link)
        page.get_by_text(shown).first.wait_for(timeout=60_000)
        page.screenshot(path=str(folder / "mlflow-parent-run.png"))
        # From the list (the banner's link, as a user opens it): click 1 the experiment,
        # click 2 the parent run.
        page.goto(_banner_mlflow_link(service))
        page.get_by_role("link", name=VERDICT_RUN["experiment"], exact=True).click()
        page.get_by_role("link", name=parent["tags.mlflow.runName"]).first.click()
        page.get_by_text(shown).first.wait_for(timeout=60_000)
        # The printed experiment link: the ratio columns beside each run's description.
        page.goto(tracking.ui_link(exp.experiment_id))
        page.get_by_role("link", name=parent["tags.mlflow.runName"]).first.wait_for(timeout=60_000)
        headers = page.inner_text("body")
        page.screenshot(path=str(folder / "mlflow-runs-table.png"))
        browser.close()
    # The Description column leads with the verdict line itself.
    assert f"- {verdict_line[:18]}" in headers, headers
    # (the table draws only the columns in view: the first ratio column, at least)
    assert "capacity_tuples_per_s_ratio" in headers and "Description" in headers, headers


def test_the_banners_mlflow_link_leads_through_the_experiment_list_to_a_runs_table(service, sweeps):
    """The MLflow link ``make airflow`` prints, followed in a fresh browser as a user does:
    one click on an experiment in the list lands on its runs table, not on MLflow's GenAI
    overview (which it opens by default for a browser that has not chosen)."""
    from playwright.sync_api import sync_playwright

    link = _banner_mlflow_link(service)
    assert link.startswith("http://127.0.0.1:")
    mlflow = tracking.store()
    exp = mlflow.get_experiment_by_name(MANUAL["experiment"])
    parent = mlflow.search_runs(
        [exp.experiment_id], filter_string="tags.`balancebench.role` = 'parent'"
    ).iloc[0]
    with sync_playwright() as p:
        browser = _chromium(p)
        page = _mlflow_page(browser, service)  # a new browser context: no choice stored
        page.goto(link)
        page.get_by_role("link", name=MANUAL["experiment"], exact=True).click()
        page.get_by_role("link", name=parent["tags.mlflow.runName"]).first.wait_for(timeout=60_000)
        url, text = page.url, page.inner_text("body")
        browser.close()
    assert f"/#/experiments/{exp.experiment_id}/runs" in url, url
    assert "Token Usage" not in text and "No data available" not in text


def test_a_sweep_typed_in_the_form_and_stopped_leaves_no_run_running(service, sweeps):
    """A user types a sweep into the trigger form (the grid's axes: a multi-select, a
    line of numbers), then marks it failed (the REST API, as the UI's button does): the
    MLflow runs it opened end KILLED with Airflow's reason, none left RUNNING."""
    from playwright.sync_api import expect, sync_playwright

    api = Api(service["api"], service["password"])
    before = {
        r["dag_run_id"] for r in api.call("GET", "/api/v2/dags/nightly_sweep/dagRuns")["dag_runs"]
    }
    typed = {
        "experiment": "e2e-stopped",
        "min_rounds": "1",
        "max_rounds": "1",
        **{k: str(v) for k, v in TINY.items() if k != "n_nodes"},
    }
    with sync_playwright() as p:
        browser = _chromium(p)
        page = _airflow_page(browser, service)
        page.goto(f"{service['api']}/dags/nightly_sweep")
        page.get_by_text("Next Run").wait_for(timeout=60_000)
        # The DAG page's "Next Run": tomorrow, not the slot just past. Its value is
        # fetched after the label shows (a read of the page at once once missed it).
        slot = (JUST_PAST + datetime.timedelta(days=1)).strftime("%Y-%m-%d %H:%M")
        expect(page.locator("body")).to_contain_text(slot, timeout=30_000)
        page.get_by_role("button", name="Trigger").first.click()
        dialog = page.get_by_role("dialog")
        dialog.wait_for()
        _field(dialog, "grid_zipf_s")  # opens the Sweep section
        strategies = dialog.get_by_role("combobox").nth(1)  # after the workloads
        strategies.click()
        for _ in DEFAULT_GRID["strategies"]:
            page.keyboard.press("Backspace")  # the default picks, one by one
        page.keyboard.type("has")
        page.get_by_role("option", name="hash", exact=True).click()
        page.keyboard.press("Tab")
        _field(dialog, "grid_zipf_s").fill("1.0")
        _field(dialog, "grid_n_nodes").fill("4")
        for name, value in typed.items():
            _field(dialog, name).fill(value)
        submit = dialog.get_by_role("button", name="Trigger", exact=True)
        page.wait_for_timeout(1000)  # the form validates what was typed
        submit.click()
        dialog.wait_for(state="hidden", timeout=30_000)
        browser.close()
    new = [
        r
        for r in api.call("GET", "/api/v2/dags/nightly_sweep/dagRuns")["dag_runs"]
        if r["dag_run_id"] not in before
    ]
    assert len(new) == 1, new
    conf = new[0]["conf"]
    assert conf["grid_strategies"] == ["hash"] and conf["grid_workloads"] == ["topk"]
    assert (conf["grid_zipf_s"], conf["grid_n_nodes"]) == ("1.0", "4")
    assert conf["n_tuples"] == TINY["n_tuples"] and conf["experiment"] == "e2e-stopped"
    path = f"/api/v2/dags/nightly_sweep/dagRuns/{new[0]['dag_run_id']}"
    run_id = new[0]["dag_run_id"]
    mlflow = tracking.store()
    this_run = f"tags.`airflow.run_id` = '{run_id}'"
    deadline = time.monotonic() + 600
    while True:  # until a cell's Spark run is measuring (its MLflow run is open)
        exp = mlflow.get_experiment_by_name("e2e-stopped")
        found = (
            mlflow.search_runs(
                [exp.experiment_id],
                filter_string=f"{this_run} AND tags.`balancebench.role` = 'round'",
            )
            if exp
            else []
        )
        if len(found):
            break
        assert time.monotonic() < deadline, "no cell ran within 600 s"
        time.sleep(2)
    api.call("PATCH", path, {"state": "failed"})
    deadline = time.monotonic() + 120
    while True:
        runs = mlflow.search_runs([exp.experiment_id], filter_string=this_run)
        if len(runs) and "RUNNING" not in set(runs["status"]):
            break
        assert time.monotonic() < deadline, runs[["status", "tags.mlflow.runName"]]
        time.sleep(2)
    parent = runs[runs["tags.balancebench.role"] == "sweep"].iloc[0]
    assert parent["status"] == "KILLED"
    assert "manually set" in parent["tags.balancebench.killed_reason"]
    assert set(runs["status"]) <= {"KILLED", "FINISHED"}
    assert (runs["tags.balancebench.role"] == "round").any()  # a cell's round was open
