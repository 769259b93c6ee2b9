"""What the engine charges against the work that causes it (issue 26), side by side in one
run, and how far its verdicts can be trusted (issue 43).

    uv run python benchmarks/engine_costs.py                     # every section, 5 rounds
    uv run python benchmarks/engine_costs.py --sections noise --noise-cells default --rounds 6

One Spark session (``local[*]``), every run through the runner registry as a DAG run
does (``experiment.execute``, every batch checked by the oracle), each strategy warmed
up under its own code paths first (``experiment.warm_up``); a section's strategies run
``--rounds`` rotated rounds and every figure printed is the median. Sections:

- ``coverage``: the verdicts on simulated rounds with a known truth
  (``balancebench.experiment.stats_coverage``): how often the paired ratio's interval holds the true
  ratio at 5 and 10 rounds, how often an equivalence or a difference is called wrongly,
  with rounds added until decided too, and the old bootstrap beside Student's t.
- ``routing``: routing CPU per tuple of ``hash``, ``pkg`` and ``wchoices`` on 4 batches of
  ``--routing-tuples`` TOPK tuples (the senders' JVM CPU plus, on the Python path, their
  Python workers' own CPU): pkg and wchoices on the path their runs take (the JVM router
  where ``make setup`` compiled it) and forced into Python workers, paired rounds.
  Target: pkg and wchoices <= 1.5x hash (issue 44).
- ``tables``: the routing stage's CPU per tuple by a routing table (``hash``'s router
  holding tables of ``--table-sizes`` keys, hits and splits included) against no table,
  on the JVM router and, for comparison, on Spark SQL (``--table-paths``), in
  ``--table-rounds`` paired rounds of one job per batch and table, each beside a job of no
  table (issue 59). Where the stream's keys are 0 .. n - 1, two traces with no table:
  "splits, no lookup" (the tables' decisions as arithmetic) and "unit, no split" (the
  split keys' units computed, every key kept whole), which part the split decisions cost
  and which the lookup (``docs/data/split_trace.txt``).
  Target: the JVM router <= 1.05x at every size (the lookup's cost does not grow with the
  table).
- ``fixed``: ``node_fixed_s`` (the engine's calibration batch: no tuples, no state,
  through the batch's node stages) on the default TOPK run and on full-history EQ5,
  beside plain Spark's trivial reduce stage in the same session (an empty batch grouped
  by node, one task per node of the TOPK run: 8, as in ``make run``). Target: TOPK <= 10 ms
  per node and batch.
- ``per_tuple``: the engine's node CPU per tuple (sum over nodes and node stages / tuples
  received) of ``hash`` on the default TOPK run, against a plain Spark floor on the same
  tuples in the same session: each batch repartitioned by node, then a hash aggregate by
  (node, key), one job, its reduce stage's CPU. Target: <= 2x.
- ``signal``: ``node_work_r2`` and the residual of ``hash``, ``qmmp``, ``mnrt`` on the
  default run (``make run``'s Params). Target: r^2 >= 0.8 (a balanced run leaves tuples
  little to explain: its residual says what noise picks the slowest node).
- ``noise``: the round-to-round coefficient of variation of capacity, node service,
  routing and p99 latency on the default run's cell and on the crossover's TOPK s = 1.4
  cell at 1M tuples per node and batch (``--noise-cells``), and where it comes from: each
  batch's CV, the share of a run's variance that is its batches moving together, the
  JVM's GC share of the node tasks, the paired log-ratio's spread against the unpaired
  one, and a fixed Spark job's own CV at a node task's size (the machine's floor).
  Target: CV <= 3% for node service and capacity.
- ``migration``: (1) the planners' ``migration_s_total`` over their node service on the
  default run (target <= 10%); (2) runs that move ~1k, ~10k and ~100k stored tuples
  (full-history EQ5 under ``hash``, a fixed share of every node's state moved to the next
  node after batch 0, so the moves ride batch 1's exchange) against the same run moving
  nothing: the measured marginal CPU of the moved rows (node stages plus the exchange's
  extra map tasks, with minus without) beside what the cost model charges (its CPU plus
  bytes / bandwidth, summed over nodes) and ``migration_s``. Target: charged within 2x of
  the marginal per-row CPU x rows + bytes / bandwidth.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from balancebench.core.hashing import FRACTION_UNITS
from balancebench.core.schema import positive_int
from balancebench.experiment.params import ExperimentSpec
from balancebench.experiment.rounds import (
    RoundPolicy,
    fixed_rounds,
    rotated_rounds,
    run_rounds,
    verdict_lines,
)
from balancebench.experiment.run_log import report_round, report_run
from balancebench.experiment.runs import LoadedCell

SECTIONS = ("coverage", "routing", "tables", "fixed", "per_tuple", "signal", "noise", "migration")


def med(values: list[float]) -> float:
    return float(np.median(values))


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def bound_target(ratio: Any, bound: float) -> str:
    """A ratio's target "at most ``bound``x": met where its whole interval is at or below
    the bound, MISSED where it is wholly above, else undecided."""
    return "met" if ratio.hi <= bound else "MISSED" if ratio.lo > bound else "undecided"


#: The tables section's split keys: every ``SPLIT_EVERY``-th key of a table, over two nodes.
SPLIT_EVERY = 4


def topk_params(args: argparse.Namespace, **overrides: Any) -> ExperimentSpec:
    """``make run``'s defaults (TOPK, 4.5M tuples at 750k/s, 6 batches, 8 nodes)."""
    return ExperimentSpec.checked({"warmup_batches": 2, **overrides})


