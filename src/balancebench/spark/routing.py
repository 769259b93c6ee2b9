"""Paper 000's storage routing (Algorithm 1, ONE) as Spark SQL expressions.

``node_column`` gives every tuple the node ``RoutingTable.storage_nodes`` would give it:
``pmod(hash(key), N)`` for a key outside the routing table, else the part whose
fraction interval ``[lo, hi)`` holds ``pmod(hash(tuple_id, SALT), 2^20)``, found with a
broadcast join on key plus the interval condition. ``partition_by_node`` then puts node
``i``'s tuples in Spark partition ``i`` by repartitioning on a per-node surrogate value
whose Murmur3 hash lands in partition ``i`` (``hashing.partition_surrogates``).
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench.hashing import FRACTION_UNITS, TUPLE_HASH_SALT, partition_surrogates
from balancebench.routing import BUCKET_SALT, BucketMap, RoutingTable


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
    tagged = df.withColumn("_u", fraction_unit(tuple_id))
    cond = (
        (tagged[key] == parts["_rt_key"])
        & (tagged["_u"] >= parts["_rt_lo"])
        & (tagged["_u"] < parts["_rt_hi"])
    )
    joined = tagged.join(F.broadcast(parts), cond, "left")
    return joined.withColumn(out, F.coalesce(F.col("_rt_node"), home)).drop(
        "_u", "_rt_key", "_rt_node", "_rt_lo", "_rt_hi"
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


ROUTED_SCHEMA = "sender int, tuple_id long, key long, node int, state binary"


def with_per_tuple_node(
    df: DataFrame, strategy: Any, states: dict[int, Any], n_nodes: int, senders: int
) -> DataFrame:
    """Per-tuple routing (pkg, dchoices, wchoices) with Spark running each sender.

    Tuple ``i`` is sent by upstream instance ``i mod senders``; each sender's tuples are
    routed in ``tuple_id`` order by ``strategy.route_sender`` (vectorised Arrow in, a
    sequential choice loop inside), starting from the sender's state ``states[s]`` (its
    load estimates and sketch from earlier batches). The result has the routed tuples
    (``state`` null) and one row per sender with ``tuple_id = -1`` carrying its new state
    (pickled): the caller collects those and passes them to the next batch.
    """
    blobs = {s: pickle.dumps(st) for s, st in states.items()}

    def route_group(table: pa.Table) -> pa.Table:
        sender = int(table.column("sender")[0].as_py())
        order = np.argsort(table.column("tuple_id").to_numpy(), kind="stable")
        ids = table.column("tuple_id").to_numpy()[order]
        keys = table.column("key").to_numpy()[order]
        state = (
            pickle.loads(blobs[sender]) if sender in blobs else strategy.new_sender_state(n_nodes)
        )
        nodes = strategy.route_sender(keys, state)
        n = len(ids)
        return pa.table(
            {
                "sender": pa.array(np.full(n + 1, sender, dtype=np.int32)),
                "tuple_id": pa.array(np.r_[ids, -1].astype(np.int64)),
                "key": pa.array(np.r_[keys, 0].astype(np.int64)),
                "node": pa.array(np.r_[nodes, -1].astype(np.int32)),
                "state": pa.array([None] * n + [pickle.dumps(state)], type=pa.binary()),
            }
        )

    tagged = df.withColumn("sender", F.pmod(F.col("tuple_id"), F.lit(senders)).cast("int"))
    return tagged.groupBy("sender").applyInArrow(route_group, schema=ROUTED_SCHEMA)


def partition_by_node(df: DataFrame, n_nodes: int, node: str = "node") -> DataFrame:
    """Shuffle so that Spark partition ``i`` holds exactly the rows with ``node == i``.

    Adds column ``_surrogate`` (keep it in a later ``groupBy`` so Spark sees the data as
    already partitioned and adds no second shuffle).
    """
    values = F.array(*[F.lit(int(v)).cast("bigint") for v in partition_surrogates(n_nodes)])
    with_sur = df.withColumn("_surrogate", F.element_at(values, F.col(node) + 1))
    return with_sur.repartition(n_nodes, "_surrogate")
