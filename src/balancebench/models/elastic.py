"""``elastic``: elastic reconfiguration and BalanceLoad of paper 001 (§4, experiment §5.2).

Paper 001 ("流水行云", Chinese Journal of Electronics 2015) runs a stateful sub-query on a
sub-cluster whose tasks own *buckets* of the key space (bucket map proxy ``BMP``). A
master periodically collects each task's CPU utilisation ``U_i`` and each bucket's rate
``T_b``; when the mean ``U_av`` leaves ``[LUT, UUT]`` it computes a new task count
(provision, or offload-then-decommission), and when the standard deviation ``U_sd``
exceeds ``UIT`` it runs **BalanceLoad** (protocol 2). Buckets change owner through one of
two reconfiguration protocols: *window recreation* (protocol 1) or *state recreation*
(§4.1.2). §5.2 feeds 15 nodes at 150,000 tuples/s with phone numbers whose normal
distribution moves (mean 2000 -> 8000; sigma 100 -> 25 in 25 steps) and plots the mean
and standard deviation of utilisation over time with and without load balancing (Fig. 8).

What this model is
------------------
A **time-stepped** model at the statistics period ``period_s``, driven by the
``phone_stream`` dataset (table ``events``; only ``tuple_id`` and ``key`` are read):

- keys go to ``B`` buckets with ``routing.BucketMap`` (Spark-identical Murmur3,
  ``b = H(k) mod B``); the initial map deals buckets round robin (``b mod n``);
- **[interpreted]** the stream is iid within a schedule step (that is how the generator
  draws it), so each step's bucket shares are estimated from *all* its tuples; period
  ``j`` mixes the shares of the steps it overlaps (steps last ``duration_s / steps``)
  and draws per-bucket arrivals ``~ Poisson(share_b * rate * period_s)``: the stream
  sets the key distribution, ``input_rate_tuples_per_s`` the scale (a scaled-down stream
  would otherwise add sampling noise far above the real one);
- ``T_b`` = arrivals / period; node utilisation ``U_i = sum_{b on i} T_b / capacity``
  (**[interpreted]** *offered* utilisation: equal to CPU utilisation while <= 1, above 1
  for an overloaded node; the statistics and the controller both use it). Default
  capacity 14,286 tuples/s per node so that 150,000 tuples/s on 15 nodes gives
  ``U_av = 0.70 = TUT`` at the start;
- every node is a fluid queue of capacity ``capacity * period_s`` tuples per period
  (backlog carried over); throughput = input tuples processed per simulated second.
  **Latency**: each (node, period) is an M/M/1 node (service rate = capacity, arrival
  rate = its load) whose sojourn ``Exp(capacity - load)`` (rate floored at 1% of the
  capacity when overloaded) is shifted by the mean fluid backlog wait
  ``(Q_start + Q_end) / 2 / capacity``; percentiles are those of the mixture of these
  components weighted by tuples processed (plus the state protocol's buffered tuples,
  shifted by half the transfer time).

Controller (``elastic_scaling``, ``elastic_balanceload``) at the end of every period
except the last, on that period's ``T_b``:

- **new configuration [reconstructed]**: if ``U_av > UUT or U_av < LUT`` (the paper's
  protocol 2 prints ``&&``, which can never hold): ``n = ceil(old * U_av / TUT)``,
  clamped to ``[min_nodes, max_nodes]``;
- **provision**: ``elastic_balanceload`` adds empty nodes and lets BalanceLoad fill
  them; ``elastic_scaling`` (**[interpreted]** load-oblivious) moves buckets from the
  nodes holding the most buckets to the new nodes until bucket counts are even;
- **offload-then-decommission**: the ``old - n`` least loaded nodes **[interpreted]**
  give away all their buckets first (``elastic_balanceload``: highest ``T_b`` first, each
  to the least loaded remaining node; ``elastic_scaling``: to the node with the fewest
  buckets), then leave (a leaving node still drains its backlog and its window-protocol
  work, outside the utilisation statistics);
- ``elastic_balanceload`` only: if ``U_sd > UIT`` after that, **BalanceLoad**
  (``strategies.balanceload.balance_load``, the same greedy as the ``balanceload``
  strategy; stop when a move improves ``U_sd`` by less than ``min_improvement * U_av``).
  **[interpreted]** a bucket whose previous reconfiguration is still running is not
  moved again by BalanceLoad (offload may).
- ``elastic_static``: ``initial_nodes`` nodes, hashed buckets, no controller.

Reconfiguration protocols, per moved bucket at ``startTS`` = the decision time, over a
windowed per-number count with sliding windows ``[k*slide, k*slide + window)``:

- ``window``: ``switchTS`` = first window start ``>= startTS``, ``endTS = switchTS - slide
  + window`` (end of the last window the old task owns). Tuples of the bucket go to both
  tasks in ``[startTS, endTS)`` (**duplicated tuples**); the old task processes them up to
  ``endTS`` (extra load on it), the new one from ``switchTS``; duration ``endTS -
  startTS``.
- ``state``: the old task checkpoints the bucket's open windows at ``startTS`` (**serialized
  state** = tuples of the bucket in the windows still open, ``[oldest open window start,
  startTS)``), sends it in ``transfer_latency_s + tuples * tuple_bytes / bandwidth``; the new
  task **buffers** the bucket's tuples until it arrives (duration = that transfer).

Rate-based model: those counts are ``T_b`` times the lengths above. ``simulate_windowed_count``
is the tuple-level version (splitter with ``BMP`` status/endTS, tasks with ownership old/new,
buffering, checkpoint delivery, window emission at the watermark) used to check that both
protocols lose and duplicate no result tuple and that the counts above are what it counts.

Left out: the collector's timestamp merge and dummy tuples (order is given here), the
communication share of CPU, the paper's first "uniform" phase of Fig. 8(a) (the
``phone_stream`` generator has no uniform phase), the JVM/worker start-up time of a new
node, in-flight tuples during the control round trip, Cartesian-product bucket maps,
heterogeneous nodes. The paper gives no threshold values: ``TUT=0.7, UUT=0.9, LUT=0.5,
UIT=0.05`` **[interpreted]**; nor the query's window: ``window_s=10, slide_s=2``
**[interpreted]**.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from balancebench.generators.common import load_manifest, read_table
from balancebench.generators.phone_stream import schedule, step_of
from balancebench.models.base import Model, ModelPoint, ModelResult
from balancebench.routing import BucketMap
from balancebench.schema import integer_spec, number_spec
from balancebench.strategies.balanceload import balance_load

STRATEGIES = ("elastic_static", "elastic_scaling", "elastic_balanceload")
PROTOCOLS = ("window", "state")
#: Paper 001 §5: 10,000 distinct phone numbers.
PHONE_KEYS = 10_000
#: The paper's two §5.2 experiments, for the built-in sample (used when no dataset is given).
SAMPLE_SCHEDULES: dict[str, dict[str, float]] = {
    "mean_shift": {
        "phone_stream_mean_from": 2000.0,
        "phone_stream_mean_to": 8000.0,
        "phone_stream_sigma_from": 100.0,
        "phone_stream_sigma_to": 100.0,
        "phone_stream_steps": 4,
        "phone_stream_cycles": 2,
    },
    "sigma_shrink": {
        "phone_stream_mean_from": 5000.0,
        "phone_stream_mean_to": 5000.0,
        "phone_stream_sigma_from": 100.0,
        "phone_stream_sigma_to": 25.0,
        "phone_stream_steps": 25,
        "phone_stream_cycles": 1,
    },
}
#: BalanceLoad's move budget per call (the paper has none; this only guards a loop).
BALANCE_MAX_MOVES = 100_000
#: Floor of the M/M/1 sojourn rate, as a share of the capacity (overloaded nodes).
MIN_SOJOURN_RATE_SHARE = 0.01
_EPS = 1e-9


# ---- input -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PhoneInput:
    """The phone stream as the model uses it: keys in arrival order and their schedule step."""

    keys: np.ndarray
    step: np.ndarray
    total_steps: int
    mu: np.ndarray  # per step of the whole stream (cycles included)
    sigma: np.ndarray
    experiment: str  # "mean_shift", "sigma_shrink" or "constant"


def _experiment_of(schedule_params: dict[str, Any]) -> str:
    if schedule_params["phone_stream_sigma_from"] != schedule_params["phone_stream_sigma_to"]:
        return "sigma_shrink"
    if schedule_params["phone_stream_mean_from"] != schedule_params["phone_stream_mean_to"]:
        return "mean_shift"
    return "constant"


def _per_stream_step(schedule_params: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, int]:
    mu, sigma = schedule(schedule_params)
    total = int(schedule_params["phone_stream_steps"] * schedule_params["phone_stream_cycles"])
    pos = np.arange(total) % len(mu)
    return mu[pos], sigma[pos], total


def sample_phone_stream(
    schedule_name: str, n_tuples: int, rng: np.random.Generator, n_keys: int = PHONE_KEYS
) -> PhoneInput:
    """A small phone stream drawn like the ``phone_stream`` generator (same schedule, same
    rounding and clipping), for runs without a dataset (unit tests, quick looks)."""
    params = dict(SAMPLE_SCHEDULES[schedule_name])
    mu, sigma, total = _per_stream_step(params)
    ids = np.arange(n_tuples, dtype=np.int64)
    step = step_of(ids, n_tuples, total)
    draws = rng.normal(mu[step], sigma[step])
    keys = np.clip(np.rint(draws), 0, n_keys - 1).astype(np.int64)
    return PhoneInput(keys, step, total, mu, sigma, _experiment_of(params))


def read_phone_stream(dataset_dir: str) -> PhoneInput:
    """The ``events`` table of a generated ``phone_stream`` dataset (null rows dropped)."""
    manifest = load_manifest(dataset_dir)
    if manifest.generator != "phone_stream":
        raise ValueError(
            f"dataset_dir: {dataset_dir} holds a {manifest.generator!r} dataset; "
            "allowed: a phone_stream dataset"
        )
    table = read_table(dataset_dir, manifest, "events", ["tuple_id", "key"])
    ok = np.asarray(table.column("key").is_valid()) & np.asarray(
        table.column("tuple_id").is_valid()
    )
    ids = table.column("tuple_id").to_numpy(zero_copy_only=False)[ok].astype(np.int64)
    keys = table.column("key").to_numpy(zero_copy_only=False)[ok].astype(np.int64)
    p = manifest.params
    mu, sigma, total = _per_stream_step(p)
    order = np.argsort(ids, kind="stable")
    ids, keys = ids[order], keys[order]
    step = np.clip(step_of(ids, int(p["n_tuples"]), total), 0, total - 1)
    return PhoneInput(keys, step, total, mu, sigma, _experiment_of(p))


def step_bucket_shares(stream: PhoneInput, n_buckets: int) -> np.ndarray:
    """``(steps, B)``: share of each bucket in each schedule step's tuples (rows sum to 1)."""
    bucket = BucketMap.default(1, n_buckets).buckets(stream.keys).astype(np.int64)
    counts = np.bincount(
        stream.step * n_buckets + bucket, minlength=stream.total_steps * n_buckets
    ).reshape(stream.total_steps, n_buckets)
    totals = counts.sum(axis=1, keepdims=True).astype(np.float64)
    # A step without tuples (a corrupted dataset) falls back to even shares.
    return np.where(totals > 0, counts / np.maximum(totals, 1.0), 1.0 / n_buckets)


