"""Shared fixtures: an isolated local-state folder and one SparkSession per session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Under pytest-xdist a worker's __main__ has no __file__, which pyspark.sql.connect's
# import check takes for a doctest run and answers with sys.exit(0) (Great Expectations
# imports it): give it one.
if not hasattr(sys.modules["__main__"], "__file__"):
    sys.modules["__main__"].__file__ = "pytest-xdist-worker"

# Every test run writes its local state (MLflow store, datasets, Airflow home) to a
# temporary folder, never to the checkout's .local.
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.pop("MLFLOW_TRACKING_URI", None)


@pytest.fixture(scope="session", autouse=True)
def local_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("local")
    os.environ["BALANCEBENCH_LOCAL"] = str(folder)
    return folder


@pytest.fixture(scope="session")
def spark(local_state: Path):
    from balancebench.spark.session import get_session

    session = get_session("balancebench-tests", master="local[2]")
    yield session
    session.stop()
