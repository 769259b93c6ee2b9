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
  [reconstructed: 0.3]; ``"all_listed"`` (strategies.md) waits until every listed node
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

``plan_time_ms`` is the mean wall time (``time.perf_counter``) of one decision: the
detection + scoring + routing code for ``migration``, one credit-grant round for
``credit``. ``events`` counts SimPy events processed (``env.step`` calls).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import simpy

from balancebench.models.base import Model, ModelPoint, ModelResult
from balancebench.schema import array_spec, integer_spec, positive_number_spec, share_spec

CREDIT = "credit"
MIGRATION = "migration"
STOP_RESUME = "stop_resume"
FLOW_CONTROLS = (STOP_RESUME, CREDIT)
RECOVERY_RULES = ("any_listed", "all_listed", "per_node")
SERVICE_DISTRIBUTIONS = ("deterministic", "exponential")
DATA_SOURCE_PAUSES = ("shift", "catch_up")
PACKET_COLUMNS = ("packet_id", "time_s", "branch", "size_mb", "value")

#: Table 1 of paper 003 (alpha, beta at 5 GB); the grid values were lost in extraction,
#: so this grid is [reconstructed]: alpha 0.1-0.5, beta 0.1-0.7, alpha + beta <= 0.9.
ALPHA_BETA_GRID: tuple[tuple[float, float], ...] = tuple(
    (a / 10, b / 10) for a in range(1, 6) for b in range(1, 8) if a + b <= 9
)

#: The packet generator's defaults, used by ``synthetic_packets`` (no dataset given).
SYNTHETIC_TRAFFIC: dict[str, Any] = {
    "branch_shares": (0.5, 0.3, 0.2),
    "base_rate_mb_per_s": 20.0,
    "burst_rate_mb_per_s": 100.0,
    "mean_burst_s": 2.0,
    "mean_calm_s": 8.0,
    "burst_focus": 0.8,
    "size_mb": 1.0,
    "value_max": 1000,
}


# ---- pure pieces of the strategies ------------------------------------------------------


def is_backpressured(
    queue_use_share: float, input_mb: float, output_mb: float, threshold_share: float = 0.8
) -> bool:
    """Paper 003 §2.1: queue use above the threshold and input above output (same interval)."""
    return queue_use_share > threshold_share and input_mb > output_mb


def branch_scores(
    queue_use_share: Sequence[float],
    io_mb_per_s: Sequence[float],
    bandwidth_mb_per_s: Sequence[float],
    alpha: float,
    beta: float,
    bw_normalisation: str = "max",
) -> np.ndarray:
    """``S_b = alpha*Q_b + beta*IOn_b + (1-alpha-beta)*(1-BWn_b)`` [reconstructed].

    ``IOn`` is min-max normalised over the branches (all 0 when equal). ``BWn`` is
    ``BW / max`` (``bw_normalisation = "max"``, the default) or min-max like ``IOn``
    (``"min_max"``: the slowest link 0, the fastest 1, all 1 when equal; the paper says
    only "normalised"). Lower = lighter.
    """
    q = np.asarray(queue_use_share, dtype=np.float64)
    io = np.asarray(io_mb_per_s, dtype=np.float64)
    bw = np.asarray(bandwidth_mb_per_s, dtype=np.float64)
    spread = io.max() - io.min()
    io_n = (io - io.min()) / spread if spread > 0 else np.zeros_like(io)
    if bw_normalisation == "min_max":
        bw_spread = bw.max() - bw.min()
        bw_n = (bw - bw.min()) / bw_spread if bw_spread > 0 else np.ones_like(bw)
    elif bw_normalisation == "max":
        bw_n = bw / bw.max()
    else:
        raise ValueError(
            f"bw_normalisation: {bw_normalisation!r}; allowed values: {list(BW_NORMALISATIONS)}"
        )
    return alpha * q + beta * io_n + (1.0 - alpha - beta) * (1.0 - bw_n)


def released_nodes(
    listed: Iterable[int], use: Sequence[float], level: float, rule: str
) -> set[int]:
    """Step 5: the listed nodes whose migration ends now (default routing restored).
    ``any_listed`` (the paper): all of them once any is below ``level``; ``all_listed``:
    all of them once every one is; ``per_node``: each one below it."""
    listed = set(listed)
    below = {b for b in listed if use[b] < level}
    if rule == "any_listed":
        return listed if below else set()
    if rule == "all_listed":
        return listed if listed and below == listed else set()
    if rule == "per_node":
        return below
    raise ValueError(f"recovery_rule: {rule!r}; allowed values: {list(RECOVERY_RULES)}")


def choose_light_branch(scores: Sequence[float], excluded: Iterable[int]) -> int | None:
    """Lowest-scoring branch not in ``excluded`` (lowest index on ties); None if none."""
    banned = set(excluded)
    candidates = [b for b in range(len(scores)) if b not in banned]
    if not candidates:
        return None
    return min(candidates, key=lambda b: (scores[b], b))


def migration_routes(n_branches: int, listed: Iterable[int], scores: Sequence[float]) -> list[int]:
    """Tag -> branch: home, except listed (heavy) tags go to the lightest unlisted branch."""
    listed = sorted(set(listed))
    routes = list(range(n_branches))
    light = choose_light_branch(scores, listed)
    if light is not None:
        for heavy in listed:
            routes[heavy] = light
    return routes


def credit_grant(exclusive_slots: int, queued: int, outstanding: int) -> int:
    """Credits a receiver can add to one channel: its free exclusive slots not yet granted."""
    return max(0, exclusive_slots - queued - outstanding)


def exclusive_slots(capacity: int, channels: int) -> list[int]:
    """Queue slots split evenly over input channels (the remainder to the first ones)."""
    base, extra = divmod(capacity, channels)
    return [base + (1 if c < extra else 0) for c in range(channels)]


