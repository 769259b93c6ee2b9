"""The stateful operators a workload runs, as objects: the one registry of operators.

What differs between an aggregation, an equi-join and a band join is said here once, and
the engine, the baselines, the routers, the strategies and the oracle ask the operator
(``workload.operator``) instead of comparing its name:

- **state and answer** (``aggregates``): an aggregation keeps partial counts per key and
  answers ``(key, count)`` per window; a join stores the tuples of two sides and answers
  the batch's new pairs ``(r_id, s_id)``;
- **join predicate** (``band``): ``k_r = k_s``, or ``|k_r - k_s| <= band_width`` (the
  band join probes the ``2 band_width + 1`` candidate keys of a tuple);
- **split keys** (``two_stream_rule``): MNRT's two-stream rule (paper 000 §4.2: a split
  key stores one side where it is split and replicates the other to the parts) serves
  equality only; a band join's candidate keys need the other side's parts whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Operator:
    name: str
    #: Partial counts per key, answered ``(key, count)``; else a join of two sides.
    aggregates: bool
    #: Band join: pairs with ``|k_r - k_s| <= band_width``; else equality (or no join).
    band: bool = False

    def __str__(self) -> str:
        return self.name

    @property
    def is_join(self) -> bool:
        return not self.aggregates

    @property
    def two_stream_rule(self) -> bool:
        """Whether a split key may replicate one side to the other's parts (MNRT)."""
        return self.is_join and not self.band

    @property
    def answer_columns(self) -> list[str]:
        """The columns of a batch's answer, as the oracle compares it."""
        return ["key", "count"] if self.aggregates else ["r_id", "s_id"]

    @property
    def answer_rows(self) -> str:
        """What a row of the answer is, in words."""
        return "keys" if self.aggregates else "new pairs"

    def key_reach(self, band_width: int) -> int:
        """How far from its own key a tuple matches: ``band_width`` for a band join, else 0."""
        return band_width if self.band else 0


AGGREGATE: Final = Operator("aggregate", aggregates=True)
EQUI_JOIN: Final = Operator("equi_join", aggregates=False)
BAND_JOIN: Final = Operator("band_join", aggregates=False, band=True)
#: name -> operator: every operator a workload may run and a strategy may serve.
OPERATORS: Final[dict[str, Operator]] = {o.name: o for o in (AGGREGATE, EQUI_JOIN, BAND_JOIN)}
JOINS: Final[frozenset[Operator]] = frozenset(o for o in OPERATORS.values() if o.is_join)


def names(operators: frozenset[Operator]) -> list[str]:
    """Operator names, sorted, for messages."""
    return sorted(o.name for o in operators)
