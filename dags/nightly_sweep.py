"""
## nightly_sweep

The scheduled comparison: a grid of workloads x strategies x `zipf_s` x `n_nodes`, each
cell group (the cells that differ only in the strategy) in paired, rotated rounds, every
strategy judged against the group's baseline, every cell compared with its own history.
With the Param `figure` (3a, 3b, 4-5, 6a, 6b, 7, 8) it runs one of paper 000's
experiments instead (its grid and Params fixed, scaled as
`balancebench.experiment.paper000_figures` states) and also draws the paper-style figure
(on the parent run, under `figure/`). Runs every night at
`BALANCEBENCH_NIGHTLY_CRON` (default 02:00 UTC; `dags/dag_support/settings.py`), no catchup:
its first run is the next 02:00 after the service starts, never one already past.
Wiring only; every step is a function of `balancebench.orchestration.sweep_pipeline`.

1. **generate**: checks the Params (grid, rounds and every shared Param: a bad
   choice fails here, naming the field), writes or reuses one seeded dataset per
   (dataset, `zipf_s`) and opens the sweep's MLflow parent run.
2. **validate**: the Great Expectations suites of every dataset; a failure stops the
   sweep before any Spark job. Then one MLflow run per cell is opened.
3. **run_application** (mapped over Spark applications: one per workload and N, each
   shown as `application k of K: <workload> · N=<n_nodes> · s=<zipf_s values> (G cell
   group(s) x 5-10 rounds)`): one `spark-submit spark_apps/run_workload.py` per
   application, which loads its cell groups' datasets in turn (groups that differ only in
   the tolerance share one load) and runs each group in paired, rotated rounds (at least
   `min_rounds`, then more until every headline verdict is decided, `max_rounds` or the
   group's share of `max_estimated_hours`), each round of a cell with the same run spec as
   `balance_experiment` and its own MLflow run; the task log says the round, the run, the
   strategy, the batch and, after each round, the verdicts still open. At most
   `BALANCEBENCH_TIMED_CONCURRENCY` (default 1) applications at once.
4. **summarize**: mean, std and Student-t 95% interval per cell over its rounds; every
   strategy's verdict against its group's baseline on the paired rounds (the report, and
   tags on the cells and the parent); the regression check against
   each cell's history (Flink's rule: baseline = best rolling min-of-3 of the last 30 runs,
   alert beyond max(4%, 2 stdev)); deterministic figures checked exactly; the report page
   (`.local/reports/<parent run>.html`, also on the parent run).
5. **check_regressions**: fails, listing the regressed cells, so Airflow's alerting applies.
"""

from __future__ import annotations

from pathlib import Path

from airflow.sdk import dag, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException
from dag_support.params import dag_params
from dag_support.settings import (
    DRIVER_MEMORY,
    NIGHTLY_CRON,
    TIMED_CONCURRENCY,
    schedule_after_start,
    schedule_description,
)
from dag_support.steps import require_generated
from spark_run import StrategyRunOperator

from balancebench.core.lazy import lazy_module
from balancebench.orchestration.sweep_grid import (
    FIRST_SWEEP_FIELDS,
    SWEEP_PARAMS,
    sweep_param_section,
)

# The steps load pandas, PySpark and MLflow; they run in the tasks, not when the DAG
# processor parses this file.
sweep_pipeline = lazy_module("balancebench.orchestration.sweep_pipeline")

SPARK_APP = Path(__file__).resolve().parents[1] / "spark_apps" / "run_workload.py"


@dag(
    dag_id="nightly_sweep",
    schedule=schedule_after_start(NIGHTLY_CRON),
    description=schedule_description(NIGHTLY_CRON, "BALANCEBENCH_NIGHTLY_CRON"),
    catchup=False,
    is_paused_upon_creation=False,
    doc_md=__doc__,
    params=dag_params(SWEEP_PARAMS, sweep_param_section, FIRST_SWEEP_FIELDS),
    default_args={"retries": 0},
    max_active_runs=1,
    tags=["balancebench"],
)
def nightly_sweep() -> None:
    @task
    def generate() -> dict:
        """Seeded datasets + the sweep's MLflow parent run."""
        ctx = get_current_context()
        return sweep_pipeline.sweep_generate_step(
            dict(ctx["params"]), ctx["dag"].dag_id, ctx["run_id"]
        )

    @task
    def validate(generated: dict) -> list[dict]:
        """Great Expectations gate; on success, one spark-submit per Spark application."""
        report = sweep_pipeline.sweep_validate_step(generated)
        if not report.success:
            raise AirflowFailException(report.message())
        return sweep_pipeline.sweep_submissions(generated, TIMED_CONCURRENCY)

    @task(trigger_rule="all_done")
    def summarize(generated: dict) -> dict:
        """Statistics per cell, regressions, the report page; closes the sweep's runs."""
        require_generated(generated)
        result = sweep_pipeline.sweep_summarize_step(generated)
        print(result["summary"])
        print(f"report: {result['report']}")
        if result["figure"]:
            print(f"paper figure: {result['figure']}")
        if result["incomplete"]:
            raise AirflowFailException("sweep incomplete:\n" + "\n".join(result["incomplete"]))
        return result

    @task
    def check_regressions(result: dict) -> None:
        """Fails with the list of regressed cells (and changed deterministic figures)."""
        found = result["regressions"] + result["changes"]
        if found:
            raise AirflowFailException(
                f"{len(result['regressions'])} regressed figure(s), {len(result['changes'])} "
                "changed deterministic figure(s):\n"
                + "\n".join(found)
                + f"\nreport: {result['report']}"
            )
        print("no regression")

    generated = generate()
    runs = StrategyRunOperator.partial(
        task_id="run_application",
        application=str(SPARK_APP),
        conn_id="spark_default",
        driver_memory=DRIVER_MEMORY,
        max_active_tis_per_dag=TIMED_CONCURRENCY,
        map_index_template="{{ task.name }}",
    ).expand_kwargs(validate(generated))
    summary = summarize(generated)
    runs >> summary
    check_regressions(summary)


nightly_sweep()
