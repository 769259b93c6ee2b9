"""``balancebench`` command line (typer + rich).

balancebench run [--conf JSON] [--spark-master URL]   # what `make run` calls
balancebench report [--experiment NAME] [--parent RUN_ID] [--sweep RUN_ID]
balancebench datasets ; balancebench generate DATASET --set NAME=VALUE ...
balancebench validate DATASET_DIR ; balancebench strategies
balancebench airflow ARGS...                           # airflow with the embedded env
balancebench models ; balancebench run-model [--conf JSON]   # papers 001-004 model sweeps
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from balancebench.core.schema import check_values, parse_json_object, quoted, terminal_safe
from balancebench.experiment.cost_model_check import DEFAULT_MASTER as CHECK_MODEL_MASTER
from balancebench.experiment.paper000_figures import FIGURES
from balancebench.experiment.params import (
    EXPERIMENT_PARAMS,
    ExperimentSpec,
    check_inputs,
    defaults,
)
from balancebench.experiment.run_log import PROGRESS
from balancebench.orchestration.local_env import (
    airflow_env,
    check_java,
    check_master_answers,
    check_spark_master,
)
from balancebench.orchestration.terminal_report import console, run_report, sweep_report
from balancebench.state import reaper, tracking
from balancebench.state.environment import SettingError, check_environment, setting
from balancebench.state.paths import (
    datasets_dir,
    exclusive_lock,
    full_file_systems,
    local_dir,
    results_dir,
    storage_error,
    validation_dir,
)
from balancebench.state.store_door import check_store, run_facts, store_fault_line

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="balancebench: load-balancing strategies of stream processing, compared side by "
    "side in paired rounds (run, report, sweep, figure, run-model, generate, validate)",
)
DAG_ID = "balance_experiment"
SWEEP_DAG_ID = "nightly_sweep"
_DEFAULTS = defaults()


def _command(*args: Any, **kwargs: Any) -> Callable[[Callable[..., Any]], Any]:
    """``app.command`` that first checks the settings read from the environment (a bad
    ``BALANCEBENCH_*`` value: one line naming it, exit 2, before any work), and whose
    storage faults (full disk, read-only ``.local``, a file where
    a folder should be) end in one line naming the path, exit 1, no traceback. A command
    that opens the MLflow store first closes what dead commands left behind
    (``tracking.reap_orphans``): after its inputs pass :func:`_at_the_door`, so that a
    refused input costs no MLflow import and no store."""

    def register(fn: Callable[..., Any]) -> Any:
        @functools.wraps(fn)
        def guarded(*a: Any, **k: Any) -> Any:
            try:
                check_environment()
            except SettingError as exc:
                console.print(terminal_safe(str(exc)), style="red", markup=False, highlight=False)
                raise typer.Exit(2) from None
            try:
                return fn(*a, **k)
            except OSError as exc:
                line = storage_error(exc)
                if line is None:
                    raise
                console.print(terminal_safe(line), style="red", markup=False, highlight=False)
                raise typer.Exit(1) from None
            except Exception as exc:  # the store's own faults: one line, no traceback
                line = store_fault_line(exc, tracking.tracking_uri())
                if line is None:
                    raise
                console.print(terminal_safe(line), style="red", markup=False, highlight=False)
                raise typer.Exit(1) from None

        return app.command(*args, **kwargs)(guarded)

    return register


def _airflow(
    args: list[str],
    spark_master: str | None = None,
    log: Path | None = None,
    invocation: str | None = None,
) -> int:
    env = {**os.environ, **airflow_env(spark_master)}
    cmd = [str(Path(sys.executable).parent / "airflow"), *args]
    if log is None:
        return subprocess.run(cmd, env=env).returncode
    log.parent.mkdir(parents=True, exist_ok=True)
    # This process owns the runs Airflow opens (balancebench.state.reaper), and tags them with
    # its invocation id: how it finds its own parent run afterwards.
    env["BALANCEBENCH_OWNER_PID"] = str(os.getpid())
    if invocation:
        env[reaper.INVOCATION_ENV] = invocation
    # The run's temporary files (Spark's and Python's) in a folder this command removes
    # however the run ends: SIGTERM left Spark's in /tmp (issue 62).
    temp_dir = reaper.make_temp_dir(local_dir() / "tmp")
    env.update(_temp_env(temp_dir, env.get("SPARK_SUBMIT_OPTS", "")))
    try:
        return _airflow_logged(cmd, env, log, temp_dir)
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


def _temp_env(temp_dir: Path, submit_opts: str) -> dict[str, str]:
    """Where a run's processes write temporary files: Python's (``TMPDIR``), Spark's local
    dirs (``SPARK_LOCAL_DIRS``: ``blockmgr-*``, ``spark-*``) and the driver JVM's
    (``java.io.tmpdir``: ``artifacts-*``, native libraries such as ``liblz4``)."""
    quoted_dir = f'"{temp_dir}"' if " " in str(temp_dir) else str(temp_dir)
    return {
        "TMPDIR": str(temp_dir),
        "SPARK_LOCAL_DIRS": str(temp_dir),
        "SPARK_SUBMIT_OPTS": f"{submit_opts} -Djava.io.tmpdir={quoted_dir}".strip(),
    }


def _airflow_logged(cmd: list[str], env: dict[str, str], log: Path, temp_dir: Path) -> int:
    """``cmd`` in its own process group, its output to ``log``, progress and errors to the
    console; a signal to this command stops the group (:func:`_stop_run`)."""
    with log.open("w") as sink:
        # Its own process group: a signal to this command stops Airflow, its tasks and
        # their spark-submit processes together.
        proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        group_file = reaper.record_group(local_dir() / "logs", proc.pid, temp_dir)
        # If this command is SIGKILLed, its watchdog (own session) stops the group and
        # closes the runs at once; it ends with this command otherwise.
        watchdog = subprocess.Popen(
            [sys.executable, "-m", "balancebench.state.reaper", str(os.getpid()), str(group_file)],
            env={**os.environ, "MLFLOW_TRACKING_URI": tracking.tracking_uri()},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=sink,
            start_new_session=True,
        )
        previous = {
            sig: signal.signal(sig, lambda n, _f: _stop_run(proc, n))
            for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                sink.write(line)
                # Progress and errors; never a traceback (the log keeps it, and the
                # command ends with the first error and the log's path).
                if PROGRESS in line:  # our own line, without Airflow's log decoration
                    shown = _progress_message(line)
                elif any(mark in line for mark in ("[DAG TEST]", "ERROR")):
                    shown = line.rstrip()
                else:
                    continue
                console.print(terminal_safe(shown), markup=False, highlight=False)
            return proc.wait()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            group_file.unlink(missing_ok=True)
            watchdog.terminate()
            watchdog.wait()


def _progress_message(line: str) -> str:
    """A progress line as the CLI shows it: its time (HH:MM:SS UTC) and message, without the
    log level and logger name Airflow wraps a task's output in."""
    message = line.split(PROGRESS, 1)[1].split(" [airflow.", 1)[0].strip()
    stamp = re.match(r"\d{4}-\d\d-\d\dT(\d\d:\d\d:\d\d)", line)
    return f"{stamp.group(1) + ' UTC ' if stamp else ''}progress: {message}"


