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


def test_a_failed_first_postgres_start_is_tried_once_more_only_on_an_empty_folder(
    monkeypatch, tmp_path, capsys
):
    """CI once saw initdb refuse a new data folder's chmod beside a second service starting:
    the start is tried once more while the folder is still empty (nothing to lose), never
    on a folder that holds data."""
    import pytest

    calls = []

    class Failing:
        def get_server(self, *a, **k):
            calls.append(1)
            raise OSError("initdb: could not change permissions")

    monkeypatch.setenv("BALANCEBENCH_LOCAL", str(tmp_path))
    monkeypatch.setattr(service, "_pgserver", Failing)
    monkeypatch.setattr(service, "_ensure_system_user", lambda: None)
    monkeypatch.setattr(service.time, "sleep", lambda s: None)
    with pytest.raises(SystemExit, match="PostgreSQL did not start"):
        service.start_postgres("pw")
    assert len(calls) == 2 and "once more" in capsys.readouterr().out
    # A folder with data in it: no second try.
    calls.clear()
    (service.pg_dir()).mkdir(parents=True, exist_ok=True)
    (service.pg_dir() / "PG_VERSION").write_text("18\n")
    with pytest.raises(SystemExit):
        service.start_postgres("pw")
    assert len(calls) == 1
