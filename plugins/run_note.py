"""The DAG run's note: the answer and the MLflow link where a user of Airflow's UI looks
first (Airflow-only glue).

A task cannot write its own DAG run's note through the Task SDK, so the closing task
writes it as the UI would: through the service's REST API, logged in as the service's
user (``make airflow``: the API's address in ``[api] base_url``, the login in the Simple
auth manager's passwords file, both set by ``infra/service.py`` for every component).
``make run``'s embedded Airflow serves no API: there the note is skipped with one line,
and the terminal shows the answer instead. Nothing here reaches a shell; the note's text
is sent as JSON.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

#: Airflow keeps at most this many characters of a DAG run's note.
NOTE_LIMIT = 1000


def _api() -> tuple[str, str, str] | None:
    """The service's API address, user and password, or None where there is none."""
    base = os.environ.get("AIRFLOW__API__BASE_URL")
    passwords = os.environ.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE")
    if not base or not passwords or not Path(passwords).is_file():
        return None
    users = json.loads(Path(passwords).read_text())
    if not users:
        return None
    user, password = next(iter(users.items()))
    return base.rstrip("/"), user, password


def _call(url: str, method: str, body: dict, token: str | None = None) -> dict:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, json.dumps(body).encode(), headers, method=method)
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read() or b"null")


def note_text(answer: list[str], link: str) -> str:
    """The note: the answer lines, then the MLflow link, within Airflow's limit (the link
    kept whole: the lines are cut first)."""
    tail = f"\n\nMLflow: {link}"
    head = "\n".join(answer) or "no verdicts (one strategy, or none finished its rounds)"
    room = NOTE_LIMIT - len(tail)
    if len(head) > room:
        head = head[: room - 1] + "…"
    return head + tail


def set_run_note(dag_id: str, run_id: str, text: str) -> str:
    """Write ``text`` as the DAG run's note; returns what happened, in one line."""
    found = _api()
    if found is None:
        return "run note: no Airflow API here (make run's embedded Airflow has none)"
    base, user, password = found
    try:
        token = _call(f"{base}/auth/token", "POST", {"username": user, "password": password})
        dag, run = (urllib.parse.quote(p, safe="") for p in (dag_id, run_id))
        _call(
            f"{base}/api/v2/dags/{dag}/dagRuns/{run}?update_mask=note",
            "PATCH",
            {"note": text},
            token["access_token"],
        )
    except (OSError, urllib.error.URLError, KeyError, ValueError) as exc:
        return f"run note: not written ({exc})"
    return "run note: written (the answer and the MLflow link)"
