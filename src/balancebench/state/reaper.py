"""Runs and folders whose owner is gone: found and closed by the next command.

A run's *owner* is the process that must outlive it: the ``balancebench`` command that
started ``airflow dags test`` (``BALANCEBENCH_OWNER_PID``), or the service's scheduler
(``BALANCEBENCH_OWNER_PIDFILE``, read when a run opens). Every MLflow run the project
opens carries its owner (host, pid, process start time) as the tag ``balancebench.owner``.
When the owner is gone (SIGKILL, a crash, a reboot) and the run is still RUNNING, the
next command that opens the store closes it as KILLED with ``balancebench.killed_reason``.
A dataset writer's temporary folder carries its pid in its name; a folder whose writer is
gone is removed the same way.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

OWNER_TAG = "balancebench.owner"
REASON_TAG = "balancebench.killed_reason"
#: Why a run ended FAILED (``REASON_TAG`` says why one ended KILLED).
FAILURE_TAG = "balancebench.failure"
#: On a run a Spark application opens: that application's driver process (host, pid,
#: start), which a rerun of the application stops if it still runs (``stop_application``).
APPLICATION_TAG = "balancebench.application_process"
#: On a round run closed KILLED because a rerun of its application measured the round
#: anew (``experiment._Application``): not a failure of its cell.
SUPERSEDED_TAG = "balancebench.superseded"
INVOCATION_TAG = "balancebench.invocation"
INVOCATION_ENV = "BALANCEBENCH_INVOCATION"
TMP_DIR = re.compile(r"^\..+\.(tmp|old)-(?P<pid>[0-9]+)-[0-9a-f]{8}$")


def _start_ticks(pid: int) -> str | None:
    """The process's start time (``/proc/<pid>/stat`` field 22), or None if it is gone:
    a pid reused by another process has another start time."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _running_ticks(pid: int) -> str | None:
    """``_start_ticks`` of a process that still runs: a zombie (ended, not yet reaped by
    its parent) has ended, and its runs with it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None
    return None if state == "Z" else _start_ticks(pid)


def process_running(pid: int) -> bool:
    """Whether process ``pid`` exists and has not ended (a killed one its parent has not
    reaped yet has ended)."""
    return _running_ticks(pid) is not None


def current_owner() -> dict[str, Any] | None:
    """The owner of the runs this process opens (None: nobody to watch, e.g. a test). An
    owner named by a pid file (the service's scheduler) is recorded with that file: the
    scheduler restarted after a crash owns the runs its predecessor's DAG runs go on
    with (:func:`owner_alive`)."""
    pid_text = os.environ.get("BALANCEBENCH_OWNER_PID")
    pidfile = os.environ.get("BALANCEBENCH_OWNER_PIDFILE")
    if not pid_text and pidfile:
        try:
            pid_text = Path(pidfile).read_text().strip()
        except OSError:
            return None
    else:
        pidfile = None
    if not pid_text or not pid_text.isdigit():
        return None
    pid = int(pid_text)
    start = _start_ticks(pid)
    if start is None:
        return None
    owner: dict[str, Any] = {"host": socket.gethostname(), "pid": pid, "start": start}
    if pidfile:
        owner["pidfile"] = str(Path(pidfile).resolve())
    return owner


def owner_tags() -> dict[str, str]:
    """The owner tag, and the invocation tag when a ``balancebench`` command started the
    run (``BALANCEBENCH_INVOCATION``): how that command finds *its* parent run, never
    another command's that started at the same time."""
    owner = current_owner()
    tags = {OWNER_TAG: json.dumps(owner, sort_keys=True)} if owner else {}
    invocation = os.environ.get(INVOCATION_ENV)
    if invocation:
        tags[INVOCATION_TAG] = invocation
    return tags


def owner_alive(text: str) -> bool:
    """Whether the owner recorded in a tag still runs (another host's: assumed alive). An
    owner with a pid file is alive while the process that file names runs: the service's
    ``stop`` removes the file; a crashed scheduler's file names a dead pid until the next
    ``start`` writes its successor's."""
    try:
        owner = json.loads(text)
        if owner["host"] != socket.gethostname():
            return True
        if _running_ticks(int(owner["pid"])) == str(owner["start"]):
            return True
        if owner.get("pidfile"):
            successor = Path(owner["pidfile"]).read_text().strip()
            return successor.isdigit() and process_running(int(successor))
        return False
    except OSError:
        return False  # the pid file is gone: the service was stopped
    except (ValueError, KeyError, TypeError):
        return True  # unreadable: never kill what we cannot judge


def _close_running(
    mlflow: Any,
    reason_for: Callable[[str], str | None],
    status: str = "KILLED",
    ended_since_ms: int | None = None,
) -> list[str]:
    """Close as ``status`` every RUNNING run for whose owner tag ``reason_for`` gives a
    reason (None: leave it; the reason goes to ``FAILURE_TAG`` for FAILED, ``REASON_TAG``
    for KILLED); returns their ids. With ``ended_since_ms``, runs that ended FAILED or
    KILLED at or after it are closed again: a step that failed *because* the run was
    being stopped (Airflow fails the task it is terminating, and a closing task with
    ``trigger_rule="all_done"`` may then close the parent FAILED) did not fail; a run its
    stopping task closed KILLED (``StrategyRunOperator.on_kill``) gets the real reason."""
    client = mlflow.MlflowClient()
    experiments = [e.experiment_id for e in client.search_experiments()]
    if not experiments:
        return []
    wheres = ["attributes.status = 'RUNNING'"]  # MLflow's filter has no OR
    if ended_since_ms is not None:  # ... and those a stopping task closed meanwhile
        wheres += [
            f"attributes.status = '{ended}' AND attributes.end_time >= {int(ended_since_ms)}"
            for ended in ("FAILED", "KILLED")
        ]
    found = [
        run
        for where in wheres
        for run in client.search_runs(experiments, filter_string=where, max_results=5000)
    ]
    closed = []
    for run in found:
        owner = run.data.tags.get(OWNER_TAG)
        reason = None if owner is None else reason_for(owner)
        if reason is None:
            continue
        client.set_tag(run.info.run_id, FAILURE_TAG if status == "FAILED" else REASON_TAG, reason)
        client.set_terminated(run.info.run_id, status=status)
        closed.append(run.info.run_id)
    return closed


def close_orphaned_runs(mlflow: Any, why: str) -> list[str]:
    """Close RUNNING runs whose owner is gone as KILLED; returns their ids."""

    def reason(owner: str) -> str | None:
        if owner_alive(owner):
            return None
        return (
            f"its owner process ({owner}) was gone when {why} opened the store "
            f"at {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}"
        )

    return _close_running(mlflow, reason)


def close_runs_of_owner(
    mlflow: Any,
    pid: int,
    why: str,
    status: str = "KILLED",
    ended_since_ms: int | None = None,
) -> list[str]:
    """Close every RUNNING run owned by ``pid`` as ``status`` (KILLED: a run stopped by a
    signal; FAILED: a command whose DAG run failed and left them open). With
    ``ended_since_ms`` also the runs that ended FAILED or KILLED since then (see
    ``_close_running``)."""

    def reason(owner: str) -> str | None:
        try:
            return why if int(json.loads(owner)["pid"]) == pid else None
        except (ValueError, KeyError, TypeError):
            return None

    return _close_running(mlflow, reason, status, ended_since_ms)


def _remove_folders_of_dead_writers(root: Path, glob: str, name: re.Pattern[str]) -> list[Path]:
    """The folders under ``root`` matching ``glob`` whose ``name`` holds the pid of a
    writer that is gone, removed."""
    removed = []
    for folder in root.glob(glob) if root.exists() else []:
        found = name.match(folder.name)
        if found and folder.is_dir() and _start_ticks(int(found.group("pid"))) is None:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def remove_orphaned_folders(root: Path) -> list[Path]:
    """Temporary dataset folders (``.<name>.tmp-<pid>-<id>``) whose writer is gone."""
    return _remove_folders_of_dead_writers(root, "*/.*", TMP_DIR)


def record_group(folder: Path, pgid: int, temp_dir: Path | None = None) -> Path:
    """Note that this process owns process group ``pgid`` (an Airflow run and its
    spark-submit processes) and the group's temporary folder ``temp_dir``: if this
    process dies, its watchdog or the next command stops the group and removes it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"group-{os.getpid()}-{pgid}.json"
    owner = {"host": socket.gethostname(), "pid": os.getpid(), "start": _start_ticks(os.getpid())}
    record = {"owner": owner, "pgid": pgid, "start": _start_ticks(pgid)}
    if temp_dir is not None:
        record["temp_dir"] = str(temp_dir)
    path.write_text(json.dumps(record))
    return path


#: A command's temporary folder (:func:`make_temp_dir`): ``run-<owner pid>-<8 hex>``.
TEMP_RUN_DIR = re.compile(r"^run-(?P<pid>[0-9]+)-[0-9a-f]{8}$")


def make_temp_dir(root: Path) -> Path:
    """A new temporary folder under ``root`` for one command's Airflow run: Spark's
    (``blockmgr-*``, ``spark-*``, ``artifacts-*``, native libraries) and Python's
    temporary files go there instead of ``/tmp``, so the command removes them whatever
    ends the run (Spark's shutdown hooks do not run when its JVM is stopped hard). Temp
    folders of commands that are gone are removed first."""
    remove_orphaned_temp_dirs(root)
    path = root / f"run-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    return path


def remove_orphaned_temp_dirs(root: Path) -> list[Path]:
    """Temporary folders (:func:`make_temp_dir`) whose command is gone."""
    return _remove_folders_of_dead_writers(root, "run-*", TEMP_RUN_DIR)


def _group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` is still there."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop_recorded_group(path: Path) -> int | None:
    """Stop the process group a record names if its owner is gone (SIGTERM, then SIGKILL
    after 10 s) and drop the record; returns the group id it stopped."""
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if owner_alive(json.dumps(info["owner"])):
        return None
    pgid = int(info["pgid"])
    stopped = None
    if _start_ticks(pgid) == info.get("start"):  # the same group leader, not a reuse
        stop_group(pgid)
        stopped = pgid
    if info.get("temp_dir"):
        shutil.rmtree(info["temp_dir"], ignore_errors=True)
    path.unlink(missing_ok=True)
    return stopped


def stop_group(
    pgid: int, term_wait_s: float = 10.0, reap: Callable[[], object] | None = None
) -> None:
    """SIGTERM to process group ``pgid``, SIGKILL to what is left after ``term_wait_s``;
    returns once no process of the group is left (or 5 s after the SIGKILL). It waits
    for the whole group, not its leader: a leader that exits on SIGTERM first would
    leave its JVMs running past the wait. ``reap``: called while waiting, by a caller
    whose child is the leader (an unreaped leader still counts as in the group)."""
    import signal

    for sig, wait_s in ((signal.SIGTERM, term_wait_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and _group_alive(pgid):
            if reap is not None:
                reap()
            time.sleep(0.2)
        if not _group_alive(pgid):
            return


def stop_orphaned_groups(folder: Path) -> list[int]:
    """Stop process groups whose owning command is gone (SIGTERM, then SIGKILL after 10 s)."""
    found = sorted(folder.glob("group-*.json")) if folder.exists() else []
    return [pgid for path in found if (pgid := _stop_recorded_group(path)) is not None]


def watch(owner_pid: int, group_record: Path) -> None:
    """The watchdog of one ``balancebench`` command (its own session, so a signal to the
    command's group does not reach it): block until the command's process ends; if it
    ended without dropping its group record (SIGKILL, a crash), stop the group it owned
    (Airflow, its tasks, spark-submit, the Spark driver) and close its runs as KILLED, at
    once rather than at the next command. A command that ends normally drops the record
    and stops its watchdog."""
    import select

    try:
        fd = os.pidfd_open(owner_pid)
    except ProcessLookupError:
        fd = None  # already gone
    if fd is not None:
        select.select([fd], [], [])
        os.close(fd)
    if not group_record.exists():
        return
    stopping_ms = int(time.time() * 1000)
    _stop_recorded_group(group_record)
    import mlflow  # on the store of ``MLFLOW_TRACKING_URI``, set by the command that

    # started this watchdog (in its environment, not on a command line every user reads)
    close_runs_of_owner(
        mlflow,
        owner_pid,
        f"its owner, balancebench command pid {owner_pid}, ended without closing it (killed "
        f"by SIGKILL or a crash); its watchdog stopped the run's processes and closed it at "
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
        ended_since_ms=stopping_ms,  # runs the stopping tasks closed meanwhile, too
    )


if __name__ == "__main__":  # python -m balancebench.state.reaper OWNER_PID GROUP_RECORD
    import sys

    watch(int(sys.argv[1]), Path(sys.argv[2]))


def stop_with_launcher() -> int | None:
    """In a Spark application's driver (Python under the ``spark-submit`` JVM) that Airflow
    started: when the Airflow process that ran ``spark-submit`` is gone (the task's
    supervisor, lost with its scheduler), stop the JVM and this driver at once. Left
    running, the application would go on unwatched while Airflow runs the task again,
    and the same cells' rounds would be measured twice, side by side. Returns the pid it
    watches, or None (not under a JVM that an Airflow process started: a user's own
    ``spark-submit``, with ``nohup`` say, is never stopped by this)."""
    jvm = os.getppid()
    try:
        comm = Path(f"/proc/{jvm}/comm").read_text().strip()
        launcher = int(Path(f"/proc/{jvm}/stat").read_text().rsplit(")", 1)[1].split()[1])
        command = Path(f"/proc/{launcher}/cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        return None
    if comm != "java" or b"airflow" not in command:
        return None
    try:
        fd = os.pidfd_open(launcher)
    except ProcessLookupError:
        fd = None

    def watch() -> None:
        if fd is not None:
            select.select([fd], [], [])
        print(
            f"balancebench: the Airflow process that started this application (pid "
            f"{launcher}) is gone; the application stops (Airflow runs the task again or "
            "ends it)",
            file=sys.stderr,
            flush=True,
        )
        try:
            os.kill(jvm, signal.SIGKILL)
        finally:
            os._exit(1)

    threading.Thread(target=watch, name="launcher-watch", daemon=True).start()
    return launcher


def application_tag() -> dict[str, str]:
    """This driver process, as the tag ``APPLICATION_TAG`` of the runs it opens."""
    me = {"host": socket.gethostname(), "pid": os.getpid(), "start": _start_ticks(os.getpid())}
    return {APPLICATION_TAG: json.dumps(me, sort_keys=True)}


def stop_application(tag: str, wait_s: float = 30.0) -> bool:
    """Stop the Spark application whose driver a run's ``APPLICATION_TAG`` names, if it
    still runs on this host and is not this process: SIGKILL to its JVM (the driver's
    parent) and to the driver. Returns whether one was stopped."""
    try:
        owner = json.loads(tag)
        pid = int(owner["pid"])
    except (ValueError, KeyError, TypeError):
        return False
    if owner.get("host") != socket.gethostname() or pid == os.getpid():
        return False
    if _running_ticks(pid) != str(owner.get("start")):
        return False
    try:
        jvm = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        if Path(f"/proc/{jvm}/comm").read_text().strip() == "java":
            os.kill(jvm, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass
    deadline = time.monotonic() + wait_s
    while process_running(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    return True