def _stop_run(proc: subprocess.Popen, signum: int) -> None:
    """SIGINT/SIGTERM: stop Airflow's process group (its tasks, spark-submit and the Spark
    driver), then close the runs this command owns as KILLED, then exit."""
    name = signal.Signals(signum).name
    signalled_ms = int(time.time() * 1000)
    console.print(f"[red]{name}[/red]: stopping the run (process group {proc.pid})")
    reaper.stop_group(proc.pid, term_wait_s=30, reap=proc.poll)  # all of it, not its leader
    proc.wait()
    # Also the runs that ended FAILED since the signal: Airflow fails the task it
    # terminates, and the closing task may then close the parent FAILED.
    closed = reaper.close_runs_of_owner(
        tracking.store(),
        os.getpid(),
        f"stopped by {name} to balancebench (pid {os.getpid()})",
        ended_since_ms=signalled_ms,
    )
    console.print(f"closed {len(closed)} MLflow run(s) as KILLED")
    raise SystemExit(128 + signum)


def _store_identity() -> tuple[int, int] | None:
    """(device, inode) of the SQLite MLflow store file, None for a server or no file yet:
    a store deleted or replaced mid-run is named as such, not as "no parent run"."""
    uri = tracking.tracking_uri()
    if not uri.startswith("sqlite:///"):
        return None
    try:
        found = Path(uri.removeprefix("sqlite:///")).stat()
    except OSError:
        return None
    return (found.st_dev, found.st_ino)


