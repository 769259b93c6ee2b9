"""The routing table's hash-and-displace layout (``placement.SlotTable``), on the driver:
every key of the table sits in the slot its bucket's displacement sends it to, whatever
its hash, and the split keys' parts are read as the routing table orders them."""

from __future__ import annotations

import numpy as np
import pytest

from balancebench.hashing import home_nodes, murmur3_hash_long
from balancebench.routing_table import RoutingTable
from balancebench.spark.placement import (
    EMPTY,
    SlotTable,
    _salted_key_hash,
)


def _colliding_pair() -> np.ndarray:
    """Two int64 keys with the same ``hash(key)`` (Spark's Murmur3, 32 bits)."""
    rng = np.random.default_rng(3)
    keys = np.unique(rng.integers(-(2**62), 2**62, 300_000))
    hashes = murmur3_hash_long(keys)
    order = np.argsort(hashes, kind="stable")
    same = np.flatnonzero(np.diff(hashes[order]) == 0)
    assert len(same), "no collision among 300,000 keys"
    return keys[order[same[0] : same[0] + 2]]


def _lookup(table: SlotTable, keys: np.ndarray) -> np.ndarray:
    """Each key's entry, read as the Spark expression reads it."""
    bucket = murmur3_hash_long(keys).astype(np.int64) & (table.n_buckets - 1)
    slot = _salted_key_hash(keys, table.seed[bucket]) & (table.n_slots - 1)
    return np.where(table.slot_key[slot] == keys, table.slot_entry[slot], EMPTY)


@pytest.mark.parametrize("n_keys", [1, 2, 7, 2_300, 60_000])
def test_every_key_is_found_and_others_are_not(n_keys):
    rng = np.random.default_rng(n_keys)
    pair = _colliding_pair()
    keys = np.unique(np.r_[rng.integers(-(2**63), 2**63 - 1, n_keys - 1), pair[:1]])
    if n_keys > 2:
        keys = np.unique(np.r_[keys, pair, [0, -1, 2**63 - 1, -(2**63)]])
    n_nodes = 8
    ways = rng.choice([1, 1, 2, 5], len(keys))
    part_key = np.repeat(keys, ways)
    part_node = rng.integers(0, n_nodes, len(part_key))
    table = RoutingTable.from_parts(part_key, part_node, np.ones(len(part_key)), n_nodes)
    slots = SlotTable.of(table)
    entry = _lookup(slots, table.keys)
    counts = np.diff(table.offsets)
    whole = counts == 1
    # A key moved whole finds its node; a split key its parts, in the table's order
    assert np.array_equal(entry[whole], table.nodes[table.offsets[:-1][whole]])
    split = np.flatnonzero(~whole)
    assert np.array_equal(entry[split], -(np.arange(len(split)) + 2))
    for i, key in enumerate(split[:50]):
        first = slots.split_first[i]
        parts = slice(table.offsets[key], table.offsets[key + 1])
        assert np.array_equal(slots.part_node[first : first + counts[key]], table.nodes[parts])
        assert np.array_equal(slots.part_hi[first : first + counts[key]], table.hi_units[parts])
    # Keys outside the table go home
    others = np.setdiff1d(rng.integers(-(2**63), 2**63 - 1, 5_000), table.keys)
    assert (_lookup(slots, others) == EMPTY).all()
    assert slots.n_slots <= 3 * len(table) + 2  # a power of two >= 1.5 per key


def test_the_layout_is_a_function_of_the_table():
    keys = np.arange(1_000, dtype=np.int64) * 13
    nodes = (home_nodes(keys, 4) + 1) % 4
    table = RoutingTable.from_parts(keys, nodes, np.ones(len(keys)), 4)
    a, b = SlotTable.of(table), SlotTable.of(table)
    assert np.array_equal(a.slot_key, b.slot_key)
    assert np.array_equal(a.seed, b.seed)
