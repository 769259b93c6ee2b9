"""What a split key's tuple costs the routing-table lookup (issues 44 and 59): CPU per tuple
of ``placement.with_storage_node`` on each of its paths (the JVM router, ``jvm``, and
Spark SQL, ``sql``) against ``F(k)`` alone, on a Spark range of 16M tuples over 10 keys, 6
of them in the table and split 2, 4 and 8 ways (60% of the tuples take the split path: 1,
2 and 3 steps of the parts' binary search), the same table with the 6 keys moved whole,
and F(k) plus the split path's unit hash (``fraction_unit``) with no table, so the split
path's cost is traced to its parts. One local core, the best of 6
timed runs of each plan (built once: the driver's table building is not timed),
machine otherwise idle; the wall of a one-core job, so a plan's fixed cost (about
10-30 ms of planning and task launch) is in it, 1-2 ns per tuple at this size.

    uv run python benchmarks/split_lookup.py
"""

from __future__ import annotations

import time

import numpy as np
from pyspark.sql import functions as F

from balancebench.core.hashing import home_nodes
from balancebench.core.routing_table import RoutingTable
from balancebench.spark import jvm_routing
from balancebench.spark.placement import fraction_unit, home_node, jvm_tables, with_storage_node
from balancebench.spark.session import get_session

TUPLES = 16_000_000
NODES = 8


def _split(keys: np.ndarray, ways: int) -> RoutingTable:
    """``keys`` each split over nodes ``0 .. ways - 1`` in equal shares."""
    n = len(keys)
    return RoutingTable.from_parts(
        np.repeat(keys, ways), np.tile(np.arange(ways), n), np.ones(n * ways), NODES
    )


def main() -> None:
    spark = get_session("balancebench-split-lookup", "local[1]")
    base = spark.range(TUPLES).select(
        (F.col("id") % 10).alias("key"), F.col("id").alias("tuple_id")
    )
    keys = np.arange(6, dtype=np.int64)
    whole = RoutingTable.from_parts(keys, (home_nodes(keys, NODES) + 1) % NODES, np.ones(6), NODES)
    unit = fraction_unit("tuple_id")
    variants = {
        "F(k) alone": base.withColumn("node", home_node("key", NODES)),
        # The split path's own parts: the tuple's unit hash alone (no table), then 1, 2
        # and 3 steps of the parts' binary search (2, 4, 8 ways).
        "F(k) + unit hash": base.withColumn(
            "node", home_node("key", NODES) + unit.bitwiseAND(F.lit(1))
        ),
    }
    for path in ("sql", "jvm"):
        if path == "jvm" and not jvm_tables(spark):
            print(f"(no JVM router here: {jvm_routing.routing_path(spark)[1]})")
            continue
        jvm = path == "jvm"
        variants[f"6 keys moved whole, {path}"] = with_storage_node(spark, base, whole, jvm=jvm)
        for ways in (2, 4, 8):
            table = _split(keys, ways)
            variants[f"6 keys split {ways} ways, {path}"] = with_storage_node(
                spark, base, table, jvm=jvm
            )
    totals = {name: df.agg(F.sum("node")) for name, df in variants.items()}
    best = {name: float("inf") for name in variants}
    for _ in range(6):
        for name, total in totals.items():
            started = time.perf_counter()
            total.collect()
            best[name] = min(best[name], time.perf_counter() - started)
    print(f"routing lookup, {TUPLES:,} tuples over 10 keys, one core (best of 6 runs):")
    for name, seconds in best.items():
        print(f"  {name:>27}: {seconds / TUPLES * 1e9:6.1f} ns per tuple")
    spark.stop()


if __name__ == "__main__":
    main()
