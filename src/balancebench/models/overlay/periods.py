"""The time-stepped simulation of the overlay model: per period the hosts' loads, queues
and tuple latencies, then one balancing round of the strategy (looked up in
:data:`~balancebench.models.overlay.overlay_strategies.STRATEGIES`) and its migrations."""

from __future__ import annotations

from typing import Any

import numpy as np

from balancebench.core.cost_model import plan_clock
from balancebench.models.contract import ModelResult, registered
from balancebench.models.overlay.overlay_strategies import STRATEGIES
from balancebench.models.overlay.source_chains import OverlayInput
from balancebench.models.overlay.topology import OverlayNetwork


def migration_pause_s(network: OverlayNetwork, src: int, dst: int, state_mb: float) -> float:
    """Time an operator is stopped while it moves: state transfer + one delay."""
    return state_mb / network.bandwidth_mb_per_s[src, dst] + network.delay_s[src, dst]


def pause_extra_latency_s(pause_s: float, period_s: float) -> float:
    """Mean extra wait of a period's tuples (uniform arrivals) behind a pause at its start."""
    if pause_s <= period_s:
        return pause_s * pause_s / (2 * period_s)
    return pause_s - period_s / 2


def weighted_percentiles(
    values: np.ndarray, weights: np.ndarray, quantiles: list[float]
) -> list[float]:
    """Percentiles of ``values`` with ``weights`` (unweighted when all weights are 0)."""
    values = np.asarray(values, dtype=float).ravel()
    weights = np.asarray(weights, dtype=float).ravel()
    if len(values) == 0:
        return [0.0 for _ in quantiles]
    if weights.sum() <= 0:
        weights = np.ones_like(values)
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    total = cumulative[-1]
    return [
        float(values[order][min(np.searchsorted(cumulative, q * total), len(values) - 1)])
        for q in quantiles
    ]


def load_fluctuation(host_loads: np.ndarray) -> float:
    """Paper 004's D(VN(i)) averaged over hosts: ``host_loads`` is periods x hosts; each
    host's variance of its own load over those periods, then the mean over hosts."""
    return float(np.asarray(host_loads, dtype=np.float64).var(axis=0).mean())


