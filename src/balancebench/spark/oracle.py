"""The correctness oracle: every batch's answer against plain Spark SQL on the raw tuples.

:func:`expected_answer` is the reference computation: ``groupBy(key).count()`` over the
window for an aggregation; for a join, the pairs of all tuples so far whose later tuple
is in the batch. :func:`check_batch` compares a batch's answer with it as a multiset: no
tuple lost, none extra, none duplicated.

Why a fingerprint first. The reference depends only on the replay stream, the operator's
settings and the batch, not on the strategy, and every run of a sweep's cell group
replays the same stream in one application. So the reference of each batch is computed
once per loaded stream (one Spark job; TOPK's expected top list a second) and kept as
its multiset fingerprint: the row count and two exact sums of 64-bit hashes of every row
(``xxhash64`` of the row, and of the row with a salt). Each run's check is then one job
over the answer its node stage already kept. Two multisets with equal count and equal
sums of two independent 64-bit hashes differ with probability about 2^-128. (Measured on
a 4-batch EQ5 run with 16 nodes: the per-batch full join of answer and reference cost
2.7 s of the run's harness.) When the fingerprints differ, the full comparison runs to
say how many rows differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from balancebench.spark.join_keys import match_condition
from balancebench.spark.replay_stream import kept_with

#: The salt of the second row hash (any constant other than none: an independent hash).
_SECOND_HASH_SALT = 0x5BD1E995


@dataclass(frozen=True)
class Fingerprint:
    """A multiset of rows: its size and two exact sums of independent 64-bit row hashes."""

    rows: int
    hash_sum: int
    salted_hash_sum: int


@dataclass(frozen=True)
class Reference:
    """Batch ``b``'s expected answer, as the check needs it."""

    fingerprint: Fingerprint
    #: TOPK: the expected top list (equal multisets have equal top lists); else None.
    top: list[tuple[int, int]] | None


def expected_answer(stream: DataFrame, config: Any, b: int) -> DataFrame:
    """Plain Spark SQL over the raw tuples: what batch ``b`` must produce.

    Aggregation: ``(key, count)`` over the window's batches. Join: the pairs
    ``(r_id, s_id)`` of all tuples so far whose later tuple is in batch ``b``.
    """
    if config.workload.operator.aggregates:
        first = config.first_window_batch(b)
        window = stream.where((F.col("batch") >= first) & (F.col("batch") <= b))
        return window.groupBy("key").agg(F.count(F.lit(1)).alias("count"))
    upto = stream.where(F.col("batch") <= b)
    r = upto.where(F.col("side") == "R").alias("r")
    s = upto.where(F.col("side") == "S").alias("s")
    cond = match_condition(
        config.workload.operator, F.col("r.key"), F.col("s.key"), config.band_width
    )
    in_window = config.in_window(F.col("r.event_time_s"), F.col("s.event_time_s"))
    if in_window is not None:
        cond = cond & in_window
    cond = cond & (F.greatest(F.col("r.batch"), F.col("s.batch")) == b)
    return r.join(s, cond).select(
        F.col("r.tuple_id").alias("r_id"), F.col("s.tuple_id").alias("s_id")
    )


def _columns(config: Any) -> list[str]:
    return config.workload.operator.answer_columns


def _is_topk(config: Any) -> bool:
    """The answer shown is a top list (TOPK), not a row count."""
    return config.workload.operator.aggregates and bool(config.workload.top_k)


def _rows(df: DataFrame, cols: list[str]) -> DataFrame:
    """The answer's columns, typed alike on both sides (a row's hash depends on its types)."""
    return df.select(*[F.col(c).cast("bigint").alias(c) for c in cols])


