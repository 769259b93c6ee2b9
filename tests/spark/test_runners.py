"""One registry decides which runner serves a strategy: every registered strategy has
exactly one, and the runner that serves it is the kind the strategy says it is."""

from __future__ import annotations

import pytest

from balancebench.spark.routers import KeyLevelRouter, PerTupleRouter
from balancebench.spark.runners import BASELINES, ROUTERS, make_router
from balancebench.strategies import STRATEGIES, get_strategy, is_per_tuple, strategy_kind


def test_every_registered_strategy_has_exactly_one_runner():
    assert set(ROUTERS) | set(BASELINES) == set(STRATEGIES)
    assert not set(ROUTERS) & set(BASELINES)


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
    with pytest.raises(ValueError, match="no engine router"):
        make_router(get_strategy("spark_aqe", n_nodes=8), 8, 0.05)
