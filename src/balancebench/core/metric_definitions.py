"""Every metric balancebench logs (unit in the name, definition here) and the headline
figures in words.

Convention (docs/reference/outputs.md, "Metrics (MLflow, units in the name)"): a per-batch
series is logged as ``batch/<name>`` with ``step = batch index``; a run's summary of a
series carries a suffix (``_mean``, ``_max``, ``_total``). Metrics that only exist per run (latency
percentiles, throughput, wall time, oracle) have no suffix and no step. A run-level figure
keeps its bare name if it is a headline figure, else it is logged as ``diag/<name>``
(``compare.logged_name``). This table, keyed by the bare names, is logged as
``metric_definitions.json`` on every MLflow run; the docs' generated Metrics page lists it
in one line per metric.

The cost model that charges these figures is :mod:`balancebench.core.cost_model`.
"""

from __future__ import annotations

from typing import Final

from balancebench.core.cost_model import CORE_WAIT

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
        "[per batch] node service of the cost model: max over nodes of the node's work, the "
        "summed executorCpuTime of its tasks in every node stage of the batch (the fused "
        "receive/operator/state-update stage; an aggregation's merge of every key's partials "
        "at its home node), less the share of a migration's rows it received (counted in "
        "migration_s), from Spark's REST API (seconds). CPU time, because the nodes are "
        "partitions sharing a few cores: a task's wall time there is mostly waiting for a "
        "core. For the Spark-native baselines: the tasks of the stateful operator's stage(s)."
    ),
    "route_s": (
        "[per batch] routing at the senders (cost model): max(route_cpu_s, route_transfer_s), "
        "a sender's CPU and its link at once, seconds."
    ),
    "route_cpu_s": (
        "[per batch] summed CPU of the routing-stage tasks (read the batch, pick each tuple's "
        "node(s), write the exchange) / senders (the input partitions), seconds: their "
        "executorCpuTime, plus where pkg, dchoices or wchoices route in Python workers (the "
        "JVM router not available; tag per_sender_routing says why) the workers' own process "
        "CPU, measured inside them (route_python_s), since executorCpuTime sees only the JVM's "
        "threads."
    ),
    "route_transfer_s": (
        "[per batch] sent_bytes / senders / network_bandwidth_mb_per_s: a sender's link time "
        "for its share of the exchange (0 when network_bandwidth_mb_per_s is null), seconds."
    ),
    "sent_bytes": (
        "[per batch] bytes the senders wrote into the exchange for the batch's tuples "
        "(Spark's shuffle bytes written by the routing tasks; a migration's rows apart)."
    ),
    "received_bytes_max_node": (
        "[per batch] max over nodes of the bytes the node read from the exchange for the "
        "batch's tuples (Spark's shuffle bytes read in its node stages: tuples, an "
        "aggregation's partials; a migration's rows apart)."
    ),
    "node_transfer_s": (
        "[per batch] max over nodes of the node's link time: max(bytes received (tuples and "
        "a migration's rows), a migration's bytes sent) / network_bandwidth_mb_per_s, "
        "seconds (0 when network_bandwidth_mb_per_s is null)."
    ),
    "route_wall_s": (
        "[per batch] wall seconds of the batch's routing stages (per stage, its tasks' first "
        "launch to last end, summed): never charged; what check-model compares route_s with."
    ),
    "node_wall_s": (
        "[per batch] wall seconds of the batch's node stages (per stage, its tasks' first "
        "launch to last end, summed): never charged; what check-model compares the slowest "
        "node's CPU with on a master where each node has a core of its own."
    ),
    "route_executor_cpu_s": (
        "[per batch] the batch's routing stages on the executors that ran them: per stage "
        "the busiest executor's summed executorCpuTime, summed over the stages, seconds; "
        "never charged; what check-model compares route_s with on any machine."
    ),
    "node_executor_cpu_s": (
        "[per batch] the batch's node stages on the executors that ran them: per stage the "
        "busiest executor's summed executorCpuTime, summed over the stages, seconds; never "
        "charged; what check-model compares the slowest node's CPU with on any machine."
    ),
    "route_python_s": (
        "[per batch] of the routing, the CPU seconds the senders' Python workers spent "
        "(process CPU measured inside the worker from its first row to its last, Arrow's "
        "conversions included, its start-up not); 0 for routing in Spark SQL or in the JVM "
        "router (per_sender_routing = jvm)."
    ),
    "service_s": (
        "[per batch] time the batch occupies the replay clock: route_s + max over nodes of "
        "max(node work + the node's CPU share of the migration carried out in this batch, "
        "the node's link time (node_transfer_s)): CPU and link at once, seconds."
    ),
    "migration_s": (
        "[per batch] the migration carried out inside this batch's exchange (the plan made "
        "after the previous batch; cost model): max over the nodes that send or receive rows "
        "of max(the rows' CPU there, max(bytes sent, bytes received) / "
        "network_bandwidth_mb_per_s), CPU and link at once, seconds. A row's CPU: at the "
        "sending node, the senders' "
        "CPU per row written into the same exchange; at the receiving node, its node stage's "
        "CPU per row read (its calibrated fixed cost left out). 0 when nothing moves."
    ),
    "migration_extract_s": (
        "[per batch] the engine's own cost of a migration, reported apart and not charged: "
        "CPU of the exchange's extra map tasks that read the sending nodes' state beyond "
        "what their rows are charged (finding the rows that move by scanning the state, "
        "which a keyed store would not do), seconds."
    ),
    "migration_transfer_s": (
        "[per batch] the transfer part of migration_s alone: max over nodes of max(bytes sent, "
        "bytes received) / network_bandwidth_mb_per_s (seconds)."
    ),
    "migration_bytes": (
        "[per batch] bytes of state shipped between nodes by the migration carried out in "
        "this batch (Spark's shuffle bytes written by the exchange's tasks that read the "
        "sending nodes' state)."
    ),
    "harness_s": (
        "[per batch] the harness's own cost, never charged to the strategy: driver wall time of "
        "the batch minus what the cost model charges (service_s, plan); i.e. Spark job "
        "scheduling, the oracle, statistics collection, task-metric reads, checkpoint "
        "bookkeeping, the engine's costs reported apart (migration_extract_s), and the time "
        "the emulated nodes, or the planner, wait for this machine's few cores (seconds, "
        ">= 0)."
    ),
    CORE_WAIT: (
        "[per batch] of harness_s (at most it), a lower bound on the time the batch's "
        "measured tasks waited for one of this machine's cores: per stage whose CPU is "
        "charged, its executorCpuTime summed and spread over the application's cores, minus "
        "the longest task's (routing stages) or the busiest node's (node stages: a node "
        "runs its tasks one after another); a cluster with a core per node runs them side "
        "by side. Seconds, >= 0. The part of harness_s that more cores would remove; the "
        "rest is the harness's own work (scheduling, planning, the oracle, statistics, "
        "task-metric reads)."
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
        "[per batch] CPU time of strategy.plan() on the batch's per-(key, node) statistics "
        "(the planning thread's, time.thread_time: "
        "balancebench.core.cost_model.plan_clock), "
        "milliseconds (paper 000's O1). Step b = plan made after batch b."
    ),
    "migrated_tuples": (
        "[per batch] state tuples moved between nodes inside this batch's exchange (the plan "
        "made after the previous batch; paper 000's O3), counted by Spark at the receiving "
        "nodes: stored join tuples, or the tuples a moved share of a partial count represents."
    ),
    "split_keys": "[per batch] keys on more than one node after the plan.",
    "plan_reached_tolerance": (
        "[per batch] 1 if the node loads after the plan are within (1 + tolerance) x mean "
        "on the batch's statistics, else 0 (whole-key strategies and budgets can stop short)."
    ),
    "nodes_used": "[per batch] nodes that received a tuple or hold state.",
    "scaled_out": (
        "[per batch] 1 if nodes joined the running job after this batch (memory-driven "
        "scale-out), else 0; the batch's migration is then the scale-out's adjustment."
    ),
    "nodes_active": (
        "[per batch] nodes the strategy's layout uses after this batch (all n_nodes "
        "without scale-out; with it, the active nodes / grid / (sub)group members)."
    ),
    "avg_received_tuples_per_node": (
        "[per batch] tuples shipped to the stateful stage (replicas and probe copies "
        "included) divided by nodes_used: paper 000's network metric."
    ),
    "replication_factor": "[per batch] tuples received by the nodes / input tuples (>= 1).",
    "replicated_tuples": (
        "[per batch] Paper 000's O4, the subsequent network cost of splitting keys: tuples "
        "received by the nodes minus input tuples, i.e. the extra copies that routing sent "
        "(probes of a split key to all its nodes; under the two-stream rule, the small "
        "side's stored copies), as measured, not predicted from the plan (tuples)."
    ),
    "state_tuples_max_node": (
        "[per batch] max over nodes of the state the node holds after the batch: stored join "
        "tuples, or the tuples counted in its partial counts of the window."
    ),
    "result_rows": (
        "[per batch] rows the batch produced: new join pairs, or the window's answer rows "
        "(TOPK: k; count tables: distinct keys)."
    ),
    "batch_wall_s": (
        "[per batch] driver wall time of the batch, its migration included (seconds; charged "
        "costs and harness together, for transparency; never on the replay clock)."
    ),
    "phase_<name>_s": (
        "[per batch] driver wall time of one phase of the batch (operator: the batch's job, "
        "routing to state update; durable; task_metrics, oracle, stats, plan; baselines: "
        "ingest, feed, trigger, state, sink), seconds: where harness_s goes. Never on the "
        "replay clock."
    ),
    "node_work_<stage>_s": (
        "[per batch] executorCpuTime summed over all nodes in one node stage of the engine "
        "(node: receive, operator and state update fused, a join's merge of its pieces "
        "included; merge: an aggregation's merge at the keys' home nodes; durable: writing "
        "the state to reliable files), seconds: where the node work goes."
    ),
    "node_gc_s": (
        "[per batch] summed jvmGcTime of the node stages' tasks: the JVM's garbage collection "
        "while they ran (seconds of wall, shared by the tasks running at once; Spark's own "
        "metric). Noise diagnosis, never charged (benchmarks/engine_costs.py --sections noise)."
    ),
    "retried_stages": (
        "[per batch] Spark stages of the batch that ran more than once (partitions rerun "
        "after a lost executor), a count; 0 without a fault. Their time figures include the "
        "rerun; the deterministic figures do not change."
    ),
    # ---- per run ------------------------------------------------------------------------
    "plan_time_ms_mean": "Mean of plan_time_ms over the plans of the run.",
    "plan_time_ms_max": "Max of plan_time_ms over the plans of the run.",
    "imbalance_max_over_mean_mean": "Mean of imbalance_max_over_mean over the batches.",
    "imbalance_max_over_mean_max": "Max of imbalance_max_over_mean over the batches.",
    "makespan_s_total": (
        "Sum of makespan_s over the batches (seconds of CPU: each batch's slowest node's "
        "work in its node stages)."
    ),
    "makespan_over_ideal_mean": "Mean of makespan_over_ideal over the batches.",
    "routing_table_entries_max": "Max of routing_table_entries over the batches.",
    "migrated_tuples_total": "Sum of migrated_tuples over the run.",
    "migration_s_total": "Sum of migration_s over the run (seconds).",
    "migration_bytes_total": "Sum of migration_bytes over the run (bytes).",
    "migration_extract_s_total": (
        "Sum of migration_extract_s over the run (seconds; the engine's, not charged)."
    ),
    "node_fixed_s": (
        "The engine's fixed node cost per node and batch, reported apart: CPU seconds of a "
        "node's tasks in a batch with no tuples and no state (task launch, deserialisation, "
        "the stages' operators on nothing), through the same node stages as every batch; "
        "the median over nodes of each stage, summed, median of 3 calibration batches run "
        "before the first measured batch of the first measured run of this engine "
        "configuration on the loaded dataset (later runs of the same Spark application "
        "reuse it)."
    ),
    "node_work_per_tuple_us": (
        "Fitted node CPU per tuple received: the slope of a least-squares fit of node work "
        "(makespan_s's per-node figure) on the tuples each node received, over the run's "
        "(node, batch) points, microseconds."
    ),
    "node_work_r2": (
        "How much of the differences in node work between nodes and batches the tuples "
        "explain: r^2 of that fit (1 = all; nan when the tuples do not vary). A balanced run "
        "(every node about the same tuples) leaves the tuples little to explain: read "
        "node_work_residual_s there."
    ),
    "node_work_residual_s": (
        "Root-mean-square residual of that fit, seconds: the noise in a node's work that its "
        "tuples do not explain."
    ),
    "route_s_total": "Sum of route_s over the run (seconds).",
    "retried_stages_total": "Sum of retried_stages over the run (a count; 0 without a fault).",
    "scale_outs_total": (
        "Batches after which nodes joined the running job (memory-driven scale-out, Param "
        "node_capacity_state_tuples; a count, 0 without it)."
    ),
    "scale_out_adjustment_s_total": (
        "Paper 000 Fig. 5's balance-adjustment time: over the batches after which nodes "
        "joined, plan time + the migration cost the scale-out caused, carried out in the next "
        "batch (cost model: max over the nodes involved of migration CPU + transfer), seconds. "
        "0 when no node joined, and for BiStream (its stored tuples never move)."
    ),
    "harness_s_total": (
        "Sum of harness_s over the run (seconds): the harness's own cost, reported apart."
    ),
    "harness_core_wait_s_total": (
        "Sum over the run's batches of harness_core_wait_s, each at most its harness_s "
        "(seconds): of harness_s_total, the tasks waiting for this machine's cores; "
        "harness_s_total minus it is the harness's own work."
    ),
    "latency_p50_s": (
        "Median event-time latency over all tuples: end of the tuple's batch under the "
        "replay clock (a batch starts when it has closed and the previous batch and its plan "
        "are done; it lasts service_s, the migration it carries included; all under the cost "
        "model of balancebench.core.metric_definitions) minus the tuple's event time, seconds."
    ),
    "latency_p95_s": "95th percentile of the same event-time latency, seconds.",
    "latency_p99_s": "99th percentile of the same event-time latency, seconds.",
    "throughput_tuples_per_s": (
        "Delivered throughput: input tuples / (end of the last batch - first arrival) under "
        "the replay clock (tuples per second)."
    ),
    "capacity_tuples_per_s": (
        "Input tuples / everything the cost model charged over the run (service_s with the "
        "migrations in it, plans): the rate if batches ran back to back."
    ),
    "charged_s_total": (
        "Everything the cost model charged over the run (service_s with the migrations in "
        "it, plans), seconds: the processing time if batches ran back to back, input tuples "
        "/ capacity_tuples_per_s (paper 000 Fig. 3's execution time at full loading speed)."
    ),
    "sustainable_rate_tuples_per_s": (
        "Highest input rate at which the backlog does not grow at the same batch interval: "
        "replayed rate x (interval - mean plan time) / mean(service_s), taking routing, node "
        "and migration work as proportional to the tuples per batch and the plan time as not."
    ),
    "backlog_s_max": "Max over batches of (batch start - batch close) under the replay model.",
    "nodes_used_max": "Max of nodes_used over the batches.",
    "avg_received_tuples_per_node_total": (
        "All tuples shipped to the stateful stage over the run / nodes_used_max (paper 000's "
        "'average tuples received per node')."
    ),
    "replication_factor_total": "All tuples received by the nodes / all input tuples.",
    "replicated_tuples_total": "Sum of replicated_tuples over the run (tuples).",
    "state_tuples_max_node_max": "Max of state_tuples_max_node over the batches.",
    "result_rows_total": "Sum of result_rows over the batches.",
    "input_tuples_total": "Input tuples of the replayed stream.",
    "cpu_communication_s_total": (
        "Paper 001 Fig. 6's communication share, seconds of CPU over the run: the routing "
        "stage's tasks (the senders, and a stateless stage of its own where the strategy has "
        "one: reading, routing and writing the exchange). The nodes read the exchange inside "
        "their fused node stage, so that part counts as processing."
    ),
    "cpu_processing_s_total": (
        "Paper 001 Fig. 6's tuple-processing share: the nodes' CPU in every node stage "
        "(receive, operator, state update, merges), seconds over the run."
    ),
    "cpu_idle_s_total": (
        "Paper 001 Fig. 6's idle share: per batch, nodes_used x the slowest node's work - "
        "the nodes' summed work (the time the nodes of the layout wait for the slowest), "
        "seconds over the run."
    ),
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
    # ---- rounds, verdicts, sweeps -------------------------------------------------------
    "rounds_finished": (
        "Rounds of the strategy that finished on its cell group's data (count): the n behind "
        "its means, intervals and verdicts."
    ),
    "<figure>_ratio": (
        "On a strategy's cell run: its headline figure over the baseline's, the geometric "
        "mean of the per-round ratios on the paired rounds (stats.ratio_interval); "
        "<figure>_ratio_lo and <figure>_ratio_hi are the ends of its interval, at the level "
        "the verdict used."
    ),
    "<metric>.<strategy>": (
        "On a parent run: each strategy's mean of <metric> over its rounds, so MLflow's runs "
        "table can show the strategies side by side as columns."
    ),
    "regressed_figures": (
        "On a sweep's parent run: the (cell, figure) pairs whose figure regressed against "
        "the cell's history (count; 0 = no alarm)."
    ),
    "changed_exact_figures": (
        "On a sweep's parent run: the (cell, figure) pairs whose deterministic figure (a "
        "result digest, a count) differs from the cell's last run (count; 0 = unchanged)."
    ),
}


#: The headline figures every group's verdicts are given on (``make run`` prints them):
#: capacity, node service (each batch's slowest node, summed), routing, p99 latency.
VERDICT_FIGURES: Final[tuple[str, ...]] = (
    "capacity_tuples_per_s",
    "makespan_s_total",
    "route_s_total",
    "latency_p99_s",
)
#: Their names in words (tables and progress lines).
FIGURE_WORDS: Final[dict[str, str]] = {
    "capacity_tuples_per_s": "capacity",
    "makespan_s_total": "node service",
    "route_s_total": "routing",
    "latency_p99_s": "p99 latency",
    "charged_s_total": "processing time",
    "plan_time_ms_mean": "plan time",
    "throughput_tuples_per_s": "delivered throughput",
    "avg_received_tuples_per_node_total": "tuples per node",
    "nodes_used_max": "nodes used",
    "scale_out_adjustment_s_total": "adjustment time",
}


def figure_words(figure: str) -> str:
    """A figure's name in words (:data:`FIGURE_WORDS`), else its metric key."""
    return FIGURE_WORDS.get(figure, figure)
