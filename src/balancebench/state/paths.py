"""Where a run keeps its local state: one git-ignored folder, ``<project>/.local``.

``BALANCEBENCH_HOME`` overrides the project root and ``BALANCEBENCH_LOCAL`` the ``.local``
folder itself (tests point ``BALANCEBENCH_LOCAL`` at a temporary folder);
``rm -rf .local`` resets everything (Airflow home, MLflow store, datasets, Spark logs).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from balancebench.state.environment import setting


def project_root() -> Path:
    """The project checkout: ``BALANCEBENCH_HOME`` or the folder holding ``pyproject.toml``."""
    home = setting("BALANCEBENCH_HOME")
    if home is not None:
        return home.resolve()
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").exists():
            return parent
    return Path.cwd().resolve()


def source_root() -> Path:
    """The checkout the code itself lives in: its ``expectations/``, the DAG and plugin
    folders, ``infra/spark-conf``'s log4j file (``spark.class_archive``), its git commit."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").exists():
            return parent
    raise RuntimeError("balancebench is not running from a checkout (no pyproject.toml found)")


def pyspark_jars() -> Path:
    """PySpark's jars (Spark's class path), found without importing PySpark."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyspark is not installed: run make setup")
    return Path(next(iter(spec.submodule_search_locations))) / "jars"


def local_dir() -> Path:
    return (setting("BALANCEBENCH_LOCAL") or project_root() / ".local").resolve()


def datasets_dir() -> Path:
    return local_dir() / "datasets"


def validation_dir() -> Path:
    return local_dir() / "validation"


def results_dir() -> Path:
    return local_dir() / "results"


def expectations_dir() -> Path:
    return source_root() / "expectations"


def reports_dir() -> Path:
    return local_dir() / "reports"


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on the file ``path`` (made if missing) while the block runs:
    of the processes that take it, one at a time does what it guards."""
    with path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def mount_point(path: str | Path) -> Path:
    """The mount point of the file system that holds ``path`` (or would hold it: from its
    nearest existing folder up)."""
    here = Path(os.path.abspath(path))
    while not here.exists() and here != here.parent:
        here = here.parent
    while not os.path.ismount(here) and here != here.parent:
        here = here.parent
    return here


def full_file_systems(filename: str | None, free_below_bytes: int = 1 << 20) -> list[Path]:
    """The mount points a "No space left on device" was about: the one that holds
    ``filename`` when the failed write named it; else those of ``.local`` and of every
    file system mounted below it with less than ``free_below_bytes`` free (Arrow's and
    MLflow's writes name no file)."""
    if filename:
        return [mount_point(filename)]
    root = local_dir()
    found = {mount_point(root)}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            target = Path(fields[1].replace("\\040", " ")) if len(fields) > 1 else None
            if target is not None and target.is_relative_to(root):
                found.add(target)
    full = []
    for mount in sorted(found):
        with contextlib.suppress(OSError):
            if shutil.disk_usage(mount).free < free_below_bytes:
                full.append(mount)
    return full


def storage_error(exc: OSError) -> str | None:
    """One line for a storage fault a user can act on (a full disk, a read-only or
    unwritable folder, a path where a folder should be), naming the path; None for any
    other error."""
    import errno

    path = exc.filename or local_dir()
    if exc.errno == errno.ENOSPC:
        full = full_file_systems(exc.filename)
        mount = full[0] if full else mount_point(path)
        what = f"that holds {path} " if exc.filename else ""
        return f"no space left on {mount} (the file system {what}is full); free space and re-run"
    if exc.errno == errno.EROFS:
        return f"{path} is read-only (a read-only file system); make it writable and re-run"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"{path} is read-only for this user (permission denied)"
    if exc.errno == errno.ENOTDIR:
        return f"{path}: a part of this path is a file, where a folder is needed"
    if exc.errno == errno.EEXIST:
        return f"{path} already exists and is not a folder"
    return None
