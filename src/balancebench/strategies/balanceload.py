"""``balanceload``: greedy bucket rebalancing over a bucket map proxy (paper 001, §4).

Keys hash into ``B`` buckets (``b = H(k) mod B``); the bucket map proxy
(``routing_table.BucketMap``) names the node owning each bucket. BalanceLoad: sort the nodes
by load and the buckets of the most loaded node by rate ``T_b``; move the
highest-rate bucket of the most loaded node to the least loaded node; repeat until the
improvement of the standard deviation of node load falls below ``min_improvement``
(relative to the mean load). ``O(n log n + m log m)`` per step.

**[interpretation]** The paper moves "the highest-rate bucket"; when that bucket is so
large that moving it would not lower the standard deviation by the threshold, we try the
node's next buckets in decreasing rate and stop only when none qualifies (moving a
bucket that raises the deviation is never done). The paper's node provisioning (elastic
scaling) is the ``elastic`` model (``models/elastic/``, whose ``time_steps`` calls
``balance_load``); here the node count is fixed.

**Trigger (UIT).** Paper 001 runs BalanceLoad only when the standard deviation of node
utilisation exceeds ``UIT``. Without node capacities here, utilisation is a node's load
relative to the mean: a plan rebalances only when ``std(L) / mean(L) > uit`` (Param
``uit``, default 0.05 as the ``elastic`` model's ``UIT``; 0 = every plan, the behaviour
before the trigger). An untriggered plan keeps the map and moves nothing.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from balancebench.core.loads import KeyLoads
from balancebench.core.routing_table import BucketMap
from balancebench.strategies.base import Delta, PlanView, Strategy


def balance_load(
    rate: np.ndarray,
    on_node: np.ndarray,
    owner: np.ndarray,
    node_loads: np.ndarray,
    threshold: float,
    max_moves: int,
    movable: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int, int]]]:
    """Paper 001's BalanceLoad greedy, as a pure function (inputs are not modified).

    - ``rate``: ``T_b`` per bucket (length ``B``); ``on_node``: ``(B, n)`` load of each
      bucket on each node (all on its owner when traffic was routed by ``owner``);
    - ``owner``: node of each bucket; ``node_loads``: load per node (length ``n``);
    - ``threshold``: a move must lower the std of node load by at least this (absolute);
    - ``max_moves``: budget of moves; ``movable``: optional mask of buckets that may move
      (None = all).

    Each step moves the highest-rate bucket of the most loaded node whose move lowers the
    std by ``threshold`` (trying the node's buckets in decreasing rate) to the least loaded
    node; it stops when no bucket qualifies. Returns ``(owner, node_loads, moves)`` after
    the moves, ``moves`` = ``[(bucket, from_node, to_node)]`` in order (a bucket may move
    more than once).
    """
    on_node = np.array(on_node, dtype=np.float64, copy=True)
    owner = owner.copy()
    node_loads = node_loads.copy()
    moves: list[tuple[int, int, int]] = []
    while len(moves) < max_moves:
        order = np.argsort(node_loads, kind="stable")
        lo, hi = int(order[0]), int(order[-1])
        if hi == lo:
            break
        std = node_loads.std()
        eligible = (owner == hi) & (rate > 0)
        if movable is not None:
            eligible &= movable
        candidates = np.flatnonzero(eligible)
        best = None
        for b in candidates[np.argsort(-rate[candidates], kind="stable")].tolist():
            trial = node_loads - on_node[b]
            trial[lo] += rate[b]
            if std - trial.std() >= threshold and std - trial.std() > 0:
                best = (b, trial)
                break
        if best is None:
            break
        b, node_loads = best
        on_node[b] = 0.0
        on_node[b, lo] = rate[b]
        owner[b] = lo
        moves.append((b, hi, lo))
    return owner, node_loads, moves


class BalanceLoadStrategy(Strategy):
    name = "balanceload"
    reference = "paper 001 §4 BalanceLoad over the bucket map proxy"
    param_schema = {
        "buckets": {
            "type": "integer",
            "minimum": 1,
            "maximum": 65536,
            "default": 1024,
            "description": "Buckets B of the bucket map (keys hash into them).",
        },
        "min_improvement": {
            "type": "number",
            "minimum": 0,
            "default": 1e-3,
            "description": "Stop when a move lowers the std of node load by less than this "
            "share of the mean load.",
        },
        "max_moves": {
            "type": "integer",
            "minimum": 1,
            "default": 100_000,
            "description": "Budget: bucket moves per plan.",
        },
        "uit": {
            "type": "number",
            "minimum": 0,
            "maximum": 10,
            "default": 0.05,
            "description": "Paper 001's UIT: rebalance only when std / mean of node load "
            "exceeds this (0 = every plan).",
        },
    }

    def initial_router(self, n_nodes: int) -> BucketMap:
        return BucketMap.default(n_nodes, int(self.settings["buckets"]))

    def adopt(self, loads: KeyLoads, n_nodes: int) -> None:
        """A bucket map cannot hold an arbitrary placement: start from the default map."""
        self.routing = self.initial_router(n_nodes)

    def _rebalance(self, view: PlanView) -> Delta:
        router: BucketMap = view.router
        spread = float(view.node_loads.std()) / max(view.mean, 1e-300)
        if spread <= self.settings["uit"]:  # below UIT: BalanceLoad is not triggered
            return replace(Delta.empty(), router=router, info={"bucket_moves": 0})
        loads = view.loads
        n, n_buckets = view.n_nodes, router.n_buckets
        bucket = router.buckets(loads.key)
        rate = np.bincount(bucket, weights=loads.load, minlength=n_buckets)
        # Load of each bucket on each node (all on its owner when the window was routed
        # by this map), so a move changes node loads by exactly what moves.
        on_node = np.bincount(
            bucket.astype(np.int64) * n + loads.node, weights=loads.load, minlength=n_buckets * n
        ).reshape(n_buckets, n)
        threshold = self.settings["min_improvement"] * max(view.mean, 1e-300)
        owner, _, moves = balance_load(
            rate, on_node, router.owner, view.node_loads, threshold, self.settings["max_moves"]
        )
        moved = {b for b, _, _ in moves}
        steps = len(moves)
        new_map = BucketMap(n, owner.astype(np.int32))
        if not moved:
            return replace(Delta.empty(), router=new_map, info={"bucket_moves": 0})
        rows = np.flatnonzero(np.isin(bucket, np.fromiter(moved, dtype=np.int64)))
        # Rows already on their bucket's new owner stay; the others move there whole.
        rows = rows[loads.node[rows] != owner[bucket[rows]]]
        return Delta(
            rows=rows,
            new_load=np.zeros(len(rows)),
            new_state=np.zeros(len(rows)),
            add_key=loads.key[rows],
            add_node=owner[bucket[rows]].astype(np.int32),
            add_load=loads.load[rows],
            add_state=loads.state[rows],
            router=new_map,
            info={"bucket_moves": steps},
        )
