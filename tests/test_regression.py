"""The nightly sweep's statistics and regression rule on hand-made figures."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from balancebench.experiment import regression
from balancebench.experiment.regression import HIGHER, LOWER, baseline, exact_changes, judge
from balancebench.orchestration.sweep_grid import DEFAULT_GRID, cells, validate_sweep_params


def test_baseline_is_the_best_rolling_worst_of_three():
    # Throughput: windows (10, 12, 11) -> 10, (12, 11, 13) -> 11, (11, 13, 9) -> 9: best 11.
    assert baseline([10, 12, 11, 13, 9], HIGHER) == 11
    # Latency mirrors it: worst = max of 3, best = min over windows.
    assert baseline([10, 12, 11, 13, 9], LOWER) == 12
    # Only the last 30 runs count: an old excellent value is forgotten.
    assert baseline([1000.0] * 3 + [10.0] * 30, HIGHER) == 10.0
    # Shorter histories use what there is.
    assert baseline([5.0], LOWER) == 5.0


def test_a_slowdown_beyond_four_percent_of_a_quiet_history_is_flagged():
    history = [1.00, 1.01, 0.99, 1.00, 1.00]  # stdev ~0.007: the 4% floor rules
    assert not judge("latency_p99_s", history, 1.03, LOWER).regressed
    verdict = judge("latency_p99_s", history, 1.10, LOWER)
    assert verdict.regressed
    assert verdict.baseline == pytest.approx(1.00)
    assert verdict.change == pytest.approx(0.10)
    assert "latency_p99_s" in verdict.text() and "lower is better" in verdict.text()
    # The good direction is respected: a faster run is not a regression.
    assert not judge("latency_p99_s", history, 0.5, LOWER).regressed
    assert judge("throughput_tuples_per_s", [100, 100, 100], 80, HIGHER).regressed
    assert not judge("throughput_tuples_per_s", [100, 100, 100], 130, HIGHER).regressed


def test_a_noisy_history_raises_the_threshold_to_two_standard_deviations():
    history = [1.0, 1.3, 0.8, 1.2, 0.9, 1.1]  # stdev ~0.19
    verdict = judge("latency_p50_s", history, 1.35, LOWER)
    assert verdict.threshold == pytest.approx(2 * 0.1871 / 1.35, rel=1e-3)
    assert not verdict.regressed  # 12.5% worse than the baseline, inside the noise
    assert judge("latency_p50_s", history, 2.0, LOWER).regressed


def test_no_history_no_verdict_and_bad_direction_refused():
    assert not judge("latency_p50_s", [], 1.0, LOWER).regressed
    assert judge("latency_p50_s", [], 1.0, LOWER).baseline is None
    assert not judge("latency_p50_s", [math.nan], 1.0, LOWER).regressed
    with pytest.raises(ValueError, match="direction"):
        judge("x", [1.0], 1.0, "sideways")


def test_exact_figures_report_any_change():
    before = {"migrated_tuples_total": 120.0, "result_digest": "abc"}
    assert exact_changes(before, dict(before)) == []
    changed = exact_changes(before, {"migrated_tuples_total": 121.0, "result_digest": "abd"})
    assert changed == ["migrated_tuples_total: 120.0 -> 121.0", "result_digest: abc -> abd"]


def test_sweep_grid_skips_pairs_a_strategy_cannot_serve_and_names_bad_fields():
    params = validate_sweep_params(
        {
            "grid": {
                "workloads": ["topk", "eq5"],
                "strategies": ["hash", "dynamic"],
                "zipf_s": [0.5, 1.0],
                "n_nodes": [4],
            }
        }
    )
    labels = [c.label for c in cells(params["grid"])]
    assert "topk · dynamic · s=0.5 · N=4" not in labels  # dynamic serves joins only
    assert "eq5 · dynamic · s=1 · N=4" in labels
    assert len(labels) == 6
    with pytest.raises(ValueError, match="grid.strategies"):
        validate_sweep_params(
            {
                "grid": {
                    "workloads": ["topk"],
                    "strategies": ["dynamic"],
                    "zipf_s": [1],
                    "n_nodes": [4],
                }
            }
        )
    with pytest.raises(ValueError, match="min_rounds"):
        validate_sweep_params({"min_rounds": 0})
    with pytest.raises(ValueError, match="max_rounds: 3 is below min_rounds 5"):
        validate_sweep_params({"max_rounds": 3})
    # A named baseline must be in every cell group (a group of one workload here).
    with pytest.raises(ValueError, match="baseline: 'pkg' is not among"):
        validate_sweep_params({"baseline": "pkg"})
    wide = {
        "workloads": ["topk"],
        "strategies": ["hash"],
        "zipf_s": [i / 100 for i in range(200)],
        "n_nodes": [4],
    }
    with pytest.raises(
        ValueError,
        match="200 zipf_s x 1 n_nodes x 3 max_rounds = 600 runs; allowed: at most 500 \\(max_runs",
    ):
        validate_sweep_params({"grid": wide, "min_rounds": 3, "max_rounds": 3})
    assert validate_sweep_params({"grid": wide, "min_rounds": 3, "max_rounds": 3, "max_runs": 600})
    # The size is refused from the axes' lengths, before a cell is built (a huge grid
    # must not be enumerated to be refused).
    huge = {**wide, "zipf_s": [i / 1e6 for i in range(1_000_000)], "n_nodes": list(range(1, 1025))}
    with pytest.raises(ValueError, match="= 3,072,000,000 runs"):
        validate_sweep_params({"grid": huge, "min_rounds": 3, "max_rounds": 3})
    # Bi6 on a grid N too small for 6 subgroups per group: named before any work, even
    # when another N of the grid would do.
    bi6 = {"workloads": ["eq5"], "strategies": ["hash", "bi6"], "zipf_s": [1], "n_nodes": [12, 8]}
    with pytest.raises(ValueError, match="n_nodes: bi6 needs at least"):
        validate_sweep_params({"grid": bi6})
    assert validate_sweep_params({"grid": {**bi6, "n_nodes": [12, 16]}})


def test_headline_figures_all_have_definitions():
    from balancebench.core.metric_definitions import METRIC_DEFINITIONS

    for name in [*regression.TIMED, *regression.EXACT]:
        assert name in METRIC_DEFINITIONS


def test_tonights_repetitions_count_as_noise_and_tiny_changes_never_alert():
    # One earlier sweep of two repetitions: alone it claims almost no noise...
    history, tonight = [1.47, 1.46], [2.4, 1.8]
    # ... but plan times of a few ms jitter by more than 4%: below 1 ms, no alert.
    assert not judge("plan_time_ms_mean", history, 2.1, LOWER, tonight).regressed
    # Tonight's spread widens the threshold: the same 30% drop alerts against a quiet
    # history alone but not once tonight's repetitions show that much noise.
    assert judge("throughput_tuples_per_s", [1.0, 1.0], 0.7, HIGHER).regressed
    verdict = judge("throughput_tuples_per_s", [1.0, 1.0], 0.7, HIGHER, [0.6, 0.8])
    assert verdict.threshold == pytest.approx(2 * pd.Series([1.0, 1.0, 0.6, 0.8]).std() / 0.7)
    assert not verdict.regressed
    # A real slow-down is far beyond both: 1.5 s of extra plan work per plan.
    assert judge("plan_time_ms_mean", history, 1502.0, LOWER, [1501.0, 1503.0]).regressed


def test_the_grid_is_its_axis_params_unless_a_json_grid_is_given():
    """The form's axis Params (multi-selects and number lists) build the grid; the JSON
    grid stays for scripts; both at once is refused, naming them."""
    params = validate_sweep_params(
        {
            "grid_workloads": ["topk"],
            "grid_strategies": ["hash", "mnrt"],
            "grid_zipf_s": " 1.2,0.8 ",  # typed as a person types it
            "grid_n_nodes": "4",
        }
    )
    assert params["grid"] == {
        "workloads": ["topk"],
        "strategies": ["hash", "mnrt"],
        "zipf_s": [1.2, 0.8],
        "n_nodes": [4],
    }
    assert [c.label for c in cells(params["grid"])] == [
        "topk · hash · s=1.2 · N=4",
        "topk · hash · s=0.8 · N=4",
        "topk · mnrt · s=1.2 · N=4",
        "topk · mnrt · s=0.8 · N=4",
    ]
    script = {"workloads": ["topk"], "strategies": ["hash"], "zipf_s": [1.0], "n_nodes": [8]}
    assert validate_sweep_params({"grid": script})["grid"] == script
    with pytest.raises(ValueError, match=r"grid: the JSON grid .*'grid_strategies'"):
        validate_sweep_params({"grid": script, "grid_strategies": ["qmmp"]})
    with pytest.raises(ValueError, match="grid_strategies"):
        validate_sweep_params({"grid_strategies": ["nope"]})
    # A number list that is not one, or whose numbers are out of range, names its field,
    # in words (no regex), before any work.
    for value, words in (
        ("0.8,,1", "'0.8,,1' is not numbers separated by commas"),
        ("[1.0]", "is not numbers separated by commas"),
        ("7", "grid_zipf_s.0: 7.0 is greater than the maximum of 5"),
        ("1, 1.0", "grid_zipf_s: [1.0, 1.0] has non-unique elements"),
    ):
        with pytest.raises(ValueError, match=re.escape(words)):
            validate_sweep_params({"grid_zipf_s": value})
    with pytest.raises(ValueError, match=r"grid_n_nodes: '4\.5' is not whole numbers"):
        validate_sweep_params({"grid_n_nodes": "4.5"})
    with pytest.raises(ValueError, match=r"grid_n_nodes\.0: 0 is less than the minimum of 1"):
        validate_sweep_params({"grid_n_nodes": "0"})


def test_the_form_draws_the_name_axes_as_multi_selects():
    from balancebench.orchestration.sweep_grid import SWEEP_PARAMS

    for axis in ("grid_workloads", "grid_strategies"):
        spec = SWEEP_PARAMS[axis]
        assert spec["type"] == "array" and spec["items"]["enum"]  # multi-select: test_dag.py
    # The number axes are one line of text (the form's list editor closes brackets while
    # you type), whose default is the default grid's axis.
    for axis in ("zipf_s", "n_nodes"):
        spec = SWEEP_PARAMS[f"grid_{axis}"]
        assert spec["type"] == "string"
        assert validate_sweep_params({})["grid"][axis] == DEFAULT_GRID[axis]
    assert SWEEP_PARAMS["grid"]["default"] is None


def test_checked_sweep_params_pass_the_check_again():
    """The CLI checks a sweep's Params at the door and the DAG checks them again: a typed
    grid axis must not then count as set beside the grid it built."""
    once = validate_sweep_params({"grid_zipf_s": "1.0", "grid_strategies": ["hash"]})
    twice = validate_sweep_params(once)
    assert (
        twice["grid"] == once["grid"] == {**DEFAULT_GRID, "zipf_s": [1.0], "strategies": ["hash"]}
    )
    # A number written as people write it; what is not a number list is refused, also by
    # the pattern alone (Airflow checks it with re.search before our door).
    assert validate_sweep_params({"grid_zipf_s": ".5, 1."})["grid"]["zipf_s"] == [0.5, 1.0]
    import re as regex

    from balancebench.orchestration.sweep_grid import SWEEP_PARAMS

    pattern = SWEEP_PARAMS["grid_zipf_s"]["pattern"]
    assert not regex.search(pattern, "0.8,,1") and not regex.search(pattern, "x1")
