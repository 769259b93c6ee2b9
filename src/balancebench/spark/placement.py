"""Paper 000's storage routing (Algorithm 1, ONE) on Spark.

``with_storage_node`` gives every tuple the node ``RoutingTable.storage_nodes`` would give it:
``pmod(hash(key), N)`` for a key outside the routing table, else the part whose
fraction interval ``[lo, hi)`` holds ``pmod(hash(tuple_id, SALT), 2^20)``. Two paths decide
alike (tested tuple for tuple, and against recorded digests):

- the JVM router (``jvm_routing.table_node``, ``jvm/TableRouting.java``), wherever ``make
  setup`` compiled it: one call per tuple from Spark's generated code into an
  open-addressing map, as a real router's lookup is one hash-map probe;
- Spark SQL, only where no JVM router is found (no JDK compiler): :class:`SlotTable`, a
  hash table built on the driver (hash and displace: one slot per key, found without
  probing) and read in a chain of projections (one per value, :meth:`SlotColumns.route`),
  no join, no shuffle, so a lookup costs the same whatever the table's size.

``partition_by_node`` then puts node ``i``'s tuples in Spark partition ``i`` by
repartitioning on a per-node surrogate value whose Murmur3 hash lands in partition ``i``
(``hashing.partition_surrogates``).
"""

from __future__ import annotations

import math
import pickle
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench.core.hashing import (
    FRACTION_UNITS,
    TUPLE_HASH_SALT,
    murmur3_hash_long,
    partition_surrogates,
)
from balancebench.core.routing_table import BUCKET_SALT, BucketMap, RoutingTable
from balancebench.spark import jvm_routing


def _col(column: str | Column) -> Column:
    return F.col(column) if isinstance(column, str) else column


def home_node(key: str | Column, n_nodes: int) -> Column:
    """``F(k) = pmod(hash(key), N)``."""
    return F.pmod(F.hash(_col(key)), F.lit(n_nodes)).cast("int")


def fraction_unit(tuple_id: str) -> Column:
    """``pmod(hash(tuple_id, SALT), 2^20)``, equal to ``hashing.fraction_units``, as the
    hash's low 20 bits (equal for every int32 in two's complement): ``pmod`` takes two
    integer divisions, and with them the unit cost 20 ns a tuple against F(k)'s 9
    (``benchmarks/split_lookup.py``)."""
    salted = F.hash(F.col(tuple_id), F.lit(TUPLE_HASH_SALT).cast("bigint"))
    return salted.bitwiseAND(F.lit(FRACTION_UNITS - 1)).cast("bigint")


def jvm_tables(spark: SparkSession) -> bool:
    """Whether this session routes by tables in the JVM (``jvm_routing.routing_path``)."""
    return jvm_routing.routing_path(spark)[0] == "jvm"


def with_storage_node(
    spark: SparkSession,
    df: DataFrame,
    table: RoutingTable | BucketMap,
    key: str = "key",
    tuple_id: str = "tuple_id",
    out: str = "node",
    jvm: bool | None = None,
) -> DataFrame:
    """``df`` plus column ``out``: the storage node of each tuple under ``table``, in the
    JVM where the session has the router (``jvm=None``), else in Spark SQL (``jvm=False``
    forces Spark SQL, for the tests and benchmarks that compare the two)."""
    if isinstance(table, BucketMap):
        return df.withColumn(out, bucket_owner(key, table, spark, jvm))
    if len(table) == 0:
        return df.withColumn(out, home_node(key, table.n_nodes))
    if jvm is not False and jvm_tables(spark):
        return df.withColumn(out, jvm_routing.table_node(spark, table, F.col(key), F.col(tuple_id)))
    return SlotTable.of(table).columns(spark).route(df, key, tuple_id, table.n_nodes, out)