def record_segment(segments: list[list[int]], tag: int, offset: int, branch: int) -> None:
    """Append packet ``offset`` of ``tag`` sent to ``branch`` to ``segments`` (rows
    ``[tag, offset, length, branch]``), extending the tag's last segment when contiguous."""
    for segment in reversed(segments):
        if segment[0] == tag:
            if segment[3] == branch and segment[1] + segment[2] == offset:
                segment[2] += 1
                return
            break
    segments.append([tag, offset, 1, branch])


def expand_segments(segments: Iterable[Sequence[int]]) -> set[tuple[int, int, int]]:
    """Every ``(tag, offset, branch)`` the segments cover."""
    return {
        (tag, offset + k, branch) for tag, offset, length, branch in segments for k in range(length)
    }


def combine_partials(
    sums: np.ndarray, counts: np.ndarray, maxima: np.ndarray
) -> dict[int, dict[str, float]]:
    """Per-tag result from per (tag, branch) partials (arrays ``[tag, branch]``): sum of
    sums, sum of counts, max of maxima (branches with data), mean = sum / count (Eq. 5)."""
    out: dict[int, dict[str, float]] = {}
    for tag in range(sums.shape[0]):
        count = int(counts[tag].sum())
        if count == 0:
            continue
        total = int(sums[tag].sum())
        out[tag] = {
            "sum": total,
            "count": count,
            "max": int(maxima[tag][counts[tag] > 0].max()),
            "mean": total / count,
        }
    return out


def completed_fraction_series(
    counted_s: np.ndarray, size_mb: np.ndarray, step_s: float
) -> tuple[list[float], list[float]]:
    """Share of the total volume counted by ``t = step, 2*step, ...`` up to the first
    sample at or after the last count (so the series ends at 1)."""
    total = float(size_mb.sum())
    end = float(counted_s.max()) if len(counted_s) else 0.0
    samples = max(1, math.ceil(end / step_s - 1e-12))
    times = [step_s * (k + 1) for k in range(samples)]
    order = np.argsort(counted_s, kind="stable")
    cumulative = np.concatenate([[0.0], np.cumsum(size_mb[order])])
    done = np.searchsorted(counted_s[order], np.asarray(times), side="right")
    return times, [float(cumulative[k] / total) for k in done]


def synthetic_packets(total_mb: int, rng: np.random.Generator) -> pd.DataFrame:
    """A small in-memory ``packets`` table (unit tests, no dataset): the ``packets``
    generator's process at its defaults (``SYNTHETIC_TRAFFIC``), ``total_mb`` 1 MB packets.

    Calm/burst phases with exponential lengths; Poisson arrivals at the phase's rate; a
    burst's extra packets go to its hot branch with probability ``burst_focus``.
    """
    cfg = SYNTHETIC_TRAFFIC
    shares = np.asarray(cfg["branch_shares"])
    base, burst_rate = cfg["base_rate_mb_per_s"], cfg["burst_rate_mb_per_s"]
    q_hot = cfg["burst_focus"] * (burst_rate - base) / burst_rate
    n = int(round(total_mb / cfg["size_mb"]))
    p_burst = cfg["mean_burst_s"] / (cfg["mean_burst_s"] + cfg["mean_calm_s"])
    in_burst = bool(rng.random() < p_burst)
    times: list[np.ndarray] = []
    branches: list[np.ndarray] = []
    start, count = 0.0, 0
    while count < n:
        length = rng.exponential(cfg["mean_burst_s"] if in_burst else cfg["mean_calm_s"])
        rate = (burst_rate if in_burst else base) / cfg["size_mb"]
        k = int(rng.poisson(rate * length))
        t = np.sort(start + length * rng.random(k))
        branch = rng.choice(len(shares), size=k, p=shares)
        if in_burst:
            hot = int(rng.choice(len(shares), p=shares))
            branch = np.where(rng.random(k) < q_hot, hot, branch)
        times.append(t)
        branches.append(branch)
        count += k
        start += length
        in_burst = not in_burst
    time_s = np.concatenate(times)[:n]
    return pd.DataFrame(
        {
            "packet_id": np.arange(n, dtype=np.int64),
            "time_s": time_s,
            "branch": np.concatenate(branches)[:n].astype(np.int32),
            "size_mb": np.full(n, cfg["size_mb"]),
            "value": rng.integers(1, cfg["value_max"] + 1, n, dtype=np.int64),
        }
    )


def load_packets(dataset_dir: str | Path) -> pd.DataFrame:
    """The ``packets`` table of a generated dataset, in arrival order."""
    from balancebench.generators.common import load_manifest, read_table

    manifest = load_manifest(dataset_dir)
    table = read_table(dataset_dir, manifest, "packets", list(PACKET_COLUMNS)).to_pandas()
    return table.sort_values(["time_s", "packet_id"], kind="stable").reset_index(drop=True)


# ---- queue + consumer (shared by the network model and the M/M/1 check) -----------------


#: How BWn is normalised in the branch score (``branch_scores``).
BW_NORMALISATIONS = ("max", "min_max")
#: Paper 003 Fig. 7's volume (MB): its completion curve is drawn when a run includes it.
FIG7_TOTAL_MB = 1000.0


class NodeQueue:
    """A fixed-length FIFO (``simpy.Store``) with hooks after every put and get.

    ``put``/``get`` are generators (``yield from``): a put into a full queue waits.
    ``input_mb`` accumulates the volume put (``size_of`` maps an item to MB).
    """

    def __init__(
        self,
        env: simpy.Environment,
        capacity: int,
        size_of: Callable[[Any], float] = lambda _item: 1.0,
    ) -> None:
        self.env = env
        self.capacity = capacity
        self.store = simpy.Store(env, capacity=capacity)
        self.size_of = size_of
        self.input_mb = 0.0
        self.peak_use_share = 0.0
        self.after_put: list[Callable[[Any], None]] = []
        self.after_get: list[Callable[[Any], None]] = []

    def __len__(self) -> int:
        return len(self.store.items)

    @property
    def use_share(self) -> float:
        return len(self.store.items) / self.capacity

    def put(self, item: Any) -> Generator[simpy.Event, Any, None]:
        yield self.store.put(item)
        self.input_mb += self.size_of(item)
        self.peak_use_share = max(self.peak_use_share, self.use_share)
        for hook in self.after_put:
            hook(item)

    def get(self) -> Generator[simpy.Event, Any, Any]:
        item = yield self.store.get()
        for hook in self.after_get:
            hook(item)
        return item


