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
    # ---- per batch (step = micro-batch index) ---------------------------------------
    "batch_tuples": "[per batch] input tuples of the micro-batch (both join sides).",
    "imbalance_max_over_mean": (
        "[per batch] max over nodes of the tuples the node received, divided by the mean "
        "over nodes, minus 1 (0 = perfectly balanced; compare with the tolerance). Counted "
        "from the rows each node's task read from the routing shuffle (replicas included)."
    ),
    "makespan_s": (
        "[per batch] max over nodes of the node's work: the summed executorCpuTime of its "
        "tasks in the batch's node stages (receive, operator, state update), from Spark's "
        "REST API (seconds). CPU time, because the nodes are partitions sharing a few cores: "
        "a task's wall time there is mostly waiting for a core. For the Spark-native "
        "baselines: the tasks of the stateful operator's stage(s)."
    ),
    "ideal_makespan_s": "[per batch] mean over nodes of the same CPU times (seconds).",
    "makespan_wall_s": (
        "[per batch] max over nodes of the summed executorRunTime (wall) of the same tasks "
        "(seconds; includes waiting for shared cores)."
    ),
    "makespan_wall_s_total": "Sum of makespan_wall_s over the batches (seconds).",
    "makespan_over_ideal": "[per batch] makespan_s / ideal_makespan_s (1 = perfectly even).",
    "routing_table_entries": (
        "[per batch] entries of the router the batch was routed with (paper 000's O2: keys "
        "in Y, or buckets moved off their default owner)."
    ),
    "plan_time_ms": (
        "[per batch] wall time of strategy.plan() on the batch's per-(key, node) statistics, "
        "time.perf_counter, milliseconds (paper 000's O1). Step b = plan made after batch b."
    ),
    "migrated_tuples": (
        "[per batch] state tuples the plan made after the batch moved between nodes, counted "
        "by Spark when the move is applied (paper 000's O3): stored join tuples, or the tuples "
        "a moved share of a partial count represents."
    ),
    "migrate_s": "[per batch] wall time of applying that migration to the state (seconds).",
    "split_keys": "[per batch] keys on more than one node after the plan.",
    "plan_reached_tolerance": (
        "[per batch] 1 if the node loads after the plan are within (1 + tolerance) x mean "
        "on the batch's statistics, else 0 (whole-key strategies and budgets can stop short)."
    ),
    "nodes_used": "[per batch] nodes that received a tuple or hold state.",
    "avg_received_tuples_per_node": (
        "[per batch] tuples shipped to the stateful stage (replicas and probe copies "
        "included) divided by nodes_used: paper 000's network metric."
    ),
    "replication_factor": "[per batch] tuples received by the nodes / input tuples (>= 1).",
    "state_tuples_max_node": (
        "[per batch] max over nodes of the state the node holds after the batch: stored join "
        "tuples, or the tuples counted in its partial counts of the window."
    ),
    "result_rows": (
        "[per batch] rows the batch produced: new join pairs, or the window's answer rows "
        "(TOPK: k; count tables: distinct keys)."
    ),
    "batch_wall_s": (
        "[per batch] driver wall time of the batch: routing, operator, task metrics, oracle and "
        "statistics (seconds; overheads included, for transparency)."
    ),
    "phase_<name>_s": (
        "[per batch] driver wall time of one phase of the batch: route, operator, "
        "task_metrics, oracle, stats (seconds)."
    ),
    # ---- per run ------------------------------------------------------------------------
    "plan_time_ms_mean": "Mean of plan_time_ms over the plans of the run.",
    "plan_time_ms_max": "Max of plan_time_ms over the plans of the run.",
    "imbalance_max_over_mean_mean": "Mean of imbalance_max_over_mean over the batches.",
    "imbalance_max_over_mean_max": "Max of imbalance_max_over_mean over the batches.",
    "makespan_s_total": "Sum of makespan_s over the batches (busy time of the stage, s).",
    "makespan_over_ideal_mean": "Mean of makespan_over_ideal over the batches.",
    "routing_table_entries_max": "Max of routing_table_entries over the batches.",
    "migrated_tuples_total": "Sum of migrated_tuples over the run.",
    "migrate_s_total": "Sum of migrate_s over the run (seconds).",
    "latency_p50_s": (
        "Median event-time latency over all tuples: end of the tuple's batch under the "
        "replay model (balancebench.replay: a batch starts when it has closed and the previous "
        "batch, its plan and its migration are done; it lasts makespan_s) minus the tuple's "
        "event time, seconds."
    ),
    "latency_p95_s": "95th percentile of the same event-time latency, seconds.",
    "latency_p99_s": "99th percentile of the same event-time latency, seconds.",
    "throughput_tuples_per_s": (
        "Input tuples divided by makespan_s_total: the rate the parallel stage sustains when "
        "every batch takes its slowest node's time."
    ),
    "backlog_s_max": "Max over batches of (batch start - batch close) under the replay model.",
    "nodes_used_max": "Max of nodes_used over the batches.",
    "avg_received_tuples_per_node_total": (
        "All tuples shipped to the stateful stage over the run / nodes_used_max (paper 000's "
        "'average tuples received per node')."
    ),
    "replication_factor_total": "All tuples received by the nodes / all input tuples.",
    "state_tuples_max_node_max": "Max of state_tuples_max_node over the batches.",
    "result_rows_total": "Sum of result_rows over the batches.",
    "input_tuples_total": "Input tuples of the replayed stream.",
    "wall_s": "Wall time of the whole measured replay in the Spark application, seconds.",
    "oracle_passed": (
        "1 if every batch's answer equals plain Spark SQL on the same tuples as a multiset "
        "(aggregations: the window's count table; joins: the new pairs), else 0 (the run "
        "then fails)."
    ),
    # ---- datasets -------------------------------------------------------------------------
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
}
