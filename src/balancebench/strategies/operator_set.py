"""Paper 001's parallelization of a stateful join, and the two schemes it is compared with.

Paper 001 (§3, "流水行云") cuts a query before each stateful operator; each piece (a
sub-query) runs on its own sub-cluster, and the stateless operators run fused with the
task that feeds the next stateful one (*operator-set parallelism*). A task of a stateful
sub-query has a **splitter** (ST), which sends each output tuple to the task that owns its
bucket, and a **collector** (RT), which merges its inputs in timestamp order. For a
Cartesian product (a join whose predicate is anything: the paper's CP with a window), the
two input streams' splitters put a tuple of side R in bucket ``b0 = H(A_i..A_j) mod B0``
and one of side S in ``b1 = H(A_i..A_j) mod B1``, and the bucket map proxy
``BMP[b0, b1].dest`` names one of ``n^2`` tasks: when each input is split ``n`` ways the
successor needs ``n^2`` tasks (Fig. 3(b): each tuple goes to ``n`` of them).

Here each scheme is a join architecture of the micro-batch engine (like ``dynamic`` and
``bi``): it places every tuple on its store and probe nodes, and the engine produces a
pair where the later tuple probes and the earlier one is stored, every batch checked by
the oracle. Paper 001 Figs. 6-7 compare three schemes:

- ``operator_set`` (paper 001): ``B0 = B1 = n``, ``n = floor(sqrt(N))``, ``BMP[b0, b1]
  .dest = b0 * n + b1`` (row-major; ``N - n^2`` nodes stay idle, the paper's "theoretical
  versus actual task count"). An R tuple is stored at, and probes, the ``n`` tasks of its
  row ``b0``, an S tuple the ``n`` tasks of its column ``b1``; pair ``(r, s)`` meets only at
  ``BMP[b0(r), b1(s)]``. [interpreted] ``H(A_i..A_j)`` is ``hash(tuple_id,
  SPLITTER_SALT)``: our tuples carry a key and an arrival id, and the id makes every
  tuple's attribute combination distinct, as the paper's example tuples are. The stateless
  operators run in the splitters, i.e. in the engine's routing stage at the senders: one
  exchange per tuple.
- ``operator_parallel`` (every operator parallelised on its own): the same ``n x n``
  tasks for the join, but the stateless operators before it are a stage of their own on
  ``N`` instances, behind an exchange of their own (a tuple enters an instance by a hash
  of ``hash(tuple_id, INSTANCE_SALT)``: Storm's shuffle grouping made reproducible): two
  exchanges per tuple. Our workloads' stateless operators are the key
  projection, so that stage measures the exchange.
- ``query_parallel`` (the whole query on each of ``N`` instances): a tuple enters instance
  ``pmod(hash(tuple_id, INSTANCE_SALT), N)`` and is stored there, and since the join at
  every instance must see all of the other stream, it probes at every instance: every
  instance talks to every other (the paper counts more than ``3 x 30^2`` channels).

**The collector** (§3.2) merges the inputs in timestamp order, and an idle splitter sends
a dummy tuple every ``d`` so that merge never blocks. In the micro-batch engine a batch is
complete before any node runs (the batch boundary is the punctuation every splitter
sends), and a pair is produced by the later tuple's probe at the node storing the earlier
one (arrival order, ``tuple_id``; a window join also checks event times): the order the
collector restores. No dummy tuple is sent, since no node waits on a splitter within a
batch. What this does not model: the collector's own sort, which paper 001's tasks pay
per tuple, and a continuous (tuple-at-a-time) engine's latency.

No scheme here plans or migrates; paper 001's reconfiguration and BalanceLoad act on the
key-level bucket map (strategy ``balanceload``) and on the elastic model
(``balancebench.models.elastic``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from balancebench.core.hashing import salted_hash
from balancebench.strategies.join_architectures import (
    FirstBatch,
    JoinArchitecture,
    Placement,
    side_is_r,
)

#: Salt of the splitters' bucket hash ``H(A_i..A_j)`` (operator_set, operator_parallel).
SPLITTER_SALT = 0x5901
#: Salt of the hash that picks the instance a tuple enters (operator_parallel's stateless
#: stage, query_parallel's query instance).
INSTANCE_SALT = 0x5902


def _bucket(tuple_ids: np.ndarray, salt: int, n: int) -> np.ndarray:
    """``pmod(hash(tuple_id, salt), n)`` (the same as Spark SQL's)."""
    h = salted_hash(np.asarray(tuple_ids, dtype=np.int64), salt).astype(np.int64)
    return np.mod(h, n)


@dataclass(frozen=True)
class BucketMatrix:
    """``BMP[b0, b1]`` over ``n x n`` tasks: R bucket ``b0`` (row) and S bucket ``b1``
    (column) meet at node ``b0 * n + b1``."""

    n: int

    @property
    def n_nodes(self) -> int:
        return self.n * self.n

    def describe(self) -> dict[str, int]:
        return {"buckets_per_side": self.n, "join_tasks": self.n_nodes}


@dataclass(frozen=True)
class Instances:
    """``n`` query instances, each running the whole query."""

    n: int

    @property
    def n_nodes(self) -> int:
        return self.n

    def describe(self) -> dict[str, int]:
        return {"query_instances": self.n}


class OperatorSetJoin(JoinArchitecture):
    """Paper 001's operator-set parallelism (module docstring): the Cartesian bucket map
    over ``n^2`` tasks, the stateless operators fused into the splitters."""

    name = "operator_set"
    reference = "paper 001 §3.1 (splitter, Cartesian product BMP[b0, b1] over n^2 tasks), §3.2"
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {}
    #: Exchanges a tuple passes before the join (1: straight from the splitters).
    exchanges: ClassVar[int] = 1

    def layout(self, n_nodes: int, first: FirstBatch, operator: str = "") -> BucketMatrix:
        """``n = floor(sqrt(N))`` buckets per side, ``n^2`` join tasks."""
        return BucketMatrix(max(1, math.isqrt(int(n_nodes))))

    def buckets(self, layout: BucketMatrix, tuple_ids: np.ndarray) -> np.ndarray:
        """A tuple's bucket at its splitter: ``b0`` for R, ``b1`` for S."""
        return _bucket(tuple_ids, SPLITTER_SALT, layout.n)

    def store_nodes(
        self, layout: BucketMatrix, side: np.ndarray, tuple_ids: np.ndarray, keys: np.ndarray
    ) -> Placement:
        """The ``n`` tasks of the tuple's row (R) or column (S)."""
        n = layout.n
        bucket = self.buckets(layout, tuple_ids)
        index = np.repeat(np.arange(len(bucket), dtype=np.int64), n)
        along = np.tile(np.arange(n, dtype=np.int64), len(bucket))
        b = bucket[index]
        node = np.where(side_is_r(side)[index], b * n + along, along * n + b)
        return index, node.astype(np.int32)

    def probe_nodes(
        self,
        layout: BucketMatrix,
        side: np.ndarray,
        tuple_ids: np.ndarray,
        keys: np.ndarray,
        band_width: int = 0,
    ) -> Placement:
        """The same tasks: a tuple stores and probes at each task of its row or column."""
        return self.store_nodes(layout, side, tuple_ids, keys)


class OperatorParallelJoin(OperatorSetJoin):
    """Operator parallelism (module docstring): the same ``n x n`` join tasks, behind a
    stage of its own for the stateless operators (one exchange more per tuple)."""

    name = "operator_parallel"
    reference = "paper 001 §5.1 Figs. 6-7 (operator parallelism, the comparison's baseline)"
    exchanges: ClassVar[int] = 2


class QueryParallelJoin(JoinArchitecture):
    """Query parallelism (module docstring): the whole query on each of ``N`` instances; a
    tuple is stored at the instance it enters and probes at every instance."""

    name = "query_parallel"
    reference = "paper 001 §5.1 Figs. 6-7 (query parallelism, the comparison's baseline)"
    param_schema: ClassVar[dict[str, dict[str, Any]]] = {}
    exchanges: ClassVar[int] = 1

    def layout(self, n_nodes: int, first: FirstBatch, operator: str = "") -> Instances:
        return Instances(int(n_nodes))

    def instances(self, layout: Instances, tuple_ids: np.ndarray) -> np.ndarray:
        """The instance each tuple enters (and is stored at)."""
        return _bucket(tuple_ids, INSTANCE_SALT, layout.n)

    def store_nodes(
        self, layout: Instances, side: np.ndarray, tuple_ids: np.ndarray, keys: np.ndarray
    ) -> Placement:
        node = self.instances(layout, tuple_ids)
        return np.arange(len(node), dtype=np.int64), node.astype(np.int32)

    def probe_nodes(
        self,
        layout: Instances,
        side: np.ndarray,
        tuple_ids: np.ndarray,
        keys: np.ndarray,
        band_width: int = 0,
    ) -> Placement:
        """Every instance."""
        count = len(np.asarray(tuple_ids))
        index = np.repeat(np.arange(count, dtype=np.int64), layout.n)
        node = np.tile(np.arange(layout.n, dtype=np.int32), count)
        return index, node