def section_routing(spark: Any, args: argparse.Namespace) -> None:
    """Routing CPU per tuple of the per-sender strategies against ``hash``: each on the
    path its runs take (the JVM router where ``make setup`` compiled it) and forced into
    Python workers, beside the Python path with a trivial decision; paired rotated
    rounds, verdicts on the ratio to ``hash``."""
    from balancebench.core.hashing import home_nodes
    from balancebench.core.stats import LOWER
    from balancebench.core.stats import verdict as stats_verdict
    from balancebench.spark import jvm_routing
    from balancebench.spark.engine import Engine
    from balancebench.spark.routers import PerTupleRouter
    from balancebench.strategies import get_strategy
    from balancebench.strategies.pkg import PkgStrategy

    class PythonHash(PkgStrategy):
        """F(k) computed in the Python worker: the per-sender path's own cost with a
        decision that costs next to nothing (numpy's hash of the key)."""

        def route_sender(self, keys: np.ndarray, state: Any) -> np.ndarray:
            return home_nodes(keys, len(state.sent))

    # Four measured batches, as the tables section (one batch moved by +-30%).
    params = topk_params(
        args,
        n_tuples=args.routing_tuples * 4,
        input_rate_tuples_per_s=float(args.routing_tuples),
        n_batches=4,
        strategies=["hash", "pkg", "wchoices"],
        warmup_batches=1,
    )
    cell = LoadedCell(spark, params)
    n = params["n_nodes"]
    forced = {
        "pkg python": lambda: get_strategy("pkg", n_nodes=n),
        "wchoices python": lambda: get_strategy("wchoices", n_nodes=n),
        "python F(k)": PythonHash,
    }
    warmed: set[str] = set()

    def one(name: str) -> tuple[float, float]:
        if name in forced:
            for _ in range(1 if name in warmed else 2):  # the first run warms the path up
                router = PerTupleRouter(forced[name](), n, 0.05, jvm=False)
                batches = Engine(spark, cell.df, cell.config, router, name).run()
            warmed.add(name)
        else:
            batches, _ = cell.run(spark, name)
        tuples = sum(b.input_tuples for b in batches)
        python = sum(b.extra.get("route_python_s", 0.0) for b in batches)
        return sum(b.route_work_s for b in batches) / tuples, python / tuples

    names = ["hash", "pkg", "wchoices", *forced]
    runs = fixed_rounds(names, args.rounds, one)
    cell.release()
    path = jvm_routing.path_tag(spark, get_strategy("wchoices", n_nodes=n), n)
    base = [r[0] for r in runs["hash"]]
    print(
        f"\n[routing] CPU per tuple routed, 4 batches of {args.routing_tuples:,} tuples; "
        f"pkg and wchoices route on: {path}"
    )
    print(f"  {'strategy':>15} {'total ns':>9} {'python ns':>10}  against hash (paired rounds)")
    print(f"  {'hash':>15} {med(base) * 1e9:>9.0f} {0:>10.0f}")
    for name in names[1:]:
        total = [r[0] for r in runs[name]]
        v = stats_verdict(base, total, LOWER)
        ratio = v.ratio
        assert ratio is not None
        line = f"ratio {ratio.estimate:.2f} [{ratio.lo:.2f}, {ratio.hi:.2f}]"
        if name in ("pkg", "wchoices"):
            line += f", target <= 1.5x: {bound_target(ratio, 1.5)}"
        python = med([r[1] for r in runs[name]]) * 1e9
        print(f"  {name:>15} {med(total) * 1e9:>9.0f} {python:>10.0f}  {line}")
    print(
        "  (python F(k): the Python path with a trivial decision: what shipping the batch "
        "to a Python worker and back costs the JVM)"
    )


