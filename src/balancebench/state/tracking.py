"""MLflow helpers: the store, the experiment and the parent/child run layout.

- Store: ``sqlite:///<project>/.local/mlflow/mlflow.db`` unless ``MLFLOW_TRACKING_URI``
  is set; artifacts under ``<project>/.local/mlflow/artifacts``.
- One parent run per experiment DAG run (tags ``airflow.dag_id``, ``airflow.run_id``), its
  children (tag ``mlflow.parentRunId``): one per strategy (``balance_experiment``), per sweep
  cell (``nightly_sweep``, the cell's round runs under it) or per strategy and
  parameter point (``model_experiment``). A workload run or sweep cell carries the Params
  that apply to it (``experiment.params.applicable_params``), not every Param.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from balancebench.core.metric_definitions import METRIC_DEFINITIONS, VERDICT_FIGURES
from balancebench.core.schema import terminal_safe
from balancebench.state import reaper
from balancebench.state.environment import setting
from balancebench.state.paths import exclusive_lock, local_dir, source_root, storage_error
from balancebench.state.store_door import ROLE_TAG, deleted_message

NOTE_TAG = "mlflow.note.content"  # what the MLflow UI shows as a description
#: The MLflow 3 UI opens an experiment by its kind: without this tag it guesses the GenAI
#: overview (traces, tokens, all "No data"); the classic kind opens on the runs table.
KIND_TAG, MODEL_TRAINING = "mlflow.experimentKind", "custom_model_development"
EXPERIMENT_DESCRIPTION = (
    "balancebench: load-balancing and data-distribution strategies of stream processing, "
    "run side by side on Spark. One parent run per DAG run (its description says what it "
    "compares and who won); one child per strategy (balance_experiment) or per sweep cell "
    "(nightly_sweep, with one run per round under it). Every metric's unit is in its "
    "name and its definition in metric_definitions.json on every run."
)


def tracking_uri() -> str:
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    db = local_dir() / "mlflow" / "mlflow.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{db}"


def artifact_root() -> Path:
    return local_dir() / "mlflow" / "artifacts"


def mlflow_ui_command() -> str:
    """The exact command that serves this store's UI on 127.0.0.1:5000."""
    mlflow_bin = Path(sys.executable).parent / "mlflow"
    return f"{mlflow_bin} ui --backend-store-uri '{tracking_uri()}' --host 127.0.0.1 --port 5000"


def how_to_open(experiment_id: str, run_id: str) -> list[str]:
    """Lines that tell a user how to see ``run_id`` in the MLflow UI: its link, and for a
    store no server serves (``make run``'s), the command that serves it first."""
    link = ui_link(experiment_id, run_id)
    if tracking_uri().startswith(("http://", "https://")):
        return [f"MLflow UI:    {link}"]
    return [f"MLflow UI:    {mlflow_ui_command()}", f"  then open   {link}"]


_OPENED: set[str] = set()


def store() -> Any:
    """The ``mlflow`` module, pointed at this project's store (:func:`tracking_uri`). No
    side effect on runs: closing what dead commands left behind is :func:`reap_orphans`,
    which the entry points call.

    A local (SQLite) store is first opened under a file lock beside it: MLflow creates a
    new store's tables with alembic migrations, and two commands started together on a
    new store would both migrate it, one failing ("Online migration expected to match
    one row"); the second waits and finds the tables made."""
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    import mlflow

    uri = tracking_uri()
    mlflow.set_tracking_uri(uri)
    if uri not in _OPENED and uri.startswith("sqlite:///"):
        db = Path(uri.removeprefix("sqlite:///"))
        with exclusive_lock(db.with_name(f".{db.name}.open.lock")):
            mlflow.MlflowClient().search_experiments(max_results=1)  # makes its tables
    _OPENED.add(uri)
    return mlflow


def client() -> Any:
    """An ``MlflowClient`` on this project's store."""
    return store().MlflowClient()


_REAPED: set[str] = set()


