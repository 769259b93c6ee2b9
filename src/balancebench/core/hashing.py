"""Spark-compatible hashing in numpy: the base routing function F(k) and tuple-id fractions.

Routing decisions are made in two places that must agree bit for bit: the strategies
(numpy, in the driver) and the Spark job (SQL expressions on the executors). Both use
Spark's own Murmur3 (``Murmur3_x86_32.hashLong`` with seed 42, the SQL ``hash()``
function), re-implemented here on ``uint32`` arrays, so

* ``home_nodes(keys, n)``      == SQL ``pmod(hash(key), n)``  (paper 000's ``F(k)``), and
* ``fraction_units(tuple_ids)`` == SQL ``pmod(hash(tuple_id, CAST(SALT AS BIGINT)), 2^20)``,

the deterministic "random" number that picks ONE node of a split key (Algorithm 1) so
that reruns route identically. ``tests/spark/test_routing_spark.py`` checks both
against Spark.
"""

from __future__ import annotations

import functools

import numpy as np

SPARK_HASH_SEED = 42
#: Salt of the tuple-id hash; a second Murmur3 round keyed by the first one's result,
#: exactly as Spark's multi-argument ``hash(a, b)`` chains its seeds.
TUPLE_HASH_SALT = 0x5EED
#: Storage-routing fractions are quantised to 1/2^20 so numpy and Spark compare integers.
FRACTION_BITS = 20
FRACTION_UNITS = 1 << FRACTION_BITS

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix_k1(k1: np.ndarray) -> np.ndarray:
    k1 = k1 * _C1
    k1 = _rotl(k1, 15)
    return k1 * _C2


def _mix_h1(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
    h1 = h1 ^ k1
    h1 = _rotl(h1, 13)
    return h1 * np.uint32(5) + np.uint32(0xE6546B64)


def _fmix(h1: np.ndarray, length: int) -> np.ndarray:
    h1 = h1 ^ np.uint32(length)
    h1 = h1 ^ (h1 >> np.uint32(16))
    h1 = h1 * np.uint32(0x85EBCA6B)
    h1 = h1 ^ (h1 >> np.uint32(13))
    h1 = h1 * np.uint32(0xC2B2AE35)
    return h1 ^ (h1 >> np.uint32(16))


def murmur3_hash_long(values: np.ndarray, seed: int | np.ndarray = SPARK_HASH_SEED) -> np.ndarray:
    """Spark's ``Murmur3_x86_32.hashLong`` of int64 ``values``; returns int32 like Spark.

    ``seed`` is an int or an int32 array (the chained seed of a multi-column hash).
    """
    v = np.atleast_1d(np.asarray(values, dtype=np.int64)).view(np.uint64)
    low = (v & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    high = (v >> np.uint64(32)).astype(np.uint32)
    with np.errstate(over="ignore"):
        h1 = np.broadcast_to(np.asarray(seed, dtype=np.int64), v.shape).astype(np.uint32)
        h1 = _mix_h1(h1, _mix_k1(low))
        h1 = _mix_h1(h1, _mix_k1(high))
        h1 = _fmix(h1, 8)
    return h1.view(np.int32)


def home_nodes(keys: np.ndarray, n_nodes: int) -> np.ndarray:
    """Paper 000's base routing ``F(k)``: ``pmod(hash(key), n_nodes)`` as int32
    (``n_nodes >= 1``: checked with the Params at the door)."""
    h = murmur3_hash_long(keys).astype(np.int64)
    return np.mod(h, n_nodes).astype(np.int32)


def salted_hash(values: np.ndarray, salt: int) -> np.ndarray:
    """SQL ``hash(value, CAST(salt AS BIGINT))``: a second Murmur3 round keyed by the first,
    an independent hash function per salt (int32, like Spark)."""
    first = murmur3_hash_long(values)
    return murmur3_hash_long(np.full(first.shape, salt, dtype=np.int64), seed=first)


def fraction_units(tuple_ids: np.ndarray) -> np.ndarray:
    """Deterministic uniform integer in ``[0, 2^20)`` per tuple id (storage routing ONE)."""
    h = salted_hash(tuple_ids, TUPLE_HASH_SALT).astype(np.int64)
    return np.mod(h, FRACTION_UNITS).astype(np.int64)


def salted_nodes(keys: np.ndarray, salt: int, n: int) -> np.ndarray:
    """``pmod(hash(key, salt), n)``: a hash function of the key other than ``F(k)``."""
    return np.mod(salted_hash(keys, salt).astype(np.int64), n).astype(np.int32)


def partition_surrogates(n_nodes: int, search_limit: int = 1 << 20) -> np.ndarray:
    """For each node ``i`` the smallest non-negative int64 ``v`` with ``pmod(hash(v), n) == i``.

    Spark's ``repartition(n, col)`` puts a row in partition ``pmod(hash(col), n)``; giving
    each row the surrogate of its node as ``col`` puts node ``i``'s rows in partition ``i``
    (one Spark partition per node, without a Python partitioner).
    """
    return np.array(_surrogates(n_nodes, search_limit), dtype=np.int64)


@functools.cache
def _surrogates(n_nodes: int, search_limit: int) -> tuple[int, ...]:
    """Searched once per ``n_nodes`` (every routed batch asks; hashing the whole range
    cost 49 ms a call), in growing prefixes of the candidates, so the smallest ``v``
    found is the smallest overall."""
    limit = min(search_limit, max(64, 64 * n_nodes))
    while True:
        candidates = np.arange(limit, dtype=np.int64)
        parts = home_nodes(candidates, n_nodes)
        first = np.full(n_nodes, -1, dtype=np.int64)
        # np.unique returns the first index of each partition value.
        values, index = np.unique(parts, return_index=True)
        first[values] = candidates[index]
        if (first >= 0).all():
            return tuple(int(v) for v in first)
        if limit >= search_limit:
            raise ValueError(f"no surrogate found below {search_limit} for n_nodes={n_nodes}")
        limit = min(search_limit, limit * 8)
