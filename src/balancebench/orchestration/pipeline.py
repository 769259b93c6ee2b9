"""The steps of three DAGs (``balance_experiment``, ``generate_dataset``,
``model_experiment``) as plain functions (no Airflow import), and what every DAG's steps
share (``nightly_sweep``'s own steps are ``balancebench.orchestration.sweep_pipeline``'s).

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

from balancebench.core.schema import terminal_safe
from balancebench.experiment.compare import (
    BATCH_PREFIX,
    SERIES,
    TABLE_METRICS,
    comparison_figure,
    comparison_table,
    verdict_figure,
)
from balancebench.experiment.params import (
    ExperimentSpec,
    applicable_params,
    validate_dataset_params,
)
from balancebench.experiment.run_log import say_progress
from balancebench.experiment.run_spec import GroupSpec, RunSpec
from balancebench.experiment.validation import ValidationReport, validate_dataset
from balancebench.generators import generate, generator_params
from balancebench.state import reaper, tracking
from balancebench.state.paths import datasets_dir, results_dir, validation_dir

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
        run_name=tracking.run_label(run_id, name),
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
    digest and attach its manifest; returns (dataset_dir, manifest, parent_run_id). The
    experiment is found (or refused: deleted in MLflow) before the dataset's work."""
    tracking.ensure_experiment(p["experiment"])
    dataset_dir, manifest = generate(
        dataset, datasets_dir(), generator_params(dataset, p), checked=True, say=say_progress
    )
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
        p["dataset"],
        datasets_dir(),
        generator_params(p["dataset"], p),
        checked=True,
        say=say_progress,
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
        first = report.message().strip().splitlines()[0]
        _tag_failure_once(tracking.client(), parent, f"the dataset failed validation: {first}")
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
    from balancebench.experiment.rounds import RoundPolicy

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
    from balancebench.core.metric_definitions import VERDICT_FIGURES
    from balancebench.experiment.regression import TIMED

    return list(dict.fromkeys([*TABLE_METRICS, *TIMED, *VERDICT_FIGURES]))


@ends_runs_on_failure
def compare_step(generated: dict[str, Any]) -> tuple[bool, str]:
    """Per strategy: the mean and Student-t interval of every figure over its finished
    rounds (on its cell run, which is closed); the verdicts of each strategy against the
    baseline on the paired rounds (``balancebench.core.stats``: tags ``verdict.<strategy>.
    <figure>`` on the parent, ``verdict.<figure>`` and ``<figure>_ratio`` on the cell);
    the comparison table (CSV), the verdicts (CSV), every round's figures (``rounds.csv``:
    what the verdicts are computed from) and the figure (PNG) on the parent, which is
    closed.

    Returns ``(complete, text)``: ``complete`` is False when a strategy has fewer finished
    rounds than ``min_rounds`` (its Spark run failed); the parent is then closed FAILED.
    ``text`` is the answer, one line per strategy, a blank line, then the verdicts' table."""
    import pandas as pd
    from mlflow.entities import Metric

    from balancebench.experiment.round_runs import answer_lines, experiment_comparison
    from balancebench.experiment.run_spec import ROUNDS_STOPPED_TAG

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
    ] + [f"{s}: a round's run failed (no verdict)" for s in found.failed]
    now = int(time.time() * 1000)
    for s, run in found.cell_runs.items():
        cols = found.columns[s]
        client.log_batch(run, metrics=[Metric(k, v, now, 0) for k, v in cols.items() if v == v])
        for row in (r for r in found.rows if r.strategy == s):
            client.set_tag(run, f"verdict.{row.figure}", row.text)
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
        failed = any(x.startswith(f"{s}: ") for x in short)
        tracking.end_run(
            run,
            "FAILED" if failed else "FINISHED",
            f"{len(found.rounds[s])} rounds ({stopped or 'not run'})",
        )
    if not any(found.rounds.values()):
        causes = _round_failures(found.cell_runs.values())
        why = f"no strategy finished a round: {causes[0] if causes else short}"
        _tag_failure_once(client, parent, why)
        tracking.end_run(parent, "FAILED", f"no strategy finished a round; {short}")
        return False, why
    table = comparison_table(found.columns, found.cell_runs)
    out = results_dir() / parent
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "comparison.csv"
    table.to_csv(csv, index=False)
    verdicts = out / "verdicts.csv"
    pd.DataFrame([r.as_dict() for r in found.rows]).to_csv(verdicts, index=False)
    rounds = out / "rounds.csv"
    design = {k: p[k] for k in ("min_rounds", "max_rounds", "equivalence_margin")}
    design["baseline"] = found.baseline  # resolved: what "auto" chose
    pd.DataFrame(
        [
            {"strategy": s, "round": r, **figures, **design, "parent_run": parent}
            for s in expected
            for r, figures in sorted(found.rounds.get(s, {}).items())
        ]
    ).to_csv(rounds, index=False)
    history = {s: {m: _round_history(client, found, s, m) for m in SERIES} for s in found.cell_runs}
    title = (
        f"{p['workload']} on {p['dataset']}: zipf_s {p['zipf_s']:g}, {p['n_tuples']} tuples, "
        f"{p['n_batches']} batches, N = {p['n_nodes']}, seed {p['seed']}; mean over the "
        f"rounds (parent run {parent[:8]}, {g.run_id})"
    )
    png = verdict_figure(found.rows, out / "comparison.png", title, float(p["equivalence_margin"]))
    details = comparison_figure(table, history, out / "details.png", title)
    for path in (csv, verdicts, rounds, png, details):
        client.log_artifact(parent, str(path))
    _log_parent_summary(client, parent, table, found.rows)
    # The answer leads (one line per strategy), then the table: what the task's log shows,
    # and its first paragraph is the DAG run's note (dags/balance_experiment.py).
    text = "\n".join(answer_lines(found.rows)) + "\n\n" + found.verdict_text()
    if short:
        causes = _round_failures(found.cell_runs.values())
        why = f"strategies short of their rounds: {causes[0] if causes else short}"
        _tag_failure_once(client, parent, why)
        tracking.end_run(parent, "FAILED", f"strategies short of their rounds: {short}")
        return False, text
    # The verdict itself is the description's first line: the runs table's Description
    # column shows that line.
    tracking.end_run(parent, "FINISHED", found.verdict_markdown(), lead=True)
    return True, text


