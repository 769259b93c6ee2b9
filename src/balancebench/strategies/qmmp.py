"""``qmmp``: Quickly Make Migration Plan (paper 000, §4.2, Algorithm 3).

Framework of Algorithm 2: every node above ``UL = (1 + tau) * Lbar`` unloads into a pool
``C``; the pool is then loaded onto the nodes at or below ``Lbar``.

- ``UNLOADSELECT(d)``: ``chi = L(d) - UL``; take the *next* key of ``d`` in storage order
  (no sorting, no choice); unload it whole if ``L(k) <= chi``, else unload ``chi`` of it.
- ``LOADINGSELECT(C)``: for each pooled piece and each node with ``L(d) <= Lbar`` in node
  order: ``chi = Lbar - L(d)``; load the whole piece if it fits, else ``chi`` of it.

Keys are split freely, so every node ends at or below ``UL`` (the paper's "perfect"
balance) at O(K) cost. Both phases are sequential fills ("pour in order"), done here
with cumulative sums instead of a Python loop; the decisions are the algorithm's.
"Storage order" is the row order of the ``KeyLoads`` the caller passes.
"""

from __future__ import annotations

import numpy as np

from balancebench.routing import segment_starts
from balancebench.strategies.base import Parts, Strategy, lay_end_to_end


class QmmpStrategy(Strategy):
    name = "qmmp"
    reference = "paper 000 §4.2 Algorithm 3 (QMMP)"

    def _rebalance(self, parts: Parts, n_nodes: int, tolerance: float) -> Parts:
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
