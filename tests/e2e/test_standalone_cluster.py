"""A real Spark standalone cluster (master + two workers of different sizes) on 127.0.0.1,
started and stopped by the project's own script; the workload gives the same result there
as in local mode."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request

import pytest

from balancebench.experiment import RunSpec
from balancebench.generators import generate, generator_params
from balancebench.local_env import airflow_env
from balancebench.params import validate_params
from balancebench.paths import datasets_dir, local_dir
from tests.e2e.conftest import BIN, ROOT, TINY, listening_ports, only_loopback

pytestmark = pytest.mark.slow
SCRIPT = ROOT / "infra" / "spark-standalone.sh"


def _pids(state) -> list[int]:
    return [int(p.read_text()) for p in state.glob("*.pid")]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.fixture
def cluster(local_state):
    state = local_dir() / "spark-standalone"
    env = {**os.environ, "STATE_DIR": str(state)}
    started = subprocess.run(
        [str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=180, cwd=ROOT
    )
    pids = _pids(state)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert len(pids) == 3
        yield "spark://127.0.0.1:7077", pids
    finally:
        subprocess.run([str(SCRIPT), "stop"], env=env, timeout=120, cwd=ROOT)
        assert not [p for p in pids if _alive(p)], "cluster processes left running"


def _submit(master: str, spec: RunSpec, extra: list[str]) -> dict:
    env = {**os.environ, **airflow_env()}
    done = subprocess.run(
        [
            str(BIN / "spark-submit"),
            "--master",
            master,
            *extra,
            str(ROOT / "spark_apps" / "run_workload.py"),
            *spec.to_args(),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return json.loads(open(spec.result_path).read())


def test_the_cluster_listens_on_loopback_only_without_the_rest_submission_api(cluster):
    _, pids = cluster
    ports = listening_ports(pids)
    assert {7077, 8090} <= ports, ports
    # The master's REST submission API (6066) runs any jar it is sent, without a login.
    assert 6066 not in ports, ports
    assert only_loopback(pids) == []


def test_cluster_result_equals_local(cluster, tmp_path):
    cluster, _ = cluster
    with urllib.request.urlopen("http://127.0.0.1:8090/json/", timeout=5) as resp:
        info = json.load(resp)
    sizes = sorted((w["cores"], w["memory"]) for w in info["workers"] if w["state"] == "ALIVE")
    assert len(sizes) == 2 and sizes[0] != sizes[1]  # heterogeneous workers

    params = validate_params({**TINY, "strategies": ["mnrt"], "experiment": "e2e-cluster"})
    folder, _ = generate(
        params["dataset"], datasets_dir(), generator_params(params["dataset"], params)
    )
    results = {}
    for label, master, extra in (
        ("local", "local[2]", []),
        ("cluster", cluster, ["--executor-memory", "768m", "--total-executor-cores", "3"]),
    ):
        spec = RunSpec(
            dataset_dir=str(folder),
            strategy="mnrt",
            params=params,
            result_path=str(tmp_path / f"{label}.json"),
        )
        results[label] = _submit(master, spec, extra)
    assert results["cluster"]["spark_master"] == cluster
    assert results["local"]["spark_master"] == "local[2]"
    # Routing is deterministic: the same tuples land on the same nodes, same TOPK.
    assert results["cluster"]["node_received"] == results["local"]["node_received"]
    assert results["cluster"]["node_state"] == results["local"]["node_state"]
    assert results["cluster"]["answers"] == results["local"]["answers"]
    assert results["cluster"]["summary"]["oracle_passed"] == 1.0
