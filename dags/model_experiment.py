"""
## model_experiment

Runs one of the paper 001-004 **models** as a sweep: heterogeneous-cluster scheduling
(`scheduling`, paper 002: round robin, SWPTS, ACTS), elastic reconfiguration with
BalanceLoad (`elastic`, paper 001), back-pressure by credit-based flow control vs data
migration (`backpressure`, paper 003), overlay load balancing (`overlay`, paper 004:
random, Borealis, k-ary tree + Hilbert ring). Each model's docstring says what it models
and what it leaves out. Wiring only; every step is a function of
`balancebench.orchestration.pipeline`.

1. **generate**: checks the Params (model, strategies, grid values: a bad one fails here,
   naming the field), writes or reuses the model's seeded dataset, opens the MLflow parent.
2. **validate**: the dataset's Great Expectations suites; a failure stops the run here.
3. **run_sweep**: `spark-submit spark_apps/run_model_sweep.py`: one Spark task per
   (strategy, grid point, repetition); one MLflow child per (strategy, grid point).
4. **compare**: closes the parent (summary CSV and the paper-style figure are on it).
"""

from __future__ import annotations

from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import dag, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException
from dag_support.params import dag_params
from dag_support.settings import (
    MODEL_CRON,
    MODEL_DRIVER_MEMORY,
    schedule_after_start,
    schedule_description,
)
from dag_support.steps import require_generated

from balancebench.core.lazy import lazy_module
from balancebench.experiment.model_sweep import (
    FIRST_MODEL_FIELDS,
    MODEL_EXPERIMENT_PARAMS,
    model_param_section,
)

# The steps load pandas, PySpark and MLflow; they run in the tasks, not when the DAG
# processor parses this file.
pipeline = lazy_module("balancebench.orchestration.pipeline")

SPARK_APP = Path(__file__).resolve().parents[1] / "spark_apps" / "run_model_sweep.py"


@dag(
    dag_id="model_experiment",
    schedule=schedule_after_start(MODEL_CRON),
    description=schedule_description(MODEL_CRON, "BALANCEBENCH_MODEL_CRON"),
    catchup=False,
    doc_md=__doc__,
    params=dag_params(MODEL_EXPERIMENT_PARAMS, model_param_section, FIRST_MODEL_FIELDS),
    default_args={"retries": 0},
    tags=["balancebench"],
)
def model_experiment() -> None:
    @task
    def generate() -> dict:
        """Seeded dataset + MLflow parent run; returns what later tasks need."""
        ctx = get_current_context()
        return pipeline.model_generate_step(dict(ctx["params"]), ctx["dag"].dag_id, ctx["run_id"])

    @task
    def validate(generated: dict) -> list[str]:
        """Great Expectations gate; on success, the spark-submit arguments of the sweep."""
        report = pipeline.validate_step(generated)
        if not report.success:
            raise AirflowFailException(report.message())
        print(report.message())
        return pipeline.model_submit_args(generated)

    @task(trigger_rule="all_done")
    def compare(generated: dict) -> str:
        """Close the parent run; fails if a (strategy, point) has no finished child."""
        require_generated(generated)
        complete, text = pipeline.model_compare_step(generated)
        print(text)
        if not complete:
            raise AirflowFailException(f"sweep incomplete:\n{text}")
        return text

    generated = generate()
    sweep = SparkSubmitOperator(
        task_id="run_sweep",
        application=str(SPARK_APP),
        conn_id="spark_default",
        name="balancebench-model",
        application_args=validate(generated),
        driver_memory=MODEL_DRIVER_MEMORY,
    )
    sweep >> compare(generated)


model_experiment()
