"""Reference implementations kept as test oracles.

These are the first, straightforward versions of QMMP and MNRT (whole-data dicts and
full sorts, no shortcuts). The production classes are rewritten for speed; on every
window routed by the strategy's own table they must make exactly the same decisions,
which ``test_reference_equivalence.py`` checks on random windows.
"""
# ruff: noqa: E501

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from balancebench.hashing import home_nodes
from balancebench.routing import segment_starts
from balancebench.strategies.base import lay_end_to_end


@dataclass
class Parts:
    key: np.ndarray
    node: np.ndarray
    load: np.ndarray
    state: np.ndarray


def reference_qmmp(parts: Parts, n_nodes: int, tolerance: float) -> Parts:
    return _qmmp(None, parts, n_nodes, tolerance)


def reference_mnrt(parts: Parts, n_nodes: int, tolerance: float) -> Parts:
    return _Mnrt(parts, n_nodes, tolerance).run()


def _qmmp(self, parts: Parts, n_nodes: int, tolerance: float) -> Parts:
    loads = np.bincount(parts.node, weights=parts.load, minlength=n_nodes)
    mean = loads.sum() / n_nodes
    upper = (1.0 + tolerance) * mean
    eps = 1e-12 * loads.sum() + 1e-9
    over = loads > upper + eps
    if not over.any():
        return parts

    # UNLOAD: rows of overloaded nodes, grouped by node, in storage order.
    rows = np.flatnonzero(over[parts.node])
    rows = rows[np.argsort(parts.node[rows], kind="stable")]
    node, load = parts.node[rows], parts.load[rows]
    starts = segment_starts(node)
    cum = np.cumsum(load)
    before = cum - load - np.repeat(np.r_[0.0, cum][starts], np.diff(np.r_[starts, len(rows)]))
    chi = (loads - upper)[node]
    take = np.clip(chi - before, 0.0, load)
    pooled = take > eps
    rows, take = rows[pooled], take[pooled]
    share = take / parts.load[rows]
    pool_key, pool_amt = parts.key[rows], take
    pool_state = parts.state[rows] * share
    remaining = parts.load.copy()
    remaining_state = parts.state.copy()
    remaining[rows] -= take
    remaining_state[rows] -= pool_state
    loads = loads - np.bincount(parts.node[rows], weights=take, minlength=n_nodes)

    # LOADING: fill nodes at or below the mean, in node order, up to the mean.
    dest = np.flatnonzero((loads <= mean) & (mean - loads > eps))
    room = mean - loads[dest]
    room[-1] += max(0.0, pool_amt.sum() - room.sum())  # float slack goes to the last node
    pi, di, amount = lay_end_to_end(
        np.zeros(len(pool_amt), np.int8), pool_amt, np.zeros(len(room), np.int8), room, 0.0
    )
    return Parts(
        key=np.r_[parts.key, pool_key[pi]],
        node=np.r_[parts.node, dest[di]].astype(np.int32),
        load=np.r_[remaining, amount],
        state=np.r_[remaining_state, pool_state[pi] * amount / pool_amt[pi]],
    )


# Priority cells of Table 2, in the order Algorithm 4 tries them.
MERGE_BACK, MERGE_ACROSS, MERGE_OUT = 0, 1, 2
UNCHANGED_BACK, UNCHANGED_ACROSS, UNCHANGED_OUT = 3, 4, 5
SPLIT_BACK, SPLIT_ACROSS, SPLIT_OUT = 6, 7, 8


@dataclass
class _Piece:
    """Load unloaded into the pool ``C``: ``amount`` of ``key`` that came from ``origin``."""

    key: int
    amount: float
    state: float
    origin: int


