"""Airflow ``Param`` objects from the library's JSON-schema Param specs.

The specs (``balancebench.experiment.params``, ``balancebench.experiment.model_sweep``) are
plain dicts so the library stays free of Airflow; every DAG turns them into ``Param``
here, in one place.
Airflow puts ``dags/`` on ``sys.path``, so the DAG files import it as ``dag_support.params``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from airflow.sdk import Param

#: The one section Airflow 3's trigger form opens (its ``flexibleFormDefaultSection``,
#: the accordion's ``defaultValue``; every other section starts collapsed): the fields a
#: user sets for a first run go here.
OPEN_SECTION = "Run Parameters"


def dag_params(
    specs: dict[str, dict[str, Any]],
    section: Callable[[str], str] | None = None,
    first: Sequence[str] = (),
) -> dict[str, Param]:
    """One ``Param`` per spec: its ``default`` is the value, the rest is its JSON schema; a
    list of names (an array of ``enum`` items) a multi-select of them. ``section(name)``
    groups the trigger form (Airflow renders one panel per section, in the order of their
    first field); the ``first`` fields come first, in the one section the form opens."""
    unknown = [n for n in first if n not in specs]
    if unknown:
        raise ValueError(f"first: {unknown} are not Params; allowed: {sorted(specs)}")
    params = {}
    for name in [*first, *(n for n in specs if n not in first)]:
        schema = dict(specs[name])
        if name in first:
            schema["section"] = OPEN_SECTION
        elif section is not None:
            schema["section"] = section(name)
        items = schema.get("items")
        if schema.get("type") == "array" and isinstance(items, dict) and "enum" in items:
            # A list of names is a multi-select: Airflow's form draws the pick list from
            # ``examples`` (without it, a free-text box with no list of valid names).
            schema.setdefault("examples", list(items["enum"]))
        params[name] = Param(schema.pop("default"), **schema)
    return params
