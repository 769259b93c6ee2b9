"""The k-ary tree of paper 004 §2.1 over the ring's address space (``T_TEST``), and the
load aggregation up it that gives every host ``Lbar``."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np


@dataclass
class TreeNode:
    """A virtual node ``T_nd``: address region ``[lo, hi)``, depth, host, links."""

    lo: int
    hi: int
    level: int
    host: int
    parent: int
    children: list[int] = field(default_factory=list)


@dataclass
class KaryTree:
    """The k-ary tree of paper 004 §2.1; child indexes are larger than their parent's."""

    nodes: list[TreeNode]
    #: Host -> index of the leaf it reports to (its shallowest leaf).
    report_leaf: np.ndarray
    depth: int


def build_kary_tree(ring_ids: np.ndarray, space: int, k: int) -> KaryTree:
    """The tree of ``T_TEST``: the root manages the whole address space; a tree node lives
    on the successor host of its region's centre and is a leaf when its region lies inside
    that host's Chord region ``(predecessor, host]``; otherwise its region is split into
    ``k`` equal parts, one child each (empty parts dropped)."""
    ids = np.asarray(ring_ids, dtype=np.int64)
    count = len(ids)
    if count == 0:
        raise ValueError("ring_ids: no hosts; allowed: at least one")
    if len(set(ids.tolist())) != count:
        raise ValueError("ring_ids: ids repeat; allowed: distinct ids")
    order = np.argsort(ids, kind="stable")
    ordered = ids[order].tolist()

    def successor(address: int) -> int:
        return int(order[bisect.bisect_left(ordered, address) % count])

    position = {int(host): i for i, host in enumerate(order)}

    def inside_host_region(lo: int, hi: int, host: int) -> bool:
        if count == 1:
            return True
        pred = ordered[(position[host] - 1) % count]
        length = (int(ids[host]) - pred) % space
        offset = (lo - pred - 1) % space
        return offset + (hi - 1 - lo) < length

    nodes = [TreeNode(0, space, 0, successor((space - 1) // 2), -1)]
    cursor = 0
    while cursor < len(nodes):  # breadth first: children get larger indexes
        node = nodes[cursor]
        if not inside_host_region(node.lo, node.hi, node.host):
            bounds = [node.lo + (node.hi - node.lo) * j // k for j in range(k + 1)]
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
                if hi > lo:
                    node.children.append(len(nodes))
                    nodes.append(
                        TreeNode(lo, hi, node.level + 1, successor((lo + hi - 1) // 2), cursor)
                    )
        cursor += 1
    report_leaf = np.full(count, -1, dtype=np.int64)
    for index, node in enumerate(nodes):
        if not node.children:
            current = report_leaf[node.host]
            if current < 0 or node.level < nodes[current].level:
                report_leaf[node.host] = index
    if (report_leaf < 0).any():  # cannot happen: the leaf holding a host's id is on it
        raise RuntimeError("k-ary tree: a host hosts no leaf")
    return KaryTree(nodes, report_leaf, max(n.level for n in nodes))


def tree_aggregate(tree: KaryTree, host_loads: np.ndarray) -> tuple[float, int, int]:
    """Leaves receive their hosts' loads (count 1 each), inner nodes add their children's
    sums and counts; returns ``(sum, count, messages)`` at the root, messages counting the
    host reports, one per non-empty edge up, the same edges down and the pushes to hosts."""
    size = len(tree.nodes)
    sums = np.zeros(size)
    counts = np.zeros(size, dtype=np.int64)
    np.add.at(sums, tree.report_leaf, np.asarray(host_loads, dtype=float))
    np.add.at(counts, tree.report_leaf, 1)
    edges = 0
    for index in range(size - 1, 0, -1):
        if counts[index]:
            parent = tree.nodes[index].parent
            sums[parent] += sums[index]
            counts[parent] += counts[index]
            edges += 1
    hosts = len(tree.report_leaf)
    return float(sums[0]), int(counts[0]), hosts + 2 * edges + hosts


def tree_mean_load(tree: KaryTree, host_loads: np.ndarray) -> tuple[float, int]:
    """``Lbar`` as the root computes it (sum / count) and the messages it took."""
    total, count, messages = tree_aggregate(tree, host_loads)
    return total / count, messages
