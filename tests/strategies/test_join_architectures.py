"""Join architectures (dynamic, bi, bi6; paper 001's operator_set and the schemes it is
compared with, operator_parallel and query_parallel): layouts, replication, every pair
met exactly once.

A small numpy model of the engine's join (``spark.node_state.StoredTuples.flow``): a pair is
produced at a node where the later tuple probes and the earlier one (other side) is
stored, on key equality or ``|k1 - k2| <= w``.
"""

from __future__ import annotations

import numpy as np
import pytest

from balancebench.core.operators import BAND_JOIN, EQUI_JOIN, JOINS
from balancebench.experiment.params import EXPERIMENT_PARAMS, validate_params
from balancebench.strategies import STRATEGIES, get_strategy
from balancebench.strategies.join_architectures import (
    BiStream,
    BiStream6,
    DynamicJoin,
    FirstBatch,
    Grid,
    Groups,
)


def _incidence(n_tuples: int, n_nodes: int, placement: tuple[np.ndarray, np.ndarray]):
    index, node = placement
    assert node.min(initial=0) >= 0 and node.max(initial=0) < n_nodes
    m = np.zeros((n_tuples, n_nodes), dtype=np.int64)
    np.add.at(m, (index, node), 1)
    return m


def _stream(rng: np.random.Generator, n: int, n_keys: int, r_share: float = 0.6):
    side = np.where(rng.random(n) < r_share, "R", "S")
    # Skewed keys: a few hot keys and a long tail.
    keys = np.minimum(rng.zipf(1.3, n), n_keys)
    return side, np.arange(n, dtype=np.int64), keys.astype(np.int64)


def _matches(side, ids, keys, width):
    """Pairs (later p, earlier s) of opposite sides whose keys match."""
    opposite = side[:, None] != side[None, :]
    earlier = ids[None, :] < ids[:, None]
    close = np.abs(keys[:, None] - keys[None, :]) <= width
    return opposite & earlier & close


def _produced(strategy, layout, n_nodes, side, ids, keys, width, probing):
    """Times each (p, s) pair is produced when the tuples ``probing`` probe against all
    tuples stored under ``layout``."""
    t = len(ids)
    stored = _incidence(t, n_nodes, strategy.store_nodes(layout, side, ids, keys))
    probe_placement = strategy.probe_nodes(layout, side, ids, keys, width)
    probes = _incidence(t, n_nodes, probe_placement)
    probes[~probing] = 0
    meets = probes @ stored.T
    return np.where(_matches(side, ids, keys, width), meets, 0), meets


ARCHITECTURES = ["dynamic", "bi", "bi6", "operator_set", "operator_parallel", "query_parallel"]