def section_tables(spark: Any, args: argparse.Namespace) -> None:
    """Routing by a routing table against hash's ``pmod(hash(key), N)``: the engine's
    routing stage of the TOPK aggregation (``KeyLevelRouter.route``, its rows into the
    exchange to the nodes: ``node_state.counted_rows``, ``placement.partition_by_node``; a
    job per batch whose other stage only reads the exchange) on each batch of the stream,
    under tables of ``--table-sizes`` keys (the stream's keys first, each moved whole to
    its home + 1, every fourth split over two nodes, then keys the stream does not have),
    on each path of ``--table-paths``. A round routes each batch under every table in turn
    (rotated by round and batch), each table's job back to back with a job of no table (in
    turns, one first, then the other), so a pair meets the same state of the machine
    within a second (this host's cores change speed from second to second: a fixed loop's
    CPU moves by +-10%, ``benchmarks/cpu_by_worker.py``); the routing stage's CPU per tuple
    over the round's batches, paired rounds, the one statistics function."""
    from pyspark.sql import functions as F

    from balancebench.core.hashing import home_nodes
    from balancebench.core.routing_table import RoutingTable
    from balancebench.core.stats import LOWER
    from balancebench.core.stats import verdict as stats_verdict
    from balancebench.spark.loop import batch_frame
    from balancebench.spark.node_state import counted_rows
    from balancebench.spark.placement import fraction_unit, home_node, jvm_tables, partition_by_node
    from balancebench.spark.rest_task_metrics import ROUTE, TaskMetricsReader, group_work
    from balancebench.spark.routers import BATCH_COLUMNS, STORE, KeyLevelRouter, RouteContext
    from balancebench.strategies import get_strategy

    params = topk_params(
        args,
        n_tuples=args.routing_tuples * 4,
        input_rate_tuples_per_s=float(args.routing_tuples),
        n_batches=4,
        strategies=["hash"],
    )
    cell = LoadedCell(spark, params)
    n = params["n_nodes"]
    rows = cell.df.select("key").distinct().collect()
    stream_keys = np.unique(np.array([r["key"] for r in rows], dtype=np.int64))
    rng = np.random.default_rng(11)

    def table_of(size: int) -> RoutingTable:
        extra = max(size - len(stream_keys), 0)
        keys = np.r_[stream_keys[:size], rng.integers(10**9, 10**12, extra)]
        keys = np.unique(keys)
        moved = (home_nodes(keys, n) + 1) % n
        split = np.arange(len(keys)) % SPLIT_EVERY == 0
        part_key = np.r_[keys, keys[split]]
        part_node = np.r_[moved, (moved[split] + 1) % n]
        return RoutingTable.from_parts(part_key, part_node, np.ones(len(part_key)), n)

    paths = [p for p in args.table_paths if p == "sql" or jvm_tables(spark)]
    tables = {f"{size:,} keys": table_of(size) for size in args.table_sizes}
    variants = {"no table": (RoutingTable.empty(n), None)}
    for path in paths:
        for label, table in tables.items():
            variants[f"{label}, {path}"] = (table, path == "jvm")
    # What splitting costs without any lookup: the decisions of the tables whose keys are
    # all the stream's (moved whole to home + 1, every fourth split over home + 1 and
    # home + 2 by the tuple's unit) as Spark SQL arithmetic on a stream whose keys are
    # 0 .. n - 1, so every fourth key is the one with key % SPLIT_EVERY == 0.
    dense_keys = np.array_equal(stream_keys, np.arange(len(stream_keys)))
    split_only = "splits, no lookup"
    # The same arithmetic with the unit computed but every key kept whole (its part bit
    # masked to 0): what the unit's hash costs, apart from what spreading a key costs.
    unit_only = "unit, no split"
    if dense_keys and any(size >= len(stream_keys) for size in args.table_sizes):
        variants[split_only] = (RoutingTable.empty(n), None)
        variants[unit_only] = (RoutingTable.empty(n), None)
    frames = [batch_frame(cell.df, b).select(*BATCH_COLUMNS) for b in range(params["n_batches"])]
    tuples = sum(cell.df.where(F.col("batch") == b).count() for b in range(len(frames)))
    reader = TaskMetricsReader(spark.sparkContext)
    ctx = RouteContext(spark, cell.config.workload.operator, n, senders=params["n_senders"])

    def route_cpu_s(name: str, frame: Any) -> float:
        table, jvm = variants[name]
        group = f"tables-{time.time_ns()}"
        spark.sparkContext.setJobGroup(group, f"routing under {name}")
        if jvm is False:  # the Spark SQL path, for comparison
            routed = _sql_route(spark, frame, table)
        elif name in (split_only, unit_only):
            moved = (home_node("key", n) + 1) % n
            split = F.col("key") % SPLIT_EVERY == 0
            part_bit = F.lit(1 if name == split_only else 0)
            apart = F.when(split, fraction_unit("tuple_id").bitwiseAND(part_bit))
            node = ((moved + F.coalesce(apart, F.lit(0))) % n).cast("int")
            routed = frame.withColumn("node", node).withColumn("role", F.lit(STORE))
        else:
            router = KeyLevelRouter(get_strategy("hash"), n, 0.05)
            router.table = table
            routed = router.route(frame, ctx)
        exchange = partition_by_node(counted_rows(routed), n)
        exchange.write.format("noop").mode("overwrite").save()
        return group_work(reader, group, ROUTE, n).route_work_s

    tables_run = [name for name in variants if name != "no table"]
    # Each table is measured beside its own "no table" job, the two back to back in
    # turns (one first, then the other), so a pair meets one state of the machine.
    runs: dict[str, list[float]] = {name: [] for name in tables_run}
    bases: dict[str, list[float]] = {name: [] for name in tables_run}
    for r in range(-1, args.table_rounds):  # round -1: every path's code compiled, untimed
        spent = dict.fromkeys(tables_run, 0.0)
        base_spent = dict.fromkeys(tables_run, 0.0)
        for b, frame in enumerate(frames):
            for i, name in enumerate(rotated_rounds(tables_run, 1, first=r * len(frames) + b)):
                order = ["no table", name] if (r + b + i) % 2 == 0 else [name, "no table"]
                for which in order:
                    cpu = route_cpu_s(which, frame)
                    if which == "no table":
                        base_spent[name] += cpu
                    else:
                        spent[name] += cpu
        if r >= 0:
            for name in tables_run:
                runs[name].append(spent[name] / tuples)
                bases[name].append(base_spent[name] / tuples)
    cell.release()
    missing = (
        ""
        if "jvm" in paths or "jvm" not in args.table_paths
        else (" (no JVM router in this session: its variants are left out)")
    )
    print(
        f"\n[tables] routing stage CPU per tuple, {len(frames)} batches of "
        f"{args.routing_tuples:,} tuples, {args.table_rounds} rounds, each table beside "
        f"its own no-table job{missing}"
    )
    print(
        f"  {'table':>20} {'entries':>8} {'ns/tuple':>9} {'no table':>9}  against no table "
        "(paired rounds)"
    )
    for name in tables_run:
        table, jvm = variants[name]
        v = stats_verdict(bases[name], runs[name], LOWER)
        ratio = v.ratio
        assert ratio is not None
        line = f"{v.text()}; ratio {ratio.estimate:.3f} [{ratio.lo:.3f}, {ratio.hi:.3f}]"
        if jvm:
            line += f", target <= 1.05x: {bound_target(ratio, 1.05)}"
        print(
            f"  {name:>20} {len(table):>8} {med(runs[name]) * 1e9:>9.1f} "
            f"{med(bases[name]) * 1e9:>9.1f}  {line}"
        )
    print("  per round, ns/tuple, the table / its no-table job (the pairs behind each verdict):")
    for name in tables_run:
        pairs = " ".join(
            f"{t * 1e9:.0f}/{n * 1e9:.0f}" for t, n in zip(runs[name], bases[name], strict=True)
        )
        print(f"  {name:>20} {pairs}")


