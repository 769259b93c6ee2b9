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

Layout: ``source_chains`` (source rates, operator chains), ``topology`` (subnets, delays,
landmarks, Hilbert ring ids), ``ktree`` (the k-ary tree and ``Lbar``),
``overlay_strategies`` (the decision rules and ``STRATEGIES``, strategy name -> object),
``periods`` (the periods), ``overlay_model`` (:class:`OverlayModel`: Params, metrics,
run, figure). The public names of all of
them are re-exported here.
"""

from balancebench.models.overlay.ktree import (
    KaryTree,
    TreeNode,
    build_kary_tree,
    tree_aggregate,
    tree_mean_load,
)
from balancebench.models.overlay.overlay_model import PARAM_SCHEMA, OverlayModel
from balancebench.models.overlay.overlay_strategies import (
    LOAD_TOLERANCE,
    MIN_CORRELATION_POINTS,
    STRATEGIES,
    BorealisStrategy,
    HighEntry,
    KtreeHilbertStrategy,
    LowEntry,
    Move,
    OverlayRandomStrategy,
    OverlayStrategy,
    borealis_round,
    correlation,
    correlation_greedy_placement,
    correlations_with_rows,
    ktree_match,
    ktree_round,
    match_ldi,
    random_round,
    select_operators_to_move,
)
from balancebench.models.overlay.periods import (
    load_fluctuation,
    migration_pause_s,
    pause_extra_latency_s,
    simulate_overlay,
    weighted_percentiles,
)
from balancebench.models.overlay.source_chains import (
    OverlayInput,
    build_input,
    period_rates,
    synthetic_onoff_phases,
)
from balancebench.models.overlay.topology import (
    CHORD_BITS,
    OverlayNetwork,
    build_network,
    build_subnet_topology,
    choose_landmarks,
    hilbert_positions,
    hilbert_ring_ids,
    host_delay_matrix,
    ring_distance,
)

__all__ = [
    "CHORD_BITS",
    "LOAD_TOLERANCE",
    "MIN_CORRELATION_POINTS",
    "PARAM_SCHEMA",
    "STRATEGIES",
    "BorealisStrategy",
    "HighEntry",
    "KaryTree",
    "KtreeHilbertStrategy",
    "LowEntry",
    "Move",
    "OverlayInput",
    "OverlayModel",
    "OverlayNetwork",
    "OverlayRandomStrategy",
    "OverlayStrategy",
    "TreeNode",
    "borealis_round",
    "build_input",
    "build_kary_tree",
    "build_network",
    "build_subnet_topology",
    "choose_landmarks",
    "correlation",
    "correlation_greedy_placement",
    "correlations_with_rows",
    "hilbert_positions",
    "hilbert_ring_ids",
    "host_delay_matrix",
    "ktree_match",
    "ktree_round",
    "load_fluctuation",
    "match_ldi",
    "migration_pause_s",
    "pause_extra_latency_s",
    "period_rates",
    "random_round",
    "ring_distance",
    "select_operators_to_move",
    "simulate_overlay",
    "synthetic_onoff_phases",
    "tree_aggregate",
    "tree_mean_load",
    "weighted_percentiles",
]
