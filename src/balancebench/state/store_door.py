"""The MLflow store, checked at the door before any work: readable, room to write, and the
experiment not deleted.

A command that writes to the store (``run``, ``sweep``, ``model``) and ``report`` call
:func:`check_store` before they start a DAG or import MLflow, so a broken store is refused
in one line naming it and what to do, not by a traceback minutes later. For the embedded
SQLite store (``make run``'s) it reads the file with Python's ``sqlite3``, which costs
milliseconds where MLflow's import and schema check cost seconds; a store served over
HTTP is left to MLflow's client, whose unreachable server ``tracking.unreachable`` names.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

from balancebench.core.schema import quoted
from balancebench.state.paths import mount_point

#: The tag naming a run's role (parent, cell, round, sweep, dataset): ``tracking.ROLE_TAG``.
ROLE_TAG = "balancebench.role"

#: The room the store needs to write a run's figures and artifacts (a default run writes
#: a few MiB; the margin keeps SQLite's journal from meeting a full disk mid-run).
MIN_FREE_BYTES = 256 * 2**20


class StoreFault(ValueError):
    """The MLflow store cannot serve a command: one line naming it and what to do."""


def deleted_message(name: str, experiment_id: str) -> str:
    """What a run in a deleted experiment is told (the door and ``ensure_experiment``)."""
    return (
        f"experiment: {quoted(name)} was deleted in MLflow (id {experiment_id}); restore it "
        f"(`mlflow experiments restore --experiment-id {experiment_id}`, or Restore in the "
        "UI's deleted experiments) or pick another name"
    )


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` tracking URI (None: another kind of store)."""
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri.removeprefix("sqlite:///").split("?", 1)[0])


def _connect(path: Path) -> sqlite3.Connection:
    """The store's database, never created here. Read and write where the file allows it
    (SQLite falls back to reading alone): a read-only connection cannot roll back the hot
    journal a write cut short left behind, and then refuses to read at all (seen: the
    report after a store turned read-only mid-run refused the store it was to repair)."""
    return sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=10)


def _not_a_database(store: str, why: str) -> str:
    """What a store that SQLite cannot read as a database is told, at the door or past it."""
    return (
        f"{store} is not a readable SQLite database ({why}); move it aside (a new, empty "
        "store is made in its place) or restore it from a backup"
    )


def check_store(uri: str, experiment: str | None = None, writes: bool = True) -> None:
    """``StoreFault`` unless the store at ``uri`` can be read (and, ``writes``, written,
    with :data:`MIN_FREE_BYTES` free on its file system), and ``experiment`` (when given)
    is not a deleted one. Only the embedded SQLite store is read here."""
    path = sqlite_path(uri)
    if path is None:
        return
    where = f"the MLflow store {path}"
    if writes:
        folder = path.parent
        if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise StoreFault(f"{where} cannot be written by this user; make it writable")
        free = shutil.disk_usage(folder).free
        if free < MIN_FREE_BYTES:
            raise StoreFault(
                f"no space left for {where}: {free / 2**20:.0f} MiB free on {mount_point(folder)}"
                f", at least {MIN_FREE_BYTES / 2**20:.0f} MiB needed; free space and re-run"
            )
    if not path.exists():
        return  # a new store: MLflow makes it
    try:
        con = _connect(path)
    except sqlite3.Error as exc:
        raise StoreFault(f"{where} cannot be opened ({exc}); check the file") from None
    try:
        found = con.execute(
            "SELECT experiment_id, lifecycle_stage FROM experiments WHERE name = ?",
            (experiment or "",),
        ).fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return  # an empty database: MLflow makes its tables
        raise StoreFault(f"{where} cannot be read ({exc}); check the file") from None
    except sqlite3.DatabaseError as exc:  # "file is not a database", "malformed"
        raise StoreFault(_not_a_database(where, str(exc))) from None
    finally:
        con.close()
    if experiment is not None and found is not None and found[1] == "deleted":
        raise StoreFault(deleted_message(experiment, str(found[0])))


def run_facts(uri: str, run_id: str) -> tuple[str, str | None] | None:
    """``(status, role tag)`` of run ``run_id`` in the embedded SQLite store, read without
    MLflow, after :func:`check_store` passed; None when there is no such run. For another
    kind of store, ``("", None)``: MLflow's client is asked later."""
    path = sqlite_path(uri)
    if path is None:
        return ("", None)
    if not path.exists():
        return None
    con = _connect(path)
    try:
        found = con.execute(
            "SELECT status FROM runs WHERE run_uuid = ? AND lifecycle_stage = 'active'",
            (run_id,),
        ).fetchone()
        role = con.execute(
            "SELECT value FROM tags WHERE run_uuid = ? AND key = ?", (run_id, ROLE_TAG)
        ).fetchone()
    except sqlite3.Error as exc:
        raise StoreFault(f"the MLflow store {path} cannot be read ({exc}); check it") from None
    finally:
        con.close()
    return None if found is None else (str(found[0]), None if role is None else str(role[0]))


def store_fault_line(exc: BaseException, uri: str) -> str | None:
    """One line for a fault of the store itself met past the door (SQLite's or
    SQLAlchemy's errors: a full disk, a file that is not a database, a lock held too
    long), naming the store and what to do; None for any other error."""
    kind = type(exc)
    if not (isinstance(exc, sqlite3.Error) or kind.__module__.startswith("sqlalchemy")):
        return None
    text = str(getattr(exc, "orig", None) or exc).splitlines()[0] if str(exc) else kind.__name__
    path = sqlite_path(uri)
    store = f"the MLflow store {path}" if path else f"the MLflow store {uri}"
    if "full" in text:
        where = mount_point(path.parent) if path else "its file system"
        return f"{store} cannot be written: {text} (on {where}); free space and re-run"
    if "not a database" in text or "malformed" in text:
        return _not_a_database(store, text)
    return f"{store} failed: {text}; check it and re-run"
