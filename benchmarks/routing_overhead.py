"""Cost of routing with a routing table against Spark's plain hash repartitioning.

    uv run python benchmarks/routing_overhead.py              # 10M tuples, 10k entries
    uv run python benchmarks/routing_overhead.py --tuples 2000000 --repeats 3

Same Spark session, same cached input (``--tuples`` Zipf-keyed tuples, ``--keys`` keys,
s = 1.0), ``--nodes`` partitions. Each variant is materialised with the ``noop`` sink
(the full shuffle, no output) and timed on the driver; the median of ``--repeats`` runs
is printed after one warm-up run each:

- ``repartition(n, key)``: what Spark does by itself (the floor);
- ``routing table, hot split``: paper 000's storage routing ONE exactly as the engine
  runs it (``spark.placement.with_storage_node`` + ``partition_by_node``) with a routing
  table of ``--entries`` keys: the hottest keys, each split over 2-4 nodes, so most
  tuples take the table path (the worst case);
- ``routing table, plan-like``: ``--entries`` random keys moved whole (one part each),
  the shape QMMP/MNRT plans mostly have (e.g. QMMP at K = 1e6: 37k entries, 44 split);
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

from balancebench.core.hashing import home_nodes
from balancebench.core.routing_table import RoutingTable
from balancebench.core.schema import positive_int
from balancebench.spark.placement import partition_by_node, with_storage_node
from balancebench.spark.session import get_session


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


def plan_like_table(
    keys_by_rank: np.ndarray, entries: int, n_nodes: int, seed: int
) -> RoutingTable:
    """``entries`` random keys, each moved whole to another node."""
    rng = np.random.default_rng(seed)
    keys = rng.choice(keys_by_rank, size=entries, replace=False)
    node = (home_nodes(keys, n_nodes) + rng.integers(1, n_nodes, entries)) % n_nodes
    return RoutingTable.from_parts(keys, node.astype(np.int32), np.ones(entries), n_nodes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tuples", type=positive_int, default=10_000_000)
    parser.add_argument("--keys", type=positive_int, default=1_000_000)
    parser.add_argument("--entries", type=positive_int, default=10_000)
    parser.add_argument("--nodes", type=positive_int, default=8)
    parser.add_argument("--repeats", type=positive_int, default=5)
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

    plan_like = plan_like_table(rank_to_key, args.entries, n, seed=2)
    plan_hit = df.join(F.broadcast(spark.createDataFrame(pa.table({"key": plan_like.keys}))), "key")
    plan_share = plan_hit.count() / rows
    variants = [
        ("repartition(n, key)", df.repartition(n, "key")),
        ("routing table, hot split", partition_by_node(with_storage_node(spark, df, table), n)),
        ("routing table, plan-like", partition_by_node(with_storage_node(spark, df, plan_like), n)),
        (
            "empty routing table",
            partition_by_node(with_storage_node(spark, df, RoutingTable.empty(n)), n),
        ),
    ]
    # Interleaved rounds, so drift in the machine's speed hits every variant alike.
    times: dict[str, list[float]] = {label: [] for label, _ in variants}
    for _, frame in variants:
        frame.write.format("noop").mode("overwrite").save()  # warm-up
    for _ in range(args.repeats):
        for label, frame in variants:
            started = time.perf_counter()
            frame.write.format("noop").mode("overwrite").save()
            times[label].append(time.perf_counter() - started)
    med = {label: float(np.median(v)) for label, v in times.items()}
    plain = med["repartition(n, key)"]
    print(
        f"{rows:,} tuples, {args.keys:,} keys, {n} nodes, local[*] on {os.cpu_count()} cores; "
        f"medians of {args.repeats} interleaved rounds"
    )
    print(
        f"hot split: {len(table):,} entries ({table.n_parts:,} parts) covering "
        f"{in_table / rows:.0%} of the tuples; plan-like: {len(plan_like):,} whole entries "
        f"covering {plan_share:.1%}"
    )
    print(f"{'variant':>26} {'seconds':>8} {'x plain':>8}")
    for label, _ in variants:
        print(f"{label:>26} {med[label]:>8.2f} {med[label] / plain:>8.2f}")
    print("target: routing table <= 1.30x")
    spark.stop()


if __name__ == "__main__":
    main()