def _sql_route(spark: Any, frame: Any, table: Any) -> Any:
    """The routing stage's rows under ``table`` on the Spark SQL path (``jvm=False``)."""
    from pyspark.sql import functions as F

    from balancebench.spark.placement import with_storage_node
    from balancebench.spark.routers import STORE

    return with_storage_node(spark, frame, table, jvm=False).withColumn("role", F.lit(STORE))


def plain_reduce_ms(spark: Any, loaded: LoadedCell, n: int, empty: bool) -> tuple[float, float]:
    """Plain Spark on a batch's tuples: repartition by node, hash aggregate by (node, key),
    one job; the reduce stage's CPU per task (ms) and per tuple (ns), median over batches."""
    from pyspark.sql import functions as F

    from balancebench.spark.loop import batch_frame
    from balancebench.spark.placement import home_node, partition_by_node
    from balancebench.spark.rest_task_metrics import TaskMetricsReader, group_work

    reader = TaskMetricsReader(spark.sparkContext)
    per_task, per_tuple = [], []
    for b in range(loaded.params["n_batches"]):
        frame = batch_frame(loaded.df, b)
        if empty:
            frame = frame.where(F.col("tuple_id") < 0)
        group = f"plain-{b}-{time.time_ns()}"
        spark.sparkContext.setJobGroup(group, "plain Spark floor")
        routed = partition_by_node(frame.withColumn("node", home_node("key", n)), n)
        routed.groupBy("_surrogate", "node", "key").count().write.format("noop").mode(
            "overwrite"
        ).save()
        work = group_work(reader, group, "route", n)
        cpu = float(work.node_cpu_s.sum())
        tuples = float(work.node_records_read.sum())
        per_task.append(cpu / n * 1e3)
        per_tuple.append(cpu / tuples * 1e9 if tuples else 0.0)
    return med(per_task), med(per_tuple)


def section_fixed(spark: Any, args: argparse.Namespace) -> None:
    topk = LoadedCell(spark, topk_params(args, strategies=["hash"]))
    runs = topk.side_by_side(spark, ["hash"], RoundPolicy(args.rounds, args.rounds)).summaries
    plain_ms, _ = plain_reduce_ms(spark, topk, topk.params["n_nodes"], empty=True)
    topk.release()
    eq5 = LoadedCell(spark, eq5_params(args, ["hash"]))
    eq5_runs = eq5.side_by_side(spark, ["hash"], RoundPolicy(args.rounds, args.rounds)).summaries
    eq5.release()
    topk_ms = med([s["node_fixed_s"] for s in runs["hash"]]) * 1e3
    eq5_ms = med([s["node_fixed_s"] for s in eq5_runs["hash"]]) * 1e3
    print("\n[fixed] CPU per node and batch of a batch with no tuples (node_fixed_s)")
    print(f"  engine, topk (2 node stages): {topk_ms:.1f} ms")
    print(f"  engine, eq5 (1 node stage; the calibration holds no state): {eq5_ms:.1f} ms")
    print(f"  plain Spark, an empty batch's reduce stage: {plain_ms:.1f} ms per task")
    print(f"  target topk <= 10 ms: {verdict(topk_ms <= 10.0)}")