def reap_orphans(why: str | None = None) -> None:
    """Close what dead owners left behind, once per process and store: first the process
    groups a dead command left working, then the closings kept while the tracking server
    did not answer (:func:`close_pending_runs`), then the runs a dead owner left RUNNING
    (closed KILLED with ``why``, by default this process's command line) and its
    half-written dataset folders. Called by every entry point that opens runs or reads
    them for a user (a ``balancebench`` command, a DAG step, a spark-submit application),
    before it does."""
    uri = tracking_uri()
    if uri in _REAPED:
        return
    _REAPED.add(uri)
    from balancebench.state.paths import datasets_dir

    why = why or " ".join(Path(a).name for a in sys.argv[:2]) or "a command"
    reaper.stop_orphaned_groups(local_dir() / "logs")
    close_pending_runs()
    reaper.close_orphaned_runs(store(), why)
    reaper.remove_orphaned_folders(datasets_dir())


def log_batch_metrics(series: dict[str, float], step: int) -> None:
    """One measured batch's series on the active run, at ``step`` = the batch."""
    store().log_metrics(series, step=step)


class DeletedExperiment(ValueError):
    """The experiment's name belongs to one deleted in MLflow (it keeps the name until
    the store's garbage collection)."""


def ensure_experiment(name: str) -> str:
    """Id of experiment ``name``, created with a local artifact location if missing;
    :class:`DeletedExperiment` (one line: restore it or pick another name) when an
    experiment of that name was deleted in MLflow."""
    mlflow = store()
    existing = mlflow.get_experiment_by_name(name)
    if existing is not None and existing.lifecycle_stage == "deleted":
        raise DeletedExperiment(deleted_message(name, existing.experiment_id))
    view = {KIND_TAG: MODEL_TRAINING, SHARED_VIEW_TAG + RUNS_VIEW_KEY: runs_table_view()}
    if existing is not None:
        for key, value in view.items():
            if existing.tags.get(key) != value:  # one made before the tag, or its change
                mlflow.MlflowClient().set_experiment_tag(existing.experiment_id, key, value)
        return existing.experiment_id
    location = artifact_root() / name
    location.mkdir(parents=True, exist_ok=True)
    try:
        return mlflow.create_experiment(
            name,
            artifact_location=location.as_uri(),
            tags={NOTE_TAG: EXPERIMENT_DESCRIPTION, **view},
        )
    except Exception as exc:
        # Two runs triggered at once both found it missing: the other one made it.
        code = getattr(exc, "error_code", "")
        if code != "RESOURCE_ALREADY_EXISTS" and "RESOURCE_ALREADY_EXISTS" not in str(exc):
            raise
        made = mlflow.get_experiment_by_name(name)
        if made is None:
            raise
        return made.experiment_id


def git_commit() -> str:
    """HEAD of the checkout, with ``-dirty`` if tracked files changed; ``unknown`` outside git."""
    try:
        root = source_root()
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError, RuntimeError):
        return "unknown"


def library_versions() -> dict[str, str]:
    names = {
        "pyspark": "pyspark",
        "numpy": "numpy",
        "mlflow": "mlflow",
        "great_expectations": "great-expectations",
        "airflow": "apache-airflow",
        "balancebench": "balancebench",
    }
    out = {}
    for label, dist in names.items():
        try:
            out[f"version_{label}"] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[f"version_{label}"] = "absent"
    return out


def flat_params(params: dict[str, Any]) -> dict[str, str]:
    """MLflow params are strings; lists and dicts become JSON."""
    return {k: json.dumps(v) if isinstance(v, list | dict) else str(v) for k, v in params.items()}


def log_params(
    client: Any, run_id: str, params: dict[str, Any], metrics: dict[str, float] | None = None
) -> None:
    """Log a run's Params (flattened, see ``flat_params``) and the code's ``git_commit``
    in one batch, with optional step-0 metrics."""
    mlflow = store()
    client.log_batch(
        run_id,
        params=[
            mlflow.entities.Param(k, v)
            for k, v in {**flat_params(params), "git_commit": git_commit()}.items()
        ],
        metrics=[mlflow.entities.Metric(k, float(v), 0, 0) for k, v in (metrics or {}).items()],
    )


