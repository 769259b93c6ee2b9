"""Which runner serves a strategy, by its family (``Strategy.kind``, ``per_tuple``).

Every runner is a :class:`~balancebench.spark.loop.MicroBatchLoop`:

- a key-level planner (``kind`` ``key_level``): the engine under :class:`KeyLevelRouter`,
  which routes by the strategy's own routing table: a new planner needs no entry here;
- a per-tuple router (``per_tuple``): the engine under :class:`PerTupleRouter`, which
  runs the strategy's own ``route_sender``: no entry here either;
- a join architecture (``join_architecture``): the engine under its own router, one
  entry per architecture in :data:`ARCHITECTURE_ROUTERS` (its Spark placement);
- a Spark-native baseline (``spark_native``): its own runner, one entry in
  :data:`BASELINES`.

``tests/spark/test_runners.py`` checks that every registered strategy has a runner.
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
from balancebench.spark.engine import Engine
from balancebench.spark.engine_config import EngineConfig
from balancebench.spark.loop import BatchResult, MicroBatchLoop
from balancebench.spark.native_batch_queries import AqeRunner, SaltingRunner
from balancebench.spark.native_streaming import StreamingRunner
from balancebench.spark.routers import KeyLevelRouter, PerTupleRouter, SparkRouter
from balancebench.strategies import STRATEGIES, Strategy

#: Join architectures, with the router that writes their placement in Spark SQL.
ARCHITECTURE_ROUTERS: dict[str, type[SparkRouter]] = {
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


def router_class(strategy: Strategy) -> type[SparkRouter]:
    """The router of a strategy the engine runs, by its family (the module docstring)."""
    if strategy.kind == "key_level":
        return PerTupleRouter if strategy.per_tuple else KeyLevelRouter
    if strategy.kind == "join_architecture" and strategy.name in ARCHITECTURE_ROUTERS:
        return ARCHITECTURE_ROUTERS[strategy.name]
    engine_run = [
        name
        for name, cls in STRATEGIES.items()
        if cls.kind == "key_level" or name in ARCHITECTURE_ROUTERS
    ]
    raise ValueError(
        f"strategy: {strategy.name!r} has no engine router; allowed values: {engine_run}"
    )


def make_router(
    strategy: Strategy, n_nodes: int, tolerance: float, capacity: int | None = None
) -> SparkRouter:
    """The Spark router of a strategy the engine runs (``capacity``: scale-out)."""
    return router_class(strategy)(strategy, n_nodes, tolerance, capacity)


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
    """The runner of ``strategy`` on a loaded replay stream (``replay_stream.load_replay``);
    the combination (scale-out, the strategy's operators) was checked at the door."""
    if strategy.name in BASELINES:
        runner: Any = BASELINES[strategy.name]
        return runner(spark, stream, config, strategy, name, on_batch, harness_hook)
    router = make_router(strategy, config.n_nodes, tolerance, config.node_capacity_state_tuples)
    return Engine(spark, stream, config, router, name, on_batch, harness_hook)
