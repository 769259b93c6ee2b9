"""The decisions of the overlay model's strategies, and :data:`STRATEGIES`, the one
place that maps each strategy name to its object (what the simulation and the model call).

The rules are the package doc's "Strategies" section: operator selection, LDI matching and
the tree scan of paper 004 (``ktree_hilbert``), the random policy (``overlay_random``) and
Borealis' correlation-based placement and pair-wise rounds (``borealis``)."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from balancebench.models.overlay.ktree import KaryTree, tree_mean_load
from balancebench.models.overlay.topology import OverlayNetwork, ring_distance

#: Float slack for load comparisons (loads are shares of a host, about 0..2).
LOAD_TOLERANCE = 1e-9
#: Series with fewer points have no usable correlation.
MIN_CORRELATION_POINTS = 3


# ---- decision rules ----------------------------------------------------------------------------


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation of two series; 0 when either is too short or constant."""
    if len(a) < MIN_CORRELATION_POINTS:
        return 0.0
    da, db = a - a.mean(), b - b.mean()
    norm = math.sqrt(float(da @ da) * float(db @ db))
    return float(da @ db) / norm if norm > 1e-12 else 0.0


def correlations_with_rows(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Correlation of series ``x`` with each row of ``rows`` (0 where undefined)."""
    if rows.shape[1] < MIN_CORRELATION_POINTS:
        return np.zeros(len(rows))
    dx = x - x.mean()
    dr = rows - rows.mean(axis=1, keepdims=True)
    norm = np.sqrt((dr * dr).sum(axis=1) * float(dx @ dx))
    out = np.zeros(len(rows))
    ok = norm > 1e-12
    out[ok] = (dr[ok] @ dx) / norm[ok]
    return out


def select_operators_to_move(
    op_series: np.ndarray, speed: float, lbar: float, eps: float
) -> list[int]:
    """Paper 004 ``O_SELECTION`` [interpreted]: on a high host (rows of ``op_series`` = its
    operators' load series, shares of a nominal host), repeatedly move out the operator
    with the largest correlation with the sum of the others, among those whose removal
    keeps the host at or above ``Lbar - eps``, until the host is below ``Lbar + eps``.
    Returns row indexes in the order chosen."""
    means = op_series.mean(axis=1)
    load = float(means.sum()) / speed
    total = op_series.sum(axis=0)
    remaining = list(range(len(op_series)))
    chosen: list[int] = []
    while load >= lbar + eps - LOAD_TOLERANCE:
        best, best_key = -1, None
        for j in remaining:
            if load - means[j] / speed < lbar - eps - LOAD_TOLERANCE:
                continue
            key = (correlation(op_series[j], total - op_series[j]), float(means[j]), -j)
            if best_key is None or key > best_key:
                best, best_key = j, key
        if best < 0:
            break
        chosen.append(best)
        remaining.remove(best)
        load -= means[best] / speed
        total = total - op_series[best]
    return chosen


@dataclass
class HighEntry:
    """LDI of an operator to move out: ``<dL, host, C_h>`` (dL in the host's units)."""

    op: int
    host: int
    load: float


@dataclass
class LowEntry:
    """LDI of a low host: ``<Lbar - L, host, C_l>`` (remaining capacity to fill)."""

    host: int
    load: float


def match_ldi(
    high: list[HighEntry],
    low: list[LowEntry],
    ring_id: np.ndarray,
    ring_space: int,
    speed: np.ndarray,
    min_remaining: float,
) -> tuple[list[tuple[int, int, int]], list[HighEntry], list[LowEntry]]:
    """``MATCH_INF``: high entries by decreasing ``dL`` each go to the low entry nearest
    on the ring that can take ``dL x C_h / C_l``; the low entry keeps its remainder while
    it exceeds ``min_remaining``. Returns ``(moves (op, from, to), unmatched high, low)``."""
    moves: list[tuple[int, int, int]] = []
    unmatched: list[HighEntry] = []
    lows = list(low)
    for entry in sorted(high, key=lambda e: (-e.load, e.op)):
        best, best_key = None, None
        for candidate in lows:
            need = entry.load * speed[entry.host] / speed[candidate.host]
            if need <= candidate.load + LOAD_TOLERANCE:
                key = (
                    ring_distance(ring_id[entry.host], ring_id[candidate.host], ring_space),
                    candidate.host,
                )
                if best_key is None or key < best_key:
                    best, best_key = candidate, key
        if best is None:
            unmatched.append(entry)
            continue
        moves.append((entry.op, entry.host, best.host))
        best.load -= entry.load * speed[entry.host] / speed[best.host]
        if best.load <= min_remaining + LOAD_TOLERANCE:
            lows.remove(best)
    return moves, unmatched, lows


def ktree_match(
    tree: KaryTree,
    high: list[HighEntry],
    low: list[LowEntry],
    ring_id: np.ndarray,
    ring_space: int,
    speed: np.ndarray,
    min_remaining: float,
    min_entries: int,
) -> tuple[list[tuple[int, int, int]], int]:
    """``LOAD_SCAN`` bottom-up over the tree: entries start at their host's report leaf; a
    tree node whose lists hold more than ``min_entries`` entries matches them; the rest go
    to its parent. Returns the moves and the messages (non-empty forwards)."""
    size = len(tree.nodes)
    highs: list[list[HighEntry]] = [[] for _ in range(size)]
    lows: list[list[LowEntry]] = [[] for _ in range(size)]
    for entry in high:
        highs[tree.report_leaf[entry.host]].append(entry)
    for entry in low:
        lows[tree.report_leaf[entry.host]].append(LowEntry(entry.host, entry.load))
    moves: list[tuple[int, int, int]] = []
    messages = 0
    for index in range(size - 1, -1, -1):
        h, lo = highs[index], lows[index]
        if not h and not lo:
            continue
        if h and lo and len(h) + len(lo) > min_entries:
            matched, h, lo = match_ldi(h, lo, ring_id, ring_space, speed, min_remaining)
            moves.extend(matched)
        parent = tree.nodes[index].parent
        if parent >= 0 and (h or lo):
            highs[parent].extend(h)
            lows[parent].extend(lo)
            messages += 1
    return moves, messages


def ktree_round(
    placement: np.ndarray,
    op_window: np.ndarray,
    network: OverlayNetwork,
    eps: float,
    min_remaining: float,
    min_entries: int,
) -> tuple[list[tuple[int, int, int]], int]:
    """One round of the paper's algorithm; returns moves and messages."""
    nodes = len(network.speed)
    means = op_window.mean(axis=1)
    host_load = np.bincount(placement, weights=means, minlength=nodes) / network.speed
    lbar, messages = tree_mean_load(network.tree, host_load)
    high: list[HighEntry] = []
    low: list[LowEntry] = []
    for host in range(nodes):
        if host_load[host] >= lbar + eps - LOAD_TOLERANCE:
            ops = np.flatnonzero(placement == host)
            for row in select_operators_to_move(op_window[ops], network.speed[host], lbar, eps):
                high.append(
                    HighEntry(int(ops[row]), host, float(means[ops[row]] / network.speed[host]))
                )
        elif host_load[host] <= lbar - eps + LOAD_TOLERANCE:
            low.append(LowEntry(host, float(lbar - host_load[host])))
    moves, ldi_messages = ktree_match(
        network.tree,
        high,
        low,
        network.ring_id,
        network.ring_space,
        network.speed,
        min_remaining,
        min_entries,
    )
    return moves, messages + ldi_messages


def random_round(
    placement: np.ndarray,
    op_means: np.ndarray,
    speed: np.ndarray,
    eps: float,
    rng: np.random.Generator,
) -> tuple[list[tuple[int, int, int]], int]:
    """Random policy: each high host moves operators (random order) to uniformly random
    other hosts until it is no longer high, never going below ``Lbar - eps``."""
    nodes = len(speed)
    host_load = np.bincount(placement, weights=op_means, minlength=nodes) / speed
    lbar = float(host_load.mean())
    moves: list[tuple[int, int, int]] = []
    for host in np.flatnonzero(host_load >= lbar + eps - LOAD_TOLERANCE):
        load = float(host_load[host])
        for op in rng.permutation(np.flatnonzero(placement == host)):
            if load < lbar + eps - LOAD_TOLERANCE:
                break
            if load - op_means[op] / speed[host] < lbar - eps - LOAD_TOLERANCE:
                continue
            target = int(rng.integers(nodes - 1))
            target += target >= host
            moves.append((int(op), int(host), target))
            load -= op_means[op] / speed[host]
    return moves, 2 * nodes


def correlation_greedy_placement(
    op_window: np.ndarray, speed: np.ndarray, eps: float
) -> np.ndarray:
    """Borealis-style initial placement [reconstructed]: operators by decreasing mean load,
    each to the host with the lowest correlation with it among those whose load stays
    within ``Lbar + eps`` (ties: lower resulting load, fewer operators, lower index); if
    none, the host
    with the lowest resulting load."""
    nodes = len(speed)
    means = op_window.mean(axis=1)
    target = float(means.sum()) / float(speed.sum())
    host_series = np.zeros((nodes, op_window.shape[1]))
    host_work = np.zeros(nodes)
    host_ops = np.zeros(nodes, dtype=np.int64)
    placement = np.zeros(len(means), dtype=np.int64)
    for op in np.argsort(-means, kind="stable"):
        after = (host_work + means[op]) / speed
        fits = np.flatnonzero(after <= target + eps + LOAD_TOLERANCE)
        if len(fits):
            rho = correlations_with_rows(op_window[op], host_series[fits])
            choice = int(fits[np.lexsort((fits, host_ops[fits], after[fits], rho))[0]])
        else:
            choice = int(np.argmin(after))
        placement[op] = choice
        host_series[choice] += op_window[op]
        host_work[choice] += means[op]
        host_ops[choice] += 1
    return placement


def borealis_round(
    placement: np.ndarray, op_window: np.ndarray, speed: np.ndarray, eps: float
) -> tuple[list[tuple[int, int, int]], int]:
    """Borealis pair-wise round [reconstructed]: pair hosts by load (i-th most with i-th
    least loaded); a pair whose loads differ by ``>= 2 eps`` redistributes its operators
    greedily by correlation within speed-proportional shares + ``eps``."""
    nodes = len(speed)
    means = op_window.mean(axis=1)
    host_load = np.bincount(placement, weights=means, minlength=nodes) / speed
    order = np.argsort(-host_load, kind="stable")
    moves: list[tuple[int, int, int]] = []
    for i in range(nodes // 2):
        a, b = int(order[i]), int(order[nodes - 1 - i])
        if host_load[a] - host_load[b] < 2 * eps - LOAD_TOLERANCE:
            continue
        ops = np.flatnonzero((placement == a) | (placement == b))
        ops = ops[np.argsort(-means[ops], kind="stable")]
        pair = (a, b)
        share = float(means[ops].sum()) / float(speed[a] + speed[b])
        series = np.zeros((2, op_window.shape[1]))
        work = np.zeros(2)
        for op in ops:
            after = (work + means[op]) / speed[list(pair)]
            fits = after <= share + eps + LOAD_TOLERANCE
            if fits.any():
                rho = correlations_with_rows(op_window[op], series)
                side = min(
                    (s for s in (0, 1) if fits[s]),
                    key=lambda s: (rho[s], pair[s] != placement[op], after[s]),
                )
            else:
                side = int(np.argmin(after))
            series[side] += op_window[op]
            work[side] += means[op]
            if pair[side] != placement[op]:
                moves.append((int(op), int(placement[op]), pair[side]))
    return moves, 2 * nodes


# ---- the strategies, registered by name ------------------------------------------------------

#: A migration: ``(operator, from host, to host)``.
Move = tuple[int, int, int]


class OverlayStrategy(ABC):
    """What the simulation and the model ask of a strategy: its ``name`` (registry key), an
    optional informed start (:meth:`initial_placement`) and one balancing round
    (:meth:`plan_round`)."""

    name: ClassVar[str]

    def initial_placement(
        self, op_load: np.ndarray, speed: np.ndarray, params: dict[str, Any]
    ) -> np.ndarray | None:
        """Each operator's host at the start, from the ``(ops, periods)`` loads; ``None``
        keeps the model's random placement (the default)."""
        return None

    @abstractmethod
    def plan_round(
        self,
        placement: np.ndarray,
        op_window: np.ndarray,
        network: OverlayNetwork,
        params: dict[str, Any],
        rng: np.random.Generator,
    ) -> tuple[list[Move], int]:
        """One round over ``op_window`` (the operators' loads over the statistics window):
        the moves and the control messages (the 2 per move are counted by the caller)."""


class OverlayRandomStrategy(OverlayStrategy):
    """``overlay_random``: Harchol-Balter et al.'s Random policy (:func:`random_round`) with
    a central collector of ``Lbar``."""

    name: ClassVar[str] = "overlay_random"

    def plan_round(
        self,
        placement: np.ndarray,
        op_window: np.ndarray,
        network: OverlayNetwork,
        params: dict[str, Any],
        rng: np.random.Generator,
    ) -> tuple[list[Move], int]:
        eps = float(params["eps"])
        return random_round(placement, op_window.mean(axis=1), network.speed, eps, rng)


class BorealisStrategy(OverlayStrategy):
    """``borealis``: correlation-based initial placement from the first
    ``stats_window_periods`` periods (:func:`correlation_greedy_placement`), then pair-wise
    rounds (:func:`borealis_round`)."""

    name: ClassVar[str] = "borealis"

    def initial_placement(
        self, op_load: np.ndarray, speed: np.ndarray, params: dict[str, Any]
    ) -> np.ndarray | None:
        profile = op_load[:, : int(params["stats_window_periods"])]
        return correlation_greedy_placement(profile, speed, float(params["eps"]))

    def plan_round(
        self,
        placement: np.ndarray,
        op_window: np.ndarray,
        network: OverlayNetwork,
        params: dict[str, Any],
        rng: np.random.Generator,
    ) -> tuple[list[Move], int]:
        return borealis_round(placement, op_window, network.speed, float(params["eps"]))


class KtreeHilbertStrategy(OverlayStrategy):
    """``ktree_hilbert``: paper 004's algorithm (:func:`ktree_round`): ``Lbar`` over the
    k-ary tree, ``O_SELECTION``, LDI matched up the tree nearest on the Hilbert ring first."""

    name: ClassVar[str] = "ktree_hilbert"

    def plan_round(
        self,
        placement: np.ndarray,
        op_window: np.ndarray,
        network: OverlayNetwork,
        params: dict[str, Any],
        rng: np.random.Generator,
    ) -> tuple[list[Move], int]:
        return ktree_round(
            placement,
            op_window,
            network,
            float(params["eps"]),
            float(params["ldi_min_load"]),
            int(params["ldi_match_min_entries"]),
        )


#: Strategy name -> its object: the one registry. The model's ``strategies`` are its keys,
#: in this order.
STRATEGIES: dict[str, OverlayStrategy] = {
    strategy.name: strategy
    for strategy in (OverlayRandomStrategy(), BorealisStrategy(), KtreeHilbertStrategy())
}
