"""Paper 003 as a model: resolving back-pressure by data migration vs Flink's credits.

Paper 003 (Sun, Ding, Xu, "基于数据迁移策略的反压问题解决方法", Computer Systems &
Applications 2022(5)) runs a traffic-counting job on an NS-3 network of 5 nodes and 6
links (§3.1, Fig. 3): a source splits 1 MB packets by tag over 3 branches, the branches
feed an output node. Each node is a fixed-length queue with one consumer (Fig. 4); a full
queue sends "stop" upstream and "resume" once it is down to 50%. The paper compares its
data-migration strategy (§2, Algorithm 1) with Flink's credit-based flow control (Fig. 5)
on totals of 500 MB, 1 GB, 2 GB and 5 GB: total completion time (Table 2) and the
completed-volume fraction every 5 s (Figs. 7-8); Table 1 sweeps the score weights alpha,
beta at 5 GB (best alpha = 0.3, beta = 0.5). Headline: about 15% lower completion time at
the larger volumes, little difference at small ones.

**Simulator.** SimPy 4 (discrete-event, pure Python). The paper used NS-3; ns-3's Python
bindings are not installable here (no ns-3 build, no wheel for this platform), and the
paper's network only needs per-link serialisation + propagation delay and per-node
queues, which a SimPy process model gives exactly. No packet loss, TCP or MAC layer.

**Topology** (the paper gives none of its numbers: every value below is
[reconstructed], a Param): node ``source`` -> ``branch_0..branch_{B-1}`` -> ``sink``
(B = 3: 5 nodes, 6 links). Each link has a bandwidth (MB/s) and a propagation delay (s);
signals (stop, resume, credits) travel upstream with the link's delay. Each node has a
fixed-length queue (packets) and one consumer: it takes the head packet, serves it
(``size / service rate``, deterministic or exponential), then writes it onto its outgoing
link (serialisation ``size / bandwidth``; the consumer is single-threaded, so a node's
rate is ``1 / (size/service + size/bandwidth)``) once flow control allows; the packet
arrives ``delay`` later. A packet that arrives at a full queue waits at the receiver
(nothing is lost). The source consumer is FIFO: a head packet that may not be sent blocks
the packets behind it (the way back-pressure reaches the source). The data source (the
dataset's arrival times) feeds the source queue; when that queue is full the data source
pauses until it is down to the resume level, in both strategies, and [interpreted, §3.1:
"sending stops on a stop signal and generation continues on resume"] the rest of its
schedule moves by the pause (``data_source_pause = "shift"``; ``"catch_up"`` keeps the
dataset's times and sends the backlog at once). Packet latency runs from generation
(the shifted arrival time) to being counted at the sink.

**Strategies.**

- ``credit`` (baseline, Fig. 5): every ``credit_interval_s`` each receiver grants each
  input channel its free slots: ``exclusive - queued - outstanding`` where the queue is
  split evenly into exclusive per-channel slots [interpreted: Flink's exclusive buffers;
  floating buffers are left out] and ``outstanding`` = credits granted but not yet used
  by an arrived packet. The sender spends one credit per packet and waits when it has
  none. Queues never overflow, so no stop signals on the network.
- ``migration`` (§2): the network runs the paper's stop/resume node (Fig. 4) (or credits,
  Param ``migration_flow_control``). Every ``detection_interval_s`` a branch node is
  *back-pressured* when its queue use > ``backpressure_queue_share`` (0.8) and its input
  over the last interval exceeds its output (§2.1); tracing upstream reaches the source
  (the branching node), so the node's branch is *heavy* and enters the back-pressure
  list. Branch scores (§2.1, Eqs. 1-4): ``Q_b`` = max queue use over the branch's nodes
  (the branch node; the shared source and sink are not on one branch), ``IO_b`` = (branch
  input - branch output) / interval (MB/s), ``BW_b`` = min bandwidth of the branch's two
  links; ``S_b = alpha*Q_b + beta*IOn_b + (1-alpha-beta)*(1-BWn_b)`` [reconstructed, the
  paper's Eq. 4 was lost] with ``IOn`` min-max normalised over branches (0 when all are
  equal) and ``BWn = BW / max BW`` [reconstructed]. For every listed branch, packets
  tagged for it are sent to the lowest-scoring branch that is not listed (none left: they
  stay home). Every migrated packet's (tag, offset within the tag's stream) is recorded
  as segments ``(tag, offset, length, branch)`` (§2.2, step 4). Recovery (step 5): the
  default ``recovery_rule = "any_listed"`` is the paper's text ("如存在节点压力低于预设恢复
  阈值, 则停止数据迁移策略": if any listed node is below the recovery level, stop the
  migration and restore the default routing) with ``recovery_queue_share``
  [reconstructed: 0.3]; ``"all_listed"`` (a stricter reading) waits until every listed node
  is below it; ``"per_node"`` releases each listed node on its own.
- The sink keeps per (tag, processing branch) partials (sum, count, max) and combines
  them per tag: sum of sums, sum of counts, max of maxes, mean = sum(sums)/sum(counts)
  (§2.2, Eq. 5). Distinct counts and other operators needing more state are left out (the
  job only counts).

**Left out**: CPU/memory beyond the queue + service-rate abstraction, the cost of moving
a migrated packet's state (the partials are merged at the sink for free), detection at
the source or sink (not on a single branch), Flink's floating buffers and buffer
timeouts, NS-3's link layer. Table 1's grid values were lost in extraction:
``ALPHA_BETA_GRID`` is [reconstructed] (alpha 0.1-0.5, beta 0.1-0.7, alpha + beta <= 0.9).

``plan_time_ms`` is the mean CPU time (``balancebench.core.cost_model.plan_clock``) of
one decision: the detection + scoring + routing code for ``migration``, one credit-grant round for
``credit``. ``events`` counts SimPy events processed (``env.step`` calls).

**Layout.** ``migration_rules`` (names and the pure pieces of the strategies),
``packet_input`` (the input table), ``queues`` (queue + consumer, the M/M/1 check),
``packet_network`` (the SimPy network), ``backpressure_strategies`` (one class per
strategy, registered in ``STRATEGIES``), ``backpressure_model`` (``BackpressureModel``:
Params, metrics, run, figure).
"""

