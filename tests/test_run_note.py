"""The DAG run's note (plugins/run_note.py): the answer and the MLflow link within
Airflow's 1,000 characters, and a clear line where there is no API to write it to."""

from __future__ import annotations

import sys
from pathlib import Path

PLUGINS = str(Path(__file__).resolve().parents[1] / "plugins")
if PLUGINS not in sys.path:
    sys.path.insert(0, PLUGINS)

from run_note import NOTE_LIMIT, note_text, set_run_note  # noqa: E402


def test_the_note_keeps_the_link_whole_and_cuts_the_answer_to_fit():
    link = "http://127.0.0.1:5000/#/experiments/1/runs/" + "a" * 32
    short = note_text(["qmmp against hash: capacity 17.3% faster [8.9%, 26.4%]"], link)
    assert short == f"qmmp against hash: capacity 17.3% faster [8.9%, 26.4%]\n\nMLflow: {link}"
    assert note_text([], link).startswith("no verdicts (")
    long = note_text(["x" * 600, "y" * 600], link)
    assert len(long) == NOTE_LIMIT and long.endswith(f"…\n\nMLflow: {link}")


def test_without_the_service_api_the_note_is_skipped_with_one_line(monkeypatch):
    monkeypatch.delenv("AIRFLOW__API__BASE_URL", raising=False)
    said = set_run_note("balance_experiment", "manual__x", "text")
    assert said.startswith("run note: no Airflow API here")
