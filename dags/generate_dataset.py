"""
## generate_dataset

Generates one dataset of the papers (or normalises a user's file) and validates it with
its Great Expectations suites; wiring only, every step is a function of
`balancebench.orchestration.pipeline`.

1. **generate**: checks the Params (a bad value fails here, naming the field), writes or
   reuses the seeded dataset (Parquet + `manifest.json`, written atomically) and opens an
   MLflow run (tag `balancebench.role = dataset`) with its params, manifest and row counts.
2. **validate**: runs `expectations/<dataset>/*.json` on the tables and on the profile
   frames (fitted Zipf exponent, drift, schedules, foreign keys...). The full GX result is
   logged to the run; a failure fails the task naming every failed expectation.

`balancebench datasets` lists the generators and their Params.
"""

from __future__ import annotations

from airflow.sdk import dag, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException
from dag_support.params import dag_params

from balancebench.core.lazy import lazy_module
from balancebench.experiment.params import (
    DATASET_DAG_PARAMS,
    FIRST_DATASET_FIELDS,
    param_section,
)

# The steps load pandas, PySpark and MLflow; they run in the tasks, not when the DAG
# processor parses this file.
pipeline = lazy_module("balancebench.orchestration.pipeline")


@dag(
    dag_id="generate_dataset",
    schedule=None,
    catchup=False,
    doc_md=__doc__,
    params=dag_params(DATASET_DAG_PARAMS, param_section, FIRST_DATASET_FIELDS),
    default_args={"retries": 0},
    tags=["balancebench", "datasets"],
)
def generate_dataset() -> None:
    @task
    def generate() -> dict:
        """Seeded dataset + MLflow run; returns what the validation needs."""
        ctx = get_current_context()
        return pipeline.generate_dataset_step(dict(ctx["params"]), ctx["dag"].dag_id, ctx["run_id"])

    @task
    def validate(generated: dict) -> str:
        """Great Expectations suites; fails naming every failed expectation."""
        report = pipeline.validate_dataset_step(generated)
        if not report.success:
            raise AirflowFailException(report.message())
        print(report.message())
        return report.message()

    validate(generate())


generate_dataset()
