"""Join architectures of paper 000's comparison (§5.1.5): ``dynamic``, ``bi``, ``bi6``.

Unlike the key-level strategies these never plan key moves: each fixes a *layout* of the
nodes and places every tuple by a deterministic hash of its ``tuple_id`` (the "random"
choice of the papers, reproducible and identical in numpy and in Spark SQL's
``hash(tuple_id, salt)``, see :mod:`balancebench.core.hashing`). A tuple gets store nodes
(where it is kept as join state) and probe nodes (where it is joined with the other
side's earlier tuples); the engine (``balancebench.spark.engine``, paper 000 Algorithm
1's join semantics) produces a pair at a node where the later tuple probes and the
earlier one is stored. Each architecture makes every R–S pair that can match meet at
exactly one node, so every result pair is produced exactly once.

**Dynamic** (matrix model; Elseidy, Elguindy, Vitorovic, Koch, "Scalable and adaptive
online joins", VLDB 2014; paper 000 ref. [22]). The nodes form an ``n x m`` grid
(``n * m`` a power of two, at most ``N``). An R tuple picks ONE row ``i`` (top bits of
``pmod(hash(tuple_id, DYNAMIC_SALT), 2^20)``) and is stored at, and probes, all ``m``
cells of the row; an S tuple picks ONE column and is stored at / probes all ``n`` cells
of it. R–S pair ``(r, s)`` meets only in cell ``(row(r), col(s))``: skew-immune whatever
the predicate, at the price of ``m`` copies of every R tuple and ``n`` of every S tuple
(the engine ships a store and a probe copy to each node: ``2m`` / ``2n`` rows).

- *Grid size and shape* (our rule, deterministic): the first grid has ``J0`` nodes,
  ``J0`` = the Param ``initial_nodes`` rounded down to a power of two and capped at the
  largest power of two ``<= N`` (null: that largest power of two, the whole grid at
  once; under memory-driven scale-out, one node). Its shape is the one of the matrix
  model's optimum for the first micro-batch's counts: among ``n = 2^a, m = J0 / n`` it
  minimises the tuples shipped ``m |R| + n |S|`` (so ``n / m ~ |R| / |S|``); ties go to
  the squarer grid, then to more rows.
- *Growth* ("turning one node into four" when memory is exceeded, paper 000 §5.2.1 and
  Fig. 4): after a batch, when the largest state of a node exceeds the Param
  ``max_state_tuples_per_node`` (when that is null, the engine's node capacity, Param
  ``node_capacity_state_tuples``) and ``4 n m <= N``, the grid doubles in both dimensions:
  cell ``(i, j)`` becomes the 2x2 block ``(2i..2i+1, 2j..2j+1)``. Node numbering makes
  this literal: node ``d`` of a ``J``-node grid becomes nodes ``d, d + J, d + 2J, d + 3J``
  (it keeps its ``(2i, 2j)`` share; see :class:`Grid`). A stored R tuple of row ``i``
  moves to row ``2i`` or ``2i + 1`` (the next bit of its hash) and is replicated along
  the new row's ``2m`` cells; S columns likewise; every pair still meets exactly once.
  One doubling per batch at most. Elseidy et al.'s reshaping of a grid of fixed size
  (``(n, m) -> (2n, m/2)`` when ``|R| / |S|`` drifts) is not modelled.

**Bi** (BiStream; Lin, Ooi, Wang, Yu, "Scalable distributed stream join processing",
SIGMOD 2015; paper 000 ref. [19]). The nodes are split into an R group and an S group
(Param ``group_split``: ``halves`` -- ``ceil(N / 2)`` R nodes, the rest S -- or
``proportional`` to the first batch's ``|R| : |S|``, rounded, at least one node each,
the end state of BiStream's memory-driven sizing). A tuple is stored on ONE node of its
own group (``pmod(hash(tuple_id, BI_STORE_SALT), group size)``) and probes EVERY node of
the other group; the later tuple of a pair finds the earlier one on its only node.
With ``N = 1`` both groups are node 0.

*Memory-driven growth* (engine Param ``node_capacity_state_tuples``; paper 000 §5.2.1:
Bi starts with one node per side, Bi6 with one per subgroup, and subgroups grow "by the
amount loaded"): :meth:`BiStream.initial_layout` and :meth:`BiStream.grown`. The paper
does not say how; our reading: a node holding ``capacity`` tuples stops storing and keeps
probing (its tuples never move: random storage needs no migration), and a subgroup with
a node above capacity grows to ``max(size + 1, ceil(its state / capacity))`` nodes, the
lowest free node ids. Storage is then by the tuple-id hash among the subgroup's open
nodes; probes go to all its nodes. Without the Param ``N`` is fixed, as below.

**Bi6** (BiStream with 6 subgroups per group, paper 000 §5.1.5). Each group is divided into
``subgroups`` contiguous subgroups of near-equal size (Param ``subgroups``, default 6, the
paper's), at least one node each, so Bi6 needs ``N >= 2 x subgroups`` (12 at the paper's
6): a smaller ``N`` is refused at the door (:meth:`BiStream6.check_n_nodes`) rather than
run with fewer subgroups, which at ``N = 8`` made four one-node subgroups per group, a
hash-partitioned join under Bi6's name. The ``proportional`` split keeps at least
``subgroups`` nodes in each group. The tuple's key
picks the subgroup, storage is by the tuple-id hash inside the subgroup, and probes go to
every node of the matching subgroup(s) of the other group:

- equi-join: subgroup ``pmod(hash(key, BI_KEY_SALT), subgroups of that group)``;
- band join ``|k1 - k2| <= w``: a key-range partition, equal-width ranges of the key
  domain ``[kmin, kmax]`` seen in the first micro-batch (both sides together; keys
  outside fall in the first / last range), and a probe of key ``k`` goes to every
  subgroup whose range meets ``[k - w, k + w]`` (one or a few adjacent subgroups).

The R and S groups may have different numbers of subgroups; each side's key rule uses
its own count, so a pair still meets exactly once. A hot key overloads its subgroup
(the weakness paper 000 §5.2.1 reports for Bi6 at high skew). Paper 000's Bi6 starts
with one node per subgroup and adds nodes to subgroups as the load grows: that is the
growth above (a hot key's subgroup grows most); without it the subgroups keep their
near-equal share of the ``N`` nodes from the start.

The library part here is pure numpy: layouts, the store and probe nodes of tuples
(``(index, node)`` pairs, one per copy) and the Params. The Spark router
(``balancebench.spark.architecture_routers``) builds the same placement as SQL expressions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from balancebench.core.hashing import FRACTION_BITS, salted_hash
from balancebench.core.operators import EQUI_JOIN, JOINS, Operator
from balancebench.core.schema import MAX_NODES
from balancebench.strategies.base import Strategy

#: Salt of the tuple-id hash that picks a Dynamic tuple's row (R) or column (S).
DYNAMIC_SALT = 0xD1A9
#: Salt of the tuple-id hash that picks a BiStream tuple's store node in its (sub)group.
BI_STORE_SALT = 0xB15
#: Salt of the key hash that picks a Bi6 equi-join subgroup.
BI_KEY_SALT = 0xB16
#: Bits of the Dynamic unit ``pmod(hash(tuple_id, DYNAMIC_SALT), 2^UNIT_BITS)``.
UNIT_BITS = FRACTION_BITS

Placement = tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class FirstBatch:
    """What a join architecture reads of the first micro-batch to fix its layout."""

    r_tuples: int
    s_tuples: int
    key_min: int | None = None
    key_max: int | None = None

    @classmethod
    def of(cls, side: np.ndarray, keys: np.ndarray) -> FirstBatch:
        side, keys = np.asarray(side), np.asarray(keys, dtype=np.int64)
        lo = int(keys.min()) if len(keys) else None
        hi = int(keys.max()) if len(keys) else None
        return cls(int(np.sum(side == "R")), int(np.sum(side == "S")), lo, hi)


def side_is_r(side: np.ndarray) -> np.ndarray:
    """Which tuples are of side R."""
    return np.asarray(side) == "R"


def _expand(lo: np.ndarray, hi: np.ndarray) -> Placement:
    """``(index, node)`` for node ranges ``lo[t] .. hi[t]`` (inclusive) of each tuple."""
    counts = np.maximum(hi - lo + 1, 0).astype(np.int64)
    index = np.repeat(np.arange(len(lo), dtype=np.int64), counts)
    first = np.cumsum(counts) - counts
    within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(first, counts)
    return index, (np.repeat(lo, counts) + within).astype(np.int32)


def _largest_power_of_two(n: int) -> int:
    return 1 << (int(n).bit_length() - 1)


class JoinArchitecture(Strategy):
    """Base of a join architecture (this module's and paper 001's, ``operator_set``): a
    layout fixed at the first batch, and every tuple's store and probe nodes; no plan."""

    kind: ClassVar[str] = "join_architecture"
    plans = False
    operators = JOINS

    def layout(self, n_nodes: int, first: FirstBatch, operator: Operator) -> Any:
        """The node layout for ``n_nodes`` nodes, fixed from the first micro-batch."""
        raise NotImplementedError

    def store_nodes(
        self, layout: Any, side: np.ndarray, tuple_ids: np.ndarray, keys: np.ndarray
    ) -> Placement:
        """``(index, node)``: every node each tuple is stored on (index into the inputs)."""
        raise NotImplementedError

    def probe_nodes(
        self,
        layout: Any,
        side: np.ndarray,
        tuple_ids: np.ndarray,
        keys: np.ndarray,
        band_width: int = 0,
    ) -> Placement:
        """``(index, node)``: every node each tuple probes (``band_width`` for band joins)."""
        raise NotImplementedError


