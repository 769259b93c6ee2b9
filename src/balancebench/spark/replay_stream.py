"""The replay stream loaded into Spark.

:func:`load_replay` reads a workload's replay stream (``balancebench.experiment.streams``)
once per application, lays it out over the senders and caches each micro-batch apart
(:func:`batch_frame`). The engine, the join architectures and the Spark-native baselines
all read their batches from here; what a run is configured with is
:class:`~balancebench.spark.engine_config.EngineConfig`.
"""

from __future__ import annotations

import weakref
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench.spark.placement import partition_by_node


def batch_of(interval_s: float, n_batches: int) -> Column:
    """A tuple's micro-batch from its event time (same IEEE expression as
    ``replay.batch_index``)."""
    batch = F.least(F.floor(F.col("event_time_s") / F.lit(interval_s)), F.lit(n_batches - 1))
    return batch.cast("bigint")


def with_batch(df: DataFrame, interval_s: float, n_batches: int) -> DataFrame:
    """The stream with its micro-batch (:func:`batch_of`)."""
    return df.withColumn("batch", batch_of(interval_s, n_batches))


#: What is kept with a loaded replay stream while it lives, by stream frame, one place for
#: all of it (released with the stream, :func:`release_replay`): its per-batch frames
#: (``batch_frames``: views with the side as a string) and the cached rows under them
#: (``cached``), the oracle's references (``oracle_references``), the engine's
#: calibrated fixed cost (``fixed_costs``) and the loop's input counts per (batch, side)
#: and senders (``layout``).
_KEPT_WITH_STREAM: weakref.WeakKeyDictionary[DataFrame, dict[str, Any]] = (
    weakref.WeakKeyDictionary()
)


def kept_with(stream: DataFrame, what: str) -> dict[Any, Any]:
    """The cache ``what`` of a loaded stream (an empty one on first use)."""
    return _KEPT_WITH_STREAM.setdefault(stream, {}).setdefault(what, {})


def register_batches(stream: DataFrame, frames: list[DataFrame]) -> None:
    """Record ``frames[b]`` as batch ``b``'s cached tuples of ``stream``."""
    kept_with(stream, "batch_frames").update(enumerate(frames))


def batch_frame(stream: DataFrame, b: int) -> DataFrame:
    """Batch ``b``'s tuples: its own cached frame when ``stream`` came from
    ``replay_stream.load_replay`` (no literal batch index in the jobs that read it), else a
    filter on ``batch``."""
    frame = _KEPT_WITH_STREAM.get(stream, {}).get("batch_frames", {}).get(b)
    if frame is not None:
        return frame
    return stream.where(F.col("batch") == b)


def release_replay(stream: DataFrame) -> None:
    """Free a loaded replay stream's cached batches, and forget what was kept with it.
    The cached frames themselves, not the views over them that :func:`batch_frame` hands
    out (unpersisting a view frees nothing: its plan is not the cached one)."""
    for frame in _KEPT_WITH_STREAM.pop(stream, {}).get("cached", {}).values():
        frame.unpersist()
    stream.unpersist()


def load_replay(
    spark: SparkSession, replay: Any, n_batches: int, senders: int = 1
) -> tuple[DataFrame, float]:
    """The replay stream as a DataFrame with ``batch``, and the batch interval: the
    stream's event-time span / ``n_batches`` (measured from the data, so a user's file
    needs no rate: the Parquet footers' statistics where the files carry them, else one
    scan).

    The stream is spread over ``senders`` partitions, the upstream instances that route it:
    tuple ``i`` is sent by instance ``i mod senders`` (partition = sender), each instance's
    tuples in arrival order, so a batch's routing stage runs one task per sender. A
    per-sender strategy relies on that layout (``routers.PerTupleRouter``).

    Each batch's tuples are read, laid out and cached apart (:func:`batch_frame`; the
    returned stream is their union), each from the Parquet row groups its event-time range
    can hold (the footers' statistics; a generated stream is written in arrival order), so
    the stream is read about once, shuffled once and cached once. A batch's jobs read its
    own cached rows with no filter on the batch index in their code: a literal that changes
    every batch makes Spark generate new classes for every stage that holds it, and the
    first tasks run them before the JVM has compiled them (measured: 13-15 new classes a
    batch, +20-40 ms of CPU on the first two nodes' tasks of every batch). The cache holds
    the side as a small integer, not a string, so every column is a primitive and Spark
    reads the cache column by column (vectorised): with a string column, the row-by-row
    reader cost a routing stage 48 ns more per tuple for reading one more column (a
    tuple's id, which table routing hashes), measured in paired rounds on the default
    TOPK batches. Release them with :func:`release_replay`."""
    raw = _read_parquet(spark, replay.files, replay.columns.values())
    sides = list(replay.sides)
    types = {"tuple_id": "bigint", "key": "bigint", "event_time_s": "double", "payload": "bigint"}
    cols = [_side_code(replay.columns["side"], sides).alias(SIDE_CODE)]
    for name, cast in types.items():
        source = replay.columns[name]
        value = F.lit(source[1:]) if source.startswith("=") else F.col(source)
        cols.append(value.cast(cast).alias(name))
    df = raw.select(*cols)
    span = _footer_max(replay.files, replay.columns["event_time_s"])
    if span is None:
        span = df.agg(F.max("event_time_s")).collect()[0][0]
    span = float(span or 0.0)
    interval = span / n_batches if span > 0 else 1.0
    batched = with_batch(df, interval, n_batches)
    sender = F.pmod(F.col("tuple_id"), F.lit(senders)).cast("int")
    frames = []
    kept: dict[int, DataFrame] = {}
    for b in range(n_batches):
        part = batched.where(_time_range(b, interval, n_batches) & (F.col("batch") == b))
        placed = partition_by_node(part.withColumn("_sender", sender), senders, "_sender")
        cached = placed.sortWithinPartitions("tuple_id").drop("_sender", "_surrogate").persist()
        cached.write.format("noop").mode("overwrite").save()
        kept[b] = cached
        frames.append(_with_side(cached, sides))
    out = reduce(lambda a, b: a.unionByName(b), frames)
    register_batches(out, frames)
    kept_with(out, "cached").update(kept)
    return out, interval


