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


# The order in which xdist hands out files (`--dist loadfile --no-loadscope-reorder`, in
# both `make test` and `make test-faults`). xdist gives each worker one file in this order,
# then a second file at once to each worker whose file has at most two pending tests, and
# the rest to the first worker down to two pending tests. `make test-faults` has four
# files on four workers, one each. Minutes per file (from the workers' temporary folders)
# in one `make test-faults` (2026-11-29, five files on four workers, 2 cores, each file
# slowed by the others): service 23, service faults 22.5, faults 17, storage 11, cluster 7
# (the cluster file has since moved to `make test`, where it starts first, beside the
# engine and the DAG run). `make test`'s files follow, longest first (seconds in one
# `make test` on a clean clone, 2026-11-25: engine 608, DAG run 415, join architectures
# 333, baselines 287, model DAG 234, bad inputs 99, dataset DAG 55, plans 48, TPC-H 37).
SLOWEST_FIRST = (
    "tests/e2e/test_service.py",
    "tests/e2e/test_service_faults.py",
    "tests/e2e/test_standalone_cluster.py",
    "tests/e2e/test_faults.py",
    "tests/e2e/test_faults_storage.py",
    "tests/spark/test_engine.py",
    "tests/e2e/test_dag_run.py",
    "tests/spark/test_join_architectures_spark.py",
    "tests/spark/test_native_baselines.py",
    "tests/e2e/test_model_dag.py",
    "tests/test_bad_inputs.py",
    "tests/e2e/test_dataset_dag.py",
    "tests/strategies/test_plans.py",
    "tests/generators/test_tpch.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Figures a test measures and prints (``record_property("printed", line)``): shown at
    the end of the run, also from pytest-xdist's workers, whose output is not."""
    lines = dict.fromkeys(
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        for key, value in getattr(report, "user_properties", ())
        if key == "printed"
    )
    if lines:
        terminalreporter.section("figures the tests printed")
        for line in lines:
            terminalreporter.write_line(str(line))
