"""The tracking API: opening the store has no side effect; closing what dead commands left
behind is an explicit call (``tracking.reap_orphans``) that the entry points make."""

from __future__ import annotations

import json
import socket

from balancebench import reaper, tracking


def test_opening_the_store_closes_nothing_and_reap_orphans_closes_a_dead_owners_run(
    local_state, monkeypatch
):
    # Given a RUNNING run whose owner process is gone (a pid above the kernel's pid_max)
    monkeypatch.setattr(tracking, "_REAPED", set())
    dead = json.dumps({"host": socket.gethostname(), "pid": 99999999, "start": "1"})
    experiment = tracking.ensure_experiment("tracking-reap-explicit")
    run_id = tracking.client().create_run(experiment, tags={reaper.OWNER_TAG: dead}).info.run_id
    alive = tracking.client().create_run(experiment).info.run_id  # no owner: never judged

    # When the store is opened again, as any reader does
    tracking.store()
    # Then the run is left as it is
    assert tracking.client().get_run(run_id).info.status == "RUNNING"

    # When an entry point reaps
    tracking.reap_orphans("a test entry point")
    # Then the dead owner's run is closed KILLED with the reason, the other left running
    closed = tracking.client().get_run(run_id)
    assert closed.info.status == "KILLED"
    assert "a test entry point" in closed.data.tags[reaper.REASON_TAG]
    assert tracking.client().get_run(alive).info.status == "RUNNING"
    tracking.end_run(alive, "FINISHED")