def consumer_process(
    env: simpy.Environment,
    queue: NodeQueue,
    service_time_s: Callable[[Any], float],
    forward: Callable[[Any], Generator[simpy.Event, Any, Any] | None],
) -> Generator[simpy.Event, Any, None]:
    """A node's single consumer: take the head item, serve it, hand it on (``forward``
    may block, e.g. on flow control; None = nothing to do)."""
    while True:
        item = yield from queue.get()
        yield env.timeout(service_time_s(item))
        step = forward(item)
        if step is not None:
            yield from step


def simulate_mm1(
    arrival_rate: float, service_rate: float, customers: int, seed: int
) -> dict[str, float]:
    """One ``NodeQueue`` + ``consumer_process`` with Poisson arrivals and exponential
    service, run for ``customers`` customers: mean sojourn (arrival -> service end) vs the
    M/M/1 value ``1 / (mu - lambda)``."""
    if not 0 < arrival_rate < service_rate:
        raise ValueError(
            f"arrival_rate: {arrival_rate} with service_rate {service_rate}; allowed: "
            f"0 < arrival_rate < service_rate (a stable queue)"
        )
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / arrival_rate, customers)
    services = rng.exponential(1.0 / service_rate, customers)
    env = simpy.Environment()
    queue = NodeQueue(env, capacity=customers)
    arrived = np.empty(customers)
    sojourn = np.empty(customers)

    def arrivals() -> Generator[simpy.Event, Any, None]:
        for i in range(customers):
            yield env.timeout(gaps[i])
            arrived[i] = env.now
            yield from queue.put(i)

    def leave(i: int) -> None:
        sojourn[i] = env.now - arrived[i]

    env.process(arrivals())
    env.process(consumer_process(env, queue, lambda i: services[i], leave))
    env.run()
    expected = 1.0 / (service_rate - arrival_rate)
    mean = float(sojourn.mean())
    return {
        "mean_sojourn_s": mean,
        "expected_sojourn_s": expected,
        "relative_error": abs(mean - expected) / expected,
    }


# ---- the network ----------------------------------------------------------------------


class _Wake:
    """A re-armable event: a blocked sender waits on ``event``; ``notify`` wakes it."""

    __slots__ = ("env", "event")

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.event = env.event()

    def notify(self) -> None:
        if not self.event.triggered:
            self.event.succeed()
        self.event = self.env.event()


@dataclass
class _Channel:
    """A link into a node: sender-side gate (credits or stop flag), receiver-side slots."""

    sender_wake: _Wake
    bandwidth_mb_per_s: float
    delay_s: float
    mode: str
    credit: int = 0
    stopped: bool = False
    exclusive: int = 0
    queued: int = 0
    outstanding: int = 0
    stopped_since_s: float = 0.0
    stopped_total_s: float = 0.0

    def can_send(self) -> bool:
        return self.credit > 0 if self.mode == CREDIT else not self.stopped


class _Node:
    def __init__(
        self,
        sim: _Network,
        name: str,
        capacity: int,
        service_rate_mb_per_s: float,
        mode: str,
    ) -> None:
        self.sim = sim
        self.name = name
        self.mode = mode
        self.service_rate_mb_per_s = service_rate_mb_per_s
        self.queue = NodeQueue(sim.env, capacity, size_of=lambda item: sim.size_mb[item[0]])
        self.inputs: list[_Channel] = []
        self.wake = _Wake(sim.env)
        self.stopped = False
        self.sent_mb = 0.0
        self.blocked_s = 0.0
        self.queue.after_put.append(self._after_put)
        self.queue.after_get.append(self._after_get)

    def _after_put(self, _item: tuple[int, int]) -> None:
        if self.mode == STOP_RESUME and not self.stopped and len(self.queue) >= self.queue.capacity:
            self.stopped = True
            for channel in self.inputs:
                self.sim.signal(channel, stop=True, counted=self.name != "source")

    def _after_get(self, item: tuple[int, int]) -> None:
        if self.mode == CREDIT:
            self.inputs[item[1]].queued -= 1
        elif self.stopped and len(self.queue) <= self.sim.resume_share * self.queue.capacity:
            self.stopped = False
            for channel in self.inputs:
                self.sim.signal(channel, stop=False, counted=False)