class _Mnrt:
    """One planning pass; the working state is dicts because every step changes it."""

    def __init__(self, parts: Parts, n_nodes: int, tolerance: float) -> None:
        self.n = n_nodes
        self.loads = np.bincount(parts.node, weights=parts.load, minlength=n_nodes).tolist()
        total = float(sum(self.loads))
        self.mean = total / n_nodes
        self.upper = (1.0 + tolerance) * self.mean
        self.eps = 1e-12 * total + 1e-9
        # held[key][node] = [load, state]; on_node[node] = keys held there (insertion order).
        self.held: dict[int, dict[int, list[float]]] = {}
        self.on_node: list[dict[int, None]] = [{} for _ in range(n_nodes)]
        self.key_total: dict[int, float] = {}
        keys = parts.key.tolist()
        for k, d, ld, st in zip(
            keys, parts.node.tolist(), parts.load.tolist(), parts.state.tolist(), strict=True
        ):
            if ld <= 0.0:
                continue  # a part without load cannot be moved by a load-based plan
            self.held.setdefault(k, {})[d] = [ld, st]
            self.on_node[d][k] = None
            self.key_total[k] = self.key_total.get(k, 0.0) + ld
        self.static = parts  # rows without load stay where they are
        unique = np.fromiter(self.held, dtype=np.int64, count=len(self.held))
        self.home = dict(zip(unique.tolist(), home_nodes(unique, n_nodes).tolist(), strict=True))
        self.pool: list[_Piece] = []
        self.pool_count: dict[int, int] = {}
        # Each overflow-unload cycle shrinks the pool by at least tau * Lbar, so this
        # bound is never reached by a correct run; it turns a bug into an error, not a hang.
        self.budget = 100 * (len(keys) + n_nodes) * (1 + int(1 / tolerance))

    # ---- Algorithm 2 -------------------------------------------------------------------
    def run(self) -> Parts:
        for d in range(self.n):
            if self.loads[d] > self.upper + self.eps:
                self.unload(d)
        self.loading()
        return self.result()

    def underloaded(self) -> set[int]:
        return {t for t in range(self.n) if self.loads[t] < self.mean - self.eps}

    # ---- UNLOAD / UNLOADSELECT ----------------------------------------------------------
    def unload(self, d: int) -> None:
        chi = self.loads[d] - self.upper
        if chi <= self.eps:
            return
        dstar = self.underloaded()
        ranked = []
        for k in self.on_node[d]:
            load, state = self.held[k][d]
            cell = self._unload_cell(k, d, load, chi, dstar)
            if cell is not None:
                ranked.append((cell, state / load, -load, k))
        ranked.sort()
        # Priority moves take whole parts; chi only shrinks, so one pass in priority order
        # equals re-selecting the best eligible part each time.
        for _, _, neg_load, k in ranked:
            if chi <= self.eps:
                return
            if -neg_load <= chi + self.eps:
                chi -= self._to_pool(k, d, -neg_load)
        if chi <= self.eps:
            return
        # Fallback: heavy keys first (isolation), then smallest MC / L, then larger parts.
        rest = sorted(
            (self.key_total[k] <= self.mean + self.eps, st / ld, -ld, k)
            for k, (ld, st) in ((k, self.held[k][d]) for k in self.on_node[d])
        )
        for _, _, neg_load, k in rest:
            if chi <= self.eps:
                return
            chi -= self._to_pool(k, d, min(-neg_load, chi))

    def _unload_cell(self, k: int, d: int, load: float, chi: float, dstar: set[int]) -> int | None:
        if load > chi + self.eps:
            return None  # a whole move would overshoot: only the fallback may split it
        home = self.home[k]
        holders = self.held[k]
        merge_targets = [t for t in holders if t != d and t in dstar]
        if d == home:
            return MERGE_OUT if merge_targets else None
        if home in dstar and home in holders:
            return MERGE_BACK
        if any(t != home for t in merge_targets):
            return MERGE_ACROSS
        if home in dstar:
            return UNCHANGED_BACK
        free = len(dstar) - sum(1 for t in dstar if t in holders or t == home)
        return UNCHANGED_ACROSS if free > 0 else None

    def _to_pool(self, k: int, d: int, amount: float) -> float:
        part = self.held[k][d]
        share = amount / part[0]
        state = part[1] * share
        if amount >= part[0] - self.eps:
            amount, state = part[0], part[1]
            del self.held[k][d]
            del self.on_node[d][k]
        else:
            part[0] -= amount
            part[1] -= state
        self.loads[d] -= amount
        self.pool.append(_Piece(k, amount, state, d))
        self.pool_count[k] = self.pool_count.get(k, 0) + 1
        return amount

    # ---- LOADING / LOADINGSELECT --------------------------------------------------------
    def loading(self) -> None:
        steps = 0
        while self.pool:
            steps += 1
            if steps > self.budget:
                raise RuntimeError("mnrt: loading did not converge (planning bug)")
            dstar = self.underloaded()
            if not dstar:  # only float rounding can empty D* while C holds load
                dstar = {int(np.argmin(self.loads))}
            by_load = sorted(dstar, key=lambda t: (self.loads[t], t))
            best = None
            for i, piece in enumerate(self.pool):
                cell, target = self._loading_cell(piece, dstar, by_load)
                rank = (cell, -piece.amount, piece.key, piece.origin)
                if best is None or rank < best[0]:
                    best = (rank, i, target)
            assert best is not None
            _, i, target = best
            piece = self.pool.pop(i)
            self.pool_count[piece.key] -= 1
            part = self.held.setdefault(piece.key, {}).setdefault(target, [0.0, 0.0])
            part[0] += piece.amount
            part[1] += piece.state
            self.on_node[target][piece.key] = None
            self.loads[target] += piece.amount
            if self.loads[target] > self.upper + self.eps:
                self.unload(target)

    def _loading_cell(self, piece: _Piece, dstar: set[int], by_load: list[int]) -> tuple[int, int]:
        home = self.home[piece.key]
        holders = self.held.get(piece.key, {})
        from_home = piece.origin == home
        merge = [t for t in by_load if t in holders]
        if merge:
            if home in dstar and home in holders:
                return MERGE_BACK, home
            return (MERGE_OUT if from_home else MERGE_ACROSS), merge[0]
        whole = not holders and self.pool_count[piece.key] == 1
        if home in dstar:
            return (UNCHANGED_BACK if whole else SPLIT_BACK), home
        target = by_load[0]
        if from_home:
            return (UNCHANGED_OUT if whole else SPLIT_OUT), target
        return (UNCHANGED_ACROSS if whole else SPLIT_ACROSS), target

    def result(self) -> Parts:
        keys, nodes, loads, states = [], [], [], []
        for k, holders in self.held.items():
            for d, (ld, st) in holders.items():
                keys.append(k)
                nodes.append(d)
                loads.append(ld)
                states.append(st)
        idle = self.static.load <= 0.0
        return Parts(
            key=np.r_[np.array(keys, dtype=np.int64), self.static.key[idle]],
            node=np.r_[np.array(nodes, dtype=np.int32), self.static.node[idle]].astype(np.int32),
            load=np.r_[np.array(loads, dtype=np.float64), self.static.load[idle]],
            state=np.r_[np.array(states, dtype=np.float64), self.static.state[idle]],
        )
