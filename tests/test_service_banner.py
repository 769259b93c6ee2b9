"""`make airflow`'s banner says what the service will start on its own: the next
scheduled run in UTC, how far away, what it runs, and how to turn it off (issue 60: a user
who started the service at 01:54 UTC saw the 02:00 sweep only in the DAG list)."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

INFRA = str(Path(__file__).resolve().parents[1] / "infra")
if INFRA not in sys.path:
    sys.path.insert(0, INFRA)

import service  # noqa: E402


def test_the_banner_names_the_next_run_in_utc_and_how_to_turn_it_off(monkeypatch):
    monkeypatch.setenv("BALANCEBENCH_NIGHTLY_CRON", "0 2 * * *")
    monkeypatch.setenv("BALANCEBENCH_MODEL_CRON", "none")
    at = datetime.datetime(2026, 12, 2, 1, 54, tzinfo=datetime.UTC)
    nightly, model = service.schedule_lines(at)
    assert nightly.startswith("nightly_sweep: next run 2026-12-02 02:00 UTC (in 0 h 06 min;")
    assert "cells x " in nightly and "BALANCEBENCH_NIGHTLY_CRON=none make airflow" in nightly
    assert model.startswith("model_experiment: not scheduled (BALANCEBENCH_MODEL_CRON=none)")
    later = service.schedule_lines(at.replace(hour=2, minute=1))[0]
    assert "next run 2026-12-03 02:00 UTC (in 23 h 59 min;" in later