#: Salt of the routing table's slot hash (plus the key's bucket's displacement):
#: independent of ``F(k)``, the tuple fraction and the bucket map's hash.
TABLE_SLOT_SALT = 0x2B1E5EED
#: A slot's entry: ``>= 0`` the node of a key moved whole, ``EMPTY`` no key (the tuple
#: goes home), ``<= -2`` split key ``-(entry + 2)`` (its parts in ``split_first``).
EMPTY = -1
#: Keys per bucket (at most, on average) and slots per key (at least) of the
#: hash-and-displace layout: with a third of the slots free or more, the last buckets find
#: free slots in a few tries. The bucket and slot counts are rounded up to powers of two,
#: so a tuple's bucket is a shift and its slot a bit mask of a hash, not a division.
KEYS_PER_BUCKET = 3
SLOTS_PER_KEY = 1.5
#: Displacements tried for one bucket size before the table is laid out again with twice
#: the buckets and slots (a few tries suffice when the buckets are even; see ``_displace``).
DISPLACEMENTS_TRIED = 1 << 12
#: Layouts tried (each doubling the buckets and slots) before giving up.
LAYOUTS_TRIED = 6


def _power_of_two(at_least: float) -> int:
    return 1 << max(0, math.ceil(at_least) - 1).bit_length()


def key_buckets(key_hash: np.ndarray, n_buckets: int) -> np.ndarray:
    """Each key's bucket (int64) from its ``hash(key)``: the hash's TOP ``log2(n_buckets)``
    bits. Not its low bits: ``F(k) = pmod(hash(key), N)`` takes a power-of-two N's node
    from the low bits, and a planner's table holds the keys of a few overloaded nodes, so
    buckets taken from the low bits left most buckets empty and piled 15-37 keys in the
    others (qmmp at TOPK s = 0.8, N = 8: all 631 keys from node 3, in 32 of 256 buckets),
    which no displacement could place."""
    bits = n_buckets.bit_length() - 1
    if bits == 0:
        return np.zeros(len(key_hash), dtype=np.int64)
    return (np.asarray(key_hash).astype(np.uint32) >> np.uint32(32 - bits)).astype(np.int64)


def _salted_key_hash(keys: np.ndarray, salt: np.ndarray | int) -> np.ndarray:
    """SQL ``hash(CAST(salt AS BIGINT), key)`` (int64): the key hashed with a seed made
    from the salt. Not ``hash(key, salt)``, which depends on the key only through
    ``hash(key)``: two keys whose ``hash(key)`` collide (likely among tens of thousands
    of keys in 32 bits) would share every slot, and no displacement could part them."""
    salts = np.broadcast_to(np.asarray(salt, dtype=np.int64), keys.shape)
    return murmur3_hash_long(keys, seed=murmur3_hash_long(salts)).astype(np.int64)


