"""Where a run keeps its local state: one git-ignored folder, ``<project>/.local``.

``BALANCEBENCH_HOME`` overrides the project root (tests point it at a temporary folder);
``rm -rf .local`` resets everything (Airflow home, MLflow store, datasets, Spark logs).
"""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The project checkout: ``BALANCEBENCH_HOME`` or the folder holding ``pyproject.toml``."""
    env = os.environ.get("BALANCEBENCH_HOME")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").exists():
            return parent
    return Path.cwd().resolve()


def source_root() -> Path:
    """The checkout the code itself lives in (for ``spark_apps/`` and ``expectations/``)."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").exists():
            return parent
    raise RuntimeError("balancebench is not running from a checkout (no pyproject.toml found)")


def local_dir() -> Path:
    return Path(os.environ.get("BALANCEBENCH_LOCAL", project_root() / ".local")).resolve()


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
