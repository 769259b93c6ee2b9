"""The fast QMMP and MNRT make the same decisions as whole-data references on windows
routed by the strategy's own table (hash placement, then after a plan). MNRT's reference
is the paper's pseudo-code transcribed apart (``paper_mnrt.py``), not a copy of the code."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from balancebench.core.hashing import home_nodes
from balancebench.core.loads import KeyLoads
from balancebench.strategies import get_strategy
from balancebench.strategies.base import aggregate_parts
from tests.strategies.paper_mnrt import Window, paper_mnrt
from tests.strategies.reference import Parts, reference_qmmp


def _paper_mnrt(heavy_first: bool):
    def run(parts: Parts, n_nodes: int, tolerance: float) -> Parts:
        window = Window(parts.key, parts.node, parts.load, parts.state)
        out = paper_mnrt(window, n_nodes, tolerance, heavy_first)
        return Parts(out.key, out.node, out.load, out.state)

    return run


# name -> (strategy, its settings, the reference)
REFERENCES = {
    "qmmp": ("qmmp", {}, reference_qmmp),
    "mnrt": ("mnrt", {}, _paper_mnrt(heavy_first=True)),
    "mnrt-line6": ("mnrt", {"unload_fallback": "paper"}, _paper_mnrt(heavy_first=False)),
}


def _after_parts(loads: KeyLoads, plan) -> tuple[np.ndarray, ...]:
    k = np.r_[loads.key, plan.move_key, plan.move_key]
    n = np.r_[loads.node, plan.move_from, plan.move_to]
    v = np.r_[loads.load, -plan.move_amount, plan.move_amount]
    s = np.r_[loads.state, np.zeros(2 * plan.n_moves)]
    key, node, load, state = aggregate_parts(k, n.astype(np.int32), v, s)
    held = load > 1e-6
    return key[held], node[held], load[held]


def _reference_after(name, loads, n_nodes, tolerance):
    out = REFERENCES[name][2](
        Parts(loads.key.copy(), loads.node.copy(), loads.load.copy(), loads.state.copy()),
        n_nodes,
        tolerance,
    )
    key, node, load = aggregate_parts(out.key, out.node, out.load)
    held = load > 1e-6
    return key[held], node[held], load[held]


def _same(a, b):
    return (
        np.array_equal(a[0], b[0])
        and np.array_equal(a[1], b[1])
        and np.allclose(a[2], b[2], rtol=1e-9, atol=1e-6)
    )


@st.composite
def hashed_windows(draw):
    n_nodes = draw(st.integers(2, 8))
    n_keys = draw(st.integers(1, 40))
    keys = np.array(
        draw(st.lists(st.integers(0, 10**6), min_size=n_keys, max_size=n_keys, unique=True)),
        dtype=np.int64,
    )
    load = np.array(
        draw(st.lists(st.integers(1, 1000), min_size=n_keys, max_size=n_keys)), dtype=float
    )
    state = np.array(
        draw(st.lists(st.integers(0, 3000), min_size=n_keys, max_size=n_keys)), dtype=float
    )
    scale = draw(st.lists(st.floats(0.5, 2.0), min_size=n_keys, max_size=n_keys))
    tolerance = draw(st.sampled_from([0.01, 0.05, 0.2]))
    return KeyLoads(keys, home_nodes(keys, n_nodes), load, state), n_nodes, tolerance, scale


@pytest.mark.parametrize("name", sorted(REFERENCES))
@settings(max_examples=200, deadline=None)
@given(window=hashed_windows())
def test_same_decisions_as_reference(name, window):
    loads, n_nodes, tolerance, scale = window
    strategy_name, settings_, _ = REFERENCES[name]
    strategy = get_strategy(strategy_name, n_nodes=n_nodes, **settings_)  # hash placement
    plan = strategy.plan(loads, n_nodes=n_nodes, tolerance=tolerance)
    assert _same(_after_parts(loads, plan), _reference_after(name, loads, n_nodes, tolerance))
    # Next window: the placement the plan left, with every part's load drifted.
    key, node, load = _after_parts(loads, plan)
    drift = np.array(scale)[np.searchsorted(np.unique(key), key)]
    second = KeyLoads(key, node, np.maximum(np.rint(load * drift), 1.0), np.rint(load))
    plan2 = strategy.plan(second, n_nodes=n_nodes, tolerance=tolerance)
    assert _same(_after_parts(second, plan2), _reference_after(name, second, n_nodes, tolerance))
