"""What a Spark user runs instead: ``spark_streaming``, ``spark_aqe``, ``spark_salting``.

None of them plans or routes: Spark places the data itself. The library holds only their
names, capabilities and Params (DAG Params ``<strategy>_<param>``); their execution, the
mapping of Spark's tasks to the ``n_nodes`` "nodes" and what "state per node" means for
each, live in ``balancebench.spark.native_streaming`` and
``balancebench.spark.native_batch_queries`` (module docstrings).

- ``spark_streaming``: Structured Streaming's own stateful operator (stateful aggregation
  with a watermark, or stream-stream join), state store hash-partitioned by key on
  ``n_nodes`` shuffle partitions, no skew handling; the micro-batches are replayed into a
  real streaming query. The band join has no direct form (Spark rejects a stream-stream
  join without an equality predicate) and is served as an equi-join on the smaller side's
  ``2w + 1`` candidate keys, the same rewrite the engine uses.
- ``spark_aqe``: every micro-batch as a batch query with adaptive execution and
  skew-join handling on (AQE is disabled inside streaming queries).
- ``spark_salting``: the manual salting recipe per micro-batch as batch queries, AQE off.
"""

from __future__ import annotations

from typing import Any, ClassVar

from balancebench.core.operators import OPERATORS
from balancebench.strategies.base import Strategy


class _SparkNative(Strategy):
    kind: ClassVar[str] = "spark_native"
    plans = False


class SparkStreaming(_SparkNative):
    """Spark Structured Streaming's stateful operator, the direct streaming peer.

    Aggregation: ``groupBy(key).count()`` in update mode (full history), or over an
    event-time ``window`` of the operator's size and slide in batches with a watermark
    (each tuple's event time is its micro-batch index, so Spark's windows are exactly the
    engine's). Join: stream-stream inner join of R and S on the key; a window join adds
    watermarks on both sides and the operator's time range as the condition so Spark evicts
    expired state; full history keeps all state. State store: hash-partitioned by key on
    ``n_nodes`` partitions; ``state_store`` picks Spark's provider.
    """

    name = "spark_streaming"
    reference = "Spark Structured Streaming stateful operator (hash-partitioned state store)"
    operators = frozenset(OPERATORS.values())
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "state_store": {
            "type": "string",
            "enum": ["hdfs", "rocksdb"],
            "default": "hdfs",
            "description": "State store provider: Spark's default HDFSBackedStateStoreProvider "
            "(in-memory maps, delta files) or RocksDBStateStoreProvider.",
        },
    }


class SparkAqe(_SparkNative):
    """Spark SQL per micro-batch with adaptive execution and skew-join handling on.

    Aggregation: ``groupBy(key).count()`` over the window's tuples. Join: the batch's new
    tuples of each side joined with the earlier tuples of the other side (band: on the new
    tuples' candidate keys), whatever plan Spark picks (broadcast included). AQE's skew
    join fires for a partition larger than both a byte threshold (256 MB by default) and
    ``skewedPartitionFactor`` x the median partition: ``thresholds = "scaled"`` sets the
    byte floors to 1 byte so only the factor decides (a skewed partition is split into
    pieces of the mean non-skewed partition size, no coalescing below that); ``"spark"``
    keeps Spark's defaults (256 MB, factor 5, advisory 64 MB), which never fire on small
    data. AQE does nothing for skewed aggregations (map-side partial aggregation does).
    """

    name = "spark_aqe"
    reference = "Spark SQL per micro-batch with adaptive execution and skew-join handling"
    operators = frozenset(OPERATORS.values())
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "thresholds": {
            "type": "string",
            "enum": ["scaled", "spark"],
            "default": "scaled",
            "description": "AQE size thresholds: 'scaled' (byte floors off, so skew = "
            "skew_factor x median partition and splits target the mean partition) or "
            "'spark' (Spark's defaults: 256 MB skew threshold, factor 5, 64 MB advisory).",
        },
        "skew_factor": {
            "type": "number",
            "minimum": 1,
            "maximum": 100,
            "default": 2.0,
            "description": "spark.sql.adaptive.skewJoin.skewedPartitionFactor with "
            "thresholds='scaled' (Spark's default 5 rarely fires on n_nodes partitions).",
        },
        "broadcast": {
            "type": "boolean",
            "default": True,
            "description": "Let Spark broadcast a small join side (autoBroadcastJoinThreshold "
            "at Spark's default 10 MB); false forces a shuffled join, where AQE's skew "
            "handling applies.",
        },
    }


class SparkSalting(_SparkNative):
    """The classic manual salting recipe, per micro-batch as batch queries (AQE off).

    Aggregation: two phases, ``count`` by ``(key, salt)`` with ``salt = hash(tuple_id) mod
    S``, then ``sum`` by key. Join: the larger side of each join gets ``salt = hash(tuple_id)
    mod S``, the smaller side is replicated ``S`` times (one copy per salt), joined on
    ``(key, salt)`` as a shuffled join (broadcast off). ``hot_keys > 0`` salts only the
    batch's ``hot_keys`` most frequent keys of the salted side (the others keep salt 0 and
    are not replicated).
    """

    name = "spark_salting"
    reference = "manual key salting (random salt on the large side, replicated small side)"
    operators = frozenset(OPERATORS.values())
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "salts": {
            "type": "integer",
            "minimum": 0,
            "maximum": 4096,
            "default": 0,
            "description": "Salt values S (0 = n_nodes).",
        },
        "hot_keys": {
            "type": "integer",
            "minimum": 0,
            "maximum": 1_000_000,
            "default": 0,
            "description": "Salt only this many most frequent keys per batch (0 = every key).",
        },
    }