def _migrate_airflow_db(spark_master: str | None) -> int:
    """``airflow db migrate`` under a file lock: two commands started together in one
    clone would migrate the same fresh SQLite database at once, and one would fail."""
    logs = local_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(logs / ".airflow-db-migrate.lock"):
        return _airflow(["db", "migrate"], spark_master, logs / "airflow-db-migrate.log")


def _dags_test(dag_id: str, params: dict, spark_master: str | None) -> tuple[int, Path, str]:
    """Migrate the embedded Airflow DB, then ``airflow dags test DAG -c PARAMS``; returns
    (exit code, this run's log, this command's invocation id). The log is this run's own
    (``.local/logs/runs/``), with ``<dag_id>-latest.log`` linking to the newest. A failed
    migration exits here with its log named."""
    if _migrate_airflow_db(spark_master):
        console.print(
            "[red]airflow db migrate failed[/red]; see .local/logs/airflow-db-migrate.log"
        )
        raise typer.Exit(1)
    invocation = uuid.uuid4().hex
    # UTC, said in the name (Z), as the progress lines and Airflow's log stamp their times.
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    log = local_dir() / "logs" / "runs" / f"{dag_id}-{stamp}-{invocation[:8]}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.touch()
    latest = local_dir() / "logs" / f"{dag_id}-latest.log"
    link = latest.with_name(f".{latest.name}.{invocation[:8]}")
    link.symlink_to(log)
    link.replace(latest)  # atomic: never a moment without the link, never a plain file
    console.print(f"running DAG {dag_id} (full log: {log})")
    try:  # the store exists (its identity), and the experiment may be used
        tracking.ensure_experiment(params["experiment"])
    except tracking.DeletedExperiment as exc:
        console.print(terminal_safe(str(exc)), style="red", markup=False, highlight=False)
        raise typer.Exit(2) from None
    store = _store_identity()
    code = _airflow(
        ["dags", "test", dag_id, "-c", json.dumps(params)], spark_master, log, invocation
    )
    if store is not None and _store_identity() != store:
        _failed(
            "DAG run failed",
            f"the MLflow store {tracking.tracking_uri()} was deleted or replaced during the "
            "run; the runs it held are not in the store now",
            log,
        )
    if code != 0:
        # A step that failed before it could close its runs: close them with the cause.
        with contextlib.suppress(Exception):  # the store itself may be what failed
            reaper.close_runs_of_owner(
                tracking.store(), os.getpid(), _first_error(log), status="FAILED"
            )
    return code, log, invocation


@_command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def airflow(ctx: typer.Context) -> None:
    """Run ``airflow`` with the embedded environment (``.local/airflow``, SQLite)."""
    raise typer.Exit(_airflow(list(ctx.args)))