class _Network:
    """Paper 003's network for one strategy on one packet table."""

    def __init__(
        self,
        params: dict[str, Any],
        strategy: str,
        packets: pd.DataFrame,
        rng: np.random.Generator,
    ) -> None:
        self.params = params
        self.strategy = strategy
        self.rng = rng
        self.env = simpy.Environment()
        self.n_branches = len(params["branch_service_rate_mb_per_s"])
        self.arrival_s = packets["time_s"].to_numpy(dtype=np.float64)
        self.tag = packets["branch"].to_numpy(dtype=np.int64)
        self.size_mb = packets["size_mb"].to_numpy(dtype=np.float64)
        self.value = packets["value"].to_numpy(dtype=np.int64)
        self.n = len(packets)
        # Offset of each packet within its tag's stream (the source is FIFO, so this is
        # also the order in which the source dispatches the tag's packets).
        self.offset = packets.groupby("branch", sort=False).cumcount().to_numpy()
        self.resume_share = params["resume_share"]
        network_mode = CREDIT if strategy == CREDIT else params["migration_flow_control"]
        self.network_mode = network_mode

        self.source = _Node(
            self, "source", params["source_queue_packets"],
            params["source_service_rate_mb_per_s"], STOP_RESUME,
        )  # fmt: skip
        self.branches = [
            _Node(
                self,
                f"branch_{b}",
                params["branch_queue_packets"][b],
                params["branch_service_rate_mb_per_s"][b],
                network_mode,
            )  # fmt: skip
            for b in range(self.n_branches)
        ]
        self.sink = _Node(
            self, "sink", params["sink_queue_packets"],
            params["sink_service_rate_mb_per_s"], network_mode,
        )  # fmt: skip
        self.data_source_wake = _Wake(self.env)
        # The data source feeds the source queue locally (no delay, stop/resume).
        self.source.inputs.append(_Channel(self.data_source_wake, math.inf, 0.0, STOP_RESUME))
        for b, branch in enumerate(self.branches):
            branch.inputs.append(
                _Channel(
                    self.source.wake,
                    params["source_link_bandwidth_mb_per_s"][b],
                    params["source_link_delay_s"][b],
                    network_mode,
                )
            )
            self.sink.inputs.append(
                _Channel(
                    branch.wake,
                    params["sink_link_bandwidth_mb_per_s"][b],
                    params["sink_link_delay_s"][b],
                    network_mode,
                )
            )
        for node in (*self.branches, self.sink):
            for channel, slots in zip(
                node.inputs, exclusive_slots(node.queue.capacity, len(node.inputs)), strict=True
            ):
                channel.exclusive = slots
        self.branch_bandwidth_mb_per_s = [
            min(
                params["source_link_bandwidth_mb_per_s"][b],
                params["sink_link_bandwidth_mb_per_s"][b],
            )
            for b in range(self.n_branches)
        ]

        # Routing and migration bookkeeping.
        self.routes = list(range(self.n_branches))
        self.listed: set[int] = set()
        self.segments: list[list[int]] = []
        self.migration_log: list[dict[str, Any]] = []
        self.migrated_packets = 0
        self.migrated_mb = 0.0
        self.migrations = 0
        self.recoveries = 0
        self.detections = 0
        self.decision_times_s: list[float] = []
        self.stop_signals = 0
        self.data_source_stops = 0
        self.credit_messages = 0

        # Sink state.
        self.counted_s = np.full(self.n, np.nan)
        self.created_s = self.arrival_s.copy()
        self.sums = np.zeros((self.n_branches, self.n_branches), dtype=np.int64)
        self.counts = np.zeros((self.n_branches, self.n_branches), dtype=np.int64)
        self.maxima = np.zeros((self.n_branches, self.n_branches), dtype=np.int64)
        self.off_home: set[tuple[int, int, int]] = set()
        self.n_counted = 0
        self.done = self.env.event()
        self.events = 0

    # -- signals ---------------------------------------------------------------------
    def after(self, delay_s: float, action: Callable[[], None]) -> None:
        self.env.timeout(delay_s).callbacks.append(lambda _event: action())

    def signal(self, channel: _Channel, *, stop: bool, counted: bool) -> None:
        """Stop/resume to the channel's sender, arriving after the link delay."""
        if stop:
            if counted:
                self.stop_signals += 1
            else:
                self.data_source_stops += 1

        def apply() -> None:
            if stop and not channel.stopped:
                channel.stopped_since_s = self.env.now
            elif not stop and channel.stopped:
                channel.stopped_total_s += self.env.now - channel.stopped_since_s
            channel.stopped = stop
            channel.sender_wake.notify()

        self.after(channel.delay_s, apply)

    # -- processes -------------------------------------------------------------------
    def service_time_s(self, node: _Node) -> Callable[[tuple[int, int]], float]:
        rate = node.service_rate_mb_per_s
        if self.params["service_time_distribution"] == "exponential":
            return lambda item: float(self.rng.exponential(self.size_mb[item[0]] / rate))
        return lambda item: self.size_mb[item[0]] / rate

    def data_source(self) -> Generator[simpy.Event, Any, None]:
        """Emit the packets at their arrival times; a stop pauses the emission. With
        ``data_source_pause = "shift"`` the rest of the schedule moves by every pause (the
        generation resumes where it stopped); with ``"catch_up"`` it keeps its times."""
        channel = self.source.inputs[0]
        shift = self.params["data_source_pause"] == "shift"
        for i in range(self.n):
            while True:
                if channel.stopped:
                    yield self.data_source_wake.event
                    continue
                due = self.arrival_s[i] + (channel.stopped_total_s if shift else 0.0)
                if due <= self.env.now:
                    break
                yield self.env.timeout(due - self.env.now)
            self.created_s[i] = due
            yield from self.source.queue.put((i, 0))

    def send(
        self, node: _Node, packet: int, choose: Callable[[], tuple[_Node, int]]
    ) -> Generator[simpy.Event, Any, tuple[_Node, int]]:
        """Wait until flow control lets the packet go to ``choose()`` (re-asked after every
        change: routes may move), then serialise it and deliver it after the delay."""
        blocked_since = None
        while True:
            receiver, c = choose()
            channel = receiver.inputs[c]
            if channel.can_send():
                break
            if blocked_since is None:
                blocked_since = self.env.now
            yield node.wake.event
        if blocked_since is not None:
            node.blocked_s += self.env.now - blocked_since
        if channel.mode == CREDIT:
            channel.credit -= 1
        size = self.size_mb[packet]
        node.sent_mb += size
        yield self.env.timeout(size / channel.bandwidth_mb_per_s)
        self.env.process(self.deliver(receiver, c, packet))
        return receiver, c

    def deliver(self, receiver: _Node, c: int, packet: int) -> Generator[simpy.Event, Any, None]:
        channel = receiver.inputs[c]
        yield self.env.timeout(channel.delay_s)
        if channel.mode == CREDIT:
            channel.outstanding -= 1
            channel.queued += 1
        yield from receiver.queue.put((packet, c))

    def source_forward(self, item: tuple[int, int]) -> Generator[simpy.Event, Any, None]:
        packet = item[0]
        tag = int(self.tag[packet])

        def choose() -> tuple[_Node, int]:
            return self.branches[self.routes[tag]], 0

        receiver, _ = yield from self.send(self.source, packet, choose)
        branch = self.branches.index(receiver)
        if branch != tag:
            record_segment(self.segments, tag, int(self.offset[packet]), branch)
            self.migrated_packets += 1
            self.migrated_mb += self.size_mb[packet]

    def branch_forward(self, b: int) -> Callable[[tuple[int, int]], Generator]:
        def forward(item: tuple[int, int]) -> Generator[simpy.Event, Any, None]:
            yield from self.send(self.branches[b], item[0], lambda: (self.sink, b))

        return forward

    def sink_count(self, item: tuple[int, int]) -> None:
        packet = item[0]
        tag, branch, value = int(self.tag[packet]), item[1], int(self.value[packet])
        self.counted_s[packet] = self.env.now
        self.sums[tag, branch] += value
        self.counts[tag, branch] += 1
        self.maxima[tag, branch] = max(self.maxima[tag, branch], value)
        if branch != tag:
            self.off_home.add((tag, int(self.offset[packet]), branch))
        self.n_counted += 1
        if self.n_counted == self.n:
            self.done.succeed()

    def credit_loop(self, node: _Node) -> Generator[simpy.Event, Any, None]:
        """Every interval, grant each input channel its free, not yet granted slots."""
        while True:
            started = time.perf_counter()
            for channel in node.inputs:
                grant = credit_grant(channel.exclusive, channel.queued, channel.outstanding)
                if grant > 0:
                    channel.outstanding += grant
                    self.credit_messages += 1
                    self.after(channel.delay_s, self._credit_arrives(channel, grant))
            if self.strategy == CREDIT:
                self.decision_times_s.append(time.perf_counter() - started)
            yield self.env.timeout(self.params["credit_interval_s"])

    @staticmethod
    def _credit_arrives(channel: _Channel, grant: int) -> Callable[[], None]:
        def apply() -> None:
            channel.credit += grant
            channel.sender_wake.notify()

        return apply

    def detection_loop(self) -> Generator[simpy.Event, Any, None]:
        interval = self.params["detection_interval_s"]
        last_in = [0.0] * self.n_branches
        last_out = [0.0] * self.n_branches
        while True:
            yield self.env.timeout(interval)
            started = time.perf_counter()
            self.decide(interval, last_in, last_out)
            self.decision_times_s.append(time.perf_counter() - started)

    def decide(self, interval: float, last_in: list[float], last_out: list[float]) -> None:
        """Detection (§2.1), recovery (step 5), scoring and routing (steps 3-4)."""
        p = self.params
        use = [node.queue.use_share for node in self.branches]
        input_mb = [node.queue.input_mb - last_in[b] for b, node in enumerate(self.branches)]
        output_mb = [node.sent_mb - last_out[b] for b, node in enumerate(self.branches)]
        for b, node in enumerate(self.branches):
            last_in[b], last_out[b] = node.queue.input_mb, node.sent_mb
        released = released_nodes(self.listed, use, p["recovery_queue_share"], p["recovery_rule"])
        if released:
            self.listed -= released
            self.recoveries += len(released) if p["recovery_rule"] == "per_node" else 1
        for b in range(self.n_branches):
            if b not in self.listed and is_backpressured(
                use[b], input_mb[b], output_mb[b], p["backpressure_queue_share"]
            ):
                self.listed.add(b)
                self.detections += 1
        io = [(i - o) / interval for i, o in zip(input_mb, output_mb, strict=True)]
        scores = branch_scores(
            use, io, self.branch_bandwidth_mb_per_s, p["alpha"], p["beta"], p["bw_normalisation"]
        )
        routes = migration_routes(self.n_branches, self.listed, scores)
        if routes != self.routes:
            for tag, (old, new) in enumerate(zip(self.routes, routes, strict=True)):
                if new != old and new != tag:
                    self.migrations += 1
                    if len(self.migration_log) < 200:
                        self.migration_log.append(
                            {"time_s": round(self.env.now, 6), "heavy": tag, "light": new}
                        )
            self.routes = routes
            self.source.wake.notify()

    # -- run -------------------------------------------------------------------------
    def run(self) -> None:
        env = self.env
        env.process(self.data_source())
        env.process(
            consumer_process(
                env, self.source.queue, self.service_time_s(self.source), self.source_forward
            )
        )
        for b, node in enumerate(self.branches):
            env.process(
                consumer_process(env, node.queue, self.service_time_s(node), self.branch_forward(b))
            )
        env.process(
            consumer_process(env, self.sink.queue, self.service_time_s(self.sink), self.sink_count)
        )
        if self.network_mode == CREDIT:
            for node in (*self.branches, self.sink):
                env.process(self.credit_loop(node))
        if self.strategy == MIGRATION:
            env.process(self.detection_loop())
        limit_s = self.params["max_simulated_s"]
        while not self.done.triggered:
            if env.now > limit_s:
                raise RuntimeError(
                    f"backpressure: {self.n - self.n_counted} of {self.n} packets not counted "
                    f"after {limit_s} simulated s (raise max_simulated_s?)"
                )
            try:
                env.step()
            except simpy.core.EmptySchedule as exc:  # cannot happen: consumers always wait
                raise RuntimeError("backpressure: simulation stalled with packets left") from exc
            self.events += 1


