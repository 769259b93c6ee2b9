"""Checks the experiment DAGs' closing tasks share (Airflow-only: they raise Airflow's
failure, so its alerting applies)."""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowFailException


def require_generated(generated: dict[str, Any] | None) -> dict[str, Any]:
    """The closing task runs with ``trigger_rule="all_done"``: when ``generate`` failed it
    receives nothing, and must say so rather than crash on a missing key."""
    if not generated:
        raise AirflowFailException("nothing ran: generate failed (see its log)")
    return generated
