"""Runs that always end in a true state: `balancebench run` stopped by SIGTERM mid-run,
SIGKILLed (its watchdog cleans up at once; with the watchdog gone too, the next
command does), or left by a store that turned read-only mid-run. (Full disks, concurrent
runs, a deleted store: test_faults_storage.py; a lost executor:
test_standalone_cluster.py.)"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from balancebench.state import tracking
from balancebench.state.reaper import REASON_TAG
from balancebench.state.tracking import ROLE_TAG
from tests.e2e.conftest import ROOT, TINY

pytestmark = [pytest.mark.slow, pytest.mark.faults]
CLI = str(Path(sys.executable).parent / "balancebench")


def _start_and_wait_for_progress(
    experiment: str, until: str = "progress: application setup", **conf_values: object
) -> subprocess.Popen:
    """``balancebench run`` started; returns once it printed a line holding ``until`` (by
    default the Spark application's first line: the runs are open; the dataset's line,
    said when a cached one is reused, comes before them)."""
    conf = json.dumps({**TINY, "experiment": experiment, "n_batches": 6, **conf_values})
    proc = subprocess.Popen(
        [CLI, "run", "--conf", conf],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    deadline = time.monotonic() + 300
    assert proc.stdout is not None
    for line in proc.stdout:  # a Spark job is measuring a batch now
        if until in line:  # the CLI's progress line
            return proc
        assert time.monotonic() < deadline, "no progress line in 300 s"
    raise AssertionError(f"the run ended before any progress (exit {proc.wait()})")


def _runs(experiment: str):
    mlflow = tracking.store()
    exp = mlflow.get_experiment_by_name(experiment)
    return mlflow.search_runs([exp.experiment_id])


def _group_of(pid: int, local: Path) -> int:
    files = list((local / "logs").glob(f"group-{pid}-*.json"))
    assert len(files) == 1, files
    return int(json.loads(files[0].read_text())["pgid"])


def _watchdog_of(pid: int) -> int:
    """The pid of the watchdog (``python -m balancebench.state.reaper PID ...``) of command pid."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                args = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"balancebench.state.reaper" in args and str(pid).encode() in args:
                return int(entry.name)
    raise AssertionError(f"no watchdog for pid {pid}")


def _gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _temp_dir_of(pid: int, local: Path) -> Path:
    """The command's temporary folder, where Spark keeps its own while the run lives."""
    found = list((local / "tmp").glob(f"run-{pid}-*"))
    assert len(found) == 1, found
    return found[0]


def test_sigterm_mid_run_stops_everything_and_marks_the_runs_killed(local_state):
    proc = _start_and_wait_for_progress("e2e-sigterm")
    pgid = _group_of(proc.pid, local_state)
    temp = _temp_dir_of(proc.pid, local_state)
    # Spark's temporary folders are the command's, not /tmp's (issue 62: SIGTERM left them)
    spark_made = {p.name.split("-")[0] for p in temp.iterdir()}
    assert {"blockmgr", "spark"} <= spark_made, sorted(spark_made)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert "KILLED" in out and "Traceback" not in out
    assert _gone(pgid)  # airflow, spark-submit and the Spark driver
    assert not temp.exists()  # and every temporary folder of theirs
    runs = _runs("e2e-sigterm")
    assert "RUNNING" not in set(runs["status"])
    killed = runs[runs["status"] == "KILLED"]
    assert len(killed) >= 2  # the parent and the strategy's child that was running
    assert killed[f"tags.{REASON_TAG}"].str.contains("SIGTERM").all()
    # The parent was stopped, not failed (the closing task used to close it FAILED).
    parent = runs[runs[f"tags.{ROLE_TAG}"] == "parent"]
    assert list(parent["status"]) == ["KILLED"], parent[["status", f"tags.{REASON_TAG}"]]


