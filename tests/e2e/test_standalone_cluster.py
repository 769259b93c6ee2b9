"""A real Spark standalone cluster (master + two workers of different sizes) on 127.0.0.1,
started and stopped by the project's own script; the workload gives the same result there
as in local mode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

from balancebench.experiment.params import ExperimentSpec
from balancebench.experiment.rounds import RoundPolicy
from balancebench.experiment.run_spec import GroupSpec, RunSpec
from balancebench.generators import generate, generator_params
from balancebench.orchestration.local_env import airflow_env
from balancebench.state.paths import datasets_dir, local_dir
from tests.e2e.conftest import (
    BIN,
    ROOT,
    TINY,
    deterministic_outputs,
    listening_ports,
    only_loopback,
)

# The whole file, its lost-executor fault too, runs in `make test` (marker `cluster`): the
# cluster (a master, two workers and their executors, five JVMs on the same 2 cores)
# starts once per CI run, not once per target.
pytestmark = [pytest.mark.slow, pytest.mark.cluster]
SCRIPT = ROOT / "infra" / "spark-standalone.sh"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


@contextmanager
def _running_cluster():
    """The project's cluster, started and stopped by its script; yields (URL, pid files)."""
    state = local_dir() / "spark-standalone"
    env = {**os.environ, "STATE_DIR": str(state)}
    started = subprocess.run(
        [str(SCRIPT), "start"], env=env, capture_output=True, text=True, timeout=180, cwd=ROOT
    )
    pids = {p.stem: int(p.read_text()) for p in state.glob("*.pid")}
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert len(pids) == 3
        yield "spark://127.0.0.1:7077", pids
    finally:
        subprocess.run([str(SCRIPT), "stop"], env=env, timeout=120, cwd=ROOT)
        assert not [p for p in pids.values() if _alive(p)], "cluster processes left running"


@pytest.fixture(scope="module")
def cluster(local_state):
    with _running_cluster() as running:
        yield running


CLUSTER_ARGS = ["--executor-memory", "768m", "--total-executor-cores", "3"]


@pytest.fixture(scope="module")
def local_run(local_state, tmp_path_factory):
    """The workload of this file (mnrt on TINY in 4 batches) run once in local mode: what
    a cluster run, with or without a lost executor, must give. Returns (params, dataset
    folder, record)."""
    params = ExperimentSpec.checked(
        {**TINY, "n_batches": 4, "strategies": ["mnrt"], "experiment": "e2e-cluster"}
    )
    folder, _ = generate(
        params["dataset"], datasets_dir(), generator_params(params["dataset"], params)
    )
    tmp_path = tmp_path_factory.mktemp("local")
    return params, folder, _submit("local[2]", _run("local", params, folder, tmp_path), [])


def _run(label: str, params: ExperimentSpec, folder: Path, tmp_path: Path) -> GroupSpec:
    """One run of mnrt as a group of one cell and one round, its record under tmp_path."""
    cell = RunSpec(dataset_dir=str(folder), strategy="mnrt", params=params)
    return GroupSpec(label, (cell,), RoundPolicy(1, 1), str(tmp_path / label))


def _command(master: str, group: GroupSpec, extra: list[str]) -> list[str]:
    path = Path(group.results_dir).with_suffix(".groups.json")
    return [
        str(BIN / "spark-submit"),
        "--master",
        master,
        *extra,
        str(ROOT / "spark_apps" / "run_workload.py"),
        *GroupSpec.write([group], path),
    ]


def _record(group: GroupSpec) -> dict:
    return json.loads((Path(group.results_dir) / "mnrt-round1.json").read_text())


def _submit(master: str, group: GroupSpec, extra: list[str]) -> dict:
    env = {**os.environ, **airflow_env()}
    done = subprocess.run(
        _command(master, group, extra),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return _record(group)


def test_the_cluster_listens_on_loopback_only_without_the_rest_submission_api(cluster):
    pids = list(cluster[1].values())
    ports = listening_ports(pids)
    assert {7077, 8090} <= ports, ports
    # The master's REST submission API (6066) runs any jar it is sent, without a login.
    assert 6066 not in ports, ports
    assert only_loopback(pids) == []
    # The door takes the real master for one (its RPC port closes on a line of HTTP),
    # and its web UI's port for none
    from balancebench.orchestration.local_env import check_master_answers

    assert check_master_answers(cluster[0]) == cluster[0]
    with pytest.raises(ValueError, match="answers, but as an HTTP server"):
        check_master_answers("spark://127.0.0.1:8090")


def test_cluster_result_equals_local(cluster, local_run, tmp_path):
    cluster, _ = cluster
    with urllib.request.urlopen("http://127.0.0.1:8090/json/", timeout=5) as resp:
        info = json.load(resp)
    sizes = sorted((w["cores"], w["memory"]) for w in info["workers"] if w["state"] == "ALIVE")
    assert len(sizes) == 2 and sizes[0] != sizes[1]  # heterogeneous workers

    params, folder, local = local_run
    results = {
        "local": local,
        "cluster": _submit(cluster, _run("cluster", params, folder, tmp_path), CLUSTER_ARGS),
    }
    assert results["cluster"]["spark_master"] == cluster
    assert results["local"]["spark_master"] == "local[2]"
    # Routing is deterministic: the same tuples land on the same nodes, same TOPK.
    assert results["cluster"]["node_received"] == results["local"]["node_received"]
    assert results["cluster"]["node_state"] == results["local"]["node_state"]
    assert results["cluster"]["answers"] == results["local"]["answers"]
    assert results["cluster"]["summary"]["oracle_passed"] == 1.0


# Last in the module: it kills a worker of the module's cluster.
@pytest.mark.faults
def test_a_run_survives_a_lost_executor(cluster, local_run, tmp_path):
    """A worker (and its executor) is SIGKILLed during a measured batch: the run finishes
    on the remaining worker from its reliable state checkpoints (``state_checkpoint``
    'auto' is reliable on a cluster), every batch passes the oracle, and the
    deterministic figures equal a run without the fault."""
    params, folder, calm = local_run
    faulty = _run("fault", params, folder, tmp_path)
    master, pids = cluster
    env = {**os.environ, **airflow_env()}
    proc = subprocess.Popen(
        _command(master, faulty, CLUSTER_ARGS),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    lines, killed_after = [], None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if killed_after is None and "batch 1 of 4 checked by the oracle" in line:
                # Batch 1 of 4 is done: batch 2 runs now. The bigger worker goes,
                # with its executor (same process group), without a word.
                os.killpg(pids["worker-b"], signal.SIGKILL)
                killed_after = len(lines)
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = "".join(lines)
    assert killed_after is not None, output[-4000:]
    assert proc.returncode == 0, output[-6000:]
    progress_after_kill = [ln for ln in lines[killed_after:] if "[balancebench progress]" in ln]
    assert len(progress_after_kill) >= 2, output[-4000:]  # measured batches went on
    with urllib.request.urlopen("http://127.0.0.1:8090/json/", timeout=5) as resp:
        alive = [w for w in json.load(resp)["workers"] if w["state"] == "ALIVE"]
    assert len(alive) == 1  # the run really finished on one worker
    fault = _record(faulty)
    assert fault["spark_master"] == master
    assert deterministic_outputs(fault) == deterministic_outputs(calm)
