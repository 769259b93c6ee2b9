"""Paper 003 model: M/M/1 check of the queue/consumer, counting correctness under
migration, the pure pieces of the strategies, params, determinism and the figure."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from balancebench.models.backpressure import (
    ALPHA_BETA_GRID,
    BackpressureModel,
    branch_scores,
    choose_light_branch,
    combine_partials,
    completed_fraction_series,
    credit_grant,
    exclusive_slots,
    expand_segments,
    is_backpressured,
    load_packets,
    migration_routes,
    record_segment,
    simulate_mm1,
    synthetic_packets,
)
from balancebench.models.contract import ModelPoint

MODEL = BackpressureModel()


def point(strategy: str, seed: int = 0, **params) -> ModelPoint:
    return ModelPoint("backpressure", strategy, params, seed=seed)


def expected_counts(packets: pd.DataFrame) -> dict[str, dict[str, float]]:
    grouped = packets.groupby("branch")["value"].agg(["sum", "count", "max", "mean"])
    return {
        str(tag): {k: float(row[k]) for k in ("sum", "count", "max", "mean")}
        for tag, row in grouped.iterrows()
    }


def as_floats(results: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    return {tag: {k: float(v) for k, v in r.items()} for tag, r in results.items()}


# ---- validation items of the issue ------------------------------------------------------


@pytest.mark.parametrize(("arrival_rate", "service_rate"), [(0.5, 1.0), (0.7, 1.0)])
def test_mm1_mean_sojourn_matches_theory_within_5_percent(arrival_rate, service_rate):
    # Given a single queue with Poisson arrivals and exponential service (the model's
    # NodeQueue + consumer_process), over a long run
    # When it is simulated
    result = simulate_mm1(arrival_rate, service_rate, customers=150_000, seed=7)
    # Then the mean sojourn time is within 5% of 1 / (mu - lambda)
    assert result["expected_sojourn_s"] == pytest.approx(1 / (service_rate - arrival_rate))
    assert result["relative_error"] < 0.05, result


def test_mm1_rejects_an_unstable_queue():
    with pytest.raises(ValueError, match="arrival_rate"):
        simulate_mm1(1.0, 1.0, 10, 0)


def test_counting_is_identical_with_and_without_migration_and_matches_pandas(tmp_path):
    # Given generated bursty, uneven packets (the data issue's generator)
    from balancebench.generators import generate

    dataset_dir, _ = generate("packets", tmp_path, {"packets_total_mb": 1000, "seed": 1})
    packets = load_packets(dataset_dir)
    # When credit (no migration) and migration run on the same packets
    runs = {
        s: MODEL.run(ModelPoint("backpressure", s, {}, seed=1, dataset_dir=str(dataset_dir)))
        for s in ("credit", "migration")
    }
    # Then migration did move packets (the comparison is not vacuous)
    assert runs["migration"].metrics["migrated_packets"] > 0
    assert runs["credit"].metrics["migrated_packets"] == 0
    # And per-tag sums, counts, max and averages are identical, and equal pandas' groupby
    credit = as_floats(runs["credit"].info["tag_results"])
    migration = as_floats(runs["migration"].info["tag_results"])
    assert credit == migration
    assert credit == expected_counts(packets)
    # And the recorded segments (tag, offset, length, branch) cover exactly the packets
    # processed off their home branch
    assert runs["migration"].info["bookkeeping_consistent"]


def test_counting_survives_heavy_migration_on_synthetic_traffic():
    # Given synthetic packets and exponential service (more reordering)
    params = MODEL.check_params(
        {"synthetic_total_mb": 400, "service_time_distribution": "exponential"}
    )
    packets = synthetic_packets(400, np.random.default_rng(11))
    # When both strategies count them
    credit = MODEL.simulate(packets, "credit", params, seed=2)
    migration = MODEL.simulate(packets, "migration", params, seed=2)
    # Then the counts agree with each other and with pandas
    assert migration.metrics["migrated_packets"] > 0
    assert as_floats(credit.info["tag_results"]) == as_floats(migration.info["tag_results"])
    assert as_floats(migration.info["tag_results"]) == expected_counts(packets)
    assert migration.info["bookkeeping_consistent"]


# ---- behaviour of the two mechanisms ----------------------------------------------------


def hot_spot_packets(n: int = 400, rate_packets_per_s: float = 100.0) -> pd.DataFrame:
    """Every packet tagged for branch 0 (the slowest), arriving faster than it can serve."""
    return pd.DataFrame(
        {
            "packet_id": np.arange(n),
            "time_s": np.arange(n) / rate_packets_per_s,
            "branch": np.zeros(n, dtype=np.int32),
            "size_mb": np.ones(n),
            "value": np.arange(1, n + 1),
        }
    )


def test_migration_spreads_a_hot_branch_and_finishes_earlier():
    # Given all traffic tagged for the slowest branch at 100 MB/s (it serves ~26 MB/s)
    params = MODEL.check_params({})
    packets = hot_spot_packets()
    # When each mechanism runs
    credit = MODEL.simulate(packets, "credit", params)
    migration = MODEL.simulate(packets, "migration", params)
    # Then credits push the pressure back to the source (no migration, long pauses)
    assert credit.metrics["migrated_packets"] == 0
    assert credit.metrics["data_source_paused_s"] > 0
    assert credit.info["branch_processed_mb"] == [400.0, 0.0, 0.0]
    # And migration detects the heavy branch, moves its packets to lighter ones, and ends
    # sooner with a more even load
    assert migration.metrics["backpressure_detections"] >= 1
    assert migration.metrics["migrations"] >= 1
    assert migration.metrics["migrated_mb"] > 0
    assert migration.metrics["completion_time_s"] < credit.metrics["completion_time_s"]
    assert migration.metrics["imbalance_max_over_mean"] < credit.metrics["imbalance_max_over_mean"]


def test_credit_never_overflows_and_stop_resume_signals_on_full_queues():
    # Given small branch queues and the hot-spot traffic
    params = MODEL.check_params({"branch_queue_packets": [8, 8, 8]})
    packets = hot_spot_packets(200)
    # When credit flow control runs, no queue can overflow: no stop signal on the network
    credit = MODEL.simulate(packets, "credit", params)
    assert credit.metrics["stop_signals"] == 0
    assert credit.metrics["credit_messages"] > 0
    assert credit.metrics["max_queue_use_share"] <= 1.0
    # And under the paper's stop/resume nodes a full branch queue sends stop upstream
    migration = MODEL.simulate(packets, "migration", params)
    assert migration.metrics["stop_signals"] >= 1
    assert migration.metrics["credit_messages"] == 0


def test_migration_can_run_on_credit_flow_control():
    params = MODEL.check_params({"migration_flow_control": "credit"})
    result = MODEL.simulate(hot_spot_packets(200), "migration", params)
    assert result.metrics["credit_messages"] > 0
    assert result.metrics["migrated_packets"] > 0
    assert result.info["flow_control"] == "credit"


def test_data_source_catch_up_keeps_the_schedule():
    # Given the hot spot: the data source is paused by the full source queue
    packets = hot_spot_packets(300)
    shift = MODEL.simulate(packets, "credit", MODEL.check_params({}))
    catch_up = MODEL.simulate(
        packets, "credit", MODEL.check_params({"data_source_pause": "catch_up"})
    )
    # Then with "shift" the pauses delay generation (latency from generation is shorter)
    # and with "catch_up" the waiting counts as latency
    assert shift.metrics["data_source_paused_s"] > 0
    assert catch_up.metrics["latency_mean_s"] > shift.metrics["latency_mean_s"]


# ---- result shape, determinism ----------------------------------------------------------


def test_result_has_the_common_metrics_and_the_5s_series():
    # Given the default synthetic input
    result = MODEL.run(point("migration", seed=3, synthetic_total_mb=300))
    # Then the common metrics and every metric are defined, finite and sane
    for name in (
        "plan_time_ms",
        "latency_p50_s",
        "latency_p95_s",
        "latency_p99_s",
        "throughput_mb_per_s",
        "imbalance_max_over_mean",
    ):
        assert name in result.metrics
    assert set(result.metrics) | set(result.series) <= set(MODEL.metric_definitions)
    assert all(math.isfinite(v) for v in result.metrics.values())
    assert result.metrics["total_mb"] == 300
    assert result.metrics["latency_p50_s"] <= result.metrics["latency_p99_s"]
    # And the completed fraction is sampled every 5 s, rises, and ends at 1
    assert np.allclose(np.diff([0.0, *result.time_s]), 5.0)
    fraction = result.series["completed_fraction"]
    assert fraction == sorted(fraction) and fraction[-1] == 1.0
    assert result.time_s[-1] >= result.metrics["completion_time_s"] > result.time_s[-1] - 5
    assert result.events > 0


@pytest.mark.parametrize("strategy", ["credit", "migration"])
def test_same_seed_same_result(strategy):
    params = {"synthetic_total_mb": 200, "service_time_distribution": "exponential"}
    first = MODEL.run(point(strategy, seed=9, **params))
    second = MODEL.run(point(strategy, seed=9, **params))
    other = MODEL.run(point(strategy, seed=10, **params))
    timing = {"plan_time_ms"}  # CPU time: a measurement, not a simulation output
    strip = lambda r: {k: v for k, v in r.metrics.items() if k not in timing}  # noqa: E731
    assert strip(first) == strip(second)
    assert first.series == second.series and first.events == second.events
    assert first.info == second.info
    assert strip(first) != strip(other)


# ---- params -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"alpha": 0.7, "beta": 0.5}, "backpressure_beta"),
        ({"branch_queue_packets": [8, 8]}, "backpressure_branch_queue_packets"),
        ({"recovery_queue_share": 0.9}, "backpressure_recovery_queue_share"),
        ({"sink_link_delay_s": [0.1, -1.0, 0.1]}, "sink_link_delay_s"),
        ({"alpha": 1.5}, "alpha"),
        ({"recovery_rule": "sometimes"}, "recovery_rule"),
        ({"no_such_param": 1}, "no_such_param"),
    ],
)
def test_bad_params_name_the_field(params, field):
    with pytest.raises(ValueError, match=field):
        MODEL.check_params(params)


def test_unknown_strategy_and_foreign_branches_are_rejected():
    with pytest.raises(ValueError, match="strategy"):
        MODEL.run(point("pkg"))
    packets = hot_spot_packets(10).assign(branch=3)
    with pytest.raises(ValueError, match="packets_branches"):
        MODEL.simulate(packets, "credit", MODEL.check_params({}))


def test_defaults_are_the_papers_values():
    p = MODEL.check_params({})
    assert (p["alpha"], p["beta"]) == (0.3, 0.5)
    assert p["backpressure_queue_share"] == 0.8 and p["resume_share"] == 0.5
    assert p["sample_interval_s"] == 5.0
    assert len(p["branch_service_rate_mb_per_s"]) == 3  # 5 nodes, 6 links
    assert (0.3, 0.5) in ALPHA_BETA_GRID
    assert all(a + b <= 1 for a, b in ALPHA_BETA_GRID)


# ---- pure pieces ------------------------------------------------------------------------


def test_backpressure_needs_high_queue_use_and_rising_input():
    assert is_backpressured(0.85, 10.0, 8.0)
    assert not is_backpressured(0.85, 8.0, 8.0)  # input = output: not rising
    assert not is_backpressured(0.8, 10.0, 8.0)  # exactly 80% is not above it
    assert not is_backpressured(0.5, 10.0, 1.0)


def test_branch_scores_worked_example():
    # Given Q = (0.9, 0.2, 0.1), IO = (20, 0, -10) MB/s, BW = (100, 150, 200) MB/s
    scores = branch_scores([0.9, 0.2, 0.1], [20, 0, -10], [100, 150, 200], 0.3, 0.5)
    # Then S = 0.3 Q + 0.5 IOn + 0.2 (1 - BWn), IOn = (1, 1/3, 0), BWn = (0.5, 0.75, 1)
    assert scores == pytest.approx([0.27 + 0.5 + 0.1, 0.06 + 0.5 / 3 + 0.05, 0.03])
    assert choose_light_branch(scores, excluded=[0]) == 2
    assert choose_light_branch(scores, excluded=[0, 1, 2]) is None
    assert migration_routes(3, [0], scores) == [2, 1, 2]
    assert migration_routes(3, [], scores) == [0, 1, 2]
    # Min-max BWn = (0, 0.5, 1): the slowest link weighs a full 0.2, not 0.1
    minmax = branch_scores([0.9, 0.2, 0.1], [20, 0, -10], [100, 150, 200], 0.3, 0.5, "min_max")
    assert minmax == pytest.approx([0.27 + 0.5 + 0.2, 0.06 + 0.5 / 3 + 0.1, 0.03])
    with pytest.raises(ValueError, match="bw_normalisation"):
        branch_scores([0.1], [0.0], [1.0], 0.3, 0.5, "mean")


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1), st.floats(-100, 100), st.floats(1, 1000)),
        min_size=1,
        max_size=6,
    ),
    st.floats(0, 1),
    st.floats(0, 1),
)
def test_branch_scores_lie_in_unit_interval(rows, alpha, beta):
    if alpha + beta > 1:
        alpha, beta = alpha / 2, beta / 2
    q, io, bw = (list(c) for c in zip(*rows, strict=True))
    for normalisation in ("max", "min_max"):
        scores = branch_scores(q, io, bw, alpha, beta, normalisation)
        assert np.all(scores >= -1e-12) and np.all(scores <= 1 + 1e-12)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), max_size=60))
def test_segments_cover_exactly_the_migrated_packets(dispatches):
    # Given packets of tags dispatched in order, each to some branch
    segments: list[list[int]] = []
    next_offset = [0, 0, 0]
    migrated = set()
    for tag, branch in dispatches:
        offset = next_offset[tag]
        next_offset[tag] += 1
        if branch != tag:
            record_segment(segments, tag, offset, branch)
            migrated.add((tag, offset, branch))
    # Then the segments expand to exactly the migrated packets, and never overlap
    assert expand_segments(segments) == migrated
    assert sum(s[2] for s in segments) == len(migrated)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2), st.integers(1, 1000)), min_size=1))
def test_partials_combine_to_the_direct_aggregate(rows):
    # Given values of tags processed on arbitrary branches
    sums = np.zeros((3, 3), dtype=np.int64)
    counts = np.zeros((3, 3), dtype=np.int64)
    maxima = np.zeros((3, 3), dtype=np.int64)
    for tag, branch, value in rows:
        sums[tag, branch] += value
        counts[tag, branch] += 1
        maxima[tag, branch] = max(maxima[tag, branch], value)
    # Then the combined partials equal the aggregate over all the values
    frame = pd.DataFrame(rows, columns=["branch", "where", "value"])
    assert as_floats({str(k): v for k, v in combine_partials(sums, counts, maxima).items()}) == (
        expected_counts(frame)
    )


def test_credit_grants_never_exceed_free_exclusive_slots():
    assert exclusive_slots(64, 3) == [22, 21, 21]
    assert sum(exclusive_slots(7, 7)) == 7
    assert credit_grant(22, 10, 5) == 7
    assert credit_grant(22, 20, 5) == 0


def test_completed_fraction_series_steps_and_ends_at_one():
    counted = np.array([1.0, 4.0, 6.0, 12.5])
    times, fraction = completed_fraction_series(counted, np.array([1.0, 1.0, 1.0, 1.0]), 5.0)
    assert times == [5.0, 10.0, 15.0]
    assert fraction == [0.5, 0.75, 1.0]


# ---- figure -----------------------------------------------------------------------------


def test_figure_mirrors_the_papers_plots(monkeypatch):
    results = [
        (p, MODEL.run(p))
        for total in (100, 200)
        for p in (
            point("credit", synthetic_total_mb=total),
            point("migration", synthetic_total_mb=total),
        )
    ]
    fig = MODEL.figure(results)
    first, second = fig.axes
    assert "time" in first.get_xlabel() and "%" in first.get_ylabel()
    assert {line.get_label() for line in first.lines} == {"credit", "migration"}
    assert "MB" in second.get_xlabel() and len(second.lines) == 2
    # With Fig. 7's volume among the totals: its completion curves too, then Fig. 8's.
    import balancebench.models.backpressure.backpressure_model as backpressure_model

    monkeypatch.setattr(backpressure_model, "FIG7_TOTAL_MB", 100.0)
    fig7, fig8, volume = MODEL.figure(results).axes
    assert "100 MB" in fig7.get_title() and "200 MB" in fig8.get_title()
    assert {line.get_label() for line in fig7.lines} == {"credit", "migration"}
    assert "MB" in volume.get_xlabel()


def test_lines_of_one_strategy_are_named_by_what_the_grid_varies():
    # Given migration under two recovery rules at two volumes
    results = [
        (p, MODEL.run(p))
        for total in (100, 200)
        for rule in ("any_listed", "per_node")
        for p in (point("migration", synthetic_total_mb=total, recovery_rule=rule),)
    ]
    # Then each completion curve and each volume line names its rule, not only "migration"
    first, second = MODEL.figure(results).axes
    expected = {"migration · recovery_rule any_listed", "migration · recovery_rule per_node"}
    assert {line.get_label() for line in first.lines} == expected
    assert {line.get_label() for line in second.lines} == expected


def test_a_grid_over_the_weights_draws_table_1_with_its_axes_named():
    # Given migration at two alphas x two betas under both BWn readings, 2 repetitions each
    results = [
        (p, MODEL.run(p))
        for a in (0.1, 0.3)
        for b in (0.1, 0.3)
        for norm in ("max", "min_max")
        for rep in (0, 1)
        for p in [
            point(
                "migration", seed=rep, synthetic_total_mb=60, alpha=a, beta=b, bw_normalisation=norm
            )
        ]
    ]
    # When the figure is drawn
    axes = MODEL.figure(results).axes
    # Then one panel per normalisation, alpha on x, one line per beta named by its weight
    assert [ax.get_title() for ax in axes] == [
        "migration, BWn = BW / max",
        "migration, BWn min-max",
    ]
    for ax in axes:
        assert "alpha" in ax.get_xlabel() and "completion" in ax.get_ylabel()
        labels = sorted(text.get_text() for text in ax.get_legend().get_texts())
        assert labels == ["beta (weight of IOn) = 0.1", "beta (weight of IOn) = 0.3"]


def test_total_mb_takes_a_prefix_of_the_input_and_rejects_more_than_there_is():
    # Given 300 MB of synthetic traffic
    # When a point asks for its first 120 MB
    result = MODEL.run(point("credit", seed=3, synthetic_total_mb=300, total_mb=120))
    # Then exactly that volume is counted
    assert result.metrics["total_mb"] == 120
    # And asking for more than the input holds names the field before any simulation
    with pytest.raises(ValueError, match="backpressure_total_mb"):
        MODEL.run(point("credit", seed=3, synthetic_total_mb=100, total_mb=120))


def test_recovery_rules_release_what_each_reading_of_step_5_says():
    from balancebench.models.backpressure import released_nodes

    use = [0.9, 0.2, 0.8]  # node 1 has drained below the level, nodes 0 and 2 have not
    listed = {0, 1, 2}
    # The paper: one listed node below the level ends the migration for all.
    assert released_nodes(listed, use, 0.3, "any_listed") == {0, 1, 2}
    assert released_nodes(listed, use, 0.3, "all_listed") == set()
    assert released_nodes(listed, use, 0.3, "per_node") == {1}
    assert released_nodes({0, 2}, use, 0.3, "any_listed") == set()
    assert released_nodes({1}, use, 0.3, "all_listed") == {1}
    assert released_nodes(set(), use, 0.3, "any_listed") == set()
