"""``elastic``: elastic reconfiguration and BalanceLoad of paper 001 (§4, experiment §5.2).

Paper 001 ("流水行云", Chinese Journal of Electronics 2015) runs a stateful sub-query on a
sub-cluster whose tasks own *buckets* of the key space (bucket map proxy ``BMP``). A
master periodically collects each task's CPU utilisation ``U_i`` and each bucket's rate
``T_b``; when the mean ``U_av`` leaves ``[LUT, UUT]`` it computes a new task count
(provision, or offload-then-decommission), and when the standard deviation ``U_sd``
exceeds ``UIT`` it runs **BalanceLoad** (protocol 2). Buckets change owner through one of
two reconfiguration protocols: *window recreation* (protocol 1) or *state recreation*
(§4.1.2). §5.2 feeds 15 nodes at 150,000 tuples/s with phone numbers whose normal
distribution moves (mean 2000 -> 8000; sigma 100 -> 25 in 25 steps) and plots the mean
and standard deviation of utilisation over time with and without load balancing (Fig. 8).

What this model is
------------------
A **time-stepped** model at the statistics period ``period_s``, driven by the
``phone_stream`` dataset (table ``events``; only ``tuple_id`` and ``key`` are read):

- keys go to ``B`` buckets with ``routing_table.BucketMap`` (Spark-identical Murmur3,
  ``b = H(k) mod B``); the initial map deals buckets round robin (``b mod n``);
- **[interpreted]** the stream is iid within a schedule step (that is how the generator
  draws it), so each step's bucket shares are estimated from *all* its tuples; period
  ``j`` mixes the shares of the steps it overlaps (steps last ``duration_s / steps``)
  and draws per-bucket arrivals ``~ Poisson(share_b * rate * period_s)``: the stream
  sets the key distribution, ``input_rate_tuples_per_s`` the scale (a scaled-down stream
  would otherwise add sampling noise far above the real one);
- ``T_b`` = arrivals / period; node utilisation ``U_i = sum_{b on i} T_b / capacity``
  (**[interpreted]** *offered* utilisation: equal to CPU utilisation while <= 1, above 1
  for an overloaded node; the statistics and the controller both use it). Default
  capacity 14,286 tuples/s per node so that 150,000 tuples/s on 15 nodes gives
  ``U_av = 0.70 = TUT`` at the start;
- every node is a fluid queue of capacity ``capacity * period_s`` tuples per period
  (backlog carried over); throughput = input tuples processed per simulated second.
  **Latency**: each (node, period) is an M/M/1 node (service rate = capacity, arrival
  rate = its load) whose sojourn ``Exp(capacity - load)`` (rate floored at 1% of the
  capacity when overloaded) is shifted by the mean fluid backlog wait
  ``(Q_start + Q_end) / 2 / capacity``; percentiles are those of the mixture of these
  components weighted by tuples processed (plus the state protocol's buffered tuples,
  shifted by half the transfer time).

Controller (``elastic_scaling``, ``elastic_balanceload``) at the end of every period
except the last, on that period's ``T_b``:

- **new configuration [reconstructed]**: if ``U_av > UUT or U_av < LUT`` (the paper's
  protocol 2 prints ``&&``, which can never hold): ``n = ceil(old * U_av / TUT)``,
  clamped to ``[min_nodes, max_nodes]``;
- **provision**: ``elastic_balanceload`` adds empty nodes and lets BalanceLoad fill
  them; ``elastic_scaling`` (**[interpreted]** load-oblivious) moves buckets from the
  nodes holding the most buckets to the new nodes until bucket counts are even;
- **offload-then-decommission**: the ``old - n`` least loaded nodes **[interpreted]**
  give away all their buckets first (``elastic_balanceload``: highest ``T_b`` first, each
  to the least loaded remaining node; ``elastic_scaling``: to the node with the fewest
  buckets), then leave (a leaving node still drains its backlog and its window-protocol
  work, outside the utilisation statistics);
- ``elastic_balanceload`` only: if ``U_sd > UIT`` after that, **BalanceLoad**
  (``balancebench.strategies.balanceload.balance_load``, the same greedy as the ``balanceload``
  strategy; stop when a move improves ``U_sd`` by less than ``min_improvement * U_av``).
  **[interpreted]** a bucket whose previous reconfiguration is still running is not
  moved again by BalanceLoad (offload may).
- ``elastic_static``: ``initial_nodes`` nodes, hashed buckets, no controller.

Reconfiguration protocols, per moved bucket at ``startTS`` = the decision time, over a
windowed per-number count with sliding windows ``[k*slide, k*slide + window)``:

- ``window``: ``switchTS`` = first window start ``>= startTS``, ``endTS = switchTS - slide
  + window`` (end of the last window the old task owns). Tuples of the bucket go to both
  tasks in ``[startTS, endTS)`` (**duplicated tuples**); the old task processes them up to
  ``endTS`` (extra load on it), the new one from ``switchTS``; duration ``endTS -
  startTS``.
- ``state``: the old task checkpoints the bucket's open windows at ``startTS`` (**serialized
  state** = tuples of the bucket in the windows still open, ``[oldest open window start,
  startTS)``), sends it in ``transfer_latency_s + tuples * tuple_bytes / bandwidth``; the new
  task **buffers** the bucket's tuples until it arrives (duration = that transfer).

Rate-based model: those counts are ``T_b`` times the lengths above. ``simulate_windowed_count``
is the tuple-level version (splitter with ``BMP`` status/endTS, tasks with ownership old/new,
buffering, checkpoint delivery, window emission at the watermark) used to check that both
protocols lose and duplicate no result tuple and that the counts above are what it counts.

Left out: the collector's timestamp merge and dummy tuples (order is given here), the
communication share of CPU, the paper's first "uniform" phase of Fig. 8(a) (the
``phone_stream`` generator has no uniform phase), the JVM/worker start-up time of a new
node, in-flight tuples during the control round trip, Cartesian-product bucket maps,
heterogeneous nodes. The paper gives no threshold values: ``TUT=0.7, UUT=0.9, LUT=0.5,
UIT=0.05`` **[interpreted]**; nor the query's window: ``window_s=10, slide_s=2``
**[interpreted]**.

Code
----
``phone_buckets`` (the phone stream and its bucket shares), ``reconfiguration_rules``
(the paper's rules as pure functions), ``elastic_strategies`` (one ``ElasticStrategy``
per strategy, registered by name in ``STRATEGIES``), ``time_steps`` (the time-stepped
model and its controller), ``protocol`` (the tuple-level protocol simulation),
``elastic_model`` (``ElasticModel``: params, metrics, ``run``, figure). This package
re-exports the names used outside it.
"""

