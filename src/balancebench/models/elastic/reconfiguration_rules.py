"""The paper's rules as pure functions: the new-configuration rule, the two reconfiguration
protocols' times and costs, provisioning and offload of buckets, and the latency mixture."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

#: The paper's two reconfiguration protocols: window recreation and state recreation.
PROTOCOLS = ("window", "state")
#: Tolerance of the float comparisons of the rules (and of the params' multiple checks).
EPS = 1e-9


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
    n = math.ceil(n_old * u_av / tut - EPS)
    return int(min(max(n, min_nodes), max_nodes))


def window_protocol_times(start_s: float, window_s: float, slide_s: float) -> tuple[float, float]:
    """``(switchTS, endTS)`` of window recreation at ``startTS``: the new task owns the
    windows starting at or after ``switchTS``; the old one finishes the earlier ones, whose
    last ends at ``endTS = switchTS - slide + window``."""
    switch = math.ceil(start_s / slide_s - EPS) * slide_s
    return switch, switch - slide_s + window_s


def open_window_start(start_s: float, window_s: float, slide_s: float) -> float:
    """Start of the oldest window still open at ``start_s`` (the state a checkpoint holds
    covers ``[this, start_s)``)."""
    m = round(window_s / slide_s)
    return (math.floor(start_s / slide_s + EPS) - m + 1) * slide_s


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