def start_parent_run(
    experiment: str,
    params: dict[str, Any],
    dag_id: str,
    run_id: str,
    dataset_digest: str,
    run_name: str | None = None,
    description: str | None = None,
    role: str = "parent",
) -> str:
    """Create (and leave open) the parent run of one DAG run; returns its id."""
    mlflow = store()
    experiment_id = ensure_experiment(experiment)
    client = mlflow.MlflowClient()
    tags = {
        ROLE_TAG: role,
        "airflow.dag_id": dag_id,
        "airflow.run_id": run_id,
        **reaper.owner_tags(),
    }
    if description:
        tags[NOTE_TAG] = description
    run = client.create_run(experiment_id, run_name=run_name or f"{dag_id} {run_id}", tags=tags)
    log_params(client, run.info.run_id, {**params, "dataset_digest": dataset_digest})
    log_metric_definitions(run.info.run_id)
    return run.info.run_id


def start_dataset_run(
    experiment: str,
    params: dict[str, Any],
    dag_id: str,
    run_id: str,
    dataset_dir: Path,
    manifest: Any,
) -> str:
    """An MLflow run (role ``dataset``) for one generated dataset; left open for the
    validation step. Logs the params, the manifest, rows per table and generation time."""
    mlflow = store()
    client = mlflow.MlflowClient()
    run = client.create_run(
        ensure_experiment(experiment),
        run_name=f"dataset {params['dataset']}",
        tags={
            **reaper.owner_tags(),
            ROLE_TAG: "dataset",
            "airflow.dag_id": dag_id,
            "airflow.run_id": run_id,
            "dataset": params["dataset"],
        },
    )
    rid = run.info.run_id
    log_params(
        client,
        rid,
        {
            **manifest.params,
            "dataset": params["dataset"],
            "dataset_dir": str(dataset_dir),
            "dataset_digest": manifest.digest,
        },
        dataset_metrics(manifest),
    )
    client.log_artifact(rid, str(Path(dataset_dir) / "manifest.json"), "dataset")
    log_metric_definitions(rid)
    return rid


def dataset_metrics(manifest: Any) -> dict[str, float]:
    """Rows per table (``rows_<table>_tuples``), generation time and rate."""
    out = {f"rows_{t}_tuples": float(f["rows"]) for t, f in manifest.tables.items()}
    rows = float(sum(f["rows"] for f in manifest.tables.values()))
    out["generate_s"] = float(manifest.generate_s)
    if manifest.generate_s > 0:
        out["generate_rows_per_s"] = rows / manifest.generate_s
    return out


def log_validation(run_id: str, report: Any) -> None:
    """The full GX result (artifact), its outcome (tag) and counts (metrics) on a run."""
    mlflow_client = client()
    mlflow_client.log_artifact(run_id, str(report.result_path), "validation")
    mlflow_client.set_tag(run_id, "validation", "passed" if report.success else "failed")
    mlflow_client.log_metric(run_id, "validation_expectations", float(report.evaluated))
    mlflow_client.log_metric(run_id, "validation_failed_expectations", float(len(report.failed)))


def log_metric_definitions(run_id: str) -> None:
    client().log_dict(run_id, METRIC_DEFINITIONS, "metric_definitions.json")


def run_label(dag_run_id: str, what: str) -> str:
    """A parent run's name: when it was triggered first (``12-02 11:16:20``, from the DAG
    run's id) and a short tag of that id (runs triggered in the same second differ by
    it), then what it runs, so two runs of one conf differ where MLflow's runs table cuts
    names short; the DAG run's whole id is in the run's description."""
    import hashlib
    import re

    stamp = re.search(r"\d{4}-(\d\d-\d\d)T(\d\d:\d\d:\d\d)", dag_run_id)
    when = f"{stamp.group(1)} {stamp.group(2)}" if stamp else dag_run_id[:20]
    tag = hashlib.sha256(dag_run_id.encode()).hexdigest()[:4]
    return f"{when} #{tag} · {what}"