@_command()
def run(
    conf: str = typer.Option("{}", help="DAG Params as JSON, e.g. '{\"zipf_s\": 1.2}'"),
    spark_master: str = typer.Option(None, help="local[*] (default) or spark://host:7077"),
) -> None:
    """Run the DAG once with ``airflow dags test`` and print the comparison."""

    def check() -> dict:
        # Refused here before Airflow starts; the DAG's generate step is the door of the
        # run itself (a trigger from the UI passes only there).
        params = ExperimentSpec.checked(parse_json_object(conf, "CONF")).to_json()
        check_inputs(params)
        return params

    params = _at_the_door(check, spark_master)
    code, log, invocation = _dags_test(DAG_ID, params, spark_master)
    # The parent run this command opened: never another run's table.
    parent = _own_parent(params["experiment"], invocation, "parent", log)
    shown = run_report(params["experiment"], parent) if parent else False
    if code != 0 or not shown:
        what = f"parent run {parent}" if parent else "no parent run was opened"
        _failed("DAG run failed", what, log)


def _own_parent(experiment: str, invocation: str, role: str, log: Path) -> str | None:
    """The parent run this command's DAG run opened, or None; a store that cannot be read
    ends the command with that cause (not "no parent run was opened")."""
    try:
        return tracking.parent_run_of_invocation(experiment, invocation, role)
    except Exception as exc:  # SQLAlchemy/MLflow errors of a broken store
        cause = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        _failed("DAG run failed", f"the MLflow store cannot be read: {cause}", log)


#: What a door check returns (the checked Params, in the shape the command needs).
T = TypeVar("T")


def _at_the_door(check: Callable[[], T], spark_master: str | None, opens_store: bool = True) -> T:
    """``check()`` (the Params), then what the machine must provide: Java, a master URL
    that is a Spark master, and for a command that opens the MLflow store
    (``opens_store``) a store that can be read and written, its experiment not deleted
    (``store_door.check_store``). Anything bad exits 2 before any work, in one line. Then
    the store's runs left RUNNING by dead commands are closed (``tracking.reap_orphans``)."""
    try:
        params = check()
        check_java()
        check_master_answers(spark_master or setting("BALANCEBENCH_SPARK_MASTER"))
        if opens_store:
            experiment = params.get("experiment") if isinstance(params, dict) else None
            check_store(tracking.tracking_uri(), experiment)
    except ValueError as exc:
        console.print(f"[red]refused before any work:[/red] {escape(terminal_safe(str(exc)))}")
        raise typer.Exit(2) from exc
    if opens_store:
        tracking.reap_orphans()
    return params


def _failed(headline: str, what: str, log: Path) -> NoReturn:
    """The run this command started failed: say which, its first error and the log."""
    console.print(
        f"[red]{headline}[/red] ({escape(what)}); first error: {escape(_first_error(log))}"
    )
    console.print(f"full log: {log}", markup=False)
    raise typer.Exit(1)


#: ``local-cluster[executors,cores,MiB]``: Spark starts the executors for the application
#: and stops them with it (the check's default master).
_LOCAL_CLUSTER = re.compile(
    r"local-cluster\[(?P<n>[1-9][0-9]?),(?P<cores>[1-9]),(?P<mb>[0-9]{3,5})\]"
)


def _check_model_master(master: str) -> int:
    """The cores the check's master gives its nodes (``local-cluster``'s executors x
    cores; a ``spark://`` cluster's are asked of Spark later: 0), or ValueError."""
    found = _LOCAL_CLUSTER.fullmatch(master or "")
    if found:
        return int(found["n"]) * int(found["cores"])
    if master.startswith("spark://"):
        check_spark_master(master)
        return 0
    raise ValueError(
        f"spark_master: {quoted(master)} is not allowed here; allowed: local-cluster[E,C,MiB] "
        "(E executors of C cores, each its own JVM) or spark://host:port: the nodes need "
        "cores of their own, which local[N] shares"
    )


