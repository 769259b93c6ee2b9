"""``mnrt``: split keys on demand, merge where possible (paper 000, §4.3, Algorithm 4).

Framework of Algorithm 2 (unload every node above ``UL = (1 + tau) * Lbar`` into a pool
``C``, then load the pool onto the underloaded nodes ``D* = {d : L(d) < Lbar}``), with
the choices of Table 2. A move is classified by its *effect* on the key (gamma1 merge:
the part joins another part of the key; gamma2 unchanged: a whole part moves to a node
without the key; gamma3 split: only part of the key moves) and its *action* (delta1
move-back to the home node ``F(k)``; delta2 move-across between non-home nodes; delta3
move-out of the home node).

- ``UNLOADSELECT(d)``: ``chi = L(d) - UL``. Pick a part of ``d`` in the priority
  (merge,back) > (merge,across) > (merge,out) > (unchanged,back) > (unchanged,across),
  judged against ``D*``; if none qualifies, the part with the smallest ``MC / L(k)``
  (state held per unit of load: the cheapest to migrate). Unload it whole if
  ``L(k) <= chi``, else ``chi`` of it (lines 7-10: only large keys are split).

Three places where the code could differ from Algorithm 4 are parameters, each measured
both ways (docs/explanation/strategies.md, "MNRT as written"):

- ``unload_priority`` (default ``paper``): the priority key is picked first and split by
  ``chi`` when larger, as lines 4-10 say; ``whole_parts`` lets only keys with
  ``L(k) <= chi`` into a cell (what this module did before; no better on any window
  measured).
- ``unload_fallback`` (default ``heavy_first``, **not** the paper's line 6): keys heavier
  than a node's share are taken first, then the smallest ``MC / L(k)``. The paper's
  line 6 alone (``paper``) evicts the many small keys around a hot key one by one:
  2-30x the routing entries and up to 100x the plan time at Zipf 1.2 (measured).
- ``reunload_when`` (default ``node_over_ul``): after a whole piece is loaded, ``UNLOAD``
  the node when it now exceeds ``UL`` (the prose: "treat the node as overloaded"); the
  pseudo-code's line 15 reads ``L(k) >= UL`` (``key_over_ul``), and literally applied it
  leaves the plan far from the tolerance (imbalance 0.5-0.95, measured).
- ``LOADINGSELECT(C)``: pick the (piece, node) pair in the priority over all nine cells
  (merge,back) > (merge,across) > (merge,out) > (unchanged,back) > (unchanged,across) >
  (unchanged,out) > (split,back) > (split,across) > (split,out), place the **whole**
  piece; if the node now exceeds ``UL``, ``UNLOAD`` it again instead of splitting eagerly.
- Isolation of a key heavier than one node's share (``L(k) > Lbar``)
  **[interpretation]**: the paper gives one sentence ("gather it alone on one node").
  We read it as: such a key is the one that absorbs the overflow of any node it is on.
  When no priority move applies, a node splits its heavy key before any lighter key, so
  lighter keys stay whole where they are, and a heavy piece loaded onto a node fills
  that node up to ``UL`` with the rest moving on. (Evicting every other key from the
  heavy key's node instead moves thousands of keys out of their home and multiplies
  the routing table, the opposite of MNRT's aim.)

Tie-breaks the paper leaves open (documented choices): inside one priority cell,
unloading prefers the smallest ``MC / L``, then the larger part, then the smaller key;
loading prefers the larger piece, then the smaller key; the target of an across/out
move is the least-loaded eligible node. ``D*`` is re-evaluated at every selection.

Implementation: only keys the plan can act on are tracked in Python dicts: the keys of
the routing table ``Y`` (the only ones that can be split or away from home, see the
window contract in ``base``) and the keys this plan touches. Every other key is whole on
its home node, so it is never a priority candidate; for the fallback each node's
untouched rows are searched with numpy (best row first) instead of sorting all of them.
``tests/strategies/paper_mnrt.py`` transcribes the pseudo-code apart (whole data, plain
dicts); both make the same decisions on every window routed by the strategy's own table,
under either fallback reading.

Two-stream rule (paper 000 §4.3, one sentence: "keep the large side in place and send
the small side") for equi-joins, :meth:`MnrtStrategy.replicated_sides`: a key split over
several nodes of ``Y(k)`` whose one side holds at least ``two_stream_ratio`` times the
other side's tuples replicates its small side: a small-side tuple is stored on (and
probes) every node of ``Y(k)``, a large-side tuple is stored ONE and probes only the
node it is stored on, which holds every small-side tuple of the key. The plan itself is
unchanged; the join executor applies the rule (``spark.routers``). **[interpretation]**
"much larger" is the ratio parameter (default 2: replicating the small side then ships
fewer copies than sending every large-side probe to all nodes of ``Y(k)``); 0 turns the
rule off, which is Algorithm 1's operator routing ALL for every split key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from balancebench.core.hashing import home_nodes
from balancebench.strategies.base import NO_SIDE, SIDE_R, SIDE_S, Delta, PlanView, Strategy

# Priority cells of Table 2, in the order Algorithm 4 tries them.
MERGE_BACK, MERGE_ACROSS, MERGE_OUT = 0, 1, 2
UNCHANGED_BACK, UNCHANGED_ACROSS, UNCHANGED_OUT = 3, 4, 5
SPLIT_BACK, SPLIT_ACROSS, SPLIT_OUT = 6, 7, 8
# After this many best-row searches on one node, sort its rows once instead.
_SEARCHES_BEFORE_SORT = 8


@dataclass
class _Piece:
    """Load unloaded into the pool ``C``: ``amount`` of ``key`` that came from ``origin``."""

    key: int
    amount: float
    state: float
    origin: int


class MnrtStrategy(Strategy):
    name = "mnrt"
    scales_out = True
    reference = "paper 000 §4.3 Algorithm 4 (MNRT), Table 2"
    param_schema = {
        "unload_priority": {
            "type": "string",
            "enum": ["paper", "whole_parts"],
            "default": "paper",
            "description": "UNLOADSELECT line 4: paper = the priority key is picked first and "
            "split by chi if it is larger (lines 7-10); whole_parts = only keys with "
            "L(k) <= chi enter a priority cell (the others go to the fallback).",
        },
        "unload_fallback": {
            "type": "string",
            "enum": ["paper", "heavy_first"],
            "default": "heavy_first",
            "description": "UNLOADSELECT line 6: heavy_first = keys heavier than a node's "
            "share first (our reading of the isolation sentence), then the smallest MC / L(k); "
            "paper = the smallest MC / L(k) only (measured: 2-30x the routing entries and "
            "up to 100x the plan time at Zipf 1.2; docs/history.md, issue 14).",
        },
        "reunload_when": {
            "type": "string",
            "enum": ["node_over_ul", "key_over_ul"],
            "default": "node_over_ul",
            "description": "LOADINGSELECT line 15: node_over_ul = UNLOAD(d) when the node "
            "now exceeds UL (the prose: 'treat the node as overloaded'); key_over_ul = only "
            "when the placed piece itself is at least UL (the pseudo-code, literally; "
            "measured: the plan then misses the tolerance, imbalance 0.5-0.95).",
        },
        "two_stream_ratio": {
            "type": "number",
            "minimum": 0,
            "maximum": 1e9,
            "default": 2.0,
            "description": "Two-stream rule (equi-joins): a split key whose one side holds "
            "at least this many times the other side's tuples replicates the small side to "
            "every node of Y(k) and probes the large side only where it is stored; 0 = off "
            "(every probe of a split key goes to all its nodes).",
        },
    }

    def replicated_sides(self, r_tuples: np.ndarray, s_tuples: np.ndarray) -> np.ndarray:
        ratio = float(self.settings["two_stream_ratio"])
        r = np.asarray(r_tuples, dtype=np.float64)
        s = np.asarray(s_tuples, dtype=np.float64)
        side = np.full(len(r), NO_SIDE, dtype=np.int8)
        if ratio <= 0:
            return side
        side[s >= ratio * r] = SIDE_R  # R is the small side (also when R holds nothing)
        side[(r >= ratio * s) & (r > s)] = SIDE_S
        side[(r == 0) & (s == 0)] = NO_SIDE
        return side

    def _rebalance(self, view: PlanView) -> Delta:
        return _Mnrt(view, self.settings).run()


class _NodeRows:
    """A node's untouched rows in fallback order, found lazily: heavy keys first, then
    the smallest ``MC / L``, the larger load, the smaller key."""

    def __init__(self, view: PlanView, d: int, heavy_limit: float) -> None:
        rows = view.rows(d)
        self.start = rows.start
        load = view.loads.load[rows]
        self.key = view.loads.key[rows]
        self.load = load
        self.light = (load <= heavy_limit).astype(np.int8)  # 0 sorts first: heavy
        with np.errstate(divide="ignore", invalid="ignore"):
            self.ratio = view.loads.state[rows] / load
        self.available = load > 0.0
        self.order: list[int] | None = None
        self.searches = 0

    def discard(self, i: int) -> None:
        self.available[i] = False

    def best(self) -> tuple[tuple, int] | None:
        """(sort key, local index) of the best available row, or None."""
        if self.order is None:
            self.searches += 1
            if self.searches > _SEARCHES_BEFORE_SORT:
                idx = np.flatnonzero(self.available)
                sub = np.lexsort((self.key[idx], -self.load[idx], self.ratio[idx], self.light[idx]))
                self.order = idx[sub][::-1].tolist()  # pop() from the end
            else:
                idx = np.flatnonzero(self.available)
                if len(idx) == 0:
                    return None
                for column, pick in (
                    (self.light, np.min),
                    (self.ratio, np.min),
                    (-self.load, np.min),
                    (self.key, np.min),
                ):
                    values = column[idx]
                    idx = idx[values == pick(values)]
                    if len(idx) == 1:
                        break
                return self._sort_key(int(idx[0])), int(idx[0])
        while self.order and not self.available[self.order[-1]]:
            self.order.pop()
        if not self.order:
            return None
        i = self.order[-1]
        return self._sort_key(i), i

    def _sort_key(self, i: int) -> tuple:
        return (bool(self.light[i]), float(self.ratio[i]), -float(self.load[i]), int(self.key[i]))


class _Mnrt:
    """One planning pass over a view."""

    def __init__(self, view: PlanView, settings: dict | None = None) -> None:
        settings = settings or {}
        self.split_priority = settings.get("unload_priority", "paper") == "paper"
        self.heavy_first = settings.get("unload_fallback", "heavy_first") == "heavy_first"
        self.key_trigger = settings.get("reunload_when", "node_over_ul") == "key_over_ul"
        self.view = view
        self.n = view.n_nodes
        self.loads = view.node_loads.tolist()
        self.mean, self.upper, self.eps = view.mean, view.upper, view.eps
        lk = view.loads
        self.row_load = lk.load
        self.row_state = lk.state
        # Tracked keys: parts, homes and totals. A part is a row (current values in
        # ``current``) or a part this plan created on a node without a row of the key.
        self.parts: dict[int, dict[int, list]] = {}  # key -> node -> [load, state, row|-1]
        self.tracked_on: list[dict[int, None]] = [{} for _ in range(self.n)]
        self.home: dict[int, int] = {}
        self.key_total: dict[int, float] = {}
        self.touched_rows: set[int] = set()
        # Row parts emptied by this plan (kept for the delta; revived if load comes back).
        self.emptied: dict[int, dict[int, list]] = {}
        router = view.router
        if len(router) and hasattr(router, "keys"):
            rows = np.flatnonzero(np.isin(lk.key, router.keys) & (lk.load > 0))
            for r, k, d in zip(
                rows.tolist(), lk.key[rows].tolist(), lk.node[rows].tolist(), strict=True
            ):
                self._track_row(k, d, r)
            keys = np.fromiter(self.parts, dtype=np.int64, count=len(self.parts))
            self.home.update(zip(keys.tolist(), home_nodes(keys, self.n).tolist(), strict=True))
        self.node_rows: dict[int, _NodeRows] = {}
        self.pool: list[_Piece] = []
        self.pool_count: dict[int, int] = {}
        n_rows = len(lk.key)
        self.budget = 100 * (n_rows + self.n) * (1 + int(1 / view.tolerance))

    def _track_row(self, k: int, d: int, r: int) -> None:
        load = float(self.row_load[r])
        self.parts.setdefault(k, {})[d] = [load, float(self.row_state[r]), r]
        self.tracked_on[d][k] = None
        self.key_total[k] = self.key_total.get(k, 0.0) + load
        self.touched_rows.add(r)

    def _rows_of(self, d: int) -> _NodeRows:
        if d not in self.node_rows:
            # heavy_first sorts keys above a node's share first; the paper does not.
            limit = self.mean + self.eps if self.heavy_first else math.inf
            self.node_rows[d] = _NodeRows(self.view, d, limit)
            nr = self.node_rows[d]
            end = nr.start + len(nr.key)
            for r in self.touched_rows:  # tracked rows are searched as dynamic parts
                if nr.start <= r < end:
                    nr.discard(r - nr.start)
        return self.node_rows[d]

    # ---- Algorithm 2 -------------------------------------------------------------------
    def run(self) -> Delta:
        for d in range(self.n):
            if self.loads[d] > self.upper + self.eps:
                self.unload(d)
        self.loading()
        return self.delta()

    def underloaded(self) -> set[int]:
        return {t for t in range(self.n) if self.loads[t] < self.mean - self.eps}

    # ---- UNLOAD / UNLOADSELECT ----------------------------------------------------------
    def unload(self, d: int) -> None:
        chi = self.loads[d] - self.upper
        if chi <= self.eps:
            return
        dstar = self.underloaded()
        ranked = []
        for k in self.tracked_on[d]:
            load, state, _ = self.parts[k][d]
            cell = self._unload_cell(k, d, load, chi, dstar)
            if cell is not None:
                ranked.append((cell, state / load, -load, k))
        ranked.sort()
        # chi only shrinks, so one pass in priority order equals re-selecting the best
        # eligible part each time. The paper (lines 7-10) splits a priority key larger than
        # chi; under whole_parts such a key never entered a cell.
        for _, _, neg_load, k in ranked:
            if chi <= self.eps:
                return
            if -neg_load <= chi + self.eps:
                self._to_pool(k, d, -neg_load)
            elif self.split_priority:
                self._to_pool(k, d, chi)
            # Line 3 again: chi from the node's load (not decremented: a float drift would
            # break ties between equal pieces differently).
            chi = self.loads[d] - self.upper
        if chi <= self.eps:
            return
        # Fallback: heavy keys first (isolation), then smallest MC / L, then larger parts:
        # merge the tracked parts on d (sorted here) with d's untouched rows (searched).
        dynamic = sorted(
            ((not self.heavy_first) or self.key_total[k] <= self.mean + self.eps, st / ld, -ld, k)
            for k, (ld, st, _) in ((k, self.parts[k][d]) for k in self.tracked_on[d])
        )
        rows = self._rows_of(d)
        i = 0
        while chi > self.eps:
            static = rows.best()
            if i < len(dynamic) and (static is None or dynamic[i] < static[0]):
                _, _, neg_load, k = dynamic[i]
                i += 1
            elif static is not None:
                (_, _, neg_load, k), local = static
                rows.discard(local)
                self._track_row(k, d, rows.start + local)
                self.home[k] = d  # an untracked key is whole on its home node
            else:
                break
            self._to_pool(k, d, min(-neg_load, chi))
            chi = self.loads[d] - self.upper

    def _unload_cell(self, k: int, d: int, load: float, chi: float, dstar: set[int]) -> int | None:
        if load > chi + self.eps and not self.split_priority:
            return None  # whole_parts: a whole move would overshoot; only the fallback splits
        home = self.home[k]
        holders = self.parts[k]
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
        part = self.parts[k][d]
        share = amount / part[0]
        state = part[1] * share
        if amount >= part[0] - self.eps:
            amount, state = part[0], part[1]
            part[0], part[1] = 0.0, 0.0
            del self.parts[k][d]
            self.tracked_on[d].pop(k, None)
            if part[2] >= 0:  # keep the row's entry (new load 0) for the delta
                self.emptied.setdefault(k, {})[d] = part
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
            self._place(piece, target)
            over = self.loads[target] > self.upper + self.eps
            if over and (not self.key_trigger or piece.amount >= self.upper - self.eps):
                self.unload(target)

    def _place(self, piece: _Piece, target: int) -> None:
        k = piece.key
        holders = self.parts[k]
        part = holders.get(target)
        if part is None:
            emptied = self.emptied.get(k, {}).pop(target, None)
            part = emptied if emptied is not None else [0.0, 0.0, -1]
            holders[target] = part
        part[0] += piece.amount
        part[1] += piece.state
        self.tracked_on[target][k] = None
        self.loads[target] += piece.amount

    def _loading_cell(self, piece: _Piece, dstar: set[int], by_load: list[int]) -> tuple[int, int]:
        home = self.home[piece.key]
        holders = self.parts.get(piece.key, {})
        from_home = piece.origin == home
        merge = [t for t in holders if t in dstar]
        if merge:
            if home in dstar and home in holders:
                return MERGE_BACK, home
            target = min(merge, key=lambda t: (self.loads[t], t))  # least loaded holder
            return (MERGE_OUT if from_home else MERGE_ACROSS), target
        whole = not holders and self.pool_count[piece.key] == 1
        if home in dstar:
            return (UNCHANGED_BACK if whole else SPLIT_BACK), home
        target = by_load[0]
        if from_home:
            return (UNCHANGED_OUT if whole else SPLIT_OUT), target
        return (UNCHANGED_ACROSS if whole else SPLIT_ACROSS), target

    def delta(self) -> Delta:
        rows, new_load, new_state = [], [], []
        add_key, add_node, add_load, add_state = [], [], [], []
        for source in (self.parts, self.emptied):
            for k, holders in source.items():
                for d, (ld, st, r) in holders.items():
                    if r >= 0:
                        if ld == self.row_load[r] and st == self.row_state[r]:
                            continue  # unchanged row
                        rows.append(r)
                        new_load.append(ld)
                        new_state.append(st)
                    elif ld > 0.0:
                        add_key.append(k)
                        add_node.append(d)
                        add_load.append(ld)
                        add_state.append(st)
        return Delta(
            rows=np.array(rows, dtype=np.int64),
            new_load=np.array(new_load, dtype=np.float64),
            new_state=np.array(new_state, dtype=np.float64),
            add_key=np.array(add_key, dtype=np.int64),
            add_node=np.array(add_node, dtype=np.int32),
            add_load=np.array(add_load, dtype=np.float64),
            add_state=np.array(add_state, dtype=np.float64),
        )
