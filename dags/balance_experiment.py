"""
## balance_experiment

Compares data-distribution strategies of stream processing side by side on one workload:
`topk`, `phone`, `wordcount` (aggregations) or `eq5`, `band` (TPC-H joins, paper 000).
Each strategy decides where every tuple and every piece of state goes; Spark executes the
stateful operator on those nodes, micro-batch by micro-batch, and every batch's result is
checked against plain Spark SQL. Wiring only; every step is a function of
`balancebench.orchestration.pipeline`.

1. **generate**: checks the Params (the dataset must feed the workload, every strategy
   must serve its operator: a bad choice fails here, naming the field), writes or reuses
   the seeded dataset and opens the MLflow parent run.
2. **validate**: runs the Great Expectations suites `expectations/<dataset>/`; a failure
   stops the run here (no Spark job starts) and the GX result is kept.
3. **run_rounds**: one `spark-submit spark_apps/run_workload.py` through the
   `spark_default` connection: the strategies in paired, rotated rounds on the loaded
   dataset in one Spark application (a round runs every strategy once; at least
   `min_rounds`, then more until every headline figure's verdict is decided, up to
   `max_rounds` or `max_estimated_hours`). One MLflow child run per strategy (its rounds'
   figures as steps) with one run per round under it. The task log says which round,
   strategy and batch runs, and after each round the verdicts still open.
4. **compare**: per strategy the mean and 95% interval of every figure over its rounds;
   per strategy and headline figure (capacity, node service, routing, p99 latency) the
   verdict against the baseline on the paired rounds (`balancebench.core.stats`): "X% faster
   [lo, hi]", "equivalent within ±m%", or "no clear difference"; the comparison table,
   the verdicts (CSV) and the figures (PNG) on the parent run. The answer, one line per
   strategy, and the MLflow link become the DAG run's note (on `make airflow`'s service;
   `make run` prints them) and end the task's log.
"""

from __future__ import annotations

from pathlib import Path

from airflow.sdk import dag, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException
from dag_support.params import dag_params
from dag_support.settings import DRIVER_MEMORY, TIMED_CONCURRENCY
from dag_support.steps import require_generated
from run_note import note_text, set_run_note
from spark_run import StrategyRunOperator

from balancebench.core.lazy import lazy_module
from balancebench.experiment.params import EXPERIMENT_PARAMS, FIRST_FIELDS, param_section

# The steps load pandas, PySpark and MLflow; they run in the tasks, not when the DAG
# processor parses this file.
pipeline = lazy_module("balancebench.orchestration.pipeline")

SPARK_APP = Path(__file__).resolve().parents[1] / "spark_apps" / "run_workload.py"


@dag(
    dag_id="balance_experiment",
    schedule=None,
    catchup=False,
    doc_md=__doc__,
    params=dag_params(EXPERIMENT_PARAMS, param_section, FIRST_FIELDS),
    default_args={"retries": 0},
    tags=["balancebench"],
)
def balance_experiment() -> None:
    @task
    def generate() -> dict:
        """Seeded dataset + MLflow parent run; returns what later tasks need."""
        ctx = get_current_context()
        return pipeline.generate_step(dict(ctx["params"]), ctx["dag"].dag_id, ctx["run_id"])

    @task
    def validate(generated: dict) -> list[dict]:
        """Great Expectations gate; on success, the one spark-submit of the rounds."""
        report = pipeline.validate_step(generated)
        if not report.success:
            raise AirflowFailException(report.message())
        print(report.message())
        return pipeline.submit_args(generated, TIMED_CONCURRENCY)

    @task(trigger_rule="all_done")
    def compare(generated: dict) -> str:
        """Comparison table and figure on the parent run; fails if a strategy has no run."""
        require_generated(generated)
        complete, text = pipeline.compare_step(generated)
        print(text)
        # The answer (the text's first paragraph) and the MLflow link as the run's note,
        # and the same link as the log's last line.
        link = pipeline.parent_link(generated)
        ctx = get_current_context()
        answer = text.split("\n\n", 1)[0].splitlines()
        print(set_run_note(ctx["dag"].dag_id, ctx["run_id"], note_text(answer, link)))
        print(f"MLflow: {link}")
        if not complete:
            raise AirflowFailException(f"comparison incomplete:\n{text}")
        return text

    generated = generate()
    runs = StrategyRunOperator.partial(
        task_id="run_rounds",
        application=str(SPARK_APP),
        conn_id="spark_default",
        # Local mode: the driver runs the tasks and caches each batch's routed rows.
        driver_memory=DRIVER_MEMORY,
        max_active_tis_per_dag=TIMED_CONCURRENCY,
        map_index_template="{{ task.name }}",
    ).expand_kwargs(validate(generated))
    runs >> compare(generated)


balance_experiment()
