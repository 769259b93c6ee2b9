"""Every strategy, registered by name (see ``base.Strategy`` for the contract): the
key-level planners and per-tuple routers, the join architectures (Dynamic, BiStream),
the operator-set joins and Spark's own baselines.

>>> strategy = get_strategy("mnrt", n_nodes=8)
>>> plan = strategy.plan(loads, n_nodes=8, tolerance=0.05)      # doctest: +SKIP
>>> nodes = strategy.routing.storage_nodes(keys, tuple_ids)     # doctest: +SKIP

Per-tuple strategies (``per_tuple = True``: pkg, dchoices, wchoices) never plan; they
route each sender's tuples in order with ``route_sender``.
"""

from __future__ import annotations

from typing import Any

from balancebench.core.operators import JOINS, Operator, names
from balancebench.strategies.balanceload import BalanceLoadStrategy
from balancebench.strategies.base import Delta, MigrationPlan, PlanView, Strategy
from balancebench.strategies.hash import HashStrategy
from balancebench.strategies.join_architectures import BiStream, BiStream6, DynamicJoin
from balancebench.strategies.mnrt import MnrtStrategy
from balancebench.strategies.operator_set import (
    OperatorParallelJoin,
    OperatorSetJoin,
    QueryParallelJoin,
)
from balancebench.strategies.pkg import DChoicesStrategy, PkgStrategy, WChoicesStrategy
from balancebench.strategies.qmmp import QmmpStrategy
from balancebench.strategies.readj import ReadjStrategy
from balancebench.strategies.spark_native import SparkAqe, SparkSalting, SparkStreaming

#: name -> class: the one place a strategy is registered. A key-level planner or a
#: per-tuple router is its module plus its line here (its family picks its runner); a join
#: architecture adds its Spark router (``spark.runners.ARCHITECTURE_ROUTERS``), a
#: Spark-native baseline its runner (``spark.runners.BASELINES``).
STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls
    for cls in (
        HashStrategy,
        QmmpStrategy,
        MnrtStrategy,
        ReadjStrategy,
        PkgStrategy,
        DChoicesStrategy,
        WChoicesStrategy,
        BalanceLoadStrategy,
        DynamicJoin,
        BiStream,
        BiStream6,
        OperatorSetJoin,
        OperatorParallelJoin,
        QueryParallelJoin,
        SparkStreaming,
        SparkAqe,
        SparkSalting,
    )
}

#: Strategies whose nodes can join a running job (``Strategy.scales_out``; Param
#: ``node_capacity_state_tuples``, joins only): hash and the key-level planners over growing
#: active nodes, Dynamic's grid, BiStream's (sub)groups. PKG and the balanceload bucket map
#: have no scale-out here; Spark's own baselines place the data themselves.
SCALE_OUT: frozenset[str] = frozenset(n for n, cls in STRATEGIES.items() if cls.scales_out)


def check_scale_out(name: str, operator: Operator) -> None:
    """Refuse a memory-driven scale-out that ``name`` on ``operator`` cannot do."""
    if name not in SCALE_OUT:
        raise ValueError(
            f"node_capacity_state_tuples: {name!r} cannot add nodes to a running job; "
            f"allowed strategies: {sorted(SCALE_OUT)} (or node_capacity_state_tuples: null)"
        )
    if not operator.is_join:
        raise ValueError(
            f"node_capacity_state_tuples: scale-out runs on joins (their state grows with "
            f"history); the workload's operator is {operator.name!r}; allowed operators: "
            f"{names(JOINS)} (or node_capacity_state_tuples: null)"
        )


def get_strategy(name: str, **params: Any) -> Strategy:
    """A new strategy instance; an unknown name or parameter raises ``ValueError``."""
    if name not in STRATEGIES:
        raise ValueError(f"strategy: unknown {name!r}; allowed values: {sorted(STRATEGIES)}")
    try:
        return STRATEGIES[name](**params)
    except TypeError as exc:
        raise ValueError(f"strategy {name!r}: bad parameters {sorted(params)}: {exc}") from exc


def strategy_param_name(strategy: str, param: str) -> str:
    """The DAG Param that carries a strategy's parameter: ``<strategy>_<param>``."""
    return f"{strategy}_{param}"


def strategy_settings(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """A strategy's own parameters picked from the experiment Params."""
    return {
        p: params[strategy_param_name(name, p)]
        for p in STRATEGIES[name].param_schema
        if strategy_param_name(name, p) in params
    }


def strategy_kind(name: str) -> str:
    """``key_level`` (plans over a key router), ``join_architecture`` or ``spark_native``."""
    return STRATEGIES[name].kind


def is_per_tuple(name: str) -> bool:
    return STRATEGIES[name].per_tuple


__all__ = [
    "SCALE_OUT",
    "STRATEGIES",
    "Delta",
    "MigrationPlan",
    "PlanView",
    "Strategy",
    "check_scale_out",
    "get_strategy",
    "is_per_tuple",
    "strategy_param_name",
    "strategy_kind",
    "strategy_settings",
]
