"""Environment of the embedded setup: Airflow home, DAG folder, Spark connection.

One place for the variables ``make run``, the CLI and the tests give to ``airflow``
and ``spark-submit`` (``balancebench airflow ...`` runs Airflow with them).
"""

from __future__ import annotations

import json
import os
import socket
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
        with socket.create_connection(_master_address(master), timeout=timeout_s):
            return master
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ValueError(
            f"spark_master: nothing answers at {quoted(master)} ({why}); start the cluster "
            "(e.g. infra/spark-standalone.sh start) or give another master"
        ) from None


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
