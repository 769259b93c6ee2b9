"""Properties every plan must have, for every strategy, on random windows (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from balancebench.core.hashing import home_nodes
from balancebench.core.loads import KeyLoads
from balancebench.core.routing_table import RoutingTable
from balancebench.experiment.params import ExperimentSpec
from balancebench.strategies import STRATEGIES, get_strategy

PLANNERS = ["qmmp", "mnrt"]


@st.composite
def windows(draw):
    n_nodes = draw(st.integers(1, 8))
    n_keys = draw(st.integers(1, 25))
    keys = draw(st.lists(st.integers(0, 10**6), min_size=n_keys, max_size=n_keys, unique=True))
    rows = []
    for k in keys:
        nodes = draw(st.lists(st.integers(0, n_nodes - 1), min_size=1, max_size=3, unique=True))
        for d in nodes:
            load = draw(st.integers(1, 1000))
            state = draw(st.integers(0, 2000))
            rows.append((k, d, float(load), float(state)))
    key, node, load, state = map(np.array, zip(*rows, strict=True))
    tolerance = draw(st.sampled_from([0.01, 0.05, 0.2, 1.0]))
    return KeyLoads(key, node, load, state), n_nodes, tolerance


def _parts(loads: KeyLoads) -> dict[tuple[int, int], float]:
    return {
        (int(k), int(d)): float(v)
        for k, d, v in zip(loads.key, loads.node, loads.load, strict=True)
    }


def _apply(before: dict, plan) -> dict:
    after = dict(before)
    for k, a, f, t in zip(
        plan.move_key, plan.move_amount, plan.move_from, plan.move_to, strict=True
    ):
        after[(int(k), int(f))] = after.get((int(k), int(f)), 0.0) - float(a)
        after[(int(k), int(t))] = after.get((int(k), int(t)), 0.0) + float(a)
    return after


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@settings(max_examples=150, deadline=None)
@given(window=windows())
def test_plan_conserves_load_and_moves_are_real(name, window):
    loads, n_nodes, tolerance = window
    plan = get_strategy(name).plan(loads, n_nodes=n_nodes, tolerance=tolerance)
    before = _parts(loads)
    total = sum(before.values())
    eps = 1e-9 * max(1.0, total)
    assert (plan.move_amount > 0).all()
    assert (plan.move_from != plan.move_to).all()
    # Moves out of one part never exceed what the part held.
    taken: dict = {}
    for k, a, f in zip(plan.move_key, plan.move_amount, plan.move_from, strict=True):
        taken[(int(k), int(f))] = taken.get((int(k), int(f)), 0.0) + float(a)
    for part, amount in taken.items():
        assert part in before, f"move from {part}, which holds nothing"
        assert amount <= before[part] + eps
    after = _apply(before, plan)
    assert min(after.values()) >= -eps
    for k in {k for k, _ in before}:
        assert sum(v for (kk, _), v in after.items() if kk == k) == pytest.approx(
            sum(v for (kk, _), v in before.items() if kk == k), abs=eps
        )
    node_after = np.zeros(n_nodes)
    for (_, d), v in after.items():
        node_after[d] += v
    assert np.allclose(node_after, plan.node_loads_after, atol=eps)
    if not STRATEGIES[name].plans:
        assert len(plan.routing_table) == 0  # base routing only, whatever the data
        return
    if not isinstance(plan.routing_table, RoutingTable):
        return  # bucket map: checked in test_balanceload
    # The routing table has an entry exactly for the keys with data off their home node.
    held = {(k, d) for (k, d), v in after.items() if v > eps}
    keys = {k for k, _ in held}
    home = dict(
        zip(sorted(keys), home_nodes(np.array(sorted(keys)), n_nodes).tolist(), strict=True)
    )
    off_home = {k for k in keys if any(d != home[k] for kk, d in held if kk == k)}
    assert set(plan.routing_table.keys.tolist()) == off_home
    assert plan.routing_table_entries == len(off_home)


@pytest.mark.parametrize("name", PLANNERS)
@settings(max_examples=150, deadline=None)
@given(window=windows())
def test_splitting_planners_reach_the_tolerance(name, window):
    loads, n_nodes, tolerance = window
    plan = get_strategy(name).plan(loads, n_nodes=n_nodes, tolerance=tolerance)
    mean = plan.node_loads_after.mean()
    assert plan.node_loads_after.max() <= (1 + tolerance) * mean * (1 + 1e-9) + 1e-9
    assert plan.reached_tolerance


@settings(max_examples=50, deadline=None)
@given(window=windows())
def test_hash_never_plans(window):
    loads, n_nodes, tolerance = window
    plan = get_strategy("hash").plan(loads, n_nodes=n_nodes, tolerance=tolerance)
    assert plan.n_moves == 0 and plan.migrated_state_tuples == 0
    assert plan.imbalance_after == plan.imbalance_before


def test_strategy_adopts_its_plan_routing_table():
    loads = KeyLoads.from_counts(np.array([1, 2, 3, 4]), np.zeros(4, int), np.array([5.0, 5, 5, 5]))
    strategy = get_strategy("qmmp", n_nodes=2)
    plan = strategy.plan(loads, n_nodes=2, tolerance=0.05)
    assert strategy.routing is plan.routing_table


def test_unknown_strategy_and_bad_inputs_are_named():
    with pytest.raises(ValueError, match=r"strategy: unknown 'nope'; allowed values: \["):
        get_strategy("nope")
    with pytest.raises(ValueError, match="bad parameters"):
        get_strategy("qmmp", colour="red")
    loads = KeyLoads.from_counts(np.array([1]), np.array([3]), np.array([1.0]))
    with pytest.raises(ValueError, match="n_nodes=2 allows 0..1"):
        get_strategy("qmmp").plan(loads, n_nodes=2, tolerance=0.05)
    # A tolerance is checked once, at the door (the Params), not again by every plan.
    with pytest.raises(ValueError, match="tolerance"):
        ExperimentSpec.checked({"tolerance": 0})
    with pytest.raises(ValueError, match="KeyLoads.load must be finite and >= 0"):
        KeyLoads.from_counts(np.array([1]), np.array([0]), np.array([-1.0]))
    with pytest.raises(ValueError, match="two rows for key 1 on node 0"):
        KeyLoads.from_counts(np.array([1, 1]), np.array([0, 0]), np.array([1.0, 2.0]))