@pytest.mark.parametrize("name", ARCHITECTURES)
@pytest.mark.parametrize("operator", sorted(JOINS, key=str))
@pytest.mark.parametrize("n_nodes", [1, 2, 3, 4, 5, 8, 13, 16])
def test_every_pair_meets_exactly_once(name, operator, n_nodes):
    rng = np.random.default_rng(n_nodes * 7 + len(name) + len(operator.name))
    side, ids, keys = _stream(rng, 700, 40)
    width = operator.key_reach(2)
    extra = {"group_split": "proportional"} if name in ("bi", "bi6") and n_nodes % 2 else {}
    if name == "bi6":  # the most subgroups the nodes hold (the paper's 6 from N = 12)
        extra["subgroups"] = max(1, min(6, n_nodes // 2))
    strategy = get_strategy(name, n_nodes=n_nodes, **extra)
    first = FirstBatch.of(side[:200], keys[:200])
    layout = strategy.layout(n_nodes, first, operator)
    assert layout.n_nodes <= n_nodes
    produced, meets = _produced(
        strategy, layout, n_nodes, side, ids, keys, width, np.ones(len(ids), bool)
    )
    wanted = _matches(side, ids, keys, width)
    assert wanted.sum() > 100
    assert np.array_equal(produced, wanted.astype(np.int64))


@pytest.mark.parametrize("operator", sorted(JOINS, key=str))
def test_dynamic_growth_keeps_every_pair_once(operator):
    """Batches with the grid growing 1 -> 4 -> 16 nodes: stored tuples are re-placed
    under the grown grid (what the Spark router's reassignment does) and later probes
    still find every earlier partner exactly once."""
    rng = np.random.default_rng(5)
    n_nodes = 20
    side, ids, keys = _stream(rng, 900, 30)
    width = operator.key_reach(1)
    strategy = DynamicJoin(n_nodes=n_nodes, initial_nodes=1, max_state_tuples_per_node=50)
    batches = np.array_split(np.arange(len(ids)), 3)
    grid = strategy.layout(n_nodes, FirstBatch.of(side[batches[0]], keys[batches[0]]))
    grids = []
    total = np.zeros((len(ids), len(ids)), dtype=np.int64)
    for rows in batches:
        grids.append(grid)
        upto = rows[-1] + 1
        probing = np.zeros(upto, bool)
        probing[rows] = True
        produced, _ = _produced(
            strategy, grid, n_nodes, side[:upto], ids[:upto], keys[:upto], width, probing
        )
        total[:upto, :upto] += produced
        stored = strategy.store_nodes(grid, side[:upto], ids[:upto], keys[:upto])
        node_state = np.bincount(stored[1], minlength=n_nodes)
        grown = strategy.grown(grid, node_state, n_nodes)
        if grown is not None:
            grid = grown
    assert [g.n_nodes for g in grids] == [1, 4, 16]
    assert strategy.grown(Grid(4, 4), np.array([10**6]), n_nodes) is None  # 64 > 20
    assert np.array_equal(total, _matches(side, ids, keys, width).astype(np.int64))


def test_growth_turns_each_node_into_four():
    strategy = DynamicJoin(n_nodes=64)
    for grid in (Grid(1, 1), Grid(2, 1), Grid(1, 4), Grid(2, 2, 1)):
        big = grid.grown()
        assert (big.rows, big.cols) == (2 * grid.rows, 2 * grid.cols)
        i, j = np.meshgrid(np.arange(grid.rows), np.arange(grid.cols), indexing="ij")
        old = grid.cell_nodes(i, j)
        assert sorted(old.ravel().tolist()) == list(range(grid.n_nodes))
        allnodes = big.cell_nodes(*np.meshgrid(np.arange(big.rows), np.arange(big.cols)))
        assert sorted(allnodes.ravel().tolist()) == list(range(big.n_nodes))
        for di in (0, 1):
            for dj in (0, 1):
                # node d of cell (i, j) becomes d + (2 di + dj) J at cell (2i + di, 2j + dj)
                new = big.cell_nodes(2 * i + di, 2 * j + dj)
                assert np.array_equal(new, old + (2 * di + dj) * grid.n_nodes)
        ids = np.arange(5000, dtype=np.int64)
        r_old, r_new = strategy.rows_of(grid, ids), strategy.rows_of(big, ids)
        assert np.array_equal(r_new >> 1, r_old)  # row i -> row 2i or 2i + 1
        c_old, c_new = strategy.cols_of(grid, ids), strategy.cols_of(big, ids)
        assert np.array_equal(c_new >> 1, c_old)
        # the "random" rows are spread evenly
        counts = np.bincount(r_new, minlength=big.rows)
        assert counts.min() > 0.7 * counts.mean()


def test_dynamic_shape_and_size_rules():
    s = DynamicJoin(n_nodes=8)
    # eq5-like: |R| >> |S| -> n x 1 (R not replicated, S broadcast)
    g = s.layout(8, FirstBatch(1500, 3))
    assert (g.rows, g.cols) == (8, 1)
    g = s.layout(8, FirstBatch(3, 1500))
    assert (g.rows, g.cols) == (1, 8)
    g = s.layout(16, FirstBatch(1000, 1000))
    assert (g.rows, g.cols) == (4, 4)
    g = s.layout(12, FirstBatch(1000, 1000))  # largest power of two <= 12 is 8
    assert (g.rows, g.cols) == (4, 2)
    g = s.layout(8, FirstBatch(0, 0))
    assert (g.rows, g.cols) == (4, 2)  # no counts: squarer, then more rows
    assert DynamicJoin(initial_nodes=1).layout(8, FirstBatch(10, 10)).n_nodes == 1
    assert DynamicJoin(initial_nodes=3).layout(8, FirstBatch(10, 1)).n_nodes == 2
    assert DynamicJoin(initial_nodes=64).layout(8, FirstBatch(10, 1)).n_nodes == 8
    # growth: only over the memory Param and only when 4x fits
    d = DynamicJoin(max_state_tuples_per_node=100)
    assert d.grown(Grid(1, 1), np.array([100.0]), 4) is None
    assert d.grown(Grid(1, 1), np.array([101.0]), 4) == Grid(1, 1, 1)
    assert d.grown(Grid(1, 1), np.array([101.0]), 3) is None
    assert DynamicJoin().grown(Grid(1, 1), np.array([1e9]), 64) is None  # no limit


@pytest.mark.parametrize("grid", [Grid(1, 1), Grid(4, 1), Grid(2, 4), Grid(1, 2, 2)])
def test_dynamic_replication_is_m_for_r_and_n_for_s(grid):
    s = DynamicJoin()
    rng = np.random.default_rng(3)
    side, ids, keys = _stream(rng, 400, 20)
    for place in (s.store_nodes, s.probe_nodes):
        index, node = place(grid, side, ids, keys)
        per_tuple = np.bincount(index, minlength=len(ids))
        assert np.array_equal(per_tuple, np.where(side == "R", grid.cols, grid.rows))
        # copies of one tuple are on distinct nodes
        assert len(np.unique(index.astype(np.int64) * 1000 + node)) == len(index)
    assert s.copies(grid) == {"R": grid.cols, "S": grid.rows}


def test_bi_groups_and_replication():
    rng = np.random.default_rng(4)
    side, ids, keys = _stream(rng, 2000, 50, r_share=0.8)
    bi = BiStream()
    g = bi.layout(8, FirstBatch.of(side, keys), EQUI_JOIN)
    assert (g.r_start, g.r_size, g.s_start, g.s_size) == (0, 4, 4, 4)
    assert (g.r_subgroups, g.s_subgroups, g.key_rule) == (1, 1, "none")
    index, node = bi.store_nodes(g, side, ids, keys)
    assert np.array_equal(index, np.arange(len(ids)))
    is_r = side == "R"
    assert set(node[is_r].tolist()) == {0, 1, 2, 3}
    assert set(node[~is_r].tolist()) == {4, 5, 6, 7}
    index, node = bi.probe_nodes(g, side, ids, keys)
    assert np.array_equal(np.bincount(index, minlength=len(ids)), np.full(len(ids), 4))
    assert set(node[is_r[index]].tolist()) == {4, 5, 6, 7}
    # proportional split: |R| : |S| ~ 4 : 1 on 10 nodes -> 8 R nodes, 2 S nodes
    p = BiStream(group_split="proportional").layout(10, FirstBatch(800, 200), EQUI_JOIN)
    assert (p.r_size, p.s_start, p.s_size) == (8, 8, 2)
    p = BiStream(group_split="proportional").layout(4, FirstBatch(10**6, 1), EQUI_JOIN)
    assert (p.r_size, p.s_size) == (3, 1)  # at least one node per group
    one = bi.layout(1, FirstBatch(5, 5), EQUI_JOIN)
    assert (one.r_start, one.r_size, one.s_start, one.s_size, one.n_nodes) == (0, 1, 0, 1, 1)


def test_bi6_has_six_subgroups_per_group_or_is_refused():
    bi6 = get_strategy("bi6", n_nodes=12)
    g = bi6.layout(12, FirstBatch(10, 10, 0, 99), EQUI_JOIN)
    assert (g.r_subgroups, g.s_subgroups, g.key_rule) == (6, 6, "hash")
    assert g.offsets("R").tolist() == list(range(7))  # one node each
    # Fewer nodes than 2 x 6 would mean fewer subgroups (at 8: a hash join): refused at
    # the door, with the Params (the layout trusts what the door let through).
    params = {"workload": "eq5", "strategies": ["hash", "bi6"], "n_nodes": 8}
    with pytest.raises(ValueError, match=r"n_nodes: bi6 needs at least .* = 12 nodes"):
        validate_params(params)
    assert validate_params({**params, "bi6_subgroups": 4})["n_nodes"] == 8
    assert validate_params({**params, "n_nodes": 12})["bi6_subgroups"] == 6
    # The proportional split keeps a node per subgroup in the small group.
    p = get_strategy("bi6", group_split="proportional").layout(14, FirstBatch(10**6, 1), EQUI_JOIN)
    assert (p.r_size, p.s_size, p.r_subgroups, p.s_subgroups) == (8, 6, 6, 6)
    big = bi6.layout(16, FirstBatch(10, 10, 0, 99), BAND_JOIN)
    assert (big.r_subgroups, big.s_subgroups, big.key_rule) == (6, 6, "range")
    assert big.offsets("R").tolist() == [0, 1, 2, 4, 5, 6, 8]
    assert big.boundaries("S").tolist() == [16, 33, 50, 66, 83]
    edge_keys = np.array([-5, 0, 15, 16, 49, 50, 99, 500])
    assert big.subgroup_of("S", edge_keys).tolist() == [0, 0, 0, 1, 2, 3, 5, 5]
    rng = np.random.default_rng(6)
    side, ids, keys = _stream(rng, 3000, 100)
    # equi: probes = the size of the key's subgroup of the other group
    index, node = bi6.probe_nodes(big, side, ids, keys, 0)
    count = np.bincount(index, minlength=len(ids))
    other = np.where(side == "R", "S", "R")
    sizes = {s: np.diff(big.offsets(s)) for s in "RS"}
    want = [sizes[o][big.subgroup_of(o, [k])[0]] for o, k in zip(other, keys, strict=True)]
    assert np.array_equal(count, want)
    # band: the subgroups covering [k - w, k + w]
    index, node = bi6.probe_nodes(big, side, ids, keys, 20)
    count = np.bincount(index, minlength=len(ids))
    want = []
    for o, k in zip(other, keys, strict=True):
        q1, q2 = big.subgroup_of(o, [k - 20, k + 20])
        want.append(int(big.offsets(o)[q2 + 1] - big.offsets(o)[q1]))
    assert np.array_equal(count, want)
    # storage is inside the key's subgroup, spread over its nodes
    index, node = bi6.store_nodes(big, side, ids, keys)
    q = np.where(side == "R", big.subgroup_of("R", keys), big.subgroup_of("S", keys))
    start = np.where(side == "R", big.r_start, big.s_start)
    off = {s: big.offsets(s) for s in "RS"}
    lo = start + np.array([off[s][x] for s, x in zip(side, q, strict=True)])
    hi = start + np.array([off[s][x + 1] for s, x in zip(side, q, strict=True)])
    assert ((node >= lo) & (node < hi)).all()


def test_layout_is_deterministic_and_first_batch_summary():
    side = np.array(["R", "S", "R", "R"])
    keys = np.array([5, 9, -2, 7])
    assert FirstBatch.of(side, keys) == FirstBatch(3, 1, -2, 9)
    assert FirstBatch.of(side[:0], keys[:0]) == FirstBatch(0, 0, None, None)
    g = BiStream6().layout(14, FirstBatch(0, 0), BAND_JOIN)
    assert isinstance(g, Groups) and (g.key_lo, g.key_span) == (0, 1)
    a = DynamicJoin().store_nodes(Grid(2, 2), side, np.arange(4), keys)
    b = DynamicJoin().store_nodes(Grid(2, 2), side, np.arange(4), keys)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("name", ["operator_set", "operator_parallel"])
def test_operator_set_is_the_cartesian_bucket_map_over_n_squared_tasks(name):
    strategy = get_strategy(name)
    rng = np.random.default_rng(3)
    side, ids, keys = _stream(rng, 600, 30)
    for n_nodes, n in ((9, 3), (8, 2), (16, 4), (3, 1)):
        layout = strategy.layout(n_nodes, FirstBatch.of(side, keys), EQUI_JOIN)
        assert (layout.n, layout.n_nodes) == (n, n * n)  # N - n^2 nodes stay idle
        index, node = strategy.store_nodes(layout, side, ids, keys)
        # Each tuple at n tasks: R along its row b0, S down its column b1 (BMP[b0, b1]).
        assert np.array_equal(np.bincount(index, minlength=len(ids)), np.full(len(ids), n))
        bucket = strategy.buckets(layout, ids)[index]
        is_r = side[index] == "R"
        assert np.array_equal(node[is_r] // n, bucket[is_r])
        assert np.array_equal(node[~is_r] % n, bucket[~is_r])
        assert sorted(set(node[is_r].tolist())) == list(range(n * n))
        probe = strategy.probe_nodes(layout, side, ids, keys, 3)
        assert all(np.array_equal(a, b) for a, b in zip(probe, (index, node), strict=True))
    assert strategy.exchanges == (2 if name == "operator_parallel" else 1)


def test_query_parallel_stores_once_and_probes_everywhere():
    strategy = get_strategy("query_parallel")
    rng = np.random.default_rng(4)
    side, ids, keys = _stream(rng, 500, 30)
    layout = strategy.layout(5, FirstBatch.of(side, keys), BAND_JOIN)
    index, node = strategy.store_nodes(layout, side, ids, keys)
    assert np.array_equal(index, np.arange(len(ids)))
    assert set(node.tolist()) == set(range(5))  # every instance stores some
    index, node = strategy.probe_nodes(layout, side, ids, keys, 2)
    assert np.array_equal(np.bincount(index), np.full(len(ids), 5))
    assert np.array_equal(np.bincount(node), np.full(5, len(ids)))


def test_registered_with_params():
    for name in ARCHITECTURES:
        cls = STRATEGIES[name]
        assert cls.kind == "join_architecture" and not cls.plans
        assert cls.operators == JOINS
    assert EXPERIMENT_PARAMS["dynamic_initial_nodes"]["default"] is None
    assert EXPERIMENT_PARAMS["dynamic_max_state_tuples_per_node"]["default"] is None
    assert EXPERIMENT_PARAMS["bi_group_split"]["default"] == "halves"
    assert EXPERIMENT_PARAMS["bi6_subgroups"]["default"] == 6
    assert "bi_subgroups" not in EXPERIMENT_PARAMS
    with pytest.raises(ValueError):
        get_strategy("bi", subgroups=3)


@pytest.mark.parametrize("name", ["bi", "bi6"])
@pytest.mark.parametrize("operator", sorted(JOINS, key=str))
def test_bistream_growth_keeps_every_pair_once_and_full_nodes_stop_storing(name, operator):
    """Memory-driven growth (``BiStream.grown``) over three batches: a tuple stays on the
    node it was stored on, later tuples probe the grown (sub)groups, and every pair is
    still produced exactly once; a node at capacity stores nothing more, and a grown
    subgroup has room for what it holds."""
    rng = np.random.default_rng(11 if name == "bi" else 12)
    n_nodes, capacity = 40, 40
    side, ids, keys = _stream(rng, 900, 30)
    width = operator.key_reach(1)
    strategy = get_strategy(name, n_nodes=n_nodes)
    batches = np.array_split(np.arange(len(ids)), 3)
    first = FirstBatch.of(side[batches[0]], keys[batches[0]])
    layout = strategy.initial_layout(n_nodes, first, operator)
    k = 6 if name == "bi6" else 1
    assert layout.member_count == 2 * k  # one node per subgroup and side
    stored_on = np.full(len(ids), -1)
    total = np.zeros((len(ids), len(ids)), dtype=np.int64)
    sizes = [layout.member_count]
    for rows in batches:
        before = np.bincount(stored_on[stored_on >= 0], minlength=n_nodes)
        stored_on[rows] = strategy.store_nodes(layout, side[rows], ids[rows], keys[rows])[1]
        full_before = np.flatnonzero(before >= capacity)
        open_left = any(
            set(m) - set(full_before.tolist())
            for s in ("R", "S")
            for m in layout.subgroup_members(s)
        )
        if open_left:
            assert not np.isin(stored_on[rows], full_before).any(), "a full node stored"
        upto = rows[-1] + 1
        stored = _incidence(upto, n_nodes, (np.arange(upto), stored_on[:upto].astype(np.int32)))
        index, node = strategy.probe_nodes(layout, side[rows], ids[rows], keys[rows], width)
        probes = np.zeros((upto, n_nodes), dtype=np.int64)
        np.add.at(probes, (rows[index], node), 1)
        wanted = _matches(side[:upto], ids[:upto], keys[:upto], width)
        total[:upto, :upto] += np.where(wanted, probes @ stored.T, 0)
        state = np.bincount(stored_on[stored_on >= 0], minlength=n_nodes)
        grown = strategy.grown(layout, state, capacity, n_nodes)
        if grown is not None:
            for s in ("R", "S"):
                for old, new in zip(
                    layout.subgroup_members(s), grown.subgroup_members(s), strict=True
                ):
                    assert set(old) <= set(new)  # members only join
                    if state[list(old)].max() > capacity:
                        assert len(new) >= min(
                            len(old) + 1, len(old) + n_nodes - layout.member_count
                        )
                        assert len(new) * capacity >= state[list(old)].sum() or (
                            grown.member_count == n_nodes
                        )
            layout = grown
        sizes.append(layout.member_count)
    assert sizes[-1] > sizes[0] and sizes == sorted(sizes)
    assert np.array_equal(total, _matches(side, ids, keys, width).astype(np.int64))
