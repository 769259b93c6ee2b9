"""The routing table's hash-and-displace layout (``placement.SlotTable``), on the driver:
every key of the table sits in the slot its bucket's displacement sends it to, whatever
its hash, and the split keys' parts are read as the routing table orders them."""

from __future__ import annotations

import numpy as np
import pytest

from balancebench.core.hashing import home_nodes, murmur3_hash_long
from balancebench.core.routing_table import RoutingTable
from balancebench.spark import placement
from balancebench.spark.placement import (
    EMPTY,
    KEYS_PER_BUCKET,
    SlotTable,
    _salted_key_hash,
    key_buckets,
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
    bucket = key_buckets(murmur3_hash_long(keys), table.n_buckets)
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


def _found_whole(table: RoutingTable, slots: SlotTable) -> bool:
    return np.array_equal(_lookup(slots, table.keys), table.nodes[table.offsets[:-1]])


@pytest.mark.parametrize(("n_nodes", "n_keys"), [(8, 631), (8, 5_000), (12, 631), (12, 5_000)])
def test_a_table_of_one_overloaded_nodes_keys_is_laid_out(n_nodes, n_keys):
    """A planner moves the keys of its overloaded nodes, so a table's keys share
    ``pmod(hash(key), N)``. Buckets taken from the hash's low bits then piled up (qmmp's
    table at TOPK s = 0.8, N = 8: 631 keys of node 3, 15-37 per used bucket) and the build
    failed; 631 keys of node 3 among 0..4692 is that table's shape."""
    keys = np.arange(200_000, dtype=np.int64)
    keys = keys[home_nodes(keys, n_nodes) == 3][:n_keys]
    table = RoutingTable.from_parts(keys, np.zeros(n_keys, np.int32), np.ones(n_keys), n_nodes)
    slots = SlotTable.of(table)
    assert _found_whole(table, slots)
    sizes = np.bincount(key_buckets(murmur3_hash_long(keys), slots.n_buckets))
    assert sizes.max() <= 4 * KEYS_PER_BUCKET  # even buckets, not a few full ones
    assert slots.n_slots <= 3 * len(table) + 2  # the first layout held


def test_a_layout_that_finds_no_displacement_doubles_its_slots(monkeypatch):
    keys = np.arange(3_000, dtype=np.int64) * 7
    table = RoutingTable.from_parts(keys, np.ones(len(keys), np.int32), np.ones(len(keys)), 4)
    first = SlotTable.of(table)
    monkeypatch.setattr(placement, "DISPLACEMENTS_TRIED", 8)
    doubled = SlotTable.of(table)
    assert doubled.n_slots > first.n_slots
    assert _found_whole(table, doubled)
    monkeypatch.setattr(placement, "LAYOUTS_TRIED", 1)
    with pytest.raises(RuntimeError, match=f"{len(table)} keys found no slot layout"):
        SlotTable.of(table)
