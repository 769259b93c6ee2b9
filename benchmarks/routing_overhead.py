"""Cost of routing with a routing table against Spark's plain hash repartitioning.

    uv run python benchmarks/routing_overhead.py              # 10M tuples, 10k entries
    uv run python benchmarks/routing_overhead.py --tuples 2000000 --repeats 3

Same Spark session, same cached input (``--tuples`` Zipf-keyed tuples, ``--keys`` keys,
s = 1.0), ``--nodes`` partitions. Each variant is materialised with the ``noop`` sink
(the full shuffle, no output) and timed on the driver; the median of ``--repeats`` runs
is printed after one warm-up run each:

- ``repartition(n, key)``: what Spark does by itself (the floor);
- ``routing table``: paper 000's storage routing ONE exactly as the engine runs it
  (``spark.routing.with_storage_node`` + ``partition_by_node``) with a routing table of
  ``--entries`` keys (the hottest keys, each split over 2-4 nodes), so most tuples take the
  table path;
- ``empty table``: the same code with no entries (home routing + surrogate placement).

Target (issue 5): routing table <= 1.3x plain repartition.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from balancebench.hashing import home_nodes
from balancebench.routing import RoutingTable
from balancebench.spark.routing import partition_by_node, with_storage_node
from balancebench.spark.session import get_session


def timed(df, repeats: int) -> float:
    df.write.format("noop").mode("overwrite").save()  # warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def routing_table(keys_by_rank: np.ndarray, entries: int, n_nodes: int, seed: int) -> RoutingTable:
    """The ``entries`` hottest keys, each split over 2-4 nodes with random shares."""
    rng = np.random.default_rng(seed)
    keys = keys_by_rank[:entries]
    parts = rng.integers(2, 5, len(keys))
    key = np.repeat(keys, parts)
    node = (
        np.repeat(home_nodes(keys, n_nodes), parts) + np.concatenate([np.arange(p) for p in parts])
    ) % n_nodes
    return RoutingTable.from_parts(key, node.astype(np.int32), rng.random(len(key)) + 0.1, n_nodes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=int, default=10_000_000)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = get_session("balancebench-routing-overhead", master="local[*]")
    n = args.nodes

    rng = np.random.default_rng(0)
    rank_to_key = rng.permutation(args.keys).astype(np.int64)
    # Zipf(1.0) ranks in Spark (deterministic): rank = floor(exp(u * ln(keys))) roughly
    # follows p(r) ~ 1/r; the exact law does not matter here, only that hot keys dominate.
    base = spark.range(args.tuples).withColumnRenamed("id", "tuple_id")
    u = F.pmod(F.hash(F.col("tuple_id"), F.lit(7).cast("bigint")), F.lit(1 << 30)) / (1 << 30)
    rank = F.least(F.floor(F.exp(u * F.lit(float(np.log(args.keys))))), F.lit(args.keys)) - 1
    keys_df = spark.createDataFrame(
        pa.table({"rank": np.arange(args.keys, dtype=np.int64), "key": rank_to_key})
    )
    df = (
        base.withColumn("rank", rank.cast("long"))
        .join(F.broadcast(keys_df), "rank")
        .select("tuple_id", "key")
        .repartition(spark.sparkContext.defaultParallelism)
        .cache()
    )
    rows = df.count()
    table = routing_table(rank_to_key, args.entries, n, seed=1)
    entries = spark.createDataFrame(pa.table({"key": table.keys}))
    in_table = df.join(F.broadcast(entries), "key").count()

    plain = timed(df.repartition(n, "key"), args.repeats)
    routed = timed(partition_by_node(with_storage_node(spark, df, table), n), args.repeats)
    empty = timed(
        partition_by_node(with_storage_node(spark, df, RoutingTable.empty(n)), n), args.repeats
    )
    print(
        f"{rows:,} tuples, {args.keys:,} keys, {len(table):,} routing-table entries "
        f"({table.n_parts:,} parts) covering {in_table / rows:.0%} of the tuples, {n} nodes, "
        f"local[*] on {os.cpu_count()} cores; medians of {args.repeats} runs"
    )
    print(f"{'variant':>24} {'seconds':>8} {'x plain':>8}")
    print(f"{'repartition(n, key)':>24} {plain:>8.2f} {1.0:>8.2f}")
    print(f"{'routing table':>24} {routed:>8.2f} {routed / plain:>8.2f}")
    print(f"{'empty routing table':>24} {empty:>8.2f} {empty / plain:>8.2f}")
    print("target: routing table <= 1.30x")
    spark.stop()


if __name__ == "__main__":
    main()
