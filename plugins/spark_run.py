"""Airflow-only glue: a strategy's Spark run, and the MLflow runs a stopped DAG run or
task leaves open.

- ``StrategyRunOperator``: ``SparkSubmitOperator`` whose ``on_kill`` (the task is marked
  failed or success, cleared, or killed by the scheduler) stops ``spark-submit`` as
  before and then closes the MLflow runs that submission opened (one, or a sweep
  application's many, found by their shared ``balancebench.submission`` tag) as KILLED,
  with the reason.
- ``MlflowRunsListener`` (registered by ``BalancebenchRunsPlugin``): when a DAG run ends,
  however it ends (a user marking it failed or success in the UI or through the REST
  API included), the MLflow runs of that DAG run still RUNNING (its parent, a sweep's
  cell runs) are closed as KILLED with Airflow's message. After a normal end there are
  none: every step closes what it opened.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

from airflow.exceptions import AirflowException
from airflow.listeners import hookimpl
from airflow.plugins_manager import AirflowPlugin
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

log = logging.getLogger(__name__)


class StrategyRunOperator(SparkSubmitOperator):
    """``spark-submit spark_apps/run_workload.py --groups-file <file>``: one Spark
    application's cell groups, each in rounds (a DAG run's strategies, or a sweep's
    application). A ``spark-submit`` ended by a signal (its JVM killed: the OOM killer, a
    user) fails the task with one line that says so and after which progress line, and
    closes the runs it left RUNNING as FAILED with that line."""

    def execute(self, context: Any) -> None:
        try:
            super().execute(context)
        except AirflowException as exc:
            cause = killed_by_signal(str(exc))
            if cause is None:
                raise
            log.error("balancebench: %s", cause)
            self._close_submission_runs("FAILED", cause)
            raise AirflowException(cause) from None

    def on_kill(self) -> None:
        super().on_kill()
        self._close_submission_runs(
            "KILLED",
            f"its Airflow task {self.task_id} was stopped (marked failed or success, "
            "cleared, or killed by the scheduler) while it ran",
        )

    def _close_submission_runs(self, status: str, cause: str) -> None:
        """Close the RUNNING runs this submission opened as ``status`` with ``cause``."""
        from balancebench.experiment.run_spec import GroupSpec
        from balancebench.state import tracking

        with contextlib.suppress(Exception):  # a failing task must not fail on the store
            _, value = self.application_args[:2]
            # The runs of one submission share its tag: the first cell's names them all.
            spec = GroupSpec.read(value)[0].cells[0]
            submission = spec.tags.get(tracking.SUBMISSION_TAG)
            if submission:
                closed = tracking.close_runs_of_dag_run(
                    spec.dag_id,
                    spec.dag_run_id,
                    status,
                    cause,
                    extra_filter=f"tags.`{tracking.SUBMISSION_TAG}` = '{submission}'",
                )
                log.info("closed MLflow run(s) %s as %s", closed, status)


def killed_by_signal(message: str) -> str | None:
    """The cause, in one line, of a ``spark-submit`` that a signal ended (the hook's
    message ends ``Error code is: -<signal>.`` and quotes the last output lines), else
    None. It names the strategy that was running, the signal and the last progress line
    the application printed."""
    import re
    import signal

    code = re.search(r"Error code is: -(\d+)\.", message)
    if code is None:
        return None
    number = int(code.group(1))
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = f"signal {number}"
    from balancebench.experiment.run_log import progress_lines, running_strategy

    progress = progress_lines(message)
    where = f"; its last progress line: {progress[-1]}" if progress else ""
    hint = ": the OOM killer, or a user" if number == signal.SIGKILL else ""
    running = running_strategy(progress)
    jvm = f"the Spark JVM of {running}" if running else "the Spark JVM (spark-submit)"
    return f"{jvm} was killed by {name} (signal {number}{hint}){where}"


class MlflowRunsListener:
    """Closes the MLflow runs a DAG run left RUNNING when it ends."""

    @hookimpl
    def on_dag_run_failed(self, dag_run: Any, msg: str) -> None:
        _close_open_runs(dag_run, msg)

    @hookimpl
    def on_dag_run_success(self, dag_run: Any, msg: str) -> None:
        _close_open_runs(dag_run, msg)


def _close_open_runs(dag_run: Any, msg: str) -> None:
    from balancebench.state import tracking

    try:
        closed = tracking.close_runs_of_dag_run(
            dag_run.dag_id,
            dag_run.run_id,
            "KILLED",
            f"its Airflow DAG run {dag_run.run_id} ended while the run was open: {msg}",
        )
    except Exception:  # a listener must never fail Airflow's own state change
        log.exception("could not close the MLflow runs of %s", dag_run.run_id)
        return
    if closed:
        log.info("closed MLflow run(s) %s of %s as KILLED", closed, dag_run.run_id)


class BalancebenchRunsPlugin(AirflowPlugin):
    name = "balancebench_runs"
    listeners = [MlflowRunsListener()]
