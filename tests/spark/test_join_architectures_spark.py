"""Join architectures on Spark: the SQL placement equals the numpy one, and the engine's
oracle passes for dynamic / bi / bi6 and paper 001's three schemes on eq5 and band (full
history and a window, Dynamic's grid growing 1 -> 4 nodes), with the replication the
layout implies."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from balancebench.core.operators import BAND_JOIN, EQUI_JOIN
from balancebench.core.workloads import get_workload
from balancebench.experiment.streams import build_stream
from balancebench.generators import generate
from balancebench.spark.architecture_routers import (
    BiStreamRouter,
    DynamicRouter,
    bi_rows,
    dynamic_rows,
    regrid,
)
from balancebench.spark.engine import Engine
from balancebench.spark.engine_config import EngineConfig
from balancebench.spark.replay_stream import load_replay, release_replay
from balancebench.spark.routers import BATCH_COLUMNS, BOTH, PROBE, STORE, RouteContext
from balancebench.spark.runners import make_router
from balancebench.state.paths import datasets_dir
from balancebench.strategies import get_strategy
from balancebench.strategies.join_architectures import DynamicJoin, FirstBatch, Grid

pytestmark = pytest.mark.slow

N_NODES, N_BATCHES = 4, 3


def _batch(rng: np.random.Generator, n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "side": np.where(rng.random(n) < 0.7, "R", "S"),
            "tuple_id": rng.permutation(10 * n)[:n].astype(np.int64),
            "key": np.minimum(rng.zipf(1.4, n), 300).astype(np.int64) - 5,
            "event_time_s": np.zeros(n),
            "payload": np.zeros(n, dtype=np.int64),
        }
    )


def _numpy_rows(strategy, layout, pdf: pd.DataFrame, width: int) -> np.ndarray:
    side, ids, keys = pdf["side"].to_numpy(), pdf["tuple_id"].to_numpy(), pdf["key"].to_numpy()
    rows = []
    for role, place in ((0, strategy.store_nodes), (1, strategy.probe_nodes)):
        args = (layout, side, ids, keys) + ((width,) if role else ())
        index, node = place(*args)
        rows.append(np.c_[ids[index], node, np.full(len(index), role)])
    out = np.concatenate(rows)
    return out[np.lexsort(out.T[::-1])]


def _spark_rows(df) -> np.ndarray:
    pdf = df.select("tuple_id", "node", "role").toPandas()
    role = (pdf["role"] == PROBE).astype(np.int64).to_numpy()
    assert set(pdf["role"]) <= {STORE, PROBE}
    out = np.c_[pdf["tuple_id"].to_numpy(), pdf["node"].to_numpy(), role].astype(np.int64)
    return out[np.lexsort(out.T[::-1])]


def test_spark_placement_equals_numpy(spark):
    rng = np.random.default_rng(11)
    pdf = _batch(rng, 3000)
    df = spark.createDataFrame(pdf).select(*BATCH_COLUMNS)
    first = FirstBatch.of(pdf["side"].to_numpy(), pdf["key"].to_numpy())
    dyn = DynamicJoin()
    for grid in (Grid(4, 1), Grid(1, 2, 2), Grid(2, 2, 1)):
        assert np.array_equal(_spark_rows(dynamic_rows(df, grid)), _numpy_rows(dyn, grid, pdf, 0))
    for name, n_nodes, split in (("bi", 5, "proportional"), ("bi6", 16, "halves")):
        strategy = get_strategy(name, n_nodes=n_nodes, group_split=split)
        for operator, width in ((EQUI_JOIN, 0), (BAND_JOIN, 7)):
            layout = strategy.layout(n_nodes, first, operator)
            got = _spark_rows(bi_rows(df, layout, width))
            assert np.array_equal(got, _numpy_rows(strategy, layout, pdf, width)), (name, operator)
            # Grown under scale-out: member lists, full nodes that no longer store.
            start = strategy.initial_layout(n_nodes, first, operator)
            state = np.zeros(n_nodes)
            state[[0, start.member_count - 1]] = [250, 90]
            grown = strategy.grown(start, state, 100, n_nodes)
            assert grown is not None and grown.closed == {0}
            got = _spark_rows(bi_rows(df, grown, width))
            assert np.array_equal(got, _numpy_rows(strategy, grown, pdf, width)), (name, "grown")
    # Dynamic growth: one copy of each stored tuple, re-placed under the grown grid.
    old, new = Grid(2, 1), Grid(2, 1).grown()
    index, node = dyn.store_nodes(old, pdf["side"], pdf["tuple_id"], pdf["key"])
    state = pdf.iloc[index].assign(node=node.astype(np.int32))
    stay, go = regrid(old, new)(spark.createDataFrame(state).select(*BATCH_COLUMNS, "node"))
    regrown = stay.unionByName(go)
    got = regrown.select("tuple_id", "node").toPandas().to_numpy()
    index, node = dyn.store_nodes(new, pdf["side"], pdf["tuple_id"], pdf["key"])
    want = np.c_[pdf["tuple_id"].to_numpy()[index], node]
    assert sorted(map(tuple, got.tolist())) == sorted(map(tuple, want.tolist()))


@pytest.fixture(scope="module")
def streams(spark):
    dataset, _ = generate("tpch", datasets_dir(), {"tpch_scale_factor": 0.001, "zipf_s": 1.0})
    out = {}
    for workload in ("eq5", "band"):
        replay = build_stream(workload, dataset, {"seed": 1, "input_rate_tuples_per_s": 5000.0})
        df, interval = load_replay(spark, replay, N_BATCHES)
        out[workload] = (df, interval, df.toPandas())
    yield out
    for df, _, _ in out.values():
        release_replay(df)


def _expected_received(router, pdf: pd.DataFrame, b: int, width: int) -> np.ndarray:
    """Tuples per node the layout used in batch ``b`` implies (store + probe copies)."""
    rows = _numpy_rows(router.strategy, router.layouts[b], pdf[pdf["batch"] == b], width)
    return np.bincount(rows[:, 1], minlength=N_NODES)


# Every architecture on both joins with full history (Dynamic growing 1 -> 4 nodes), and
# one windowed run (the whole grid from the start); windows themselves are the engine's
# and are covered for every workload in test_engine.py.
CASES = [
    *[(w, n, False) for n in ("dynamic", "bi", "bi6") for w in ("eq5", "band")],
    ("band", "dynamic", True),
]


def _scale_out_run(spark, streams, name: str):
    df, interval, pdf = streams["eq5"]
    first = pdf[pdf["batch"] == 0]
    capacity = len(first) // 2 + 1
    config = EngineConfig(
        get_workload("eq5"),
        n_nodes=N_NODES,
        n_batches=N_BATCHES,
        interval_s=interval,
        node_capacity_state_tuples=capacity,
    )
    router = make_router(get_strategy(name, n_nodes=N_NODES), N_NODES, 0.05, capacity)
    results = Engine(spark, df, config, router, name).run()  # raises OracleMismatch
    assert all(r.oracle_passed for r in results)
    assert sum(r.result_rows for r in results) > 100
    # One node at first; after batch 0 (all state on node 0, above capacity) the active
    # nodes become max(2, ceil(state / capacity)).
    assert results[0].nodes_used == 1 and results[0].node_state[0] == len(first)
    active = max(2, -(-len(first) // capacity))
    assert results[0].extra["scaled_out"] == 1.0
    assert results[0].extra["nodes_active"] == active
    assert results[1].extra["nodes_active"] >= active
    return results, pdf, active


def test_hash_scale_out_rehomes_every_stored_tuple(spark, streams):
    """``hash`` (no planner) under memory-driven scale-out: every stored tuple moves to
    ``pmod(hash(key), active)`` inside batch 1's exchange (counted there) and batch 1
    leaves the state exactly there; every batch passes the oracle (no pair lost or
    doubled by the move)."""
    from balancebench.core.hashing import home_nodes

    results, pdf, active = _scale_out_run(spark, streams, "hash")
    keys = pdf[pdf["batch"] == 0]["key"].to_numpy()
    assert results[0].migrated_tuples == 0
    assert results[1].migrated_tuples == int((home_nodes(keys, active) != 0).sum()) > 0
    upto = pdf[pdf["batch"] <= 1]["key"].to_numpy()
    want = np.bincount(home_nodes(upto, active), minlength=N_NODES)
    assert np.array_equal(results[1].node_state, want)


def test_planner_scale_out_fills_the_new_nodes_by_its_own_plan(spark, streams):
    """``mnrt`` under scale-out: it adopts the placement (nothing moves by the new base)
    and its plan on the state moves part of node 0's state to the empty nodes: the
    scale-out batch has a plan that moves some but not all of the state, and after it
    node 0 no longer holds everything; every batch passes the oracle."""
    results, pdf, _ = _scale_out_run(spark, streams, "mnrt")
    first = results[0]
    assert first.plan is not None and first.plan.n_moves > 0
    # the plan's moves ride batch 1's exchange
    assert 0 < results[1].migrated_tuples < first.node_state.sum()
    assert results[1].node_state[0] < results[1].node_state.sum()
    assert np.count_nonzero(results[1].node_state) >= 2


@pytest.mark.parametrize(("workload", "name", "windowed"), CASES)
def test_engine_oracle_and_replication(spark, streams, workload, name, windowed):
    df, interval, pdf = streams[workload]
    # Full history: Dynamic starts at one node and grows to 2 x 2 after the first batch;
    # windowed: the whole 4-node grid from the start, shaped by |R| : |S|.
    grows = name == "dynamic" and not windowed
    settings = {"initial_nodes": 1, "max_state_tuples_per_node": 100} if grows else {}
    if name == "bi6":  # two one-node subgroups per group of 2 (6 would need 12 nodes)
        settings = {"subgroups": 2}
    # Bi on eq5 under memory-driven scale-out: one node per side, the groups grow.
    scales = name == "bi" and workload == "eq5"
    capacity = len(pdf[pdf["batch"] == 0]) // 3 if scales else None
    config = EngineConfig(
        get_workload(workload),
        n_nodes=N_NODES,
        n_batches=N_BATCHES,
        interval_s=interval,
        window_s=2 * interval if windowed else 0.0,
        node_capacity_state_tuples=capacity,
    )
    strategy = get_strategy(name, n_nodes=N_NODES, **settings)
    router = make_router(strategy, N_NODES, 0.05, capacity)
    assert isinstance(router, DynamicRouter if name == "dynamic" else BiStreamRouter)
    results = Engine(spark, df, config, router, name).run()  # raises OracleMismatch
    assert all(r.oracle_passed for r in results)
    assert sum(r.result_rows for r in results) > 100
    width = config.band_width if workload == "band" else 0
    for r in results:
        layout = router.layouts[r.batch]
        assert np.array_equal(r.node_received, _expected_received(router, pdf, r.batch, width))
        assert r.routing_table_entries == 0
        assert r.nodes_used == layout.n_nodes
        batch = pdf[pdf["batch"] == r.batch]
        n_r, n_s = int((batch["side"] == "R").sum()), int((batch["side"] == "S").sum())
        if name == "dynamic":  # 2m copies of each R tuple, 2n of each S tuple
            want = (2 * layout.cols * n_r + 2 * layout.rows * n_s) / (n_r + n_s)
            assert r.replication_factor == pytest.approx(want)
        elif name == "bi":  # one store copy, probes to every node of the other group
            r_size, s_size = len(layout.flat("R")[0]), len(layout.flat("S")[0])
            want = (n_r * (1 + s_size) + n_s * (1 + r_size)) / (n_r + n_s)
            assert r.replication_factor == pytest.approx(want)
    if grows:
        assert [g.n_nodes for g in router.layouts] == [1, 4, 4]
        assert router.nodes_used() == 4
        # Every state tuple of batch 0 now has 2 copies; those not already on node 0 moved.
        first = pdf[pdf["batch"] == 0]
        old = DynamicJoin().store_nodes(
            router.layouts[0], first["side"], first["tuple_id"], first["key"]
        )
        new = DynamicJoin().store_nodes(
            router.layouts[1], first["side"], first["tuple_id"], first["key"]
        )
        ids = first["tuple_id"].to_numpy()
        before = set(zip(ids[old[0]].tolist(), old[1].tolist(), strict=True))
        after = set(zip(ids[new[0]].tolist(), new[1].tolist(), strict=True))
        # (moved inside batch 1's exchange)
        assert results[1].migrated_tuples == len(after - before) > 0
        assert all(r.migrated_tuples == 0 for r in [results[0], *results[2:]])
    elif name == "dynamic":
        # eq5 (lineitem >> supplier) and band (L1 >> L2): a 4 x 1 grid, R not replicated
        assert (router.layouts[0].rows, router.layouts[0].cols) == (4, 1)
    if scales:  # grown without moving a tuple; the nodes it used are what it added
        sizes = [g.member_count for g in router.layouts]
        assert sizes[0] == 2 and sizes[-1] > 2 and sizes == sorted(sizes)
        assert all(r.migrated_tuples == 0 for r in results)
        assert sum(r.extra.get("scaled_out", 0.0) for r in results) >= 1
    elif name != "dynamic":
        assert router.info()["r_group_nodes"] == 2
        assert router.info()["r_subgroups"] == (2 if name == "bi6" else 1)


# ---- paper 001: operator-set parallelism and the schemes it is compared with ----------
def _pairs(df) -> set[tuple[int, int]]:
    """(tuple_id, node) of the routed rows; each must be one row, role ``both`` where the
    tuple is stored (store and probe there) and ``probe`` elsewhere."""
    pdf = df.select("tuple_id", "node", "role").toPandas()
    assert not pdf.duplicated(["tuple_id", "node"]).any()
    return set(zip(pdf["tuple_id"].tolist(), pdf["node"].tolist(), strict=True))


def _numpy_pairs(placement, ids: np.ndarray) -> set[tuple[int, int]]:
    index, node = placement
    return set(zip(ids[index].tolist(), node.tolist(), strict=True))


def test_paper001_placement_equals_numpy_and_operator_parallel_adds_an_exchange(spark):
    from balancebench.spark.placement import partition_by_node

    rng = np.random.default_rng(12)
    pdf = _batch(rng, 2000)
    df = spark.createDataFrame(pdf).select(*BATCH_COLUMNS)
    side, ids, keys = pdf["side"].to_numpy(), pdf["tuple_id"].to_numpy(), pdf["key"].to_numpy()
    ctx = RouteContext(spark, BAND_JOIN, 9, 3)
    exchanges = {}
    for name in ("operator_set", "operator_parallel", "query_parallel"):
        strategy = get_strategy(name, n_nodes=9)
        router = make_router(strategy, 9, 0.05)
        routed = router.route(df, ctx)
        layout = router.layouts[-1]
        stores = _numpy_pairs(strategy.store_nodes(layout, side, ids, keys), ids)
        probes = _numpy_pairs(strategy.probe_nodes(layout, side, ids, keys, 3), ids)
        assert _pairs(routed) == stores | probes, name
        both = routed.where(F.col("role") == BOTH).select("tuple_id", "node").toPandas()
        assert set(zip(both["tuple_id"], both["node"], strict=True)) == stores, name
        plan = partition_by_node(routed, 9)._jdf.queryExecution().executedPlan().toString()
        exchanges[name] = plan.count("Exchange")
    assert router.info()["query_instances"] == 9
    # The stateless operators' own stage: one exchange more than straight from the splitters.
    assert exchanges["operator_parallel"] == exchanges["operator_set"] + 1


# Each scheme once, both joins among them (every scheme's placement on both is checked in
# numpy, tests/strategies/test_join_architectures.py; make test's time is near its bound).
@pytest.mark.parametrize(
    ("workload", "name"),
    [("band", "operator_set"), ("eq5", "operator_parallel"), ("band", "query_parallel")],
)
def test_paper001_engine_oracle_and_replication(spark, streams, workload, name):
    df, interval, pdf = streams[workload]
    config = EngineConfig(
        get_workload(workload), n_nodes=N_NODES, n_batches=N_BATCHES, interval_s=interval
    )
    strategy = get_strategy(name, n_nodes=N_NODES)
    router = make_router(strategy, N_NODES, 0.05)
    results = Engine(spark, df, config, router, name).run()  # raises OracleMismatch
    assert all(r.oracle_passed for r in results)
    assert sum(r.result_rows for r in results) > 100
    width = config.band_width if workload == "band" else 0
    layout = router.layouts[0]
    for r in results:
        batch = pdf[pdf["batch"] == r.batch]
        side, ids, keys = batch["side"], batch["tuple_id"].to_numpy(), batch["key"]
        pairs = _numpy_pairs(strategy.store_nodes(layout, side, ids, keys), ids)
        pairs |= _numpy_pairs(strategy.probe_nodes(layout, side, ids, keys, width), ids)
        nodes = np.array([node for _, node in pairs], dtype=np.int64)
        assert np.array_equal(r.node_received, np.bincount(nodes, minlength=N_NODES))
        # A tuple is shipped once per task: n = 2 of the 2 x 2 matrix, or every instance.
        want = N_NODES if name == "query_parallel" else 2
        assert r.replication_factor == pytest.approx(want)
        assert r.migrated_tuples == 0 and r.routing_table_entries == 0