def end_run(run_id: str, status: str, note: str | None = None, lead: bool = False) -> None:
    """Close a run; ``note`` is added to its description (``lead``: before what it held,
    so the answer is what MLflow shows first)."""
    mlflow_client = client()
    run = mlflow_client.get_run(run_id)
    if note:
        before = run.data.tags.get(NOTE_TAG, "")
        joined = f"{note}\n\n{before}" if lead else f"{before}\n\n{note}"
        mlflow_client.set_tag(run_id, NOTE_TAG, joined.strip())
    mlflow_client.set_terminated(run_id, status=status)
    # MLflow's own "View run" line (suppressed in the tasks' environment, local_env)
    # lands on its GenAI pages; this one opens the runs table.
    print(f"View run {run.info.run_name} ({status}) at: {ui_link(run.info.experiment_id, run_id)}")


FAILURE_TAG = reaper.FAILURE_TAG
#: One spark-submit's id, on the run it opens: how its Airflow task finds that run to close
#: it when the task is stopped (``plugins/spark_run.py``).
SUBMISSION_TAG = "balancebench.submission"


class TrackingUnreachable(RuntimeError):
    """The MLflow tracking server did not answer (its message is :func:`unreachable`'s
    line): nothing more can be logged or closed until it does."""


def unreachable(exc: BaseException) -> str | None:
    """One line naming the tracking server when ``exc`` is MLflow's client giving up on it
    (refused, timed out, or only server errors after its retries), else None."""
    if isinstance(exc, TrackingUnreachable):
        return str(exc)
    text = str(exc)
    # MLflow's REST client wraps every transport failure, after its retries, as
    # MlflowException("API request to <url> failed with ... exception ..."), unchained.
    # (An HTTP answer with an error code is the server answering: not this.)
    head = text.split(" failed with ", 1)
    if type(exc).__name__ != "MlflowException" or not text.startswith("API request to "):
        return None
    if len(head) < 2 or not head[1].startswith(("exception", "timeout exception")):
        return None
    if head[1].startswith("timeout"):
        why = "timed out"
    elif "Connection refused" in text or "NewConnectionError" in text:
        why = "connection refused"
    elif "too many 5" in text:
        why = "it answered only with server errors (HTTP 5xx)"
    else:
        why = "the connection failed"
    return f"the MLflow tracking server at {ui_url()} did not answer ({why})"


def stops_when_unreachable(main: Callable[..., int]) -> Callable[..., int]:
    """An application's ``main``: when the tracking server does not answer, it says so in
    one line on stderr and exits 1, without a traceback (the runs it opened are closed by
    the DAG step that comes next, or once the server answers again)."""

    @functools.wraps(main)
    def guarded(*args: Any, **kwargs: Any) -> int:
        try:
            return main(*args, **kwargs)
        except Exception as exc:
            line = unreachable(exc)
            if not line:
                raise
            print(f"balancebench: {line}; this application stops.", file=sys.stderr, flush=True)
            return 1

    return guarded


def failure_cause(exc: BaseException) -> str:
    """The first line of an exception, as a run's failure reason (tag ``FAILURE_TAG``): a
    storage fault in words (``no space left on <path>``), the tracking server that did not
    answer (:func:`unreachable`), else ``<type>: <first line>``, escaped and shortened."""
    if isinstance(exc, OSError) and (line := storage_error(exc)):
        return line
    if line := unreachable(exc):
        return line
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return terminal_safe(f"{type(exc).__name__}: {first}" if first else type(exc).__name__, 300)


