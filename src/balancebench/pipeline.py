"""The steps of the four DAGs (``balance_experiment``, ``generate_dataset``,
``model_experiment``, ``nightly_sweep``) as plain functions (no Airflow import).

The DAG files only wire these together; each is testable without Airflow. What a
generate step hands the later steps is one shape for every DAG, :class:`Generated`, passed
as its JSON form (an Airflow XCom). A step that raises closes the runs of its DAG run
still RUNNING as FAILED with the cause (``ends_runs_on_failure``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from balancebench import reaper, tracking
from balancebench.compare import (
    BATCH_PREFIX,
    SERIES,
    TABLE_METRICS,
    comparison_figure,
    comparison_table,
)
from balancebench.experiment import APPLICATION_TAG, GroupSpec, RunSpec
from balancebench.experiment_params import (
    ExperimentSpec,
    applicable_params,
    validate_dataset_params,
)
from balancebench.generators import generate, generator_params
from balancebench.paths import datasets_dir, results_dir, validation_dir
from balancebench.validation import ValidationReport, validate_dataset

Step = TypeVar("Step", bound=Callable[..., Any])


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A written (or reused) dataset: its folder, digest and rows per table."""

    dir: str
    digest: str
    rows: dict[str, int]

    @classmethod
    def of(cls, folder: Path | str, manifest: Any) -> Dataset:
        rows = {t: int(f["rows"]) for t, f in manifest.tables.items()}
        return cls(str(folder), manifest.digest, rows)


