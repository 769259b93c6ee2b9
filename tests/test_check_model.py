"""check-model's arithmetic on hand-made batches: which batches count, the errors, and
when the model and the measured wall rank strategies alike; the stage wall from the REST
API's task times."""

from __future__ import annotations

import pytest

from balancebench.check_model import (
    BatchCheck,
    rankings,
    relative_errors,
    report,
    same_ranking,
)
from balancebench.spark.rest_task_metrics import stage_wall_s


def check(name: str, r: int, b: int, model: float, measured: float) -> BatchCheck:
    return BatchCheck(name, r, b, 0.01, 0.012, model, measured)


def test_short_node_stages_are_left_out_and_errors_are_relative():
    checks = [
        check("hash", 0, 0, 0.10, 0.08),  # 25% off
        check("hash", 0, 1, 0.20, 0.20),  # exact
        check("hash", 0, 2, 0.01, 0.04),  # a 40 ms stage: left out
    ]
    assert relative_errors(checks, "node").tolist() == pytest.approx([0.25, 0.0])
    total = relative_errors(checks, "total")
    assert total.tolist() == pytest.approx([abs(0.11 - 0.092) / 0.092, abs(0.21 - 0.212) / 0.212])


def test_the_measured_wall_must_agree_where_the_model_decides():
    rounds = range(5)
    # qmmp: 20% cheaper under the model in every round, 15% under the measured wall;
    # mnrt: 20% cheaper under the model, 10% dearer when measured
    checks = [check("hash", r, 0, 0.20, 0.25 + 0.001 * r) for r in rounds]
    checks += [check("qmmp", r, 0, 0.16, 0.21 + 0.001 * r) for r in rounds]
    checks += [check("mnrt", r, 0, 0.16, 0.275 + 0.001 * r) for r in rounds]
    verdicts = rankings(checks, "hash")
    assert same_ranking(*verdicts["qmmp"]) is True
    assert same_ranking(*verdicts["mnrt"]) is False
    lines = report(checks, "hash")
    assert any(line.startswith("mnrt against hash") and "DIFFERENT" in line for line in lines)
    assert any("target: median node error <= 15%: MISSED" in line for line in lines)


def test_a_measurement_too_noisy_to_decide_does_not_contradict_the_model():
    # qmmp: 20% cheaper under the model in every round; its measured wall swings +-40%
    # round to round around hash's, so the measured verdict decides nothing
    swings = [0.35, 0.15, 0.33, 0.17, 0.36]
    checks = [check("hash", r, 0, 0.20, 0.25) for r in range(5)]
    checks += [check("qmmp", r, 0, 0.16, w) for r, w in enumerate(swings)]
    model, measured = rankings(checks, "hash")["qmmp"]
    assert model.outcome == "faster" and not measured.decided
    assert same_ranking(model, measured) is None
    line = next(x for x in report(checks, "hash") if x.startswith("qmmp against hash"))
    assert line.endswith(": measured undecided")


def test_the_stage_wall_runs_from_the_first_launch_to_the_last_end():
    tasks = [
        {"launchTime": "2026-11-29T03:00:00.100GMT", "duration": 300},
        {"launchTime": "2026-11-29T03:00:00.250GMT", "duration": 400},
    ]
    assert stage_wall_s(tasks) == pytest.approx(0.55)