def section_per_tuple(spark: Any, args: argparse.Namespace) -> None:
    topk = LoadedCell(spark, topk_params(args, strategies=["hash"]))

    def one(name: str) -> tuple[float, float]:
        batches, summary = topk.run(spark, name)
        work = sum(float(b.node_work_s.sum()) for b in batches)
        tuples = sum(b.received_tuples for b in batches)
        return work / tuples, summary["node_work_per_tuple_us"] * 1e3

    runs = fixed_rounds(["hash"], args.rounds, one)
    floors = [
        plain_reduce_ms(spark, topk, topk.params["n_nodes"], empty=False)[1]
        for _ in range(args.rounds)
    ]
    topk.release()
    engine_ns = med([r[0] for r in runs["hash"]]) * 1e9
    slope_ns = med([r[1] for r in runs["hash"]])
    floor_ns = med(floors)
    print("\n[per_tuple] node CPU per tuple, default TOPK run (hash), same tuples")
    print(f"  engine: {engine_ns:.0f} ns (all node stages / tuples; fitted slope {slope_ns:.0f})")
    print(f"  plain Spark floor (repartition by node + hash aggregate): {floor_ns:.0f} ns")
    ratio = engine_ns / floor_ns
    print(f"  target <= 2x: {ratio:.2f}x, {verdict(ratio <= 2.0)}")


def section_coverage(spark: Any, args: argparse.Namespace) -> None:
    """What the verdicts' intervals hold, simulated with this machine's noise
    (``balancebench.experiment.stats_coverage``; ``tests/test_stats.py`` asserts the same rates)."""
    from balancebench.experiment.stats_coverage import coverage_lines

    print("\n[coverage] the verdicts on simulated rounds with a known truth")
    for line in coverage_lines():
        print(f"  {line}")


def section_signal(spark: Any, args: argparse.Namespace) -> None:
    names = ["hash", "qmmp", "mnrt"]
    topk = LoadedCell(spark, topk_params(args, strategies=names))
    policy = RoundPolicy(args.rounds, args.rounds)
    found = topk.side_by_side(spark, names, policy, report_run(), report_round())
    topk.release()
    runs = found.summaries
    print(
        f"\n[signal] the default run (TOPK, 4.5M tuples, 6 batches, 8 nodes), {args.rounds} rounds"
    )
    print(
        f"  {'strategy':>9} {'r2':>6} {'resid ms':>9} {'us/tuple':>9} {'fixed ms':>9} "
        f"{'node s':>7} {'route s':>8} {'mig s':>8} {'cap M/s':>8}"
    )
    for name in names:
        s = runs[name]
        print(
            f"  {name:>9} {med([r['node_work_r2'] for r in s]):>6.2f} "
            f"{med([r['node_work_residual_s'] for r in s]) * 1e3:>9.1f} "
            f"{med([r['node_work_per_tuple_us'] for r in s]):>9.3f} "
            f"{med([r['node_fixed_s'] for r in s]) * 1e3:>9.1f} "
            f"{med([r['makespan_s_total'] for r in s]):>7.3f} "
            f"{med([r['route_s_total'] for r in s]):>8.3f} "
            f"{med([r['migration_s_total'] for r in s]):>8.4f} "
            f"{med([r['capacity_tuples_per_s'] for r in s]) / 1e6:>8.2f}"
        )
    for name in names:
        r2 = med([r["node_work_r2"] for r in runs[name]])
        print(f"  target r2 >= 0.8, {name}: {r2:.2f}, {verdict(r2 >= 0.8)}")
    for name in ("qmmp", "mnrt"):
        share = med([r["migration_s_total"] / r["makespan_s_total"] for r in runs[name]])
        print(
            f"  target migration <= 10% of node service, {name}: {share:.1%}, "
            f"{verdict(share <= 0.10)}"
        )
    print("  verdicts against hash on the paired rounds (balancebench.core.stats):")
    for line in verdict_lines(found):
        print(f"    {line}")


def _cv(values: list[float]) -> float:
    """Round-to-round coefficient of variation (sample std / mean)."""
    arr = np.asarray(values, dtype=float)
    return float(arr.std(ddof=1) / arr.mean()) if len(arr) > 1 and arr.mean() else float("nan")


DEFAULT_NAMES = ["hash", "qmmp", "mnrt"]


def noise_cells(args: argparse.Namespace) -> dict[str, tuple[ExperimentSpec, list[str]]]:
    """The cells the noise section measures: the default run's, and the crossover's
    TOPK s = 1.4 cell at 1M tuples per node and batch (4 nodes, 3 batches: where the
    README says balancing pays), each with the strategies it compares."""
    cells = {
        "default": (
            topk_params(args, strategies=["hash", "qmmp", "mnrt"]),
            ["hash", "qmmp", "mnrt"],
        ),
        "crossover": (
            ExperimentSpec.checked(
                {
                    "workload": "topk",
                    "strategies": ["hash", "qmmp"],
                    "zipf_s": 1.4,
                    "n_nodes": 4,
                    "n_senders": 4,
                    "n_batches": 3,
                    "window_s": 0.0,
                    "n_tuples": 12_000_000,
                    "input_rate_tuples_per_s": 4_000_000.0,
                    "n_keys": 10_000,
                    "topic_stream_drift_period_s": 0.0,
                    "warmup_batches": 2,
                    "seed": 1,
                }
            ),
            ["hash", "qmmp"],
        ),
    }
    return {k: cells[k] for k in args.noise_cells}


