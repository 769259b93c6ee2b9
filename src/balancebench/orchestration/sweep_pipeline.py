"""The steps of the ``nightly_sweep`` DAG as plain functions (no Airflow import): the
sweep's door (every cell checked once, one dataset per (dataset, zipf_s)), its Spark
submissions (one application per workload and N), and its summary (each cell's rounds,
verdicts against the group's baseline, the regression check against the cell's history,
the report).

The shapes and the failure handling every DAG shares
(:class:`~balancebench.orchestration.pipeline.Generated`, ``ends_runs_on_failure``, the
cells' MLflow runs) are ``balancebench.orchestration.pipeline``'s.
"""

import dataclasses
import json
import os
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from balancebench.experiment.params import (
    ExperimentSpec,
    applicable_params,
)
from balancebench.experiment.run_log import say_progress
from balancebench.experiment.run_spec import APPLICATION_TAG, GroupSpec, RunSpec
from balancebench.experiment.validation import ValidationReport, validate_dataset
from balancebench.generators import generate, generator_params
from balancebench.orchestration.pipeline import (
    Dataset,
    Generated,
    ends_runs_on_failure,
    group_budget_s,
    open_cell_run,
)
from balancebench.state import tracking
from balancebench.state.paths import datasets_dir, results_dir, validation_dir

CELL_TAG, SWEEP_TAG, CELL_KEY_TAG = (
    "balancebench.cell",
    "balancebench.orchestration.sweep_grid",
    "balancebench.cell_key",
)


#: The regression alarm's test hook, an environment variable of the process that runs the
#: sweep (the service's scheduler), never a Param of a form: the path of a JSON file
#: ``{"<cell label>": <ms of busy work per plan()>}``. Read at each sweep's submission; no
#: file, no busy work. ``tests/e2e/test_service.py`` writes it before the sweep whose one
#: cell must be flagged.
TEST_SLOW_PLANS_ENV = "BALANCEBENCH_TEST_SLOW_PLANS"


def slow_plans_hook() -> dict[str, float]:
    """The busy work per plan() the test hook asks of each cell label (see above)."""
    path = os.environ.get(TEST_SLOW_PLANS_ENV)
    if not path or not Path(path).is_file():
        return {}
    found = json.loads(Path(path).read_text())
    return {str(label): float(ms) for label, ms in found.items()}


@ends_runs_on_failure
def sweep_generate_step(params: dict[str, Any], dag_id: str, run_id: str) -> dict[str, Any]:
    """The door of a sweep: check its Params and every cell's (``checked_sweep``), write
    (or reuse) one dataset per (dataset, zipf_s) of the grid and open the sweep's MLflow
    parent run (role ``sweep``). Returns the :class:`Generated` hand-off's JSON form, the
    cells' checked specs in it."""
    from balancebench.orchestration.sweep_grid import cells, checked_sweep

    p, specs = checked_sweep(params)
    tracking.ensure_experiment(p["experiment"])  # refused (deleted) before any dataset
    found = cells(p["grid"])
    datasets: dict[str, Dataset] = {}
    for cell in found:
        spec = specs[cell.label]
        key = _dataset_key(spec)
        if key not in datasets:
            folder, manifest = generate(
                spec.dataset,
                datasets_dir(),
                generator_params(spec.dataset, spec),
                checked=True,
                say=say_progress,
            )
            datasets[key] = Dataset.of(folder, manifest)
    grid = p["grid"]
    rounds = f"{p['min_rounds']}-{p['max_rounds']} rounds"
    description = (
        f"{dag_id} {run_id}: {len(found)} cells ({' x '.join(_grid_text(grid))}), each cell "
        f"group (the cells that differ only in the strategy) in {rounds}, {p['n_tuples']} "
        f"tuples, seed {p['seed']}. One child per cell (mean, std and Student-t 95% interval "
        "over its rounds; the rounds' figures as steps), one run per round under it. The "
        "report (report.html) shows the intervals, every strategy's verdict against its "
        "group's baseline on the paired rounds, and the regression check per cell."
    )
    logged = {
        "grid": grid,
        **{k: p[k] for k in ("min_rounds", "max_rounds", "equivalence_margin", "baseline")},
        **{k: v for k, v in p.items() if k in ("n_tuples", "seed", "n_batches", "experiment")},
    }
    parent = tracking.start_parent_run(
        p["experiment"],
        logged,
        dag_id,
        run_id,
        ",".join(sorted({d.digest for d in datasets.values()})),
        run_name=tracking.run_label(run_id, f"{_sweep_name(p)} · {len(found)} cells x {rounds}"),
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


def cell_key(applies: dict[str, Any], shared_load: bool, application: Any) -> str:
    """A cell's history key. Same key = comparable history: same cell, same Params
    (``applies``: the checked, normalised values that apply to its strategy: n_tuples,
    seed, the rounds, ...), measured the same way: a run's position in its application
    moves its timings (the report's position check), so the application's strategies and
    cell groups (``application``) are part of the key, and whether tolerance groups share
    a load (``shared_load``)."""
    import hashlib
    import json

    keyed = {
        **applies,
        "measured_in": MEASURED_IN + (SHARED_TOLERANCES if shared_load else ""),
        "application": application,
    }
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:16]


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
#: workload and node count, its cell groups' datasets loaded in turn, each group in paired,
#: rotated rounds until its verdicts are decided (earlier sweeps ran a fixed number of
#: repetitions, before that one application per cell group, and before that one per run).
MEASURED_IN = "one application per workload and N, datasets in turn, rounds until decided"
#: Added to it where an application has several tolerances: since 2026-11-27 the cell
#: groups of one dataset that differ only in the tolerance share its load
#: (``experiment.RUN_ONLY_PARAMS``), so their runs' positions on it moved.
SHARED_TOLERANCES = ", tolerance groups sharing a load"


