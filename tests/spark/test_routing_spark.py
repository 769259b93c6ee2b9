"""The Spark routers (the JVM router and Spark SQL) and the numpy router agree tuple for
tuple."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from balancebench.core.hashing import fraction_units, home_nodes, murmur3_hash_long
from balancebench.core.operators import AGGREGATE
from balancebench.core.routing_table import RoutingTable
from balancebench.spark.placement import (
    fraction_unit,
    home_node,
    partition_by_node,
    with_storage_node,
)
from balancebench.spark.stored_pieces import partitions_of
from tests.spark.jvm_router import jvm_router_or_skip

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


@pytest.mark.parametrize("path", ["jvm", "sql"])
def test_spark_routing_equals_numpy_routing(spark, path):
    if path == "jvm":
        jvm_router_or_skip(spark)
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
    routed = with_storage_node(spark, df, table, jvm=path == "jvm")
    routed = routed.select("tuple_id", "node").toPandas().sort_values("tuple_id")
    assert np.array_equal(routed["node"].to_numpy(), table.storage_nodes(keys, ids))


@pytest.mark.parametrize("n_nodes", [7, 16])
def test_the_jvm_routers_dense_block_and_hash_table_decide_as_the_library(spark, n_nodes):
    """Keys close together go to the JVM router's dense array, the rest to its hash table:
    a dense run around zero (negative keys, splits, holes), a sparser run, scattered and
    extreme keys; probed by keys in, beside and outside each, the blocks' edges too. 7
    nodes: the JVM's remainder without a division; 16: keys split over more than 8 parts
    (a binary search, not the branchless count)."""
    jvm_router_or_skip(spark)
    rng = np.random.default_rng(8 + n_nodes)
    run = np.arange(-300, 700, dtype=np.int64)
    run = run[rng.random(len(run)) < 0.7]  # holes: keys of the block not in the table
    sparse = np.arange(10**6, 10**6 + 40 * 64, 40, dtype=np.int64)
    scattered = rng.integers(-(2**62), 2**62, 300)
    keys = np.unique(np.r_[run, sparse, scattered, [-(2**63), 2**63 - 1]])
    ways = rng.choice([1, 1, 2, 3, n_nodes], len(keys))
    part_key = np.repeat(keys, ways)
    # Each key's parts on distinct nodes (a part per (key, node))
    part_node = np.concatenate([rng.permutation(n_nodes)[:w] for w in ways])
    part_load = rng.integers(1, 50, len(part_key)).astype(float)
    table = RoutingTable.from_parts(part_key, part_node, part_load, n_nodes)
    probes = np.r_[
        np.arange(-320, 720),
        sparse - 1,
        sparse,
        sparse + 1,
        scattered,
        scattered + 1,
        [-(2**63), 2**63 - 1, -(2**63) + 1, 2**63 - 2],
    ].astype(np.int64)
    probes = np.repeat(probes, 3)
    ids = rng.permutation(len(probes)).astype(np.int64) * 13 - 5_000
    df = spark.createDataFrame(pd.DataFrame({"tuple_id": ids, "key": probes}))
    routed = with_storage_node(spark, df, table, jvm=True)
    routed = routed.select("tuple_id", "node").toPandas().set_index("tuple_id")["node"]
    assert np.array_equal(routed.loc[ids].to_numpy(), table.storage_nodes(probes, ids))
    # And the dense run went to the dense block, the rest to the hash table
    from balancebench.spark import jvm_routing

    lookup = str(jvm_routing.table_node(spark, table, F.col("key"), F.col("tuple_id")))
    in_run = np.count_nonzero((table.keys >= -300) & (table.keys < 700))
    assert f"({len(table)} keys" in lookup and f"{in_run} of them in a dense block" in lookup


@pytest.mark.parametrize("path", ["jvm", "sql"])
def test_routing_by_a_large_table_runs_no_join_and_keeps_the_table_out_of_the_plan(spark, path):
    if path == "jvm":
        jvm_router_or_skip(spark)
    # Given a table of 50,000 keys, some split (more than any planner made in a figure)
    keys = np.arange(50_000, dtype=np.int64) * 3 - 70_000
    part_key = np.r_[keys, keys[::5]]
    part_node = np.r_[(home_nodes(keys, 4) + 1) % 4, home_nodes(keys[::5], 4)]
    table = RoutingTable.from_parts(part_key, part_node, np.ones(len(part_key)), 4)
    # (a range, not a local table, which Spark would route at planning time)
    keys = F.element_at(
        F.array(*[F.lit(k).cast("bigint") for k in (1, 2, 5)]), F.col("id").cast("int")
    )
    df = spark.range(1, 4).select(F.col("id").alias("tuple_id"), keys.alias("key"))
    routed = with_storage_node(spark, df, table, jvm=path == "jvm")
    execution = routed._jdf.queryExecution()
    # Then the router is one projection: no join, no exchange
    assert "Join" not in execution.executedPlan().toString()
    assert "Exchange" not in execution.executedPlan().toString()
    # And the plan names the table's arrays without printing them (a literal of the
    # table printed 40 MiB into every plan string and the event log)
    assert len(execution.toString()) < 20_000
    # And the decisions are the library's, keys outside the table included
    got = routed.select("tuple_id", "node").toPandas().sort_values("tuple_id")
    assert (
        got["node"].tolist()
        == table.storage_nodes(np.array([1, 2, 5]), np.array([1, 2, 3])).tolist()
    )
    if path == "jvm":  # one call per tuple in the generated code, no SQL lookup chain
        plan = execution.executedPlan().toString()
        assert "routing table (50000 keys" in plan and "_rt_" not in plan


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


@pytest.mark.parametrize("path", ["jvm", "sql"])
def test_bucket_map_routing_equals_numpy(spark, path):
    from balancebench.core.routing_table import BucketMap

    rng = np.random.default_rng(5)
    owner = rng.integers(0, 7, 300).astype(np.int32)
    buckets = BucketMap(7, owner)
    keys = rng.integers(-(10**12), 10**12, 20_000)
    df = spark.createDataFrame(pd.DataFrame({"tuple_id": np.arange(len(keys)), "key": keys}))
    if path == "jvm":
        jvm_router_or_skip(spark)
    out = with_storage_node(spark, df, buckets, jvm=path == "jvm")
    out = out.select("tuple_id", "node").toPandas()
    out = out.sort_values("tuple_id")
    assert np.array_equal(out["node"].to_numpy(), buckets.storage_nodes(keys))


def _laid_out(frame, lo: int, hi: int, senders: int):
    """Tuples ``lo..hi`` of ``frame`` over ``senders`` partitions, tuple i at sender
    i mod senders, in arrival order (the stream's layout)."""
    from balancebench.spark.placement import partition_by_node

    part = frame.where((F.col("tuple_id") >= lo) & (F.col("tuple_id") < hi))
    part = part.withColumn("_s", F.pmod(F.col("tuple_id"), F.lit(senders)).cast("int"))
    placed = partition_by_node(part, senders, "_s")
    return placed.sortWithinPartitions("tuple_id").drop("_s", "_surrogate")


#: (strategy, settings): plain PKG, D-Choices, and W-Choices with a small sketch, small
#: chunks and a low threshold (many heavy keys, counters evicted on ties).
PER_SENDER_CASES = [
    ("pkg", {}),
    ("dchoices", {}),
    ("wchoices", {"heavy_share": 0.02, "sketch_chunk": 100, "capacity": 20}),
    ("dchoices", {"sketch_chunk": 1, "capacity": 3}),
]
#: The batches: the middle one gives senders 0 and 1 a tuple each and sender 2 none.
BATCHES = ((0, 12_000), (12_000, 12_002), (12_002, 30_000))
#: Which path routes each batch: Python, the JVM, and a switch between them (the senders'
#: states cross from one to the other).
PATHS = {
    "python": (False, False, False),
    "jvm": (None, None, None),
    "python-then-jvm": (False, None, None),
}


@pytest.mark.parametrize("paths", list(PATHS))
def test_per_tuple_routing_in_spark_equals_the_library(spark, paths):
    from balancebench.spark.routers import PerTupleRouter, RouteContext
    from balancebench.strategies import get_strategy

    if PATHS[paths][1] is None:
        jvm_router_or_skip(spark)
    # Given a Zipf stream laid out over 3 sender partitions (tuple i at sender i mod 3,
    # in arrival order), routed in two batches
    rng = np.random.default_rng(6)
    p = np.arange(1, 201, dtype=float) ** -1.3
    keys = rng.choice(200, 30_000, p=p / p.sum()).astype(np.int64)
    ids = np.arange(len(keys), dtype=np.int64)
    frame = spark.createDataFrame(pd.DataFrame({"tuple_id": ids, "key": keys}))

    for name, settings in PER_SENDER_CASES:
        for stream_senders, own in ((3, None), (5, 3)):
            strategy = get_strategy(name, n_nodes=8, senders=own, **settings)
            library: dict = {}  # the library's routing of the same batches
            expected = np.concatenate(
                [strategy.route(keys[lo:hi], ids[lo:hi] % 3, library, 8) for lo, hi in BATCHES]
            )
            router = PerTupleRouter(strategy, 8, 0.05)
            ctx = RouteContext(spark, AGGREGATE, 8, 1, stream_senders)
            got = np.zeros(len(keys), dtype=np.int64)
            python_s = []
            for (lo, hi), jvm in zip(BATCHES, PATHS[paths], strict=True):
                router.jvm = jvm
                routed = router.route(_laid_out(frame, lo, hi, stream_senders), ctx)
                # When Spark routes the batch: partition s holds sender s's tuples in order
                parts = routed.select("key", "node").rdd.glom().collect()
                python_s.append(router.routing_cpu_s())
                assert router.routes_in_python == (jvm is False)
                assert len(parts) == 3
                for sender, rows in enumerate(parts):
                    mine = ids[(ids >= lo) & (ids < hi) & (ids % 3 == sender)]
                    assert [r["key"] for r in rows] == keys[mine].tolist()
                    got[mine] = [r["node"] for r in rows]
            # Then every decision equals the library's on the same batches (each sender's
            # state carried from one batch to the next) ...
            assert np.array_equal(got, expected), (name, stream_senders, own, paths)
            assert sorted(router.sender_states) == [0, 1, 2]
            # ... and the Python workers reported the CPU they spent routing (the JVM's
            # is in its tasks' executorCpuTime)
            for s, jvm in zip(python_s, PATHS[paths], strict=True):
                assert (s >= 0) if jvm is False else (s == 0)
            assert python_s[0] > 0 if PATHS[paths][0] is False else python_s[0] == 0


def test_jvm_router_keeps_state_like_the_library(spark):
    """The senders' states after a batch routed in the JVM equal the library's (load
    vector, tuples seen, sketch), byte for byte."""
    from balancebench.spark import jvm_routing
    from balancebench.spark.routers import PerTupleRouter, RouteContext
    from balancebench.strategies import get_strategy

    jvm_router_or_skip(spark)
    # Given keys spread over the whole int64 range with a few hot ones, 2 senders
    rng = np.random.default_rng(11)
    keys = np.r_[rng.integers(-(2**63), 2**63 - 1, 3000, dtype=np.int64), [0, -1] * 2000]
    keys = rng.permutation(keys)
    ids = np.arange(len(keys), dtype=np.int64)
    frame = spark.createDataFrame(pd.DataFrame({"tuple_id": ids, "key": keys}))
    strategy = get_strategy("wchoices", n_nodes=5, sketch_chunk=64, capacity=8)
    states: dict = {}
    strategy.route(keys, ids % 2, states, 5)
    # When the JVM routes the same tuples
    router = PerTupleRouter(strategy, 5, 0.05)
    router.route(_laid_out(frame, 0, len(keys), 2), RouteContext(spark, AGGREGATE, 5, 1, 2)).count()
    router.routing_cpu_s()
    # Then each sender's state is the library's
    for sender in (0, 1):
        assert jvm_routing.encode_state(sender, router.sender_states[sender]) == (
            jvm_routing.encode_state(sender, states[sender])
        )


def test_counting_a_routed_batchs_partitions_runs_no_job(spark):
    """The engine counts the routed rows' partitions (its senders) before the batch's job.
    Counting must not run the routing table's broadcast: the batch's job runs it again
    and charges it as routing (it ran twice a batch when the count built the plan's RDD)."""
    n_nodes = 4
    table = RoutingTable.from_parts(
        np.array([1, 1, 2]), np.array([0, 3, 1]), np.array([5.0, 5.0, 1.0]), n_nodes
    )
    assert len(table) > 0
    batch = spark.range(0, 4000, numPartitions=3).select(
        F.col("id").alias("tuple_id"), (F.col("id") % 7).alias("key")
    )
    routed = with_storage_node(spark, batch, table)
    sc = spark.sparkContext
    sc.setJobGroup("count-partitions-test", "test")
    try:
        counted = partitions_of(routed)
        # The status store learns of a job from the listener bus, a little later.
        sc._jsc.sc().listenerBus().waitUntilEmpty(10_000)
        jobs = sc.statusTracker().getJobIdsForGroup("count-partitions-test")
    finally:
        sc.setJobGroup("", "")
    assert counted == 3
    assert list(jobs) == []
    # A union Spark does not see as laid out alike: counted from the plan's RDD, rightly.
    united = routed.unionByName(with_storage_node(spark, batch, table))
    assert partitions_of(united) == 6 == united.rdd.getNumPartitions()
