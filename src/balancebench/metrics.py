"""Every metric balancebench logs: its name (unit in the name) and its definition.

Convention (architecture.md): a per-batch series is logged under the bare name with
``step = batch index``; a run's summary of a series carries a suffix (``_mean``,
``_max``, ``_total``). Metrics that only exist per run (latency percentiles, throughput,
wall time, oracle) have no suffix and no step. This table is logged as
``metric_definitions.json`` on every MLflow run and rendered in the README.
"""

from __future__ import annotations

from typing import Final

#: name -> definition. Series (per batch) are marked "[per batch]".
METRIC_DEFINITIONS: Final[dict[str, str]] = {
    "batch_tuples": "[per batch] tuples in the micro-batch (Spark count of routed rows).",
    "plan_time_ms": (
        "[per batch] wall time of strategy.plan() on the batch's per-(key, node) counts, "
        "time.perf_counter, milliseconds (paper 000's O1). Step b = plan made after batch b."
    ),
    "plan_time_ms_mean": "Mean of plan_time_ms over the plans of the run.",
    "plan_time_ms_max": "Max of plan_time_ms over the plans of the run.",
    "imbalance_max_over_mean": (
        "[per batch] max over nodes of the tuples Spark put on the node, divided by the mean "
        "over nodes, minus 1 (0 = perfectly balanced; compare with the tolerance). Counted "
        "from the rows each node's task read from the shuffle."
    ),
    "imbalance_max_over_mean_mean": "Mean of imbalance_max_over_mean over the batches.",
    "imbalance_max_over_mean_max": "Max of imbalance_max_over_mean over the batches.",
    "makespan_s": (
        "[per batch] max over nodes of the executorRunTime of the node's task in the "
        "per-node counting stage, from Spark's REST API (seconds)."
    ),
    "ideal_makespan_s": "[per batch] mean over nodes of the same task run times (seconds).",
    "makespan_over_ideal": "[per batch] makespan_s / ideal_makespan_s (1 = perfectly even).",
    "makespan_s_total": "Sum of makespan_s over the batches (busy time of the stage, s).",
    "makespan_over_ideal_mean": "Mean of makespan_over_ideal over the batches.",
    "routing_table_entries": (
        "[per batch] keys in the routing table the batch was routed with (paper 000's O2)."
    ),
    "routing_table_entries_max": "Max of routing_table_entries over the batches.",
    "migrated_tuples": (
        "[per batch] state tuples the plan made after the batch moves between nodes: per "
        "move, amount / part load x part state, summed (paper 000's O3). The TOPK window "
        "holds the tuples it counted, so state = load."
    ),
    "migrated_tuples_total": "Sum of migrated_tuples over the plans of the run.",
    "split_keys": (
        "[per batch] keys on more than one node after the plan (per the router; for "
        "per-tuple strategies, keys seen on more than one node in the batch)."
    ),
    "plan_reached_tolerance": (
        "[per batch] 1 if the node loads after the plan are within (1 + tolerance) x mean "
        "on the batch's statistics, else 0 (whole-key strategies and budgets can stop short)."
    ),
    "batch_wall_s": (
        "[per batch] driver wall time of the batch: routing, counting, merge, TOPK, oracle "
        "and metric collection (seconds; overheads included, for transparency)."
    ),
    "latency_p50_s": (
        "Median event-time latency over all tuples: end of the tuple's batch under the "
        "replay model (balancebench.replay) minus its event time, seconds."
    ),
    "latency_p99_s": "99th percentile of the same event-time latency, seconds.",
    "throughput_tuples_per_s": (
        "Tuples processed divided by makespan_s_total: the rate the parallel stage "
        "sustains when every batch takes its slowest node's time."
    ),
    "backlog_s_max": "Max over batches of (batch start - batch close) under the replay model.",
    "wall_s": "Wall time of the whole Spark application's measured replay, seconds.",
    "rows_<table>_tuples": (
        "Rows of a dataset table as written (one metric per table, e.g. rows_events_tuples)."
    ),
    "generate_s": (
        "Wall time the generator took to write the dataset, seconds (a reused cached "
        "dataset keeps the figure of its original write, from its manifest)."
    ),
    "generate_rows_per_s": "Rows of all tables divided by generate_s.",
    "validation_expectations": "Great Expectations expectations evaluated on the dataset.",
    "validation_failed_expectations": "Of those, how many failed (0 = the dataset passed).",
    "oracle_passed": (
        "1 if every batch's count table and TOPK equal Spark's plain groupBy on the same "
        "batch, else 0 (the run then fails)."
    ),
}
