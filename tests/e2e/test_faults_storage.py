"""Runs that keep to themselves and say the true cause: two `balancebench run` in one
clone at once, a full disk under a step (generate, compare), a read-only store, and an
MLflow store deleted mid-run. Full and read-only disks are small tmpfs mounts (root)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from balancebench.state import tracking
from tests.e2e.conftest import ROOT, TINY

pytestmark = [
    pytest.mark.slow,
    pytest.mark.faults,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs (root)"),
]
CLI = str(Path(sys.executable).parent / "balancebench")


@contextlib.contextmanager
def _tmpfs(where: Path, size: str, read_only: bool = False) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def _cli(
    *args: str, local: Path | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if local is not None:  # its own store too (the session's URI is in the environment)
        env["BALANCEBENCH_LOCAL"] = str(local)
        env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [CLI, *args], capture_output=True, text=True, cwd=ROOT, timeout=timeout, env=env
    )


def _own_lines(out: str) -> str:
    """What the CLI itself says (not the relayed Airflow lines)."""
    return "\n".join(line for line in out.splitlines() if not line.startswith("["))


def test_generate_on_a_full_disk_says_so_leaves_nothing_and_the_next_command_works(tmp_path):
    with _tmpfs(tmp_path / "full", "256k") as full:
        done = _cli(
            "generate",
            "zipf_stream",
            "--set",
            "n_tuples=200000",
            "--no-validate",
            "--out",
            str(full),
        )
        assert done.returncode == 1, done.stdout + done.stderr
        said = (done.stdout + done.stderr).strip()
        assert said.startswith(f"no space left on {full} (the file system that holds {full}")
        assert said.endswith(" is full); free space and re-run")
        assert not [p for p in full.rglob("*") if p.is_file()]  # nothing partial
    again = _cli(
        "generate",
        "zipf_stream",
        "--set",
        "n_tuples=2000",
        "--no-validate",
        "--out",
        str(tmp_path / "roomy"),
    )
    assert again.returncode == 0, again.stdout + again.stderr


def test_a_read_only_local_folder_is_one_line_for_any_command(tmp_path):
    with _tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        for args in (["report"], ["generate", "zipf_stream", "--set", "n_tuples=2000"]):
            done = _cli(*args, local=ro / "local")
            said = done.stdout + done.stderr
            assert done.returncode == 1, said
            assert "Traceback" not in said and "PermissionError" not in said
            assert said.strip().endswith(
                "is read-only (a read-only file system); make it writable and re-run"
            ), said


def _run(conf: dict, local: Path | None = None, timeout: float = 900) -> subprocess.Popen:
    env = dict(os.environ)
    if local is not None:  # its own store too (the session's URI is in the environment)
        env["BALANCEBENCH_LOCAL"] = str(local)
        env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.Popen(
        [CLI, "run", "--conf", json.dumps({**TINY, **conf})],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        env=env,
    )


def test_two_runs_at_once_in_one_clone_each_print_their_own_table(local_state):
    """Same clone, same experiment, started together: each command prints the parent run
    it opened (its own strategy, its own zipf_s) and keeps its own log."""
    confs = [
        {"experiment": "e2e-concurrent", "strategies": ["hash"], "zipf_s": 0.6},
        {"experiment": "e2e-concurrent", "strategies": ["mnrt"], "zipf_s": 1.2},
    ]
    procs = [_run(c) for c in confs]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    for proc, out in zip(procs, outs, strict=True):
        assert proc.returncode == 0, out[-3000:]
    parents = []
    for conf, out in zip(confs, outs, strict=True):
        parent = re.search(r"parent run ([0-9a-f]{32}) \(FINISHED\)", out).group(1)
        parents.append(parent)
        run = tracking.store().get_run(parent)
        assert json.loads(run.data.params["strategies"]) == conf["strategies"]
        assert float(run.data.params["zipf_s"]) == conf["zipf_s"]
        # the details table's header: its strategies' columns (one strategy: no verdicts)
        header = next(line for line in out.splitlines() if line.startswith("figure "))
        assert conf["strategies"][0] in header
        other = ({"hash", "mnrt"} - set(conf["strategies"])).pop()
        assert other not in header
        log = Path(re.search(r"full log: ([^)\s]+)", out).group(1))
        assert log.parent.name == "runs"
        assert f"[balancebench progress] {conf['strategies'][0]}" in log.read_text()
        assert f"[balancebench progress] {other}" not in log.read_text()
    assert parents[0] != parents[1]
    latest = local_state / "logs" / "balance_experiment-latest.log"
    assert latest.is_symlink() and latest.resolve().parent.name == "runs"


def test_a_compare_step_on_a_full_disk_closes_the_parent_failed_with_the_cause(local_state):
    """The results folder fills up: the comparison cannot be written. The parent ends
    FAILED with "no space left" (it was left RUNNING, and later closed KILLED with a
    wrong reason), and the command says so."""
    results = local_state / "results"
    with _tmpfs(results, "48k"):
        proc = _run({"experiment": "e2e-fullresults", "strategies": ["hash"]})
        out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 1, out[-3000:]
    assert f"first error: no space left on device: {results} is full" in out, out[-3000:]
    assert "Traceback" not in out
    mlflow = tracking.store()
    runs = mlflow.search_runs([mlflow.get_experiment_by_name("e2e-fullresults").experiment_id])
    assert "RUNNING" not in set(runs["status"])
    parent = runs[runs[f"tags.{tracking.ROLE_TAG}"] == "parent"].iloc[0]
    assert parent["status"] == "FAILED"
    assert f"no space left on {results} " in parent[f"tags.{tracking.FAILURE_TAG}"]


def test_a_store_deleted_mid_run_is_named_as_such(tmp_path):
    """The MLflow database is deleted while the run works: the command says the store
    was deleted or replaced (it said "no parent run was opened")."""
    local = tmp_path / "local"
    proc = _run({"experiment": "e2e-deleted", "strategies": ["hash"], "n_batches": 6}, local)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "progress: application setup" in line:  # the Spark application's first line
            (local / "mlflow" / "mlflow.db").unlink()
            break
    out = proc.communicate(timeout=900)[0]
    assert proc.returncode == 1, out[-3000:]
    assert "was deleted or replaced during the run" in _own_lines(out), out[-3000:]
