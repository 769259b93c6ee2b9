"""The Spark-native streaming baseline (``spark_streaming``): see ``spark.native_baselines`` for
what every baseline shares (nodes, measured stages, the oracle).

``spark_streaming`` (the direct streaming peer). Each micro-batch is written as one
folder of ``senders`` Parquet files (sender ``s``'s tuples of the batch in file ``s``,
an empty file for a sender with none) and read by one continuous Structured Streaming
query on ``local_dir()/streaming/<run>/in`` with ``maxFilesPerTrigger = senders``;
after each folder ``processAllAvailable`` runs exactly one trigger. Every file is its
own input partition (``spark.sql.files.openCostInBytes`` = the split size), so the
trigger's map stage runs one task per sender, as the engine's routing stage does: the
same senders pay the same per-task costs (with one file per batch it ran one task, and
its routing per sender was that task's work / ``senders``). A ``foreachBatch`` sink sets the
batch's job group and checkpoints (``keep``) the trigger's output, which executes the
micro-batch: the stateful stage (``StateStoreRestore/Save`` or
``StreamingSymmetricHashJoin``, ``n_nodes`` tasks, task ``i`` = state store partition
``i`` = node ``i``) runs in that job (its tasks also cache the trigger's output rows).
AQE is off inside streaming queries (Spark disables it), so the partitions are exactly
the nodes. Each batch's folder is written up front (one Spark job) and renamed into the
query's folder when its turn comes (one rename: the query never sees half a batch).

*Aggregation*: ``groupBy(key).count()`` in update mode; with a window,
``groupBy(window(batch_ts, W s, L s), key).count()`` where ``batch_ts`` is the tuple's
micro-batch index as seconds (so Spark's windows of ``W`` batches sliding by ``L``, the
operator's ``Window``, are exactly the engine's window) with a 0 s watermark on it;
expired windows are evicted at the next trigger (no-data batches are off so each trigger
is one batch's folder of ``senders`` files). The sink upserts the updated rows into a
result table (what an update-mode sink does); the answer is the window
``Window.first_batch`` names. Map-side partial aggregation runs before the shuffle, so
the stateful stage reads partial counts (one per key and map task, per window for a
sliding window), not tuples. *Join*: stream-stream inner join of R and S on the key,
append mode, the trigger's output = the new pairs. A window join adds 1 ms watermarks on
both sides' event times (micro-second timestamps of ``event_time_s``, shifted by 1 s:
Spark's first watermark is 0 and a join drops a row at it as late), the time-range
condition of the operator's ``TimeBounds`` (widened by 2 us for the timestamp rounding,
the exact condition on the doubles is applied too) so Spark evicts expired state; full
history has no watermark and the state grows. *Band join*: Spark rejects a stream-stream
join without an equality predicate, so the side with fewer tuples overall is exploded
into its ``2w + 1`` candidate keys and equi-joined (the engine's rewrite); its state
holds the exploded rows. *State per node*: rows of the operator's state store per
partition after the trigger, read with Spark's ``statestore`` data source (join: both
sides' value rows; aggregation: one row per key, or per window and key).

"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from balancebench.spark.join_keys import candidate_keys
from balancebench.spark.loop import BatchResult, PhaseClock
from balancebench.spark.native_baselines import COLUMNS, Baseline
from balancebench.state.paths import local_dir

#: Split size of the streaming file source, also the cost of opening a file: each
#: sender's file of a batch is its own task (Spark's default split, 128 MiB).
FILE_SPLIT_BYTES = 128 * 1024 * 1024

STATE_STORE_PROVIDERS = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}


# ---- spark_streaming -----------------------------------------------------------------------

#: Added to every event time's microseconds before it becomes a join's watermark column.
EPOCH_SHIFT_US = 1_000_000


def _plus_micros(ts: Column, micros: int) -> Column:
    """``ts`` shifted by a whole number of microseconds, either sign (an interval
    literal: the range Spark's join reads to drop state)."""
    if micros >= 0:
        return ts + F.expr(f"INTERVAL {micros} MICROSECONDS")
    return ts - F.expr(f"INTERVAL {-micros} MICROSECONDS")


class StreamingRunner(Baseline):
    def conf(self) -> dict[str, str]:
        provider = str(self.settings.get("state_store", "hdfs"))
        if provider not in STATE_STORE_PROVIDERS:
            raise ValueError(
                f"spark_streaming_state_store: {provider!r}; allowed values: "
                f"{sorted(STATE_STORE_PROVIDERS)}"
            )
        return {
            "spark.sql.shuffle.partitions": str(self.n),
            "spark.sql.adaptive.enabled": "false",
            # One trigger per batch folder: no extra trigger that only advances the watermark
            # (expired state is then evicted at the start of the next data trigger).
            "spark.sql.streaming.noDataMicroBatches.enabled": "false",
            "spark.sql.streaming.stateStore.providerClass": STATE_STORE_PROVIDERS[provider],
            # A file costs a whole split: Spark packs no two senders' files into one task.
            "spark.sql.files.openCostInBytes": str(FILE_SPLIT_BYTES),
            "spark.sql.files.maxPartitionBytes": str(FILE_SPLIT_BYTES),
        }

    def start(self) -> None:
        self.folder = local_dir() / "streaming" / f"{self.name}-{uuid.uuid4().hex[:12]}"
        self.inbox = self.folder / "in"
        self.inbox.mkdir(parents=True)
        self.checkpoint = self.folder / "checkpoint"
        self.outputs: dict[int, DataFrame] = {}
        self.sink_group: str | None = None
        self.last_batch_id = -1
        self.table: DataFrame | None = None
        self._stage_batches()
        self.query = self._query().start()

    def close(self) -> None:
        query = getattr(self, "query", None)
        if query is not None:
            query.stop()
        folder = getattr(self, "folder", None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    # The streaming query ----------------------------------------------------------------
    def _query(self) -> Any:
        cfg = self.config
        src = (
            self.spark.readStream.schema(self.schema)
            .option("maxFilesPerTrigger", self.senders)
            .parquet(str(self.inbox / "*"))  # one folder per batch
        )
        if self.op.aggregates:
            window = cfg.window
            if window is None:
                out = src.groupBy("key").count()
            else:
                size, slide = f"{window.size_batches} seconds", f"{window.slide_batches} seconds"
                out = (
                    src.withColumn("_bt", F.timestamp_seconds(F.col("batch")))
                    .withWatermark("_bt", "0 seconds")
                    .groupBy(F.window("_bt", size, slide), "key")
                    .count()
                    .select(F.unix_seconds(F.col("window.start")).alias("_wstart"), "key", "count")
                )
            mode = "update"
        else:
            out = self._join(src)
            mode = "append"
        return (
            out.writeStream.outputMode(mode)
            .foreachBatch(self._sink)
            .option("checkpointLocation", str(self.checkpoint))
            .queryName(f"balancebench_{self.name}_{uuid.uuid4().hex[:8]}")
        )

    def _join(self, src: DataFrame) -> DataFrame:
        cfg = self.config
        # Band: the side with fewer tuples is exploded into its candidate keys.
        explode = "R" if self.side_totals["R"] <= self.side_totals["S"] else "S"

        def side(s: str) -> DataFrame:
            p = s.lower()
            df = src.where(F.col("side") == s)
            k = F.col("key")
            if s == explode:
                k = candidate_keys(self.op, s, cfg.band_width)
            cols = [
                F.col("tuple_id").alias(f"{p}_id"),
                k.alias(f"{p}_k"),
                F.col("event_time_s").alias(f"{p}_t"),
            ]
            if cfg.bounds is not None:
                # Shifted by one second: Spark's first watermark is 0 and a join drops a row
                # at or below the watermark as late, so a tuple in the stream's first
                # microsecond (timestamp 0) lost its pairs (measured: band, window 1 s,
                # 1 of 60 pairs in batch 0). The range condition is relative: unchanged.
                micros = F.floor(F.col("event_time_s") * 1e6).cast("long") + EPOCH_SHIFT_US
                cols.append(F.timestamp_micros(micros).alias(f"{p}_et"))
                return df.select(*cols).withWatermark(f"{p}_et", "1 millisecond")
            return df.select(*cols)

        r, s = side("R"), side("S")
        cond = F.col("r_k") == F.col("s_k")
        bounds = cfg.bounds
        if bounds is not None:
            # The same range on the watermarked timestamps, widened by 2 us for their
            # rounding: it is what lets Spark drop state; the exact rule is bounds.holds.
            # lower <= t_s - t_r <= upper is s_t - upper <= r_t <= s_t - lower.
            up = int(bounds.upper_s * 1e6) + 2
            down = int(-bounds.lower_s * 1e6) + 2
            cond = (
                cond
                & (F.col("r_et") >= _plus_micros(F.col("s_et"), -up))
                & (F.col("r_et") <= _plus_micros(F.col("s_et"), down))
                & bounds.holds(F.col("r_t"), F.col("s_t"))
            )
        return r.join(s, cond).select("r_id", "s_id")

    def _sink(self, output: DataFrame, batch_id: int) -> None:
        """foreachBatch: runs the trigger's plan in the batch's job group."""
        group = self.sink_group or f"balancebench-{self.name}-trigger{batch_id}"
        self.sc.setJobGroup(group, f"{self.name} trigger {batch_id}")
        self.outputs[batch_id] = self.keep(output)
        self.last_batch_id = batch_id

    # One batch --------------------------------------------------------------------------
    def _stage_batches(self) -> None:
        """Write every micro-batch as a folder of ``senders`` Parquet files (one Spark job:
        the stream's partition ``s`` is sender ``s`` and writes its rows of each batch as
        one file) into a staging folder; :meth:`_feed` renames batch ``b``'s folder into
        the query's folder."""
        self.staging = self.folder / "staging"
        self.sc.setJobGroup(f"balancebench-{self.name}-stage-{time.time_ns()}", "stage batches")
        rows = self.stream.select(*COLUMNS).withColumn("_part", F.col("batch"))
        rows.write.partitionBy("_part").parquet(str(self.staging))
        self.schema = self.stream.select(*COLUMNS).schema
        empty = pa.schema(
            [
                ("side", pa.string()),
                ("tuple_id", pa.int64()),
                ("key", pa.int64()),
                ("event_time_s", pa.float64()),
                ("payload", pa.int64()),
                ("batch", pa.int64()),
            ]
        ).empty_table()
        for b in range(self.config.n_batches):
            batch_dir = self.staging / f"_part={b}"
            batch_dir.mkdir(exist_ok=True)
            files = sorted(batch_dir.glob("part-*.parquet"))
            if len(files) > self.senders:
                raise RuntimeError(
                    f"{self.name}: batch {b} was written as {len(files)} files, "
                    f"expected at most one per sender ({self.senders})"
                )
            for s in range(len(files), self.senders):  # senders with no tuple in batch b
                pq.write_table(empty, batch_dir / f"part-empty-{s:05d}.parquet")

    def _feed(self, b: int) -> None:
        """Rename batch ``b``'s folder into the query's folder, its files stamped now (the
        file source orders by modification time)."""
        batch_dir = self.staging / f"_part={b}"
        for f in batch_dir.glob("*.parquet"):
            os.utime(f)
        batch_dir.rename(self.inbox / f"batch-{b:06d}")

    def batch(self, b: int, clock: PhaseClock) -> BatchResult:
        extra: dict[str, float] = {}
        self.group(b, "feed")
        self._feed(b)
        clock.lap("feed")
        self.sink_group = f"balancebench-{self.name}-b{b}-operator-{time.time_ns()}"
        before = self.last_batch_id
        self.query.processAllAvailable()
        if self.query.exception() is not None:
            raise RuntimeError(f"{self.name}: streaming query failed: {self.query.exception()}")
        if self.last_batch_id != before + 1:
            raise RuntimeError(
                f"{self.name}: batch {b} ran triggers {before + 1}..{self.last_batch_id}, "
                "expected exactly one"
            )
        batch_id = self.last_batch_id
        clock.lap("trigger")
        run, cpu, received, info = self.measure(self.sink_group)
        extra.update(info)
        clock.lap("task_metrics")
        self.group(b, "state")
        state = self._state(batch_id)
        extra["state_rows_total"] = float(state.sum())
        clock.lap("state")
        self.group(b, "sink")
        answer = self._answer(b, self.outputs.pop(batch_id))
        clock.lap("sink")
        return self.finish(b, clock, (run, cpu), received, state, answer, extra)

    def _state(self, batch_id: int) -> np.ndarray:
        """State store rows per partition after trigger ``batch_id`` (Spark's
        ``statestore`` data source)."""

        def read(**options: str) -> DataFrame:
            reader = self.spark.read.format("statestore").option("batchId", batch_id)
            for k, v in options.items():
                reader = reader.option(k, v)
            return reader.load(str(self.checkpoint)).select("partition_id")

        if self.op.aggregates:
            rows = read()
        else:
            rows = read(joinSide="left").unionByName(read(joinSide="right"))
        counts = rows.groupBy("partition_id").count().collect()
        state = np.zeros(self.n, dtype=np.int64)
        for r in counts:
            state[int(r["partition_id"])] += int(r["count"])
        return state

    def _answer(self, b: int, output: DataFrame) -> DataFrame:
        """The join's new pairs, or the aggregation's window after upserting the
        trigger's updated rows into the result table."""
        if not self.op.aggregates:
            return output
        if self.config.window is None:
            updates = output.withColumn("_wstart", F.lit(0).cast("bigint"))
        else:
            updates = output
        # The window answered now; older ones are closed for good (first_batch never
        # decreases), so the table drops them.
        current = self.config.first_window_batch(b)
        updates = updates.select("_wstart", "key", F.col("count").cast("bigint"))
        table = updates
        if self.table is not None:
            kept = self.table.where(F.col("_wstart") >= current)
            table = kept.join(updates.select("_wstart", "key"), ["_wstart", "key"], "left_anti")
            table = table.unionByName(updates)
        table = self.keep(table)
        self.table = table
        return table.where(F.col("_wstart") == current).select("key", "count")
