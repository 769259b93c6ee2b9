"""Airflow ``Param`` objects from the library's JSON-schema Param specs.

The specs (``balancebench.experiment_params``, ``balancebench.model_sweep``) are
plain dicts so the library stays free of Airflow; every DAG turns them into ``Param``
here, in one place.
Airflow puts ``dags/`` on ``sys.path``, so the DAG files import it as ``dag_support.params``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from airflow.sdk import Param


def dag_params(
    specs: dict[str, dict[str, Any]], section: Callable[[str], str] | None = None
) -> dict[str, Param]:
    """One ``Param`` per spec: its ``default`` is the value, the rest is its JSON schema; a
    list of names (an array of ``enum`` items) a multi-select of them. ``section(name)``
    groups the trigger form (Airflow renders one panel per section)."""
    params = {}
    for name, spec in specs.items():
        schema = dict(spec)
        if section is not None:
            schema["section"] = section(name)
        items = schema.get("items")
        if schema.get("type") == "array" and isinstance(items, dict) and "enum" in items:
            # A list of names is a multi-select: Airflow's form draws the pick list from
            # ``examples`` (without it, a free-text box with no list of valid names).
            schema.setdefault("examples", list(items["enum"]))
        params[name] = Param(schema.pop("default"), **schema)
    return params
