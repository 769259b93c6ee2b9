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

- **time window** (``in_window``, ``state_horizon``, ``window_batches``): with the Param
  ``window_s > 0`` a join pairs tuples whose event times are at most ``window_s`` apart and
  keeps, after batch ``b``, only the tuples the next batches can still meet; an aggregation
  counts over the last ``window_batches`` batches. The engine's node join, the Spark-native
  baselines, Spark's streaming join and the oracle all take the condition from here
  (through ``EngineConfig``), so they cannot disagree; the engine and the batch-query
  baselines take the horizon too (Spark's streaming join keeps state by its own watermark,
  a range on ``window_s`` widened for its timestamps' rounding).

A new windowed join is an ``Operator`` subclass with its ``key_offsets`` (a key range) or
its ``in_window``/``state_horizon`` (a time rule), registered in ``OPERATORS``, and a
workload that runs it (``workloads.py``): two source files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True)
class Operator:
    name: str
    #: Partial counts per key, answered ``(key, count)``; else a join of two sides.
    aggregates: bool

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

    def in_window(self, t_r: Any, t_s: Any, window_s: float) -> Any:
        """The time condition on an R and an S tuple's event times (seconds):
        ``|t_r - t_s| <= window_s``; None when there is no window (``window_s <= 0``: the
        whole history meets). Written without ``abs`` so that the one expression serves
        Spark columns, numpy arrays and plain numbers alike."""
        if window_s <= 0:
            return None
        return (t_r - t_s <= window_s) & (t_s - t_r <= window_s)

    def state_horizon(self, b: int, interval_s: float, window_s: float) -> float | None:
        """The oldest event time a join must still hold after batch ``b`` (None: the
        whole history). Batch ``b + 1`` starts at ``(b + 1) * interval_s``, and its tuples
        meet nothing older than ``window_s`` before that (:meth:`in_window`)."""
        if window_s <= 0:
            return None
        return (b + 1) * interval_s - window_s

    def window_batches(self, interval_s: float, window_s: float) -> int | None:
        """An aggregation's window in batches: the last ``ceil(window_s / interval_s)``
        (at least one; None = the whole history)."""
        if window_s <= 0:
            return None
        return max(1, math.ceil(window_s / interval_s - 1e-9))


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


def names(operators: frozenset[Operator]) -> list[str]:
    """Operator names, sorted, for messages."""
    return sorted(o.name for o in operators)