@ends_runs_on_failure
def sweep_submissions(generated: dict[str, Any], concurrency: int = 1) -> list[dict[str, Any]]:
    """Open one MLflow run per cell (child of the sweep) and return one spark-submit per
    Spark application (one per workload and node count: ``Cell.application``): its cell
    groups one after another, each in paired, rotated rounds of its strategies
    (``experiment.run_groups``), each round of a cell a ``RunSpec`` like
    ``balance_experiment``'s whose run is a child of its cell. A group may spend its share
    of ``max_estimated_hours`` on rounds beyond ``min_rounds``."""
    from balancebench.experiment.rounds import RoundPolicy
    from balancebench.orchestration.sweep_grid import application_label, cell_groups, cells

    g = Generated.from_xcom(generated)
    p, parent = g.params, g.run
    client = tracking.client()
    experiment_id = tracking.ensure_experiment(p["experiment"])
    grid_cells = cells(p["grid"])
    by_group = cell_groups(grid_cells)
    policy = RoundPolicy.of_params(p, _sweep_figures(p), budget_s=group_budget_s(p, len(by_group)))
    # Per application, what its runs share: the strategies and the cell groups.
    shares: dict[str, dict[str, list[str]]] = {}
    tolerances: dict[str, set[float]] = {}
    specs = {cell.label: g.cell_spec(cell.label) for cell in grid_cells}  # built once
    slow_plans = slow_plans_hook()  # the test hook's file, read once per submission
    for cell in grid_cells:
        share = shares.setdefault(cell.application, {"strategies": [], "cell_groups": []})
        for key, value in (("strategies", cell.strategy), ("cell_groups", cell.group)):
            if value not in share[key]:
                share[key].append(value)
        tolerances.setdefault(cell.application, set()).add(specs[cell.label].tolerance)
    applications: dict[str, dict[str, Any]] = {}
    for group_label, members in by_group.items():
        application = members[0].application
        app = applications.setdefault(
            application, {"groups": [], "submission": uuid.uuid4().hex, "cells": []}
        )
        cell_specs = []
        for cell in members:
            cp = specs[cell.label]
            data = g.datasets[_dataset_key(cp)]
            applies = applicable_params(cp, [cell.strategy])
            shared_load = len(tolerances[application]) > 1
            key = cell_key(applies, shared_load, shares[application])
            tags = {CELL_TAG: cell.label, CELL_KEY_TAG: key, SWEEP_TAG: parent}
            cell_run = open_cell_run(
                client,
                experiment_id,
                parent,
                g,
                cell.label,
                {
                    **applies,
                    "strategy": cell.strategy,
                    "dataset_digest": data.digest,
                    "timed_concurrency": concurrency,
                },
                tags,
            )
            slow = slow_plans.get(cell.label, 0.0)
            app["cells"].append(cell)
            cell_specs.append(
                RunSpec(
                    dataset_dir=data.dir,
                    strategy=cell.strategy,
                    params=cp,
                    parent_run_id=cell_run,
                    dag_id=g.dag_id,
                    dag_run_id=g.run_id,
                    run_name=cell.label,
                    tags={
                        **tags,
                        # One per application: a stopped task closes all the runs it opened.
                        tracking.SUBMISSION_TAG: app["submission"],
                    },
                    concurrency=concurrency,
                    plan_extra_work_ms=float(slow),
                )
            )
        app["groups"].append((group_label, cell_specs))
    out = []
    folder = results_dir() / parent
    for k, app in enumerate(applications.values(), 1):
        label = application_label(app["cells"])
        name = (
            f"application {k} of {len(applications)}: {label} ({len(app['groups'])} cell "
            f"group(s) x {p['min_rounds']}-{p['max_rounds']} rounds)"
        )
        groups = [
            GroupSpec(
                group_label,
                tuple(
                    dataclasses.replace(c, tags={**c.tags, APPLICATION_TAG: name})
                    for c in cell_specs
                ),
                policy,
                str(folder),
            )
            for group_label, cell_specs in app["groups"]
        ]
        args = GroupSpec.write(groups, folder / "groups" / f"application-{k}.json")
        out.append({"application_args": args, "name": name})
    return out


