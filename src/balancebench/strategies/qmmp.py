"""``qmmp``: Quickly Make Migration Plan (paper 000, §4.2, Algorithm 3).

Framework of Algorithm 2: every node above ``UL = (1 + tau) * Lbar`` unloads into a pool
``C``; the pool is then loaded onto the nodes at or below ``Lbar``.

- ``UNLOADSELECT(d)``: ``chi = L(d) - UL``; take the *next* key of ``d`` in storage order
  (no sorting, no choice); unload it whole if ``L(k) <= chi``, else unload ``chi`` of it.
- ``LOADINGSELECT(C)``: for each pooled piece and each node with ``L(d) <= Lbar`` in node
  order: ``chi = Lbar - L(d)``; load the whole piece if it fits, else ``chi`` of it.

Keys are split freely, so every node ends at or below ``UL`` at O(K) cost. "Storage
order" is the order in which the node reported its keys (its rows of ``KeyLoads``). Both
phases are sequential fills ("pour in order"): unloading reads each overloaded node's
rows only up to ``chi`` (a cumulative sum over a growing prefix), loading is one merge
of the pool with the free room; the decisions are exactly the algorithm's.
"""

from __future__ import annotations

import numpy as np

from balancebench.strategies.base import Delta, PlanView, Strategy, lay_end_to_end


def unload_in_order(load: np.ndarray, chi: float) -> np.ndarray:
    """Amount taken from each row, in order, until ``chi`` is taken (whole rows, then
    a part of the row that crosses ``chi``). Reads only the prefix it needs."""
    taken = np.zeros(0)
    start = 0
    size = 256
    while chi > 0 and start < len(load):
        chunk = load[start : start + size]
        cum = np.cumsum(chunk)
        take = np.clip(chi - (cum - chunk), 0.0, chunk)
        taken = np.r_[taken, take]
        chi -= float(cum[-1])
        start += len(chunk)
        size *= 4
    return taken


class QmmpStrategy(Strategy):
    name = "qmmp"
    scales_out = True
    reference = "paper 000 §4.2 Algorithm 3 (QMMP)"

    def _rebalance(self, view: PlanView) -> Delta:
        loads = view.loads
        over = np.flatnonzero(view.node_loads > view.upper + view.eps)
        if len(over) == 0:
            return Delta.empty()
        # UNLOAD each overloaded node, in node order, its keys in storage order.
        rows, taken = [], []
        after = view.node_loads.copy()
        for d in over:
            start = int(view.offsets[d])
            take = unload_in_order(loads.load[view.rows(d)], view.node_loads[d] - view.upper)
            hit = np.flatnonzero(take > view.eps)
            rows.append(start + hit)
            taken.append(take[hit])
            after[d] -= take[hit].sum()
        row = np.concatenate(rows)
        amount = np.concatenate(taken)
        share = amount / loads.load[row]
        pool_key = loads.key[row]
        pool_state = loads.state[row] * share
        # LOADING: fill nodes at or below the mean, in node order, up to the mean.
        dest = np.flatnonzero((after <= view.mean) & (view.mean - after > view.eps))
        room = view.mean - after[dest]
        room[-1] += max(0.0, amount.sum() - room.sum())  # float slack goes to the last node
        pi, di, piece = lay_end_to_end(
            np.zeros(len(amount), np.int8), amount, np.zeros(len(room), np.int8), room, 0.0
        )
        return Delta(
            rows=row,
            new_load=loads.load[row] - amount,
            new_state=loads.state[row] - pool_state,
            add_key=pool_key[pi],
            add_node=dest[di].astype(np.int32),
            add_load=piece,
            add_state=pool_state[pi] * piece / amount[pi],
            add_src_row=row[pi],
        )
