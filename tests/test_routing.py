import numpy as np
import pytest

from balancebench.core.hashing import home_nodes
from balancebench.core.routing_table import RoutingTable


def _keys_with_home(n_nodes, homes):
    cand = np.arange(10_000)
    h = home_nodes(cand, n_nodes)
    out, used = [], set()
    for want in homes:
        k = int(next(c for c in cand if h[c] == want and c not in used))
        used.add(k)
        out.append(k)
    return out


def test_entries_exactly_for_keys_off_home():
    a, b, c = _keys_with_home(4, [0, 1, 2])
    # a: whole at home (no entry); b: whole off home (entry); c: split (entry).
    table = RoutingTable.from_parts(
        np.array([a, b, c, c]), np.array([0, 3, 2, 1]), np.array([5.0, 4.0, 1.0, 3.0]), 4
    )
    assert list(table.keys) == sorted([b, c])
    assert table.shares(a) == {0: 1.0}
    assert table.shares(b) == {3: 1.0}
    assert table.shares(c) == pytest.approx({1: 0.75, 2: 0.25}, abs=1e-6)


def test_storage_fractions_match_shares():
    (k,) = _keys_with_home(4, [0])
    table = RoutingTable.from_parts(
        np.array([k] * 3), np.array([1, 2, 3]), np.array([1.0, 2.0, 7.0]), 4
    )
    n = 100_000
    nodes = table.storage_nodes(np.full(n, k), np.arange(n))
    share = np.bincount(nodes, minlength=4) / n
    # Binomial sampling error: 4 sigma at n = 1e5 is below 0.006.
    assert share == pytest.approx([0.0, 0.1, 0.2, 0.7], abs=0.006)


def test_unknown_keys_route_home_and_routing_is_deterministic():
    table = RoutingTable.from_parts(np.array([7, 7]), np.array([0, 1]), np.array([1.0, 1.0]), 2)
    keys = np.arange(1000)
    ids = np.arange(1000)
    first = table.storage_nodes(keys, ids)
    assert np.array_equal(first, table.storage_nodes(keys, ids))
    others = keys != 7
    assert np.array_equal(first[others], home_nodes(keys[others], 2))


def test_zero_width_share_is_dropped():
    (k,) = _keys_with_home(2, [0])
    table = RoutingTable.from_parts(np.array([k, k]), np.array([0, 1]), np.array([1e9, 1e-6]), 2)
    assert len(table) == 0


def test_operator_routing_all_sends_to_every_part():
    a, b = _keys_with_home(4, [0, 1])
    table = RoutingTable.from_parts(
        np.array([a, a, a, b]), np.array([0, 2, 3, 2]), np.array([1.0, 1.0, 2.0, 5.0]), 4
    )
    other = 10**9 + 7
    idx, nodes = table.operator_nodes(np.array([a, b, other]))
    pairs = sorted(zip(idx.tolist(), nodes.tolist(), strict=True))
    home_other = int(home_nodes(np.array([other]), 4)[0])
    assert pairs == [(0, 0), (0, 2), (0, 3), (1, 2), (2, home_other)]
    assert table.nodes_per_key(np.array([a, b, other])).tolist() == [3, 1, 1]


def test_predicate_routing_for_a_band_join():
    # |k1 - k2| <= 1: a probe for key k must reach every node holding k - 1, k or k + 1.
    keys = np.arange(100, 110, dtype=np.int64)
    table = RoutingTable.from_parts(
        np.array([104, 104, 105]), np.array([0, 1, 3]), np.array([1.0, 1.0, 1.0]), 4
    )
    idx, nodes = table.predicate_nodes(np.array([103]), 1)
    expected = {int(home_nodes(np.array([102]), 4)[0]), 0, 1}
    expected |= {int(n) for n in table.operator_nodes(np.array([103]))[1]}
    assert idx.tolist() == [0] * len(expected)
    assert set(nodes.tolist()) == expected
    assert len(keys)  # keys outside Y use F(k)


def test_mnrt_replicates_the_side_much_smaller_than_the_other():
    from balancebench.strategies import get_strategy
    from balancebench.strategies.base import NO_SIDE, SIDE_R, SIDE_S

    mnrt = get_strategy("mnrt", two_stream_ratio=3.0)
    r = np.array([1.0, 900.0, 10.0, 0.0, 0.0, 20.0])
    s = np.array([500.0, 2.0, 20.0, 7.0, 0.0, 60.0])
    # much smaller R; much smaller S; within 3x (no rule); R empty; nothing; exactly 3x
    want = [SIDE_R, SIDE_S, NO_SIDE, SIDE_R, NO_SIDE, SIDE_R]
    assert mnrt.replicated_sides(r, s).tolist() == want
    off = get_strategy("mnrt", two_stream_ratio=0.0)
    assert off.replicated_sides(r, s).tolist() == [NO_SIDE] * 6
    assert get_strategy("qmmp").replicated_sides(r, s).tolist() == [NO_SIDE] * 6


def test_replica_sync_copies_to_new_nodes_and_collapses_a_side_that_leaves():
    from balancebench.spark.routers import Replicas, replica_sync
    from balancebench.strategies.base import SIDE_R, SIDE_S

    def reps(rows):
        return Replicas(
            np.array([k for k, _, _ in rows], np.int64),
            np.array([s for _, s, _ in rows], np.int8),
            [np.array(n, np.int32) for _, _, n in rows],
        )

    before = reps([(5, SIDE_S, [1, 3]), (7, SIDE_S, [0, 2]), (9, SIDE_R, [2, 3])])
    after = reps([(5, SIDE_S, [3, 0, 2]), (9, SIDE_S, [2, 3]), (11, SIDE_R, [1, 2])])
    sync = replica_sync(before, after)
    rows = list(
        zip(
            sync.key.tolist(), sync.side, sync.source.tolist(), sync.have, sync.targets, strict=True
        )
    )
    assert rows == [
        # stays replicated: copied from a holder to the new nodes, dropped where Y(k) left
        (5, "S", 1, [1, 3], [0, 2, 3]),
        # leaves the rule: one copy stays on its lowest holder
        (7, "S", 0, [0, 2], [0]),
        # switches side: the old side collapses, the new one is copied from each tuple
        (9, "R", 2, [2, 3], [2]),
        (9, "S", -1, [], [2, 3]),
        # enters the rule
        (11, "R", -1, [], [1, 2]),
    ]
