"""The time-stepped model: per-period arrivals, fluid queues, latency mixture and the
controller (protocol 2) that the strategy configures."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from balancebench.core.cost_model import plan_clock
from balancebench.core.routing_table import BucketMap
from balancebench.models.contract import registered
from balancebench.models.elastic.elastic_strategies import STRATEGIES, ElasticStrategy
from balancebench.models.elastic.reconfiguration_rules import (
    EPS,
    mixture_quantiles,
    new_node_count,
    open_window_start,
    state_transfer_s,
    window_protocol_times,
)
from balancebench.strategies.balanceload import balance_load

#: BalanceLoad's move budget per call (the paper has none; this only guards a loop).
BALANCE_MAX_MOVES = 100_000
#: Floor of the M/M/1 sojourn rate, as a share of the capacity (overloaded nodes).
MIN_SOJOURN_RATE_SHARE = 0.01


@dataclass(frozen=True)
class ElasticConfig:
    """The run's settings (from the model params); ``strategy`` names one of ``STRATEGIES``."""

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
    strategy = registered(STRATEGIES, c.strategy)
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
        share = weights @ shares[first:last] / max(weights.sum(), EPS)
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
        if strategy.controls and j < n_periods - 1:
            started = plan_clock()
            new_owner, new_active, action = _control(c, strategy, owner, active, t_b, records, t1)
            out.plan_times_ms.append((plan_clock() - started) * 1e3)
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
    strategy: ElasticStrategy,
    owner: np.ndarray,
    active: np.ndarray,
    t_b: np.ndarray,
    records: list[_Reconfig],
    now_s: float,
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """Protocol 2 on one period's ``T_b``: new configuration (spread as ``strategy``
    says), then BalanceLoad if ``strategy.balances``."""
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
        new_owner = strategy.provision(new_owner, active, added)
    elif n_new < n_old:
        kind = "decommission"
        removed = act[np.argsort(u, kind="stable")[: n_old - n_new]]
        new_active[removed] = False
        new_owner = strategy.offload(new_owner, t_b, removed, np.flatnonzero(new_active))
    u_sd = float("nan")
    balanced = 0
    if strategy.balances:
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
