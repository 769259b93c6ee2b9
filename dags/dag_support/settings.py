"""The settings the DAG files read from the environment, as the DAGs use them: the cron
schedules of ``nightly_sweep`` and ``model_experiment``, how many timed Spark runs of one
DAG run may share the machine (logged on every run as the param ``timed_concurrency``) and
``spark-submit --driver-memory`` (2g for ``model_experiment``'s sweep when unset). What
each allows and its default are in the one registry,
``balancebench.state.environment`` (the README's "Settings from the environment"), which the
values below are read through.

The DAG processor reads them when it parses the DAG files: restart the service (``make
airflow-stop && make airflow``) after changing one. A scheduled DAG's first run is the
next slot *after* the service starts, never the one just past (``schedule_after_start``).
"""

from __future__ import annotations

import datetime

from airflow.sdk import CronTriggerTimetable

from balancebench.state.environment import setting


def schedule_after_start(cron: str | None) -> CronTriggerTimetable | None:
    """A cron schedule (UTC) whose first run is the next slot after the DAG is first seen.

    A cron string alone, or ``run_immediately=False``, still runs the slot just past when
    it is less than 10% of the period ago (Airflow 3's ``_calc_first_run`` treats
    ``False`` like ``None``): ``make airflow`` at 02:16 started the full 02:00 sweep at
    once. ``run_immediately=timedelta(0)`` (a zero buffer) never does."""
    if cron is None:
        return None
    return CronTriggerTimetable(cron, timezone="UTC", run_immediately=datetime.timedelta(0))


def schedule_description(cron: str | None, variable: str) -> str:
    """The DAG's description: its schedule with the time zone, which Airflow's own
    schedule text ("At 02:00") leaves out, and the variable that sets it."""
    if cron is None:
        return f"Runs when triggered (no schedule: {variable} is none)."
    return f"Scheduled at cron '{cron}' in UTC ({variable}); runs when triggered too."


# Read through the one registry (balancebench.state.environment): a bad value fails this import
# naming the variable (and `make airflow` refuses to start with it before that).
NIGHTLY_CRON = setting("BALANCEBENCH_NIGHTLY_CRON")
MODEL_CRON = setting("BALANCEBENCH_MODEL_CRON")
TIMED_CONCURRENCY = setting("BALANCEBENCH_TIMED_CONCURRENCY")
DRIVER_MEMORY = setting("BALANCEBENCH_DRIVER_MEMORY")
MODEL_DRIVER_MEMORY = setting("BALANCEBENCH_DRIVER_MEMORY", default="2g")