@dataclasses.dataclass(frozen=True)
class Generated:
    """What every DAG's generate step hands its later steps (one shape for the four DAGs),
    over XCom as its JSON form (:meth:`to_xcom`, :meth:`from_xcom`).

    ``params`` are the DAG's Params checked at the door (for ``balance_experiment`` an
    :class:`ExperimentSpec`'s JSON form, :attr:`spec`); ``run`` is the MLflow run the
    later steps log to (the parent, the dataset's run, the sweep's); ``datasets`` the
    datasets written, by key (one DAG's dataset, or one per (dataset, zipf_s) of a sweep);
    ``cells`` a sweep's cells' experiment specs by label, checked once here."""

    dag_id: str
    run_id: str
    run: str
    params: dict[str, Any]
    datasets: dict[str, Dataset]
    cells: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    expected_children: int = 0

    def to_xcom(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_xcom(cls, data: dict[str, Any]) -> Generated:
        datasets = {k: Dataset(**d) for k, d in data["datasets"].items()}
        return cls(**{**data, "datasets": datasets})

    @property
    def dataset(self) -> Dataset:
        """The DAG's one dataset (every DAG but the sweep has one)."""
        (only,) = self.datasets.values()
        return only

    @property
    def spec(self) -> ExperimentSpec:
        """``balance_experiment``'s checked Params."""
        return ExperimentSpec.from_json(self.params)

    def cell_spec(self, label: str) -> ExperimentSpec:
        """A sweep cell's checked Params."""
        return ExperimentSpec.from_json(self.cells[label])


def ends_runs_on_failure(step: Step) -> Step:
    """A DAG task's step: an entry point, so it first closes what dead commands left
    behind (``tracking.reap_orphans``). A step that raises closes the runs of its DAG run
    that are still RUNNING as FAILED, with the first line of the real cause, then
    re-raises: no run is left RUNNING for the next command to close with a guessed
    reason. The DAG run is ``(dag_id, run_id)`` from the step's arguments (a generate
    step) or from the ``generated`` dict it receives."""

    @functools.wraps(step)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            tracking.reap_orphans()
            return step(*args, **kwargs)
        except Exception as exc:
            found = [a for a in args if isinstance(a, dict) and "run_id" in a]
            ids = (found[0]["dag_id"], found[0]["run_id"]) if found else args[1:3]
            if len(ids) == 2 and all(isinstance(i, str) for i in ids):
                with contextlib.suppress(Exception):  # the store may be what failed
                    tracking.close_runs_of_dag_run(
                        ids[0], ids[1], "FAILED", tracking.failure_cause(exc)
                    )
            raise

    return guarded  # type: ignore[return-value]


@ends_runs_on_failure
def generate_step(params: dict[str, Any], dag_id: str, run_id: str) -> dict[str, Any]:
    """The door: check the Params (:meth:`ExperimentSpec.checked`, the combination of
    workload, dataset and strategies too), write (or reuse) the dataset, open the MLflow
    parent run. Returns the :class:`Generated` hand-off's JSON form."""
    p = ExperimentSpec.checked(params)
    name = f"{p['workload']} · {', '.join(p['strategies'])} · s={p['zipf_s']:g} · N={p['n_nodes']}"
    description = (
        f"{dag_id} {run_id}: {p['workload']} on dataset {p['dataset']} (zipf_s {p['zipf_s']:g}, "
        f"{p['n_tuples']} tuples, seed {p['seed']}), {p['n_batches']} micro-batches on "
        f"{p['n_nodes']} nodes; strategies {', '.join(p['strategies'])} in paired, rotated "
        f"rounds ({p['min_rounds']} to {p['max_rounds']}) in one Spark application. One child "
        "per strategy (its rounds' figures as steps, one run per round under it); the "
        "comparison (comparison.csv/png) and the verdicts against the baseline "
        "(verdicts.csv) are added when the run ends."
    )
    dataset_dir, manifest, parent = _open_parent(
        p.dataset,
        p,
        applicable_params(p, list(p.strategies)),
        dag_id,
        run_id,
        run_name=f"{name} ({run_id})",
        description=description,
    )
    client = tracking.client()
    for name, value in tracking.dataset_metrics(manifest).items():
        client.log_metric(parent, name, value)
    datasets = {p.dataset: Dataset.of(dataset_dir, manifest)}
    return Generated(dag_id, run_id, parent, p.to_json(), datasets).to_xcom()


def _open_parent(
    dataset: str,
    p: Mapping[str, Any],
    logged_params: dict[str, Any],
    dag_id: str,
    run_id: str,
    run_name: str | None = None,
    description: str | None = None,
) -> tuple[Path, Any, str]:
    """Write (or reuse) the seeded dataset, open the MLflow parent run tagged with its
    digest and attach its manifest; returns (dataset_dir, manifest, parent_run_id)."""
    dataset_dir, manifest = generate(dataset, datasets_dir(), generator_params(dataset, p))
    parent = tracking.start_parent_run(
        p["experiment"], logged_params, dag_id, run_id, manifest.digest, run_name, description
    )
    tracking.client().log_artifact(parent, str(Path(dataset_dir) / "manifest.json"), "dataset")
    return Path(dataset_dir), manifest, parent


@ends_runs_on_failure
def generate_dataset_step(params: dict[str, Any], dag_id: str, run_id: str) -> dict[str, Any]:
    """The ``generate_dataset`` DAG's first step: check Params, write (or reuse) the
    dataset, and open an MLflow run (role ``dataset``) carrying its params and manifest."""
    p = validate_dataset_params(params)
    dataset_dir, manifest = generate(
        p["dataset"], datasets_dir(), generator_params(p["dataset"], p)
    )
    run = tracking.start_dataset_run(p["experiment"], p, dag_id, run_id, dataset_dir, manifest)
    datasets = {p["dataset"]: Dataset.of(dataset_dir, manifest)}
    return Generated(dag_id, run_id, run, p, datasets).to_xcom()


@ends_runs_on_failure
def validate_dataset_step(generated: dict[str, Any]) -> ValidationReport:
    """GX suites of a generated dataset; result and outcome logged to its MLflow run,
    which ends FINISHED or FAILED."""
    g = Generated.from_xcom(generated)
    run = g.run
    report = validate_dataset(
        g.dataset.dir,
        validation_dir() / f"{run}.json",
        {"zipf_fit_tolerance": g.params["zipf_fit_tolerance"]},
    )
    tracking.log_validation(run, report)
    tracking.end_run(run, "FINISHED" if report.success else "FAILED", report.message())
    return report


@ends_runs_on_failure
def validate_step(generated: dict[str, Any]) -> ValidationReport:
    """Run the GX suites; the full result goes to ``.local/validation`` and to MLflow."""
    g = Generated.from_xcom(generated)
    parent = g.run
    report = validate_dataset(
        g.dataset.dir,
        validation_dir() / f"{parent}.json",
        {"zipf_fit_tolerance": g.params["zipf_fit_tolerance"]},
    )
    tracking.log_validation(parent, report)
    if not report.success:
        tracking.end_run(parent, "FAILED", report.message())
    return report


def open_cell_run(
    client: Any,
    experiment_id: str,
    parent: str,
    g: Generated,
    label: str,
    params: dict[str, Any],
    tags: dict[str, str] | None = None,
) -> str:
    """A cell's MLflow run (role ``cell``, child of ``parent``): its rounds' runs go under
    it, and its rounds' figures on it. Returns its id."""
    run = client.create_run(
        experiment_id,
        run_name=label,
        tags={
            tracking.ROLE_TAG: "cell",
            "airflow.dag_id": g.dag_id,
            "airflow.run_id": g.run_id,
            "mlflow.parentRunId": parent,
            **(tags or {}),
            **reaper.owner_tags(),
        },
    )
    run_id = run.info.run_id
    tracking.log_params(client, run_id, params)
    tracking.log_metric_definitions(run_id)
    return str(run_id)


def group_budget_s(params: Mapping[str, Any], groups: int) -> float:
    """The wall seconds a cell group may spend on rounds: its share of
    ``max_estimated_hours`` (a sweep's groups share it evenly)."""
    return float(params["max_estimated_hours"]) * 3600.0 / max(1, groups)


@ends_runs_on_failure
def submit_args(generated: dict[str, Any], concurrency: int = 1) -> list[dict[str, Any]]:
    """Open one MLflow run per strategy (its *cell*, child of the parent) and return the
    one ``spark_apps/run_workload.py`` submission that runs the strategies in paired,
    rotated rounds in one Spark application (mapped task input: ``application_args`` and
    ``name``)."""
    from balancebench.rounds import RoundPolicy

    g = Generated.from_xcom(generated)
    spec = g.spec
    client = tracking.client()
    experiment_id = tracking.ensure_experiment(spec.experiment)
    submission = uuid.uuid4().hex
    cells = []
    for s in spec.strategies:
        cell_run = open_cell_run(
            client,
            experiment_id,
            g.run,
            g,
            s,
            {
                **applicable_params(spec, [s]),
                "strategy": s,
                "dataset_digest": g.dataset.digest,
                "timed_concurrency": concurrency,
            },
        )
        cells.append(
            RunSpec(
                dataset_dir=g.dataset.dir,
                strategy=s,
                params=spec,
                parent_run_id=cell_run,
                dag_id=g.dag_id,
                dag_run_id=g.run_id,
                run_name=s,
                tags={tracking.SUBMISSION_TAG: submission},
                concurrency=concurrency,
            )
        )
    policy = RoundPolicy.of_params(spec, budget_s=group_budget_s(spec, 1))
    label = f"{spec['workload']} · s={spec['zipf_s']:g} · N={spec['n_nodes']}"
    out = results_dir() / g.run
    group = GroupSpec(label, tuple(cells), policy, str(out))
    name = f"{len(cells)} strategies in rounds ({policy.min_rounds}-{policy.max_rounds})"
    return [{"application_args": GroupSpec.write([group], out / "groups.json"), "name": name}]


#: What the comparison of a balance_experiment run summarises over its rounds.
def _compared_metrics() -> list[str]:
    from balancebench.regression import TIMED
    from balancebench.rounds import VERDICT_FIGURES

    return list(dict.fromkeys([*TABLE_METRICS, *TIMED, *VERDICT_FIGURES]))


@ends_runs_on_failure
def compare_step(generated: dict[str, Any]) -> tuple[bool, str]:
    """Per strategy: the mean and Student-t interval of every figure over its finished
    rounds (on its cell run, which is closed); the verdicts of each strategy against the
    baseline on the paired rounds (``balancebench.stats``: tags ``verdict.<strategy>.
    <figure>`` on the parent, ``verdict.<figure>`` and ``<figure>_ratio`` on the cell);
    the comparison table (CSV), the verdicts (CSV) and the figure (PNG) on the parent,
    which is closed.

    Returns ``(complete, text)``: ``complete`` is False when a strategy has fewer finished
    rounds than ``min_rounds`` (its Spark run failed); the parent is then closed FAILED."""
    import pandas as pd
    from mlflow.entities import Metric

    from balancebench.experiment import ROUNDS_STOPPED_TAG
    from balancebench.round_runs import experiment_comparison

    g = Generated.from_xcom(generated)
    parent = g.run
    client = tracking.client()
    p = g.params
    found = experiment_comparison(parent, p, _compared_metrics())
    expected = list(g.spec.strategies)
    short = [
        f"{s}: {len(found.rounds.get(s, {}))} of at least {p['min_rounds']} rounds"
        for s in expected
        if len(found.rounds.get(s, {})) < p["min_rounds"]
    ]
    now = int(time.time() * 1000)
    for s, run in found.cell_runs.items():
        cols = found.columns[s]
        client.log_batch(run, metrics=[Metric(k, v, now, 0) for k, v in cols.items() if v == v])
        for row in (r for r in found.rows if r.strategy == s):
            client.set_tag(run, f"verdict.{row.figure}", row.verdict.text())
            if row.verdict.ratio is not None:
                ratio = row.verdict.ratio
                client.log_batch(
                    run,
                    metrics=[
                        Metric(f"{row.figure}_ratio", ratio.estimate, now, 0),
                        Metric(f"{row.figure}_ratio_lo", ratio.lo, now, 0),
                        Metric(f"{row.figure}_ratio_hi", ratio.hi, now, 0),
                    ],
                )
        stopped = client.get_run(run).data.tags.get(ROUNDS_STOPPED_TAG, "")
        failed = any(x.startswith(f"{s}:") for x in short)
        tracking.end_run(
            run,
            "FAILED" if failed else "FINISHED",
            f"{len(found.rounds[s])} rounds ({stopped or 'not run'})",
        )
    if not any(found.rounds.values()):
        tracking.end_run(parent, "FAILED", f"no strategy finished a round; {short}")
        return False, f"no strategy finished a round: {short}"
    table = comparison_table(found.columns, found.cell_runs)
    out = results_dir() / parent
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "comparison.csv"
    table.to_csv(csv, index=False)
    verdicts = out / "verdicts.csv"
    pd.DataFrame([r.as_dict() for r in found.rows]).to_csv(verdicts, index=False)
    history = {s: {m: _round_history(client, found, s, m) for m in SERIES} for s in found.cell_runs}
    title = (
        f"{p['workload']} on {p['dataset']}: zipf_s {p['zipf_s']:g}, {p['n_tuples']} tuples, "
        f"{p['n_batches']} batches, N = {p['n_nodes']}, seed {p['seed']}; mean over the "
        f"rounds (parent run {parent[:8]}, {g.run_id})"
    )
    png = comparison_figure(table, history, out / "comparison.png", title)
    for path in (csv, verdicts, png):
        client.log_artifact(parent, str(path))
    _log_parent_summary(client, parent, table, found.rows)
    text = found.verdict_text()
    if short:
        tracking.end_run(parent, "FAILED", f"strategies short of their rounds: {short}")
        return False, text
    tracking.end_run(parent, "FINISHED", f"Verdicts on the paired rounds:\n{text}")
    return True, text


def _log_parent_summary(client: Any, parent: str, table: Any, rows: list[Any]) -> None:
    """Each strategy's mean headline figures on the parent (``<metric>.<strategy>``) and
    every verdict (tag ``verdict.<strategy>.<figure>``), so the parent row says who is
    faster by how much, and how sure."""
    from mlflow.entities import Metric

    from balancebench.regression import TIMED

    means = table.set_index("strategy")
    metrics = [
        Metric(f"{m}.{s}", float(means.loc[s, m]), 0, 0)
        for m in TIMED
        for s in means.index
        if m in means and means.loc[s, m] == means.loc[s, m]  # not NaN
    ]
    client.log_batch(parent, metrics=metrics)
    for row in rows:
        client.set_tag(parent, f"verdict.{row.strategy}.{row.figure}", row.verdict.text())


def _round_history(client: Any, found: Any, strategy: str, metric: str) -> tuple[list, list]:
    """A per-batch series of a strategy, the mean over its finished rounds per batch."""
    from balancebench.round_runs import finished_rounds

    per_step: dict[int, list[float]] = {}
    for _, run in finished_rounds(found.cell_runs[strategy]).iterrows():
        for m in client.get_metric_history(run["run_id"], BATCH_PREFIX + metric):
            per_step.setdefault(m.step, []).append(m.value)
    steps = sorted(per_step)
    return steps, [sum(per_step[k]) / len(per_step[k]) for k in steps]


# ---- model_experiment DAG (papers 001-004 models) ------------------------------------


@ends_runs_on_failure
def model_generate_step(params: dict[str, Any], dag_id: str, run_id: str) -> dict[str, Any]:
    """Check the sweep Params, write (or reuse) the model's dataset, open the parent run."""
    from balancebench.models import get_model
    from balancebench.models.model_sweep import grid_points, sweep_params, validate_model_params

    p = validate_model_params(params)
    dataset = get_model(p["model"]).dataset
    dataset_dir, manifest, parent = _open_parent(dataset, p, sweep_params(p), dag_id, run_id)
    tracking.client().set_tag(parent, "model", p["model"])
    return Generated(
        dag_id,
        run_id,
        parent,
        p,
        {dataset: Dataset.of(dataset_dir, manifest)},
        expected_children=len(p["strategies"]) * len(grid_points(p["grid"])),
    ).to_xcom()


def model_submit_args(generated: dict[str, Any]) -> list[str]:
    """The ``spark_apps/run_model_sweep.py`` arguments of the sweep."""
    from balancebench.model_experiment import ModelSweepSpec

    g = Generated.from_xcom(generated)
    return ModelSweepSpec(
        dataset_dir=g.dataset.dir,
        params=g.params,
        parent_run_id=g.run,
        dag_id=g.dag_id,
        dag_run_id=g.run_id,
    ).to_args()


@ends_runs_on_failure
def model_compare_step(generated: dict[str, Any]) -> tuple[bool, str]:
    """Close the parent: FINISHED when every (strategy, point) has a finished child."""
    g = Generated.from_xcom(generated)
    parent = g.run
    children = tracking.child_runs(parent)
    finished = children[children["status"] == "FINISHED"] if len(children) else children
    expected = g.expected_children
    if len(finished) < expected:
        text = f"{len(finished)} of {expected} (strategy, point) runs finished"
        tracking.end_run(parent, "FAILED", text)
        return False, text
    from balancebench.models.model_sweep import REPETITION_SUFFIXES

    cols = ["tags.mlflow.runName"] + sorted(
        c
        for c in finished.columns
        if c.startswith("metrics.") and not c.endswith(REPETITION_SUFFIXES)
    )
    text = finished[cols].to_string(index=False)
    tracking.end_run(parent, "FINISHED")
    return True, text


# ---- nightly_sweep DAG ------------------------------------------------------------------

CELL_TAG, SWEEP_TAG, CELL_KEY_TAG = (
    "balancebench.cell",
    "balancebench.sweep_grid",
    "balancebench.cell_key",
)


@ends_runs_on_failure
def sweep_generate_step(params: dict[str, Any], dag_id: str, run_id: str) -> dict[str, Any]:
    """The door of a sweep: check its Params and every cell's (``checked_sweep``), write
    (or reuse) one dataset per (dataset, zipf_s) of the grid and open the sweep's MLflow
    parent run (role ``sweep``). Returns the :class:`Generated` hand-off's JSON form, the
    cells' checked specs in it."""
    from balancebench.sweep_grid import cells, checked_sweep

    p, specs = checked_sweep(params)
    found = cells(p["grid"])
    datasets: dict[str, Dataset] = {}
    for cell in found:
        spec = specs[cell.label]
        key = _dataset_key(spec)
        if key not in datasets:
            folder, manifest = generate(
                spec.dataset, datasets_dir(), generator_params(spec.dataset, spec)
            )
            datasets[key] = Dataset.of(folder, manifest)
    grid = p["grid"]
    description = (
        f"{dag_id} {run_id}: {len(found)} cells ({' x '.join(_grid_text(grid))}) x "
        f"{p['repetitions']} repetitions, {p['n_tuples']} tuples, seed {p['seed']}. One child "
        "per cell (mean, std and bootstrap 95% CI over its repetitions), one run per "
        "repetition under it. The report (report.html) shows the CIs, the winners where "
        "they separate, and the regression check per cell."
    )
    logged = {
        "grid": grid,
        "repetitions": p["repetitions"],
        **{k: v for k, v in p.items() if k in ("n_tuples", "seed", "n_batches", "experiment")},
    }
    parent = tracking.start_parent_run(
        p["experiment"],
        logged,
        dag_id,
        run_id,
        ",".join(sorted({d.digest for d in datasets.values()})),
        run_name=f"{_sweep_name(p)} · {len(found)} cells x {p['repetitions']} ({run_id})",
        description=description,
        role="sweep",
    )
    cell_specs = {label: spec.to_json() for label, spec in specs.items()}
    return Generated(dag_id, run_id, parent, p, datasets, cell_specs).to_xcom()


def _dataset_key(spec: ExperimentSpec) -> str:
    """A sweep's datasets are one per (dataset, zipf_s)."""
    return f"{spec.dataset}@{spec['zipf_s']:g}"


def _sweep_name(params: dict[str, Any]) -> str:
    """``nightly sweep``, or the paper figure the sweep draws."""
    figure = params.get("figure", "none")
    return "nightly sweep" if figure == "none" else f"paper 000 Fig. {figure}"


def _grid_text(grid: dict[str, list[Any]]) -> list[str]:
    axes = ("workloads", "strategies", "zipf_s", "n_nodes", "tolerance")
    return [f"{axis} {grid[axis]}" for axis in axes if axis in grid]


@ends_runs_on_failure
def sweep_validate_step(generated: dict[str, Any]) -> ValidationReport:
    """The GX suites of every dataset of the sweep; the first failure stops the sweep."""
    g = Generated.from_xcom(generated)
    parent = g.run
    tolerance = {"zipf_fit_tolerance": g.params["zipf_fit_tolerance"]}
    report = None
    for key, data in sorted(g.datasets.items()):
        name = key.replace("@", "-s")
        report = validate_dataset(data.dir, validation_dir() / f"{parent}-{name}.json", tolerance)
        tracking.client().log_artifact(parent, str(report.result_path), f"validation/{name}")
        if not report.success:
            tracking.end_run(parent, "FAILED", f"dataset {key}: {report.message()}")
            return report
    tracking.client().set_tag(parent, "validation", "passed")
    assert report is not None
    return report


#: How a sweep's runs are measured, part of a cell's history key: one Spark application per
#: workload and node count, its cell groups' datasets loaded in turn, each group's runs in
#: rotated order (earlier sweeps ran one application per cell group, and before that one
#: per run).
MEASURED_IN = "one application per workload and N, datasets in turn, rotated"
#: Added to it where an application has several tolerances: since 2026-11-27 the cell
#: groups of one dataset that differ only in the tolerance share its load
#: (``experiment.RUN_ONLY_PARAMS``), so their runs' positions on it moved.
SHARED_TOLERANCES = ", tolerance groups sharing a load"


@ends_runs_on_failure
def sweep_submissions(generated: dict[str, Any], concurrency: int = 1) -> list[dict[str, Any]]:
    """Open one MLflow run per cell (child of the sweep) and return one spark-submit per
    application (``Cell.application``: one workload and node count): its cell groups
    (``Cell.group``: the cells that differ only in the strategy, on one dataset) one after
    another, each group's cells' repetitions in rotated order (round r starts at the r-th
    strategy, ``experiment.rotated_rounds``), each a ``RunSpec`` like
    ``balance_experiment``'s whose run is a child of its cell."""
    import hashlib
    import json

    from balancebench.experiment import rotated_rounds
    from balancebench.sweep_grid import application_label, cells

    g = Generated.from_xcom(generated)
    p, parent = g.params, g.run
    mlflow = tracking.store()
    client = mlflow.MlflowClient()
    experiment_id = tracking.ensure_experiment(p["experiment"])
    groups: dict[str, dict[str, Any]] = {}
    grid_cells = cells(p["grid"])
    # Per application, what its runs share: the strategies and the cell groups.
    shares: dict[str, dict[str, list[str]]] = {}
    tolerances: dict[str, set[float]] = {}
    specs = {cell.label: g.cell_spec(cell.label) for cell in grid_cells}  # built once
    for cell in grid_cells:
        share = shares.setdefault(cell.application, {"strategies": [], "cell_groups": []})
        for key, value in (("strategies", cell.strategy), ("cell_groups", cell.group)):
            if value not in share[key]:
                share[key].append(value)
        tolerances.setdefault(cell.application, set()).add(specs[cell.label].tolerance)
    for cell in grid_cells:
        cp = specs[cell.label]
        data = g.datasets[_dataset_key(cp)]
        applies = applicable_params(cp, [cell.strategy])
        # Same key = comparable history: same cell, same Params (n_tuples, seed, ...),
        # measured the same way: a run's position in its application moves its timings
        # (the report's position check), so the application's strategies and repetitions
        # are part of the key.
        shared_load = len(tolerances[cell.application]) > 1
        keyed = {
            **applies,
            "measured_in": MEASURED_IN + (SHARED_TOLERANCES if shared_load else ""),
            "application": {**shares[cell.application], "repetitions": p["repetitions"]},
        }
        key = hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:16]
        tags = {
            tracking.ROLE_TAG: "cell",
            CELL_TAG: cell.label,
            CELL_KEY_TAG: key,
            SWEEP_TAG: parent,
            "airflow.dag_id": g.dag_id,
            "airflow.run_id": g.run_id,
            "mlflow.parentRunId": parent,
        }
        run = client.create_run(
            experiment_id, run_name=cell.label, tags={**tags, **reaper.owner_tags()}
        )
        cell_run = run.info.run_id
        tracking.log_params(
            client,
            cell_run,
            {
                **applies,
                "strategy": cell.strategy,
                "repetitions": p["repetitions"],
                "dataset_digest": data.digest,
                "timed_concurrency": concurrency,
            },
        )
        tracking.log_metric_definitions(cell_run)
        slow = p["test_slow_plan_work_ms"] if p["test_slow_cell"] == cell.label else 0.0
        group = groups.setdefault(
            cell.application, {"cells": {}, "by_group": {}, "submission": uuid.uuid4().hex}
        )
        group["by_group"].setdefault(cell.group, []).append(cell)
        # The cell's runs differ in their repetition only (repetition_spec).
        group["cells"][cell.label] = RunSpec(
            dataset_dir=data.dir,
            strategy=cell.strategy,
            params=cp,
            parent_run_id=cell_run,
            dag_id=g.dag_id,
            dag_run_id=g.run_id,
            run_name=cell.label,
            tags={
                tracking.ROLE_TAG: "repetition",
                CELL_TAG: cell.label,
                CELL_KEY_TAG: key,
                SWEEP_TAG: parent,
                # One per application: a stopped task closes all the runs it opened.
                tracking.SUBMISSION_TAG: group["submission"],
            },
            concurrency=concurrency,
            plan_extra_work_ms=float(slow),
        )
    out = []
    for k, group in enumerate(groups.values(), 1):
        reps: dict[str, int] = dict.fromkeys(group["cells"], 0)
        specs = []
        label = application_label(c for cs in group["by_group"].values() for c in cs)
        name = f"application {k} of {len(groups)}: {label} ({p['repetitions'] * len(reps)} runs)"
        for cell_group in group["by_group"].values():
            for cell_label in rotated_rounds([c.label for c in cell_group], p["repetitions"]):
                specs.append(
                    _repetition_spec(group["cells"][cell_label], reps[cell_label], parent, name)
                )
                reps[cell_label] += 1
        path = results_dir() / parent / "groups" / f"group-{k}.json"
        out.append({"application_args": RunSpec.group_args(specs, path), "name": name})
    return out