# ---- the paper's rules as pure functions ----------------------------------------------


def new_node_count(
    n_old: int,
    u_av: float,
    *,
    tut: float,
    lut: float,
    uut: float,
    min_nodes: int = 1,
    max_nodes: int = 1_000_000,
) -> int:
    """Protocol 2's ComputeNewConfiguration **[reconstructed]**: ``ceil(old * U_av / TUT)``
    when ``U_av`` is outside ``[LUT, UUT]``, else ``old``; clamped to the node range."""
    if lut <= u_av <= uut:
        return n_old
    n = math.ceil(n_old * u_av / tut - _EPS)
    return int(min(max(n, min_nodes), max_nodes))


def window_protocol_times(start_s: float, window_s: float, slide_s: float) -> tuple[float, float]:
    """``(switchTS, endTS)`` of window recreation at ``startTS``: the new task owns the
    windows starting at or after ``switchTS``; the old one finishes the earlier ones, whose
    last ends at ``endTS = switchTS - slide + window``."""
    switch = math.ceil(start_s / slide_s - _EPS) * slide_s
    return switch, switch - slide_s + window_s


def open_window_start(start_s: float, window_s: float, slide_s: float) -> float:
    """Start of the oldest window still open at ``start_s`` (the state a checkpoint holds
    covers ``[this, start_s)``)."""
    m = round(window_s / slide_s)
    return (math.floor(start_s / slide_s + _EPS) - m + 1) * slide_s


def state_transfer_s(
    state_tuples: float, tuple_bytes: float, bandwidth_mb_per_s: float, latency_s: float
) -> float:
    """Time to ship a serialized checkpoint: latency + size / bandwidth."""
    return latency_s + state_tuples * tuple_bytes / (bandwidth_mb_per_s * 1e6)


