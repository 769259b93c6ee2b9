"""Running a DAG once from the command line: ``airflow dags test`` with the embedded
environment, its log kept per run and followed on the console (progress lines and
errors, never a traceback), its temporary files in a folder of its own, a signal to the
command stopping the whole run, and the run's first root cause found in its log.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import NoReturn

import typer
from rich.markup import escape

from balancebench.core.schema import terminal_safe
from balancebench.experiment.run_log import PROGRESS
from balancebench.orchestration.local_env import airflow_env
from balancebench.orchestration.terminal_report import console
from balancebench.state import reaper, tracking
from balancebench.state.paths import exclusive_lock, full_file_systems, local_dir
from balancebench.state.store_door import sqlite_path


def run_airflow(
    args: list[str],
    spark_master: str | None = None,
    log: Path | None = None,
    invocation: str | None = None,
) -> int:
    env = {**os.environ, **airflow_env(spark_master)}
    cmd = [str(Path(sys.executable).parent / "airflow"), *args]
    if log is None:
        return subprocess.run(cmd, env=env).returncode
    log.parent.mkdir(parents=True, exist_ok=True)
    # This process owns the runs Airflow opens (balancebench.state.reaper), and tags them with
    # its invocation id: how it finds its own parent run afterwards.
    env["BALANCEBENCH_OWNER_PID"] = str(os.getpid())
    if invocation:
        env[reaper.INVOCATION_ENV] = invocation
    # The run's temporary files (Spark's and Python's) in a folder this command removes
    # however the run ends: SIGTERM left Spark's in /tmp (issue 62).
    temp_dir = reaper.make_temp_dir(local_dir() / "tmp")
    env.update(_temp_env(temp_dir, env.get("SPARK_SUBMIT_OPTS", "")))
    try:
        return _airflow_logged(cmd, env, log, temp_dir)
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


def _temp_env(temp_dir: Path, submit_opts: str) -> dict[str, str]:
    """Where a run's processes write temporary files: Python's (``TMPDIR``), Spark's local
    dirs (``SPARK_LOCAL_DIRS``: ``blockmgr-*``, ``spark-*``) and the driver JVM's
    (``java.io.tmpdir``: ``artifacts-*``, native libraries such as ``liblz4``)."""
    quoted_dir = f'"{temp_dir}"' if " " in str(temp_dir) else str(temp_dir)
    return {
        "TMPDIR": str(temp_dir),
        "SPARK_LOCAL_DIRS": str(temp_dir),
        "SPARK_SUBMIT_OPTS": f"{submit_opts} -Djava.io.tmpdir={quoted_dir}".strip(),
    }


def _airflow_logged(cmd: list[str], env: dict[str, str], log: Path, temp_dir: Path) -> int:
    """``cmd`` in its own process group, its output to ``log``, progress and errors to the
    console; a signal to this command stops the group (:func:`_stop_run`)."""
    with log.open("w") as sink:
        # Its own process group: a signal to this command stops Airflow, its tasks and
        # their spark-submit processes together.
        proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        group_file = reaper.record_group(local_dir() / "logs", proc.pid, temp_dir)
        # If this command is SIGKILLed, its watchdog (own session) stops the group and
        # closes the runs at once; it ends with this command otherwise.
        watchdog = subprocess.Popen(
            [sys.executable, "-m", "balancebench.state.reaper", str(os.getpid()), str(group_file)],
            env={**os.environ, "MLFLOW_TRACKING_URI": tracking.tracking_uri()},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            start_new_session=True,
        )
        previous = {
            sig: signal.signal(sig, lambda n, _f: _stop_run(proc, n))
            for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                sink.write(line)
                # Progress and errors; never a traceback (the log keeps it, and the
                # command ends with the first error and the log's path).
                if PROGRESS in line:  # our own line, without Airflow's log decoration
                    shown = _progress_message(line)
                elif any(mark in line for mark in ("[DAG TEST]", "ERROR")):
                    shown = line.rstrip()
                else:
                    continue
                console.print(terminal_safe(shown), markup=False, highlight=False)
            return proc.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            group_file.unlink(missing_ok=True)
            watchdog.terminate()
            watchdog.wait()


def _progress_message(line: str) -> str:
    """A progress line as the CLI shows it: its time (HH:MM:SS UTC) and message, without the
    log level and logger name Airflow wraps a task's output in."""
    message = line.split(PROGRESS, 1)[1].split(" [airflow.", 1)[0].strip()
    stamp = re.match(r"\d{4}-\d\d-\d\dT(\d\d:\d\d:\d\d)", line)
    return f"{stamp.group(1) + ' UTC ' if stamp else ''}progress: {message}"


def _stop_run(proc: subprocess.Popen, signum: int) -> None:
    """SIGINT/SIGTERM: stop Airflow's process group (its tasks, spark-submit and the Spark
    driver), then close the runs this command owns as KILLED, then exit."""
    name = signal.Signals(signum).name
    signalled_ms = int(time.time() * 1000)
    console.print(f"[red]{name}[/red]: stopping the run (process group {proc.pid})")
    reaper.stop_group(proc.pid, term_wait_s=30, reap=proc.poll)  # all of it, not its leader
    proc.wait()
    # Also the runs that ended FAILED since the signal: Airflow fails the task it
    # terminates, and the closing task may then close the parent FAILED.
    closed = reaper.close_runs_of_owner(
        tracking.store(),
        os.getpid(),
        f"stopped by {name} to balancebench (pid {os.getpid()})",
        ended_since_ms=signalled_ms,
    )
    console.print(f"closed {len(closed)} MLflow run(s) as KILLED")
    raise SystemExit(128 + signum)