def _repetition_spec(cell: RunSpec, rep: int, sweep: str, application: str) -> RunSpec:
    """Repetition ``rep`` (from 0) of a cell's run, in Spark application ``application``
    (its task's name)."""
    return dataclasses.replace(
        cell,
        result_path=str(results_dir() / sweep / f"{cell.parent_run_id}-rep{rep}.json"),
        run_name=f"{cell.run_name} · rep {rep + 1}",
        tags={**cell.tags, "balancebench.repetition": str(rep), APPLICATION_TAG: application},
    )


def _cell_history(experiment_id: str, key: str, sweep: str) -> Any:
    """Finished repetition runs of the same cell key in earlier sweeps, oldest first."""
    mlflow = tracking.store()
    return mlflow.search_runs(
        experiment_ids=[experiment_id],
        filter_string=(
            f"tags.`{CELL_KEY_TAG}` = '{key}' AND tags.`{tracking.ROLE_TAG}` = 'repetition' "
            f"AND tags.`{SWEEP_TAG}` != '{sweep}' AND attributes.status = 'FINISHED'"
        ),
        order_by=["attributes.start_time ASC"],
    )


@ends_runs_on_failure
def sweep_summarize_step(generated: dict[str, Any]) -> dict[str, Any]:
    """Per cell: mean, std and bootstrap CI of every headline figure over its finished
    repetitions (on the cell's run); the regression check against the cell's history
    (``balancebench.regression``), tagged on the runs; the report page; the parent closed.
    Returns the regressed cells, the changed deterministic figures and what is missing."""
    import pandas as pd

    from balancebench import regression
    from balancebench.compare import headline_metrics, logged_name
    from balancebench.experiment import DATASET_RUN_INDEX_TAG, PROGRESS, RUN_INDEX_TAG
    from balancebench.paper000 import FIGURE_COMPONENTS, FIGURE_METRICS, draw_figure, get_figure
    from balancebench.paths import reports_dir
    from balancebench.report import (
        CORE_WAIT_METRIC,
        HARNESS_METRIC,
        POSITION_METRIC,
        cell_check,
        measurement_lines,
        text_summary,
        write_report,
    )
    from balancebench.stats import repetition_stats
    from balancebench.sweep_grid import cells

    g = Generated.from_xcom(generated)
    p, parent = g.params, g.run
    mlflow = tracking.store()
    client = mlflow.MlflowClient()
    experiment_id = tracking.ensure_experiment(p["experiment"])
    cell_runs = tracking.child_runs(parent)
    by_label = {r["tags.mlflow.runName"]: r["run_id"] for _, r in cell_runs.iterrows()}
    rows, regressed, changes, incomplete = [], [], [], []
    checks = {}
    measured_runs = []
    headline = headline_metrics()
    for cell in cells(p["grid"]):
        run_id = by_label[cell.label]
        key = client.get_run(run_id).data.tags[CELL_KEY_TAG]
        children = tracking.child_runs(run_id)
        done = children[children["status"] == "FINISHED"] if len(children) else children
        row: dict[str, Any] = {
            "label": cell.label,
            "workload": cell.workload,
            "strategy": cell.strategy,
            "zipf_s": cell.zipf_s,
            "n_nodes": cell.n_nodes,
            "tolerance": p["tolerance"] if cell.tolerance is None else cell.tolerance,
            "run_id": run_id,
            "repetitions_finished": float(len(done)),
            "regressed": False,
        }
        if len(done) and f"tags.{RUN_INDEX_TAG}" in done:
            measured_runs.append(
                pd.DataFrame(
                    {
                        "cell": cell.label,
                        "run_index": done[f"tags.{RUN_INDEX_TAG}"].astype(float),
                        "dataset_run_index": done.get(
                            f"tags.{DATASET_RUN_INDEX_TAG}", pd.Series(float("nan"), done.index)
                        ).astype(float),
                        **{
                            m: done.get(f"metrics.{m}")
                            for m in (POSITION_METRIC, HARNESS_METRIC, CORE_WAIT_METRIC)
                            if f"metrics.{m}" in done
                        },
                    }
                )
            )
        metrics = {"repetitions_finished": float(len(done))}
        for m in dict.fromkeys(
            [*regression.TIMED, *regression.EXACT, *FIGURE_METRICS, *FIGURE_COMPONENTS]
        ):
            col = f"metrics.{logged_name(m, headline)}"
            values = [float(v) for v in done[col].dropna()] if col in done else []
            if values:
                for stat, value in repetition_stats(values).items():
                    if stat != "n":
                        metrics[f"{m}_{stat}"] = value
        row.update(metrics)
        client.log_batch(
            run_id, metrics=[mlflow.entities.Metric(k, v, 0, 0) for k, v in metrics.items()]
        )
        if len(done) < p["repetitions"]:
            incomplete.append(f"{cell.label}: {len(done)} of {p['repetitions']} repetitions")
        history = _cell_history(experiment_id, key, parent) if len(done) else pd.DataFrame()
        verdicts = []
        for m, direction in regression.TIMED.items():
            if f"{m}_mean" not in metrics or m not in p["regression_metrics"]:
                continue
            col = f"metrics.{m}"
            past = history[col].dropna().tolist() if len(history) and col in history else []
            tonight = done[col].dropna().tolist()
            verdicts.append(regression.judge(m, past, metrics[f"{m}_mean"], direction, tonight))
        checks[cell.label] = cell_check(verdicts, history)
        row["earlier_runs"] = float(len(history))
        bad = [v for v in verdicts if v.regressed]
        if bad:
            row["regressed"] = True
            regressed += [f"{cell.label}: {v.text()}" for v in bad]
        changed = _exact_changes(done, history)
        changes += [f"{cell.label}: {c}" for c in changed]
        client.set_tag(run_id, "regression", "yes" if bad else "no")
        client.set_tag(run_id, "regressed_metrics", ",".join(v.metric for v in bad) or "-")
        client.set_tag(run_id, "changed_exact_figures", "; ".join(changed) or "-")
        note = "\n".join(v.text() for v in verdicts)
        tracking.end_run(
            run_id, "FINISHED" if len(done) == p["repetitions"] else "FAILED", note or None
        )
        rows.append(row)
    table = pd.DataFrame(rows)
    measured = measurement_lines(pd.concat(measured_runs) if measured_runs else pd.DataFrame())
    # The sweep's wall time so far: from its parent run's start (the generate step) to now.
    wall_s = time.time() - client.get_run(parent).info.start_time / 1000
    finished = int(sum(row["repetitions_finished"] for row in rows))
    measured.insert(0, f"sweep wall time: {wall_s / 60:.1f} min for {finished} finished runs")
    for line in measured:
        print(f"{PROGRESS} {line}", flush=True)
    title = f"{_sweep_name(p)} {g.run_id} (parent run {parent[:8]})"
    html_path = write_report(
        table,
        regressed,
        changes,
        title,
        lambda rid: tracking.ui_link(experiment_id, rid),
        reports_dir() / f"{parent}.html",
        checks,
        measured,
    )
    text = text_summary(table, regressed, changes, checks, measured)
    (reports_dir() / f"{parent}.txt").write_text(text + "\n", encoding="utf-8")
    table.to_csv(reports_dir() / f"{parent}.csv", index=False)
    client.log_artifact(parent, str(html_path), "report")
    client.log_artifact(parent, str(reports_dir() / f"{parent}.txt"), "report")
    client.log_artifact(parent, str(reports_dir() / f"{parent}.csv"), "report")
    client.set_tag(parent, "report_path", str(html_path))
    client.set_tag(parent, "regressions", str(len(regressed)))
    client.log_metric(parent, "regressed_figures", float(len(regressed)))
    client.log_metric(parent, "changed_exact_figures", float(len(changes)))
    figure_path = None
    if p["figure"] != "none" and not table.empty:
        fig = get_figure(p["figure"])
        caption = (
            f"{fig.scale}; {p['repetitions']} repetitions, mean, bars: bootstrap 95% CI; "
            f"seed {p['seed']}; {wall_s / 60:.0f} min wall; sweep run {parent[:8]}"
        )
        figure_path = draw_figure(table, fig, results_dir() / parent, caption)
        client.log_artifact(parent, str(figure_path), "figure")
        client.log_artifact(parent, str(figure_path.with_suffix(".csv")), "figure")
        client.set_tag(parent, "figure_path", str(figure_path))
    status = "FAILED" if incomplete or table.empty else "FINISHED"
    tracking.end_run(parent, status, text)
    return {
        "regressions": regressed,
        "changes": changes,
        "incomplete": incomplete,
        "report": str(html_path),
        "figure": str(figure_path) if figure_path else None,
        "summary": text,
    }


