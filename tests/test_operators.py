"""The window each operator owns, as data (``Operator.slide_batches``,
``Operator.time_bounds``) and what is derived from it (``Window.first_batch``,
``TimeBounds.holds``, ``TimeBounds.horizon``): the one rule the engine, the baselines and
the oracle take."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from balancebench.core.operators import (
    AGGREGATE,
    AGGREGATIONS,
    BAND_JOIN,
    JOINS,
    OPERATORS,
    Operator,
    Window,
)
from balancebench.strategies import STRATEGIES

times = st.floats(0, 100, allow_nan=False)
windows = st.floats(0.001, 50, allow_nan=False)
bounds = st.tuples(st.floats(-2, 2), st.floats(-2, 2)).map(sorted).map(tuple)
#: The registered joins keep the symmetric default (a new one may have its own bounds).
SYMMETRIC = [o for o in JOINS if o.time_bounds == (-1.0, 1.0)]


@given(t_r=times, t_s=times, window_s=windows)
def test_a_pair_is_in_the_window_when_its_event_times_are_at_most_the_window_apart(
    t_r, t_s, window_s
):
    assert SYMMETRIC
    for operator in SYMMETRIC:
        rule = operator.bounds(window_s)
        assert rule.holds(t_r, t_s) == (abs(t_r - t_s) <= window_s)
        assert rule.holds(t_r, t_s) == rule.holds(t_s, t_r)


def test_the_window_rule_is_one_expression_for_arrays_as_for_numbers():
    t_r = np.array([0.0, 1.0, 2.5, 4.0])
    t_s = np.array([1.0, 1.0, 1.0, 1.0])
    inside = BAND_JOIN.bounds(1.5).holds(t_r, t_s)
    assert inside.tolist() == [True, True, True, False]


def test_no_window_means_the_whole_history():
    for operator in OPERATORS.values():
        assert operator.bounds(0.0) is None
        assert operator.window(0.5, 0.0) is None
    # a window belongs to its kind of operator only
    assert AGGREGATE.bounds(1.0) is None and BAND_JOIN.window(0.5, 1.0) is None


@given(b=st.integers(0, 50), interval_s=st.floats(0.1, 5), window_s=windows, gap=times, lag=bounds)
def test_what_the_horizon_drops_no_later_tuple_can_meet(b, interval_s, window_s, gap, lag):
    # Given any time bounds (symmetric or not) and the horizon after batch b: the next
    # batch starts at (b + 1) * interval_s
    rule = Operator("lagged", aggregates=False, time_bounds=lag).bounds(window_s)
    horizon = rule.horizon(b, interval_s)
    later = (b + 1) * interval_s + gap
    old = horizon - 1e-6 - gap
    # A tuple older than the horizon meets no tuple of batch b + 1 or later, on either side
    assert not rule.holds(later, old)
    assert not rule.holds(old, later)
    # ... and one just inside it still meets the first tuple of batch b + 1 on the side
    # whose bound reaches furthest back (at the horizon itself, rounding decides; a rule
    # narrower than that margin meets only near-equal times)
    if rule.upper_s - rule.lower_s > 1e-6:
        start, inside = (b + 1) * interval_s, horizon + 1e-7
        r_stored = rule.upper_s >= -rule.lower_s
        assert rule.holds(inside, start) if r_stored else rule.holds(start, inside)


def test_an_aggregation_window_covers_at_least_one_batch_and_rounds_up():
    assert AGGREGATE.window(1.0, 0.2) == Window(1, 1)
    assert AGGREGATE.window(1.0, 1.0) == Window(1, 1)
    assert AGGREGATE.window(1.0, 1.5) == Window(2, 1)
    assert AGGREGATE.window(0.1, 0.3) == Window(3, 1)  # 0.3 / 0.1 is 2.9999999999999996


def test_a_tumbling_operator_slides_by_its_size():
    tumbling = Operator("tumbling", aggregates=True, slide_batches=None)
    assert tumbling.window(1.0, 3.0) == Window(3, 3)


def _windows_holding(b: int, window: Window) -> list[int]:
    """The first batches of every window (start a multiple of the slide) holding ``b``."""
    starts = range(b - window.size_batches + 1, b + 1)
    return [s for s in starts if s % window.slide_batches == 0]


@given(b=st.integers(-3, 60), size=st.integers(1, 7), slide=st.integers(1, 7))
def test_each_batch_answers_the_oldest_window_that_holds_it(b, size, slide):
    if slide > size:
        with pytest.raises(ValueError, match="window_s"):
            Window(size, slide)
        return
    window = Window(size, slide)
    first = window.first_batch(b)
    assert first == min(_windows_holding(b, window))
    # the state may drop what the window no longer holds: no later batch needs it
    assert window.first_batch(b + 1) >= first


def test_a_tumbling_window_restarts_at_every_multiple_of_its_size():
    window = Window(3, 3)
    assert [window.first_batch(b) for b in range(7)] == [0, 0, 0, 3, 3, 3, 6]
    sliding = Window(3, 2)
    assert [sliding.first_batch(b) for b in range(6)] == [-2, 0, 0, 2, 2, 4]


def test_bad_window_data_is_refused_naming_the_field():
    with pytest.raises(ValueError, match="slide_batches"):
        Operator("x", aggregates=True, slide_batches=0)
    with pytest.raises(ValueError, match="time_bounds"):
        Operator("x", aggregates=False, time_bounds=(1.0, -1.0))


def test_the_operator_kinds_are_derived_from_the_registry():
    assert frozenset(OPERATORS.values()) == AGGREGATIONS | JOINS
    assert not AGGREGATIONS & JOINS
    # PKG serves every registered aggregation, so a new one needs no edit in pkg.py
    assert STRATEGIES["pkg"].operators == AGGREGATIONS