# ---- Dynamic ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Grid:
    """An ``n x m`` join matrix grown ``levels`` times from a ``base_rows x base_cols`` one.

    Node of cell ``(i, j)``: the base grid's row-major number of cell ``(i >> g, j >> g)``
    plus, for growth level ``l = 1..g`` (bit ``s = g - l`` of ``i`` and ``j``),
    ``(2 * bit_s(i) + bit_s(j)) * base_rows * base_cols * 4^(l - 1)``. So growing a
    ``J``-node grid turns node ``d`` (cell ``(i, j)``) into the nodes ``d + q J``,
    ``q = 2 di + dj``, of cells ``(2i + di, 2j + dj)``.
    """

    base_rows: int
    base_cols: int
    levels: int = 0

    @property
    def rows(self) -> int:
        return self.base_rows << self.levels

    @property
    def cols(self) -> int:
        return self.base_cols << self.levels

    @property
    def n_nodes(self) -> int:
        return self.rows * self.cols

    @property
    def row_bits(self) -> int:
        return self.rows.bit_length() - 1

    @property
    def col_bits(self) -> int:
        return self.cols.bit_length() - 1

    def grown(self) -> Grid:
        """The grid after one growth step (every node becomes four)."""
        return Grid(self.base_rows, self.base_cols, self.levels + 1)

    def cell_nodes(self, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Node of cells ``(i, j)`` (numpy, broadcasting)."""
        i = np.asarray(i, dtype=np.int64)
        j = np.asarray(j, dtype=np.int64)
        g = self.levels
        node = (i >> g) * self.base_cols + (j >> g)
        base = self.base_rows * self.base_cols
        for level in range(1, g + 1):
            s = g - level
            node = node + (((i >> s) & 1) * 2 + ((j >> s) & 1)) * (base * 4 ** (level - 1))
        return node.astype(np.int32)

    def describe(self) -> dict[str, int]:
        return {"grid_rows": self.rows, "grid_cols": self.cols, "grid_nodes": self.n_nodes}


def dynamic_units(tuple_ids: np.ndarray) -> np.ndarray:
    """``pmod(hash(tuple_id, DYNAMIC_SALT), 2^UNIT_BITS)``: the bits of a tuple's row/column."""
    h = salted_hash(np.asarray(tuple_ids, dtype=np.int64), DYNAMIC_SALT).astype(np.int64)
    return np.mod(h, 1 << UNIT_BITS)


class DynamicJoin(JoinArchitecture):
    """Paper 000's Dynamic baseline: the join matrix with 1-into-4 growth (module docstring)."""

    name = "dynamic"
    scales_out = True
    reference = "paper 000 baseline Dynamic (matrix model, Elseidy et al. VLDB 2014)"
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "initial_nodes": {
            "type": ["integer", "null"],
            "minimum": 1,
            "maximum": MAX_NODES,
            "default": None,
            "description": "Nodes of the first grid (rounded down to a power of two, at most "
            "the largest power of two <= n_nodes); null = that largest power of two (under "
            "memory-driven scale-out: one node).",
        },
        "max_state_tuples_per_node": {
            "type": ["integer", "null"],
            "minimum": 1,
            "default": None,
            "description": "Memory per node: when a node holds more state tuples after a "
            "batch, every node becomes four (the grid doubles in both dimensions) if 4x the "
            "nodes fit in n_nodes; null = the node capacity (node_capacity_state_tuples) when "
            "it is set, else no limit (the grid never grows).",
        },
    }

    def layout(self, n_nodes: int, first: FirstBatch, operator: Operator = EQUI_JOIN) -> Grid:
        """The first grid: ``J0`` nodes, the shape minimising ``m |R| + n |S|``."""
        top = _largest_power_of_two(n_nodes)
        wanted = self.settings["initial_nodes"]
        size = top if wanted is None else min(top, _largest_power_of_two(int(wanted)))
        p = size.bit_length() - 1
        best: tuple[int, int, int] | None = None
        shape = (1, 1)
        for a in range(p + 1):
            n, m = 1 << a, 1 << (p - a)
            score = (m * first.r_tuples + n * first.s_tuples, abs(a - (p - a)), -n)
            if best is None or score < best:
                best, shape = score, (n, m)
        return Grid(*shape)

    def initial_layout(
        self, n_nodes: int, first: FirstBatch, operator: Operator = EQUI_JOIN
    ) -> Grid:
        """Memory-driven scale-out starts from one node unless ``initial_nodes`` says
        otherwise (paper 000 Fig. 4: the grid grows 1 -> 4 -> 16)."""
        start = n_nodes if self.settings["initial_nodes"] is not None else 1
        return self.layout(start, first, operator)

    def grown(
        self, grid: Grid, node_state: np.ndarray, n_nodes: int, capacity: int | None = None
    ) -> Grid | None:
        """The grown grid when a node's state exceeds the memory Param (or, when that is
        null, the engine's node ``capacity``) and 4x fits, else None."""
        limit = self.settings["max_state_tuples_per_node"]
        limit = capacity if limit is None else limit
        if limit is None or 4 * grid.n_nodes > n_nodes or len(node_state) == 0:
            return None
        if float(np.max(node_state)) <= float(limit):
            return None
        return grid.grown()

    def rows_of(self, grid: Grid, tuple_ids: np.ndarray) -> np.ndarray:
        """Row of R tuples: the top ``log2 n`` bits of their unit."""
        return dynamic_units(tuple_ids) >> (UNIT_BITS - grid.row_bits)

    def cols_of(self, grid: Grid, tuple_ids: np.ndarray) -> np.ndarray:
        """Column of S tuples: the top ``log2 m`` bits of their unit."""
        return dynamic_units(tuple_ids) >> (UNIT_BITS - grid.col_bits)

    def store_nodes(
        self, layout: Grid, side: np.ndarray, tuple_ids: np.ndarray, keys: np.ndarray
    ) -> Placement:
        """The tuple's whole row (R: ``m`` nodes) or column (S: ``n`` nodes)."""
        grid = layout
        tuple_ids = np.asarray(tuple_ids, dtype=np.int64)
        is_r = side_is_r(side)
        copies = np.where(is_r, grid.cols, grid.rows).astype(np.int64)
        index = np.repeat(np.arange(len(tuple_ids), dtype=np.int64), copies)
        first = np.cumsum(copies) - copies
        along = np.arange(int(copies.sum()), dtype=np.int64) - np.repeat(first, copies)
        r_rows = self.rows_of(grid, tuple_ids)
        s_cols = self.cols_of(grid, tuple_ids)
        rep_r = is_r[index]
        i = np.where(rep_r, r_rows[index], along)
        j = np.where(rep_r, along, s_cols[index])
        return index, grid.cell_nodes(i, j)

    def probe_nodes(
        self,
        layout: Grid,
        side: np.ndarray,
        tuple_ids: np.ndarray,
        keys: np.ndarray,
        band_width: int = 0,
    ) -> Placement:
        """The same cells as storage: the tuple's whole row (R) or column (S)."""
        return self.store_nodes(layout, side, tuple_ids, keys)

    def copies(self, grid: Grid) -> dict[str, int]:
        """Store (= probe) copies of one tuple per side: ``m`` for R, ``n`` for S."""
        return {"R": grid.cols, "S": grid.rows}


