"""The overlay's network and ring: hosts in subnets, their delays and bandwidths, the
landmarks and the Hilbert ring ids of paper 004 §2.2.1; :func:`build_network` makes all of it,
k-ary tree included (:mod:`.ktree`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
from hilbertcurve.hilbertcurve import HilbertCurve

from balancebench.models.overlay.ktree import KaryTree, build_kary_tree

#: Address bits of the hashed Chord ring used to choose landmarks.
CHORD_BITS = 32


@dataclass
class OverlayNetwork:
    """Hosts, their subnets, delays, bandwidths, speeds and ring positions."""

    subnet: np.ndarray
    delay_s: np.ndarray
    bandwidth_mb_per_s: np.ndarray
    speed: np.ndarray
    landmarks: np.ndarray
    ring_id: np.ndarray
    ring_space: int
    tree: KaryTree


def build_subnet_topology(
    nodes: int,
    subnets: int,
    intra_subnet_delay_s: float,
    inter_subnet_delay_s: float,
    delay_jitter: float,
    rng: np.random.Generator,
) -> tuple[nx.Graph, np.ndarray]:
    """Hosts ``0..nodes-1`` shuffled into ``subnets`` equal subnets; host -- its
    subnet's forwarding device -- core. Edge attribute ``delay_s``. Returns the graph and
    each host's subnet."""
    # Equal-size subnets, hosts shuffled into them: host numbers carry no locality, so
    # no tie-break by host index can favour a strategy with short paths by accident.
    subnet = rng.permutation((np.arange(nodes) * subnets) // nodes)
    graph = nx.Graph()
    for s in range(subnets):
        delay = inter_subnet_delay_s / 2 * rng.uniform(1 - delay_jitter, 1 + delay_jitter)
        graph.add_edge(("device", s), "core", delay_s=float(delay))
    for host in range(nodes):
        delay = intra_subnet_delay_s / 2 * rng.uniform(1 - delay_jitter, 1 + delay_jitter)
        graph.add_edge(host, ("device", int(subnet[host])), delay_s=float(delay))
    return graph, subnet


def host_delay_matrix(graph: nx.Graph, nodes: int) -> np.ndarray:
    """Shortest-path delay (s) between every pair of hosts."""
    delay = np.zeros((nodes, nodes))
    for host, lengths in nx.all_pairs_dijkstra_path_length(graph, weight="delay_s"):
        if isinstance(host, int | np.integer):
            for other, value in lengths.items():
                if isinstance(other, int | np.integer):
                    delay[host, other] = value
    return delay


def choose_landmarks(chord_ids: np.ndarray, count: int) -> np.ndarray:
    """Paper §2.2.1: ``count`` addresses split the Chord space into equal parts; the hosts
    managing them (their successors) are the landmarks (distinct; the next successor when
    two addresses share one)."""
    order = np.argsort(chord_ids, kind="stable")
    ordered = chord_ids[order]
    chosen: list[int] = []
    space = 1 << CHORD_BITS
    for j in range(count):
        position = int(np.searchsorted(ordered, j * space // count)) % len(ordered)
        while int(order[position]) in chosen:
            position = (position + 1) % len(ordered)
        chosen.append(int(order[position]))
    return np.array(chosen, dtype=np.int64)


def hilbert_positions(cells: np.ndarray, bits: int) -> np.ndarray:
    """Hilbert index of each integer point (rows of ``cells``, each coordinate in
    ``0..2^bits-1``): the position along the curve through the ``dims``-cube."""
    cells = np.asarray(cells, dtype=np.int64)
    curve = HilbertCurve(p=bits, n=cells.shape[1])
    return np.array(curve.distances_from_points(cells.tolist()), dtype=object)


def hilbert_ring_ids(delay_vectors: np.ndarray, bits: int) -> tuple[np.ndarray, int]:
    """Ring id of every host: the Hilbert index of its delay vector quantised to
    ``2^bits`` levels per dimension (one scale for all dimensions, so distances keep their
    meaning), shifted left by enough bits to append its rank among equal indices (ids are
    unique). Returns ``(ids, ring address space size)``."""
    vectors = np.asarray(delay_vectors, dtype=float)
    levels = 1 << bits
    low, high = float(vectors.min()), float(vectors.max())
    scaled = (vectors - low) / (high - low) if high > low else np.zeros_like(vectors)
    cells = np.minimum((scaled * levels).astype(np.int64), levels - 1)
    index = hilbert_positions(cells, bits)
    tie_bits = max(1, math.ceil(math.log2(len(vectors))))
    ids = np.zeros(len(vectors), dtype=np.int64)
    seen: dict[int, int] = {}
    for host, value in enumerate(index):
        rank = seen.get(int(value), 0)
        seen[int(value)] = rank + 1
        ids[host] = (int(value) << tie_bits) + rank
    return ids, 1 << (bits * vectors.shape[1] + tie_bits)


def ring_distance(a: int, b: int, space: int) -> int:
    """Distance between two addresses on the ring (the shorter way round)."""
    d = abs(int(a) - int(b)) % space
    return min(d, space - d)


def build_network(params: dict[str, Any], rng: np.random.Generator) -> OverlayNetwork:
    """Topology, delays, bandwidths, speeds, landmarks, Hilbert ring ids and the tree."""
    nodes = int(params["nodes"])
    graph, subnet = build_subnet_topology(
        nodes,
        int(params["subnets"]),
        float(params["intra_subnet_delay_s"]),
        float(params["inter_subnet_delay_s"]),
        float(params["delay_jitter"]),
        rng,
    )
    delay = host_delay_matrix(graph, nodes)
    same = subnet[:, None] == subnet[None, :]
    bandwidth = np.where(
        same, params["intra_subnet_bandwidth_mb_per_s"], params["inter_subnet_bandwidth_mb_per_s"]
    )
    spread = float(params["cpu_speed_spread"])
    speed = rng.uniform(1 - spread, 1 + spread, nodes) if spread > 0 else np.ones(nodes)
    speed = speed / speed.mean()
    chord_ids = np.unique(rng.integers(0, 1 << CHORD_BITS, 4 * nodes))  # hashed host ids
    while len(chord_ids) < nodes:  # pragma: no cover - collisions in 2^32 are rare
        chord_ids = np.unique(np.concatenate([chord_ids, rng.integers(0, 1 << CHORD_BITS, nodes)]))
    chord_ids = rng.permutation(chord_ids)[:nodes]
    landmarks = choose_landmarks(chord_ids, int(params["landmarks"]))
    ring_id, ring_space = hilbert_ring_ids(delay[:, landmarks], int(params["hilbert_bits"]))
    tree = build_kary_tree(ring_id, ring_space, int(params["k"]))
    return OverlayNetwork(subnet, delay, bandwidth, speed, landmarks, ring_id, ring_space, tree)
