"""check-model's arithmetic on hand-made batches: which batches count, the errors, and
when the model and the measurement rank strategies alike; the wall shown only where the
cores suffice; the busiest executor's CPU and the stage wall from the REST API's tasks."""

from __future__ import annotations

import pytest

from balancebench.experiment.cost_model_check import (
    BatchCheck,
    Cores,
    rankings,
    relative_errors,
    report,
    same_ranking,
)
from balancebench.spark.rest_task_metrics import busiest_executor_cpu_s, stage_wall_s

#: A machine of 2 cores under 2 executors and a driver (this one), and one with room.
TWO_CORES = Cores(3, 2, "on this machine")
ROOMY = Cores(3, 8, "on this machine")


def check(name: str, r: int, b: int, model: float, measured: float) -> BatchCheck:
    """Routing 10 ms charged and 12 ms measured; nodes ``model`` and ``measured``; the
    wall twice the executors' CPU."""
    return BatchCheck(name, r, b, 0.01, model, 0.012, measured, 0.024, 2 * measured, measured)


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
    lines = report(checks, "hash", TWO_CORES)
    assert any(line.startswith("mnrt against hash") and "DIFFERENT" in line for line in lines)
    # The verdict first: the model's accounting against the executors' CPU, and its target
    assert lines[0].startswith("the model against the executors' CPU: median error")
    assert lines[0].endswith("target <= 15%: MISSED")


def test_a_measurement_too_noisy_to_decide_does_not_contradict_the_model():
    # qmmp: 20% cheaper under the model in every round; its measured wall swings +-40%
    # round to round around hash's, so the measured verdict decides nothing
    swings = [0.35, 0.15, 0.33, 0.17, 0.36]
    checks = [check("hash", r, 0, 0.20, 0.25) for r in range(5)]
    checks += [check("qmmp", r, 0, 0.16, w) for r, w in enumerate(swings)]
    model, measured = rankings(checks, "hash")["qmmp"]
    assert model.outcome == "faster" and not measured.decided
    assert same_ranking(model, measured) is None
    lines = report(checks, "hash", TWO_CORES)
    line = next(x for x in lines if x.startswith("qmmp against hash"))
    assert line.endswith(": measured undecided")


def test_the_stage_wall_runs_from_the_first_launch_to_the_last_end():
    tasks = [
        {"launchTime": "2026-11-29T03:00:00.100GMT", "duration": 300},
        {"launchTime": "2026-11-29T03:00:00.250GMT", "duration": 400},
    ]
    assert stage_wall_s(tasks) == pytest.approx(0.55)


def test_the_wall_is_compared_only_where_every_executor_and_the_driver_have_a_core():
    checks = [check("hash", r, 0, 0.20, 0.20 + 0.001 * r) for r in range(3)]
    checks += [check("qmmp", r, 0, 0.16, 0.16 + 0.001 * r) for r in range(3)]
    # On 2 cores: one line with the cores needed and found, no wall column or error
    tight = report(checks, "hash", TWO_CORES)
    assert any(
        line.startswith("wall time: not compared here") and "3 cores" in line and "2 found" in line
        for line in tight
    )
    assert not any("against the wall" in line or "wall nodes" in line for line in tight)
    # With room: the wall's columns, errors (the wall is twice the CPU: 50% off) and ranking
    roomy = report(checks, "hash", ROOMY)
    assert any("wall nodes" in line for line in roomy)
    wall = next(
        x for x in roomy if x.startswith("|model - measured| / measured against the wall, node")
    )
    assert "median 50." in wall
    assert any(line.startswith("qmmp against hash") and "; wall " in line for line in roomy)
    assert not any(line.startswith("wall time: not compared") for line in roomy)


def test_the_busiest_executor_is_its_tasks_summed():
    tasks = [
        {"executorId": "0", "taskMetrics": {"executorCpuTime": 30_000_000}},
        {"executorId": "1", "taskMetrics": {"executorCpuTime": 20_000_000}},
        {"executorId": "0", "taskMetrics": {"executorCpuTime": 15_000_000}},
    ]
    assert busiest_executor_cpu_s(tasks) == pytest.approx(0.045)
    assert busiest_executor_cpu_s([]) == 0.0