def test_after_a_sigkill_the_watchdog_stops_everything_at_once(local_state):
    """SIGKILL to the command: its watchdog stops Airflow, spark-submit and the Spark
    driver and closes the runs KILLED within seconds, with no other command run."""
    proc = _start_and_wait_for_progress("e2e-watchdog")
    pgid = _group_of(proc.pid, local_state)
    temp = _temp_dir_of(proc.pid, local_state)
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _gone(pgid):
        time.sleep(0.5)
    assert _gone(pgid)  # nothing of the run outlives its command
    while time.monotonic() < deadline and "RUNNING" in set(_runs("e2e-watchdog")["status"]):
        time.sleep(0.5)
    runs = _runs("e2e-watchdog")
    assert "RUNNING" not in set(runs["status"])
    killed = runs[runs["status"] == "KILLED"]
    assert len(killed) >= 2  # the parent and the running child
    assert killed[f"tags.{REASON_TAG}"].str.contains("watchdog").all()
    assert not list((local_state / "logs").glob(f"group-{proc.pid}-*.json"))
    assert not temp.exists()


def test_after_a_sigkill_the_next_command_cleans_up(local_state):
    # A temporary dataset folder of a writer that no longer exists (pid 1 is alive, so
    # take a pid that cannot be: above the kernel's pid_max).
    orphan = local_state / "datasets" / "zipf_stream" / ".abc.tmp-99999999-0123abcd"
    orphan.mkdir(parents=True)
    proc = _start_and_wait_for_progress("e2e-sigkill")
    pgid = _group_of(proc.pid, local_state)
    # The watchdog dies with the command here (a machine-wide kill, an OOM killer), so
    # the next command is what cleans up.
    watchdog = _watchdog_of(proc.pid)
    proc.kill()
    os.kill(watchdog, signal.SIGKILL)
    proc.wait(timeout=30)
    assert not _gone(pgid)  # Airflow and Spark are still at work, orphaned
    # The next command that opens the store: any one.
    nxt = subprocess.run(
        [CLI, "report", "--experiment", "e2e-sigkill"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert "Traceback" not in nxt.stdout + nxt.stderr
    assert _gone(pgid)
    runs = _runs("e2e-sigkill")
    assert "RUNNING" not in set(runs["status"])
    killed = runs[runs["status"] == "KILLED"]
    assert len(killed) >= 1
    assert killed[f"tags.{REASON_TAG}"].str.contains("was gone").all()
    assert not orphan.exists()


def _immutable(path: Path, on: bool) -> None:
    """chattr +i/-i: read-only even for root (plain chmod does not stop root)."""
    subprocess.run(["chattr", "+i" if on else "-i", str(path)], check=True)


@pytest.mark.skipif(
    subprocess.run(["which", "chattr"], capture_output=True).returncode != 0,
    reason="needs chattr (e2fsprogs) to make the store read-only for root",
)
def test_a_store_that_turns_read_only_mid_run_is_left_intact_and_true(local_state):
    """The MLflow store turns read-only during a measured batch: the run fails (it cannot
    log), nothing already written is lost, and once write access returns the next
    command closes the runs that were left RUNNING, with the reason."""
    store = local_state / "mlflow" / "mlflow.db"
    proc = _start_and_wait_for_progress("e2e-readonly")
    written = _runs("e2e-readonly")
    _immutable(store, True)
    try:
        out, _ = proc.communicate(timeout=600)
    finally:
        _immutable(store, False)
    assert proc.returncode != 0, out
    assert "Traceback" not in out.split("first error:")[0][-2000:]  # the CLI's own lines
    nxt = subprocess.run(
        [CLI, "report", "--experiment", "e2e-readonly"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert "Traceback" not in nxt.stdout + nxt.stderr
    assert "refused" not in nxt.stdout, nxt.stdout  # the store it is to repair is readable
    runs = _runs("e2e-readonly")
    assert "RUNNING" not in set(runs["status"])
    assert set(written["run_id"]) <= set(runs["run_id"])  # nothing written was lost
    closed = runs[runs["status"] == "KILLED"]
    assert len(closed) >= 2  # the parent and the child that could not log
    assert closed[f"tags.{REASON_TAG}"].str.contains("was gone").all()
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sqlite3; print(sqlite3.connect({str(store)!r})"
            ".execute('pragma integrity_check').fetchone()[0])",
        ],
        capture_output=True,
        text=True,
    )
    assert check.stdout.strip() == "ok", check.stdout + check.stderr


# Two strategies in two rounds of TINY's six batches: a run to kill in the middle of (23
# batches are left when the first one's progress line shows; the kill follows at once).
LONGER = {"strategies": ["hash", "qmmp"], "min_rounds": 2, "max_rounds": 2}


def _spark_jvm_of(pid: int) -> int:
    """The ``spark-submit`` JVM that command ``pid`` started (a descendant of it)."""
    import psutil

    for child in psutil.Process(pid).children(recursive=True):
        cmdline = " ".join(child.cmdline())
        if child.name() == "java" and "run_workload.py" in cmdline:
            return child.pid
    raise AssertionError(f"no spark-submit JVM under pid {pid}")


def test_a_strategys_spark_jvm_killed_mid_batch_fails_the_run_naming_the_signal(local_state):
    """The JVM of the application running the strategies dies mid-batch (SIGKILL: the OOM
    killer, a user): the command fails with one line that says so and after which batch,
    the round that was running and the parent end FAILED with that cause, nothing is left
    RUNNING, and no results path is printed for files that were never written."""
    proc = _start_and_wait_for_progress("e2e-jvm-killed", "batch 1 of 6", **LONGER)
    os.kill(_spark_jvm_of(proc.pid), signal.SIGKILL)
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 1, out[-3000:]
    first = next(line for line in out.splitlines() if "first error:" in line)
    strategy = re.search(r"first error: the Spark JVM of (\w+) was killed", first)
    assert strategy and strategy.group(1) in LONGER["strategies"], first
    cause = (
        f"the Spark JVM of {strategy.group(1)} was killed by SIGKILL (signal 9: the OOM "
        "killer, or a user)"
    )
    assert first.split("first error: ", 1)[1].startswith(f"{cause}; its last progress line: ")
    assert "checked by the oracle" in first
    assert "results:      none written (the run ended FAILED before its comparison)" in out
    runs = _runs("e2e-jvm-killed")
    assert "RUNNING" not in set(runs["status"])
    by_role = {role: frame for role, frame in runs.groupby(f"tags.{ROLE_TAG}")}
    assert set(by_role["parent"]["status"]) == {"FAILED"}
    assert (
        by_role["parent"]["tags.balancebench.failure"]
        .iloc[0]
        .startswith(f"no strategy finished a round: {cause}")
    )
    killed_round = by_role["round"]
    assert list(killed_round["status"]) == ["FAILED"]
    assert killed_round["tags.balancebench.failure"].iloc[0].startswith(cause)


def test_the_dataset_folder_removed_mid_run_changes_nothing_of_the_run(local_state):
    """The run's dataset folder is deleted while it runs (a user cleaning ``.local``): the
    application loaded it before its first round, so the run finishes with every batch
    checked by the oracle; the next run writes the dataset again."""
    from balancebench.state.paths import datasets_dir

    # Two strategies of one round on TINY's cached dataset: the second strategy's whole
    # round runs after the folder is gone.
    two = {"strategies": ["hash", "qmmp"], "min_rounds": 1, "max_rounds": 1}
    proc = _start_and_wait_for_progress("e2e-dataset-removed", "batch 1 of 6", **two)
    folders = [f for f in datasets_dir().glob("*/*") if f.is_dir() and "tmp" not in f.name]
    assert folders
    for folder in folders:
        shutil.rmtree(folder)
    removed_at = time.time()
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out[-3000:]
    runs = _runs("e2e-dataset-removed")
    assert set(runs["status"]) == {"FINISHED"}
    rounds = runs[runs[f"tags.{ROLE_TAG}"] == "round"]
    assert len(rounds) == 2 and set(rounds["metrics.oracle_passed"]) == {1.0}
    # The second round started after the folder was gone (its MLflow run's start).
    assert rounds["start_time"].max().timestamp() > removed_at
