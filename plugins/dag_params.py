"""Airflow ``Param`` objects from the library's JSON-schema Param specs.

The specs (``balancebench.params``, ``balancebench.models.sweep``) are plain dicts so the
library stays free of Airflow; every DAG turns them into ``Param`` here, in one place.
Airflow puts this folder on ``sys.path`` (``AIRFLOW__CORE__PLUGINS_FOLDER``).
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param


def dag_params(specs: dict[str, dict[str, Any]]) -> dict[str, Param]:
    """One ``Param`` per spec: its ``default`` is the value, the rest is its JSON schema."""
    params = {}
    for name, spec in specs.items():
        schema = dict(spec)
        params[name] = Param(schema.pop("default"), **schema)
    return params