def machine_floor(spark: Any, n: int, task_s: float, batches: int, jobs: int) -> dict:
    """The machine's own noise at a node task's size: one fixed Spark job (``n`` tasks,
    each a hash aggregate over cached rows, sized to about ``task_s`` of CPU) run ``jobs``
    times; the CV of one task's CPU across jobs, and of ``batches`` jobs' summed slowest
    task (what node service sums)."""
    from pyspark.sql import functions as F

    from balancebench.spark.rest_task_metrics import TaskMetricsReader, task_cpu_s

    reader = TaskMetricsReader(spark.sparkContext)

    def job(frame: Any) -> np.ndarray:
        group = f"floor-{time.time_ns()}"
        spark.sparkContext.setJobGroup(group, "machine floor")
        frame.groupBy((F.col("id") % 997).alias("k")).agg(
            F.sum(F.xxhash64("id") % 1000)
        ).write.format("noop").mode("overwrite").save()
        tracker = spark.sparkContext.statusTracker()
        stages = sorted(
            sid for j in tracker.getJobIdsForGroup(group) for sid in tracker.getJobInfo(j).stageIds
        )
        lists = [reader.stage_tasks(sid) or [] for sid in stages]
        return task_cpu_s(next((t for t in lists if len(t) == n), []))  # the map stage

    pilot_rows = 200_000
    pilot = spark.range(0, n * pilot_rows, numPartitions=n).cache()
    pilot.count()
    for _ in range(3):  # warm the code up, then size the rows to the node task's CPU
        cpu = job(pilot)
    pilot.unpersist()
    per_row = float(np.median(cpu)) / pilot_rows if len(cpu) else 0.0
    # Bounded: a task of 10k to 5M rows (a bad pilot must not cache the disk full).
    rows = int(np.clip(task_s / per_row if per_row > 0 else pilot_rows, 10_000, 5_000_000))
    frame = spark.range(0, n * rows, numPartitions=n).cache()
    frame.count()
    per_job = [job(frame) for _ in range(jobs)]
    frame.unpersist()
    tasks = np.array([w for w in per_job if len(w) == n])
    slowest = tasks.max(axis=1)
    sums = [
        float(slowest[i : i + batches].sum()) for i in range(0, len(slowest) - batches + 1, batches)
    ]
    return {
        "task_ms": float(tasks.mean() * 1e3),
        "task_cv": float(np.median(tasks.std(axis=0, ddof=1) / tasks.mean(axis=0))),
        "run_cv": _cv(sums),
        "runs": len(sums),
    }


def section_noise(spark: Any, args: argparse.Namespace) -> None:
    """Round-to-round noise of the headline figures, and where it comes from."""
    for cell_name, (params, names) in noise_cells(args).items():
        noise_of_cell(spark, args, cell_name, params, names)


