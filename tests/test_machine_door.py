"""What the machine must provide is checked at the door, before any work, in one line
naming it (issue 62): Java, a Spark master that is one, and an MLflow store that can be
read and written, its experiment not deleted; ``report`` refuses bad options before it
imports MLflow; a store fault past the door is one line, never a traceback."""

from __future__ import annotations

import http.server
import socket
import sqlite3
import threading
from collections import namedtuple
from pathlib import Path

import pytest
from typer.testing import CliRunner

from balancebench.orchestration.cli import app
from balancebench.orchestration.local_env import check_java, check_master_answers
from balancebench.state import store_door, tracking

RUNNER = CliRunner()
SMALL = '{"n_tuples": 1000, "experiment": "door"}'


def _refused(args: list[str], env: dict[str, str | None] | None = None) -> str:
    done = RUNNER.invoke(app, args, env=env)
    out = " ".join(done.output.split())
    assert done.exit_code == 2, out
    assert "Traceback" not in done.output and "running DAG" not in out
    return out


def test_no_java_is_refused_naming_what_to_install(tmp_path):
    out = _refused(["run", "--conf", SMALL], {"PATH": str(tmp_path), "JAVA_HOME": None})
    assert "java: no `java` on PATH and JAVA_HOME is not set" in out and "Java 17" in out
    out = _refused(["run", "--conf", SMALL], {"JAVA_HOME": str(tmp_path)})
    assert f"JAVA_HOME='{tmp_path}' holds no bin/java" in out


def test_a_java_older_than_17_is_refused(tmp_path, monkeypatch):
    assert check_java()  # this machine's own
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(ValueError, match=r"11\.0\.2.*Spark 4 needs Java 17"):
        check_java()


@pytest.fixture
def a_web_server():
    class Quiet(http.server.HTTPServer):
        def handle_error(self, request, client_address) -> None:
            pass  # the door hangs up after the first bytes: no traceback in the test log

    server = Quiet(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_a_master_url_that_answers_http_is_not_taken_for_a_spark_master(a_web_server):
    out = _refused(["run", "--spark-master", f"spark://127.0.0.1:{a_web_server}", "--conf", SMALL])
    assert "answers, but as an HTTP server, not a Spark master" in out


def test_a_port_that_closes_on_a_stranger_like_sparks_rpc_port_passes():
    # Spark's RPC port reads a line of HTTP as a frame of impossible length and closes
    # without a byte; the real master is run in tests/e2e/test_standalone_cluster.py
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def close_at_once() -> None:
        conn, _ = listener.accept()
        conn.recv(64)
        conn.close()

    threading.Thread(target=close_at_once, daemon=True).start()
    try:
        assert check_master_answers(f"spark://127.0.0.1:{port}") == f"spark://127.0.0.1:{port}"
    finally:
        listener.close()


def _store_file() -> Path:
    path = store_door.sqlite_path(tracking.tracking_uri())
    assert path is not None
    return path


def test_a_store_that_is_not_a_database_is_refused_by_run_and_report_in_one_line(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    (tmp_path / "mlflow.db").write_bytes(b"garbage " * 64)
    for args in (["run", "--conf", SMALL], ["report"]):
        out = _refused(args)
        assert f"the MLflow store {tmp_path / 'mlflow.db'} is not a readable SQLite" in out
        assert "move it aside" in out


def test_a_deleted_experiment_is_refused_before_the_dag_and_by_report(local_state):
    import mlflow

    client = mlflow.MlflowClient(tracking.tracking_uri())
    gone = client.create_experiment("gone-at-the-door")
    client.delete_experiment(gone)
    conf = '{"n_tuples": 1000, "experiment": "gone-at-the-door"}'
    for args in (["run", "--conf", conf], ["report", "--experiment", "gone-at-the-door"]):
        out = _refused(args)
        assert f"experiment: 'gone-at-the-door' was deleted in MLflow (id {gone})" in out


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--parent", "/etc/passwd"], "parent: '/etc/passwd' is not an MLflow run id"),
        (["--parent", "0" * 32], f"parent: no run '{'0' * 32}'"),
        (["--sweep", "x"], "sweep: 'x' is not an MLflow run id"),
        (["--experiment", "../x"], "experiment: '../x'"),
    ],
)
def test_reports_bad_options_are_refused_before_mlflow_is_imported(local_state, args, said):
    tracking.ensure_experiment("door")  # a store with its tables
    out = _refused(["report", *args])
    assert said in out


def test_a_store_on_a_full_disk_is_refused_naming_its_file_system(local_state, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(store_door.shutil, "disk_usage", lambda _: usage(10**9, 10**9, 4096))
    with pytest.raises(store_door.StoreFault, match=r"no space left for the MLflow store .* on /"):
        store_door.check_store(tracking.tracking_uri(), "door")


def test_a_store_fault_past_the_door_is_one_line_naming_the_store():
    full = sqlite3.OperationalError("database or disk is full")
    line = store_door.store_fault_line(full, "sqlite:////data/mlflow.db")
    assert line is not None and line.startswith("the MLflow store /data/mlflow.db cannot be")
    assert "free space and re-run" in line
    assert store_door.store_fault_line(KeyError("x"), "sqlite:////data/mlflow.db") is None