#: The cached side column: the side's index in the stream's ``sides``.
SIDE_CODE = "_side"


def _side_code(source: str, sides: list[str]) -> Column:
    """The side's index in ``sides`` (a byte), from its column or ``=literal``."""
    if source.startswith("="):
        return F.lit(sides.index(source[1:])).cast("tinyint")
    code = F.lit(None).cast("tinyint")
    for i, side in reversed(list(enumerate(sides))):
        code = F.when(F.col(source) == F.lit(side), F.lit(i).cast("tinyint")).otherwise(code)
    return code


def _with_side(cached: DataFrame, sides: list[str]) -> DataFrame:
    """The cached rows with ``side`` as its string again (a literal for a one-side stream:
    the cache's code is then never read)."""
    if len(sides) == 1:
        side = F.lit(sides[0])
    else:
        side = F.element_at(F.array(*[F.lit(x) for x in sides]), F.col(SIDE_CODE).cast("int") + 1)
    rest = [c for c in cached.columns if c != SIDE_CODE]
    return cached.select(side.alias("side"), *rest)


def _time_range(b: int, interval: float, n_batches: int) -> Column:
    """A range of event times that holds every tuple of batch ``b`` (:func:`batch_of`),
    a little wider than the batch on each side (the division rounds), so that Parquet's
    row-group statistics can skip what lies outside it."""
    t = F.col("event_time_s")
    slack = 1e-9 * interval * (b + 2)
    keep = F.lit(True)
    if b > 0:
        keep = keep & (t >= F.lit(b * interval - slack))
    if b < n_batches - 1:
        keep = keep & (t < F.lit((b + 1) * interval + slack))
    return keep


def _read_parquet(spark: SparkSession, files: list[str], sources: Any) -> DataFrame:
    """The files, their schema given from the first one's footer where pyarrow reads it
    (Spark's own inference of it cost a cold driver about a second)."""
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    wanted = {s for s in sources if not s.startswith("=")}
    try:
        schema = pq.read_schema(files[0])
        fields = [StructField(f.name, from_arrow_type(f.type)) for f in schema if f.name in wanted]
    except (OSError, ValueError, TypeError):  # Spark reads what pyarrow does not
        return spark.read.parquet(*files)
    if {f.name for f in fields} != wanted:
        return spark.read.parquet(*files)  # a missing column: Spark's own error names it
    return spark.read.schema(StructType(fields)).parquet(*files)


def _footer_max(files: list[str], column: str) -> float | None:
    """The largest value of ``column`` in the Parquet files' footers (None: a literal
    column, or a row group without statistics)."""
    if column.startswith("="):
        return None
    import pyarrow.parquet as pq

    best: float | None = None
    for path in files:
        try:
            meta = pq.ParquetFile(path).metadata
        except (OSError, ValueError):  # not a local file pyarrow reads: Spark measures it
            return None
        index = meta.schema.names.index(column) if column in meta.schema.names else -1
        if index < 0:
            return None
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(index).statistics
            if meta.row_group(g).num_rows == 0:
                continue
            if stats is None or not stats.has_min_max:
                return None
            best = float(stats.max) if best is None else max(best, float(stats.max))
    return best
