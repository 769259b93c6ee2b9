"""The time window each operator owns (``Operator.in_window``, ``state_horizon``,
``window_batches``): the one rule the engine, the baselines and the oracle take."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from balancebench.core.operators import AGGREGATE, OPERATORS, Operator

times = st.floats(0, 100, allow_nan=False)
windows = st.floats(0.001, 50, allow_nan=False)
#: The operators that keep the default time rule (a new one may have its own).
SYMMETRIC = [o for o in OPERATORS.values() if type(o).in_window is Operator.in_window]


@given(t_r=times, t_s=times, window_s=windows)
def test_a_pair_is_in_the_window_when_its_event_times_are_at_most_the_window_apart(
    t_r, t_s, window_s
):
    for operator in SYMMETRIC:
        assert operator.in_window(t_r, t_s, window_s) == (abs(t_r - t_s) <= window_s)
        assert operator.in_window(t_r, t_s, window_s) == operator.in_window(t_s, t_r, window_s)


def test_the_window_rule_is_one_expression_for_arrays_as_for_numbers():
    t_r = np.array([0.0, 1.0, 2.5, 4.0])
    t_s = np.array([1.0, 1.0, 1.0, 1.0])
    inside = OPERATORS["band_join"].in_window(t_r, t_s, 1.5)
    assert inside.tolist() == [True, True, True, False]


def test_no_window_means_the_whole_history():
    for operator in OPERATORS.values():
        assert operator.in_window(1.0, 1e9, 0.0) is None
        assert operator.state_horizon(7, 0.5, 0.0) is None
        assert operator.window_batches(0.5, 0.0) is None


@given(b=st.integers(0, 50), interval_s=st.floats(0.1, 5), window_s=windows, gap=times)
def test_what_the_horizon_drops_no_later_tuple_can_meet(b, interval_s, window_s, gap):
    # Given the horizon after batch b: the next batch starts at (b + 1) * interval_s
    for operator in OPERATORS.values():
        horizon = operator.state_horizon(b, interval_s, window_s)
        later = (b + 1) * interval_s + gap
        old = horizon - 1e-6 - gap
        # A tuple older than the horizon meets no tuple of batch b + 1 or later, on
        # either side ...
        assert not operator.in_window(later, old, window_s)
        assert not operator.in_window(old, later, window_s)
    for operator in SYMMETRIC:
        # ... and one just inside it still meets the first tuple of batch b + 1 (at the
        # horizon itself, the subtraction's rounding decides)
        horizon = operator.state_horizon(b, interval_s, window_s)
        assert operator.in_window((b + 1) * interval_s, horizon + 1e-7, window_s)


def test_an_aggregation_window_covers_at_least_one_batch_and_rounds_up():
    assert AGGREGATE.window_batches(1.0, 0.2) == 1
    assert AGGREGATE.window_batches(1.0, 1.0) == 1
    assert AGGREGATE.window_batches(1.0, 1.5) == 2
    assert AGGREGATE.window_batches(0.1, 0.3) == 3  # 0.3 / 0.1 is 2.9999999999999996