def provision_by_count(owner: np.ndarray, active: np.ndarray, new_nodes: np.ndarray) -> np.ndarray:
    """Load-oblivious provisioning: move buckets from the nodes holding the most buckets
    (their highest-numbered bucket first) to the new nodes until counts differ by <= 1."""
    owner = owner.copy()
    nodes = np.r_[np.flatnonzero(active), new_nodes].astype(np.int64)
    nodes = np.unique(nodes)
    count = {int(i): int(np.count_nonzero(owner == i)) for i in nodes}
    for new in new_nodes.tolist():
        target = len(owner) // len(nodes)
        while count[new] < target:
            donor = max((i for i in nodes.tolist() if i != new), key=lambda i: (count[i], -i))
            if count[donor] <= count[new] + 1:
                break
            b = int(np.flatnonzero(owner == donor)[-1])
            owner[b] = new
            count[donor] -= 1
            count[new] += 1
    return owner


def offload_buckets(
    owner: np.ndarray, rate: np.ndarray, removed: np.ndarray, keep: np.ndarray, by: str
) -> np.ndarray:
    """Offload every bucket of the ``removed`` nodes onto the ``keep`` nodes.

    ``by="load"``: highest rate first, each to the least loaded kept node (the greedy move
    of BalanceLoad); ``by="count"``: each to the kept node with the fewest buckets."""
    owner = owner.copy()
    keep = np.asarray(keep, dtype=np.int64)
    size = int(max(owner.max(initial=0), keep.max(initial=0))) + 1
    load = np.bincount(owner, weights=rate, minlength=size)[keep]
    count = np.bincount(owner, minlength=size)[keep].astype(np.int64)
    moving = np.flatnonzero(np.isin(owner, removed))
    if by == "load":
        moving = moving[np.argsort(-rate[moving], kind="stable")]
    for b in moving.tolist():
        i = int(np.argmin(load)) if by == "load" else int(np.argmin(count))
        owner[b] = keep[i]
        load[i] += rate[b]
        count[i] += 1
    return owner


def mixture_quantiles(
    weights: np.ndarray, delays_s: np.ndarray, rates_per_s: np.ndarray, quantiles: Sequence[float]
) -> list[float]:
    """Quantiles of a mixture of shifted exponentials ``delay + Exp(rate)`` (bisection)."""
    w = np.asarray(weights, dtype=np.float64)
    keep = w > 0
    if not keep.any():
        return [0.0 for _ in quantiles]
    w, d, r = w[keep] / w[keep].sum(), delays_s[keep], rates_per_s[keep]
    q = np.asarray(quantiles, dtype=np.float64)[:, None]
    lo = np.zeros((len(q), 1))
    hi = np.full((len(q), 1), float(d.max() + 60.0 / r.min()))
    for _ in range(80):
        mid = (lo + hi) / 2
        cdf = (w * -np.expm1(-r * np.maximum(mid - d, 0.0))).sum(axis=1, keepdims=True)
        below = cdf < q
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return [float(x) for x in hi[:, 0]]


# ---- the time-stepped model ------------------------------------------------------------


@dataclass(frozen=True)
class ElasticConfig:
    """The run's settings (from the model params)."""

    strategy: str = "elastic_balanceload"
    protocol: str = "window"
    initial_nodes: int = 15
    min_nodes: int = 1
    max_nodes: int = 60
    input_rate_tuples_per_s: float = 150_000.0
    node_capacity_tuples_per_s: float = 14_286.0
    duration_s: float = 600.0
    period_s: float = 5.0
    tut: float = 0.7
    uut: float = 0.9
    lut: float = 0.5
    uit: float = 0.05
    min_improvement: float = 1e-3
    buckets: int = 1024
    window_s: float = 10.0
    slide_s: float = 2.0
    transfer_latency_s: float = 0.05
    bandwidth_mb_per_s: float = 1250.0
    tuple_bytes: float = 64.0
    rate_step_at_s: float = 300.0
    rate_step_factor: float = 1.0

    @classmethod
    def from_params(cls, strategy: str, params: dict[str, Any]) -> ElasticConfig:
        names = set(cls.__dataclass_fields__) - {"strategy"}
        return cls(strategy=strategy, **{k: params[k] for k in names if k in params})


@dataclass
class _Reconfig:
    bucket: int
    old: int
    new: int
    start_s: float
    switch_s: float
    end_s: float  # window: endTS; state: checkpoint arrival
    until_s: float


