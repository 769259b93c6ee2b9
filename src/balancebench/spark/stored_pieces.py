"""A join node's stored tuples as pieces (:class:`Piece`): written once, merged like a binary
counter (:func:`merge_pieces`), released when no remaining piece is built on them, and the
rows a migration sent away dropped from them (:func:`drop_gone`, by the migration unit).
:class:`~balancebench.spark.node_state.StoredTuples` keeps its state in them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench.core.hashing import FRACTION_UNITS
from balancebench.spark.loop import release
from balancebench.spark.routers import KEEPS

#: Salt of the tuple-id hash that picks which stored tuples of a part migrate (distinct
#: from the storage-routing salt, so migration does not follow storage decisions).
MIGRATION_SALT = 0x316A7E


SIDES = ("R", "S")


@dataclass
class Piece:
    """Stored join tuples of one side, kept on their nodes (partition ``i`` = node
    ``i``) and written once: a batch's stored rows are the rows its node stage received
    (kept as it read them); a merge writes its result in the node stage of the batch
    that needs it. ``newest_batch`` bounds their event times (for window expiry);
    ``span`` counts the batch pieces merged into it. One side per piece: a probe of side R
    scans only the stored S tuples (measured on eq5: with both sides in one piece, every
    probe join read the whole history, the big side's included, and filtered it row by
    row).

    A migration does not rewrite a piece: the rows it moved away are *gone* from it,
    listed as segments ``(key, node, [lo, hi))`` of the migration unit of ``tuple_id``
    (:func:`migration_unit`); a probe's pairs with a gone row are dropped after the join
    (work that grows with the pairs, not with the piece), and a merge leaves gone rows
    behind."""

    newest_batch: int
    side: str
    #: The stored rows (``BATCH_COLUMNS``, ``node``, ``_surrogate``).
    frame: DataFrame
    #: What holds them in memory (released once no piece is built on it).
    base: DataFrame
    span: int = 1
    #: The batch whose node stage wrote ``base``.
    written_in: int = -1
    #: How ``frame`` is read from ``base`` (None: it is ``base``).
    view: Callable[[DataFrame], DataFrame] | None = None
    #: Gone rows: per segment the key, node and unit range ``[lo, hi)``.
    gone_key: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    gone_node: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    gone_lo: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    gone_hi: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def rebase(self, base: DataFrame) -> None:
        """The same rows held by another copy (reliable files instead of memory)."""
        self.base = base
        self.frame = base if self.view is None else self.view(base)

    @property
    def has_gone(self) -> bool:
        return len(self.gone_key) > 0

    def forget(self, key: np.ndarray, node: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> None:
        """Rows that left the piece (segments as in the class docstring)."""
        self.gone_key = np.r_[self.gone_key, key].astype(np.int64)
        self.gone_node = np.r_[self.gone_node, node].astype(np.int32)
        self.gone_lo = np.r_[self.gone_lo, lo].astype(np.int64)
        self.gone_hi = np.r_[self.gone_hi, hi].astype(np.int64)

    def gone_table(self, spark: SparkSession, tag: int = 0) -> DataFrame:
        """The gone segments as a small table (``_gk, _gn, _glo, _ghi``, piece ``_gp``)."""
        return spark.createDataFrame(
            pa.table(
                {
                    "_gp": pa.array(np.full(len(self.gone_key), tag, np.int32)),
                    "_gk": pa.array(self.gone_key),
                    "_gn": pa.array(self.gone_node),
                    "_glo": pa.array(self.gone_lo),
                    "_ghi": pa.array(self.gone_hi),
                }
            )
        )

    def live(self, spark: SparkSession) -> DataFrame:
        """The rows still in the piece (the gone ones left out)."""
        if not self.has_gone:
            return self.frame
        return drop_gone(self.frame, self.gone_table(spark))


def kept_view(side: str) -> Callable[[DataFrame], DataFrame]:
    """A batch's new piece of ``side``: the rows its nodes received and keep."""

    def view(received: DataFrame) -> DataFrame:
        keeps = F.col("role").isin(*KEEPS) & (F.col("side") == side)
        return received.where(keeps).drop("role")

    return view


def migration_unit(tuple_id: str = "tuple_id") -> Column:
    """``pmod(hash(tuple_id, MIGRATION_SALT), 2^20)``: which stored tuples of a part move."""
    salted = F.hash(F.col(tuple_id), F.lit(MIGRATION_SALT).cast("bigint"))
    return F.pmod(salted, F.lit(FRACTION_UNITS))


def drop_gone(rows: DataFrame, gone: DataFrame, piece: Column | None = None) -> DataFrame:
    """``rows`` without those in a gone segment (of their piece, when ``piece`` is given)."""
    unit = migration_unit()
    cond = (
        (F.col("key") == F.col("_gk"))
        & (F.col("node") == F.col("_gn"))
        & (unit >= F.col("_glo"))
        & (unit < F.col("_ghi"))
    )
    if piece is not None:
        cond = cond & (piece == F.col("_gp"))
    return rows.join(F.broadcast(gone), cond, "left_anti")


def release_pieces(dropped: list[Piece], remaining: list[Piece]) -> None:
    """Free what holds the dropped pieces, unless a remaining piece is built on it (a
    batch's two side pieces share its received rows)."""
    still = {id(p.base) for p in remaining}
    freed: set[int] = set()
    for p in dropped:
        if id(p.base) not in still and id(p.base) not in freed:
            release(p.base)
            freed.add(id(p.base))


def merge_pieces(pieces: list[Piece]) -> int:
    """How many of the newest pieces to merge into one (0: none), as a binary counter
    over ``span``: the two newest merge when their spans are equal, and the result
    merges on while it equals the span of the piece before it (one write for the whole
    cascade). A node then scans O(log batches) pieces per batch instead of one per batch
    (measured: every extra piece costs each node task about 2 ms, whatever its size),
    and each stored tuple is rewritten O(log batches) times."""
    if len(pieces) < 2 or pieces[-1].span != pieces[-2].span:
        return 0
    merged, first = pieces[-1].span, len(pieces) - 1
    while first > 0 and pieces[first - 1].span == merged:
        merged += pieces[first - 1].span
        first -= 1
    return len(pieces) - first


def union_frames(frames: list[DataFrame]) -> DataFrame | None:
    return reduce(lambda a, b: a.unionByName(b), frames) if frames else None


def partitions_of(df: DataFrame) -> int:
    """Partitions of ``df``'s rows, from its physical plan: its output partitioning's count
    where Spark knows it (as its planner does when it matches partitionings), else the
    count of the plan's RDD. Building that RDD runs the plan's broadcasts, and the batch's
    job, planned anew, runs them again (a routing table's broadcast ran twice a batch)."""
    plan = df._jdf.queryExecution().executedPlan()
    known = int(plan.outputPartitioning().numPartitions())
    if known > 0:
        return known
    return int(df._jdf.queryExecution().toRdd().getNumPartitions())
