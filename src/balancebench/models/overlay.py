"""``overlay``: paper 004's load balancing over a multi-layer overlay, as a time-stepped model.

Paper 004 (Wang, Rong, Ding, *Computer Engineering* 34(4), 2008, §2-§3) balances the
operators of a distributed stream system over a Chord overlay: a k-ary tree of virtual
nodes collects the hosts' loads (sum and count up, the mean ``Lbar`` down, §2.1); hosts
are *high* (``L >= Lbar + eps``), *low* (``L <= Lbar - eps``) or *middle* (§2.2); a high
host picks the operators to move out by correlation (§2.2.2); hosts are placed on a
virtual ring by the Hilbert index of their delay vector to landmark hosts, so that ring
neighbours are network neighbours, and the load-distribution information (LDI) of high
and low hosts is matched up the tree, nearest on the ring first (§2.2.3). The experiment
(§3) has 100 hosts in 10 subnets, k = 8, on/off sources, system load 80%, and compares
random load balancing (Harchol-Balter et al.) and Borealis' correlation-based
distribution (Xing, Zdonik, Hwang, ICDE 2005) on load fluctuation, load moved and
latency over time, and latency vs average load 0-0.8 (figures 1-4).

The 100-host overlay cannot run here, so this is a model, stepped in periods of
``period_s`` simulated seconds (one statistics-and-balancing round per period).

What is modelled
----------------
- **Network**: a networkx graph; hosts are shuffled into equal subnets (host numbers
  carry no locality); each host links to its subnet's forwarding device, each device to
  an intranet core. Edge delays are ``intra_subnet_delay_s / 2`` and
  ``inter_subnet_delay_s / 2`` times ``U[1 - delay_jitter, 1 + delay_jitter]``
  [reconstructed: the paper gives no delays]; host-to-host delays are shortest-path delays.
- **Operators** [reconstructed]: each on/off source feeds a chain of ``chain_length``
  operators. Operator ``i`` of a chain costs ``w_i / node_capacity_tuples_per_s`` node-
  seconds per tuple, ``w ~ U[0.5, 1.5]`` normalised to sum 1 per chain (the paper fixes
  each operator's selectivity and cost, §3), so a source tuple costs one tuple of node
  capacity along its chain. Operator load in a period = source rate over the period x
  cost (a share of one nominal host). Operators of one chain are perfectly correlated,
  different sources independent: what correlation-based placement exploits.
- **Load scaling**: the dataset's rates give an expected offered load of
  ``onoff_target_load x onoff_capacity_tuples_per_s``; the model multiplies every rate by
  ``target_load x nodes x node_capacity_tuples_per_s / (onoff_target_load x
  onoff_capacity_tuples_per_s)``, so the expected system load (offered work / capacity of
  all hosts) is ``target_load`` (with the defaults, 100 x 1000 tuples/s = the dataset's
  capacity and the factor is 1). Without a dataset, :func:`synthetic_onoff_phases` runs
  the ``onoff`` generator's own code in memory with its default phase Params.
- **Hosts**: CPU speeds ``U[1 - cpu_speed_spread, 1 + cpu_speed_spread]`` normalised to
  mean 1 (0 = homogeneous; paper 004 allows heterogeneous hosts, ``C_h``, ``C_l``). A
  host's load is its utilisation: operator work / (speed x period).
- **Latency** [reconstructed]: per host and period, a backlog ``B`` (seconds of host time)
  carries over: ``B' = max(0, B + (rho - 1) period)``; a tuple visiting the host waits
  ``(B + B') / 2`` plus its own service time x ``1 / (1 - min(rho, rho_cap))`` (M/M/1-like
  inflation). A tuple's latency = the sum over its chain's operators + the network delays
  source host -> first operator -> ... -> last operator + a migration pause: an operator
  moved from host a to b is paused ``operator_state_mb / bandwidth(a, b) + delay(a, b)``
  (bandwidth ``intra_``/``inter_subnet_bandwidth_mb_per_s``: the paper throttles the
  subnets' forwarding devices); tuples arriving during a pause ``p`` wait for it (mean
  extra ``p^2 / (2 period)`` over the period, ``p - period / 2`` if ``p > period``).
  Percentiles are tuple-weighted over (source, period) cells. Throughput = offered tuples
  x the share of offered work processed by the end (final backlog unprocessed) / duration.
- **Statistics**: every round uses the last ``stats_window_periods`` periods (fewer at
  the start); correlation of series with fewer than 3 points or zero variance is 0.

Strategies
----------
- ``overlay_random`` (Harchol-Balter et al.'s *Random* policy as a migration rule
  [interpreted]): ``Lbar`` from a central collector (2 messages per host: report and
  broadcast); each high host moves operators in random order, each to a uniformly random
  other host, until it is no longer high (never below ``Lbar - eps``).
- ``borealis`` [reconstructed from Xing et al.]: greedy correlation-based initial
  placement (operators by decreasing mean load; each to the host, among those that stay
  within ``Lbar + eps``, whose load series has the lowest correlation with it; else the
  least loaded), computed from the first ``stats_window_periods`` periods as its load
  profile [interpreted: Borealis assumes known statistics; this gives it an informed
  start the others do not have]; then each round a central coordinator (2 messages per
  host) pairs hosts by load (most with least loaded, ...), and a pair whose loads differ by
  at least ``2 eps`` is redistributed pair-wise: its operators, by decreasing mean load, go
  to the side that stays within its speed-proportional share + ``eps`` and has the lower
  correlation with them (ties keep the operator where it is).
- ``ktree_hilbert`` (the paper's algorithm): ring ids = Hilbert index of the quantised
  delay vector to ``landmarks`` hosts (``hilbert_bits`` per dimension, the successors of
  ``landmarks`` equally spaced addresses of a hashed Chord ring, §2.2.1), ties broken by
  extra low bits; the k-ary tree over that address space is built with the paper's
  ``T_TEST`` rule (a tree node is a leaf when its region lies inside its host's Chord
  region; its host = successor of its centre address); each host reports its load to its
  shallowest leaf with count 1, inner nodes add sums and counts, the root's ``Lbar`` goes
  down (messages: reports, one per non-empty edge up, one per edge down, one per host).
  High hosts select operators by ``O_SELECTION`` [interpreted]: repeatedly move out the
  operator with the largest ``rho(v_j, sum of the others)`` (ties: larger mean) whose
  removal keeps the host at or above ``Lbar - eps``, until the host is below
  ``Lbar + eps``. LDI ``<dL, host, C>``: one per selected operator from high hosts, one
  ``<Lbar - L, host, C>`` per low host. ``LOAD_SCAN`` bottom-up: a tree node whose lists
  hold more than ``ldi_match_min_entries`` entries matches them (high entries by
  decreasing ``dL``; each to the fitting low entry nearest on the ring; ``dL`` scaled by
  ``C_h / C_l``; a low entry's remainder is kept while above ``ldi_min_load``) and
  forwards the rest to its parent (one message per non-empty forward); the root drops
  what it cannot match. Each move costs 2 messages for every strategy.

Left out: Chord joins/leaves and tree maintenance (the tree is built once), message
delays of the control plane, operator state sizes that vary, backlog moving with an
operator, bandwidth sharing of data streams, queries other than chains.

Metrics: ``load_fluctuation`` = the paper's D(VN(i)), the variance of each host's own load
over time, here [interpreted] over the last ``stats_window_periods`` periods (the text's
"T", page 59 where it is defined further is not in the extraction), averaged over hosts
per period; ``load_spread_across_hosts`` = the std over hosts of host load per period
(what this model logged as fluctuation before: a spread, not the paper's figure);
``load_moved`` = the paper's load moving rate ``sum_i l_i / n`` (load moved
out of each host, as a share of its capacity, averaged over hosts) per round.
``events`` = messages + moves + host-period updates.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import networkx as nx
import numpy as np
import pandas as pd
import pyarrow as pa
from hilbertcurve.hilbertcurve import HilbertCurve

from balancebench.generators.common import load_manifest, read_table
from balancebench.generators.onoff import OWN_PARAMS as ONOFF_PARAMS
from balancebench.generators.onoff import OnOffSources
from balancebench.models.base import Model, ModelPoint, ModelResult
from balancebench.schema import integer_spec, number_spec

STRATEGIES = ("overlay_random", "borealis", "ktree_hilbert")
#: Float slack for load comparisons (loads are shares of a host, about 0..2).
LOAD_TOLERANCE = 1e-9
#: Address bits of the hashed Chord ring used to choose landmarks.
CHORD_BITS = 32
#: Series with fewer points have no usable correlation.
MIN_CORRELATION_POINTS = 3


PARAM_SCHEMA: dict[str, dict[str, Any]] = {
    "nodes": integer_spec(
        100, "Hosts", "Hosts of the overlay (paper 004: 100).", minimum=2, maximum=10_000
    ),
    "subnets": integer_spec(
        10, "Subnets", "Subnets the hosts are split into (paper: 10).", minimum=1, maximum=10_000
    ),
    "k": integer_spec(
        8,
        "Tree arity k",
        "Children per inner node of the k-ary tree (paper: 8).",
        minimum=2,
        maximum=64,
    ),
    "eps": number_spec(
        0.1,
        "State threshold eps",
        "High: L >= Lbar + eps, low: L <= Lbar - eps (share of a host) [reconstructed value].",
        minimum=0.0,
        maximum=1.0,
    ),
    "period_s": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 3600,
        "default": 1.0,
        "title": "Period (s)",
        "description": "Statistics and balancing period (simulated seconds).",
    },
    "duration_s": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 1e7,
        "default": 20.0,
        "title": "Duration (s)",
        "description": "Simulated time (paper 004's figures: 20 s); at most the dataset's.",
    },
    "stats_window_periods": integer_spec(
        5,
        "Statistics window",
        "Periods of load history used by each round.",
        minimum=1,
        maximum=10_000,
    ),
    "target_load": number_spec(
        0.8,
        "Average load",
        "Expected offered work / capacity of all hosts (paper: 0.8; swept 0-0.8); the "
        "dataset's rates are rescaled to it.",
        minimum=0.0,
        maximum=1.0,
    ),
    "node_capacity_tuples_per_s": {
        "type": "number",
        "exclusiveMinimum": 0,
        "maximum": 1e12,
        "default": 1000.0,
        "title": "Host capacity (tuples/s)",
        "description": "Source tuples per second one nominal host processes along chains.",
    },
    "chain_length": integer_spec(
        4,
        "Operators per source",
        "Chain of operators each source feeds [reconstructed].",
        minimum=1,
        maximum=100,
    ),
    "landmarks": integer_spec(
        4, "Landmarks", "Landmark hosts of the delay vectors (paper: n).", minimum=1, maximum=64
    ),
    "hilbert_bits": integer_spec(
        3,
        "Hilbert bits",
        "Quantisation bits per delay dimension (paper: 2^m >= k).",
        minimum=1,
        maximum=16,
    ),
    "intra_subnet_delay_s": number_spec(
        0.001,
        "Intra-subnet delay (s)",
        "Host-to-host delay in one subnet.",
        minimum=0.0,
        maximum=10.0,
    ),
    "inter_subnet_delay_s": number_spec(
        0.02,
        "Inter-subnet delay (s)",
        "Extra delay across two forwarding devices.",
        minimum=0.0,
        maximum=10.0,
    ),
    "delay_jitter": number_spec(
        0.5,
        "Delay jitter",
        "Edge delays x U[1 - jitter, 1 + jitter] [reconstructed].",
        minimum=0.0,
        maximum=0.99,
    ),
    "cpu_speed_spread": number_spec(
        0.0,
        "CPU speed spread",
        "Host speeds U[1 - s, 1 + s], mean 1 (0: identical).",
        minimum=0.0,
        maximum=0.9,
    ),
    "rho_cap": number_spec(
        0.95,
        "Utilisation cap",
        "M/M/1 inflation 1/(1 - min(rho, cap)) [reconstructed].",
        minimum=0.0,
        maximum=0.999,
    ),
    "operator_state_mb": number_spec(
        1.0,
        "Operator state (MB)",
        "State moved with an operator [reconstructed].",
        minimum=0.0,
        maximum=1e6,
    ),
    "intra_subnet_bandwidth_mb_per_s": number_spec(
        100.0,
        "Intra-subnet bandwidth (MB/s)",
        "Bandwidth of a migration inside a subnet [reconstructed].",
        exclusiveMinimum=0,
        maximum=1e6,
    ),
    "inter_subnet_bandwidth_mb_per_s": number_spec(
        5.0,
        "Inter-subnet bandwidth (MB/s)",
        "Bandwidth across forwarding devices (the paper throttles them).",
        exclusiveMinimum=0,
        maximum=1e6,
    ),
    "ldi_min_load": number_spec(
        0.01,
        "LDI remainder delta",
        "A low entry is kept while its remainder > delta.",
        minimum=0.0,
        maximum=1.0,
    ),
    "ldi_match_min_entries": integer_spec(
        1,
        "LDI list delta",
        "A tree node matches when its lists hold more entries.",
        minimum=0,
        maximum=10_000,
    ),
    "synthetic_sources": integer_spec(
        100,
        "Sources (no dataset)",
        "On/off sources when no dataset is given.",
        minimum=1,
        maximum=100_000,
    ),
}


# ---- input -----------------------------------------------------------------------------


class _CollectingWriter:
    """Stands in for ``TableWriter``: keeps the generator's batches in memory."""

    def __init__(self) -> None:
        self.batches: dict[str, list[pa.RecordBatch]] = {}

    @contextmanager
    def table(self, name: str, schema: pa.Schema, delta_columns: tuple[str, ...] = ()) -> Iterator:
        batches = self.batches.setdefault(name, [])
        yield batches.append