def noise_of_cell(
    spark: Any, args: argparse.Namespace, cell_name: str, params: ExperimentSpec, names: list[str]
) -> None:
    """One cell's rounds, the CV of each headline figure and the sources of its noise."""
    cell = LoadedCell(spark, params)
    batches: dict[str, list[list[Any]]] = {n: [] for n in names}

    def run(name: str, _: int) -> dict[str, float]:
        measured, summary = cell.run(spark, name)
        batches[name].append(measured)
        return summary

    policy = RoundPolicy(args.rounds, args.rounds)
    found = run_rounds(names, run, policy, report_run(f"{cell_name}: "))
    # The floor's tasks are sized to a node's CPU in a batch (its node stages summed).
    task_s = float(
        np.mean([b.node_work_s.mean() for runs in batches.values() for r in runs for b in r])
    )
    floor = machine_floor(spark, params.n_nodes, task_s, params.n_batches, 8 * params.n_batches)
    cell.release()
    print(
        f"\n[noise] {cell_name} cell: {params.workload.name}, s={params['zipf_s']:g}, "
        f"{params['n_tuples']:,} tuples, {params.n_batches} batches, {params.n_nodes} "
        f"nodes; {args.rounds} rounds; round-to-round CV (std / mean over the rounds)"
    )
    print(
        f"  {'strategy':>9} {'capacity':>9} {'node svc':>9} {'routing':>9} {'p99':>7}  "
        f"{'batch max':>9} {'batch sum':>9} {'fixed ms':>8} {'GC share':>8}"
    )
    for name in names:
        s = found.summaries[name]
        runs = batches[name]
        max_cv = np.median([_cv([r[b].makespan_s for r in runs]) for b in range(len(runs[0]))])
        sum_cv = np.median(
            [_cv([float(r[b].node_work_s.sum()) for r in runs]) for b in range(len(runs[0]))]
        )
        print(
            f"  {name:>9} {_cv([x['capacity_tuples_per_s'] for x in s]):>9.1%} "
            f"{_cv([x['makespan_s_total'] for x in s]):>9.1%} "
            f"{_cv([x['route_s_total'] for x in s]):>9.1%} "
            f"{_cv([x['latency_p99_s'] for x in s]):>7.1%}  {max_cv:>9.1%} {sum_cv:>9.1%} "
            f"{med([x['node_fixed_s'] for x in s]) * 1e3:>8.1f} "
            f"{_gc_share(runs):>8.1%}"
        )
    # Where node service's variance sits: per batch, and the slowest node against the
    # nodes' mean (a straggler that noise makes the slowest).
    hash_runs = batches[names[0]]
    per_batch = np.array([[b.makespan_s for b in r] for r in hash_runs])
    shares = per_batch.var(axis=0, ddof=1) / max(per_batch.sum(axis=1).var(ddof=1), 1e-18)
    print(
        f"  {names[0]}'s node service variance: each batch's own "
        + ", ".join(f"b{i} {v:.0%}" for i, v in enumerate(shares))
        + f"; the rest ({1 - shares.sum():.0%}) is the batches of a run moving together"
    )
    base = [x["makespan_s_total"] for x in found.summaries[names[0]]]
    for n in names[1:]:
        mine = [x["makespan_s_total"] for x in found.summaries[n]]
        logs = np.log(np.array(mine) / np.array(base))
        apart = np.sqrt(2) * _cv(mine)
        print(
            f"  paired log-ratio sd of node service, {n}/{names[0]}: "
            f"{logs.std(ddof=1):.3f} (unpaired it would be about {apart:.3f})"
        )
    print(
        f"  machine floor, a fixed Spark job of the same size ({params.n_nodes} tasks of "
        f"{floor['task_ms']:.0f} ms CPU): one task's CPU CV {floor['task_cv']:.1%}; "
        f"{params.n_batches} jobs' summed slowest task CV {floor['run_cv']:.1%} "
        f"({floor['runs']} runs)"
    )
    print(
        "  node_fixed_s: one calibration per loaded cell, the same in every round: "
        "no part of the CV"
    )
    for line in verdict_lines(found):
        print(f"  {line}")
    worst = max(
        _cv([x[f] for x in found.summaries[n]])
        for n in names
        for f in ("makespan_s_total", "capacity_tuples_per_s")
    )
    print(
        f"  target CV <= 3% for node service and capacity ({cell_name} cell): worst "
        f"{worst:.1%}, {verdict(worst <= 0.03)}"
    )


def _gc_share(runs: list[list[Any]]) -> float:
    """The share of the runs' node CPU spent while the JVM collected garbage (``jvmGcTime``
    of the node tasks, where the engine read it; NaN if not)."""
    gc = [b.extra.get("node_gc_s") for r in runs for b in r]
    if not gc or any(g is None for g in gc):
        return float("nan")
    work = sum(float(b.node_work_s.sum()) for r in runs for b in r)
    return float(sum(gc) / work) if work else float("nan")


def eq5_params(args: argparse.Namespace, names: list[str]) -> ExperimentSpec:
    return ExperimentSpec.checked(
        {
            "workload": "eq5",
            "strategies": names,
            "tpch_scale_factor": args.sf,
            "zipf_s": 1.0,
            "n_batches": 3,
            "window_s": 0.0,
            "input_rate_tuples_per_s": 500_000.0,
            "warmup_batches": 2,
            "seed": 1,
        }
    )


