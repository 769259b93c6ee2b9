"""The stateful operators a workload runs, as objects: the one registry of operators.

What differs between an aggregation, an equi-join and a band join is said here once, and
the engine, the baselines, the routers, the strategies and the oracle ask the operator
(``workload.operator``) instead of comparing its name:

- **state and answer** (``aggregates``): an aggregation keeps partial counts per key and
  answers ``(key, count)`` per window; a join stores the tuples of two sides and answers
  the batch's new pairs ``(r_id, s_id)``;
- **join predicate** (``key_offsets``): an R tuple of key ``k`` meets the S tuples whose
  keys are ``k + lo .. k + hi``: ``(0, 0)`` for an equi-join, ``(-band_width,
  band_width)`` for a band join. The engine, the baselines and the oracle join on it
  (``spark.join_keys``), the routers send a tuple within its reach (``key_reach``);
- **split keys** (``two_stream_rule``): MNRT's two-stream rule (paper 000 §4.2: a split
  key stores one side where it is split and replicates the other to the parts) serves
  equality only; a band join's candidate keys need the other side's parts whole.

- **time window** (``slide_batches``, ``time_bounds``: data, not code): with the Param
  ``window_s > 0`` an aggregation counts over a :class:`Window` of
  ``ceil(window_s / interval)`` batches that slides by ``slide_batches`` (1: after every
  batch; None: tumbling, the slide is the size); a join pairs an R and an S tuple whose
  event times lie within :class:`TimeBounds` (``time_bounds`` in units of ``window_s``:
  ``(-1, 1)`` is ``|t_r - t_s| <= window_s``). Everything else is derived from these two:
  the window each batch answers and what the state may drop (``Window.first_batch``), the
  join's condition and its state horizon (``TimeBounds.holds``, ``TimeBounds.horizon``),
  and the range of Spark's streaming join. The engine, the Spark-native baselines and the
  oracle all take them through ``EngineConfig``, so they cannot disagree.

A new operator is an ``Operator`` (or ``BandJoin``) with its data, registered in
``OPERATORS``, and a workload that runs it (``workloads.py``): two source files. A key
predicate other than equality or a band overrides ``key_offsets``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True)
class Window:
    """An aggregation's window in micro-batches, as Flink's
    ``SlidingEventTimeWindows.of(size, slide)`` and Spark's ``window(col, size, slide)``:
    windows start at every multiple of ``slide_batches`` (batch 0 included, earlier ones
    too) and hold ``size_batches`` batches. After batch ``b`` the answer is the oldest
    window still open: its counts so far (complete at its last batch; a tumbling window's
    running count before that, as Spark's update mode shows it)."""

    size_batches: int
    slide_batches: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.slide_batches <= self.size_batches:
            # Spark's window() refuses it too: batches between windows would count nowhere.
            raise ValueError(
                f"window_s: a window of {self.size_batches} batch(es) sliding by "
                f"{self.slide_batches}; allowed: window_s of at least {self.slide_batches} "
                "batch interval(s), the operator's slide"
            )

    def first_batch(self, b: int) -> int:
        """The first batch of the window answered after batch ``b``: the oldest window
        holding ``b``. Never decreases with ``b``, so nothing older is needed again: the
        state's eviction and the streaming table's both derive from it."""
        oldest = b - self.size_batches + 1
        return oldest + (-oldest) % self.slide_batches


@dataclass(frozen=True)
class TimeBounds:
    """A join's time condition, as Flink's ``intervalJoin(...).between(lower, upper)``:
    an R tuple at ``t_r`` meets an S tuple at ``t_s`` when
    ``lower_s <= t_s - t_r <= upper_s``."""

    lower_s: float
    upper_s: float

    def holds(self, t_r: Any, t_s: Any) -> Any:
        """The condition, written so that one expression serves Spark columns, numpy
        arrays and plain numbers alike (``t_r - t_s`` is exactly ``-(t_s - t_r)``)."""
        return (t_r - t_s <= -self.lower_s) & (t_s - t_r <= self.upper_s)

    @property
    def reach_s(self) -> float:
        """How far back in event time a tuple of either side meets the other side."""
        return max(self.upper_s, -self.lower_s)

    def horizon(self, b: int, interval_s: float) -> float:
        """The oldest event time a join must still hold after batch ``b``: batch
        ``b + 1`` starts at ``(b + 1) * interval_s``, and its tuples meet nothing older
        than :attr:`reach_s` before that (:meth:`holds`)."""
        return (b + 1) * interval_s - self.reach_s


@dataclass(frozen=True)
class Operator:
    name: str
    #: Partial counts per key, answered ``(key, count)``; else a join of two sides.
    aggregates: bool
    #: An aggregation's window slides by this many batches (None: tumbling, by its size).
    slide_batches: int | None = 1
    #: A join's ``(lower, upper)``, in units of the Param ``window_s``: an R tuple at
    #: ``t_r`` meets an S tuple at ``t_s`` when ``lower <= (t_s - t_r) / window_s <= upper``.
    time_bounds: tuple[float, float] = (-1.0, 1.0)

    def __post_init__(self) -> None:
        if self.slide_batches is not None and self.slide_batches < 1:
            raise ValueError(f"slide_batches: {self.slide_batches}; allowed: at least 1 or None")
        lower, upper = self.time_bounds
        if not lower <= upper:
            raise ValueError(f"time_bounds: {self.time_bounds}; allowed: lower <= upper")

    def __str__(self) -> str:
        return self.name

    @property
    def is_join(self) -> bool:
        return not self.aggregates

    def key_offsets(self, band_width: int) -> tuple[int, int]:
        """The join predicate as a key range: an R tuple of key ``k`` meets the S tuples
        of keys ``k + lo .. k + hi`` (an equi-join: ``(0, 0)``)."""
        return (0, 0)

    @property
    def uses_band_width(self) -> bool:
        """Whether the Param ``band_width`` changes this operator's predicate."""
        return self.key_offsets(1) != self.key_offsets(2)

    @property
    def equality(self) -> bool:
        """Whether a tuple meets only tuples of its own key."""
        return self.key_offsets(1) == (0, 0) and self.key_offsets(2) == (0, 0)

    @property
    def two_stream_rule(self) -> bool:
        """Whether a split key may replicate one side to the other's parts (MNRT)."""
        return self.is_join and self.equality

    @property
    def answer_columns(self) -> list[str]:
        """The columns of a batch's answer, as the oracle compares it."""
        return ["key", "count"] if self.aggregates else ["r_id", "s_id"]

    @property
    def answer_rows(self) -> str:
        """What a row of the answer is, in words."""
        return "keys" if self.aggregates else "new pairs"

    def key_reach(self, band_width: int) -> int:
        """How far from its own key a tuple of either side matches (0 = its own key)."""
        lo, hi = self.key_offsets(band_width)
        return max(-lo, hi)

    def window(self, interval_s: float, window_s: float) -> Window | None:
        """An aggregation's window for batches of ``interval_s`` (None: the whole
        history): ``ceil(window_s / interval_s)`` batches (at least one), sliding by
        ``slide_batches``."""
        if window_s <= 0 or not self.aggregates:
            return None
        size = max(1, math.ceil(window_s / interval_s - 1e-9))
        return Window(size, size if self.slide_batches is None else self.slide_batches)

    def bounds(self, window_s: float) -> TimeBounds | None:
        """A join's time condition in seconds (None: the whole history meets)."""
        if window_s <= 0 or self.aggregates:
            return None
        lower, upper = self.time_bounds
        return TimeBounds(lower * window_s, upper * window_s)


@dataclass(frozen=True)
class BandJoin(Operator):
    """Pairs with ``|k_r - k_s| <= band_width``."""

    def key_offsets(self, band_width: int) -> tuple[int, int]:
        return (-band_width, band_width)


AGGREGATE: Final = Operator("aggregate", aggregates=True)
EQUI_JOIN: Final = Operator("equi_join", aggregates=False)
BAND_JOIN: Final = BandJoin("band_join", aggregates=False)
#: name -> operator: every operator a workload may run and a strategy may serve.
OPERATORS: Final[dict[str, Operator]] = {o.name: o for o in (AGGREGATE, EQUI_JOIN, BAND_JOIN)}
JOINS: Final[frozenset[Operator]] = frozenset(o for o in OPERATORS.values() if o.is_join)
AGGREGATIONS: Final[frozenset[Operator]] = frozenset(o for o in OPERATORS.values() if o.aggregates)


def names(operators: frozenset[Operator]) -> list[str]:
    """Operator names, sorted, for messages."""
    return sorted(o.name for o in operators)