def fingerprint(df: DataFrame, cols: list[str]) -> Fingerprint:
    """``df``'s rows over ``cols`` as a :class:`Fingerprint`: one Spark job."""
    rows = _rows(df, cols)
    exact = "decimal(38,0)"  # 2^63 per row: exact for up to ~10^19 rows, no wrap-around
    first = F.xxhash64(*[F.col(c) for c in cols]).cast(exact)
    second = F.xxhash64(F.lit(_SECOND_HASH_SALT), *[F.col(c) for c in cols]).cast(exact)
    row = rows.agg(
        F.count(F.lit(1)).alias("rows"), F.sum(first).alias("h1"), F.sum(second).alias("h2")
    ).collect()[0]
    return Fingerprint(int(row["rows"]), int(row["h1"] or 0), int(row["h2"] or 0))


def reference(stream: DataFrame, config: Any, b: int) -> Reference:
    """Batch ``b``'s reference, computed on first use for this stream and these operator
    settings, then kept with the stream."""
    key = (
        config.workload.operator,
        _is_topk(config),
        config.top_k,
        config.window,
        config.bounds,
        config.band_width,
        b,
    )
    kept = kept_with(stream, "oracle_references")  # by (operator settings, batch)
    if key not in kept:
        expected = expected_answer(stream, config, b)
        top = _topk(_rows(expected, _columns(config)), config.top_k) if _is_topk(config) else None
        kept[key] = Reference(fingerprint(expected, _columns(config)), top)
    return kept[key]


def check_batch(stream: DataFrame, config: Any, b: int, answer: DataFrame) -> tuple[bool, int, Any]:
    """The correctness oracle of batch ``b``: ``answer`` (aggregation ``(key, count)``;
    join ``(r_id, s_id)``) equals :func:`expected_answer` as a multiset. Returns
    ``(passed, result_rows, what to show)`` (TOPK: the top list).

    One Spark job over ``answer`` (its fingerprint) once the batch's reference is known
    (:func:`reference`); on a mismatch, :func:`_differences` says what differs."""
    cols = _columns(config)
    ref = reference(stream, config, b)
    got = fingerprint(answer, cols)
    what = config.workload.operator.answer_rows
    if got == ref.fingerprint:
        if ref.top is not None:
            return True, len(ref.top), ref.top
        return True, got.rows, f"{got.rows} {what}"
    rows, want, differ = _differences(stream, config, b, answer)
    if ref.top is not None:
        top = _topk(_rows(answer, cols), config.top_k)
        return False, len(top), f"{differ} keys differ; top {top}"
    return False, rows, f"{rows} {what}, expected {want}; {differ} differ"


def _differences(stream: DataFrame, config: Any, b: int, answer: DataFrame) -> tuple[int, int, int]:
    """``(answer rows, expected rows, rows whose multiplicities differ)``: the answer and
    the reference, each grouped by its columns with a multiplicity, full-outer joined; a
    row whose multiplicities differ is a lost, extra or duplicated tuple."""
    cols = _columns(config)
    mine = _rows(answer, cols).groupBy(*cols).agg(F.count(F.lit(1)).alias("_got"))
    theirs = (
        _rows(expected_answer(stream, config, b), cols)
        .groupBy(*cols)
        .agg(F.count(F.lit(1)).alias("_want"))
    )
    diff = mine.join(theirs, cols, "full").select(
        F.coalesce(F.col("_got"), F.lit(0)).alias("_got"),
        F.coalesce(F.col("_want"), F.lit(0)).alias("_want"),
    )
    row = diff.agg(
        F.sum("_got").alias("rows"),
        F.sum("_want").alias("expected"),
        F.sum((F.col("_got") != F.col("_want")).cast("long")).alias("differ"),
    ).collect()[0]
    return int(row["rows"] or 0), int(row["expected"] or 0), int(row["differ"] or 0)


def _topk(df: DataFrame, k: int) -> list[tuple[int, int]]:
    rows = df.orderBy(F.col("count").desc(), F.col("key").asc()).limit(k).collect()
    return [(int(r["key"]), int(r["count"])) for r in rows]
