"""Key-level load statistics of one window: the input every planning strategy reads.

Vocabulary of paper 000 (Table 1): a *part* is the data of one key on one node; a key
held by several nodes is *split*. ``L(d)`` is the load of node ``d``; ``Lbar`` the mean
over nodes; the system imbalance is ``max_d L(d) / Lbar - 1`` (0 = perfectly balanced,
comparable with the tolerance ``tau_max``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class KeyLoads:
    """One statistics window as parallel arrays, one row per (key, node) part.

    - ``key`` (int64): the grouping key.
    - ``node`` (int32): the node that holds this part.
    - ``load`` (float64): tuples (or tuple-weighted work) of the key on the node in the
      window.
    - ``state`` (float64): state tuples the node holds for the key: the migration cost
      of moving the whole part (``MC`` in paper 000).

    Keys absent from the arrays have neither load nor state anywhere.
    """

    key: np.ndarray
    node: np.ndarray
    load: np.ndarray
    state: np.ndarray

    def __post_init__(self) -> None:
        key = np.ascontiguousarray(self.key, dtype=np.int64)
        node = np.ascontiguousarray(self.node, dtype=np.int32)
        load = np.ascontiguousarray(self.load, dtype=np.float64)
        state = np.ascontiguousarray(self.state, dtype=np.float64)
        for name, arr in (("key", key), ("node", node), ("load", load), ("state", state)):
            if arr.ndim != 1:
                raise ValueError(f"KeyLoads.{name} must be one-dimensional, got shape {arr.shape}")
            if len(arr) != len(key):
                raise ValueError(
                    f"KeyLoads.{name} has {len(arr)} rows, expected {len(key)} like 'key'"
                )
        if len(node) and node.min() < 0:
            raise ValueError("KeyLoads.node must be >= 0")
        for name, arr in (("load", load), ("state", state)):
            if not np.isfinite(arr).all() or (arr < 0).any():
                raise ValueError(f"KeyLoads.{name} must be finite and >= 0")
        if len(key) > 1:
            order = np.lexsort((node, key))
            k, n = key[order], node[order]
            dup = (k[1:] == k[:-1]) & (n[1:] == n[:-1])
            if dup.any():
                i = int(np.argmax(dup))
                raise ValueError(
                    f"KeyLoads has two rows for key {k[i]} on node {n[i]}; "
                    "expected one row per (key, node)"
                )
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "node", node)
        object.__setattr__(self, "load", load)
        object.__setattr__(self, "state", state)

    @classmethod
    def trusted(
        cls, key: np.ndarray, node: np.ndarray, load: np.ndarray, state: np.ndarray
    ) -> KeyLoads:
        """A KeyLoads from arrays already known valid (a reordering of a validated one)."""
        obj = object.__new__(cls)
        for name, arr in (("key", key), ("node", node), ("load", load), ("state", state)):
            object.__setattr__(obj, name, arr)
        return obj

    def grouped_by_node(self, n_nodes: int) -> tuple[KeyLoads, np.ndarray]:
        """Rows grouped by node (stable, so each node keeps its own row order) and
        ``offsets``: node ``d``'s rows are ``offsets[d]:offsets[d + 1]``.

        Statistics arrive node by node (each node reports its own counts; Spark returns
        partitions in order), so this is usually a check, not a sort.
        """
        node = self.node
        grouped = self
        if len(node) > 1 and (node[1:] < node[:-1]).any():
            sort_key = node.astype(np.int16) if n_nodes <= np.iinfo(np.int16).max else node
            order = np.argsort(sort_key, kind="stable")  # radix sort for int16
            grouped = KeyLoads.trusted(
                self.key[order], node[order], self.load[order], self.state[order]
            )
        offsets = np.searchsorted(grouped.node, np.arange(n_nodes + 1), side="left")
        return grouped, offsets.astype(np.int64)

    @classmethod
    def from_counts(
        cls,
        key: np.ndarray,
        node: np.ndarray,
        load: np.ndarray,
        state: np.ndarray | None = None,
    ) -> KeyLoads:
        """Parts whose state equals their load (a window that holds every tuple it saw)."""
        load = np.asarray(load, dtype=np.float64)
        return cls(key, node, load, load.copy() if state is None else state)

    def __len__(self) -> int:
        return len(self.key)

    def assert_on_nodes(self, n_nodes: int) -> None:
        """An invariant of the engine, not a Param check (``n_nodes`` was checked at the
        door): a window measured on ``n_nodes`` nodes lies on nodes ``0 .. n_nodes - 1``."""
        if len(self.node) and self.node.max() >= n_nodes:
            raise ValueError(
                f"KeyLoads.node holds node {int(self.node.max())}, "
                f"but n_nodes={n_nodes} allows 0..{n_nodes - 1}"
            )

    def node_loads(self, n_nodes: int) -> np.ndarray:
        """``L(d)`` for every node ``d`` (float64, length ``n_nodes``)."""
        self.assert_on_nodes(n_nodes)
        return np.bincount(self.node, weights=self.load, minlength=n_nodes).astype(np.float64)


def imbalance(node_loads: np.ndarray) -> float:
    """System imbalance ``max_d L(d) / Lbar - 1`` (0.0 for an idle system)."""
    node_loads = np.asarray(node_loads, dtype=np.float64)
    mean = float(node_loads.mean()) if len(node_loads) else 0.0
    if mean <= 0.0:
        return 0.0
    return float(node_loads.max() / mean - 1.0)
