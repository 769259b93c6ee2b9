"""Paper 000's storage routing (Algorithm 1, ONE) as Spark SQL expressions.

``with_storage_node`` gives every tuple the node ``RoutingTable.storage_nodes`` would give it:
``pmod(hash(key), N)`` for a key outside the routing table, else the part whose
fraction interval ``[lo, hi)`` holds ``pmod(hash(tuple_id, SALT), 2^20)``, found with a
broadcast join on key plus the interval condition. ``partition_by_node`` then puts node
``i``'s tuples in Spark partition ``i`` by repartitioning on a per-node surrogate value
whose Murmur3 hash lands in partition ``i`` (``hashing.partition_surrogates``).
"""

from __future__ import annotations

import pickle
import time
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench.hashing import FRACTION_UNITS, TUPLE_HASH_SALT, partition_surrogates
from balancebench.routing_table import BUCKET_SALT, BucketMap, RoutingTable


def _col(column: str | Column) -> Column:
    return F.col(column) if isinstance(column, str) else column


def home_node(key: str | Column, n_nodes: int) -> Column:
    """``F(k) = pmod(hash(key), N)``."""
    return F.pmod(F.hash(_col(key)), F.lit(n_nodes)).cast("int")


def fraction_unit(tuple_id: str) -> Column:
    """``pmod(hash(tuple_id, SALT), 2^20)``, equal to ``hashing.fraction_units``."""
    salted = F.hash(F.col(tuple_id), F.lit(TUPLE_HASH_SALT).cast("bigint"))
    return F.pmod(salted, F.lit(FRACTION_UNITS)).cast("bigint")


def with_storage_node(
    spark: SparkSession,
    df: DataFrame,
    table: RoutingTable | BucketMap,
    key: str = "key",
    tuple_id: str = "tuple_id",
    out: str = "node",
) -> DataFrame:
    """``df`` plus column ``out``: the storage node of each tuple under ``table``."""
    if isinstance(table, BucketMap):
        return df.withColumn(out, bucket_owner(key, table))
    home = home_node(key, table.n_nodes)
    if len(table) == 0:
        return df.withColumn(out, home)
    parts = spark.createDataFrame(pa.table(table.part_rows())).select(
        F.col("key").alias("_rt_key"),
        F.col("node").alias("_rt_node"),
        F.col("lo_units").alias("_rt_lo"),
        F.col("hi_units").alias("_rt_hi"),
    )
    # The tuple's unit is hashed only for a tuple whose key is in the table (the join's
    # condition past the key match), not for every tuple.
    unit = fraction_unit(tuple_id)
    cond = (df[key] == parts["_rt_key"]) & (unit >= parts["_rt_lo"]) & (unit < parts["_rt_hi"])
    joined = df.join(F.broadcast(parts), cond, "left")
    return joined.withColumn(out, F.coalesce(F.col("_rt_node"), home)).drop(
        "_rt_key", "_rt_node", "_rt_lo", "_rt_hi"
    )


def bucket_owner(key: str | Column, buckets: BucketMap) -> Column:
    """``owner[pmod(hash(key, BUCKET_SALT), B)]``, equal to ``BucketMap.storage_nodes``."""
    salted = F.hash(_col(key), F.lit(BUCKET_SALT).cast("bigint"))
    bucket = F.pmod(salted, F.lit(buckets.n_buckets))
    # The map as ONE fixed-width string literal, read with substr: B literal expressions
    # (an array of B lits) made planning and evaluation ~6x slower (measured, B = 1024).
    width = len(str(max(buckets.n_nodes - 1, 0)))
    owners = F.lit("".join(f"{int(o):0{width}d}" for o in buckets.owner))
    return owners.substr(bucket * width + 1, F.lit(width)).cast("int")


def with_per_tuple_node(
    df: DataFrame, strategy: Any, states: dict[int, Any], n_nodes: int, reports: Any
) -> DataFrame:
    """Per-tuple routing (pkg, dchoices, wchoices) with Spark running each sender:
    ``(key, node)`` for every tuple of ``df``.

    Partition ``s`` of ``df`` is sender ``s``'s tuples in arrival order (the stream's
    layout, ``replay_stream.load_replay``). A ``mapInArrow`` task per sender gathers its tuples
    and routes them with ``strategy.route_sender`` in one call (a compiled loop over the
    tuples), starting from the sender's state ``states[s]`` (its load estimates and
    sketch from earlier batches). The worker adds ``{s: (pickled new state, CPU s)}`` to
    the accumulator ``reports``: its process CPU from the call's start to its last row,
    Arrow's conversions of the batch included, its start-up not (that is the engine's).
    """
    blobs = {s: pickle.dumps(st) for s, st in states.items()}

    def route_partition(batches: Any) -> Any:
        started = time.process_time()
        sender = TaskContext.get().partitionId()
        state = (
            pickle.loads(blobs[sender]) if sender in blobs else strategy.new_sender_state(n_nodes)
        )
        arrived = [b.column(0) for b in batches]
        keys = pa.chunked_array(arrived, pa.int64()).to_numpy()
        nodes = strategy.route_sender(keys, state)
        start = 0
        for chunk in arrived:
            stop = start + len(chunk)
            yield pa.RecordBatch.from_arrays(
                [chunk, pa.array(nodes[start:stop], pa.int32())], names=["key", "node"]
            )
            start = stop
        reports.add({sender: (pickle.dumps(state), time.process_time() - started)})

    return df.select("key").mapInArrow(route_partition, "key long, node int")


def partition_by_node(df: DataFrame, n_nodes: int, node: str = "node") -> DataFrame:
    """Shuffle so that Spark partition ``i`` holds exactly the rows with ``node == i``.

    Adds column ``_surrogate`` (keep it in a later ``groupBy`` so Spark sees the data as
    already partitioned and adds no second shuffle).
    """
    values = F.array(*[F.lit(int(v)).cast("bigint") for v in partition_surrogates(n_nodes)])
    with_sur = df.withColumn("_surrogate", F.element_at(values, F.col(node) + 1))
    return with_sur.repartition(n_nodes, "_surrogate")
