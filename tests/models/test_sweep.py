"""The model sweep: Params, points, one Spark task per point, MLflow children."""

from __future__ import annotations

import json

import numpy as np
import pytest

from balancebench.experiment.model_sweep import (
    MODEL_EXPERIMENT_PARAMS,
    grid_points,
    log_sweep,
    model_points,
    run_points_local,
    summarize_point,
    validate_model_params,
)
from balancebench.models import MODELS, get_model, model_strategies
from balancebench.models.contract import ModelPoint, ModelResult

#: Small, fast points of the back-pressure model (no dataset: synthetic traffic).
SMALL = {"model": "backpressure", "backpressure_synthetic_total_mb": 200, "repetitions": 2}


def test_every_model_is_registered_with_unique_strategies_and_defined_metrics():
    # Given the registry
    assert set(MODELS) == {"scheduling", "elastic", "backpressure", "overlay"}
    strategies = model_strategies()
    for name in MODELS:
        model = get_model(name)
        # Then its strategies map back to it, and its Params are DAG Params
        assert all(strategies[s] == name for s in model.strategies)
        assert all(f"{name}_{p}" in MODEL_EXPERIMENT_PARAMS for p in model.param_schema)
        assert model.metric_definitions, name


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"model": "nope"}, "model"),
        ({"model": "overlay", "strategies": ["credit"]}, "'credit' is not a overlay strategy"),
        ({"model": "overlay", "grid": {"backpressure_alpha": [0.1]}}, "grid: 'backpressure_alpha'"),
        (
            {"model": "backpressure", "grid": {"backpressure_alpha": [0.3, 7]}},
            "grid.backpressure_alpha",
        ),
        ({"model": "overlay", "repetitions": 0}, "repetitions"),
    ],
)
def test_bad_sweep_params_name_the_field(values, needle):
    with pytest.raises(ValueError) as err:
        validate_model_params(values)
    assert needle in str(err.value)


def test_points_cover_strategy_x_grid_x_repetition_with_common_seeds():
    # Given two strategies, a 2-value grid and 3 repetitions
    params = validate_model_params(
        {**SMALL, "repetitions": 3, "grid": {"backpressure_alpha": [0.2, 0.3]}}
    )
    points = model_points(params, None)
    # Then every combination is there once
    assert len(points) == 2 * 2 * 3
    assert len({(p.strategy, p.params["alpha"], p.repetition) for p in points}) == 12
    # And repetition r has the same seed for every strategy and grid value (common random
    # numbers), different seeds across repetitions
    seeds = {(p.repetition, p.seed) for p in points}
    assert len(seeds) == 3
    assert grid_points({}) == [{}]


def test_points_round_trip_as_json_and_run_deterministically():
    params = validate_model_params({**SMALL, "repetitions": 1})
    points = model_points(params, None)
    assert [ModelPoint.from_json(p.to_json()) for p in points] == points
    first = run_points_local(points)
    second = run_points_local(points)
    for (_, a, _), (_, b, _) in zip(first, second, strict=True):
        # Simulated numbers reproduce exactly; plan_time_ms is CPU time, measured anew
        drop = {"plan_time_ms"}
        assert {k: v for k, v in a.metrics.items() if k not in drop} == {
            k: v for k, v in b.metrics.items() if k not in drop
        }


def test_log_sweep_writes_one_child_per_strategy_and_point(tmp_path):
    from balancebench.state import tracking

    # Given a 2-value grid, 2 strategies, 2 repetitions
    params = validate_model_params({**SMALL, "grid": {"backpressure_alpha": [0.2, 0.3]}})
    results = run_points_local(model_points(params, None))
    parent = tracking.start_parent_run("models-test", params, "test", "run-1", "digest")
    # When the sweep is logged
    rows = log_sweep(params, results, parent, tracking.flat_params(params), tmp_path)
    # Then there are 4 children, each with the point's value, means and spreads, the series
    children = tracking.child_runs(parent)
    assert len(children) == len(rows) == 4
    assert set(children["params.point.alpha"]) == {"0.2", "0.3"}
    assert set(children["params.strategy"]) == {"credit", "migration"}
    for row in rows:
        assert "completion_time_s" in row and "completion_time_s_rep_std" in row
        assert row["model_events_per_s"] > 0
    client = tracking.client()
    rid = rows[0]["run_id"]
    series = client.get_metric_history(rid, "completed_fraction")
    times = client.get_metric_history(rid, "series_time_s")
    assert len(series) == len(times) > 1
    raw = json.loads((tmp_path / next(p.name for p in tmp_path.iterdir())).read_text())
    assert len(raw) == 2 and ModelResult.from_dict(raw[0]["result"]).events > 0
    assert all(children["status"] == "FINISHED")


@pytest.mark.slow
def test_points_run_as_spark_tasks_give_the_local_results(spark):
    from balancebench.experiment.model_sweep import run_points_on_spark

    # Given a few points of two models
    points = model_points(validate_model_params({**SMALL, "repetitions": 2}), None)
    points += model_points(
        validate_model_params(
            {
                "model": "overlay",
                "repetitions": 1,
                "overlay_duration_s": 6.0,
                "overlay_nodes": 30,
                "overlay_subnets": 3,
            }
        ),
        None,
    )
    # When they run as one Spark task each, and locally
    on_spark = run_points_on_spark(spark, points)
    local = run_points_local(points)
    # Then the simulated results agree exactly, in the points' order
    assert [p for p, _, _ in on_spark] == points
    for (_, a, _), (_, b, _) in zip(on_spark, local, strict=True):
        assert a.series == b.series and a.events == b.events
        assert a.metrics.keys() == b.metrics.keys()


def test_a_points_summary_has_the_repetitions_and_a_t_interval_of_the_mean():
    # Given 3 repetitions of one strategy on synthetic packets (each repetition its seed)
    params = validate_model_params(
        {**SMALL, "repetitions": 3, "strategies": ["migration"], "grid": {}}
    )
    results = run_points_local(model_points(params, None))
    values = [r.metrics["completion_time_s"] for _, r, _ in results]
    # When they are summarised
    row = summarize_point(results)
    # Then the mean is theirs, the interval is Student's t on 3 values, and the count is 3
    assert row["repetitions"] == 3.0
    assert row["completion_time_s"] == pytest.approx(sum(values) / 3)
    assert len(set(values)) > 1, "the repetitions' seeds should give different packets"
    lo, hi = row["completion_time_s_ci95_lo"], row["completion_time_s_ci95_hi"]
    half = 4.302653 * float(np.std(values, ddof=1)) / 3**0.5  # t(0.975, 2)
    assert (lo, hi) == pytest.approx(
        (row["completion_time_s"] - half, row["completion_time_s"] + half)
    )
    # And one repetition has no spread to report
    one = summarize_point(results[:1])
    assert one["repetitions"] == 1.0 and "completion_time_s_ci95_lo" not in one
