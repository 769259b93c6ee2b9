"""The local Airflow 3 service with its MLflow tracking server (``make airflow``).

    python infra/service.py start|stop|status

``start`` runs, each in its own process group, with its pid file under
``.local/service/``:

- ``mlflow server`` on 127.0.0.1:``MLFLOW_PORT`` (5000), basic authentication on (the
  ``basic-auth`` app), over the project's store ``.local/mlflow`` (parallel writers log
  through it);
- ``airflow api-server`` on 127.0.0.1:``AIRFLOW_PORT`` (8080), the UI and REST API, login
  required (Simple auth manager, user ``admin``);
- ``airflow scheduler`` (LocalExecutor, ``[core] parallelism`` 4) and ``airflow
  triggerer``, both without their log servers (those bind every interface; the API
  server reads the task logs from disk, on this machine), and ``airflow dag-processor``.

Airflow's database is the embedded SQLite file in WAL mode (readers do not block the one
writer): the README says why, with what was measured. The one password (Airflow and
MLflow) is generated on first start into ``.local/service/password``, readable only by
its owner, and never printed. ``stop`` stops exactly the process groups it started, by
the ids in its pid files. Both commands are safe to repeat.

``SPARK_MASTER`` (``local[*]`` or ``spark://host:port``) is where the tasks'
``spark-submit`` goes, as for ``make run``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from balancebench.local_env import airflow_env, check_spark_master  # noqa: E402
from balancebench.paths import local_dir  # noqa: E402

BIN = Path(sys.executable).parent
USER = "admin"
COMPONENTS = ("mlflow", "api-server", "scheduler", "dag-processor", "triggerer")
START_TIMEOUT_S = 180.0


def state_dir() -> Path:
    folder = local_dir() / "service"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def ports() -> tuple[int, int]:
    return int(os.environ.get("AIRFLOW_PORT", "8080")), int(os.environ.get("MLFLOW_PORT", "5000"))


def _private(path: Path, text: str) -> None:
    """Write a file only its owner can read (created so, never world-readable)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def secrets_file() -> dict[str, str]:
    """The service's secrets, generated once: the login password and the servers' keys."""
    path = state_dir() / "secrets.json"
    values = json.loads(path.read_text()) if path.exists() else {}
    names = ("password", "jwt", "api_key", "mlflow_key")
    if any(n not in values for n in names):
        values = {n: values.get(n) or secrets.token_urlsafe(24) for n in names}
        _private(path, json.dumps(values))
        _private(state_dir() / "password", values["password"] + "\n")
        _private(state_dir() / "airflow-passwords.json", json.dumps({USER: values["password"]}))
    return values


def service_env(spark_master: str | None = None) -> dict[str, str]:
    """Environment of every component (and of the tasks they run)."""
    api_port, mlflow_port = ports()
    keys = secrets_file()
    folder = state_dir()
    auth_ini = folder / "mlflow-auth.ini"
    _private(
        auth_ini,
        "[mlflow]\ndefault_permission = READ\n"
        f"database_uri = sqlite:///{folder / 'mlflow-auth.db'}\n"
        f"admin_username = {USER}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
        "auth_cache_ttl_seconds = 60\n",
    )
    api = f"http://127.0.0.1:{api_port}"
    return {
        **os.environ,
        **airflow_env(spark_master),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": os.environ.get("AIRFLOW_PARALLELISM", "4"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(folder / "airflow-passwords.json"),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{api}/execution/",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(api_port),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__BASE_URL": api,
        "AIRFLOW__API__SECRET_KEY": keys["api_key"],
        "AIRFLOW__API_AUTH__JWT_SECRET": keys["jwt"],
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "MLFLOW_TRACKING_URI": f"http://127.0.0.1:{mlflow_port}",
        "MLFLOW_TRACKING_USERNAME": USER,
        "MLFLOW_TRACKING_PASSWORD": keys["password"],
        "MLFLOW_AUTH_CONFIG_PATH": str(auth_ini),
        "MLFLOW_AUTH_ADMIN_PASSWORD": keys["password"],
        "MLFLOW_FLASK_SERVER_SECRET_KEY": keys["mlflow_key"],
        # The scheduler owns the runs its tasks open: once it is stopped, the next command
        # closes what it left RUNNING as KILLED (balancebench.reaper).
        "BALANCEBENCH_OWNER_PIDFILE": str(folder / "scheduler.pid"),
    }


