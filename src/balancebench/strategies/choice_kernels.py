"""The compiled loops of ``pkg``, ``dchoices`` and ``wchoices`` (numba, signatures given, so
they compile when this module is imported): a key's Murmur3 candidates and one sender's
sequential choices. Kept apart from :mod:`balancebench.strategies.pkg` so that importing
the strategy registry (the DAG files, the CLI, a Param spec) does not load numba: the
module is imported on a strategy's first route."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit("uint32(int64, uint32)", cache=True, nogil=True)
def murmur3_long(value: int, seed: int) -> int:  # pragma: no cover - compiled
    """Spark's ``Murmur3_x86_32.hashLong`` (``hashing.murmur3_hash_long``), one value."""
    mask = np.uint32(0xFFFFFFFF)
    h1 = np.uint32(seed)
    bits = np.uint64(value)
    for k1 in (np.uint32(bits & np.uint64(0xFFFFFFFF)), np.uint32(bits >> np.uint64(32))):
        k1 = np.uint32((k1 * np.uint32(0xCC9E2D51)) & mask)
        k1 = np.uint32(((k1 << np.uint32(15)) | (k1 >> np.uint32(17))) & mask)
        k1 = np.uint32((k1 * np.uint32(0x1B873593)) & mask)
        h1 = np.uint32(h1 ^ k1)
        h1 = np.uint32(((h1 << np.uint32(13)) | (h1 >> np.uint32(19))) & mask)
        h1 = np.uint32((h1 * np.uint32(5) + np.uint32(0xE6546B64)) & mask)
    h1 = np.uint32(h1 ^ np.uint32(8))
    h1 = np.uint32(h1 ^ (h1 >> np.uint32(16)))
    h1 = np.uint32((h1 * np.uint32(0x85EBCA6B)) & mask)
    h1 = np.uint32(h1 ^ (h1 >> np.uint32(13)))
    h1 = np.uint32((h1 * np.uint32(0xC2B2AE35)) & mask)
    return np.uint32(h1 ^ (h1 >> np.uint32(16)))


@numba.njit("void(int64[:], int64, int64[:], int64[:, :])", cache=True, nogil=True)
def candidates_kernel(
    keys: np.ndarray, n_nodes: int, salts: np.ndarray, out: np.ndarray
) -> None:  # pragma: no cover - compiled; equal to :func:`candidates`, tested
    for i in range(keys.shape[0]):
        first = murmur3_long(keys[i], np.uint32(42))
        out[i, 0] = np.int64(np.int32(first)) % n_nodes
        for j in range(salts.shape[0]):
            h = murmur3_long(salts[j], first)
            out[i, j + 1] = np.int64(np.int32(h)) % n_nodes


@numba.njit(
    "void(int64[:, :], boolean[:], int64[:], boolean, int64, int32[:])",
    cache=True,
    nogil=True,
)
def choose_nodes(
    cand: np.ndarray,
    heavy: np.ndarray,
    sent: np.ndarray,
    all_nodes: bool,
    d: int,
    out: np.ndarray,
) -> None:  # pragma: no cover - compiled; its decisions are tested tuple for tuple
    """One sender's choices for a chunk, in order, updating ``sent`` in place.

    Tuple ``i``: a heavy hitter goes to the least-loaded node of all (``all_nodes``; ties
    to the lower node) or of its ``d`` candidates (ties to the earlier candidate); any
    other tuple to the less-loaded of its first two candidates (ties to ``F(k)``).
    Compiled ahead of time (the signature above) when this module is imported, on the
    first route, so a Spark Python worker pays the compilation once, before the routing it
    measures."""
    n_nodes = sent.shape[0]
    for i in range(cand.shape[0]):
        if heavy[i] and all_nodes:
            j = 0
            for x in range(1, n_nodes):
                if sent[x] < sent[j]:
                    j = x
        elif heavy[i] and d > 2:
            j = cand[i, 0]
            for c in range(1, d):
                x = cand[i, c]
                if sent[x] < sent[j]:
                    j = x
        else:
            a = cand[i, 0]
            b = cand[i, 1]
            j = a if sent[a] <= sent[b] else b
        sent[j] += 1
        out[i] = j
