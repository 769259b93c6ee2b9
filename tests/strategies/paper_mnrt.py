"""MNRT transcribed from paper 000's pseudo-code (Algorithm 2's frame, Algorithm 4, Table 2),
as a test oracle written apart from ``balancebench.strategies.mnrt``.

Whole data in plain dicts, every selection recomputed from scratch: no tracked subsets,
no row search, no production helper (only ``home_nodes``, the spec's ``F(k)``). Where the
paper leaves a choice open, the choices documented in ``strategies/mnrt.py``'s docstring
are applied as stated there (tie-breaks, the least-loaded target, ``D*`` re-evaluated at
every selection), so both must reach the same plan on any window the strategy's own
table routed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from balancebench.core.hashing import home_nodes

# Table 2: rows gamma1 merge, gamma2 unchanged, gamma3 split; columns delta1 back,
# delta2 across, delta3 out. Cell (row, column) has priority 3 * row + column.
MERGE, UNCHANGED, SPLIT = 0, 1, 2
BACK, ACROSS, OUT = 0, 1, 2


def cell(row: int, column: int) -> int:
    return 3 * row + column


@dataclass
class Window:
    key: np.ndarray
    node: np.ndarray
    load: np.ndarray
    state: np.ndarray


def paper_mnrt(window: Window, n: int, tau: float, heavy_first: bool = True) -> Window:
    """The placement after one MNRT plan: (key, node, load, state) of every part.

    ``heavy_first``: line 6's fallback takes keys heavier than a node's share (``Lbar``)
    first, the module's documented reading of "a key larger than a node's load is
    gathered alone on one node"; False is line 6 alone."""
    parts: dict[int, dict[int, list[float]]] = {}
    for k, d, ld, st in zip(
        window.key.tolist(),
        window.node.tolist(),
        window.load.tolist(),
        window.state.tolist(),
        strict=True,
    ):
        if ld > 0:
            entry = parts.setdefault(k, {}).setdefault(d, [0.0, 0.0])
            entry[0] += ld
            entry[1] += st
    keys = np.array(sorted(parts), dtype=np.int64)
    home = dict(zip(keys.tolist(), home_nodes(keys, n).tolist(), strict=True)) if len(keys) else {}
    node_load = [0.0] * n
    for holders in parts.values():
        for d, (ld, _) in holders.items():
            node_load[d] += ld
    total = sum(node_load)
    mean = total / n
    ul = (1 + tau) * mean
    eps = 1e-12 * total + 1e-9
    pool: list[list] = []  # C: [key, amount, state, origin]
    key_total = {k: sum(ld for ld, _ in holders.values()) for k, holders in parts.items()}

    def underloaded() -> set[int]:
        return {t for t in range(n) if node_load[t] < mean - eps}

    def take(k: int, d: int, amount: float) -> float:
        """Move ``amount`` of k's part on d into C (the whole part when within eps)."""
        part = parts[k][d]
        moved_state = part[1] * (amount / part[0])
        if amount >= part[0] - eps:
            amount, moved_state = part[0], part[1]
            del parts[k][d]
        else:
            part[0] -= amount
            part[1] -= moved_state
        node_load[d] -= amount
        pool.append([k, amount, moved_state, d])
        return amount

    def unload_priority(k: int, d: int, dstar: set[int]) -> int | None:
        """UNLOADSELECT line 4: the cell of moving k's part off d, among (merge, back),
        (merge, across), (merge, out), (unchanged, back), (unchanged, across)."""
        holders, h = parts[k], home[k]
        merge_to = [t for t in holders if t != d and t in dstar]
        if d == h:
            return cell(MERGE, OUT) if merge_to else None
        if h in dstar and h in holders:
            return cell(MERGE, BACK)
        if any(t != h for t in merge_to):
            return cell(MERGE, ACROSS)
        if h in dstar:
            return cell(UNCHANGED, BACK)
        if any(t not in holders and t != h for t in dstar):
            return cell(UNCHANGED, ACROSS)
        return None

    def unload(d: int) -> None:
        """UNLOAD(d): UNLOADSELECT until L(d) <= UL."""
        while node_load[d] - ul > eps:
            chi = node_load[d] - ul
            dstar = underloaded()
            on_d = [k for k in parts if d in parts[k]]
            ranked = []
            for k in on_d:
                c = unload_priority(k, d, dstar)
                if c is not None:
                    ld, st = parts[k][d]
                    ranked.append((c, st / ld, -ld, k))
            if ranked:
                k = min(ranked)[3]
            else:  # line 6: the smallest MC / L(k), then the larger part, the smaller key
                k = min(
                    (
                        heavy_first and key_total[k] <= mean + eps,  # heavy keys first
                        parts[k][d][1] / parts[k][d][0],
                        -parts[k][d][0],
                        k,
                    )
                    for k in on_d
                )[3]
            take(k, d, min(parts[k][d][0], chi))  # lines 7-10: whole, or chi of it

    def loading_priority(piece: list, dstar: set[int], by_load: list[int]) -> tuple[int, int]:
        """LOADINGSELECT line 12: the cell of placing the piece, and where."""
        k, _, _, origin = piece
        holders, h = parts.get(k, {}), home[k]
        merge_to = [t for t in holders if t in dstar]
        if merge_to:
            if h in dstar and h in holders:
                return cell(MERGE, BACK), h
            target = min(merge_to, key=lambda t: (node_load[t], t))
            return cell(MERGE, OUT if origin == h else ACROSS), target
        whole = not holders and sum(1 for p in pool if p[0] == k) == 1
        row = UNCHANGED if whole else SPLIT
        if h in dstar:
            return cell(row, BACK), h
        return cell(row, OUT if origin == h else ACROSS), by_load[0]

    # Algorithm 2, lines 1-7: unload every overloaded node into C, then load C.
    for d in range(n):
        if node_load[d] > ul + eps:
            unload(d)
    while pool:
        dstar = underloaded() or {int(np.argmin(node_load))}
        by_load = sorted(dstar, key=lambda t: (node_load[t], t))
        ranked = []
        for i, p in enumerate(pool):
            c, where = loading_priority(p, dstar, by_load)
            ranked.append((c, -p[1], p[0], p[3], i, where))  # cell, larger, key, origin
        *_, i, target = min(ranked)
        k, amount, state, _ = pool.pop(i)
        entry = parts.setdefault(k, {}).setdefault(target, [0.0, 0.0])
        entry[0] += amount  # lines 13-14: the whole piece onto d
        entry[1] += state
        node_load[target] += amount
        if node_load[target] > ul + eps:  # lines 15-16 (the prose: d is now overloaded)
            unload(target)
    out = [(k, d, ld, st) for k, holders in parts.items() for d, (ld, st) in holders.items()]
    if not out:
        return Window(*(np.array([]) for _ in range(4)))
    k, d, ld, st = (np.array(col) for col in zip(*out, strict=True))
    return Window(k.astype(np.int64), d.astype(np.int32), ld, st)
