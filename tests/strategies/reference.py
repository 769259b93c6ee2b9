"""Reference implementations kept as test oracles.

The first, straightforward QMMP (whole-data, no shortcuts): the production class is
rewritten for speed and must make exactly the same decisions on every window routed by
the strategy's own table (``test_reference_equivalence.py``). MNRT's oracle is the
paper's pseudo-code transcribed apart, in ``paper_mnrt.py`` (the copy of the production
loop that stood here checked the code against itself).
"""
# ruff: noqa: E501

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from balancebench.core.routing_table import segment_starts
from balancebench.strategies.base import lay_end_to_end


@dataclass
class Parts:
    key: np.ndarray
    node: np.ndarray
    load: np.ndarray
    state: np.ndarray


def reference_qmmp(parts: Parts, n_nodes: int, tolerance: float) -> Parts:
    return _qmmp(None, parts, n_nodes, tolerance)


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


def reference_choices(
    cand: np.ndarray, heavy: np.ndarray, sent: list[int], all_nodes: bool, d: int
) -> list[int]:
    """PKG / D-Choices / W-Choices' per-tuple choice as the plain Python loop it was
    before it was compiled (``choice_kernels.choose_nodes``): ``sent`` is updated in place."""
    n_nodes = len(sent)
    out = []
    for i in range(len(cand)):
        if heavy[i] and all_nodes:
            j = min(range(n_nodes), key=sent.__getitem__)  # ties: lower node
        elif heavy[i] and d > 2:
            j = min(cand[i][:d], key=sent.__getitem__)  # ties: earlier candidate
        else:
            a, b = cand[i][0], cand[i][1]
            j = a if sent[a] <= sent[b] else b
        sent[j] += 1
        out.append(j)
    return out