# ---- BiStream ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Groups:
    """BiStream's layout: the R group ``r_start .. r_start + r_size - 1`` and the S group,
    each cut into contiguous subgroups (``offsets``), and the key rule choosing them:
    ``none`` (one subgroup), ``hash`` (equi-join) or ``range`` (band join, equal-width
    ranges of ``[key_lo, key_lo + key_span)``)."""

    r_start: int
    r_size: int
    s_start: int
    s_size: int
    r_subgroups: int
    s_subgroups: int
    key_rule: str = "none"
    key_lo: int = 0
    key_span: int = 1
    group_split: str = "halves"
    #: Memory-driven scale-out (:meth:`BiStream.grown`): the nodes of each subgroup, R's
    #: then S's (None: the contiguous ranges above), and the full nodes that no longer
    #: store (they still probe).
    members: tuple[tuple[int, ...], ...] | None = None
    closed: frozenset[int] = frozenset()

    def start(self, side: str) -> int:
        return self.r_start if side == "R" else self.s_start

    def subgroup_members(self, side: str) -> list[tuple[int, ...]]:
        """The nodes of each of ``side``'s subgroups, in subgroup order."""
        k = self.subgroups(side)
        if self.members is not None:
            return list(self.members[:k] if side == "R" else self.members[self.r_subgroups :])
        off, start = self.offsets(side), self.start(side)
        return [tuple(range(start + off[q], start + off[q + 1])) for q in range(k)]

    def flat(self, side: str, storing: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``side``'s subgroups as one node array and each subgroup's first index in it
        (``k + 1`` entries); ``storing``: only the nodes that store (a subgroup whose
        nodes are all full keeps them all)."""
        lists = self.subgroup_members(side)
        if storing and self.closed:
            lists = [tuple(d for d in m if d not in self.closed) or m for m in lists]
        sizes = np.array([len(m) for m in lists], dtype=np.int64)
        nodes = np.array([d for m in lists for d in m], dtype=np.int64)
        return nodes, np.r_[0, np.cumsum(sizes)].astype(np.int64)

    def subgroups(self, side: str) -> int:
        return self.r_subgroups if side == "R" else self.s_subgroups

    def offsets(self, side: str) -> np.ndarray:
        """First node (relative to the group) of each subgroup, and the group size last."""
        size = self.r_size if side == "R" else self.s_size
        k = self.subgroups(side)
        return np.array([(q * size) // k for q in range(k + 1)], dtype=np.int64)

    def boundaries(self, side: str) -> np.ndarray:
        """Range rule: the smallest key of subgroups ``1 .. k-1``."""
        k = self.subgroups(side)
        return np.array(
            [self.key_lo + (q * self.key_span) // k for q in range(1, k)], dtype=np.int64
        )

    def subgroup_of(self, side: str, keys: np.ndarray) -> np.ndarray:
        """Subgroup of ``side``'s group that keys ``keys`` belong to."""
        keys = np.asarray(keys, dtype=np.int64)
        k = self.subgroups(side)
        if k == 1 or self.key_rule == "none":
            return np.zeros(len(keys), dtype=np.int64)
        if self.key_rule == "hash":
            return np.mod(salted_hash(keys, BI_KEY_SALT).astype(np.int64), k)
        return np.searchsorted(self.boundaries(side), keys, side="right").astype(np.int64)

    def group_size(self, side: str) -> int:
        """Nodes in ``side``'s group."""
        return sum(len(m) for m in self.subgroup_members(side))

    @property
    def member_count(self) -> int:
        """Nodes in the groups."""
        return self.group_size("R") + self.group_size("S")

    @property
    def n_nodes(self) -> int:
        if self.members is not None:
            return 1 + max(d for m in self.members for d in m)
        return max(self.r_start + self.r_size, self.s_start + self.s_size)

    def describe(self) -> dict[str, Any]:
        return {
            "group_split": self.group_split,
            "r_group_nodes": self.group_size("R"),
            "s_group_nodes": self.group_size("S"),
            "r_subgroups": self.r_subgroups,
            "s_subgroups": self.s_subgroups,
            "subgroup_key_rule": self.key_rule,
        }


class BiStream(JoinArchitecture):
    """Paper 000's Bi baseline: R group and S group, random storage, probes broadcast to
    the other group (module docstring)."""

    name = "bi"
    scales_out = True
    reference = "paper 000 baseline Bi (BiStream, Lin et al. SIGMOD 2015)"
    #: Subgroups per group (Bi: none).
    default_subgroups: ClassVar[int] = 1
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {
        "group_split": {
            "type": "string",
            "enum": ["halves", "proportional"],
            "default": "halves",
            "description": "R group / S group sizes: halves (ceil(N/2) R nodes) or "
            "proportional to the first batch's |R| : |S| (at least one node each).",
        },
    }

    def n_subgroups(self) -> int:
        return int(self.settings.get("subgroups", self.default_subgroups))

    @classmethod
    def check_n_nodes(cls, n_nodes: int, settings: dict[str, Any]) -> None:
        k = int(settings.get("subgroups", cls.default_subgroups))
        if k > 1 and n_nodes < 2 * k:
            raise ValueError(
                f"n_nodes: {cls.name} needs at least 2 x {cls.name}_subgroups = {2 * k} nodes "
                f"(each of its R and S groups holds {k} subgroups of at least one node, "
                f"paper 000 §5.1.5); got {n_nodes}. allowed: n_nodes >= {2 * k}, or "
                f"{cls.name}_subgroups <= {max(1, n_nodes // 2)}"
            )

    def layout(self, n_nodes: int, first: FirstBatch, operator: Operator = EQUI_JOIN) -> Groups:
        split = str(self.settings["group_split"])
        if n_nodes == 1:
            r_size, s_start, s_size = 1, 0, 1
        else:
            total = first.r_tuples + first.s_tuples
            k = self.n_subgroups()
            if split == "proportional" and total > 0:
                r_size = int(np.floor(n_nodes * first.r_tuples / total + 0.5))
                r_size = min(max(r_size, k), n_nodes - k)  # every subgroup keeps a node
            else:
                r_size = (n_nodes + 1) // 2
            s_start, s_size = r_size, n_nodes - r_size
        k = self.n_subgroups()
        r_k, s_k = min(k, r_size), min(k, s_size)  # both k except Bi on one node
        rule = "none"
        lo, span = 0, 1
        if max(r_k, s_k) > 1:
            rule = "hash" if operator.equality else "range"
            if rule == "range" and first.key_min is not None and first.key_max is not None:
                lo, span = first.key_min, first.key_max - first.key_min + 1
        return Groups(0, r_size, s_start, s_size, r_k, s_k, rule, lo, span, split)

    def store_nodes(
        self, layout: Groups, side: np.ndarray, tuple_ids: np.ndarray, keys: np.ndarray
    ) -> Placement:
        """ONE node per tuple: its key's subgroup of its own group, by the tuple-id hash."""
        tuple_ids = np.asarray(tuple_ids, dtype=np.int64)
        keys = np.asarray(keys, dtype=np.int64)
        is_r = side_is_r(side)
        node = np.zeros(len(tuple_ids), dtype=np.int64)
        h = salted_hash(tuple_ids, BI_STORE_SALT).astype(np.int64)
        for s, mask in (("R", is_r), ("S", ~is_r)):
            nodes, first = layout.flat(s, storing=True)
            q = layout.subgroup_of(s, keys[mask])
            size = first[q + 1] - first[q]
            node[mask] = nodes[first[q] + np.mod(h[mask], size)]
        return np.arange(len(tuple_ids), dtype=np.int64), node.astype(np.int32)

    def probe_nodes(
        self,
        layout: Groups,
        side: np.ndarray,
        tuple_ids: np.ndarray,
        keys: np.ndarray,
        band_width: int = 0,
    ) -> Placement:
        """Every node of the other group's subgroup(s) matching the key (Bi: all of it)."""
        keys = np.asarray(keys, dtype=np.int64)
        is_r = side_is_r(side)
        lo = np.zeros(len(keys), dtype=np.int64)
        hi = np.zeros(len(keys), dtype=np.int64)
        nodes_of = {}
        for own, other in (("R", "S"), ("S", "R")):
            mask = is_r if own == "R" else ~is_r
            nodes_of[own], off = layout.flat(other)
            if layout.key_rule == "range":
                q1 = layout.subgroup_of(other, keys[mask] - band_width)
                q2 = layout.subgroup_of(other, keys[mask] + band_width)
            elif layout.key_rule == "hash":
                q1 = q2 = layout.subgroup_of(other, keys[mask])
            else:
                q1 = np.zeros(int(mask.sum()), dtype=np.int64)
                q2 = np.full(int(mask.sum()), layout.subgroups(other) - 1, dtype=np.int64)
            lo[mask] = off[q1]
            hi[mask] = off[q2 + 1] - 1
        # Positions in the other side's member array, then the nodes at them.
        index, at = _expand(lo, hi)
        node = np.zeros(len(at), dtype=np.int32)
        r = is_r[index]
        node[r] = nodes_of["R"][at[r]]
        node[~r] = nodes_of["S"][at[~r]]
        return index, node

    def initial_layout(
        self, n_nodes: int, first: FirstBatch, operator: Operator = EQUI_JOIN
    ) -> Groups:
        """Memory-driven scale-out starts with one node per subgroup (paper 000 §5.2.1: Bi
        one node per side, Bi6 one per subgroup)."""
        return self.layout(2 * self.n_subgroups(), first, operator)

    def grown(
        self, layout: Groups, node_state: np.ndarray, capacity: int, n_nodes: int
    ) -> Groups | None:
        """The layout after a batch under a node capacity (state tuples), or None if it
        does not change. Our reading of BiStream's memory-driven growth (paper 000 §5.2.1
        says only that Bi6's subgroups grow "by the amount loaded"): a node holding
        ``capacity`` tuples or more stops storing (it keeps probing: its tuples stay, no
        migration); a subgroup with a node above ``capacity`` grows to
        ``max(size + 1, ceil(its state / capacity))`` nodes, taking the lowest free node
        ids below ``n_nodes`` (none free: it stays as it is)."""
        state = np.zeros(max(n_nodes, len(node_state)))
        state[: len(node_state)] = node_state
        closed = frozenset(int(d) for d in np.flatnonzero(state >= capacity))
        members = [*layout.subgroup_members("R"), *layout.subgroup_members("S")]
        used = {d for m in members for d in m}
        free = [d for d in range(n_nodes) if d not in used]
        grown = []
        for m in members:
            held = float(state[list(m)].sum())
            if float(state[list(m)].max()) > capacity and free:
                want = max(len(m) + 1, math.ceil(held / capacity))
                extra, free = free[: want - len(m)], free[want - len(m) :]
                m = (*m, *extra)
            grown.append(tuple(m))
        if tuple(grown) == tuple(members) and closed == layout.closed:
            return None
        return replace(layout, members=tuple(grown), closed=closed)


class BiStream6(BiStream):
    """Paper 000's Bi6 baseline: BiStream with 6 subgroups per group (``N >= 12``),
    chosen by the key's hash (equi-join) or key range (band join); see the module
    docstring."""

    name = "bi6"
    reference = "paper 000 baseline Bi6 (BiStream with 6 subgroups)"
    default_subgroups: ClassVar[int] = 6
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {
        **BiStream.param_schema,
        "subgroups": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_NODES,
            "default": 6,
            "description": "Subgroups per group (paper 000: 6); each holds at least one "
            "node, so n_nodes must be at least twice this.",
        },
    }