@_command()
def check_model(
    conf: str = typer.Option(
        "{}", help="Params as JSON over the check's (2 nodes, 2 senders, hash/qmmp/mnrt)"
    ),
    spark_master: str = typer.Option(
        CHECK_MODEL_MASTER,
        help="local-cluster[E,C,MiB] or spark://host:7077; n_nodes = n_senders = its cores",
    ),
    rounds: int = typer.Option(3, min=2, max=20, help="rotated rounds of the strategies"),
) -> None:
    """The cost model against nodes on executors of their own: per batch, the model's
    charge (routing per sender, the slowest node's CPU) against the same stages' CPU on the
    executors that ran them; against their wall time too where every executor has a core
    of its own and the driver one more."""
    from balancebench.experiment.cost_model_check import (
        CHECK_DEFAULTS,
        cores_for,
        report,
        run_check,
    )
    from balancebench.spark.session import get_session

    def check() -> ExperimentSpec:
        cores = _check_model_master(spark_master)
        values = {**CHECK_DEFAULTS, **parse_json_object(conf, "CONF")}
        if cores and (values["n_nodes"] != cores or values["n_senders"] != cores):
            raise ValueError(
                f"n_nodes, n_senders: {values['n_nodes']}, {values['n_senders']} on a master "
                f"of {cores} cores; allowed: both {cores} (one core per node and sender)"
            )
        params = ExperimentSpec.checked(values)
        check_inputs(params.to_json())
        return params

    params = _at_the_door(check, None, opens_store=False)
    mb = _LOCAL_CLUSTER.fullmatch(spark_master)
    conf_extra = {"spark.executor.memory": f"{int(mb['mb']) * 3 // 4}m"} if mb else {}
    spark = get_session("balancebench-check-model", spark_master, conf_extra)
    try:
        checks = run_check(spark, params, rounds)
        cores = cores_for(spark, spark_master)
    finally:
        spark.stop()
    for line in report(checks, params.strategies[0], cores):
        console.print(line, markup=False, highlight=False)


@_command()
def figure(
    key: str = typer.Argument(..., help=f"paper 000 figure: {', '.join(sorted(FIGURES))}"),
    conf: str = typer.Option(
        "{}", help='other sweep Params as JSON, e.g. \'{"min_rounds": 2, "max_rounds": 2}\''
    ),
    spark_master: str = typer.Option(None, help="local[*] (default) or spark://host:7077"),
) -> None:
    """Run one of paper 000's experiments (``nightly_sweep`` with the Param ``figure``)
    and print its summary, figure and report page."""

    def values() -> dict:
        given = parse_json_object(conf, "CONF")
        if "figure" in given and given["figure"] != key:
            raise ValueError(
                f"figure: given twice, as the argument {quoted(key)} and in CONF as "
                f"{quoted(str(given['figure']))}; give it once (the argument)"
            )
        return {**given, "figure": key}

    _run_sweep(values, spark_master, f"figure {key}")


@_command()
def sweep(
    conf: str = typer.Option(
        "{}", help='sweep Params as JSON, e.g. \'{"grid_zipf_s": "1.0", "max_rounds": 8}\''
    ),
    spark_master: str = typer.Option(None, help="local[*] (default) or spark://host:7077"),
) -> None:
    """Run the ``nightly_sweep`` DAG once now (its grid from the Params, as the nightly
    schedule would) and print its summary and report page; the progress lines say which
    application and run is measuring, with the time left."""
    _run_sweep(lambda: parse_json_object(conf, "CONF"), spark_master, "sweep")


def _run_sweep(values: Callable[[], dict], spark_master: str | None, what: str) -> None:
    """The sweep DAG once on the Params ``values()`` gives: read at the door, so a CONF
    that is no JSON object is refused like any bad Param (exit 2, no traceback)."""
    from balancebench.orchestration.sweep_grid import NO_FIGURE, validate_sweep_params

    params = _at_the_door(lambda: validate_sweep_params(values()), spark_master)
    code, log, invocation = _dags_test(SWEEP_DAG_ID, params, spark_master)
    parent = _own_parent(params["experiment"], invocation, "sweep", log)
    shown = sweep_report(parent) if parent else False
    drawn = tracking.store().get_run(parent).data.tags.get("figure_path") if parent else None
    if drawn:
        print(f"paper figure: {drawn} (table: {Path(drawn).with_suffix('.csv')})")
    wanted_figure = params.get("figure", NO_FIGURE) != NO_FIGURE
    if code != 0 or not shown or (wanted_figure and not drawn):
        done = f"sweep run {parent}" if parent else "no sweep run was opened"
        _failed(f"{escape(what)} failed", done, log)