def _sweep_figures(params: Mapping[str, Any]) -> list[str]:
    """The figures a sweep's verdicts are given on: the headline ones and, for a paper
    figure, what it plots."""
    from balancebench.core.metric_definitions import VERDICT_FIGURES
    from balancebench.experiment.paper000_figures import NO_FIGURE, get_figure

    figure = params.get("figure", NO_FIGURE)
    plotted = () if figure == NO_FIGURE else get_figure(figure).metrics
    return list(dict.fromkeys([*VERDICT_FIGURES, *plotted]))


def _cell_history(experiment_id: str, key: str, sweep: str) -> Any:
    """Finished round runs of the same cell key in earlier sweeps, oldest first."""
    mlflow = tracking.store()
    return mlflow.search_runs(
        experiment_ids=[experiment_id],
        filter_string=(
            f"tags.`{CELL_KEY_TAG}` = '{key}' AND tags.`{tracking.ROLE_TAG}` = 'round' "
            f"AND tags.`{SWEEP_TAG}` != '{sweep}' AND attributes.status = 'FINISHED'"
        ),
        order_by=["attributes.start_time ASC"],
    )


@ends_runs_on_failure
def sweep_summarize_step(generated: dict[str, Any]) -> dict[str, Any]:
    """Per cell: mean, std and Student-t interval of every headline figure over its
    finished rounds (on the cell's run); per cell group, every strategy's verdict against
    the baseline on the paired rounds (tags ``verdict.<figure>`` on the cell runs); the
    regression check against the cell's history (``balancebench.experiment.regression``), tagged on
    the runs; the report page; the parent closed. Returns the regressed cells, the
    changed deterministic figures and what is missing."""
    import pandas as pd

    from balancebench.experiment import regression
    from balancebench.experiment.compare import headline_metrics, logged_name
    from balancebench.experiment.paper000_figures import (
        FIGURE_COMPONENTS,
        FIGURE_METRICS,
        draw_figure,
        figure_caption,
        get_figure,
    )
    from balancebench.experiment.report import (
        CORE_WAIT_METRIC,
        HARNESS_METRIC,
        POSITION_METRIC,
        cell_check,
        measurement_lines,
        text_summary,
        write_report,
    )
    from balancebench.experiment.round_runs import (
        ROUNDS_FINISHED,
        cell_columns,
        failed_rounds,
        finished_rounds,
        round_figures,
        verdict_rows,
    )
    from balancebench.experiment.rounds import RoundPolicy, choose_baseline
    from balancebench.experiment.run_spec import (
        DATASET_RUN_INDEX_TAG,
        ROUNDS_STOPPED_TAG,
        RUN_INDEX_TAG,
    )
    from balancebench.orchestration.sweep_grid import cell_groups, cells
    from balancebench.state.paths import reports_dir

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
    summarised = list(
        dict.fromkeys(
            [
                *regression.TIMED,
                *regression.EXACT,
                *FIGURE_METRICS,
                *FIGURE_COMPONENTS,
                *_sweep_figures(p),
            ]
        )
    )
    policy = RoundPolicy.of_params(p, _sweep_figures(p))
    grid_cells = cells(p["grid"])
    rounds_of: dict[str, dict[int, dict[str, float]]] = {}
    stopped: dict[str, str] = {}
    failed_cells: set[str] = set()
    for cell in grid_cells:
        run_id = by_label[cell.label]
        tags = client.get_run(run_id).data.tags
        key = tags[CELL_KEY_TAG]
        stopped[cell.group] = tags.get(ROUNDS_STOPPED_TAG, stopped.get(cell.group, ""))
        done = finished_rounds(run_id)
        rounds_of[cell.label] = round_figures(done, summarised)
        if failed_rounds(run_id):
            failed_cells.add(cell.label)
        row: dict[str, Any] = {
            "label": cell.label,
            "group": cell.group,
            "workload": cell.workload,
            "strategy": cell.strategy,
            "zipf_s": cell.zipf_s,
            "n_nodes": cell.n_nodes,
            "tolerance": p["tolerance"] if cell.tolerance is None else cell.tolerance,
            "run_id": run_id,
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
        metrics = cell_columns(rounds_of[cell.label], summarised)
        row.update(metrics)
        client.log_batch(
            run_id, metrics=[mlflow.entities.Metric(k, v, 0, 0) for k, v in metrics.items()]
        )
        if len(done) < p["min_rounds"]:
            incomplete.append(f"{cell.label}: {len(done)} of at least {p['min_rounds']} rounds")
        elif cell.label in failed_cells:
            incomplete.append(f"{cell.label}: a round's run failed (no verdict)")
        history = _cell_history(experiment_id, key, parent) if len(done) else pd.DataFrame()
        verdicts = []
        for m, direction in regression.TIMED.items():
            if f"{m}_mean" not in metrics or m not in p["regression_metrics"]:
                continue
            col = f"metrics.{logged_name(m, headline)}"
            past = history[col].dropna().tolist() if len(history) and col in history else []
            tonight = done[col].dropna().tolist() if col in done else []
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
        rows.append(row)
    # Per cell group: each strategy against the baseline on the paired rounds.
    group_rows = []
    baselines = {}
    for group, members in cell_groups(grid_cells).items():
        baselines[group] = choose_baseline([c.strategy for c in members], policy.baseline)
        found = verdict_rows(
            {c.strategy: rounds_of[c.label] for c in members if c.label not in failed_cells},
            policy,
            [c.strategy for c in members],
        )
        for r in found:
            member = next(c for c in members if c.strategy == r.strategy)
            client.set_tag(by_label[member.label], f"verdict.{r.figure}", r.text)
            client.set_tag(parent, _verdict_key(member, r.figure), r.text)
        group_rows += [(group, r) for r in found]
    for row in rows:
        n = int(row[ROUNDS_FINISHED])
        note = f"{n} rounds ({stopped.get(row['group']) or 'not run'})"
        ok = n >= p["min_rounds"] and row["label"] not in failed_cells
        tracking.end_run(row["run_id"], "FINISHED" if ok else "FAILED", note)
    table = pd.DataFrame(rows)
    measured = measurement_lines(pd.concat(measured_runs) if measured_runs else pd.DataFrame())
    # The sweep's wall time so far: from its parent run's start (the generate step) to now.
    wall_s = time.time() - client.get_run(parent).info.start_time / 1000
    finished = int(sum(row[ROUNDS_FINISHED] for row in rows))
    measured.insert(0, f"sweep wall time: {wall_s / 60:.1f} min for {finished} finished runs")
    measured.insert(1, _rounds_line(stopped))
    for line in measured:
        say_progress(line)
    title = f"{_sweep_name(p)} {g.run_id} (parent run {parent[:8]})"
    # One folder per sweep, its files named as the run's description names them
    # (report.html, ...): MLflow's file tree shows them whole under report/.
    reports = reports_dir() / parent
    reports.mkdir(parents=True, exist_ok=True)
    html_path = write_report(
        table,
        group_rows,
        regressed,
        changes,
        title,
        lambda rid: tracking.ui_link(experiment_id, rid),
        reports / "report.html",
        checks,
        measured,
        p["min_rounds"],
    )
    text = text_summary(table, group_rows, regressed, changes, checks, measured, p["min_rounds"])
    (reports / "report.txt").write_text(text + "\n", encoding="utf-8")
    table.to_csv(reports / "report.csv", index=False)
    rounds_csv = reports / "report.rounds.csv"
    _rounds_table(grid_cells, rounds_of, p, baselines).to_csv(rounds_csv, index=False)
    for path in (html_path, reports / "report.txt", reports / "report.csv", rounds_csv):
        client.log_artifact(parent, str(path), "report")
    client.set_tag(parent, "report_path", str(html_path))
    client.set_tag(parent, "regressions", str(len(regressed)))
    client.log_metric(parent, "regressed_figures", float(len(regressed)))
    client.log_metric(parent, "changed_exact_figures", float(len(changes)))
    figure_path = None
    if p["figure"] != "none" and not table.empty:
        fig = get_figure(p["figure"])
        caption = figure_caption(
            fig,
            f"{p['min_rounds']}-{p['max_rounds']}",
            p["seed"],
            wall_s / 60,
            f"sweep run {parent[:8]}",
            tracking.git_commit(),
        )
        out = results_dir() / parent
        figure_path = draw_figure(table, fig, out, caption)
        rounds_path = figure_path.with_suffix(".rounds.csv")
        _rounds_table(grid_cells, rounds_of, p, baselines, fig.x).to_csv(rounds_path, index=False)
        for path in (figure_path, figure_path.with_suffix(".csv"), rounds_path):
            client.log_artifact(parent, str(path), "figure")
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


def _verdict_key(cell: Any, figure: str) -> str:
    """A cell's verdict as a tag of the sweep's parent run (MLflow's tag keys take
    letters, digits, ``_-. /:``): ``verdict.<workload>.s<zipf_s>.N<n>[.tol<t>].<strategy>.
    <figure>``."""
    tol = "" if cell.tolerance is None else f".tol{cell.tolerance:g}"
    return f"verdict.{cell.workload}.s{cell.zipf_s:g}.N{cell.n_nodes}{tol}.{cell.strategy}.{figure}"


def _rounds_line(stopped: Mapping[str, str]) -> str:
    """How the cell groups' rounds ended, counted by reason."""
    from collections import Counter

    counts = Counter(reason or "not run" for reason in stopped.values())
    parts = [f"{n} x {reason}" for reason, n in counts.most_common()]
    return f"rounds stopped ({len(stopped)} cell group(s)): " + "; ".join(parts)


def _rounds_table(
    grid_cells: Any,
    rounds_of: Mapping[str, Mapping[int, Mapping[str, float]]],
    p: Mapping[str, Any],
    baselines: Mapping[str, str],
    x: str | None = None,
) -> Any:
    """One row per (cell, round): the round's figures, and the rounds' policy with each
    group's resolved baseline (what the verdicts recomputed from this table need:
    ``balancebench.experiment.rounds.group_verdicts``)."""
    import pandas as pd

    rows = []
    for cell in grid_cells:
        for r, figures in sorted(rounds_of[cell.label].items()):
            row = {
                "group": cell.group,
                "strategy": cell.strategy,
                "zipf_s": cell.zipf_s,
                "n_nodes": cell.n_nodes,
                "tolerance": p["tolerance"] if cell.tolerance is None else cell.tolerance,
                "round": r,
                **figures,
                "baseline": baselines[cell.group],
            }
            rows.append(row)
    table = pd.DataFrame(rows)
    for name in ("min_rounds", "max_rounds", "equivalence_margin"):
        table[name] = p[name]
    if x is not None and len(table):
        table = table.sort_values(["strategy", x, "round"], kind="stable")
    return table


def _exact_changes(tonight: Any, history: Any) -> list[str]:
    """Deterministic figures that differ between tonight's rounds, or from the last
    earlier run with the same dataset and code."""
    from balancebench.experiment import regression

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
            f"round {i + 1} vs 1: {c}"
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
