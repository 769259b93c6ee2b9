"""A join operator's predicate in Spark SQL (``spark.join_keys``): the candidate keys a
tuple of either side meets and the oracle's condition agree with the operator's key
range, for equality, the band join and an asymmetric range (no such operator is
registered: it stands for the next windowed join)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from pyspark.sql import functions as F

from balancebench.core.operators import BAND_JOIN, EQUI_JOIN, Operator
from balancebench.spark.join_keys import candidate_keys, match_condition, n_candidates

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class _Lag(Operator):
    """An S tuple meets the R tuples of keys ``k_s - band_width .. k_s``."""

    def key_offsets(self, band_width: int) -> tuple[int, int]:
        return (0, band_width)


LAG = _Lag("lag_join", aggregates=False)


def _pairs_by_numpy(r: np.ndarray, s: np.ndarray, lo: int, hi: int) -> set[tuple[int, int]]:
    return {(int(a), int(b)) for a in r for b in s if lo <= b - a <= hi}


@pytest.mark.parametrize(
    ("operator", "lo", "hi"), [(EQUI_JOIN, 0, 0), (BAND_JOIN, -2, 2), (LAG, 0, 2)]
)
def test_candidate_keys_and_the_oracle_condition_find_the_pairs_of_the_key_range(
    spark, operator, lo, hi
):
    rng = np.random.default_rng(3)
    r_keys, s_keys = rng.integers(0, 12, 40), rng.integers(0, 12, 40)
    rows = [("R", i, int(k)) for i, k in enumerate(r_keys)]
    rows += [("S", 100 + i, int(k)) for i, k in enumerate(s_keys)]
    df = spark.createDataFrame(rows, "side string, tuple_id long, key long")
    want = _pairs_by_numpy(r_keys, s_keys, lo, hi)
    assert operator.key_offsets(2) == (lo, hi) and n_candidates(operator, 2) == hi - lo + 1
    # Probes of both sides (one column of sides), as the engine's node join probes.
    probes = df.withColumn("_match", candidate_keys(operator, F.col("side"), 2))
    found = set()
    for own, other in (("R", "S"), ("S", "R")):
        p = probes.where(F.col("side") == own).alias("p")
        o = df.where(F.col("side") == other).alias("o")
        for row in (
            p.join(o, F.col("p._match") == F.col("o.key")).select("p.key", "o.key").collect()
        ):
            pk, ok = row[0], row[1]
            found.add((pk, ok) if own == "R" else (ok, pk))
    assert found == want and want
    # The oracle's plain join on the condition.
    r, s = df.where(F.col("side") == "R").alias("r"), df.where(F.col("side") == "S").alias("s")
    cond = match_condition(operator, F.col("r.key"), F.col("s.key"), 2)
    got = {(a, b) for a, b in r.join(s, cond).select("r.key", "s.key").collect()}
    assert got == want