@dataclass(frozen=True)
class SlotTable:
    """A routing table as a hash table that a Spark expression reads in O(1).

    Hash and displace (Belazzougui, Botelho and Dietzfelbinger, "Hash, displace, and
    compress", ESA 2009, without the compression): each key falls in the bucket of the
    top bits of ``hash(key)`` (the hash ``F(k)`` takes its node from, so computed once;
    :func:`key_buckets`); each bucket
    has a displacement ``d`` chosen on the driver so that its keys' slots
    ``hash(seed, key) & (n_slots - 1)``, ``seed = TABLE_SLOT_SALT + d``, are free and
    distinct. A lookup
    reads the bucket's ``d``, then the slot's key and entry: two hashes and three array
    reads, whatever the table's size, and no probing (so each array is read once in the
    expression). A key outside the table reads a slot holding another key, or an empty
    one, and goes home. A split key's entry points at its parts, kept contiguous in two
    small arrays of split keys only (``part_hi``, ``part_node``), read as the parts of
    :class:`RoutingTable` are: the first part whose ``hi_units`` exceeds the tuple's unit.
    Every split key has ``parts_per_key`` slots there (a power of two; the unused ones
    hold ``hi = FRACTION_UNITS``, never reached), so a tuple finds its part by a binary
    search of log2(parts_per_key) array reads (a split key's tuples are the hot keys'; a
    chain reading every part cost 72 ns a tuple at 8 parts against 29 for a key moved
    whole, ``benchmarks/split_lookup.py``).
    The layout is a function of the table (buckets filled largest first, displacements
    tried 0, 1, 2, ... for all buckets of one size at once; where a bucket size finds no
    displacement in ``DISPLACEMENTS_TRIED``, the layout starts again with twice the
    buckets and slots)."""

    seed: np.ndarray  # int64 per bucket: TABLE_SLOT_SALT + its displacement
    slot_key: np.ndarray  # int64 per slot
    slot_entry: np.ndarray  # int32 per slot (see EMPTY)
    split_first: np.ndarray  # int32 per split key: its first part in part_hi/part_node
    part_hi: np.ndarray  # int32 per part of a split key (parts_per_key per key, padded)
    part_node: np.ndarray  # int32 per part of a split key
    max_parts: int
    parts_per_key: int  # a power of two >= max_parts

    @property
    def n_buckets(self) -> int:
        return len(self.seed)

    @property
    def n_slots(self) -> int:
        return len(self.slot_key)

    @classmethod
    def of(cls, table: RoutingTable) -> SlotTable:
        keys = np.asarray(table.keys, dtype=np.int64)
        n_keys = len(keys)
        key_hash = murmur3_hash_long(keys)
        n_buckets = _power_of_two(n_keys / KEYS_PER_BUCKET)
        n_slots = _power_of_two(max(2.0, n_keys * SLOTS_PER_KEY))
        for _ in range(LAYOUTS_TRIED):
            bucket = key_buckets(key_hash, n_buckets)
            placed = _displace(keys, bucket, n_buckets, n_slots)
            if placed is not None:
                break
            n_buckets, n_slots = 2 * n_buckets, 2 * n_slots
        else:
            raise RuntimeError(
                f"the routing table's {n_keys} keys found no slot layout in {LAYOUTS_TRIED} "
                f"tries (the last: {n_buckets // 2} buckets, {n_slots // 2} slots)"
            )
        displacement, slot = placed
        counts = np.diff(table.offsets)
        split = np.flatnonzero(counts > 1)
        entry = np.where(counts == 1, table.nodes[table.offsets[:-1]], 0).astype(np.int64)
        entry[split] = -(np.arange(len(split)) + 2)
        slot_key = np.zeros(n_slots, dtype=np.int64)
        slot_entry = np.full(n_slots, EMPTY, dtype=np.int32)
        slot_key[slot] = keys
        slot_entry[slot] = entry
        max_parts = int(counts.max()) if n_keys else 1
        per_key = _power_of_two(max_parts)
        # Each split key's parts, then padding up to per_key (hi past every unit).
        part_hi = np.full((len(split), per_key), FRACTION_UNITS, dtype=np.int32)
        part_node = np.zeros((len(split), per_key), dtype=np.int32)
        for row, i in enumerate(split):
            lo, hi = table.offsets[i], table.offsets[i + 1]
            part_hi[row, : hi - lo] = table.hi_units[lo:hi]
            part_node[row, : hi - lo] = table.nodes[lo:hi]
        return cls(
            seed=TABLE_SLOT_SALT + displacement,
            slot_key=slot_key,
            slot_entry=slot_entry,
            split_first=(np.arange(len(split)) * per_key).astype(np.int32),
            part_hi=part_hi.ravel(),
            part_node=part_node.ravel(),
            max_parts=max_parts,
            parts_per_key=per_key,
        )

    def columns(self, spark: SparkSession) -> SlotColumns:
        """The arrays as Spark columns: one row of array columns, each read through a
        scalar subquery, so the plan shows a subquery, not the table (a literal of the
        table printed it in every plan string: 40 MiB at 50,000 keys, measured) and a
        task carries each array once."""
        arrays = {
            "seed": self.seed,
            "slot_key": self.slot_key,
            "slot_entry": self.slot_entry,
            "split_first": self.split_first,
            "part_hi": self.part_hi,
            "part_node": self.part_node,
        }
        row = pa.table(
            {
                name: pa.array([values], type=pa.list_(pa.from_numpy_dtype(values.dtype)))
                for name, values in arrays.items()
            }
        )
        one = spark.createDataFrame(row)
        return SlotColumns(self, {name: one.select(name).scalar() for name in arrays})