# ---- the model ------------------------------------------------------------------------


#: Items of the per-branch Params (one value per branch).
_BRANCH_NUMBER: dict[str, Any] = {"type": "number", "exclusiveMinimum": 0, "maximum": 1e9}
_BRANCH_INTEGER: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": 10**6}


class BackpressureModel(Model):
    """Paper 003: data migration vs credit-based flow control on a 5-node network."""

    name: ClassVar[str] = "backpressure"
    reference: ClassVar[str] = (
        "paper 003 (Sun, Ding, Xu 2022): §2 Algorithm 1, §2.1 detection and branch scores, "
        "§2.2 result correctness, §3 NS-3 experiment (Figs. 3-8, Tables 1-2)"
    )
    strategies: ClassVar[tuple[str, ...]] = (CREDIT, MIGRATION)
    dataset: ClassVar[str] = "packets"
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "source_service_rate_mb_per_s": positive_number_spec(
            1000.0, "Source service rate (MB/s)", "[reconstructed] Splitter's service rate."
        ),
        "branch_service_rate_mb_per_s": array_spec(
            _BRANCH_NUMBER,
            [35.0, 45.0, 60.0],
            "Branch service rates (MB/s)",
            "[reconstructed] Each branch node's consumer rate (heterogeneous nodes). One value "
            "per branch.",
            minItems=1,
            maxItems=64,
        ),
        "sink_service_rate_mb_per_s": positive_number_spec(
            500.0, "Sink service rate (MB/s)", "[reconstructed] Output node's counting rate."
        ),
        "source_link_bandwidth_mb_per_s": array_spec(
            _BRANCH_NUMBER,
            [200.0, 150.0, 250.0],
            "Source -> branch bandwidths (MB/s)",
            "[reconstructed] Bandwidth of the link from the source to each branch. One value per "
            "branch.",
            minItems=1,
            maxItems=64,
        ),
        "sink_link_bandwidth_mb_per_s": array_spec(
            _BRANCH_NUMBER,
            [100.0, 150.0, 200.0],
            "Branch -> sink bandwidths (MB/s)",
            "[reconstructed] Bandwidth of the link from each branch to the sink. One value per "
            "branch.",
            minItems=1,
            maxItems=64,
        ),
        "source_link_delay_s": array_spec(
            _BRANCH_NUMBER,
            [0.002, 0.005, 0.003],
            "Source -> branch delays (s)",
            "[reconstructed] Propagation delay of the link from the source to each branch "
            "(signals back to the source take the same delay). One value per branch.",
            minItems=1,
            maxItems=64,
        ),
        "sink_link_delay_s": array_spec(
            _BRANCH_NUMBER,
            [0.004, 0.002, 0.006],
            "Branch -> sink delays (s)",
            "[reconstructed] Propagation delay of the link from each branch to the sink. One "
            "value per branch.",
            minItems=1,
            maxItems=64,
        ),
        "source_queue_packets": integer_spec(
            64,
            "Source queue (packets)",
            "[reconstructed] Fixed queue length of the source.",
            minimum=1,
            maximum=10**6,
        ),
        "branch_queue_packets": array_spec(
            _BRANCH_INTEGER,
            [32, 32, 32],
            "Branch queues (packets)",
            "[reconstructed] Fixed queue length of each branch node. One value per branch.",
            minItems=1,
            maxItems=64,
        ),
        "sink_queue_packets": integer_spec(
            64,
            "Sink queue (packets)",
            "[reconstructed] Fixed queue length of the sink.",
            minimum=1,
            maximum=10**6,
        ),
        "resume_share": share_spec(
            0.5,
            "Resume level",
            "Paper 003: a stopped node sends 'resume' when its queue is down to this share.",
        ),
        "service_time_distribution": {
            "type": "string",
            "enum": list(SERVICE_DISTRIBUTIONS),
            "default": "deterministic",
            "title": "Service times",
            "description": "[reconstructed] size / rate exactly, or exponential with that mean.",
        },
        "credit_interval_s": positive_number_spec(
            0.05,
            "Credit interval (s)",
            "[reconstructed] How often a receiver grants its free slots as credits.",
        ),
        "detection_interval_s": positive_number_spec(
            0.5,
            "Detection interval (s)",
            "[reconstructed] How often the migration strategy checks, scores and recovers.",
        ),
        "backpressure_queue_share": share_spec(
            0.8,
            "Back-pressure queue use",
            "Paper 003: a node is back-pressured above this queue use (and input > output).",
        ),
        "recovery_queue_share": share_spec(
            0.3,
            "Recovery queue use",
            "[reconstructed] Listed nodes below this queue use end the migration.",
        ),
        "recovery_rule": {
            "type": "string",
            "enum": list(RECOVERY_RULES),
            "default": "any_listed",
            "title": "Recovery rule",
            "description": "any_listed (the paper's step 5): default routing once any listed "
            "node is below the recovery level; all_listed: once every listed node is "
            "(strategies.md); per_node: each listed node released alone.",
        },
        "alpha": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "default": 0.3,
            "title": "alpha (queue use weight)",
            "description": "Paper 003 Table 1 best: weight of Q_b in the branch score.",
        },
        "beta": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "default": 0.5,
            "title": "beta (I/O difference weight)",
            "description": "Paper 003 Table 1 best: weight of IOn_b; bandwidth gets 1-alpha-beta.",
        },
        "bw_normalisation": {
            "type": "string",
            "enum": list(BW_NORMALISATIONS),
            "default": "max",
            "title": "BWn normalisation",
            "description": "[interpreted] BWn in the branch score: BW / max over the branches, "
            "or min-max like IOn (the paper says only 'normalised').",
        },
        "migration_flow_control": {
            "type": "string",
            "enum": list(FLOW_CONTROLS),
            "default": STOP_RESUME,
            "title": "Migration's flow control",
            "description": "[interpreted] Flow control under the migration strategy: the paper's "
            "stop/resume nodes, or credits (isolates the effect of migration).",
        },
        "sample_interval_s": positive_number_spec(
            5.0, "Sample interval (s)", "Paper 003: completed fraction every 5 s."
        ),
        "synthetic_total_mb": {
            "type": "integer",
            "minimum": 1,
            "maximum": 10**6,
            "default": 500,
            "title": "Synthetic traffic (MB)",
            "description": "Only without a dataset (unit tests): MB of synthetic_packets traffic.",
        },
        "total_mb": {
            "type": ["number", "null"],
            "exclusiveMinimum": 0,
            "maximum": 1e9,
            "default": None,
            "title": "Traffic volume (MB)",
            "description": "The first packets of the dataset (arrival order) up to this many MB; "
            "null = all of it. Lets one dataset (e.g. 5 GB) serve the paper's volumes 500 MB, "
            "1 GB, 2 GB, 5 GB as grid points.",
        },
        "data_source_pause": {
            "type": "string",
            "enum": list(DATA_SOURCE_PAUSES),
            "default": "shift",
            "title": "Data source pause",
            "description": "[interpreted, §3.1] shift: a stopped data source resumes generating "
            "where it stopped (the rest of the schedule moves by the pause); catch_up: the "
            "schedule keeps its times and the backlog is sent at once after a resume.",
        },
        "max_simulated_s": positive_number_spec(
            1e6, "Simulated time limit (s)", "Abort a run that has not finished by then."
        ),
    }
    metric_definitions: ClassVar[dict[str, str]] = {
        "plan_time_ms": "Mean wall time of one decision (perf_counter, ms): detection + "
        "scoring + routing for migration, one credit-grant round for credit.",
        "latency_p50_s": "Median packet latency: generated by the data source (its arrival "
        "time, moved by the pauses under data_source_pause=shift) -> counted at the sink "
        "(simulated s).",
        "latency_p95_s": "95th percentile of the packet latency (simulated s).",
        "latency_p99_s": "99th percentile of the packet latency (simulated s).",
        "latency_mean_s": "Mean packet latency (simulated s).",
        "throughput_mb_per_s": "Total volume / completion time (MB per simulated s).",
        "imbalance_max_over_mean": "Max over branch nodes of the MB the node processed, over "
        "the mean, minus 1.",
        "completion_time_s": "Simulated time at which the sink counted the last packet (paper "
        "003's 'delay time' of the whole task, s).",
        "total_mb": "Volume of the input packets (MB).",
        "migrated_packets": "Packets the source sent to a branch other than their tag's.",
        "migrated_mb": "Volume of those packets (MB).",
        "migrations": "Routing changes that sent a tag to a branch other than its own.",
        "recoveries": "Times listed nodes were released (default routing restored for them).",
        "backpressure_detections": "Branch nodes added to the back-pressure list.",
        "stop_signals": "Stop signals sent upstream over the network links (full queues).",
        "data_source_stops": "Times the full source queue paused the data source.",
        "data_source_paused_s": "Simulated time the data source was paused (s).",
        "credit_messages": "Credit grants sent upstream (credit flow control).",
        "max_queue_use_share": "Peak queue use (queued / capacity) over the branch nodes.",
        "source_blocked_s": "Simulated time the source's consumer waited on flow control "
        "(credits or resume) for its head packet (s).",
        "completed_fraction": "[series, every sample_interval_s] share of the total volume "
        "counted at the sink by that time (paper 003 Figs. 7-8).",
    }

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        params = super().check_params(params)
        lists = [k for k, s in self.param_schema.items() if s["type"] == "array"]
        lengths = {k: len(params[k]) for k in lists}
        if len(set(lengths.values())) > 1:
            # Name the lists that disagree with the most common length.
            common = max(set(lengths.values()), key=list(lengths.values()).count)
            odd = ", ".join(f"{self.name}_{k}" for k, n in lengths.items() if n != common)
            raise ValueError(
                f"{odd}: per-branch lists have lengths {lengths}; allowed: one value per "
                f"branch in every list ({common} here)"
            )
        if params["alpha"] + params["beta"] > 1 + 1e-12:
            raise ValueError(
                f"{self.name}_beta: alpha {params['alpha']} + beta {params['beta']} > 1; "
                f"allowed: alpha + beta <= 1 (bandwidth weight 1 - alpha - beta >= 0)"
            )
        if params["recovery_queue_share"] >= params["backpressure_queue_share"]:
            raise ValueError(
                f"{self.name}_recovery_queue_share: {params['recovery_queue_share']} is not "
                f"below backpressure_queue_share {params['backpressure_queue_share']}; "
                f"allowed: a recovery level below the back-pressure level"
            )
        return params

    def input_packets(self, point: ModelPoint, params: dict[str, Any]) -> pd.DataFrame:
        """The dataset's ``packets`` table, or ``synthetic_packets`` without a dataset."""
        if point.dataset_dir is not None:
            packets = load_packets(point.dataset_dir)
        else:
            rng = np.random.default_rng([point.seed, 3])
            packets = synthetic_packets(params["synthetic_total_mb"], rng)
        total_mb = params.get("total_mb")
        if total_mb is not None:
            volume = packets["size_mb"].cumsum().to_numpy()
            if volume[-1] + 1e-9 < total_mb:
                raise ValueError(
                    f"{self.name}_total_mb: {total_mb} MB but the input has {volume[-1]:g} MB; "
                    "allowed: at most the dataset's volume (raise packets_total_mb)"
                )
            packets = packets.iloc[: int(np.searchsorted(volume, total_mb - 1e-9) + 1)]
        return packets

    def check_packets(self, packets: pd.DataFrame, params: dict[str, Any]) -> None:
        """A non-empty table whose tags name branches of the topology."""
        branches = len(params["branch_service_rate_mb_per_s"])
        missing = [c for c in PACKET_COLUMNS if c not in packets.columns]
        if missing or len(packets) == 0:
            raise ValueError(
                f"packets: {len(packets)} rows, missing columns {missing}; allowed: >= 1 "
                f"packet with columns {list(PACKET_COLUMNS)}"
            )
        if packets["branch"].min() < 0 or packets["branch"].max() >= branches:
            raise ValueError(
                f"{self.name}_branch_service_rate_mb_per_s: packets name branches "
                f"{sorted(packets['branch'].unique().tolist())} but the topology has "
                f"{branches}; allowed: packets_branches = the length of the per-branch lists"
            )

    def run(self, point: ModelPoint) -> ModelResult:
        params = self.check_params(point.params)
        self.check_strategy(point.strategy)
        return self.simulate(self.input_packets(point, params), point.strategy, params, point.seed)

    def simulate(
        self, packets: pd.DataFrame, strategy: str, params: dict[str, Any], seed: int = 0
    ) -> ModelResult:
        """Run one strategy on a ``packets`` table (columns ``PACKET_COLUMNS``, arrival
        order, branches within the topology); ``params`` as returned by ``check_params``."""
        self.check_strategy(strategy)
        self.check_packets(packets, params)
        sim = _Network(params, strategy, packets, np.random.default_rng(seed))
        sim.run()
        return self._result(sim, params)

    def _result(self, sim: _Network, params: dict[str, Any]) -> ModelResult:
        latency = sim.counted_s - sim.created_s
        completion = float(np.max(sim.counted_s))
        total_mb = float(sim.size_mb.sum())
        processed_mb = np.array([node.sent_mb for node in sim.branches])
        imbalance = float(processed_mb.max() / processed_mb.mean() - 1.0)
        times, fraction = completed_fraction_series(
            sim.counted_s, sim.size_mb, params["sample_interval_s"]
        )
        p50, p95, p99 = np.percentile(latency, [50, 95, 99])
        plan_ms = 1000.0 * float(np.mean(sim.decision_times_s)) if sim.decision_times_s else 0.0
        metrics = {
            "plan_time_ms": plan_ms,
            "latency_p50_s": p50,
            "latency_p95_s": p95,
            "latency_p99_s": p99,
            "latency_mean_s": float(latency.mean()),
            "throughput_mb_per_s": total_mb / completion if completion > 0 else 0.0,
            "imbalance_max_over_mean": imbalance,
            "completion_time_s": completion,
            "total_mb": total_mb,
            "migrated_packets": sim.migrated_packets,
            "migrated_mb": sim.migrated_mb,
            "migrations": sim.migrations,
            "recoveries": sim.recoveries,
            "backpressure_detections": sim.detections,
            "stop_signals": sim.stop_signals,
            "data_source_stops": sim.data_source_stops,
            "credit_messages": sim.credit_messages,
            "max_queue_use_share": max(node.queue.peak_use_share for node in sim.branches),
            "source_blocked_s": sim.source.blocked_s,
            "data_source_paused_s": sim.source.inputs[0].stopped_total_s,
        }
        results = combine_partials(sim.sums, sim.counts, sim.maxima)
        info = {
            "strategy": sim.strategy,
            "flow_control": sim.network_mode,
            "packets": sim.n,
            "branch_processed_mb": processed_mb.tolist(),
            "peak_queue_use_share": {
                node.name: node.queue.peak_use_share
                for node in (sim.source, *sim.branches, sim.sink)
            },
            "tag_results": {str(tag): r for tag, r in results.items()},
            "segments": len(sim.segments),
            "segments_head": sim.segments[:50],
            "bookkeeping_consistent": expand_segments(sim.segments) == sim.off_home,
            "migration_log": sim.migration_log,
            "decisions": len(sim.decision_times_s),
        }
        return ModelResult(
            metrics=metrics,
            series={"completed_fraction": fraction},
            time_s=times,
            events=sim.events,
            info=info,
        )

    def figure(self, results: list[tuple[ModelPoint, ModelResult]]) -> Any:
        """Completed fraction vs time per strategy at 1 GB (paper 003 Fig. 7, when that
        volume was run) and at the largest volume (Fig. 8); with several totals also the
        completion time vs total volume (Table 2)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        totals = sorted({r.metrics["total_mb"] for _, r in results})
        # Fig. 7 is 1 GB, Fig. 8 the largest volume (5 GB in the paper).
        shown = [t for t in totals[:-1] if t == FIG7_TOTAL_MB] + [totals[-1]]
        panels = len(shown) + (1 if len(totals) > 1 else 0)
        fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.2), squeeze=False)
        for ax, total in zip(axes[0], shown, strict=False):
            for point, result in results:
                if result.metrics["total_mb"] != total or point.repetition != 0:
                    continue
                ax.plot(
                    [0.0, *result.time_s],
                    [0.0, *(100 * f for f in result.series["completed_fraction"])],
                    marker="o",
                    markersize=3,
                    label=point.strategy,
                )
            ax.set_xlabel("time (simulated s)")
            ax.set_ylabel("completed volume (%)")
            ax.set_title(f"completed fraction, {total:g} MB")
            ax.legend()
            ax.grid(alpha=0.3)
        if len(totals) > 1:
            ax = axes[0][-1]
            rows = pd.DataFrame(
                [
                    {
                        "strategy": p.strategy,
                        "total_mb": r.metrics["total_mb"],
                        "completion_time_s": r.metrics["completion_time_s"],
                    }
                    for p, r in results
                ]
            )
            means = rows.groupby(["strategy", "total_mb"])["completion_time_s"].mean()
            for strategy in means.index.get_level_values(0).unique():
                series = means.loc[strategy]
                ax.plot(series.index, series.to_numpy(), marker="o", label=strategy)
            ax.set_xlabel("total volume (MB)")
            ax.set_ylabel("completion time (simulated s)")
            ax.set_title("completion time vs volume")
            ax.legend()
            ax.grid(alpha=0.3)
        fig.tight_layout()
        return fig
