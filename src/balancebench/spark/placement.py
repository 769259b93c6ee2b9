"""Paper 000's storage routing (Algorithm 1, ONE) as Spark SQL expressions.

``with_storage_node`` gives every tuple the node ``RoutingTable.storage_nodes`` would give it:
``pmod(hash(key), N)`` for a key outside the routing table, else the part whose
fraction interval ``[lo, hi)`` holds ``pmod(hash(tuple_id, SALT), 2^20)``, found by
``SlotTable``: an open-addressing hash table built on the driver and read by position
from string literals inside one expression (no join, no shuffle, no broadcast: a lookup
whose cost does not grow with the table). ``partition_by_node`` then puts node
``i``'s tuples in Spark partition ``i`` by repartitioning on a per-node surrogate value
whose Murmur3 hash lands in partition ``i`` (``hashing.partition_surrogates``).
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench.hashing import (
    FRACTION_UNITS,
    TUPLE_HASH_SALT,
    partition_surrogates,
    salted_hash,
)
from balancebench.routing_table import BUCKET_SALT, BucketMap, RoutingTable


def _col(column: str | Column) -> Column:
    return F.col(column) if isinstance(column, str) else column


def home_node(key: str | Column, n_nodes: int) -> Column:
    """``F(k) = pmod(hash(key), N)``."""
    return F.pmod(F.hash(_col(key)), F.lit(n_nodes)).cast("int")


def fraction_unit(tuple_id: str) -> Column:
    """``pmod(hash(tuple_id, SALT), 2^20)``, equal to ``hashing.fraction_units``."""
    salted = F.hash(F.col(tuple_id), F.lit(TUPLE_HASH_SALT).cast("bigint"))
    return F.pmod(salted, F.lit(FRACTION_UNITS)).cast("bigint")


def with_storage_node(
    spark: SparkSession,
    df: DataFrame,
    table: RoutingTable | BucketMap,
    key: str = "key",
    tuple_id: str = "tuple_id",
    out: str = "node",
) -> DataFrame:
    """``df`` plus column ``out``: the storage node of each tuple under ``table``."""
    if isinstance(table, BucketMap):
        return df.withColumn(out, bucket_owner(key, table))
    home = home_node(key, table.n_nodes)
    if len(table) == 0:
        return df.withColumn(out, home)
    lookup = SlotTable.of(table)
    # Two projections: the slot's first part (or 0) once per tuple, then the part; Spark
    # keeps them apart rather than copy the probing into every branch of the second.
    found = df.withColumn("_rt_first", lookup.first_part(key))
    return found.withColumn(
        out, lookup.node(F.col("_rt_first"), fraction_unit(tuple_id), home)
    ).drop("_rt_first")


#: Salt of the routing table's slot hash (independent of ``F(k)``, the tuple fraction and
#: the bucket hash).
TABLE_SLOT_SALT = 0x5107AB1E


def _fixed_width(values: list[int], width: int, signed: bool = False) -> str:
    """``values`` as one string of fixed-width decimal fields (a sign first if ``signed``)."""
    form = f"{{:+0{width}d}}" if signed else f"{{:0{width}d}}"
    return "".join(form.format(v) for v in values)


@dataclass(frozen=True)
class SlotTable:
    """A routing table as an open-addressing hash table for a Spark expression.

    ``S`` slots (a power of two, at least twice the keys), slot of a key
    ``pmod(hash(key, TABLE_SLOT_SALT), S)``, collisions resolved by linear probing; the
    keys inserted in sorted order, so the layout is a function of the table. Per slot
    the key and its first part + 1 (0: empty); per part its ``hi_units`` and node, the
    parts of a key contiguous and ordered as in :class:`RoutingTable`. Each array is one
    binary literal of fixed-width decimal fields read with ``substr``: one literal, not
    one expression per entry (which made planning and evaluation ~6x slower, measured
    for ``bucket_owner``). A lookup reads at most ``probes`` slots (the longest probe
    sequence of any key in the table, found while building it) and ``max_parts`` parts,
    whatever the table's size."""

    n_slots: int
    probes: int
    max_parts: int
    slot_keys: str
    key_width: int
    slot_first: str
    first_width: int
    part_hi: str
    hi_width: int
    part_node: str
    node_width: int

    @classmethod
    def of(cls, table: RoutingTable) -> SlotTable:
        keys = table.keys.tolist()
        n_slots = 1 << max(1, (2 * len(keys) - 1).bit_length())
        mask = n_slots - 1
        homes = np.mod(salted_hash(table.keys, TABLE_SLOT_SALT).astype(np.int64), n_slots)
        slot_key = [0] * n_slots
        slot_first = [0] * n_slots
        probes = 1
        for k, home, first in zip(keys, homes.tolist(), table.offsets[:-1].tolist(), strict=True):
            slot, distance = home, 0
            while slot_first[slot]:
                slot, distance = (slot + 1) & mask, distance + 1
            slot_key[slot], slot_first[slot] = k, first + 1
            probes = max(probes, distance + 1)
        key_width = max(len(f"{k:+d}") for k in keys)
        first_width = len(str(len(table.nodes)))
        hi_width = len(str(FRACTION_UNITS))
        node_width = len(str(max(table.n_nodes - 1, 0)))
        return cls(
            n_slots=n_slots,
            probes=probes,
            max_parts=int(np.diff(table.offsets).max()),
            slot_keys=_fixed_width(slot_key, key_width, signed=True),
            key_width=key_width,
            slot_first=_fixed_width(slot_first, first_width),
            first_width=first_width,
            part_hi=_fixed_width(table.hi_units.tolist(), hi_width),
            hi_width=hi_width,
            part_node=_fixed_width(table.nodes.tolist(), node_width),
            node_width=node_width,
        )

    @staticmethod
    def _field(text: str, width: int, index: Column) -> Column:
        """Field ``index`` (0-based) of a fixed-width literal, as a long. The literal is
        binary: ``substr`` of a string walks its UTF-8 characters from the start (a cost
        that grows with the position, so with the table), of binary it copies ``width``
        bytes."""
        raw = F.lit(bytearray(text.encode("ascii")))
        return raw.substr(index * width + 1, F.lit(width)).cast("string").cast("long")

    def first_part(self, key: str | Column) -> Column:
        """The key's first part + 1, or 0 when the key is not in the table (an empty slot
        reached, or ``probes`` slots read)."""
        k = _col(key)
        home = F.pmod(F.hash(k, F.lit(TABLE_SLOT_SALT).cast("bigint")), F.lit(self.n_slots))
        found = None
        for i in range(self.probes):
            slot = F.pmod(home + F.lit(i), F.lit(self.n_slots)) if i else home
            first = self._field(self.slot_first, self.first_width, slot)
            stored = self._field(self.slot_keys, self.key_width, slot)
            found = (F.when if found is None else found.when)(first == 0, F.lit(0).cast("long"))
            found = found.when(stored == k.cast("long"), first)
        assert found is not None
        return found.otherwise(F.lit(0).cast("long"))

    def node(self, first_part: Column, unit: Column, home: Column) -> Column:
        """The tuple's node: ``home`` outside the table, else the first part of its key
        whose ``hi_units`` exceeds the tuple's unit (the parts cover ``[0, 2^20)``, so one
        of the key's own parts always does)."""
        chosen = None
        for j in range(self.max_parts):
            part = first_part - 1 + F.lit(j)
            hi = self._field(self.part_hi, self.hi_width, part)
            node = self._field(self.part_node, self.node_width, part).cast("int")
            chosen = (F.when if chosen is None else chosen.when)(unit < hi, node)
        assert chosen is not None
        return F.when(first_part == 0, home).otherwise(chosen.otherwise(home))


def bucket_owner(key: str | Column, buckets: BucketMap) -> Column:
    """``owner[pmod(hash(key, BUCKET_SALT), B)]``, equal to ``BucketMap.storage_nodes``."""
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