def synthetic_onoff_phases(
    sources: int, duration_s: float, capacity_tuples_per_s: float, seed: int
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The ``onoff`` generator's ``phases`` table, made in memory with its default phase
    Params (target load 1.0 of ``capacity_tuples_per_s``); returns it and those Params."""
    params = {name: spec["default"] for name, spec in ONOFF_PARAMS.items()}
    params.update(
        onoff_sources=sources,
        onoff_duration_s=float(duration_s),
        onoff_target_load=1.0,
        onoff_capacity_tuples_per_s=float(capacity_tuples_per_s),
        seed=seed,
    )
    writer = _CollectingWriter()
    OnOffSources().write(writer, params)  # type: ignore[arg-type]
    table = pa.Table.from_batches(writer.batches["phases"])
    return table.to_pandas(), params


def period_rates(phases: pd.DataFrame, sources: int, period_s: float, periods: int) -> np.ndarray:
    """``(sources, periods)`` mean rate (tuples/s) of each source over each period, from
    the exact tuples sent (piecewise-linear cumulative count of the phases)."""
    rates = np.zeros((sources, periods))
    edges = np.arange(periods + 1) * period_s
    ordered = phases.sort_values(["source", "phase"], kind="stable")
    for source, rows in ordered.groupby("source", sort=True):
        start = rows["start_s"].to_numpy()
        end = rows["end_s"].to_numpy()
        sent = np.concatenate(
            [[0.0], np.cumsum(rows["rate_tuples_per_s"].to_numpy() * (end - start))]
        )
        times = np.concatenate([start[:1], end])
        cumulative = np.interp(edges, times, sent)
        rates[int(source)] = np.diff(cumulative) / period_s
    return rates


# ---- network and ring --------------------------------------------------------------------


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


# ---- k-ary tree ----------------------------------------------------------------------------


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


# ---- decisions ------------------------------------------------------------------------------


def correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation of two series; 0 when either is too short or constant."""
    if len(a) < MIN_CORRELATION_POINTS:
        return 0.0
    da, db = a - a.mean(), b - b.mean()
    norm = math.sqrt(float(da @ da) * float(db @ db))
    return float(da @ db) / norm if norm > 1e-12 else 0.0


def correlations_with_rows(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Correlation of series ``x`` with each row of ``rows`` (0 where undefined)."""
    if rows.shape[1] < MIN_CORRELATION_POINTS:
        return np.zeros(len(rows))
    dx = x - x.mean()
    dr = rows - rows.mean(axis=1, keepdims=True)
    norm = np.sqrt((dr * dr).sum(axis=1) * float(dx @ dx))
    out = np.zeros(len(rows))
    ok = norm > 1e-12
    out[ok] = (dr[ok] @ dx) / norm[ok]
    return out


def select_operators_to_move(
    op_series: np.ndarray, speed: float, lbar: float, eps: float
) -> list[int]:
    """Paper 004 ``O_SELECTION`` [interpreted]: on a high host (rows of ``op_series`` = its
    operators' load series, shares of a nominal host), repeatedly move out the operator
    with the largest correlation with the sum of the others, among those whose removal
    keeps the host at or above ``Lbar - eps``, until the host is below ``Lbar + eps``.
    Returns row indexes in the order chosen."""
    means = op_series.mean(axis=1)
    load = float(means.sum()) / speed
    total = op_series.sum(axis=0)
    remaining = list(range(len(op_series)))
    chosen: list[int] = []
    while load >= lbar + eps - LOAD_TOLERANCE:
        best, best_key = -1, None
        for j in remaining:
            if load - means[j] / speed < lbar - eps - LOAD_TOLERANCE:
                continue
            key = (correlation(op_series[j], total - op_series[j]), float(means[j]), -j)
            if best_key is None or key > best_key:
                best, best_key = j, key
        if best < 0:
            break
        chosen.append(best)
        remaining.remove(best)
        load -= means[best] / speed
        total = total - op_series[best]
    return chosen


@dataclass
class HighEntry:
    """LDI of an operator to move out: ``<dL, host, C_h>`` (dL in the host's units)."""

    op: int
    host: int
    load: float


@dataclass
class LowEntry:
    """LDI of a low host: ``<Lbar - L, host, C_l>`` (remaining capacity to fill)."""

    host: int
    load: float


def match_ldi(
    high: list[HighEntry],
    low: list[LowEntry],
    ring_id: np.ndarray,
    ring_space: int,
    speed: np.ndarray,
    min_remaining: float,
) -> tuple[list[tuple[int, int, int]], list[HighEntry], list[LowEntry]]:
    """``MATCH_INF``: high entries by decreasing ``dL`` each go to the low entry nearest
    on the ring that can take ``dL x C_h / C_l``; the low entry keeps its remainder while
    it exceeds ``min_remaining``. Returns ``(moves (op, from, to), unmatched high, low)``."""
    moves: list[tuple[int, int, int]] = []
    unmatched: list[HighEntry] = []
    lows = list(low)
    for entry in sorted(high, key=lambda e: (-e.load, e.op)):
        best, best_key = None, None
        for candidate in lows:
            need = entry.load * speed[entry.host] / speed[candidate.host]
            if need <= candidate.load + LOAD_TOLERANCE:
                key = (
                    ring_distance(ring_id[entry.host], ring_id[candidate.host], ring_space),
                    candidate.host,
                )
                if best_key is None or key < best_key:
                    best, best_key = candidate, key
        if best is None:
            unmatched.append(entry)
            continue
        moves.append((entry.op, entry.host, best.host))
        best.load -= entry.load * speed[entry.host] / speed[best.host]
        if best.load <= min_remaining + LOAD_TOLERANCE:
            lows.remove(best)
    return moves, unmatched, lows


def ktree_match(
    tree: KaryTree,
    high: list[HighEntry],
    low: list[LowEntry],
    ring_id: np.ndarray,
    ring_space: int,
    speed: np.ndarray,
    min_remaining: float,
    min_entries: int,
) -> tuple[list[tuple[int, int, int]], int]:
    """``LOAD_SCAN`` bottom-up over the tree: entries start at their host's report leaf; a
    tree node whose lists hold more than ``min_entries`` entries matches them; the rest go
    to its parent. Returns the moves and the messages (non-empty forwards)."""
    size = len(tree.nodes)
    highs: list[list[HighEntry]] = [[] for _ in range(size)]
    lows: list[list[LowEntry]] = [[] for _ in range(size)]
    for entry in high:
        highs[tree.report_leaf[entry.host]].append(entry)
    for entry in low:
        lows[tree.report_leaf[entry.host]].append(LowEntry(entry.host, entry.load))
    moves: list[tuple[int, int, int]] = []
    messages = 0
    for index in range(size - 1, -1, -1):
        h, lo = highs[index], lows[index]
        if not h and not lo:
            continue
        if h and lo and len(h) + len(lo) > min_entries:
            matched, h, lo = match_ldi(h, lo, ring_id, ring_space, speed, min_remaining)
            moves.extend(matched)
        parent = tree.nodes[index].parent
        if parent >= 0 and (h or lo):
            highs[parent].extend(h)
            lows[parent].extend(lo)
            messages += 1
    return moves, messages


def ktree_round(
    placement: np.ndarray,
    op_window: np.ndarray,
    network: OverlayNetwork,
    eps: float,
    min_remaining: float,
    min_entries: int,
) -> tuple[list[tuple[int, int, int]], int]:
    """One round of the paper's algorithm; returns moves and messages."""
    nodes = len(network.speed)
    means = op_window.mean(axis=1)
    host_load = np.bincount(placement, weights=means, minlength=nodes) / network.speed
    lbar, messages = tree_mean_load(network.tree, host_load)
    high: list[HighEntry] = []
    low: list[LowEntry] = []
    for host in range(nodes):
        if host_load[host] >= lbar + eps - LOAD_TOLERANCE:
            ops = np.flatnonzero(placement == host)
            for row in select_operators_to_move(op_window[ops], network.speed[host], lbar, eps):
                high.append(
                    HighEntry(int(ops[row]), host, float(means[ops[row]] / network.speed[host]))
                )
        elif host_load[host] <= lbar - eps + LOAD_TOLERANCE:
            low.append(LowEntry(host, float(lbar - host_load[host])))
    moves, ldi_messages = ktree_match(
        network.tree,
        high,
        low,
        network.ring_id,
        network.ring_space,
        network.speed,
        min_remaining,
        min_entries,
    )
    return moves, messages + ldi_messages


def random_round(
    placement: np.ndarray,
    op_means: np.ndarray,
    speed: np.ndarray,
    eps: float,
    rng: np.random.Generator,
) -> tuple[list[tuple[int, int, int]], int]:
    """Random policy: each high host moves operators (random order) to uniformly random
    other hosts until it is no longer high, never going below ``Lbar - eps``."""
    nodes = len(speed)
    host_load = np.bincount(placement, weights=op_means, minlength=nodes) / speed
    lbar = float(host_load.mean())
    moves: list[tuple[int, int, int]] = []
    for host in np.flatnonzero(host_load >= lbar + eps - LOAD_TOLERANCE):
        load = float(host_load[host])
        for op in rng.permutation(np.flatnonzero(placement == host)):
            if load < lbar + eps - LOAD_TOLERANCE:
                break
            if load - op_means[op] / speed[host] < lbar - eps - LOAD_TOLERANCE:
                continue
            target = int(rng.integers(nodes - 1))
            target += target >= host
            moves.append((int(op), int(host), target))
            load -= op_means[op] / speed[host]
    return moves, 2 * nodes


def correlation_greedy_placement(
    op_window: np.ndarray, speed: np.ndarray, eps: float
) -> np.ndarray:
    """Borealis-style initial placement [reconstructed]: operators by decreasing mean load,
    each to the host with the lowest correlation with it among those whose load stays
    within ``Lbar + eps`` (ties: lower resulting load, fewer operators, lower index); if
    none, the host
    with the lowest resulting load."""
    nodes = len(speed)
    means = op_window.mean(axis=1)
    target = float(means.sum()) / float(speed.sum())
    host_series = np.zeros((nodes, op_window.shape[1]))
    host_work = np.zeros(nodes)
    host_ops = np.zeros(nodes, dtype=np.int64)
    placement = np.zeros(len(means), dtype=np.int64)
    for op in np.argsort(-means, kind="stable"):
        after = (host_work + means[op]) / speed
        fits = np.flatnonzero(after <= target + eps + LOAD_TOLERANCE)
        if len(fits):
            rho = correlations_with_rows(op_window[op], host_series[fits])
            choice = int(fits[np.lexsort((fits, host_ops[fits], after[fits], rho))[0]])
        else:
            choice = int(np.argmin(after))
        placement[op] = choice
        host_series[choice] += op_window[op]
        host_work[choice] += means[op]
        host_ops[choice] += 1
    return placement


def borealis_round(
    placement: np.ndarray, op_window: np.ndarray, speed: np.ndarray, eps: float
) -> tuple[list[tuple[int, int, int]], int]:
    """Borealis pair-wise round [reconstructed]: pair hosts by load (i-th most with i-th
    least loaded); a pair whose loads differ by ``>= 2 eps`` redistributes its operators
    greedily by correlation within speed-proportional shares + ``eps``."""
    nodes = len(speed)
    means = op_window.mean(axis=1)
    host_load = np.bincount(placement, weights=means, minlength=nodes) / speed
    order = np.argsort(-host_load, kind="stable")
    moves: list[tuple[int, int, int]] = []
    for i in range(nodes // 2):
        a, b = int(order[i]), int(order[nodes - 1 - i])
        if host_load[a] - host_load[b] < 2 * eps - LOAD_TOLERANCE:
            continue
        ops = np.flatnonzero((placement == a) | (placement == b))
        ops = ops[np.argsort(-means[ops], kind="stable")]
        pair = (a, b)
        share = float(means[ops].sum()) / float(speed[a] + speed[b])
        series = np.zeros((2, op_window.shape[1]))
        work = np.zeros(2)
        for op in ops:
            after = (work + means[op]) / speed[list(pair)]
            fits = after <= share + eps + LOAD_TOLERANCE
            if fits.any():
                rho = correlations_with_rows(op_window[op], series)
                side = min(
                    (s for s in (0, 1) if fits[s]),
                    key=lambda s: (rho[s], pair[s] != placement[op], after[s]),
                )
            else:
                side = int(np.argmin(after))
            series[side] += op_window[op]
            work[side] += means[op]
            if pair[side] != placement[op]:
                moves.append((int(op), int(placement[op]), pair[side]))
    return moves, 2 * nodes


# ---- simulation ------------------------------------------------------------------------------


@dataclass
class OverlayInput:
    """What the simulation runs on.

    ``op_load``: ``(ops, periods)`` load of each operator, shares of a nominal host;
    ``op_cost_s``: service time per tuple on a nominal host; ``chains``: ``(sources,
    chain_length)`` operator indexes in chain order; ``source_tuples``: ``(sources,
    periods)`` tuples entering; ``source_host``: where each source enters."""

    op_load: np.ndarray
    op_cost_s: np.ndarray
    chains: np.ndarray
    source_tuples: np.ndarray
    source_host: np.ndarray


def migration_pause_s(network: OverlayNetwork, src: int, dst: int, state_mb: float) -> float:
    """Time an operator is stopped while it moves: state transfer + one delay."""
    return state_mb / network.bandwidth_mb_per_s[src, dst] + network.delay_s[src, dst]


def pause_extra_latency_s(pause_s: float, period_s: float) -> float:
    """Mean extra wait of a period's tuples (uniform arrivals) behind a pause at its start."""
    if pause_s <= period_s:
        return pause_s * pause_s / (2 * period_s)
    return pause_s - period_s / 2


def weighted_percentiles(
    values: np.ndarray, weights: np.ndarray, quantiles: list[float]
) -> list[float]:
    """Percentiles of ``values`` with ``weights`` (unweighted when all weights are 0)."""
    values = np.asarray(values, dtype=float).ravel()
    weights = np.asarray(weights, dtype=float).ravel()
    if len(values) == 0:
        return [0.0 for _ in quantiles]
    if weights.sum() <= 0:
        weights = np.ones_like(values)
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    total = cumulative[-1]
    return [
        float(values[order][min(np.searchsorted(cumulative, q * total), len(values) - 1)])
        for q in quantiles
    ]


def load_fluctuation(host_loads: np.ndarray) -> float:
    """Paper 004's D(VN(i)) averaged over hosts: ``host_loads`` is periods x hosts; each
    host's variance of its own load over those periods, then the mean over hosts."""
    return float(np.asarray(host_loads, dtype=np.float64).var(axis=0).mean())


def simulate_overlay(
    data: OverlayInput,
    network: OverlayNetwork,
    strategy: str,
    initial_placement: np.ndarray,
    params: dict[str, Any],
    rng: np.random.Generator,
) -> ModelResult:
    """Step the periods: host loads, queues and latencies, then a balancing round."""
    nodes = len(network.speed)
    ops, periods = data.op_load.shape
    period_s = float(params["period_s"])
    eps = float(params["eps"])
    window = int(params["stats_window_periods"])
    placement = np.asarray(initial_placement, dtype=np.int64).copy()
    backlog_s = np.zeros(nodes)
    pause_latency = np.zeros(len(data.chains))
    latency = np.zeros((len(data.chains), periods))
    fluctuation, spread, moved, load_mean, imbalance = (np.zeros(periods) for _ in range(5))
    history = np.zeros((periods, nodes))  # each host's load per period: D(VN(i)) needs it
    latency_mean, latency_p95 = np.zeros(periods), np.zeros(periods)
    plan_ms: list[float] = []
    moves_total = messages_total = 0
    move_delays: list[float] = []
    intra_moves = 0
    work_total = 0.0
    op_chain = np.zeros(ops, dtype=np.int64)
    for s, chain in enumerate(data.chains):
        op_chain[chain] = s
    for t in range(periods):
        util = np.bincount(placement, weights=data.op_load[:, t], minlength=nodes) / network.speed
        work_total += float((util * network.speed).sum() * period_s)
        history[t] = util
        fluctuation[t] = load_fluctuation(history[max(0, t - window + 1) : t + 1])
        spread[t] = util.std()
        load_mean[t] = util.mean()
        imbalance[t] = util.max() / util.mean() - 1 if util.mean() > 0 else 0.0
        after_s = np.maximum(0.0, backlog_s + (util - 1) * period_s)
        wait_s = (backlog_s + after_s) / 2
        backlog_s = after_s
        inflation = 1 / (1 - np.minimum(util, params["rho_cap"]))
        host = placement
        step_s = data.op_cost_s / network.speed[host] * inflation[host] + wait_s[host]
        chain_hosts = host[data.chains]
        hops_s = network.delay_s[data.source_host, chain_hosts[:, 0]]
        if data.chains.shape[1] > 1:
            hops_s = hops_s + network.delay_s[chain_hosts[:, :-1], chain_hosts[:, 1:]].sum(axis=1)
        latency[:, t] = step_s[data.chains].sum(axis=1) + hops_s + pause_latency
        weights = data.source_tuples[:, t]
        if weights.sum() > 0:
            latency_mean[t] = float(latency[:, t] @ weights / weights.sum())
        else:
            latency_mean[t] = float(latency[:, t].mean())
        latency_p95[t] = weighted_percentiles(latency[:, t], weights, [0.95])[0]
        pause_latency = np.zeros(len(data.chains))
        if t == periods - 1:
            break
        op_window = data.op_load[:, max(0, t - window + 1) : t + 1]
        started = time.perf_counter()
        if strategy == "ktree_hilbert":
            moves, messages = ktree_round(
                placement,
                op_window,
                network,
                eps,
                float(params["ldi_min_load"]),
                int(params["ldi_match_min_entries"]),
            )
        elif strategy == "borealis":
            moves, messages = borealis_round(placement, op_window, network.speed, eps)
        else:
            moves, messages = random_round(
                placement, op_window.mean(axis=1), network.speed, eps, rng
            )
        plan_ms.append((time.perf_counter() - started) * 1000)
        means = op_window.mean(axis=1)
        for op, src, dst in moves:
            moved[t] += means[op] / network.speed[src]
            placement[op] = dst
            pause = migration_pause_s(network, src, dst, float(params["operator_state_mb"]))
            pause_latency[op_chain[op]] += pause_extra_latency_s(pause, period_s)
            move_delays.append(float(network.delay_s[src, dst]))
            intra_moves += int(network.subnet[src] == network.subnet[dst])
        moved[t] /= nodes
        moves_total += len(moves)
        messages_total += messages + 2 * len(moves)
    weights = data.source_tuples
    p50, p95, p99 = weighted_percentiles(latency, weights, [0.5, 0.95, 0.99])
    tuples = float(weights.sum())
    duration_s = periods * period_s
    processed_share = (
        1 - float((backlog_s * network.speed).sum()) / work_total if work_total > 0 else 1.0
    )
    metrics = {
        "plan_time_ms": float(np.mean(plan_ms)) if plan_ms else 0.0,
        "latency_p50_s": p50,
        "latency_p95_s": p95,
        "latency_p99_s": p99,
        "latency_s_mean": float((latency * weights).sum() / tuples)
        if tuples > 0
        else float(latency.mean()),
        "throughput_tuples_per_s": tuples * max(processed_share, 0.0) / duration_s,
        "imbalance_max_over_mean": float(imbalance.mean()),
        "load_fluctuation_mean": float(fluctuation.mean()),
        "load_spread_across_hosts_mean": float(spread.mean()),
        "load_moved_total": float(moved.sum()),
        "load_moved_mean": float(moved[:-1].mean()) if periods > 1 else 0.0,
        "average_load_mean": float(load_mean.mean()),
        "moves": float(moves_total),
        "messages": float(messages_total),
        "move_delay_mean_s": float(np.mean(move_delays)) if move_delays else 0.0,
        "moves_intra_subnet_share": intra_moves / moves_total if moves_total else 0.0,
    }
    series = {
        "load_fluctuation": fluctuation.tolist(),
        "load_spread_across_hosts": spread.tolist(),
        "load_moved": moved.tolist(),
        "latency_s": latency_mean.tolist(),
        "latency_p95_s_by_period": latency_p95.tolist(),
        "average_load": load_mean.tolist(),
    }
    counts = np.bincount(placement, minlength=nodes)
    info = {
        "final_operators_per_host": counts.tolist(),
        "initial_operators_per_host": np.bincount(initial_placement, minlength=nodes).tolist(),
        "rounds": len(plan_ms),
    }
    return ModelResult(
        metrics=metrics,
        series=series,
        time_s=((np.arange(periods) + 1) * period_s).tolist(),
        events=int(messages_total + moves_total + nodes * periods),
        info=info,
    )


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


def build_input(
    rates: np.ndarray, params: dict[str, Any], rng: np.random.Generator
) -> OverlayInput:
    """Chains of operators over the sources' per-period rates (already at the target load)."""
    sources = rates.shape[0]
    length = int(params["chain_length"])
    capacity = float(params["node_capacity_tuples_per_s"])
    weights = rng.uniform(0.5, 1.5, (sources, length))
    weights /= weights.sum(axis=1, keepdims=True)
    chains = np.arange(sources * length).reshape(sources, length)
    op_cost_s = (weights / capacity).ravel()
    op_load = np.repeat(rates, length, axis=0) * op_cost_s[:, None]
    return OverlayInput(
        op_load=op_load,
        op_cost_s=op_cost_s,
        chains=chains,
        source_tuples=rates * float(params["period_s"]),
        source_host=np.arange(sources) % int(params["nodes"]),
    )


# ---- the model ---------------------------------------------------------------------------


class OverlayModel(Model):
    """Paper 004's overlay load balancing vs random and Borealis (see the module doc)."""

    name: ClassVar[str] = "overlay"
    reference: ClassVar[str] = (
        "paper 004 (Wang, Rong, Ding, Computer Engineering 2008) §2 algorithm, §3 experiment"
    )
    strategies: ClassVar[tuple[str, ...]] = STRATEGIES
    dataset: ClassVar[str] = "onoff"
    param_schema: ClassVar[dict[str, dict[str, Any]]] = PARAM_SCHEMA
    metric_definitions: ClassVar[dict[str, str]] = {
        "plan_time_ms": "Mean wall time of one balancing round's decision code "
        "(time.perf_counter), milliseconds.",
        "latency_p50_s": "Median tuple latency (queueing + network + migration pauses along "
        "the source's chain), simulated seconds. The model computes one mean latency per "
        "(source, period) and gives it to every tuple of that cell (weight = its tuples), so "
        "the percentiles are over cells: the spread within a cell is not modelled and p95/p99 "
        "understate a per-tuple tail.",
        "latency_p95_s": "95th percentile of the same per-(source, period) latency, "
        "tuple-weighted, seconds.",
        "latency_p99_s": "99th percentile of the same per-(source, period) latency, "
        "tuple-weighted, seconds.",
        "latency_s_mean": "Tuple-weighted mean of the same latency over the run, seconds.",
        "throughput_tuples_per_s": "Source tuples processed per simulated second (offered x "
        "share of offered work not left in backlogs at the end).",
        "imbalance_max_over_mean": "Mean over periods of max / mean - 1 of host load "
        "(utilisation in the period).",
        "load_fluctuation_mean": "Mean over periods of load_fluctuation (variance, share^2).",
        "load_spread_across_hosts_mean": "Mean over periods of load_spread_across_hosts.",
        "load_moved_total": "Sum over rounds of load_moved (share of a host).",
        "load_moved_mean": "Mean over rounds of load_moved (share of a host).",
        "average_load_mean": "Mean over periods of average_load (realized average load).",
        "moves": "Operator migrations over the run.",
        "messages": "Control messages over the run (load collection, LDI forwards, 2 per move).",
        "move_delay_mean_s": "Mean network delay between the two hosts of a migration, seconds.",
        "moves_intra_subnet_share": "Share of migrations inside one subnet.",
        "load_fluctuation": (
            "[per period] Paper 004's D(VN(i)): variance of each host's load (utilisation) "
            "over the last stats_window_periods periods, averaged over hosts."
        ),
        "load_spread_across_hosts": "[per period] std over hosts of host load (utilisation).",
        "load_moved": "[per round] sum over hosts of the operator load (window mean, share "
        "of the source host's capacity) moved out, divided by the hosts (paper: sum l_i / n).",
        "latency_s": "[per period] tuple-weighted mean latency of the period's tuples, seconds.",
        "latency_p95_s_by_period": "[per period] 95th percentile of the same latency, seconds.",
        "average_load": "[per period] mean host load (utilisation, share of capacity).",
    }

    def check_params(self, params: dict[str, Any]) -> dict[str, Any]:
        values = super().check_params(params)
        periods = values["duration_s"] / values["period_s"]
        if periods < 2:
            raise ValueError(
                f"overlay_duration_s: {values['duration_s']} s is {periods:.3g} periods of "
                f"overlay_period_s {values['period_s']}; allowed: at least 2 periods"
            )
        if periods > 1_000_000:
            raise ValueError(
                f"overlay_duration_s: {periods:.3g} periods; allowed: at most 1e6 periods"
            )
        if values["subnets"] > values["nodes"]:
            raise ValueError(
                f"overlay_subnets: {values['subnets']} subnets for {values['nodes']} hosts; "
                f"allowed: at most overlay_nodes"
            )
        if values["landmarks"] > values["nodes"]:
            raise ValueError(
                f"overlay_landmarks: {values['landmarks']} landmarks for {values['nodes']} "
                f"hosts; allowed: at most overlay_nodes"
            )
        if values["hilbert_bits"] * values["landmarks"] > 48:
            raise ValueError(
                f"overlay_hilbert_bits: {values['hilbert_bits']} bits x "
                f"{values['landmarks']} landmarks; allowed: product at most 48"
            )
        return values

    def source_rates(self, point: ModelPoint, params: dict[str, Any], seed: int) -> np.ndarray:
        """``(sources, periods)`` rates (tuples/s) rescaled to ``target_load``."""
        periods = int(params["duration_s"] / params["period_s"] + 1e-9)
        capacity = float(params["node_capacity_tuples_per_s"]) * int(params["nodes"])
        if point.dataset_dir is not None:
            manifest = load_manifest(point.dataset_dir)
            if manifest.generator != self.dataset:
                raise ValueError(
                    f"dataset_dir: a {manifest.generator!r} dataset; allowed: {self.dataset!r}"
                )
            onoff = manifest.params
            if params["duration_s"] > onoff["onoff_duration_s"] + 1e-9:
                raise ValueError(
                    f"overlay_duration_s: {params['duration_s']} s exceeds the dataset's "
                    f"onoff_duration_s {onoff['onoff_duration_s']}; allowed: at most that"
                )
            phases = read_table(point.dataset_dir, manifest, "phases").to_pandas()
        else:
            phases, onoff = synthetic_onoff_phases(
                int(params["synthetic_sources"]), params["duration_s"], capacity, seed
            )
        scale = (
            params["target_load"]
            * capacity
            / (onoff["onoff_target_load"] * onoff["onoff_capacity_tuples_per_s"])
        )
        rates = period_rates(phases, int(onoff["onoff_sources"]), params["period_s"], periods)
        return rates * scale

    def run(self, point: ModelPoint) -> ModelResult:
        params = self.check_params(point.params)
        self.check_strategy(point.strategy)
        base = np.random.default_rng(point.seed)
        network_rng, input_rng, placement_rng, strategy_rng = base.spawn(4)
        network = build_network(params, network_rng)
        rates = self.source_rates(point, params, int(input_rng.integers(1 << 31)))
        data = build_input(rates, params, input_rng)
        nodes = int(params["nodes"])
        placement = placement_rng.integers(0, nodes, data.op_load.shape[0])
        initial_plan_ms = 0.0
        if point.strategy == "borealis":
            started = time.perf_counter()
            profile = data.op_load[:, : int(params["stats_window_periods"])]
            placement = correlation_greedy_placement(profile, network.speed, float(params["eps"]))
            initial_plan_ms = (time.perf_counter() - started) * 1000
        result = simulate_overlay(data, network, point.strategy, placement, params, strategy_rng)
        result.info.update(
            sources=int(rates.shape[0]),
            operators=int(data.op_load.shape[0]),
            subnet_of_host=network.subnet.tolist(),
            landmarks=network.landmarks.tolist(),
            ring_id=network.ring_id.tolist(),
            ring_space=int(network.ring_space),
            tree_nodes=len(network.tree.nodes),
            tree_depth=int(network.tree.depth),
            initial_plan_time_ms=initial_plan_ms,
        )
        return result

    def figure(self, results: list[tuple[ModelPoint, ModelResult]]) -> Any:
        """Paper 004 figures 1-4: load fluctuation, load moved and latency over time (at
        the target load nearest 0.8), and latency vs average load (one line per strategy)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(2, 2, figsize=(11, 8))
        loads = sorted({float(p.params.get("target_load", 0.8)) for p, _ in results})
        shown = min(loads, key=lambda x: abs(x - 0.8)) if loads else 0.8
        panels = (
            (axes[0, 0], "load_fluctuation", 1.0, "Load fluctuation D(VN(i)) (variance)"),
            (axes[0, 1], "load_moved", 100.0, "Load moved (% of a host, mean over hosts)"),
            (axes[1, 0], "latency_s", 1.0, "Latency (s, tuple-weighted mean)"),
        )
        strategies = [s for s in self.strategies if any(p.strategy == s for p, _ in results)]
        for strategy in strategies:
            chosen = [
                r
                for p, r in results
                if p.strategy == strategy and float(p.params.get("target_load", 0.8)) == shown
            ]
            for ax, name, factor, label in panels:
                if not chosen:
                    continue
                n = min(len(r.time_s) for r in chosen)
                if name == "load_moved":
                    n -= 1  # no round follows the last period: its 0 is not a measurement
                values = np.mean([r.series[name][:n] for r in chosen], axis=0) * factor
                ax.plot(chosen[0].time_s[:n], values, label=strategy)
                ax.set_xlabel("Time (s)")
                ax.set_ylabel(label)
            xs, ys = [], []
            for load in loads:
                at = [
                    r.metrics["latency_s_mean"]
                    for p, r in results
                    if p.strategy == strategy and float(p.params.get("target_load", 0.8)) == load
                ]
                if at:
                    xs.append(load)
                    ys.append(float(np.mean(at)))
            axes[1, 1].plot(xs, ys, marker="o", label=strategy)
        axes[1, 1].set_xlabel("Average load (share of capacity)")
        axes[1, 1].set_ylabel("Latency (s, tuple-weighted mean)")
        if len(loads) < 2:
            axes[1, 1].set_title("latency vs load needs several target_load values")
        titles = ("Fig. 1 load fluctuation", "Fig. 2 load moved", "Fig. 3 latency over time")
        for (ax, *_), title in zip(panels, titles, strict=True):
            ax.set_title(f"{title} (load {shown:g})")
            ax.legend()
        axes[1, 1].legend()
        fig.suptitle("Paper 004 model: overlay load balancing")
        fig.tight_layout()
        return fig
