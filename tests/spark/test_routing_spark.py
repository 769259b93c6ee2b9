"""The Spark SQL router and the numpy router agree tuple for tuple."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from balancebench.hashing import fraction_units, home_nodes, murmur3_hash_long
from balancebench.routing import RoutingTable
from balancebench.spark.routing import (
    fraction_unit,
    home_node,
    partition_by_node,
    with_storage_node,
)

pytestmark = pytest.mark.slow


def test_hashes_equal_spark_sql(spark):
    rng = np.random.default_rng(1)
    values = np.r_[rng.integers(-(2**63), 2**63 - 1, 2000, dtype=np.int64), np.arange(2000)]
    df = spark.createDataFrame(pd.DataFrame({"v": values}))
    out = df.select(
        "v",
        F.hash("v").alias("h"),
        home_node("v", 13).alias("home"),
        fraction_unit("v").alias("u"),
    ).toPandas()
    v = out["v"].to_numpy()
    assert np.array_equal(out["h"].to_numpy(), murmur3_hash_long(v))
    assert np.array_equal(out["home"].to_numpy(), home_nodes(v, 13))
    assert np.array_equal(out["u"].to_numpy(), fraction_units(v))


def test_spark_routing_equals_numpy_routing(spark):
    rng = np.random.default_rng(2)
    n_nodes = 6
    # A routing table with whole moves, 2- and 3-way splits.
    part_key = np.r_[np.arange(30), np.arange(10), np.arange(5)]
    part_node = rng.integers(0, n_nodes, len(part_key))
    part_load = rng.integers(1, 100, len(part_key)).astype(float)
    part_key, idx = np.unique(np.c_[part_key, part_node], axis=0, return_index=True)
    table = RoutingTable.from_parts(part_key[:, 0], part_key[:, 1], part_load[idx], n_nodes)
    assert len(table) > 10
    n = 50_000
    keys = rng.integers(0, 60, n)
    ids = np.arange(n, dtype=np.int64)
    df = spark.createDataFrame(pd.DataFrame({"tuple_id": ids, "key": keys}))
    routed = with_storage_node(spark, df, table).select("tuple_id", "node").toPandas()
    routed = routed.sort_values("tuple_id")
    assert np.array_equal(routed["node"].to_numpy(), table.storage_nodes(keys, ids))


def test_partition_i_holds_node_i(spark):
    n_nodes = 8
    df = spark.range(20_000).withColumn("node", (F.col("id") % n_nodes).cast("int"))
    out = (
        partition_by_node(df, n_nodes)
        .select("node", F.spark_partition_id().alias("pid"))
        .distinct()
        .toPandas()
    )
    assert len(out) == n_nodes
    assert (out["node"] == out["pid"]).all()
