"""PKG, D-Choices and W-Choices decide tuple for tuple as before their loop was compiled:
the compiled kernel against the plain Python loop it replaced, and the whole routing
against digests of the decisions recorded before the change (fixed seeds, three senders,
state carried over three batches, one of them a single tuple)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from balancebench.strategies import get_strategy
from balancebench.strategies.choice_kernels import choose_nodes
from balancebench.strategies.pkg import _sorted_member, candidates, compiled_candidates
from tests.strategies.reference import reference_choices


def stream(n_keys: int, n: int, s: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = np.arange(1, n_keys + 1, dtype=float) ** -s
    return rng.choice(n_keys, size=n, p=p / p.sum()).astype(np.int64)


#: (strategy, settings, nodes, Zipf s) -> sha256[:16] of the int32 nodes, recorded with the
#: plain Python loop on 2026-11-26 (before ``choose_nodes``).
GOLDEN = [
    ("pkg", {}, 8, 1.2, "3447a58ae96d6048"),
    ("dchoices", {"d": 4}, 16, 1.4, "a168facbd0e2166e"),
    ("wchoices", {}, 16, 1.4, "9433fa55c3ebe2de"),
    ("wchoices", {"heavy_share": 0.02, "sketch_chunk": 100}, 8, 1.0, "f8f4231a63c2cb08"),
    ("dchoices", {"d": 3, "capacity": 20}, 5, 0.8, "937282f5b4983841"),
]


@pytest.mark.parametrize(("name", "settings", "n", "s", "digest"), GOLDEN)
def test_decisions_equal_the_recorded_ones(name, settings, n, s, digest):
    keys = stream(3000, 120_000, s, 7)
    strategy = get_strategy(name, n_nodes=n, senders=3, **settings)
    senders = np.arange(len(keys)) % 3
    states: dict = {}
    out = [
        strategy.route(keys[lo:hi], senders[lo:hi], states, n)
        for lo, hi in [(0, 50_000), (50_000, 50_001), (50_001, 120_000)]
    ]
    nodes = np.concatenate(out).astype(np.int32)
    assert hashlib.sha256(nodes.tobytes()).hexdigest()[:16] == digest


@pytest.mark.parametrize(("all_nodes", "d"), [(False, 2), (False, 4), (True, 6)])
def test_compiled_choices_equal_the_python_loop(all_nodes, d):
    # Given random candidates, heavy flags and a skewed start load
    rng = np.random.default_rng(d)
    n_nodes, m = 6, 20_000
    cand = rng.integers(0, n_nodes, size=(m, max(d, 2))).astype(np.int64)
    heavy = rng.random(m) < 0.3
    start = rng.integers(0, 50, n_nodes).astype(np.int64)
    # When both pick every tuple's node
    sent = start.copy()
    out = np.empty(m, dtype=np.int32)
    choose_nodes(cand, heavy, sent, all_nodes, d, out)
    ref_sent = start.tolist()
    ref = reference_choices(cand.tolist(), heavy.tolist(), ref_sent, all_nodes, d)
    # Then they agree on every tuple and on the load they leave behind
    assert out.tolist() == ref
    assert sent.tolist() == ref_sent


def test_compiled_candidates_equal_the_numpy_hashes():
    # Given keys over the whole int64 range (negative, zero, large)
    rng = np.random.default_rng(3)
    keys = np.r_[rng.integers(-(2**63), 2**63 - 1, 5000, dtype=np.int64), 0, -1, 2**63 - 1]
    for n, d in ((8, 2), (16, 16), (5, 3)):
        # Then the compiled Murmur3 pass gives every candidate the numpy one gives
        assert np.array_equal(compiled_candidates(keys, n, d), candidates(keys, n, d))
    # ... also on read-only keys (Arrow hands the Python worker zero-copy arrays)
    frozen = keys.copy()
    frozen.flags.writeable = False
    assert np.array_equal(compiled_candidates(frozen, 8, 2), candidates(keys, 8, 2))


def test_sorted_membership_equals_isin():
    rng = np.random.default_rng(4)
    for size in (0, 1, 50):
        members = np.unique(rng.integers(0, 100, size))
        values = rng.integers(-5, 105, 500)
        assert np.array_equal(_sorted_member(values, members), np.isin(values, members))