def _exact_changes(tonight: Any, history: Any) -> list[str]:
    """Deterministic figures that differ between tonight's repetitions, or from the last
    earlier run with the same dataset and code."""
    from balancebench import regression

    def figures(run: Any) -> dict[str, float | str]:
        out: dict[str, float | str] = {
            m: float(run[f"metrics.{m}"])
            for m in regression.EXACT
            if f"metrics.{m}" in run and run[f"metrics.{m}"] == run[f"metrics.{m}"]
        }
        if isinstance(run.get("tags.result_digest"), str):
            out["result_digest"] = run["tags.result_digest"]
        return out

    if not len(tonight):
        return []
    first = tonight.iloc[0]
    found = []
    for i in range(1, len(tonight)):
        found += [
            f"repetition {i + 1} vs 1: {c}"
            for c in regression.exact_changes(figures(first), figures(tonight.iloc[i]))
        ]
    if len(history):
        same = history[
            (history["params.git_commit"] == first["params.git_commit"])
            & (history["params.dataset_digest"] == first["params.dataset_digest"])
        ]
        if len(same):
            found += [
                f"vs run {same.iloc[-1]['run_id'][:8]}: {c}"
                for c in regression.exact_changes(figures(same.iloc[-1]), figures(first))
            ]
    return found