from __future__ import annotations

from balancebench.models.backpressure.backpressure_model import BackpressureModel
from balancebench.models.backpressure.backpressure_strategies import STRATEGIES
from balancebench.models.backpressure.migration_rules import (
    ALPHA_BETA_GRID,
    BW_NORMALISATIONS,
    CREDIT,
    FLOW_CONTROLS,
    MIGRATION,
    RECOVERY_RULES,
    STOP_RESUME,
    branch_scores,
    choose_light_branch,
    combine_partials,
    completed_fraction_series,
    credit_grant,
    exclusive_slots,
    expand_segments,
    is_backpressured,
    migration_routes,
    record_segment,
    released_nodes,
)
from balancebench.models.backpressure.packet_input import (
    PACKET_COLUMNS,
    SYNTHETIC_TRAFFIC,
    load_packets,
    synthetic_packets,
)
from balancebench.models.backpressure.packet_network import (
    DATA_SOURCE_PAUSES,
    SERVICE_DISTRIBUTIONS,
    Strategy,
)
from balancebench.models.backpressure.queues import NodeQueue, consumer_process, simulate_mm1

__all__ = [
    "ALPHA_BETA_GRID",
    "BW_NORMALISATIONS",
    "CREDIT",
    "DATA_SOURCE_PAUSES",
    "FLOW_CONTROLS",
    "MIGRATION",
    "PACKET_COLUMNS",
    "RECOVERY_RULES",
    "SERVICE_DISTRIBUTIONS",
    "STOP_RESUME",
    "STRATEGIES",
    "SYNTHETIC_TRAFFIC",
    "BackpressureModel",
    "NodeQueue",
    "Strategy",
    "branch_scores",
    "choose_light_branch",
    "combine_partials",
    "completed_fraction_series",
    "consumer_process",
    "credit_grant",
    "exclusive_slots",
    "expand_segments",
    "is_backpressured",
    "load_packets",
    "migration_routes",
    "record_segment",
    "released_nodes",
    "simulate_mm1",
    "synthetic_packets",
]
