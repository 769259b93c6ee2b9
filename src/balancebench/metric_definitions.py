"""Every metric balancebench logs (unit in the name, definition here), and the cost model.

Convention (docs/reference/outputs.md, "Metrics (MLflow, units in the name)"): a per-batch
series is logged as ``batch/<name>`` with ``step = batch index``; a run's summary of a
series carries a suffix (``_mean``, ``_max``, ``_total``). Metrics that only exist per run (latency
percentiles, throughput, wall time, oracle) have no suffix and no step. A run-level figure
keeps its bare name if it is a headline figure, else it is logged as ``diag/<name>``
(``compare.logged_name``). This table, keyed by the bare names, is logged as
``metric_definitions.json`` on every MLflow run; the docs' generated Metrics page lists it
in one line per metric.

**The cost model** (docs/reference/outputs.md, "Metrics"; issues 12 and 26) is the only
thing the replay clock charges to a strategy, all in one currency, seconds of measured CPU:

- *routing* (at the senders): the summed CPU time of the routing-stage tasks (the tasks
  that read the batch, decide every tuple's node(s) and write the exchange to the nodes;
  on the per-sender strategies' Python path, a Python worker's own CPU measured inside
  it, since Spark's ``executorCpuTime`` sees only the JVM's threads) divided by the
  senders (the input partitions), so a larger routing table (O2) costs what its lookups cost;
- *node service*: the max over nodes of the node's CPU time in every node stage it works
  in for the batch (the fused receive/operator/state stage; an aggregation's merge of
  split keys' partials at their home node), less what a migration's rows cost there;
- *plan*: the CPU time of ``strategy.plan()`` on the driver's planning thread
  (:func:`plan_clock`; O1; the coordinator spends it);
- *migration*: the plan's moves ride the next batch's exchange (``spark.engine``), so a
  migration costs what its rows cost in the stages they ride (:func:`attribute_migration`):
  at a sending node the rows it writes into the exchange times the senders' CPU per row
  written; at a receiving node the rows it reads times its node stage's CPU per row read
  (its calibrated fixed cost left out); its transfer ``max(bytes sent, bytes received) /
  network_bandwidth_mb_per_s`` (links are full duplex) at the same time. A plan that
  moves nothing costs nothing;
- *network* (issue 44): every byte that crosses a link, at ``network_bandwidth_mb_per_s``
  (``null``: a CPU-only model): a sender's share of the bytes the senders wrote into the
  exchange, and each node's bytes read from it (the batch's tuples, an aggregation's
  partials, a migration's rows), Spark's measured shuffle bytes.

A transfer overlaps the CPU work beside it (:data:`TRANSFER_RULE`): routing is
``max(sender CPU, sender transfer)``, and a batch occupies the clock for ``routing +
max over nodes of max(node CPU + migration CPU, the node link's transfer)``: a
migration delays the batch only where it lands on the node that finishes last, as state
moving inside the data flow does, and the network only where a link is slower than the
CPU behind it. The next batch cannot start
before the plan made from this one is ready. Everything else the driver spends on a
batch (Spark job scheduling, the oracle, statistics collection, task-metric reads,
checkpoint bookkeeping) is the harness's own cost, ``harness_s``: logged, never charged.
The engine's own costs that no strategy causes are reported apart, not charged: the
node tasks' fixed cost per batch (``node_fixed_s``, measured on a batch with no tuples),
and a migration's scan of the sending nodes' state for the rows that move
(``migration_extract_s``). :func:`clock` is a pure function of the measured
:class:`BatchCosts`, so every runner is charged alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from balancebench import replay

#: Default link speed of every transfer (1 GbE), MB/s (1 MB = 1e6 B).
DEFAULT_BANDWIDTH_MB_PER_S: Final[float] = 125.0
#: How a transfer meets the CPU work beside it: "overlap", the node's (or sender's) link
#: and CPU work at the same time and the longer one decides (``max``, not ``sum``). Why:
#: Spark's reduce tasks fetch shuffle blocks in the background (up to
#: ``spark.reducer.maxSizeInFlight``, 48 MB) while they process the blocks already
#: fetched, and the papers' stream processors pipeline tuples through their operators;
#: so a node's batch is bound by the slower of its CPU and its link, not their sum.
#: Migrations ride the same exchange, under the same rule.
TRANSFER_RULE: Final[str] = "overlap"
#: The per-batch metric of the part of harness_s that is tasks waiting for a core.
CORE_WAIT: Final[str] = "harness_core_wait_s"


def plan_clock() -> float:
    """The clock of every plan and decision time (``plan_time_ms``), in seconds: the CPU
    time of the calling thread (``time.thread_time``), the currency of every other charged
    cost (the tasks' ``executorCpuTime``). A planner that waits for a core, another
    process or another thread of the driver is not charged for the wait (measured with
    the wall clock before: a strategy that never plans logged 0.10 ms one night and
    1.63 ms the next, under two pytest workers)."""
    return time.thread_time()


def _zeros() -> np.ndarray:
    return np.zeros(0)


@dataclass(frozen=True)
class BatchCosts:
    """What was measured for one micro-batch: the cost model's only input."""

    batch: int
    input_tuples: int
    #: Per node: CPU seconds in every node stage of the batch (a migration's share out).
    node_work_s: np.ndarray
    #: Summed CPU seconds of the routing-stage tasks, and the senders sharing them.
    route_work_s: float = 0.0
    senders: int = 1
    #: CPU seconds of ``plan()`` after this batch, the planning thread's (0: no plan).
    plan_s: float = 0.0
    #: Per node: CPU seconds of the migration carried out inside this batch, bytes sent
    #: and received (empty: no migration).
    migration_work_s: np.ndarray = field(default_factory=_zeros)
    migration_sent_bytes: np.ndarray = field(default_factory=_zeros)
    migration_received_bytes: np.ndarray = field(default_factory=_zeros)
    #: Driver wall seconds of everything done for the batch.
    driver_wall_s: float = 0.0
    #: Link speed of every transfer (MB/s, 1 MB = 1e6 B); None: a CPU-only model.
    bandwidth_mb_per_s: float | None = DEFAULT_BANDWIDTH_MB_PER_S
    #: Measured lower bound on the seconds the batch's tasks waited for a core
    #: (``rest_task_metrics.core_wait_s``), as the runner read it.
    core_wait_s: float = 0.0
    #: Per node: bytes of the batch's own tuples the node read from the exchange (Spark's
    #: shuffle bytes read in its node stages, a migration's rows left out); empty: not
    #: measured by the runner (no transfer charged).
    received_bytes: np.ndarray = field(default_factory=_zeros)
    #: Bytes the senders wrote into the exchange for the batch's tuples (all senders).
    sent_bytes: float = 0.0

    def transfer_s(self, nbytes: np.ndarray | float) -> np.ndarray:
        """Seconds a link takes for ``nbytes`` (0 in a CPU-only model)."""
        nbytes = np.asarray(nbytes, dtype=float)
        if self.bandwidth_mb_per_s is None:
            return np.zeros_like(nbytes)
        return nbytes / (self.bandwidth_mb_per_s * 1e6)

    @property
    def node_service_s(self) -> float:
        """The slowest node's CPU for the batch's tuples (transfers apart)."""
        return float(np.max(self.node_work_s)) if len(self.node_work_s) else 0.0

    @property
    def routing_cpu_s(self) -> float:
        return self.route_work_s / max(1, self.senders)

    @property
    def routing_transfer_s(self) -> float:
        """A sender's share of the bytes written into the exchange, over its link."""
        return float(self.transfer_s(self.sent_bytes / max(1, self.senders)))

    @property
    def routing_s(self) -> float:
        """A sender's routing: its CPU and its link work at once (:data:`TRANSFER_RULE`)."""
        return max(self.routing_cpu_s, self.routing_transfer_s)

    @property
    def migration_bytes(self) -> float:
        return float(np.sum(self.migration_sent_bytes))

    @property
    def migration_transfer_s(self) -> np.ndarray:
        """Per node: ``max(sent, received) / bandwidth`` (links are full duplex)."""
        sent, received = _aligned(self.migration_sent_bytes, self.migration_received_bytes)
        return self.transfer_s(np.maximum(sent, received))

    @property
    def node_migration_s(self) -> np.ndarray:
        """Per node: the migration's CPU there and its transfer, at once."""
        work, transfer = _aligned(self.migration_work_s, self.migration_transfer_s)
        return np.maximum(work, transfer)

    @property
    def migration_s(self) -> float:
        """Max over the nodes involved of max(migration CPU, transfer)."""
        per_node = self.node_migration_s
        return float(per_node.max()) if len(per_node) else 0.0

    @property
    def node_transfer_s(self) -> np.ndarray:
        """Per node: how long its link works for the batch: the tuples received plus a
        migration's rows received, or a migration's rows sent if more (full duplex)."""
        received, moved_in = _aligned(
            np.asarray(self.received_bytes, float), self.migration_received_bytes
        )
        inbound, outbound = _aligned(received + moved_in, self.migration_sent_bytes)
        return self.transfer_s(np.maximum(inbound, outbound))

    @property
    def service_s(self) -> float:
        """How long the batch occupies the clock: routing, then the node that finishes
        last, each node's CPU (its share of the migration's included) and its link's
        transfers at once (:data:`TRANSFER_RULE`)."""
        work, moving = _aligned(np.asarray(self.node_work_s, float), self.migration_work_s)
        cpu, link = _aligned(work + moving, self.node_transfer_s)
        busy = np.maximum(cpu, link)
        return self.routing_s + (float(busy.max()) if len(busy) else 0.0)

    @property
    def charged_s(self) -> float:
        return self.service_s + self.plan_s

    @property
    def harness_s(self) -> float:
        """Driver wall of the batch that the clock does not charge (never negative)."""
        return max(0.0, self.driver_wall_s - self.charged_s)

    @property
    def harness_core_wait_s(self) -> float:
        """Of :attr:`harness_s`, the tasks' wait for a core (at most all of it)."""
        return min(self.core_wait_s, self.harness_s)


def _aligned(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = max(len(a), len(b))
    return (
        np.pad(np.asarray(a, dtype=float), (0, n - len(a))),
        np.pad(np.asarray(b, dtype=float), (0, n - len(b))),
    )


@dataclass(frozen=True)
class MigrationWork:
    """A migration carried out inside a batch's exchange, per node, as charged
    (:func:`attribute_migration`)."""

    #: CPU seconds of writing the rows each node sends into the exchange.
    send_s: np.ndarray
    #: CPU seconds of reading the rows each node receives in its node stage.
    receive_s: np.ndarray
    sent_bytes: np.ndarray
    received_bytes: np.ndarray
    rows_sent: np.ndarray
    rows_received: np.ndarray
    #: CPU seconds of the extra map tasks beyond their rows' own cost (scanning the
    #: sending nodes' state for the rows that move): the engine's, not charged.
    extract_s: float = 0.0

    @property
    def work_s(self) -> np.ndarray:
        """Per node: the migration's CPU there (sending plus receiving)."""
        return self.send_s + self.receive_s


def attribute_migration(
    node_cpu_s: np.ndarray,
    stage_cpu_s: np.ndarray,
    stage_records: np.ndarray,
    fixed_s: float,
    moved_in_rows: np.ndarray,
    extract_cpu_s: np.ndarray,
    extract_rows: np.ndarray,
    extract_bytes: np.ndarray,
    send_cpu_per_row_s: float,
) -> tuple[MigrationWork, np.ndarray]:
    """What a migration that rode a batch's exchange costs, per node, and the nodes'
    own work without it. All inputs are measured in that batch (per node arrays):

    - sending side: the exchange's extra map tasks that read node ``d``'s state wrote
      ``extract_rows[d]`` rows (``extract_bytes[d]`` bytes) in ``extract_cpu_s[d]``; the
      rows are charged the senders' CPU per row written into the same exchange
      (``send_cpu_per_row_s``), at most what the tasks spent. The rest of those tasks
      (finding the rows in the node's state) is reported as ``extract_s``, not charged.
      Without a senders' figure (no tuple routed) the tasks' CPU is charged whole.
    - receiving side: node ``d``'s stage that reads the exchange read
      ``stage_records[d]`` rows from it in ``stage_cpu_s[d]``; ``moved_in_rows[d]`` of
      them are the migration's, charged ``(stage_cpu_s[d] - fixed_s) / stage_records[d]``
      each (the stage's CPU per row received, its calibrated fixed cost left out) and
      taken off the node's work ``node_cpu_s[d]`` (every node stage). For a join that
      average includes probing the node's history, so it errs high.
    - bytes: sent as measured; received in proportion to the rows, at the migration's
      mean bytes per row.

    A migration of nothing costs nothing; twice the rows cost twice the CPU and bytes.
    """
    node_cpu_s = np.asarray(node_cpu_s, dtype=float)
    stage_cpu_s = np.asarray(stage_cpu_s, dtype=float)
    extract_cpu_s = np.asarray(extract_cpu_s, dtype=float)
    rows_sent = np.asarray(extract_rows, dtype=float)
    rows_in = np.asarray(moved_in_rows, dtype=float)
    records = np.asarray(stage_records, dtype=float)
    if send_cpu_per_row_s > 0:
        send = np.minimum(send_cpu_per_row_s * rows_sent, extract_cpu_s)
    else:
        send = extract_cpu_s.copy()
    variable = np.maximum(stage_cpu_s - fixed_s, 0.0)
    per_row = np.divide(variable, records, out=np.zeros_like(variable), where=records > 0)
    receive = np.minimum(per_row * rows_in, stage_cpu_s)
    total_rows = float(rows_sent.sum())
    bytes_per_row = float(np.sum(extract_bytes)) / total_rows if total_rows else 0.0
    migration = MigrationWork(
        send_s=send,
        receive_s=receive,
        sent_bytes=np.asarray(extract_bytes, dtype=float),
        received_bytes=rows_in * bytes_per_row,
        rows_sent=rows_sent,
        rows_received=rows_in,
        extract_s=float(np.sum(extract_cpu_s - send)),
    )
    return migration, node_cpu_s - receive


def fit_node_work(received: np.ndarray, work_s: np.ndarray) -> tuple[float, float, float, float]:
    """Least squares of node work on tuples received, over a run's (node, batch) points:
    ``(intercept s, slope s per tuple, r^2, root-mean-square residual s)``; r^2 is nan
    when x or y does not vary. r^2 says how much of the differences between nodes and
    batches the tuples explain: a run whose nodes all receive about the same tuples (a
    balanced one) leaves them little to explain, so read its residual instead (the noise
    the slowest node is picked from)."""
    x = np.asarray(received, dtype=float).ravel()
    y = np.asarray(work_s, dtype=float).ravel()
    if len(x) == 0:
        return 0.0, 0.0, float("nan"), 0.0
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        rms = float(np.sqrt(np.mean((y - y.mean()) ** 2)))
        return float(y.mean()), 0.0, float("nan"), rms
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (intercept + slope * x)
    r2 = 1.0 - float(residual @ residual) / float(((y - y.mean()) ** 2).sum())
    return float(intercept), float(slope), r2, float(np.sqrt(np.mean(residual**2)))


@dataclass(frozen=True)
class RunClock:
    """The replay clock of a run under the cost model (per-batch arrays and run figures)."""

    schedule: replay.Schedule
    service_s: np.ndarray
    delay_s: np.ndarray
    migration_s: np.ndarray
    harness_s: np.ndarray
    latency_s: dict[float, float]
    throughput_tuples_per_s: float
    capacity_tuples_per_s: float
    sustainable_rate_tuples_per_s: float
    #: Everything charged over the run (s): input tuples / capacity.
    charged_s_total: float = 0.0


def clock(
    batches: list[BatchCosts],
    event_time_s: np.ndarray,
    batch_of: np.ndarray,
    interval_s: float,
    percentiles: tuple[float, ...] = (50.0, 95.0, 99.0),
) -> RunClock:
    """Latency and throughput of a run from its measured batches (module docstring).

    - delivered throughput = input tuples / (end of the last batch - first arrival);
    - capacity = input tuples / sum over batches of everything charged (routing, node
      service with the migrations in it, plan): the rate if batches ran back to back;
    - sustainable rate: the highest input rate at which the backlog does not grow, at
      the same batch interval. Routing, node and migration work scale with the tuples
      per batch (factor ``a`` on the replayed rate), the plan time does not: the backlog
      stays bounded while ``a * mean(work) + mean(plan) <= interval``, so the rate is
      ``replayed rate * (interval - mean(plan)) / mean(work)``.
    """
    if not batches:
        raise ValueError("batches: at least one measured batch is needed")
    service = np.array([b.service_s for b in batches])
    migration = np.array([b.migration_s for b in batches])
    plan = np.array([b.plan_s for b in batches])
    delay = plan
    harness = np.array([b.harness_s for b in batches])
    index = np.array([b.batch for b in batches])
    last_arrival = np.array(
        [event_time_s[batch_of == i].max(initial=0.0) if len(event_time_s) else 0.0 for i in index]
    )
    sched = replay.schedule(last_arrival, interval_s, service, delay)
    lat = replay.latency_percentiles(event_time_s, batch_of, sched.end_s, percentiles)
    tuples = float(sum(b.input_tuples for b in batches))
    first = float(event_time_s.min()) if len(event_time_s) else 0.0
    span = float(sched.end_s[-1]) - first
    busy = float((service + delay).sum())
    work = float(service.mean())
    replayed_rate = tuples / (interval_s * len(batches)) if interval_s > 0 else 0.0
    headroom = interval_s - float(plan.mean())
    # No measured work at all: nothing limits the rate.
    sustainable = max(0.0, replayed_rate * headroom / work) if work > 0 else float("inf")
    return RunClock(
        schedule=sched,
        service_s=service,
        delay_s=delay,
        migration_s=migration,
        harness_s=harness,
        latency_s=lat,
        throughput_tuples_per_s=tuples / span if span > 0 else 0.0,
        capacity_tuples_per_s=tuples / busy if busy > 0 else 0.0,
        sustainable_rate_tuples_per_s=sustainable,
        charged_s_total=busy,
    )


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
        "(the planning thread's, time.thread_time: balancebench.metric_definitions.plan_clock), "
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
        "model of balancebench.metric_definitions) minus the tuple's event time, seconds."
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