def parent_link(generated: dict[str, Any]) -> str:
    """The MLflow UI page of the DAG run's parent run."""
    parent = Generated.from_xcom(generated).run
    return tracking.ui_link(tracking.store().get_run(parent).info.experiment_id, parent)


def _tag_failure_once(client: Any, run_id: str, why: str) -> None:
    """Tag the run's failure unless it has one: an earlier step's cause (a dataset that
    failed validation, say) is the root, and the comparison's want of rounds follows."""
    if tracking.FAILURE_TAG not in client.get_run(run_id).data.tags:
        client.set_tag(run_id, tracking.FAILURE_TAG, terminal_safe(why, 300))


def _round_failures(cell_runs: Any) -> list[str]:
    """The causes the cells' failed round runs carry (``balancebench.failure``), first
    seen first: what a parent that failed for want of rounds failed of."""
    causes: list[str] = []
    column = f"tags.{tracking.FAILURE_TAG}"
    for cell in cell_runs:
        rounds = tracking.child_runs(cell)
        if column in rounds:
            causes += [c for c in rounds[column].dropna() if c not in causes]
    return causes


def _log_parent_summary(client: Any, parent: str, table: Any, rows: list[Any]) -> None:
    """Each strategy's mean headline figures on the parent (``<metric>.<strategy>``) and
    every verdict (tag ``verdict.<strategy>.<figure>``), so the parent row says who is
    faster by how much, and how sure."""
    import pandas as pd
    from mlflow.entities import Metric

    from balancebench.experiment.regression import TIMED

    means = table.set_index("strategy")
    metrics = [
        Metric(f"{m}.{s}", float(means.loc[s, m]), 0, 0)
        for m in TIMED
        for s in means.index
        if m in means and pd.notna(means.loc[s, m])  # not measured: None or NaN
    ]
    client.log_batch(parent, metrics=metrics)
    for row in rows:
        client.set_tag(parent, f"verdict.{row.strategy}.{row.figure}", row.text)


def _round_history(client: Any, found: Any, strategy: str, metric: str) -> tuple[list, list]:
    """A per-batch series of a strategy, the mean over its finished rounds per batch."""
    from balancebench.experiment.round_runs import finished_rounds

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
    from balancebench.experiment.model_sweep import grid_points, sweep_params, validate_model_params
    from balancebench.models import get_model

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
    from balancebench.experiment.model_experiment import ModelSweepSpec

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
    from balancebench.experiment.model_sweep import REPETITION_SUFFIXES

    cols = ["tags.mlflow.runName"] + sorted(
        c
        for c in finished.columns
        if c.startswith("metrics.") and not c.endswith(REPETITION_SUFFIXES)
    )
    text = finished[cols].to_string(index=False)
    tracking.end_run(parent, "FINISHED")
    return True, text
