"""Environment of the embedded setup: Airflow home, DAG folder, Spark connection.

One place for the variables ``make run``, the CLI and the tests give to ``airflow``
and ``spark-submit`` (``balancebench airflow ...`` runs Airflow with them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from balancebench.core.schema import quoted
from balancebench.orchestration import class_archive
from balancebench.state.environment import SETTINGS, parse_spark_master, setting
from balancebench.state.paths import local_dir, source_root
from balancebench.state.tracking import tracking_uri


def check_spark_master(master: str) -> str:
    """``master`` if it is ``local``, ``local[N]``, ``local[*]`` or ``spark://host[:port]``
    (port 1-65535), else ``ValueError`` naming the field and the allowed forms."""
    try:
        return parse_spark_master(master)
    except ValueError:
        raise ValueError(
            f"spark_master: {quoted(master)} is not a Spark master URL; allowed: "
            f"{SETTINGS['BALANCEBENCH_SPARK_MASTER'].allowed}"
        ) from None


def _master_address(master: str) -> tuple[str, int]:
    """``(host, port)`` of a checked ``spark://host[:port]`` (Spark's default port 7077)."""
    host, _, port = master.removeprefix("spark://").partition(":")
    return host, int(port or 7077)


def check_master_answers(master: str, timeout_s: float = 3.0) -> str:
    """``master`` if it is local or its ``spark://host:port`` accepts a connection, else
    ``ValueError`` naming the field: a cluster nobody started is refused at the door, not
    80 s later by spark-submit ("All masters are unresponsive")."""
    check_spark_master(master)
    if not master.startswith("spark://"):
        return master
    try:
        with socket.create_connection(_master_address(master), timeout=timeout_s) as conn:
            reply = _reply_to_a_stranger(conn, timeout_s)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ValueError(
            f"spark_master: nothing answers at {quoted(master)} ({why}); start the cluster "
            "(e.g. infra/spark-standalone.sh start) or give another master"
        ) from None
    if reply:
        what = "an HTTP server" if reply.startswith(b"HTTP/") else "a server of another kind"
        raise ValueError(
            f"spark_master: {quoted(master)} answers, but as {what}, not a Spark master (it "
            f"replied {quoted(reply[:40].decode('ascii', 'replace'))}); give the master's RPC "
            "address, spark://host:7077 by default (its web UI's port is another)"
        )
    return master


def _reply_to_a_stranger(conn: socket.socket, timeout_s: float) -> bytes:
    """What the server at ``conn`` sends back to a line of HTTP. A Spark master's RPC port
    reads it as a frame of impossible length and closes without a byte (Netty's
    ``TransportFrameDecoder``); an HTTP server, SSH or most others answer in text. The
    door's other checks only knew that something accepted the connection (issue 62: any
    HTTP server passed, and the run failed 102 s later)."""
    conn.settimeout(timeout_s)
    try:
        conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
        return conn.recv(64)
    except (TimeoutError, ConnectionResetError, BrokenPipeError):
        return b""


def check_java(timeout_s: float = 30.0) -> str:
    """The ``java`` a Spark driver will run (``JAVA_HOME``'s, else the one on ``PATH``, as
    ``spark-class`` picks it), if it runs and is Java 17 or later (Spark 4's floor); else
    ``ValueError`` naming what is missing. One ``java -version`` (a JVM start, about 0.1 s
    of CPU)."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    install = (
        "Spark 4 needs Java 17 or 21: install one (e.g. apt-get install "
        "openjdk-17-jre-headless) and put it on PATH, or set JAVA_HOME to it"
    )
    if not java or not os.access(java, os.X_OK):
        where = (
            f"JAVA_HOME={quoted(home)} holds no bin/java"
            if home
            else "no `java` on PATH and JAVA_HOME is not set"
        )
        raise ValueError(f"java: {where}; {install}")
    try:
        done = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValueError(f"java: {quoted(java)} does not run ({exc}); {install}") from None
    found = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    major = 0 if found is None else int(found[2] or 0) if found[1] == "1" else int(found[1])
    if done.returncode != 0 or major < 17:
        said = (done.stderr or done.stdout).strip().splitlines()[:1]
        raise ValueError(
            f"java: {quoted(java)} is {quoted(said[0]) if said else 'of no known version'}; "
            + install
        )
    return java


def spark_connection(master: str) -> str:
    """``AIRFLOW_CONN_SPARK_DEFAULT`` for a master URL (``local[*]`` or ``spark://h:p``)."""
    check_spark_master(master)
    if master.startswith("spark://"):
        host, port = _master_address(master)
        return json.dumps({"conn_type": "spark", "host": f"spark://{host}", "port": port})
    return json.dumps({"conn_type": "spark", "host": master})


def airflow_env(spark_master: str | None = None) -> dict[str, str]:
    """Variables to add to ``os.environ`` for ``airflow`` and the tasks it runs."""
    root = source_root()
    home = local_dir() / "airflow"
    home.mkdir(parents=True, exist_ok=True)
    venv_bin = str(Path(sys.executable).parent)
    master = spark_master or setting("BALANCEBENCH_SPARK_MASTER")
    # The user's options follow ours (the JVM takes a flag's last value); a process this
    # environment started, building its own, does not add ours twice.
    ours, theirs = class_archive.driver_java_options(), os.environ.get("SPARK_SUBMIT_OPTS", "")
    submit_opts = theirs if theirs.startswith(ours) else f"{ours} {theirs}".strip()
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(root / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(root / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get(
            "AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO"
        ),
        "AIRFLOW_CONN_SPARK_DEFAULT": spark_connection(master),
        "MLFLOW_TRACKING_URI": tracking_uri(),
        # MLflow prints "View run ... at: <url>" for a server's runs, a link that opens its
        # GenAI pages; balancebench prints its own, on the runs table (tracking.end_run).
        "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
        # MLflow's client retries a server that does not answer 7 times, about 4 minutes
        # for each call (built for rate-limited clouds); a task here then hung for minutes
        # per run. Three retries (1 + 2 + 4 s) outlast a restart's blip and then fail
        # with the server named (tracking.unreachable). A value the user set wins.
        **{
            name: os.environ.get(name, default)
            for name, default in (
                ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "3"),
                ("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1"),
                ("MLFLOW_HTTP_REQUEST_TIMEOUT", "60"),
            )
        },
        "BALANCEBENCH_LOCAL": str(local_dir()),
        # An empty SPARK_CONF_DIR, and log4j's file and the JVM's class archive as
        # options: an archive cannot record a class path with a non-empty folder.
        **class_archive.spark_submit_env(submit_opts),
        # spark-submit must be on PATH for SparkSubmitOperator (it takes a name only).
        "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
    }
    return env