def _store_identity() -> tuple[int, int] | None:
    """(device, inode) of the SQLite MLflow store file, None for a server or no file yet:
    a store deleted or replaced mid-run is named as such, not as "no parent run"."""
    path = sqlite_path(tracking.tracking_uri())
    if path is None:
        return None
    try:
        found = path.stat()
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


def _migrate_airflow_db(spark_master: str | None) -> int:
    """``airflow db migrate`` under a file lock: two commands started together in one
    clone would migrate the same fresh SQLite database at once, and one would fail."""
    logs = local_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(logs / ".airflow-db-migrate.lock"):
        return run_airflow(["db", "migrate"], spark_master, logs / "airflow-db-migrate.log")


def dags_test(dag_id: str, params: dict, spark_master: str | None) -> tuple[int, Path, str]:
    """Migrate the embedded Airflow DB, then ``airflow dags test DAG -c PARAMS``; returns
    (exit code, this run's log, this command's invocation id). The log is this run's own
    (``.local/logs/runs/``), with ``<dag_id>-latest.log`` linking to the newest. A failed
    migration exits here with its log named."""
    if _migrate_airflow_db(spark_master):
        console.print(
            "[red]airflow db migrate failed[/red]; see .local/logs/airflow-db-migrate.log"
        )
        raise typer.Exit(1)
    invocation = uuid.uuid4().hex
    # UTC, said in the name (Z), as the progress lines and Airflow's log stamp their times.
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    log = local_dir() / "logs" / "runs" / f"{dag_id}-{stamp}-{invocation[:8]}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    latest = local_dir() / "logs" / f"{dag_id}-latest.log"
    link = latest.with_name(f".{latest.name}.{invocation[:8]}")
    link.symlink_to(log)
    link.replace(latest)  # atomic: never a moment without the link, never a plain file
    console.print(f"running DAG {dag_id} (full log: {log})")
    try:  # the store exists (its identity), and the experiment may be used
        tracking.ensure_experiment(params["experiment"])
    except tracking.DeletedExperiment as exc:
        console.print(terminal_safe(str(exc)), style="red", markup=False, highlight=False)
        raise typer.Exit(2) from None
    store = _store_identity()
    code = run_airflow(
        ["dags", "test", dag_id, "-c", json.dumps(params)], spark_master, log, invocation
    )
    if store is not None and _store_identity() != store:
        failed(
            "DAG run failed",
            f"the MLflow store {tracking.tracking_uri()} was deleted or replaced during the "
            "run; the runs it held are not in the store now",
            log,
        )
    if code != 0:
        # A step that failed before it could close its runs: close them with the cause.
        with contextlib.suppress(Exception):  # the store itself may be what failed
            reaper.close_runs_of_owner(
                tracking.store(), os.getpid(), first_error(log), status="FAILED"
            )
    return code, log, invocation


def own_parent(experiment: str, invocation: str, role: str, log: Path) -> str | None:
    """The parent run this command's DAG run opened, or None; a store that cannot be read
    ends the command with that cause (not "no parent run was opened")."""
    try:
        return tracking.parent_run_of_invocation(experiment, invocation, role)
    except Exception as exc:  # SQLAlchemy/MLflow errors of a broken store
        cause = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        failed("DAG run failed", f"the MLflow store cannot be read: {cause}", log)


def failed(headline: str, what: str, log: Path) -> NoReturn:
    """The run this command started failed: say which, its first error and the log."""
    console.print(
        f"[red]{headline}[/red] ({escape(what)}); first error: {escape(first_error(log))}"
    )
    console.print(f"full log: {log}", markup=False)
    raise typer.Exit(1)


#: A log line that names a root cause, and how to say it in one line: searched before
#: the generic failure marks, so "Task failed with exception" does not hide a full disk.
#: How a line of balancebench's that names a failure's cause starts (after Airflow's
#: decoration): ``balancebench: <cause>``.
OWN_CAUSE = "balancebench: "


ROOT_CAUSES = (
    ("No space left on device", "no space left on device"),
    ("Read-only file system", "a file system is read-only"),
    ("readonly database", "the MLflow store is read-only (attempt to write a readonly database)"),
    ("Permission denied", "permission denied"),
    ("no such table", "the MLflow store was replaced or emptied mid-run (no such table)"),
)


def first_error(log: Path) -> str:
    """The first root cause the log names (full disk, read-only store, ...), else its
    first line that names a failure (task and error); escaped and shortened."""
    marks = ("AirflowFailException", "Task failed", "ValueError", "Error:", "ERROR")
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    for needle, cause in ROOT_CAUSES:
        for line in lines:
            if needle in line:
                path = re.search(r"'(/[^']{1,300})'", line)  # the file it names, if any
                if needle == "No space left on device":  # which file system: its mount
                    full = full_file_systems(path.group(1) if path else None)
                    return cause + (f": {', '.join(map(str, full))} is full" if full else "")
                return cause + (f": {path.group(1)}" if path else "")
    for line in lines:  # a cause balancebench put in one line (a killed JVM, a dead server)
        if OWN_CAUSE in line:
            own = line.split(OWN_CAUSE, 1)[1]
            return terminal_safe(re.sub(r"\s+\[[\w.]+\]\s+loc=\S+$", "", own).strip(), 400)
    for line in lines:
        if any(m in line for m in marks):
            return terminal_safe(line.strip(), 400)
    return "(none found in the log)"
