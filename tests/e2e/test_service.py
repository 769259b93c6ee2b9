"""The local Airflow service as its users run it (``make airflow``): started by its own
script, a sweep triggered through the authenticated REST API twice (the second time one
cell slowed on purpose, which exactly that cell's regression flag must catch), MLflow read
back, the report page opened in a real headless browser, and everything stopped."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from balancebench import tracking
from tests.e2e.conftest import ROOT, TINY, only_loopback

# Two sweeps of 4 spark-submits, on a machine the other test workers share: the module's
# fixtures take up to about 15 minutes there (the plugin's default limit is 900 s a test).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

CELLS = {"workloads": ["topk"], "strategies": ["hash", "qmmp"], "zipf_s": [1.0], "n_nodes": [4]}
SLOW = "topk · qmmp · s=1 · N=4"
SWEEP = {
    **{k: v for k, v in TINY.items() if k != "n_nodes"},  # n_nodes is a grid axis here
    "grid": CELLS,
    "repetitions": 1,
    "experiment": "e2e-nightly",
    # The figure the test slows. The suite runs on 3 workers sharing 2 cores, so the
    # other timed figures move with the neighbours' load, not with the code.
    "regression_metrics": ["plan_time_ms_mean"],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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

    def run_dag(self, dag_id: str, conf: dict, timeout: float = 1100) -> tuple[str, list[dict]]:
        run = self.call(
            "POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": conf}
        )
        path = f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.call("GET", path)["state"]
            if state in ("success", "failed"):
                return state, self.call("GET", path + "/taskInstances")["task_instances"]
            time.sleep(3)
        raise AssertionError(f"{dag_id} did not finish in {timeout} s")


@pytest.fixture(scope="module")
def service(local_state):
    ports = {"AIRFLOW_PORT": _free_port(), "MLFLOW_PORT": _free_port()}
    # Two timed runs at once (a user may ask for it; the default is 1): the test only
    # alarms on plan time, which the neighbours' load does not move by a millisecond.
    env = {
        **os.environ,
        **{k: str(v) for k, v in ports.items()},
        "BALANCEBENCH_TIMED_CONCURRENCY": "2",
        # Only the test's own triggers: a test running across 02:00 otherwise got the
        # nightly schedule's run too (max_active_runs=1 then queued the test's sweep).
        "BALANCEBENCH_NIGHTLY_CRON": "none",
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
    assert again.returncode == 0 and again.stdout.count("already running") == 5, again.stdout
    pids = [
        int((folder / f"{c}.pid").read_text())
        for c in ("mlflow", "api-server", "scheduler", "dag-processor", "triggerer")
    ]
    yield {
        "api": f"http://127.0.0.1:{ports['AIRFLOW_PORT']}",
        "password": password,
        "ports": ports,
        "folder": folder,
    }
    stopped = subprocess.run(
        [*script, "stop"], env=env, capture_output=True, text=True, timeout=200, cwd=ROOT
    )
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    for pid in pids:  # every process group it started is gone
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)
    assert not any(_listening(p) for p in ports.values())


@pytest.fixture(scope="module")
def sweeps(service):
    api = Api(service["api"], service["password"])
    # Authentication is on: no token, no answer.
    with pytest.raises(urllib.error.HTTPError) as denied:
        urllib.request.urlopen(service["api"] + "/api/v2/dags", timeout=30)
    assert denied.value.code in (401, 403)
    deadline = time.monotonic() + 180
    while "nightly_sweep" not in {d["dag_id"] for d in api.call("GET", "/api/v2/dags")["dags"]}:
        assert time.monotonic() < deadline, "nightly_sweep was not parsed"
        time.sleep(2)
    first = api.run_dag("nightly_sweep", SWEEP)  # the history
    # One repetition each: the regression rule needs one earlier result, and the two
    # cells of a sweep already run side by side (make test's time is near its bound).
    second = api.run_dag(
        "nightly_sweep", {**SWEEP, "test_slow_cell": SLOW, "test_slow_plan_work_ms": 1500}
    )
    return {"first": first, "second": second}


def _sweep_parents():
    mlflow = tracking._mlflow()
    exp = mlflow.get_experiment_by_name("e2e-nightly")
    return mlflow.search_runs(
        [exp.experiment_id],
        filter_string="tags.`balancebench.role` = 'sweep'",
        order_by=["attributes.start_time ASC"],
    )


def test_sweep_runs_under_the_scheduler_and_lands_in_mlflow(service, sweeps):
    state, tis = sweeps["first"]
    assert state == "success", tis
    names = sorted(t["rendered_map_index"] for t in tis if t["task_id"] == "run_cell")
    assert names == [f"topk · {s} · s=1 · N=4 · rep 1" for s in ("hash", "qmmp")]
    parents = _sweep_parents()
    assert len(parents) == 2
    parent = parents.iloc[0]
    assert parent["status"] == "FINISHED"
    assert "cells" in parent["tags.mlflow.note.content"]
    cells = tracking.child_runs(parent["run_id"])
    assert sorted(cells["tags.mlflow.runName"]) == ["topk · hash · s=1 · N=4", SLOW]
    for _, cell in cells.iterrows():
        reps = tracking.child_runs(cell["run_id"])
        assert len(reps) == 1 and (reps["status"] == "FINISHED").all()
        assert (reps["params.timed_concurrency"] == "2").all()  # logged as asked
        lo, mean, hi = (cell[f"metrics.latency_p99_s_{s}"] for s in ("ci95_lo", "mean", "ci95_hi"))
        assert lo <= mean <= hi
        assert cell["metrics.repetitions_finished"] == 1
        # Only the Params that apply: no other dataset's or strategy's fields.
        params = [c for c in cells.columns if c.startswith("params.") and cell[c] is not None]
        assert not any(
            p.startswith(("params.pkg_", "params.packets_", "params.tpch_")) for p in params
        )
        assert cell["tags.regression"] == "no"
    artifacts = tracking._mlflow().MlflowClient().list_artifacts(parent["run_id"], "report")
    assert {Path(a.path).suffix for a in artifacts} == {".html", ".txt", ".csv"}


def test_the_slowed_cell_and_only_it_is_flagged(service, sweeps):
    state, tis = sweeps["second"]
    by_task = {t["task_id"]: t["state"] for t in tis if t["task_id"] != "run_cell"}
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


def test_the_service_listens_on_loopback_only(service, sweeps):
    folder = service["folder"]
    pids = []
    for component in ("mlflow", "api-server", "scheduler", "dag-processor", "triggerer"):
        group = int((folder / f"{component}.pid").read_text())
        found = subprocess.run(["pgrep", "-g", str(group)], capture_output=True, text=True)
        pids += [int(p) for p in found.stdout.split()]
    assert pids
    assert only_loopback(pids) == []


def test_the_report_page_renders_in_a_real_browser(service, sweeps):
    from playwright.sync_api import sync_playwright

    parent = _sweep_parents().iloc[1]
    page_path = Path(parent["tags.report_path"])
    assert page_path.exists()
    chromium = shutil.which("chromium")
    assert chromium, "make browser installs Debian's chromium"
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page()
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(page_path.as_uri())
        widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.naturalWidth)")
        rows = page.locator("table#cells tr").count()
        regressed = page.locator("table#cells tr.regressed").all_inner_texts()
        flagged = page.locator("#regressions li").all_inner_texts()
        links = page.eval_on_selector_all("table#cells a", "as => as.map(a => a.href)")
        browser.close()
    assert errors == []
    assert widths and all(w > 0 for w in widths)  # every figure decoded and drawn
    assert rows == 3  # header + two cells
    assert len(regressed) == 1 and SLOW in regressed[0]
    assert any(SLOW in line and "plan_time_ms_mean" in line for line in flagged)
    assert all("/#/experiments/" in link for link in links) and len(links) == 2


def test_every_dag_can_be_triggered_from_the_ui_on_its_defaults(service):
    """The real trigger form, in a real browser: logged in, the dialog's Trigger button
    is enabled without touching a field, and the fields come in sections."""
    from playwright.sync_api import sync_playwright

    enabled, sections = {}, {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(service["api"] + "/auth/login")
        page.fill("input[name=username]", "admin")
        page.fill("input[name=password]", service["password"])
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url: "/auth/login" not in url, timeout=60_000)
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
            sections[dag_id] = dialog.get_by_role("button", name="Experiment").count()
            page.keyboard.press("Escape")
        browser.close()
    assert enabled == dict.fromkeys(enabled, True)
    assert all(n >= 1 for n in sections.values()), sections
