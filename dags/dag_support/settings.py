"""Settings the DAG files read from the environment: the one place to change them.

- ``BALANCEBENCH_NIGHTLY_CRON``: when ``nightly_sweep`` runs (cron, default ``0 2 * * *``,
  02:00 UTC; ``none`` = only when triggered).
- ``BALANCEBENCH_MODEL_CRON``: when ``model_experiment`` runs on its defaults (default
  ``none``: only when triggered).
- ``BALANCEBENCH_TIMED_CONCURRENCY``: how many timed Spark runs of one DAG run may share
  the machine (default 1: runs that are compared must not compete for its cores). Logged
  on every run as the param ``timed_concurrency``.
- ``BALANCEBENCH_DRIVER_MEMORY``: ``spark-submit --driver-memory`` (default 4g; 2g for
  ``model_experiment``'s sweep).

The DAG processor reads them when it parses the DAG files: restart the service (``make
airflow-stop && make airflow``) after changing one. A scheduled DAG's first run is the
next slot *after* the service starts, never the one just past (``schedule_after_start``).
"""

from __future__ import annotations

import datetime
import os

from airflow.sdk import CronTriggerTimetable


def schedule_after_start(cron: str | None) -> CronTriggerTimetable | None:
    """A cron schedule (UTC) whose first run is the next slot after the DAG is first seen.

    A cron string alone, or ``run_immediately=False``, still runs the slot just past when
    it is less than 10% of the period ago (Airflow 3's ``_calc_first_run`` treats
    ``False`` like ``None``): ``make airflow`` at 02:16 started the full 02:00 sweep at
    once. ``run_immediately=timedelta(0)`` (a zero buffer) never does."""
    if cron is None:
        return None
    return CronTriggerTimetable(cron, timezone="UTC", run_immediately=datetime.timedelta(0))


def _cron(name: str, default: str | None) -> str | None:
    value = os.environ.get(name, default or "none").strip()
    return None if value.lower() in ("", "none") else value


NIGHTLY_CRON = _cron("BALANCEBENCH_NIGHTLY_CRON", "0 2 * * *")
MODEL_CRON = _cron("BALANCEBENCH_MODEL_CRON", None)
TIMED_CONCURRENCY = max(1, int(os.environ.get("BALANCEBENCH_TIMED_CONCURRENCY", "1")))
DRIVER_MEMORY = os.environ.get("BALANCEBENCH_DRIVER_MEMORY", "4g")
MODEL_DRIVER_MEMORY = os.environ.get("BALANCEBENCH_DRIVER_MEMORY", "2g")