def close_runs_of_dag_run(
    dag_id: str, run_id: str, status: str, cause: str, extra_filter: str = ""
) -> list[str]:
    """Close every RUNNING run of one DAG run (tags ``airflow.dag_id``, ``airflow.run_id``;
    ``extra_filter``: more MLflow filter terms, ANDed) as ``status`` with ``cause``: a
    FAILED run carries it as ``balancebench.failure``, a KILLED one as
    ``balancebench.killed_reason``, both in the description. Returns their ids.

    When the tracking server does not answer (:func:`unreachable`), the closing is kept in
    ``.local/pending-closes/`` and done by the next entry point that reaches the server
    (:func:`reap_orphans`); returns []."""
    try:
        return _close_runs_of_dag_run(dag_id, run_id, status, cause, extra_filter)
    except Exception as exc:
        if not unreachable(exc):
            raise
        entry = {
            "uri": tracking_uri(),
            "dag_id": dag_id,
            "run_id": run_id,
            "status": status,
            "cause": cause,
            "extra_filter": extra_filter,
            "at": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        }
        folder = _pending_closes_dir()
        folder.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns()}-{os.getpid()}.json"
        (folder / f".{name}").write_text(json.dumps(entry))
        (folder / f".{name}").replace(folder / name)  # whole or absent
        print(f"{unreachable(exc)}: closing the runs of {run_id} as {status} when it answers")
        return []


def _pending_closes_dir() -> Path:
    return local_dir() / "pending-closes"


def close_pending_runs() -> list[str]:
    """Do the closings :func:`close_runs_of_dag_run` kept while the tracking server did
    not answer (this store's only, oldest first: a step's FAILED with its cause comes
    before the KILLED of the DAG run's end); returns the ids it closed."""
    folder = _pending_closes_dir()
    closed: list[str] = []
    for path in sorted(folder.glob("[0-9]*.json")) if folder.is_dir() else []:
        try:
            entry = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if entry.get("uri") != tracking_uri():
            continue
        cause = f"{entry['cause']} (closed when the tracking server answered again)"
        closed += _close_runs_of_dag_run(
            entry["dag_id"], entry["run_id"], entry["status"], cause, entry["extra_filter"]
        )
        path.unlink(missing_ok=True)
    return closed


def _close_runs_of_dag_run(
    dag_id: str, run_id: str, status: str, cause: str, extra_filter: str
) -> list[str]:
    mlflow_client = client()
    experiments = [e.experiment_id for e in mlflow_client.search_experiments()]
    if not experiments:
        return []
    where = (
        f"attributes.status = 'RUNNING' AND tags.`airflow.dag_id` = '{dag_id}' "
        f"AND tags.`airflow.run_id` = '{run_id}'"
    )
    runs = mlflow_client.search_runs(
        experiments,
        filter_string=where + (f" AND {extra_filter}" if extra_filter else ""),
        max_results=5000,
    )
    tag = FAILURE_TAG if status == "FAILED" else reaper.REASON_TAG  # as the reaper does
    for run in runs:
        mlflow_client.set_tag(run.info.run_id, tag, cause)
        end_run(run.info.run_id, status, f"{status.lower()}: {cause}")
    return [run.info.run_id for run in runs]