def section_migration(spark: Any, args: argparse.Namespace) -> None:
    from balancebench.spark.engine import Engine
    from balancebench.spark.routers import KeyLevelRouter, Reassignment
    from balancebench.strategies import get_strategy

    class ShareMover(KeyLevelRouter):
        """Hash routing; after batch 0 a share of every (key, node) part of the state
        moves to the next node (one segment from 0, laid end to end)."""

        def __init__(self, n: int, share: float) -> None:
            super().__init__(get_strategy("hash", n_nodes=n), n, 0.05)
            self.share = share
            self.moved = False

        def after_batch(self, stats: Any) -> Reassignment | None:
            if self.share <= 0 or self.moved:
                return None
            self.moved = True
            held = stats.state > 0
            key, node = stats.key[held], stats.node[held].astype(np.int32)
            hi = np.full(len(key), int(self.share * FRACTION_UNITS), np.int64)
            lo = np.zeros(len(key), np.int64)
            return Reassignment(key, node, ((node + 1) % self.n_nodes).astype(np.int32), lo, hi)

    params = eq5_params(args, ["hash"])
    cell = LoadedCell(spark, params)
    n = params["n_nodes"]
    shares = {"none": 0.0, **{f"{t:g}": t for t in args.move_shares}}
    bandwidth = params["network_bandwidth_mb_per_s"]

    def one(label: str) -> dict[str, float]:
        # warm-up: the same code paths (a move of a share of the state) untimed first
        Engine(spark, cell.df, cell.config, ShareMover(n, shares[label] or 0.001), "warm").run()
        batches = Engine(
            spark, cell.df, cell.config, ShareMover(n, shares[label]), f"move-{label}"
        ).run()
        b1 = batches[1]
        m = b1.migration
        costs = b1.costs(bandwidth)
        received = float(m.receive_s.sum()) if m else 0.0
        sent = float(m.send_s.sum()) if m else 0.0
        return {
            "rows": float(b1.migrated_tuples),
            # what the nodes and the exchange's extra tasks spent, as measured
            "spent_s": float(b1.node_work_s.sum()) + received + sent + (m.extract_s if m else 0),
            "charged_s": sent + received,
            "scan_s": m.extract_s if m else 0.0,
            "transfer_s": float(costs.migration_transfer_s.sum()),
            "migration_s": costs.migration_s,
        }

    runs = fixed_rounds(list(shares), args.rounds, one)
    cell.release()
    rows = {k: med([r["rows"] for r in v]) for k, v in runs.items()}
    base = med([r["spent_s"] for r in runs["none"]])
    # The marginal CPU per moved row, measured on the largest move: what batch 1 spent
    # with the move minus without (node stages and the exchange's extra map tasks). A
    # smaller move's difference is below the noise, so the per-row figure is carried over.
    moving = [k for k in shares if k != "none"]
    largest = max(moving, key=lambda k: rows[k])
    per_row = (med([r["spent_s"] for r in runs[largest]]) - base) / max(rows[largest], 1.0)
    print(f"\n[migration] EQ5 full history, sf {args.sf}, {n} nodes; batch 1 carries the moves")
    print(
        f"  {'share':>6} {'rows':>8} {'spent ms':>9} {'charged ms':>10} {'scan ms':>8} "
        f"{'xfer ms':>8} {'migr_s ms':>9} {'predicted':>9} {'ratio':>6}"
    )
    worst = 1.0
    for label in moving:
        r = runs[label]
        transfer = med([x["transfer_s"] for x in r])
        charged = med([x["charged_s"] for x in r]) + transfer
        predicted = per_row * rows[label] + transfer
        ratio = charged / predicted if predicted > 0 else float("inf")
        worst = max(worst, ratio, 1 / ratio if ratio > 0 else float("inf"))
        print(
            f"  {label:>6} {rows[label]:>8,.0f} "
            f"{(med([x['spent_s'] for x in r]) - base) * 1e3:>9.1f} {charged * 1e3:>10.1f} "
            f"{med([x['scan_s'] for x in r]) * 1e3:>8.1f} {transfer * 1e3:>8.2f} "
            f"{med([x['migration_s'] for x in r]) * 1e3:>9.1f} {predicted * 1e3:>9.1f} "
            f"{ratio:>6.2f}"
        )
    print(
        f"  spent: batch 1's node and extra-task CPU with the move minus without; charged: "
        f"the rows' CPU in the stages they ride + transfer (summed over nodes); scan: the "
        f"extra tasks' CPU beyond their rows' (reported apart); predicted: "
        f"{per_row * 1e9:.0f} ns per row (share {largest}'s spent / rows) x rows + transfer"
    )
    print(
        f"  target charged within 2x of predicted at every move: worst factor {worst:.2f}, "
        f"{verdict(worst <= 2)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", nargs="*", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--rounds", type=positive_int, default=5, help="rotated rounds per section")
    parser.add_argument(
        "--noise-cells",
        nargs="*",
        choices=("default", "crossover"),
        default=["default", "crossover"],
    )
    parser.add_argument("--routing-tuples", type=positive_int, default=1_000_000)
    parser.add_argument(
        "--table-sizes",
        nargs="*",
        type=positive_int,
        default=[100, 2_300, 10_000, 50_000],
        help="routing-table sizes (keys) of the tables section",
    )
    parser.add_argument(
        "--table-paths",
        nargs="*",
        choices=("jvm", "sql"),
        default=["jvm", "sql"],
        help="table routing's paths in the tables section (sql: only for comparison)",
    )
    parser.add_argument(
        "--table-rounds", type=positive_int, default=12, help="rounds of the tables section"
    )
    parser.add_argument("--sf", type=float, default=0.05, help="TPC-H scale factor (eq5)")
    parser.add_argument(
        "--move-shares",
        nargs="*",
        type=float,
        default=[0.005, 0.05, 0.5],
        help="shares of every node's state moved in the migration section",
    )
    args = parser.parse_args()
    if not 0 < args.sf <= 10:
        parser.error("--sf: a TPC-H scale factor in (0, 10]")
    if any(not 0 < s <= 1 for s in args.move_shares):
        parser.error("--move-shares: each share in (0, 1]")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from balancebench.spark.session import get_session

    spark = get_session(
        "balancebench-engine-costs", master=os.environ.get("BENCH_MASTER", "local[*]")
    )
    started = time.perf_counter()
    print(f"make bench-costs, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for name in args.sections:
        globals()[f"section_{name}"](spark, args)
    print(f"\nwall {time.perf_counter() - started:.0f} s")
    spark.stop()


if __name__ == "__main__":
    main()
