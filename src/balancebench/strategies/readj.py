"""``readj``: key-granular readjustment (Gedik, VLDBJ 2014), paper 000's whole-key baseline.

As paper 000 describes it (§2 and §5):

1. Only keys whose window load is at least ``min_share`` of the total are *tracked*; every
   other key returns to its home node ``F(k)`` (it leaves the routing table).
2. Keys are never split: a tracked key held by several nodes (only after adopting a
   foreign placement) is first gathered on the node holding most of it.
3. The most loaded node is paired with the least loaded one (then the next least loaded
   if that pair cannot improve), and every move of one tracked key and every swap of two
   tracked keys between the pair is evaluated; the action that most reduces the pair's
   load difference is applied. This repeats until the imbalance is within tolerance, no
   pair has an improving action, or the budget (``max_iterations``, ``max_seconds``) is
   spent.

The best swap is found by a sorted search over the partner's keys, which picks the same
swap as scanning all pairs. ``MigrationPlan.reached_tolerance`` tells whether the
tolerance was met; ``plan.info`` says why the loop stopped.
"""

from __future__ import annotations

import numpy as np

from balancebench.core.cost_model import plan_clock
from balancebench.core.hashing import home_nodes
from balancebench.strategies.base import Delta, PlanView, Strategy


class ReadjStrategy(Strategy):
    name = "readj"
    scales_out = True
    reference = "paper 000 §2/§5 baseline Readj (Gedik, VLDBJ 2014)"
    param_schema = {
        "min_share": {
            "type": "number",
            "exclusiveMinimum": 0,
            "maximum": 1,
            "default": 1e-4,
            "description": "A key is tracked (may leave home) when its load is at least "
            "this share of the window's total load.",
        },
        "max_iterations": {
            "type": "integer",
            "minimum": 1,
            "default": 100_000,
            "description": "Budget: applied moves/swaps per plan.",
        },
        "max_seconds": {
            "type": "number",
            "exclusiveMinimum": 0,
            "default": 10.0,
            "description": "Budget: CPU time per plan (s), on the plan's own clock "
            "(balancebench.core.cost_model.plan_clock).",
        },
    }

    def _rebalance(self, view: PlanView) -> Delta:
        started = plan_clock()
        loads = view.loads
        n = view.n_nodes
        total = float(loads.load.sum())
        threshold = self.settings["min_share"] * total
        router = view.router
        # Every row of a key in Y, plus the rows heavy enough to be tracked on their own.
        in_y = (
            np.isin(loads.key, router.keys)
            if hasattr(router, "keys") and len(router)
            else np.zeros(len(loads.key), bool)
        )
        rows = np.flatnonzero(in_y | (loads.load >= threshold))
        keys = loads.key[rows]
        key_total: dict[int, float] = {}
        key_state: dict[int, float] = {}
        key_rows: dict[int, list[int]] = {}
        for r, k in zip(rows.tolist(), keys.tolist(), strict=True):
            key_total[k] = key_total.get(k, 0.0) + float(loads.load[r])
            key_state[k] = key_state.get(k, 0.0) + float(loads.state[r])
            key_rows.setdefault(k, []).append(r)
        uniq = np.fromiter(key_rows, dtype=np.int64, count=len(key_rows))
        homes = dict(zip(uniq.tolist(), home_nodes(uniq, n).tolist(), strict=True))
        node_loads = view.node_loads.copy()
        where: dict[int, int] = {}
        per_node: list[dict[int, float]] = [{} for _ in range(n)]
        for k, krows in key_rows.items():
            if key_total[k] >= threshold:
                # Tracked: whole on the node holding most of it.
                target = int(loads.node[max(krows, key=lambda r: loads.load[r])])
            else:
                target = homes[k]  # untracked keys return home
            for r in krows:
                node_loads[loads.node[r]] -= loads.load[r]
            node_loads[target] += key_total[k]
            where[k] = target
            if key_total[k] >= threshold:
                per_node[target][k] = key_total[k]

        iterations, stopped = 0, "tolerance"
        while True:
            mean = node_loads.mean()
            if mean <= 0 or node_loads.max() / mean - 1 <= view.tolerance:
                stopped = "tolerance"
                break
            if iterations >= self.settings["max_iterations"]:
                stopped = "max_iterations"
                break
            if plan_clock() - started > self.settings["max_seconds"]:
                stopped = "max_seconds"
                break
            if not self._improve_one_pair(node_loads, per_node, where, view.eps):
                stopped = "no_improving_move"
                break
            iterations += 1
        self.last_info = {
            "iterations": iterations,
            "stopped": stopped,
            "tracked_keys": sum(len(p) for p in per_node),
        }

        moved = [
            k
            for k, krows in key_rows.items()
            if any(loads.node[r] != where[k] for r in krows) or len(krows) > 1
        ]
        d_rows, d_load, d_state = [], [], []
        a_key, a_node, a_load, a_state = [], [], [], []
        for k in moved:
            for r in key_rows[k]:
                d_rows.append(r)
                d_load.append(0.0)
                d_state.append(0.0)
            a_key.append(k)
            a_node.append(where[k])
            a_load.append(key_total[k])
            a_state.append(key_state[k])
        return Delta(
            rows=np.array(d_rows, dtype=np.int64),
            new_load=np.array(d_load),
            new_state=np.array(d_state),
            add_key=np.array(a_key, dtype=np.int64),
            add_node=np.array(a_node, dtype=np.int32),
            add_load=np.array(a_load),
            add_state=np.array(a_state),
            info=self.last_info,
        )

    @staticmethod
    def _improve_one_pair(
        node_loads: np.ndarray, per_node: list[dict[int, float]], where: dict[int, int], eps: float
    ) -> bool:
        """Apply the best move or swap between the most loaded node and the least loaded
        node that admits an improving one; False when no pair does."""
        hi = int(np.argmax(node_loads))
        hi_keys = np.fromiter(per_node[hi], dtype=np.int64, count=len(per_node[hi]))
        hi_load = np.fromiter(per_node[hi].values(), dtype=np.float64, count=len(per_node[hi]))
        if len(hi_keys) == 0:
            return False
        for lo in np.argsort(node_loads, kind="stable").tolist():
            if lo == hi:
                continue
            diff = node_loads[hi] - node_loads[lo]
            if diff <= eps:
                return False
            # Move x: the pair's difference becomes |diff - 2x|.
            move_gap = np.abs(diff - 2 * hi_load)
            i = int(np.argmin(move_gap))
            best = (float(move_gap[i]), "move", i, -1)
            lo_keys = np.fromiter(per_node[lo], dtype=np.int64, count=len(per_node[lo]))
            lo_load = np.fromiter(per_node[lo].values(), dtype=np.float64, count=len(per_node[lo]))
            if len(lo_keys):
                # Swap x (hi) with y (lo): |diff - 2(x - y)|, best y near x - diff / 2.
                order = np.argsort(lo_load, kind="stable")
                sorted_lo = lo_load[order]
                want = hi_load - diff / 2
                pos = np.searchsorted(sorted_lo, want)
                for cand in (np.clip(pos - 1, 0, len(order) - 1), np.clip(pos, 0, len(order) - 1)):
                    gap = np.abs(diff - 2 * (hi_load - sorted_lo[cand]))
                    j = int(np.argmin(gap))
                    if gap[j] < best[0]:
                        best = (float(gap[j]), "swap", j, int(order[cand[j]]))
            if best[0] < diff - eps:
                _, kind, i, j = best
                k = int(hi_keys[i])
                x = per_node[hi].pop(k)
                per_node[lo][k] = x
                where[k] = lo
                node_loads[hi] -= x
                node_loads[lo] += x
                if kind == "swap":
                    k2 = int(lo_keys[j])
                    y = per_node[lo].pop(k2)
                    per_node[hi][k2] = y
                    where[k2] = hi
                    node_loads[lo] -= y
                    node_loads[hi] += y
                return True
        return False
