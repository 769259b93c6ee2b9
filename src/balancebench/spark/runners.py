"""Which runner serves a strategy: the one registry from strategy name to runner.

Every runner is a :class:`~balancebench.spark.loop.MicroBatchLoop`: the engine under a
router (key-level, per-tuple and join-architecture strategies) or a Spark-native baseline.
``tests/spark/test_runners.py`` checks that every registered strategy has one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from balancebench.spark.architecture_routers import (
    BiStreamRouter,
    DynamicRouter,
    OperatorSetRouter,
    QueryParallelRouter,
)
from balancebench.spark.baselines import AqeRunner, SaltingRunner, StreamingRunner
from balancebench.spark.engine import Engine, EngineConfig
from balancebench.spark.loop import BatchResult, MicroBatchLoop
from balancebench.spark.routers import KeyLevelRouter, PerTupleRouter, SparkRouter
from balancebench.strategies import Strategy, check_scale_out

#: Strategies the engine runs, with the router that places their tuples.
ROUTERS: dict[str, type[SparkRouter]] = {
    "hash": KeyLevelRouter,
    "qmmp": KeyLevelRouter,
    "mnrt": KeyLevelRouter,
    "readj": KeyLevelRouter,
    "balanceload": KeyLevelRouter,
    "pkg": PerTupleRouter,
    "dchoices": PerTupleRouter,
    "wchoices": PerTupleRouter,
    "dynamic": DynamicRouter,
    "bi": BiStreamRouter,
    "bi6": BiStreamRouter,
    "operator_set": OperatorSetRouter,
    "operator_parallel": OperatorSetRouter,
    "query_parallel": QueryParallelRouter,
}
#: Spark-native baselines: Spark places the data itself.
BASELINES: dict[str, type[MicroBatchLoop]] = {
    "spark_streaming": StreamingRunner,
    "spark_aqe": AqeRunner,
    "spark_salting": SaltingRunner,
}


def make_router(
    strategy: Strategy, n_nodes: int, tolerance: float, capacity: int | None = None
) -> SparkRouter:
    """The Spark router of a strategy the engine runs (``capacity``: scale-out)."""
    if strategy.name not in ROUTERS:
        raise ValueError(
            f"strategy: {strategy.name!r} has no engine router; allowed values: {sorted(ROUTERS)}"
        )
    return ROUTERS[strategy.name](strategy, n_nodes, tolerance, capacity)


def make_runner(
    spark: SparkSession,
    stream: DataFrame,
    config: EngineConfig,
    strategy: Strategy,
    name: str,
    tolerance: float,
    on_batch: Callable[[BatchResult], None] | None = None,
    harness_hook: Callable[[str], None] | None = None,
) -> MicroBatchLoop:
    """The runner of ``strategy`` on a loaded replay stream (``engine.load_replay``)."""
    if config.node_capacity_state_tuples is not None:
        check_scale_out(strategy.name, config.workload.operator)
    if strategy.name in BASELINES:
        runner: Any = BASELINES[strategy.name]
        return runner(spark, stream, config, strategy, name, on_batch, harness_hook)
    router = make_router(strategy, config.n_nodes, tolerance, config.node_capacity_state_tuples)
    return Engine(spark, stream, config, router, name, on_batch, harness_hook)