def commands() -> dict[str, list[str]]:
    api_port, mlflow_port = ports()
    store = local_dir() / "mlflow"
    (store / "artifacts").mkdir(parents=True, exist_ok=True)
    airflow = str(BIN / "airflow")
    return {
        "mlflow": [
            str(BIN / "mlflow"),
            "server",
            "--app-name",
            "basic-auth",
            "--backend-store-uri",
            f"sqlite:///{store / 'mlflow.db'}",
            "--default-artifact-root",
            (store / "artifacts").as_uri(),
            "--host",
            "127.0.0.1",
            "--port",
            str(mlflow_port),
            "--workers",
            "1",
        ],
        "api-server": [airflow, "api-server", "--host", "127.0.0.1", "--port", str(api_port)],
        "scheduler": [airflow, "scheduler", "--skip-serve-logs"],
        "dag-processor": [airflow, "dag-processor"],
        "triggerer": [airflow, "triggerer", "--skip-serve-logs"],
    }


def _pid(component: str) -> int | None:
    path = state_dir() / f"{component}.pid"
    if not path.exists():
        return None
    pid = int(path.read_text().strip() or 0)
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return None
    return pid


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _wait_http(url: str, what: str, log: Path, timeout: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers (e.g. 401: authentication on)
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"{what} did not answer on {url} in {timeout:.0f} s; see {log}")


def _prepare_database(env: dict[str, str]) -> None:
    """``airflow db migrate``, then WAL mode on the SQLite file (persists in the file)."""
    log = state_dir() / "db-migrate.log"
    with log.open("w") as out:
        done = subprocess.run(
            [str(BIN / "airflow"), "db", "migrate"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    if done.returncode:
        raise SystemExit(f"airflow db migrate failed; see {log}")
    db = Path(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].removeprefix("sqlite:///"))
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA journal_mode=WAL")


def start(spark_master: str | None = None) -> None:
    api_port, mlflow_port = ports()
    env = service_env(spark_master)
    running = {c for c in COMPONENTS if _pid(c)}
    for component, port in (("api-server", api_port), ("mlflow", mlflow_port)):
        if component not in running and _listening(port):
            raise SystemExit(
                f"port {port} on 127.0.0.1 is taken by another program; set "
                f"{'AIRFLOW_PORT' if component == 'api-server' else 'MLFLOW_PORT'} to a free one"
            )
    if len(running) < len(COMPONENTS):
        _prepare_database(env)
    for component, cmd in commands().items():
        if component in running:
            print(f"{component}: already running (pid {_pid(component)})")
            continue
        log = state_dir() / f"{component}.log"
        with log.open("a") as out:
            proc = subprocess.Popen(
                cmd,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=ROOT,
            )
        (state_dir() / f"{component}.pid").write_text(str(proc.pid))
        print(f"{component}: started (pid {proc.pid}, log {log})")
    try:
        _wait_http(f"http://127.0.0.1:{mlflow_port}/health", "MLflow", state_dir() / "mlflow.log")
        _wait_http(
            f"http://127.0.0.1:{api_port}/api/v2/monitor/health",
            "Airflow API server",
            state_dir() / "api-server.log",
        )
    except SystemExit:
        stop()  # nothing left half up
        raise
    print()
    print(f"Airflow UI:  http://127.0.0.1:{api_port}   (user {USER})")
    print(f"MLflow UI:   http://127.0.0.1:{mlflow_port}   (user {USER}, same password)")
    print(f"password:    in {state_dir() / 'password'} (readable only by you; not printed)")
    print("DAGs: balance_experiment, nightly_sweep (scheduled), model_experiment, generate_dataset")
    print("stop with:   make airflow-stop")


def _stop_group(component: str, pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.25)
    print(f"{component}: did not stop in 30 s; killing its process group")
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def stop() -> None:
    # Schedulers first (they start task processes), the stores' servers last.
    for component in reversed(COMPONENTS):
        pid_file = state_dir() / f"{component}.pid"
        pid = _pid(component)
        if pid is None:
            print(f"{component}: not running")
        else:
            _stop_group(component, pid)
            print(f"{component}: stopped (pid {pid})")
        pid_file.unlink(missing_ok=True)


def status() -> int:
    down = 0
    for component in COMPONENTS:
        pid = _pid(component)
        down += pid is None
        print(f"{component}: " + (f"running (pid {pid})" if pid else "stopped"))
    return 0 if down == 0 else 3


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in ("start", "stop", "status"):
        print("usage: python infra/service.py start|stop|status", file=sys.stderr)
        return 2
    master = os.environ.get("SPARK_MASTER") or None
    if master is not None:
        try:
            check_spark_master(master)
        except ValueError as exc:
            print(f"SPARK_MASTER: {exc}", file=sys.stderr)
            return 2
    if argv[0] == "start":
        start(master)
    elif argv[0] == "stop":
        stop()
    else:
        return status()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