from __future__ import annotations

from balancebench.models.elastic.elastic_model import ElasticModel, elastic_figure, result_of
from balancebench.models.elastic.elastic_strategies import (
    STRATEGIES,
    ElasticStrategy,
)
from balancebench.models.elastic.phone_buckets import (
    PHONE_KEYS,
    SAMPLE_SCHEDULES,
    PhoneInput,
    read_phone_stream,
    sample_phone_stream,
    step_bucket_shares,
)
from balancebench.models.elastic.protocol import (
    ProtocolRun,
    reference_windowed_count,
    simulate_windowed_count,
)
from balancebench.models.elastic.reconfiguration_rules import (
    PROTOCOLS,
    mixture_quantiles,
    new_node_count,
    offload_buckets,
    open_window_start,
    provision_by_count,
    state_transfer_s,
    window_protocol_times,
)
from balancebench.models.elastic.time_steps import (
    BALANCE_MAX_MOVES,
    MIN_SOJOURN_RATE_SHARE,
    ElasticConfig,
    ElasticRun,
    simulate_elastic,
)

__all__ = [
    "BALANCE_MAX_MOVES",
    "MIN_SOJOURN_RATE_SHARE",
    "PHONE_KEYS",
    "PROTOCOLS",
    "SAMPLE_SCHEDULES",
    "STRATEGIES",
    "ElasticConfig",
    "ElasticModel",
    "ElasticRun",
    "ElasticStrategy",
    "PhoneInput",
    "ProtocolRun",
    "elastic_figure",
    "mixture_quantiles",
    "new_node_count",
    "offload_buckets",
    "open_window_start",
    "provision_by_count",
    "read_phone_stream",
    "reference_windowed_count",
    "result_of",
    "sample_phone_stream",
    "simulate_elastic",
    "simulate_windowed_count",
    "state_transfer_s",
    "step_bucket_shares",
    "window_protocol_times",
]
