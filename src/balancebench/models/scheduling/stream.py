"""The scheduling model's stream (paper 002's ad-join test) under a placement: Poisson
events served FIFO at their task's node, and the placement's throughput ceiling."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass
class StreamResult:
    arrival_s: np.ndarray
    handled_s: np.ndarray
    latency_s: np.ndarray
    node: np.ndarray
    node_utilisation: np.ndarray


def simulate_stream(
    rng: np.random.Generator,
    assignment: Sequence[int],
    task_costs_s: np.ndarray,
    capacity: np.ndarray,
    rate_per_s: float,
    duration_s: float,
    service_s: float,
    window_s: float,
) -> StreamResult:
    """Ad-join-like stream: Poisson arrivals, event -> task with probability ``cost_i /
    sum``, FIFO at the task's node with exponential service of mean ``service_s /
    capacity_j``; per-node Lindley recursion ``W_n = C_n - min_{k<=n} C_k``."""
    n_events = int(rng.poisson(rate_per_s * duration_s))
    arrival = np.sort(rng.uniform(0.0, duration_s, n_events))
    share = task_costs_s / task_costs_s.sum()
    task = rng.choice(len(share), size=n_events, p=share)
    node = np.asarray(assignment, dtype=np.int64)[task]
    service = rng.exponential(1.0, n_events) * service_s / capacity[node]
    handled = np.empty(n_events)
    for j in range(len(capacity)):
        mine = np.flatnonzero(node == j)
        if len(mine) == 0:
            continue
        t, s = arrival[mine], service[mine]
        step = np.zeros(len(mine))
        step[1:] = s[:-1] - np.diff(t)
        climb = np.cumsum(step)  # C_0 = 0, so the running minimum is <= 0
        wait = climb - np.minimum.accumulate(climb)
        handled[mine] = t + wait + s
    window_start = arrival if window_s <= 0 else np.floor(arrival / window_s) * window_s
    busy = np.bincount(node, weights=service, minlength=len(capacity))
    return StreamResult(
        arrival_s=arrival,
        handled_s=handled,
        latency_s=handled - window_start,
        node=node,
        node_utilisation=busy / duration_s,
    )


def stream_capacity_per_s(
    assignment: Sequence[int], task_costs_s: np.ndarray, capacity: np.ndarray, service_s: float
) -> float:
    """The stream rate at which the busiest node reaches utilisation 1 (events/s)."""
    share = np.bincount(
        np.asarray(assignment, dtype=np.int64),
        weights=task_costs_s / task_costs_s.sum(),
        minlength=len(capacity),
    )
    used = share > 0
    return float((capacity[used] / (service_s * share[used])).min())