def child_runs(parent_run_id: str) -> Any:
    """DataFrame of the parent's children (``mlflow.search_runs`` columns)."""
    mlflow = store()
    parent = mlflow.get_run(parent_run_id)
    return mlflow.search_runs(
        experiment_ids=[parent.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'",
        order_by=["start_time ASC"],
    )


def latest_parent_run(
    experiment: str, dag_id: str | None = None, started_ms: int = 0, role: str = "parent"
) -> Any | None:
    """The newest parent run (an ``mlflow.search_runs`` row) of the experiment, of
    ``dag_id`` if given, opened at or after ``started_ms``; None if there is none.
    ``role`` ``sweep``: a nightly_sweep's parent."""
    mlflow = store()
    exp = mlflow.get_experiment_by_name(experiment)
    if exp is None:
        return None
    where = [f"tags.`{ROLE_TAG}` = '{role}'", f"attributes.start_time >= {int(started_ms)}"]
    if dag_id is not None:
        where.append(f"tags.`airflow.dag_id` = '{dag_id}'")
    runs = mlflow.search_runs(
        experiment_ids=[exp.experiment_id],
        filter_string=" AND ".join(where),
        order_by=["start_time DESC"],
        max_results=1,
    )
    return None if runs.empty else runs.iloc[0]


def parent_run_of_invocation(experiment: str, invocation: str, role: str = "parent") -> str | None:
    """Id of the parent run (``role``) that the ``balancebench`` command ``invocation``
    opened (tag ``balancebench.invocation``): its own, whatever else started meanwhile."""
    mlflow = store()
    exp = mlflow.get_experiment_by_name(experiment)
    if exp is None:
        return None
    runs = mlflow.search_runs(
        experiment_ids=[exp.experiment_id],
        filter_string=(
            f"tags.`{ROLE_TAG}` = '{role}' AND tags.`{reaper.INVOCATION_TAG}` = '{invocation}'"
        ),
        max_results=2,
    )
    if len(runs) > 1:
        raise RuntimeError(f"invocation {invocation} opened {len(runs)} {role} runs")
    return None if runs.empty else str(runs.iloc[0]["run_id"])


def ui_url() -> str:
    """Where the MLflow UI of this store is served (links in reports): the tracking URI
    when it is a server, else ``BALANCEBENCH_MLFLOW_UI`` or the default 127.0.0.1:5000."""
    uri = tracking_uri()
    if uri.startswith(("http://", "https://")):
        return uri.rstrip("/")
    return setting("BALANCEBENCH_MLFLOW_UI")


# MLflow 3.17's UI opens an experiment on its GenAI pages (traces, tokens, cost) unless this
# browser last chose "Model training", a choice it keeps in localStorage: it reads the
# workflow from there, not from the experiment's kind tag (KIND_TAG). The URL's
# ``workflowType`` wins over the stored choice, so every link we print carries it.
MODEL_TRAINING_VIEW = "workflowType=machine_learning"


#: The runs table's view as balancebench's links open it, saved the way MLflow's own
#: "Share" button saves one: an experiment tag ``mlflow.sharedViewState.<key>`` holding the
#: view's JSON, opened by ``?viewStateShareKey=<key>`` (:func:`ui_link`). Its columns: each
#: run's description (a parent's leads with the answer in words) and, per headline figure,
#: each strategy's ratio to the baseline with its interval's ends (a cell run's metrics;
#: the verdict tags' columns did not show in MLflow 3.17's table, seen in the browser test).
#: The user's own column choices are untouched; an experiment opened from MLflow's list
#: shows MLflow's defaults.
RUNS_VIEW_KEY = "balancebench-verdicts"
SHARED_VIEW_TAG = "mlflow.sharedViewState."


def runs_table_view() -> str:
    """The JSON of :data:`RUNS_VIEW_KEY`'s view (MLflow 3.17's ``selectedColumns`` keys:
    ``<kind>.`<name>```)."""
    columns = ["attributes.`Description`", "attributes.`Duration`"]
    columns += [f"metrics.`{f}_ratio{end}`" for f in VERDICT_FIGURES for end in ("", "_lo", "_hi")]
    return json.dumps({"selectedColumns": columns})


def ui_link(experiment_id: str | None = None, run_id: str | None = None) -> str:
    """The MLflow UI page of a run, of an experiment's runs table (in the verdicts' view,
    :data:`RUNS_VIEW_KEY`), or of the experiment list, on its model-training pages."""
    page = "experiments"
    query = MODEL_TRAINING_VIEW
    if experiment_id is not None:
        page += f"/{experiment_id}/runs" + (f"/{run_id}" if run_id else "")
        if run_id is None:
            query += f"&viewStateShareKey={RUNS_VIEW_KEY}"
    return f"{ui_url()}/#/{page}?{query}"