#: A log line that names a root cause, and how to say it in one line: searched before
#: the generic failure marks, so "Task failed with exception" does not hide a full disk.
#: How a line of balancebench's that names a failure's cause starts (after Airflow's
#: decoration): ``balancebench: <cause>``.
OWN_CAUSE = "balancebench: "
ROOT_CAUSES = (
    ("No space left on device", "no space left on device"),
    ("Read-only file system", "a file system is read-only"),
    ("readonly database", "the MLflow store is read-only (attempt to write a readonly database)"),
    ("Permission denied", "permission denied"),
    ("no such table", "the MLflow store was replaced or emptied mid-run (no such table)"),
)


def _first_error(log: Path) -> str:
    """The first root cause the log names (full disk, read-only store, ...), else its
    first line that names a failure (task and error); escaped and shortened."""
    marks = ("AirflowFailException", "Task failed", "ValueError", "Error:", "ERROR")
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    for needle, cause in ROOT_CAUSES:
        for line in lines:
            if needle in line:
                path = re.search(r"'(/[^']{1,300})'", line)  # the file it names, if any
                if needle == "No space left on device":  # which file system: its mount
                    full = full_file_systems(path.group(1) if path else None)
                    return cause + (f": {', '.join(map(str, full))} is full" if full else "")
                return cause + (f": {path.group(1)}" if path else "")
    for line in lines:  # a cause balancebench put in one line (a killed JVM, a dead server)
        if OWN_CAUSE in line:
            own = line.split(OWN_CAUSE, 1)[1]
            return terminal_safe(re.sub(r"\s+\[[\w.]+\]\s+loc=\S+$", "", own).strip(), 400)
    for line in lines:
        if any(m in line for m in marks):
            return terminal_safe(line.strip(), 400)
    return "(none found in the log)"


@_command()
def report(
    experiment: str = typer.Option("balancebench", help="MLflow experiment"),
    parent: str = typer.Option(None, help="Parent run id (default: the latest)"),
    sweep: str = typer.Option(None, help="A nightly_sweep parent run id: its report page"),
) -> bool:
    """Print the comparison table of a DAG run and where its results are. Exit 1 when the
    run did not finish with a table (its state and reason are printed)."""
    _report_door(experiment, parent, sweep)
    tracking.reap_orphans()
    shown = sweep_report(sweep) if sweep is not None else run_report(experiment, parent)
    if not shown:
        raise typer.Exit(1)
    return shown


#: An MLflow run id: 32 hexadecimal digits.
_RUN_ID = re.compile(r"[0-9a-f]{32}")


def _report_door(experiment: str, parent: str | None, sweep: str | None) -> None:
    """``report``'s options, checked before MLflow is imported (its import and schema
    check cost seconds of CPU): the experiment's name by its Param's rule, each run id by
    its form, then, in the embedded store, that the runs exist, the sweep is a sweep and
    the experiment is not deleted. A bad one exits 2 in one line."""
    uri = tracking.tracking_uri()
    try:
        spec = {"experiment": EXPERIMENT_PARAMS["experiment"]}
        check_values(spec, {"experiment": experiment}, what="report options")
        for field, run_id in (("parent", parent), ("sweep", sweep)):
            if run_id is not None and not _RUN_ID.fullmatch(run_id):
                raise ValueError(
                    f"{field}: {quoted(run_id)} is not an MLflow run id; allowed: 32 "
                    "hexadecimal digits, as `balancebench run` prints them"
                )
        check_store(uri, experiment if parent is None and sweep is None else None, writes=False)
        for field, run_id in (("parent", parent), ("sweep", sweep)):
            facts = None if run_id is None else run_facts(uri, run_id)
            if run_id is not None and facts is None:
                raise ValueError(f"{field}: no run {quoted(run_id)} in {uri}")
            if field == "sweep" and facts is not None and facts[0] and facts[1] != "sweep":
                raise ValueError(f"sweep: run {run_id} is not a nightly_sweep parent run")
    except ValueError as exc:
        console.print(f"[red]refused:[/red] {escape(terminal_safe(str(exc)))}")
        raise typer.Exit(2) from None