def simulate_overlay(
    data: OverlayInput,
    network: OverlayNetwork,
    strategy: str,
    initial_placement: np.ndarray,
    params: dict[str, Any],
    rng: np.random.Generator,
) -> ModelResult:
    """Step the periods: host loads, queues and latencies, then a balancing round of the
    strategy registered as ``strategy``."""
    planner = registered(STRATEGIES, strategy)
    nodes = len(network.speed)
    ops, periods = data.op_load.shape
    period_s = float(params["period_s"])
    window = int(params["stats_window_periods"])
    placement = np.asarray(initial_placement, dtype=np.int64).copy()
    backlog_s = np.zeros(nodes)
    pause_latency = np.zeros(len(data.chains))
    latency = np.zeros((len(data.chains), periods))
    fluctuation, spread, moved, load_mean, imbalance = (np.zeros(periods) for _ in range(5))
    history = np.zeros((periods, nodes))  # each host's load per period: D(VN(i)) needs it
    latency_mean, latency_p95 = np.zeros(periods), np.zeros(periods)
    plan_ms: list[float] = []
    moves_total = messages_total = 0
    move_delays: list[float] = []
    intra_moves = 0
    work_total = 0.0
    op_chain = np.zeros(ops, dtype=np.int64)
    for s, chain in enumerate(data.chains):
        op_chain[chain] = s
    for t in range(periods):
        util = np.bincount(placement, weights=data.op_load[:, t], minlength=nodes) / network.speed
        work_total += float((util * network.speed).sum() * period_s)
        history[t] = util
        fluctuation[t] = load_fluctuation(history[max(0, t - window + 1) : t + 1])
        spread[t] = util.std()
        load_mean[t] = util.mean()
        imbalance[t] = util.max() / util.mean() - 1 if util.mean() > 0 else 0.0
        after_s = np.maximum(0.0, backlog_s + (util - 1) * period_s)
        wait_s = (backlog_s + after_s) / 2
        backlog_s = after_s
        inflation = 1 / (1 - np.minimum(util, params["rho_cap"]))
        host = placement
        step_s = data.op_cost_s / network.speed[host] * inflation[host] + wait_s[host]
        chain_hosts = host[data.chains]
        hops_s = network.delay_s[data.source_host, chain_hosts[:, 0]]
        if data.chains.shape[1] > 1:
            hops_s = hops_s + network.delay_s[chain_hosts[:, :-1], chain_hosts[:, 1:]].sum(axis=1)
        latency[:, t] = step_s[data.chains].sum(axis=1) + hops_s + pause_latency
        weights = data.source_tuples[:, t]
        if weights.sum() > 0:
            latency_mean[t] = float(latency[:, t] @ weights / weights.sum())
        else:
            latency_mean[t] = float(latency[:, t].mean())
        latency_p95[t] = weighted_percentiles(latency[:, t], weights, [0.95])[0]
        pause_latency = np.zeros(len(data.chains))
        if t == periods - 1:
            break
        op_window = data.op_load[:, max(0, t - window + 1) : t + 1]
        started = plan_clock()
        moves, messages = planner.plan_round(placement, op_window, network, params, rng)
        plan_ms.append((plan_clock() - started) * 1000)
        means = op_window.mean(axis=1)
        for op, src, dst in moves:
            moved[t] += means[op] / network.speed[src]
            placement[op] = dst
            pause = migration_pause_s(network, src, dst, float(params["operator_state_mb"]))
            pause_latency[op_chain[op]] += pause_extra_latency_s(pause, period_s)
            move_delays.append(float(network.delay_s[src, dst]))
            intra_moves += int(network.subnet[src] == network.subnet[dst])
        moved[t] /= nodes
        moves_total += len(moves)
        messages_total += messages + 2 * len(moves)
    weights = data.source_tuples
    p50, p95, p99 = weighted_percentiles(latency, weights, [0.5, 0.95, 0.99])
    tuples = float(weights.sum())
    duration_s = periods * period_s
    processed_share = (
        1 - float((backlog_s * network.speed).sum()) / work_total if work_total > 0 else 1.0
    )
    metrics = {
        "plan_time_ms": float(np.mean(plan_ms)) if plan_ms else 0.0,
        "latency_p50_s": p50,
        "latency_p95_s": p95,
        "latency_p99_s": p99,
        "latency_s_mean": float((latency * weights).sum() / tuples)
        if tuples > 0
        else float(latency.mean()),
        "throughput_tuples_per_s": tuples * max(processed_share, 0.0) / duration_s,
        "imbalance_max_over_mean": float(imbalance.mean()),
        "load_fluctuation_mean": float(fluctuation.mean()),
        "load_spread_across_hosts_mean": float(spread.mean()),
        "load_moved_total": float(moved.sum()),
        "load_moved_mean": float(moved[:-1].mean()) if periods > 1 else 0.0,
        "average_load_mean": float(load_mean.mean()),
        "moves": float(moves_total),
        "messages": float(messages_total),
        "move_delay_mean_s": float(np.mean(move_delays)) if move_delays else 0.0,
        "moves_intra_subnet_share": intra_moves / moves_total if moves_total else 0.0,
    }
    series = {
        "load_fluctuation": fluctuation.tolist(),
        "load_spread_across_hosts": spread.tolist(),
        "load_moved": moved.tolist(),
        "latency_s": latency_mean.tolist(),
        "latency_p95_s_by_period": latency_p95.tolist(),
        "average_load": load_mean.tolist(),
    }
    counts = np.bincount(placement, minlength=nodes)
    info = {
        "final_operators_per_host": counts.tolist(),
        "initial_operators_per_host": np.bincount(initial_placement, minlength=nodes).tolist(),
        "rounds": len(plan_ms),
    }
    return ModelResult(
        metrics=metrics,
        series=series,
        time_s=((np.arange(periods) + 1) * period_s).tolist(),
        events=int(messages_total + moves_total + nodes * periods),
        info=info,
    )
