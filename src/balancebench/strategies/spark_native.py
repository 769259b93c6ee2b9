"""What a Spark user runs instead: ``spark_streaming``, ``spark_aqe``, ``spark_salting``
(being written). The library holds only their names, capabilities and Params; their
execution lives in ``balancebench.spark.baselines``."""

from __future__ import annotations

from typing import ClassVar

from balancebench.strategies.base import Strategy


class _SparkNative(Strategy):
    kind: ClassVar[str] = "spark_native"
    plans = False


class SparkStreaming(_SparkNative):
    name = "spark_streaming"
    reference = "Spark Structured Streaming stateful operator (hash-partitioned state store)"
    operators = frozenset({"aggregate", "equi_join"})


class SparkAqe(_SparkNative):
    name = "spark_aqe"
    reference = "Spark SQL per micro-batch with adaptive execution and skew-join handling"
    operators = frozenset({"aggregate", "equi_join", "band_join"})


class SparkSalting(_SparkNative):
    name = "spark_salting"
    reference = "manual key salting (random salt on the large side, replicated small side)"
    operators = frozenset({"aggregate", "equi_join", "band_join"})
