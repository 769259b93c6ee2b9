"""A join operator's predicate in Spark SQL (``Operator.key_offsets``), for the engine's
node join, the Spark-native baselines and the oracle alike.

An R tuple of key ``k`` meets the S tuples of keys ``k + lo .. k + hi``; so an S tuple of
key ``k`` meets the R tuples of keys ``k - hi .. k - lo``.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from balancebench.core.operators import Operator


def offsets_for(operator: Operator, side: str, band_width: int) -> tuple[int, int]:
    """The keys of the other side a tuple of ``side`` meets, as offsets from its key."""
    lo, hi = operator.key_offsets(band_width)
    return (lo, hi) if side == "R" else (-hi, -lo)


def candidate_keys(operator: Operator, side: str | Column, band_width: int) -> Column:
    """The other side's keys a tuple meets: its ``key`` (equality) or, exploded, one row
    per candidate key. ``side`` is the tuples' side, or a column of it (rows of both)."""
    key = F.col("key")
    if operator.key_offsets(band_width) == (0, 0):
        return key

    def keys(of_side: str) -> Column:
        lo, hi = offsets_for(operator, of_side, band_width)
        return F.sequence(key + lo, key + hi)

    if isinstance(side, str):
        return F.explode(keys(side))
    r_keys, s_keys = keys("R"), keys("S")
    if operator.key_offsets(band_width) == offsets_for(operator, "S", band_width):
        return F.explode(r_keys)  # symmetric: both sides meet the same keys
    return F.explode(F.when(side == "R", r_keys).otherwise(s_keys))


def n_candidates(operator: Operator, band_width: int) -> int:
    """Candidate keys per tuple (1 for equality)."""
    lo, hi = operator.key_offsets(band_width)
    return hi - lo + 1


def match_condition(operator: Operator, r_key: Column, s_key: Column, band_width: int) -> Column:
    """The predicate on an R and an S key (the oracle's plain join)."""
    lo, hi = operator.key_offsets(band_width)
    if (lo, hi) == (0, 0):
        return r_key == s_key
    if lo == -hi:  # symmetric: |k_r - k_s| <= hi
        return F.abs(r_key - s_key) <= hi
    return (s_key - r_key >= lo) & (s_key - r_key <= hi)
