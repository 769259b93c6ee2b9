"""The cost model (docs/reference/outputs.md, "Metrics"; issues 12 and 26) is the only
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

from balancebench.core import replay

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