@_command()
def strategies() -> None:
    """List the strategies, what they implement, and their own Params."""
    from balancebench.core.operators import names
    from balancebench.strategies import STRATEGIES, strategy_param_name

    table = Table(title="strategies (select with CONF '{\"strategies\": [...]}')")
    for col in ("name", "implements", "operators", "Params (default)"):
        table.add_column(col)
    for name, cls in STRATEGIES.items():
        params = ", ".join(
            f"{strategy_param_name(name, p)}={spec['default']}"
            for p, spec in cls.param_schema.items()
        )
        table.add_row(name, cls.reference, ", ".join(names(cls.operators)), params or "-")
    console.print(table)


def _parse_settings(pairs: list[str]) -> dict[str, object]:
    """``["n_tuples=1000", "zipf_s=1.2"]`` -> values (JSON where it parses, else text)."""
    out: dict[str, object] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--set: expected NAME=VALUE, got {quoted(pair)}")
        if name in out:
            raise ValueError(f"--set: {quoted(name)} is given twice; give each Param once")
        try:
            out[name] = parse_json_object(f'{{"v": {text}}}', "--set")["v"] if text else text
        except ValueError:
            out[name] = text
    return out


@_command()
def generate(
    dataset: str = typer.Argument("zipf_stream", help="Generator (see `balancebench datasets`)"),
    set_: list[str] = typer.Option([], "--set", help="A dataset Param, NAME=VALUE (repeatable)"),
    out: Path = typer.Option(None, help="Root folder (default .local/datasets)"),
    validate_too: bool = typer.Option(True, "--validate/--no-validate", help="Run the GX suites"),
) -> None:
    """Write a dataset (Parquet + manifest), print its folder, and validate it. A cached
    one is reused only when its files prove to be the ones its manifest lists, every
    byte (sha256)."""
    from balancebench.generators import generate as generate_dataset

    root = out or datasets_dir()
    try:
        folder, manifest = generate_dataset(dataset, root, _parse_settings(set_))
    except OSError as exc:
        if exc.filename is None and storage_error(exc):  # Arrow's writes name no file
            raise OSError(exc.errno, exc.strerror, str(root)) from exc
        if not isinstance(exc, FileNotFoundError):
            raise
        console.print(terminal_safe(str(exc)), style="red", markup=False, highlight=False)
        raise typer.Exit(2) from exc
    except ValueError as exc:
        console.print(terminal_safe(str(exc)), style="red", markup=False, highlight=False)
        raise typer.Exit(2) from exc
    rows = ", ".join(f"{t} {f['rows']}" for t, f in manifest.tables.items())
    print(f"{folder}  rows: {rows}  {manifest.digest}  ({manifest.generate_s:.1f} s)")
    if validate_too:
        validate(folder, zipf_fit_tolerance=_DEFAULTS["zipf_fit_tolerance"])


@_command()
def datasets() -> None:
    """List the dataset generators and their Params."""
    from balancebench.generators import DATASET_PARAMS, GENERATORS

    table = Table(title="datasets (generate with `balancebench generate NAME --set P=V`)")
    for col in ("name", "kind", "what", "Params (default)"):
        table.add_column(col)
    for name, gen in GENERATORS.items():
        params = ", ".join(f"{p}={DATASET_PARAMS[p]['default']}" for p in gen.params)
        table.add_row(name, gen.kind, f"{gen.description} [{gen.reference}]", params)
    console.print(table)


