"""The ``elastic`` model (paper 001): the issue's validation items and the model contract."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from balancebench.core.routing_table import BucketMap
from balancebench.models.contract import ModelPoint, ModelResult
from balancebench.models.elastic import (
    ElasticConfig,
    ElasticModel,
    mixture_quantiles,
    new_node_count,
    offload_buckets,
    open_window_start,
    provision_by_count,
    reference_windowed_count,
    sample_phone_stream,
    simulate_elastic,
    simulate_windowed_count,
    state_transfer_s,
    step_bucket_shares,
    window_protocol_times,
)
from balancebench.strategies.balanceload import balance_load

MODEL = ElasticModel()
#: Small, fast runs: 200 simulated seconds, 40 periods, a 20k-tuple built-in stream.
FAST = {"duration_s": 200.0, "sample_tuples": 20_000, "rate_step_at_s": 100.0}
COMMON_METRICS = (
    "plan_time_ms",
    "latency_p50_s",
    "latency_p95_s",
    "latency_p99_s",
    "throughput_tuples_per_s",
    "imbalance_max_over_mean",
)


def run(strategy: str, seed: int = 1, **params: object) -> ModelResult:
    p = MODEL.check_params({**FAST, **params})
    return MODEL.run(ModelPoint("elastic", strategy, p, seed=seed))


def node_changes(result: ModelResult) -> list[dict]:
    return [r for r in result.info["reconfigurations"] if r["nodes_after"] != r["nodes_before"]]


# ---- validation: node count ------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["elastic_scaling", "elastic_balanceload"])
@pytest.mark.parametrize("protocol", ["window", "state"])
def test_constant_rate_keeps_the_node_count(strategy, protocol):
    # given a constant input rate with U_av at TUT
    # when the elastic controller runs for 40 periods
    result = run(strategy, protocol=protocol, rate_step_factor=1.0)
    # then the node count never changes
    assert set(result.series["nodes"]) == {15.0}
    assert node_changes(result) == []


@pytest.mark.parametrize("strategy", ["elastic_scaling", "elastic_balanceload"])
@pytest.mark.parametrize("protocol", ["window", "state"])
def test_doubled_rate_provisions_the_predicted_count_in_one_step(strategy, protocol):
    # given the input rate doubles at a period boundary (t = 100 s)
    result = run(strategy, protocol=protocol, rate_step_factor=2.0)
    # when the controller reacts
    changes = node_changes(result)
    # then exactly one provisioning happens, to ceil(15 * U_av / TUT) nodes, and no cascade
    assert len(changes) == 1
    change = changes[0]
    assert change["kind"] == "provision" and change["time_s"] == pytest.approx(105.0)
    assert change["u_av"] == pytest.approx(1.4, rel=0.01)
    assert change["nodes_after"] == math.ceil(15 * change["u_av"] / 0.7 - 1e-9)
    nodes = np.asarray(result.series["nodes"])
    assert set(nodes[result.time_s.index(110.0) :]) == {float(change["nodes_after"])}
    # and U_av is back inside [LUT, UUT] afterwards
    assert 0.5 <= result.series["utilization_mean"][-1] <= 0.9


@pytest.mark.parametrize("strategy", ["elastic_scaling", "elastic_balanceload"])
def test_halved_rate_offloads_then_decommissions_once(strategy):
    # given the input rate halves at t = 100 s (U_av = 0.35 < LUT)
    result = run(strategy, rate_step_factor=0.5)
    changes = node_changes(result)
    # then one decommission to ceil(15 * 0.35 / 0.7) = 8 nodes, each left with buckets
    assert [c["kind"] for c in changes] == ["decommission"]
    assert changes[0]["nodes_after"] == math.ceil(15 * changes[0]["u_av"] / 0.7 - 1e-9) == 8
    assert result.metrics["nodes_final"] == 8.0
    assert len(result.info["buckets_per_node_final"]) == 8
    assert sum(result.info["buckets_per_node_final"]) == 1024


def test_new_node_count_rule():
    # given TUT 0.7, band [0.5, 0.9]: inside the band nothing changes, outside ceil(old*U/TUT)
    kw = {"tut": 0.7, "lut": 0.5, "uut": 0.9}
    assert new_node_count(15, 0.7, **kw) == 15
    assert new_node_count(15, 0.9, **kw) == 15
    assert new_node_count(15, 1.4, **kw) == 30
    assert new_node_count(15, 0.35, **kw) == 8
    assert new_node_count(15, 1.4, max_nodes=20, **kw) == 20
    assert new_node_count(2, 0.01, min_nodes=1, **kw) == 1


# ---- validation: protocols lose and duplicate no result tuple --------------------------

WINDOWS = st.sampled_from([(1.0, 1.0), (2.0, 1.0), (3.0, 1.0), (2.0, 0.5), (4.0, 2.0)])


@st.composite
def protocol_cases(draw):
    n = draw(st.integers(50, 300))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    times = np.sort(rng.uniform(0.0, 20.0, n)).round(4)
    keys = rng.integers(0, draw(st.integers(1, 30)), n)
    n_buckets = draw(st.integers(1, 12))
    n_tasks = draw(st.integers(1, 4))
    owner = rng.integers(0, n_tasks, n_buckets)
    moves = [
        (
            draw(st.floats(0.0, 22.0, allow_nan=False)),
            draw(st.integers(0, n_buckets - 1)),
            draw(st.integers(0, n_tasks)),  # may be a new task
        )
        for _ in range(draw(st.integers(0, 8)))
    ]
    window_s, slide_s = draw(WINDOWS)
    latency = draw(st.sampled_from([0.0, 0.3, 2.5, 9.0]))  # up to longer than the window
    return times, keys, owner, moves, window_s, slide_s, latency


@pytest.mark.parametrize("protocol", ["window", "state"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=protocol_cases())
def test_protocols_lose_and_duplicate_no_result_tuple(protocol, case):
    times, keys, owner, moves, window_s, slide_s, latency = case
    kw = {"window_s": window_s, "slide_s": slide_s, "transfer_latency_s": latency}
    # given a run without reconfiguration and the single-node answer
    baseline = simulate_windowed_count(times, keys, owner, [], protocol=protocol, **kw)
    expected = reference_windowed_count(times, keys, window_s=window_s, slide_s=slide_s)
    # when buckets move at random times to random tasks
    moved = simulate_windowed_count(times, keys, owner, moves, protocol=protocol, **kw)
    # then the multiset of (window, number, count) is the same
    assert baseline.results == expected
    assert moved.results == expected


def test_protocol_costs_match_the_rate_model_formulas():
    # given one bucket moved at startTS = 7.3 s on a stream of known times
    rng = np.random.default_rng(5)
    times = np.sort(rng.uniform(0, 30, 3000)).round(5)
    keys = rng.integers(0, 40, 3000)
    bucket = BucketMap.default(1, 4).buckets(keys)
    owner = np.array([0, 1, 0, 1])
    b, start = int(bucket[0]), 7.3
    mine = times[bucket == b]
    window_s, slide_s, latency = 10.0, 2.0, 0.4
    # when the window protocol runs
    w = simulate_windowed_count(
        times, keys, owner, [(start, b, 2)], window_s=window_s, slide_s=slide_s, protocol="window"
    )
    switch, end = window_protocol_times(start, window_s, slide_s)
    # then duplicates are the bucket's tuples in [startTS, endTS), duration endTS - startTS
    assert (switch, end) == pytest.approx((8.0, 16.0))
    assert w.duplicated_tuples == np.count_nonzero((mine >= start) & (mine < end))
    assert w.durations_s == pytest.approx([end - start])
    assert w.buffered_tuples == 0
    # when the state protocol runs
    s = simulate_windowed_count(
        times,
        keys,
        owner,
        [(start, b, 2)],
        window_s=window_s,
        slide_s=slide_s,
        protocol="state",
        transfer_latency_s=latency,
        tuple_bytes=1e6,
        bandwidth_mb_per_s=100.0,
    )
    # then state = tuples of the open windows, buffer = tuples until the checkpoint arrives
    state = np.count_nonzero((mine >= open_window_start(start, window_s, slide_s)) & (mine < start))
    delay = state_transfer_s(state, 1e6, 100.0, latency)
    assert s.serialized_state_tuples == state > 0
    assert s.buffered_tuples == np.count_nonzero((mine >= start) & (mine < start + delay))
    assert s.durations_s == pytest.approx([delay], abs=1e-6)
    assert s.duplicated_tuples == 0


def test_tumbling_window_at_a_boundary_needs_no_overlap():
    assert window_protocol_times(10.0, 5.0, 5.0) == (10.0, 10.0)
    assert window_protocol_times(11.0, 5.0, 5.0) == (15.0, 15.0)


# ---- the paper's §5.2 result under the model ------------------------------------------


@pytest.mark.parametrize("schedule", ["mean_shift", "sigma_shrink"])
def test_balanceload_keeps_utilisation_std_low(schedule):
    # given the paper's two §5.2 streams at 150,000 tuples/s on 15 nodes
    static = run(
        "elastic_static", sample_schedule=schedule, duration_s=600.0, sample_tuples=200_000
    )
    balanced = run(
        "elastic_balanceload", sample_schedule=schedule, duration_s=600.0, sample_tuples=200_000
    )
    # then load balancing lowers the std of utilisation well below the hashed map's,
    # and the mean utilisation is the same (fixed input rate)
    assert balanced.metrics["utilization_std_mean"] < 0.5 * static.metrics["utilization_std_mean"]
    assert balanced.metrics["utilization_std_above_uit_share"] < 0.3
    assert static.metrics["utilization_std_above_uit_share"] > 0.9
    assert balanced.metrics["utilization_mean_mean"] == pytest.approx(0.7, abs=0.02)
    assert static.metrics["utilization_mean_mean"] == pytest.approx(0.7, abs=0.02)


def test_without_balancing_imbalance_grows_as_sigma_shrinks():
    static = run(
        "elastic_static", sample_schedule="sigma_shrink", duration_s=600.0, sample_tuples=200_000
    )
    std = np.asarray(static.series["utilization_std"])
    assert std[-30:].mean() > std[:30].mean() * 1.2


# ---- pieces -----------------------------------------------------------------------------


def test_balance_load_is_pure_and_respects_the_movable_mask():
    rng = np.random.default_rng(0)
    rate = rng.exponential(1.0, 64)
    owner = np.arange(64) % 4
    on_node = np.zeros((64, 4))
    on_node[np.arange(64), owner] = rate
    loads = np.bincount(owner, weights=rate, minlength=4)
    frozen = owner == int(np.argmax(loads))
    before = (rate.copy(), on_node.copy(), owner.copy(), loads.copy())
    new_owner, new_loads, moves = balance_load(rate, on_node, owner, loads, 1e-6, 1000, ~frozen)
    for a, b in zip(before, (rate, on_node, owner, loads), strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.all(new_owner[frozen] == owner[frozen])
    assert all(not frozen[b] for b, _, _ in moves)
    assert new_loads.std() <= loads.std()
    _, free_loads, free_moves = balance_load(rate, on_node, owner, loads, 1e-6, 1000)
    assert free_moves and free_loads.std() < loads.std()


def test_offload_and_provision_move_the_right_buckets():
    rate = np.linspace(1.0, 2.0, 40)
    owner = np.arange(40) % 4
    out = offload_buckets(owner, rate, np.array([3]), np.array([0, 1, 2]), "load")
    assert not np.any(out == 3) and np.all(out[owner != 3] == owner[owner != 3])
    out = offload_buckets(owner, rate, np.array([3]), np.array([0, 1, 2]), "count")
    assert sorted(np.bincount(out).tolist()) == [13, 13, 14]
    active = np.array([True, True, True, True, False, False])
    grown = provision_by_count(owner, active, np.array([4, 5]))
    counts = np.bincount(grown, minlength=6)
    assert counts.max() - counts.min() <= 1 and counts.sum() == 40


def test_mixture_quantiles_of_one_exponential():
    p50, p99 = mixture_quantiles(np.ones(1), np.array([0.5]), np.array([2.0]), (0.5, 0.99))
    assert p50 == pytest.approx(0.5 + math.log(2) / 2, rel=1e-6)
    assert p99 == pytest.approx(0.5 + math.log(100) / 2, rel=1e-6)


def test_simulate_elastic_on_uniform_shares_is_balanced_by_any_map():
    # given every bucket with the same share: even bucket counts give even nodes
    shares = np.full((1, 60), 1 / 60)
    config = ElasticConfig(strategy="elastic_static", initial_nodes=15, buckets=60, duration_s=50)
    sim = simulate_elastic(shares, config, np.random.default_rng(0))
    assert max(sim.utilization_std) < 0.02


# ---- contract ---------------------------------------------------------------------------


def test_result_contract_and_determinism():
    a = run("elastic_balanceload", seed=7, protocol="state")
    b = run("elastic_balanceload", seed=7, protocol="state")
    c = run("elastic_balanceload", seed=8, protocol="state")

    # plan_time_ms is a measured CPU time; everything else is simulated
    def simulated(r: ModelResult) -> dict[str, float]:
        return {k: v for k, v in r.metrics.items() if k != "plan_time_ms"}

    assert simulated(a) == simulated(b) and a.series == b.series and a.events == b.events
    assert simulated(a) != simulated(c)
    for name in COMMON_METRICS:
        assert name in a.metrics
    for name in list(a.metrics) + list(a.series):
        assert name in MODEL.metric_definitions, name
    assert all(np.isfinite(v) for v in a.metrics.values())
    assert a.events > 0 and len(a.time_s) == 40
    assert a.metrics["serialized_state_tuples_total"] > 0
    assert a.metrics["buffered_tuples_total"] > 0
    assert a.metrics["duplicated_tuples_total"] == 0
    w = run("elastic_balanceload", seed=7, protocol="window")
    assert w.metrics["duplicated_tuples_total"] > 0 and w.metrics["buffered_tuples_total"] == 0
    assert ModelResult.from_dict(a.to_dict()).metrics == a.metrics


def test_static_has_no_reconfiguration():
    r = run("elastic_static", rate_step_factor=2.0)
    assert r.metrics["reconfigurations_total"] == 0 and r.metrics["plan_time_ms"] == 0
    assert r.metrics["backlog_tuples_max"] > 0  # overloaded after the doubling


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"tut": 0.95}, "elastic_tut"),
        ({"initial_nodes": 70}, "elastic_initial_nodes"),
        ({"window_s": 5.0, "slide_s": 2.0}, "elastic_window_s"),
        ({"duration_s": 12.0, "period_s": 5.0}, "elastic_period_s"),
        ({"protocol": "copy"}, "protocol"),
        ({"buckets": 0}, "buckets"),
    ],
)
def test_bad_params_name_the_field(params, field):
    with pytest.raises(ValueError, match=field):
        MODEL.check_params(params)


def test_unknown_strategy_is_refused():
    with pytest.raises(ValueError, match="strategy"):
        MODEL.run(ModelPoint("elastic", "balanceload", MODEL.check_params(FAST)))


def test_reads_a_generated_phone_stream(tmp_path):
    from balancebench.generators import generate

    # given a small phone_stream dataset (sigma 100 -> 25 in 5 steps)
    folder, _ = generate(
        "phone_stream",
        tmp_path,
        {
            "n_tuples": 20_000,
            "n_keys": 10_000,
            "phone_stream_mean_from": 5000.0,
            "phone_stream_mean_to": 5000.0,
            "phone_stream_sigma_to": 25.0,
            "phone_stream_steps": 5,
        },
    )
    # when the model runs on it
    p = MODEL.check_params(FAST)
    result = MODEL.run(ModelPoint("elastic", "elastic_balanceload", p, dataset_dir=str(folder)))
    # then it used the dataset's schedule
    assert result.info["experiment"] == "sigma_shrink"
    assert result.info["stream_tuples"] == 20_000
    assert result.info["schedule_sigma"][-1] == 25.0


def test_step_shares_sum_to_one():
    stream = sample_phone_stream("sigma_shrink", 5000, np.random.default_rng(0))
    shares = step_bucket_shares(stream, 64)
    assert shares.shape == (25, 64)
    np.testing.assert_allclose(shares.sum(axis=1), 1.0)


def test_figure_mirrors_fig_8():
    results = []
    for schedule in ("mean_shift", "sigma_shrink"):
        for strategy in ("elastic_static", "elastic_balanceload"):
            p = MODEL.check_params({**FAST, "sample_schedule": schedule})
            point = ModelPoint("elastic", strategy, p)
            results.append((point, MODEL.run(point)))
    fig = MODEL.figure(results)
    axes = fig.get_axes()
    assert len(axes) == 4
    assert "time" in axes[1].get_xlabel() or "time" in axes[3].get_xlabel()
    assert len(axes[0].get_lines()) == 2
