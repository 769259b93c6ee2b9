"""Settings the DAG files read from the environment: the one place to change them.

- ``BALANCEBENCH_NIGHTLY_CRON``: when ``nightly_sweep`` runs (cron, default ``0 2 * * *``,
  02:00 in Airflow's time zone; ``none`` = only when triggered).
- ``BALANCEBENCH_MODEL_CRON``: when ``model_experiment`` runs on its defaults (default
  ``none``: only when triggered).
- ``BALANCEBENCH_TIMED_CONCURRENCY``: how many timed Spark runs of one DAG run may share
  the machine (default 1: runs that are compared must not compete for its cores). Logged
  on every run as the param ``timed_concurrency``.
- ``BALANCEBENCH_DRIVER_MEMORY``: ``spark-submit --driver-memory`` (default 4g).

The DAG processor reads them when it parses the DAG files: restart the service (``make
airflow-stop && make airflow``) after changing one.
"""

from __future__ import annotations

import os


def _cron(name: str, default: str | None) -> str | None:
    value = os.environ.get(name, default or "none").strip()
    return None if value.lower() in ("", "none") else value


NIGHTLY_CRON = _cron("BALANCEBENCH_NIGHTLY_CRON", "0 2 * * *")
MODEL_CRON = _cron("BALANCEBENCH_MODEL_CRON", None)
TIMED_CONCURRENCY = max(1, int(os.environ.get("BALANCEBENCH_TIMED_CONCURRENCY", "1")))
DRIVER_MEMORY = os.environ.get("BALANCEBENCH_DRIVER_MEMORY", "4g")