@_command()
def validate(
    dataset_dir: Path = typer.Argument(
        ..., help="a dataset's folder (under .local/datasets/<generator>/<id>)"
    ),
    zipf_fit_tolerance: float = typer.Option(
        _DEFAULTS["zipf_fit_tolerance"],
        help="how far the exponent fitted from the data may be from the requested zipf_s, "
        "beyond the sampling band (the Param zipf_fit_tolerance, 0 to 5)",
    ),
) -> None:
    """Run the dataset's Great Expectations suites."""
    from balancebench.core.schema import check_values
    from balancebench.experiment.params import EXPERIMENT_PARAMS
    from balancebench.experiment.validation import validate_dataset

    try:  # the Param's own rule, before any work (a negative tolerance ran GX before)
        check_values(
            {"zipf_fit_tolerance": EXPERIMENT_PARAMS["zipf_fit_tolerance"]},
            {"zipf_fit_tolerance": zipf_fit_tolerance},
            what="option",
        )
    except ValueError as exc:
        console.print(f"[red]refused:[/red] {escape(terminal_safe(str(exc)))}")
        raise typer.Exit(2) from exc
    try:
        report_ = validate_dataset(
            dataset_dir,
            validation_dir() / f"{dataset_dir.name}.json",
            {"zipf_fit_tolerance": zipf_fit_tolerance},
        )
    except (ValueError, FileNotFoundError) as exc:
        console.print(f"[red]refused:[/red] {escape(terminal_safe(str(exc)))}")
        raise typer.Exit(2) from exc
    console.print(report_.message(), markup=False)
    raise typer.Exit(0 if report_.success else 1)


@_command()
def models() -> None:
    """List the paper 001-004 models, their strategies and Params."""
    from balancebench.experiment.model_sweep import model_param_name
    from balancebench.models import MODELS, get_model

    table = Table(title="models (run with `balancebench run-model --conf '{\"model\": ...}'`)")
    for col in ("model", "implements", "strategies", "dataset", "Params (default)"):
        table.add_column(col)
    for name in MODELS:
        model = get_model(name)
        params = ", ".join(
            f"{model_param_name(name, p)}={spec['default']}"
            for p, spec in model.param_schema.items()
        )
        table.add_row(name, model.reference, ", ".join(model.strategies), model.dataset, params)
    console.print(table)


@_command("run-model")
def run_model(
    conf: str = typer.Option("{}", help='Params as JSON, e.g. \'{"model": "overlay"}\''),
    spark_master: str = typer.Option(None, help="local[*] (default) or spark://host:7077"),
) -> None:
    """Run the ``model_experiment`` DAG once with ``airflow dags test``; print the summary."""
    from balancebench.experiment.model_sweep import validate_model_params

    params = _at_the_door(
        lambda: validate_model_params(parse_json_object(conf, "CONF")), spark_master
    )
    code, log, invocation = _dags_test("model_experiment", params, spark_master)
    parent = _own_parent(params["experiment"], invocation, "parent", log)
    if parent is None:
        _failed("DAG run failed", "no parent run was opened", log)
    parent_run = tracking.store().get_run(parent)
    status = parent_run.info.status
    summary = results_dir() / parent / "model_summary.csv"
    if summary.exists():
        import pandas as pd

        frame = pd.read_csv(summary)
        from balancebench.experiment.model_sweep import REPETITION_SUFFIXES

        keep = [c for c in frame.columns if c != "run_id" and not c.endswith(REPETITION_SUFFIXES)]
        varied = [c for c in keep if c in {k.split("_", 1)[1] for k in params["grid"]}]
        frame = frame[keep]
        frame.index = [" ".join(str(v) for v in row) for row in frame[["strategy", *varied]].values]
        # Metrics as rows, (strategy, point) as columns: fits a terminal for any model.
        print(frame.drop(columns=["strategy", *varied]).T.to_string(float_format="{:.4g}".format))
    print(f"results:      {results_dir() / parent}/ (model_summary.csv, {params['model']}.png)")
    print(f"MLflow store: {tracking.tracking_uri()}  (experiment {params['experiment']!r})")
    print("\n".join(tracking.how_to_open(parent_run.info.experiment_id, parent)))
    if code != 0 or status != "FINISHED":
        console.print(f"[red]DAG run failed[/red]; see {log}")
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