@dataclass
class ElasticRun:
    """What ``simulate_elastic`` produced (per-period series and run totals)."""

    time_s: list[float] = field(default_factory=list)
    utilization_mean: list[float] = field(default_factory=list)
    utilization_std: list[float] = field(default_factory=list)
    utilization_max: list[float] = field(default_factory=list)
    imbalance: list[float] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)
    moved_buckets: list[int] = field(default_factory=list)
    backlog_tuples: list[float] = field(default_factory=list)
    plan_times_ms: list[float] = field(default_factory=list)
    reconfigurations: list[dict[str, Any]] = field(default_factory=list)
    duplicated_tuples: float = 0.0
    buffered_tuples: float = 0.0
    serialized_state_tuples: float = 0.0
    durations_s: list[float] = field(default_factory=list)
    input_tuples: float = 0.0
    processed_input_tuples: float = 0.0
    latency_s: dict[str, float] = field(default_factory=dict)
    events: int = 0
    bucket_counts_final: list[int] = field(default_factory=list)


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def simulate_elastic(
    shares: np.ndarray, config: ElasticConfig, rng: np.random.Generator
) -> ElasticRun:
    """Run the time-stepped model on ``shares`` (``(steps, B)`` bucket shares per step)."""
    c = config
    n_periods = round(c.duration_s / c.period_s)
    dt = c.period_s
    cap = c.node_capacity_tuples_per_s
    n_steps, n_buckets = shares.shape
    step_len = c.duration_s / n_steps
    pool = c.max_nodes
    owner = BucketMap.default(c.initial_nodes, n_buckets).owner.astype(np.int64)
    active = np.zeros(pool, dtype=bool)
    active[: c.initial_nodes] = True
    backlog = np.zeros(pool)
    records: list[_Reconfig] = []
    out = ElasticRun()
    lat_w: list[np.ndarray] = []
    lat_d: list[np.ndarray] = []
    lat_r: list[np.ndarray] = []
    overhead_total = 0.0
    processed_total = 0.0
    moves_total = 0
    for j in range(n_periods):
        t0, t1 = j * dt, (j + 1) * dt
        first, last = int(t0 // step_len), min(int(math.ceil(t1 / step_len)), n_steps)
        weights = np.array(
            [_overlap(t0, t1, k * step_len, (k + 1) * step_len) for k in range(first, last)]
        )
        share = weights @ shares[first:last] / max(weights.sum(), _EPS)
        rate = c.input_rate_tuples_per_s * (
            1.0 + (c.rate_step_factor - 1.0) * _overlap(t0, t1, c.rate_step_at_s, math.inf) / dt
        )
        arrivals = rng.poisson(share * rate * dt).astype(np.float64)
        out.input_tuples += float(arrivals.sum())
        t_b = arrivals / dt
        base = np.bincount(owner, weights=t_b, minlength=pool)
        load = base.copy()
        overhead = np.zeros(pool)  # tuples processed twice (window protocol)
        buffered_by_node = np.zeros(pool)
        buffer_wait = np.zeros(pool)
        for r in records:
            tb = t_b[r.bucket]
            if c.protocol == "window":
                both = _overlap(t0, t1, r.start_s, r.end_s)
                out.duplicated_tuples += tb * both
                load[r.old] += tb * both / dt
                load[r.new] -= tb * _overlap(t0, t1, r.start_s, r.switch_s) / dt
                overhead[r.old] += tb * _overlap(t0, t1, r.switch_s, r.end_s)
            else:
                held = tb * _overlap(t0, t1, r.start_s, r.end_s)
                out.buffered_tuples += held
                buffered_by_node[r.new] += held
                buffer_wait[r.new] = max(buffer_wait[r.new], (r.end_s - r.start_s) / 2)
        records = [r for r in records if r.until_s > t1]
        # Fluid queues: capacity * dt tuples of work per period, backlog carried over.
        work = load * dt
        q_start = backlog
        processed = np.minimum(q_start + work, cap * dt)
        backlog = q_start + work - processed
        processed_total += float(processed.sum())
        overhead_total += float(overhead.sum())
        # Latency components (M/M/1 sojourn shifted by the fluid backlog wait).
        rate_mm1 = np.maximum(cap - load, MIN_SOJOURN_RATE_SHARE * cap)
        wait = (q_start + backlog) / 2 / cap
        # Weights are input tuples: a window-protocol duplicate is extra work, not another
        # tuple; a buffered tuple (state protocol) is one of the new node's processed tuples
        # that waits longer, counted once.
        held = np.minimum(buffered_by_node, processed)
        lat_w += [np.maximum(processed - overhead - held, 0.0), held]
        lat_d += [wait, wait + buffer_wait]
        lat_r += [rate_mm1, rate_mm1]
        # Statistics over the active nodes (offered utilisation).
        u = load[active] / cap
        u_mean = float(u.mean())
        out.time_s.append(t1)
        out.utilization_mean.append(u_mean)
        out.utilization_std.append(float(u.std()))
        out.utilization_max.append(float(u.max()))
        out.imbalance.append(float(u.max() / u_mean - 1.0) if u_mean > 0 else 0.0)
        out.nodes.append(int(active.sum()))
        out.backlog_tuples.append(float(backlog[active].sum()))
        moved_now = 0
        if c.strategy != "elastic_static" and j < n_periods - 1:
            started = time.perf_counter()
            new_owner, new_active, action = _control(c, owner, active, t_b, records, t1)
            out.plan_times_ms.append((time.perf_counter() - started) * 1e3)
            changed = np.flatnonzero(new_owner != owner)
            moved_now = len(changed)
            if moved_now or action["nodes_after"] != action["nodes_before"]:
                durations = []
                for b in changed.tolist():
                    rec = _start_reconfig(c, b, int(owner[b]), int(new_owner[b]), t_b[b], t1)
                    if c.protocol == "state":
                        out.serialized_state_tuples += rec.pop("state_tuples")
                    records.append(rec["record"])
                    durations.append(rec["record"].until_s - t1)
                action["moved_buckets"] = moved_now
                action["duration_s"] = max(durations, default=0.0)
                out.durations_s.append(action["duration_s"])
                out.reconfigurations.append(action)
            owner, active = new_owner, new_active
        moves_total += moved_now
        out.moved_buckets.append(moved_now)
    out.processed_input_tuples = max(processed_total - overhead_total, 0.0)
    w, d, r = np.concatenate(lat_w), np.concatenate(lat_d), np.concatenate(lat_r)
    p50, p95, p99 = mixture_quantiles(w, d, r, (0.5, 0.95, 0.99))
    out.latency_s = {"p50": p50, "p95": p95, "p99": p99}
    # What the model computes: one rate update per (period, bucket), plus the moves and
    # reconfigurations (tuples are not simulated one by one in the time-stepped model).
    out.events = n_periods * n_buckets + moves_total + len(out.reconfigurations)
    out.bucket_counts_final = np.bincount(owner, minlength=pool)[active].tolist()
    return out


def _start_reconfig(
    c: ElasticConfig, bucket: int, old: int, new: int, t_b: float, start_s: float
) -> dict[str, Any]:
    if c.protocol == "window":
        switch, end = window_protocol_times(start_s, c.window_s, c.slide_s)
        return {"record": _Reconfig(bucket, old, new, start_s, switch, end, end)}
    state_tuples = t_b * (start_s - open_window_start(start_s, c.window_s, c.slide_s))
    arrive = start_s + state_transfer_s(
        state_tuples, c.tuple_bytes, c.bandwidth_mb_per_s, c.transfer_latency_s
    )
    return {
        "record": _Reconfig(bucket, old, new, start_s, start_s, arrive, arrive),
        "state_tuples": state_tuples,
    }


def _control(
    c: ElasticConfig,
    owner: np.ndarray,
    active: np.ndarray,
    t_b: np.ndarray,
    records: list[_Reconfig],
    now_s: float,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Protocol 2 on one period's ``T_b``: new configuration, then BalanceLoad."""
    pool = len(active)
    cap = c.node_capacity_tuples_per_s
    base = np.bincount(owner, weights=t_b, minlength=pool)
    act = np.flatnonzero(active)
    u = base[act] / cap
    u_av = float(u.mean())
    n_old = len(act)
    n_new = new_node_count(
        n_old, u_av, tut=c.tut, lut=c.lut, uut=c.uut, min_nodes=c.min_nodes, max_nodes=c.max_nodes
    )
    new_owner, new_active = owner.copy(), active.copy()
    kind = "none"
    if n_new > n_old:
        kind = "provision"
        added = np.flatnonzero(~active)[: n_new - n_old]
        new_active[added] = True
        if c.strategy == "elastic_scaling":
            new_owner = provision_by_count(new_owner, active, added)
    elif n_new < n_old:
        kind = "decommission"
        removed = act[np.argsort(u, kind="stable")[: n_old - n_new]]
        new_active[removed] = False
        by = "load" if c.strategy == "elastic_balanceload" else "count"
        new_owner = offload_buckets(new_owner, t_b, removed, np.flatnonzero(new_active), by)
    u_sd = float("nan")
    balanced = 0
    if c.strategy == "elastic_balanceload":
        act2 = np.flatnonzero(new_active)
        index_of = np.full(pool, -1, dtype=np.int64)
        index_of[act2] = np.arange(len(act2))
        compact = index_of[new_owner]
        rate_u = t_b / cap
        u2 = np.bincount(compact, weights=rate_u, minlength=len(act2))
        u_sd = float(u2.std())
        if u_sd > c.uit:
            on_node = np.zeros((len(t_b), len(act2)))
            on_node[np.arange(len(t_b)), compact] = rate_u
            busy = np.zeros(len(t_b), dtype=bool)
            for r in records:
                busy[r.bucket] |= r.until_s > now_s
            threshold = c.min_improvement * max(float(u2.mean()), 1e-300)
            moved_owner, _, moves = balance_load(
                rate_u, on_node, compact, u2, threshold, BALANCE_MAX_MOVES, movable=~busy
            )
            new_owner = act2[moved_owner]
            balanced = len(moves)
            if kind == "none" and balanced:
                kind = "balance"
    return (
        new_owner,
        new_active,
        {
            "time_s": now_s,
            "kind": kind,
            "nodes_before": n_old,
            "nodes_after": int(new_active.sum()),
            "u_av": u_av,
            "u_sd_before_balance": u_sd,
            "balance_moves": balanced,
        },
    )


# ---- tuple-level protocol simulation ---------------------------------------------------

_TICKS_PER_S = 1_000_000
_FAR = 1 << 62


@dataclass
class _Hold:
    """One task's hold on one bucket: the tuples it accepts and the windows it emits."""

    accept_from: int = -_FAR  # tick, inclusive
    accept_to: int = _FAR  # tick, exclusive
    emit_from: int = -_FAR  # window index, inclusive
    emit_to: int = _FAR  # window index, exclusive
    counts: dict[int, Counter] = field(default_factory=lambda: defaultdict(Counter))
    per_slot: Counter = field(default_factory=Counter)  # tuples processed per slide slot
    buffering: bool = False
    buffer: list[tuple[int, int]] = field(default_factory=list)


@dataclass
class ProtocolRun:
    """Result of ``simulate_windowed_count``: the answer multiset and the protocol costs."""

    results: Counter  # (window index, key, count) -> multiplicity
    duplicated_tuples: int = 0
    buffered_tuples: int = 0
    serialized_state_tuples: int = 0
    serialized_state_entries: int = 0
    durations_s: list[float] = field(default_factory=list)
    deferred_moves: int = 0
    applied_moves: int = 0


def simulate_windowed_count(
    event_time_s: np.ndarray,
    keys: np.ndarray,
    initial_owner: np.ndarray,
    moves: Sequence[tuple[float, int, int]],
    *,
    window_s: float,
    slide_s: float,
    protocol: str,
    transfer_latency_s: float = 0.0,
    tuple_bytes: float = 64.0,
    bandwidth_mb_per_s: float = 1250.0,
) -> ProtocolRun:
    """Tuple-level run of a sliding-window count per number over a bucket map.

    ``initial_owner[b]`` is the task of bucket ``b`` (``BucketMap`` hashing of the keys);
    ``moves`` are ``(startTS, bucket, new task)`` commands. The splitter keeps ``BMP[b]``
    (owner, and for window recreation the ``endTS`` until which it sends to both tasks);
    tasks hold buckets with an accepted tuple range and an emitted window range (old task:
    tuples ``< endTS``, windows ``< switchTS``; new task: from ``switchTS``) or, for state
    recreation, checkpoint at ``startTS`` and buffer until the checkpoint arrives. A window
    is emitted when the watermark (the current tuple time) passes its end, by the task
    owning it, and never by a task still waiting for a checkpoint. A move of a bucket still
    being reconfigured waits until that ends. Times are integer microseconds inside.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol: {protocol!r}; allowed: {list(PROTOCOLS)}")
    slide = round(slide_s * _TICKS_PER_S)
    m = round(window_s / slide_s)
    ticks = np.rint(np.asarray(event_time_s, dtype=np.float64) * _TICKS_PER_S).astype(np.int64)
    order = np.argsort(ticks, kind="stable")
    ticks, keys = ticks[order], np.asarray(keys, dtype=np.int64)[order]
    n_buckets = len(initial_owner)
    bucket_of = BucketMap.default(1, n_buckets).buckets(keys).astype(np.int64)
    owner = np.asarray(initial_owner, dtype=np.int64).copy()
    holds: dict[tuple[int, int], list[_Hold]] = {
        (int(owner[b]), b): [_Hold()] for b in range(n_buckets)
    }
    both_until = np.full(n_buckets, -_FAR, dtype=np.int64)  # window protocol: BMP endTS
    previous_owner = owner.copy()
    busy = np.zeros(n_buckets, dtype=bool)
    pending: dict[int, list[tuple[int, int]]] = defaultdict(list)
    run = ProtocolRun(Counter())
    events: list[tuple[int, int, str, Any]] = []
    seq = 0

    def push(tick: int, kind: str, payload: Any) -> None:
        nonlocal seq
        heapq.heappush(events, (tick, seq, kind, payload))
        seq += 1

    for start_s, b, new in moves:
        push(round(start_s * _TICKS_PER_S), "move", (int(b), int(new)))

    def add(hold: _Hold, tick: int, key: int) -> None:
        slot = tick // slide
        hold.per_slot[slot] += 1
        for k in range(slot - m + 1, slot + 1):
            hold.counts[k][key] += 1

    def emit(watermark: int) -> None:
        for (_task, _b), hs in list(holds.items()):
            for h in list(hs):
                if h.buffering:
                    continue
                for k in sorted(h.counts):
                    if (k + m) * slide > watermark:
                        break
                    window = h.counts.pop(k)
                    if h.emit_from <= k < h.emit_to:
                        for key, count in window.items():
                            run.results[(k, key, count)] += 1
                if h.accept_to <= watermark and not h.counts:
                    hs.remove(h)
            if not hs:
                del holds[(_task, _b)]

    def start_move(tick: int, b: int, new: int) -> None:
        if busy[b]:
            run.deferred_moves += 1
            pending[b].append((tick, new))
            return
        old = int(owner[b])
        if new == old:
            return
        run.applied_moves += 1
        old_hold = next(h for h in holds[(old, b)] if h.accept_to == _FAR)
        new_hold = _Hold()
        busy[b] = True
        previous_owner[b], owner[b] = old, new
        if protocol == "window":
            switch_k = -((-tick) // slide)
            end_tick = (switch_k - 1 + m) * slide
            old_hold.accept_to, old_hold.emit_to = end_tick, switch_k
            new_hold.accept_from, new_hold.emit_from = switch_k * slide, switch_k
            both_until[b] = end_tick
            run.durations_s.append((end_tick - tick) / _TICKS_PER_S)
            push(end_tick, "window_end", b)
        else:
            open_k = tick // slide - m + 1
            old_hold.accept_to, old_hold.emit_to = tick, open_k
            checkpoint = {k: old_hold.counts.pop(k) for k in list(old_hold.counts) if k >= open_k}
            state_tuples = sum(n for s, n in old_hold.per_slot.items() if s >= open_k)
            run.serialized_state_tuples += state_tuples
            run.serialized_state_entries += sum(len(v) for v in checkpoint.values())
            delay = state_transfer_s(
                state_tuples, tuple_bytes, bandwidth_mb_per_s, transfer_latency_s
            )
            arrive = tick + round(delay * _TICKS_PER_S)
            new_hold.emit_from, new_hold.buffering = open_k, True
            run.durations_s.append((arrive - tick) / _TICKS_PER_S)
            push(arrive, "checkpoint", (b, new_hold, checkpoint))
        holds.setdefault((new, b), []).append(new_hold)

    def finish(tick: int, b: int) -> None:
        busy[b] = False
        if pending[b]:
            _, new = pending[b].pop(0)
            start_move(tick, b, new)

    def advance(until: int) -> None:
        while events and events[0][0] <= until:
            tick, _, kind, payload = heapq.heappop(events)
            emit(tick)
            if kind == "move":
                start_move(tick, *payload)
            elif kind == "window_end":
                both_until[payload] = -_FAR
                emit(tick)
                finish(tick, payload)
            else:
                b, hold, checkpoint = payload
                for k, window in checkpoint.items():
                    hold.counts[k].update(window)
                hold.buffering = False
                for t, key in hold.buffer:
                    add(hold, t, key)
                hold.buffer.clear()
                emit(tick)
                finish(tick, b)
        emit(until)

    last_slot = None
    for tick, key, b in zip(ticks.tolist(), keys.tolist(), bucket_of.tolist(), strict=True):
        if (events and events[0][0] <= tick) or tick // slide != last_slot:
            advance(tick)
            last_slot = tick // slide
        dests = [int(owner[b])]
        if tick < both_until[b]:
            # Window recreation: the splitter sends to both tasks until endTS.
            dests = [int(previous_owner[b]), int(owner[b])]
            run.duplicated_tuples += 1
        for task in dests:
            for h in holds.get((task, b), []):
                if h.accept_from <= tick < h.accept_to:
                    if h.buffering:
                        h.buffer.append((tick, key))
                        run.buffered_tuples += 1
                    else:
                        add(h, tick, key)
    advance(_FAR)
    return run


def reference_windowed_count(
    event_time_s: np.ndarray, keys: np.ndarray, *, window_s: float, slide_s: float
) -> Counter:
    """The answer with no parallelism at all: ``(window index, key, count)`` multiset."""
    slide = round(slide_s * _TICKS_PER_S)
    m = round(window_s / slide_s)
    ticks = np.rint(np.asarray(event_time_s, dtype=np.float64) * _TICKS_PER_S).astype(np.int64)
    counts: Counter = Counter()
    for tick, key in zip(ticks.tolist(), np.asarray(keys).tolist(), strict=True):
        slot = tick // slide
        for k in range(slot - m + 1, slot + 1):
            counts[(k, int(key))] += 1
    return Counter((k, key, n) for (k, key), n in counts.items())


# ---- the model -------------------------------------------------------------------------


class ElasticModel(Model):
    """Paper 001's elastic sub-cluster: thresholds, reconfiguration protocols, BalanceLoad."""

    name = "elastic"
    reference = "paper 001 §4 (reconfiguration, load balancing protocol 2), §5.2 Fig. 8"
    strategies = STRATEGIES
    dataset = "phone_stream"
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "protocol": {
            "type": "string",
            "enum": list(PROTOCOLS),
            "default": "window",
            "title": "elastic: reconfiguration protocol",
            "description": "window = window recreation (protocol 1), state = state recreation "
            "(checkpoint, serialize, buffer).",
        },
        "initial_nodes": integer_spec(
            15,
            "elastic: initial nodes",
            "Nodes at the start (paper: 15).",
            minimum=1,
            maximum=10_000,
        ),
        "min_nodes": integer_spec(
            1,
            "elastic: min nodes",
            "Fewest nodes decommissioning may leave.",
            minimum=1,
            maximum=10_000,
        ),
        "max_nodes": integer_spec(
            60,
            "elastic: max nodes",
            "Most nodes provisioning may reach (paper's cluster: 60).",
            minimum=1,
            maximum=10_000,
        ),
        "input_rate_tuples_per_s": number_spec(
            150_000.0,
            "elastic: input rate (tuples/s)",
            "Input rate of the sub-cluster (paper: 150,000 tuples/s).",
            exclusiveMinimum=0,
            maximum=1e12,
        ),
        "node_capacity_tuples_per_s": number_spec(
            14_286.0,
            "elastic: node capacity (tuples/s)",
            "Tuples/s one node processes at 100% CPU; default = 150,000 / (15 x TUT), so "
            "U_av starts at TUT.",
            exclusiveMinimum=0,
            maximum=1e12,
        ),
        "duration_s": number_spec(
            600.0,
            "elastic: duration (s)",
            "Simulated time (paper: >= 10 min stable phase).",
            exclusiveMinimum=0,
            maximum=1e7,
        ),
        "period_s": number_spec(
            5.0,
            "elastic: statistics period (s)",
            "Period of the master's statistics and decisions; the model's time step.",
            exclusiveMinimum=0,
            maximum=1e6,
        ),
        "tut": number_spec(
            0.7,
            "elastic: TUT",
            "Target utilisation of the new-configuration rule [interpreted value].",
            exclusiveMinimum=0,
            maximum=10,
        ),
        "uut": number_spec(
            0.9,
            "elastic: UUT",
            "Upper utilisation threshold: provision above it [interpreted value].",
            exclusiveMinimum=0,
            maximum=10,
        ),
        "lut": number_spec(
            0.5,
            "elastic: LUT",
            "Lower utilisation threshold: decommission below it [interpreted value].",
            minimum=0,
            maximum=10,
        ),
        "uit": number_spec(
            0.05,
            "elastic: UIT",
            "Imbalance threshold on the std of utilisation: BalanceLoad above it "
            "[interpreted value].",
            minimum=0,
            maximum=10,
        ),
        "min_improvement": number_spec(
            1e-3,
            "elastic: BalanceLoad min improvement",
            "BalanceLoad stops when a move lowers U_sd by less than this share of U_av.",
            minimum=0,
            maximum=1,
        ),
        "buckets": integer_spec(
            1024,
            "elastic: buckets",
            "Buckets B of the bucket map proxy.",
            minimum=1,
            maximum=65_536,
        ),
        "window_s": number_spec(
            10.0,
            "elastic: window (s)",
            "Window length of the per-number count [interpreted value].",
            exclusiveMinimum=0,
            maximum=1e6,
        ),
        "slide_s": number_spec(
            2.0,
            "elastic: slide (s)",
            "Slide of the window (= window: tumbling); window must be a multiple.",
            exclusiveMinimum=0,
            maximum=1e6,
        ),
        "transfer_latency_s": number_spec(
            0.05,
            "elastic: checkpoint latency (s)",
            "Fixed cost of shipping a checkpoint (state protocol) [interpreted value].",
            minimum=0,
            maximum=1e4,
        ),
        "bandwidth_mb_per_s": number_spec(
            1250.0,
            "elastic: bandwidth (MB/s)",
            "Link bandwidth for checkpoints (paper: 10 Gb Ethernet).",
            exclusiveMinimum=0,
            maximum=1e7,
        ),
        "tuple_bytes": number_spec(
            64.0,
            "elastic: tuple size (bytes)",
            "Serialized size of one state tuple [interpreted value].",
            exclusiveMinimum=0,
            maximum=1e9,
        ),
        "rate_step_at_s": number_spec(
            300.0,
            "elastic: rate step time (s)",
            "From this simulated time the input rate is multiplied by rate_step_factor.",
            minimum=0,
            maximum=1e7,
        ),
        "rate_step_factor": number_spec(
            1.0,
            "elastic: rate step factor",
            "Input-rate multiplier from rate_step_at_s (1 = constant rate; 2 = doubling).",
            exclusiveMinimum=0,
            maximum=1000,
        ),
        "sample_schedule": {
            "type": "string",
            "enum": list(SAMPLE_SCHEDULES),
            "default": "mean_shift",
            "title": "elastic: built-in stream",
            "description": "Without a dataset: mean_shift (mean 2000 -> 8000, sigma 100, 4 steps "
            "x 2 cycles) or sigma_shrink (mean 5000, sigma 100 -> 25 in 25 steps).",
        },
        "sample_tuples": integer_spec(
            200_000,
            "elastic: built-in stream tuples",
            "Tuples of the built-in stream (no dataset).",
            minimum=1_000,
            maximum=100_000_000,
        ),
    }
    metric_definitions: ClassVar[dict[str, str]] = {
        "utilization_mean": "[per period] mean over active nodes of offered utilisation U_i = "
        "tuples/s routed to node i (duplicates included) / node capacity (ratio).",
        "utilization_std": "[per period] population std over active nodes of U_i (ratio).",
        "utilization_max": "[per period] max over active nodes of U_i (ratio).",
        "nodes": "[per period] active nodes (count).",
        "moved_buckets": "[per period] buckets whose owner the decision at the period's end "
        "changed (count).",
        "backlog_tuples": "[per period] tuples queued on active nodes at the period's end.",
        "utilization_mean_mean": "Mean over periods of utilization_mean (ratio).",
        "utilization_std_mean": "Mean over periods of utilization_std (ratio).",
        "utilization_std_max": "Max over periods of utilization_std (ratio).",
        "utilization_std_above_uit_share": "Share of periods whose utilization_std exceeds UIT.",
        "nodes_mean": "Mean over periods of active nodes (count).",
        "nodes_max": "Max over periods of active nodes (count).",
        "nodes_final": "Active nodes in the last period (count).",
        "reconfigurations_total": "Decisions that changed the node count or moved a bucket "
        "(count).",
        "moved_buckets_total": "Bucket owner changes over the run (count).",
        "duplicated_tuples_total": "Tuples sent to both the old and the new task by window "
        "recreation, [startTS, endTS) of each moved bucket (tuples).",
        "reconfiguration_duration_s_mean": "Mean over reconfigurations of the longest protocol "
        "run among its buckets: endTS - startTS (window) or checkpoint transfer (state), s.",
        "serialized_state_tuples_total": "Tuples in the open windows of moved buckets that state "
        "recreation checkpoints and ships (tuples).",
        "buffered_tuples_total": "Tuples the new task buffers until the checkpoint arrives "
        "(state recreation, tuples).",
        "backlog_tuples_max": "Max over periods of backlog_tuples (tuples).",
        "plan_time_ms": "Mean wall time of one controller decision (new-configuration rule, "
        "provision/offload, BalanceLoad), time.perf_counter, ms; 0 for elastic_static.",
        "latency_p50_s": "Median tuple sojourn (M/M/1 per node and period, shifted by the fluid "
        "backlog wait; buffered tuples add half the transfer), simulated s.",
        "latency_p95_s": "95th percentile of the same sojourn, simulated s.",
        "latency_p99_s": "99th percentile of the same sojourn, simulated s.",
        "throughput_tuples_per_s": "Input tuples processed per simulated second (capacity-capped, "
        "backlog carried over, processing of duplicates excluded).",
        "imbalance_max_over_mean": "Mean over periods of max/mean - 1 of U_i over active nodes.",
    }

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        p = super().check_params(params)
        if not p["lut"] < p["tut"] < p["uut"]:
            raise ValueError(
                f"elastic_tut: lut={p['lut']}, tut={p['tut']}, uut={p['uut']} are not ordered; "
                "allowed: lut < tut < uut"
            )
        if not p["min_nodes"] <= p["initial_nodes"] <= p["max_nodes"]:
            raise ValueError(
                f"elastic_initial_nodes: {p['initial_nodes']} is outside [min_nodes, max_nodes] = "
                f"[{p['min_nodes']}, {p['max_nodes']}]; allowed: min_nodes <= initial_nodes "
                "<= max_nodes"
            )
        ratio = p["window_s"] / p["slide_s"]
        if ratio < 1 - _EPS or abs(ratio - round(ratio)) > 1e-6:
            raise ValueError(
                f"elastic_window_s: {p['window_s']} is not a multiple of slide_s={p['slide_s']}; "
                "allowed: window_s = m x slide_s with integer m >= 1"
            )
        periods = p["duration_s"] / p["period_s"]
        if periods < 1 - _EPS or abs(periods - round(periods)) > 1e-6:
            raise ValueError(
                f"elastic_period_s: duration_s={p['duration_s']} is not a multiple of "
                f"period_s={p['period_s']}; allowed: duration_s = j x period_s with integer j >= 1"
            )
        return p

    def run(self, point: ModelPoint) -> ModelResult:
        params = self.check_params(point.params)
        self.check_strategy(point.strategy)
        rng = np.random.default_rng(point.seed)
        if point.dataset_dir:
            stream = read_phone_stream(point.dataset_dir)
        else:
            stream = sample_phone_stream(params["sample_schedule"], params["sample_tuples"], rng)
        shares = step_bucket_shares(stream, params["buckets"])
        config = ElasticConfig.from_params(point.strategy, params)
        sim = simulate_elastic(shares, config, rng)
        return result_of(sim, config, stream, n_stream_tuples=len(stream.keys))

    def figure(self, results: list[tuple[ModelPoint, ModelResult]]) -> Any:
        return elastic_figure(results)


def result_of(
    sim: ElasticRun, config: ElasticConfig, stream: PhoneInput, n_stream_tuples: int
) -> ModelResult:
    """The ``ModelResult`` of one simulation (metrics, series, info)."""
    std = np.asarray(sim.utilization_std)
    metrics = {
        "plan_time_ms": float(np.mean(sim.plan_times_ms)) if sim.plan_times_ms else 0.0,
        "latency_p50_s": sim.latency_s["p50"],
        "latency_p95_s": sim.latency_s["p95"],
        "latency_p99_s": sim.latency_s["p99"],
        "throughput_tuples_per_s": sim.processed_input_tuples / config.duration_s,
        "imbalance_max_over_mean": float(np.mean(sim.imbalance)),
        "utilization_mean_mean": float(np.mean(sim.utilization_mean)),
        "utilization_std_mean": float(std.mean()),
        "utilization_std_max": float(std.max()),
        "utilization_std_above_uit_share": float(np.mean(std > config.uit)),
        "nodes_mean": float(np.mean(sim.nodes)),
        "nodes_max": float(np.max(sim.nodes)),
        "nodes_final": float(sim.nodes[-1]),
        "reconfigurations_total": float(len(sim.reconfigurations)),
        "moved_buckets_total": float(np.sum(sim.moved_buckets)),
        "duplicated_tuples_total": sim.duplicated_tuples,
        "reconfiguration_duration_s_mean": float(np.mean(sim.durations_s))
        if sim.durations_s
        else 0.0,
        "serialized_state_tuples_total": sim.serialized_state_tuples,
        "buffered_tuples_total": sim.buffered_tuples,
        "backlog_tuples_max": float(np.max(sim.backlog_tuples)),
    }
    series = {
        "utilization_mean": sim.utilization_mean,
        "utilization_std": sim.utilization_std,
        "utilization_max": sim.utilization_max,
        "nodes": [float(n) for n in sim.nodes],
        "moved_buckets": [float(n) for n in sim.moved_buckets],
        "backlog_tuples": sim.backlog_tuples,
    }
    info = {
        "strategy": config.strategy,
        "protocol": config.protocol,
        "experiment": stream.experiment,
        "uit": config.uit,
        "stream_tuples": n_stream_tuples,
        "schedule_mu": [float(x) for x in stream.mu],
        "schedule_sigma": [float(x) for x in stream.sigma],
        "reconfigurations": sim.reconfigurations[:500],
        "reconfigurations_listed": min(len(sim.reconfigurations), 500),
        "buckets_per_node_final": sim.bucket_counts_final,
        "events_definition": "(period, bucket) rate updates + bucket moves + reconfigurations",
    }
    return ModelResult(
        metrics=metrics, series=series, time_s=sim.time_s, events=sim.events, info=info
    )


_MARKERS = {"elastic_static": "D", "elastic_scaling": "o", "elastic_balanceload": "s"}
_TITLES = {
    "mean_shift": "mean moves 2000 -> 8000",
    "sigma_shrink": "sigma 100 -> 25 in 25 steps",
    "constant": "constant distribution",
}


def elastic_figure(results: list[tuple[ModelPoint, ModelResult]]) -> Any:
    """Fig. 8 of paper 001: utilisation mean (top) and std (bottom) over simulated time,
    one column per experiment, one line per strategy (and protocol when both occur),
    repetitions averaged; the dashed line is UIT."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    protocols = {r.info.get("protocol") for _, r in results}
    groups: dict[str, dict[str, list[ModelResult]]] = defaultdict(lambda: defaultdict(list))
    for point, res in results:
        label = point.strategy + (f" ({res.info.get('protocol')})" if len(protocols) > 1 else "")
        groups[res.info.get("experiment", "constant")][label].append(res)
    experiments = sorted(groups) or ["constant"]
    fig, axes = plt.subplots(
        2, len(experiments), figsize=(6 * len(experiments), 6.5), sharex="col", squeeze=False
    )
    for col, exp in enumerate(experiments):
        top, bottom = axes[0][col], axes[1][col]
        uit = None
        for label, runs in sorted(groups[exp].items()):
            n = min(len(r.time_s) for r in runs)
            t = np.asarray(runs[0].time_s[:n])
            mean = np.mean([r.series["utilization_mean"][:n] for r in runs], axis=0)
            std = np.mean([r.series["utilization_std"][:n] for r in runs], axis=0)
            marker = _MARKERS.get(label.split(" ")[0])
            every = max(1, n // 20)
            top.plot(t, mean, marker=marker, markevery=every, ms=4, label=label)
            bottom.plot(t, std, marker=marker, markevery=every, ms=4, label=label)
            uit = runs[0].info.get("uit", uit)
        if uit is not None:
            bottom.axhline(uit, color="grey", ls="--", lw=1, label="UIT")
        top.set_title(_TITLES.get(exp, exp))
        top.set_ylabel("CPU utilisation mean (ratio)")
        bottom.set_ylabel("CPU utilisation std (ratio)")
        bottom.set_xlabel("simulated time (s)")
        top.legend(fontsize=8)
        bottom.legend(fontsize=8)
    fig.suptitle("Paper 001 Fig. 8: utilisation with and without load balancing (model)")
    fig.tight_layout()
    return fig
