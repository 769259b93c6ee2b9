"""Paper 000's router: base routing ``F(k)`` plus the routing table ``Y`` (Algorithm 1).

``Y`` maps a key to ``[(d_i, q_i)]`` with ``sum q_i = 1``: the share of the key's data
stored on node ``d_i``. A key is in ``Y`` exactly when some of its data is off its home
node ``F(k)``.

Storage routing (ONE): a tuple of a key in ``Y`` goes to one node of ``Y(k)``, node ``i``
with probability ``q_i``, chosen deterministically from a hash of the tuple id so reruns
are identical. Shares are quantised to ``1 / 2^20`` (``hashing.FRACTION_UNITS``): part
``i`` owns the integer interval ``[lo_i, hi_i)`` and a tuple whose
``fraction_units(tuple_id)`` falls in it goes to ``d_i``. The Spark job evaluates the same
integer comparison, so driver and executors agree exactly. A part whose share rounds to
zero width is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from balancebench.core.hashing import (
    FRACTION_BITS,
    FRACTION_UNITS,
    fraction_units,
    home_nodes,
    salted_nodes,
)

_SEGMENT_SHIFT = FRACTION_BITS + 1


def segment_starts(sorted_keys: np.ndarray) -> np.ndarray:
    """Index of the first row of each run of equal keys in a sorted key array."""
    if len(sorted_keys) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])


@dataclass(frozen=True)
class RoutingTable:
    """The routing table ``Y`` in CSR form (one segment of parts per key, keys sorted).

    - ``keys``: sorted unique int64 keys present in ``Y`` (one *entry* per key);
    - ``offsets``: segment ``i`` is ``parts[offsets[i]:offsets[i+1]]``;
    - ``nodes``, ``lo_units``, ``hi_units``: per part its node and its interval of
      tuple-id fractions ``[lo, hi)`` in units of ``1/2^20``.
    """

    n_nodes: int
    keys: np.ndarray
    offsets: np.ndarray
    nodes: np.ndarray
    lo_units: np.ndarray
    hi_units: np.ndarray

    @classmethod
    def empty(cls, n_nodes: int) -> RoutingTable:
        z = np.zeros(0, dtype=np.int64)
        return cls(n_nodes, z, np.zeros(1, dtype=np.int64), z.astype(np.int32), z, z)

    @classmethod
    def from_parts(
        cls, key: np.ndarray, node: np.ndarray, load: np.ndarray, n_nodes: int
    ) -> RoutingTable:
        """Build ``Y`` from the parts a plan leaves behind (rows with ``load > 0``)."""
        key = np.asarray(key, dtype=np.int64)
        node = np.asarray(node, dtype=np.int32)
        load = np.asarray(load, dtype=np.float64)
        keep = load > 0
        order = np.lexsort((node[keep], key[keep]))
        key, node, load = key[keep][order], node[keep][order], load[keep][order]
        if len(key) == 0:
            return cls.empty(n_nodes)
        # Cumulative share of each part within its key, quantised; the last part ends at 1.
        starts = segment_starts(key)
        seg = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(key)]))
        cum = np.cumsum(load)
        cum_before = np.r_[0.0, cum][starts]
        total = np.r_[cum[starts[1:] - 1], cum[-1]] - cum_before
        hi = np.rint((cum - cum_before[seg]) / total[seg] * FRACTION_UNITS).astype(np.int64)
        hi[np.r_[starts[1:] - 1, len(key) - 1]] = FRACTION_UNITS
        lo = np.r_[0, hi[:-1]]
        lo[starts] = 0
        keep = hi > lo  # a share that rounds to zero width is dropped
        key, node, lo, hi = key[keep], node[keep], lo[keep], hi[keep]
        # A key stays out of Y when its only part is on its home node.
        starts = segment_starts(key)
        counts = np.diff(np.r_[starts, len(key)])
        at_home = (counts == 1) & (node[starts] == home_nodes(key[starts], n_nodes))
        keep = np.repeat(~at_home, counts)
        key, node, lo, hi = key[keep], node[keep], lo[keep], hi[keep]
        if len(key) == 0:
            return cls.empty(n_nodes)
        starts = segment_starts(key)
        offsets = np.r_[starts, len(key)].astype(np.int64)
        return cls(n_nodes, key[starts], offsets, node, lo, hi)

    @classmethod
    def from_grouped_parts(
        cls, n_nodes: int, key: np.ndarray, node: np.ndarray, load: np.ndarray, home: np.ndarray
    ) -> RoutingTable:
        """From parts already grouped by key (each key's rows contiguous, keys in any
        order) with each key's ``home`` given per row: no hashing, no (key, node) sort.
        A key left with one part on its home node gets no entry."""
        keep = load > 0
        if not keep.all():
            key, node, load, home = key[keep], node[keep], load[keep], home[keep]
        if len(key) == 0:
            return cls.empty(n_nodes)
        starts = segment_starts(key)
        ends = np.r_[starts[1:], len(key)]
        seg = np.repeat(np.arange(len(starts)), ends - starts)
        cum = np.cumsum(load)
        cum_before = np.r_[0.0, cum][starts]
        total = cum[ends - 1] - cum_before
        hi = np.rint((cum - cum_before[seg]) / total[seg] * FRACTION_UNITS).astype(np.int64)
        hi[ends - 1] = FRACTION_UNITS
        lo = np.r_[0, hi[:-1]]
        lo[starts] = 0
        keep = hi > lo  # a share that rounds to zero width is dropped
        if not keep.all():
            key, node, lo, hi, home = key[keep], node[keep], lo[keep], hi[keep], home[keep]
            starts = segment_starts(key)
        counts = np.diff(np.r_[starts, len(key)])
        at_home = (counts == 1) & (node[starts] == home[starts])
        if at_home.any():
            keep = np.repeat(~at_home, counts)
            key, node, lo, hi = key[keep], node[keep], lo[keep], hi[keep]
        return cls.from_rows(n_nodes, key, node.astype(np.int32), lo, hi)

    @classmethod
    def from_rows(
        cls, n_nodes: int, key: np.ndarray, node: np.ndarray, lo: np.ndarray, hi: np.ndarray
    ) -> RoutingTable:
        """From flat part rows (any key order; each key's parts in share order)."""
        if len(key) == 0:
            return cls.empty(n_nodes)
        if len(key) > 1 and (key[1:] < key[:-1]).any():
            order = np.argsort(key, kind="stable")
            key, node, lo, hi = key[order], node[order], lo[order], hi[order]
        starts = segment_starts(key)
        offsets = np.r_[starts, len(key)].astype(np.int64)
        return cls(n_nodes, key[starts], offsets, node.astype(np.int32), lo, hi)

    def replace(self, keys: np.ndarray, table: RoutingTable) -> RoutingTable:
        """This table with the entries of ``keys`` dropped and those of ``table`` added."""
        if len(self) == 0:
            return table
        rows = self.part_rows()
        keep = ~np.isin(rows["key"], keys)
        new = table.part_rows()
        return RoutingTable.from_rows(
            self.n_nodes,
            np.r_[rows["key"][keep], new["key"]],
            np.r_[rows["node"][keep], new["node"]],
            np.r_[rows["lo_units"][keep], new["lo_units"]],
            np.r_[rows["hi_units"][keep], new["hi_units"]],
        )

    def __len__(self) -> int:
        """Number of entries (keys) in ``Y``: paper 000's routing-table cost ``O2``."""
        return len(self.keys)

    @property
    def split_keys(self) -> int:
        """Keys of ``Y`` stored on more than one node."""
        return int(np.count_nonzero(np.diff(self.offsets) > 1))

    def _segment_of(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per key: whether it is in ``Y`` and, if so, its segment index."""
        keys = np.asarray(keys, dtype=np.int64)
        if len(self.keys) == 0:
            return np.zeros(len(keys), bool), np.zeros(len(keys), np.int64)
        pos = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return self.keys[pos] == keys, pos

    def nodes_per_key(self, keys: np.ndarray) -> np.ndarray:
        """How many nodes operator routing ALL sends a tuple of each key to."""
        in_table, seg = self._segment_of(keys)
        counts = np.ones(len(in_table), dtype=np.int64)
        counts[in_table] = np.diff(self.offsets)[seg[in_table]]
        return counts

    def operator_nodes(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Operator routing ALL for equi-joins (Algorithm 1): ``(tuple index, node)`` pairs.

        A key outside ``Y`` goes to ``F(k)``; a key in ``Y`` to every node of ``Y(k)``.
        """
        keys = np.asarray(keys, dtype=np.int64)
        in_table, seg = self._segment_of(keys)
        counts = np.ones(len(keys), dtype=np.int64)
        counts[in_table] = np.diff(self.offsets)[seg[in_table]]
        index = np.repeat(np.arange(len(keys)), counts)
        nodes = np.repeat(home_nodes(keys, self.n_nodes), counts)
        if in_table.any():
            starts = np.r_[0, np.cumsum(counts)[:-1]]
            first = starts[in_table]
            n = counts[in_table]
            within = np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)
            part = np.repeat(self.offsets[seg[in_table]], n) + within
            nodes[np.repeat(first, n) + within] = self.nodes[part]
        return index, nodes.astype(np.int32)

    def predicate_nodes(self, keys: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Predicate routing for a band join ``|k1 - k2| <= width`` on integer keys:
        every node holding a key in ``[k - width, k + width]`` (``Y`` entries of matching
        keys plus ``F`` of matching keys outside ``Y``), as unique ``(index, node)`` pairs.
        """
        keys = np.asarray(keys, dtype=np.int64)
        idx, nodes = [], []
        for offset in range(-int(width), int(width) + 1):
            i, d = self.operator_nodes(keys + offset)
            idx.append(i)
            nodes.append(d)
        index = np.concatenate(idx)
        node = np.concatenate(nodes).astype(np.int64)
        packed = np.unique(index * self.n_nodes + node)
        return packed // self.n_nodes, (packed % self.n_nodes).astype(np.int32)

    @property
    def n_parts(self) -> int:
        return len(self.nodes)

    def shares(self, key: int) -> dict[int, float]:
        """``{node: q}`` of one key (``{F(k): 1.0}`` for a key not in ``Y``)."""
        i = int(np.searchsorted(self.keys, key))
        if i < len(self.keys) and self.keys[i] == key:
            s = slice(self.offsets[i], self.offsets[i + 1])
            width = (self.hi_units[s] - self.lo_units[s]) / FRACTION_UNITS
            return {int(n): float(w) for n, w in zip(self.nodes[s], width, strict=True)}
        return {int(home_nodes(np.array([key]), self.n_nodes)[0]): 1.0}

    def storage_nodes(self, keys: np.ndarray, tuple_ids: np.ndarray) -> np.ndarray:
        """Storage routing ONE: the node of every tuple (int32, one per tuple)."""
        keys = np.asarray(keys, dtype=np.int64)
        nodes = home_nodes(keys, self.n_nodes)
        if len(self.keys) == 0 or len(keys) == 0:
            return nodes
        pos = np.searchsorted(self.keys, keys)
        pos_c = np.minimum(pos, len(self.keys) - 1)
        in_table = self.keys[pos_c] == keys
        if not in_table.any():
            return nodes
        seg = pos_c[in_table].astype(np.int64)
        u = fraction_units(np.asarray(tuple_ids, dtype=np.int64)[in_table])
        # One sorted array over all parts: (segment, hi) packed into an int64; the first
        # part of the tuple's segment with hi > u is the chosen one.
        part_seg = np.repeat(np.arange(len(self.keys), dtype=np.int64), np.diff(self.offsets))
        packed = (part_seg << _SEGMENT_SHIFT) + self.hi_units
        chosen = np.searchsorted(packed, (seg << _SEGMENT_SHIFT) + u, side="right")
        nodes[in_table] = self.nodes[chosen]
        return nodes

    def part_rows(self) -> dict[str, np.ndarray]:
        """The table as flat rows ``key, node, lo_units, hi_units`` (for a Spark broadcast)."""
        counts = np.diff(self.offsets)
        return {
            "key": np.repeat(self.keys, counts),
            "node": self.nodes.astype(np.int32),
            "lo_units": self.lo_units.astype(np.int64),
            "hi_units": self.hi_units.astype(np.int64),
        }


#: Salt of paper 001's bucket function ``b = H(k) mod B`` (independent of ``F(k)``).
BUCKET_SALT = 0xB0C7E7


@dataclass(frozen=True)
class BucketMap:
    """Paper 001's bucket map proxy: key -> bucket ``H(k) mod B`` -> ``owner[bucket]``.

    The initial map deals buckets round robin (``owner[b] = b mod N``); an *entry* (cost
    ``O2``, comparable with ``Y``) is a bucket whose owner differs from that default.
    Keys are never split.
    """

    n_nodes: int
    owner: np.ndarray

    @classmethod
    def default(cls, n_nodes: int, n_buckets: int) -> BucketMap:
        return cls(n_nodes, (np.arange(n_buckets) % n_nodes).astype(np.int32))

    @property
    def n_buckets(self) -> int:
        return len(self.owner)

    def buckets(self, keys: np.ndarray) -> np.ndarray:
        return salted_nodes(np.asarray(keys, dtype=np.int64), BUCKET_SALT, self.n_buckets)

    def __len__(self) -> int:
        return int(np.count_nonzero(self.owner != np.arange(self.n_buckets) % self.n_nodes))

    @property
    def split_keys(self) -> int:
        return 0

    def storage_nodes(self, keys: np.ndarray, tuple_ids: np.ndarray | None = None) -> np.ndarray:
        return self.owner[self.buckets(keys)]

    def nodes_per_key(self, keys: np.ndarray) -> np.ndarray:
        return np.ones(len(keys), dtype=np.int64)

    def operator_nodes(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.arange(len(keys)), self.storage_nodes(keys)