def _displace(
    keys: np.ndarray, bucket: np.ndarray, n_buckets: int, n_slots: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """Each bucket's displacement and each key's slot (see :class:`SlotTable`), or None
    where a bucket size finds no displacement in ``DISPLACEMENTS_TRIED``."""
    displacement = np.zeros(n_buckets, dtype=np.int64)
    slot = np.full(len(keys), -1, dtype=np.int64)
    taken = np.zeros(n_slots, dtype=bool)
    sizes = np.bincount(bucket, minlength=n_buckets)
    for size in np.unique(sizes[sizes > 0])[::-1]:
        waiting = np.flatnonzero(sizes[bucket] == size)  # keys of the buckets of this size
        for d in range(DISPLACEMENTS_TRIED):
            if len(waiting) == 0:
                break
            tried = _salted_key_hash(keys[waiting], TABLE_SLOT_SALT + d) & (n_slots - 1)
            _, where, how_many = np.unique(tried, return_inverse=True, return_counts=True)
            fits = ~taken[tried] & (how_many[where] == 1)
            failed = np.zeros(n_buckets, dtype=bool)
            failed[bucket[waiting[~fits]]] = True
            placed = ~failed[bucket[waiting]]
            slot[waiting[placed]] = tried[placed]
            taken[tried[placed]] = True
            displacement[bucket[waiting[placed]]] = d
            waiting = waiting[~placed]
        if len(waiting):
            return None
    return displacement, slot


@dataclass(frozen=True)
class SlotColumns:
    """A :class:`SlotTable`'s lookups as Spark expressions over its array columns."""

    table: SlotTable
    arrays: dict[str, Column]

    def _at(self, name: str, index: Column) -> Column:
        """Element ``index`` (0-based) of array ``name``."""
        return F.get(self.arrays[name], index)

    def route(self, df: DataFrame, key: str, tuple_id: str, n_nodes: int, out: str) -> DataFrame:
        """``df`` plus column ``out``, the node of each tuple. One projection per value
        (``hash(key)``, the slot, the key's entry, a split key's first part and the
        tuple's unit, each step of the search of its parts, the node), so each is computed once
        per tuple: Spark does not merge a projection into the next where that would
        compute a costly value twice (measured: with the slot's hash written twice in
        one expression, the lookup cost 2.5x as much)."""
        k = F.col(key)
        found = df.withColumn("_rt_hash", F.hash(k))
        key_hash = F.col("_rt_hash")
        bits = self.table.n_buckets.bit_length() - 1
        bucket = F.shiftrightunsigned(key_hash, 32 - bits) if bits else F.lit(0)
        seed = self._at("seed", bucket)
        slot = F.hash(seed, k).bitwiseAND(F.lit(self.table.n_slots - 1))
        found = found.withColumn("_rt_slot", slot)
        slot = F.col("_rt_slot")
        entry = F.when(self._at("slot_key", slot) == k, self._at("slot_entry", slot))
        found = found.withColumn("_rt_entry", entry.otherwise(F.lit(EMPTY)))
        home = F.pmod(key_hash, F.lit(n_nodes)).cast("int")
        entry = F.col("_rt_entry")
        if self.table.max_parts < 2:
            routed = found.withColumn(out, F.when(entry == F.lit(EMPTY), home).otherwise(entry))
            return routed.drop("_rt_hash", "_rt_slot", "_rt_entry")
        # A split key's tuple: its unit and its key's first part, once each (the hot keys
        # are the split ones, so this path carries much of the stream).
        split = entry <= F.lit(-2)
        found = found.withColumn(
            "_rt_first", F.when(split, self._at("split_first", F.lit(-2) - entry))
        ).withColumn("_rt_unit", F.when(split, fraction_unit(tuple_id)))
        first, unit = F.col("_rt_first"), F.col("_rt_unit")
        # Binary search for the first part whose hi exceeds the unit: at each step, skip
        # `step` parts if the last of them ends at or below the unit. A projection per
        # step, so each step's array read happens once.
        found = found.withColumn("_rt_pos", F.lit(0))
        pos = F.col("_rt_pos")
        step = self.table.parts_per_key // 2
        while step >= 1:
            below = self._at("part_hi", first + pos + F.lit(step - 1)) <= unit
            found = found.withColumn("_rt_pos", pos + F.when(below, F.lit(step)).otherwise(0))
            step //= 2
        part = self._at("part_node", first + pos)
        node = F.when(entry == F.lit(EMPTY), home).when(entry >= 0, entry).otherwise(part)
        routed = found.withColumn(out, node)
        return routed.drop("_rt_hash", "_rt_slot", "_rt_entry", "_rt_first", "_rt_unit", "_rt_pos")


def bucket_owner(
    key: str | Column, buckets: BucketMap, spark: SparkSession, jvm: bool | None = None
) -> Column:
    """``owner[pmod(hash(key, BUCKET_SALT), B)]``, equal to ``BucketMap.storage_nodes``: in
    the JVM where the session has the router (``jvm=None``), else in Spark SQL."""
    if jvm is not False and jvm_tables(spark):
        return jvm_routing.bucket_node(spark, buckets, _col(key))
    salted = F.hash(_col(key), F.lit(BUCKET_SALT).cast("bigint"))
    bucket = F.pmod(salted, F.lit(buckets.n_buckets))
    # The map as ONE fixed-width string literal, read with substr: B literal expressions
    # (an array of B lits) made planning and evaluation ~6x slower (measured, B = 1024).
    width = len(str(max(buckets.n_nodes - 1, 0)))
    owners = F.lit("".join(f"{int(o):0{width}d}" for o in buckets.owner))
    return owners.substr(bucket * width + 1, F.lit(width)).cast("int")


def with_per_tuple_node(
    df: DataFrame, strategy: Any, states: dict[int, Any], n_nodes: int, reports: Any
) -> DataFrame:
    """Per-tuple routing (pkg, dchoices, wchoices) with Spark running each sender:
    ``(key, node)`` for every tuple of ``df``.

    Partition ``s`` of ``df`` is sender ``s``'s tuples in arrival order (the stream's
    layout, ``replay_stream.load_replay``). A ``mapInArrow`` task per sender gathers its tuples
    and routes them with ``strategy.route_sender`` in one call (a compiled loop over the
    tuples), starting from the sender's state ``states[s]`` (its load estimates and
    sketch from earlier batches). The worker adds ``{s: (pickled new state, CPU s)}`` to
    the accumulator ``reports``: its process CPU from the call's start to its last row,
    Arrow's conversions of the batch included, its start-up not (that is the engine's).
    """
    blobs = {s: pickle.dumps(st) for s, st in states.items()}

    def route_partition(batches: Any) -> Any:
        # The compiled loops load (numba, from its cache) before the clock starts: the
        # worker's start-up is the engine's, not the strategy's.
        import balancebench.strategies.choice_kernels  # noqa: F401

        started = time.process_time()
        sender = TaskContext.get().partitionId()
        state = (
            pickle.loads(blobs[sender]) if sender in blobs else strategy.new_sender_state(n_nodes)
        )
        arrived = [b.column(0) for b in batches]
        keys = pa.chunked_array(arrived, pa.int64()).to_numpy()
        nodes = strategy.route_sender(keys, state)
        start = 0
        for chunk in arrived:
            stop = start + len(chunk)
            yield pa.RecordBatch.from_arrays(
                [chunk, pa.array(nodes[start:stop], pa.int32())], names=["key", "node"]
            )
            start = stop
        reports.add({sender: (pickle.dumps(state), time.process_time() - started)})

    return df.select("key").mapInArrow(route_partition, "key long, node int")


def partition_by_node(df: DataFrame, n_nodes: int, node: str = "node") -> DataFrame:
    """Shuffle so that Spark partition ``i`` holds exactly the rows with ``node == i``.

    Adds column ``_surrogate`` (keep it in a later ``groupBy`` so Spark sees the data as
    already partitioned and adds no second shuffle).
    """
    values = F.array(*[F.lit(int(v)).cast("bigint") for v in partition_surrogates(n_nodes)])
    with_sur = df.withColumn("_surrogate", F.element_at(values, F.col(node) + 1))
    return with_sur.repartition(n_nodes, "_surrogate")
