"""A strategy's family decides which runner serves it: every registered strategy has
exactly one, and the runner that serves it is the kind the strategy says it is."""

from __future__ import annotations

import pytest

from balancebench.spark.routers import KeyLevelRouter, PerTupleRouter
from balancebench.spark.runners import ARCHITECTURE_ROUTERS, BASELINES, make_router
from balancebench.strategies import STRATEGIES, get_strategy, is_per_tuple, strategy_kind


def test_every_registered_strategy_has_exactly_one_runner():
    # The families' own entries name registered strategies of that family only.
    assert {STRATEGIES[n].kind for n in BASELINES} == {"spark_native"}
    assert {STRATEGIES[n].kind for n in ARCHITECTURE_ROUTERS} == {"join_architecture"}
    for name, cls in STRATEGIES.items():
        if cls.kind == "spark_native":
            assert name in BASELINES
        else:  # the engine under the family's router, or the architecture's own
            assert make_router(get_strategy(name, n_nodes=8), 8, 0.05) is not None


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_the_runner_matches_the_strategy_kind(name):
    kind = strategy_kind(name)
    if kind == "spark_native":
        assert name in BASELINES
        return
    router = make_router(get_strategy(name, n_nodes=8), 8, 0.05)
    if is_per_tuple(name):
        assert isinstance(router, PerTupleRouter) and router.routes_in_python
    elif kind == "key_level":
        assert type(router) is KeyLevelRouter
    else:
        assert kind == "join_architecture" and not isinstance(router, KeyLevelRouter)


def test_a_baseline_has_no_engine_router():
    with pytest.raises(ValueError, match="has no engine router; allowed values:.*'hash'"):
        make_router(get_strategy("spark_aqe", n_nodes=8), 8, 0.05)


def test_warm_up_once_per_strategy_and_the_fixed_cost_calibrated_once_per_loaded_stream(
    spark, monkeypatch
):
    # Given a small dataset loaded once, as a sweep's cell group loads it
    from balancebench.experiment import runs as experiment
    from balancebench.experiment.params import ExperimentSpec
    from balancebench.experiment.streams import build_stream
    from balancebench.generators import generate, generator_params
    from balancebench.spark.engine import Engine
    from balancebench.state.paths import datasets_dir

    params = ExperimentSpec.checked(
        {"n_tuples": 4000, "n_keys": 200, "n_batches": 2, "n_nodes": 4, "warmup_batches": 1}
    )
    folder, _ = generate(
        params["dataset"], datasets_dir(), generator_params(params["dataset"], params)
    )
    warmed: list[str] = []
    calibrated: list[bool] = []
    real_warm_up, real_calibrate = experiment.warm_up, Engine.calibrate

    def warm_up(spark, df, config, name, p):
        warmed.append(name)
        real_warm_up(spark, df, config, name, p)

    def calibrate(self, repeats=3):
        calibrated.append(self.config.warm_up)
        real_calibrate(self, repeats)

    monkeypatch.setattr(experiment, "warm_up", warm_up)
    monkeypatch.setattr(Engine, "calibrate", calibrate)
    cell = experiment.LoadedCell(spark, params, build_stream(params["workload"], folder, params))
    try:
        # When hash runs twice and mnrt once in it
        summaries = [cell.run(spark, name)[1] for name in ("hash", "mnrt", "hash")]
    finally:
        cell.release()
    # Then each strategy is warmed up before its first run only, every run passes the
    # oracle, and the first measured run calibrates the engine's fixed cost, which the
    # later runs on the same loaded stream reuse (the warm-ups calibrate nothing)
    assert warmed == ["hash", "mnrt"]
    assert all(s["oracle_passed"] == 1.0 for s in summaries)
    assert calibrated == [False]
    fixed = {s["node_fixed_s"] for s in summaries}
    assert len(fixed) == 1 and fixed.pop() > 0
    # And a stream loaded again is calibrated again
    again = experiment.LoadedCell(spark, params, build_stream(params["workload"], folder, params))
    try:
        again.run(spark, "hash")
    finally:
        again.release()
    assert calibrated == [False, False]
