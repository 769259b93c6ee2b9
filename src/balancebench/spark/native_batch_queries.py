"""Spark-native baselines as batch queries per micro-batch (``spark_aqe``,
``spark_salting``): see ``spark.native_baselines`` for what every baseline shares (nodes,
measured stages, the oracle).

``spark_aqe``: every micro-batch as a batch query, AQE and skew-join handling on (see
:class:`~balancebench.strategies.spark_native.SparkAqe` for the thresholds), whatever
plan Spark picks. The user keeps the tuples so far as one checkpointed (``keep``) piece
per batch, spread round-robin over ``n_nodes`` partitions (the source's partitions).
Aggregation: ``groupBy(key).count()`` over the window's pieces (full history: all).
Join: ``new R ⋈ (earlier S ∪ new S)`` ∪ ``earlier R ⋈ new S`` on the key (band: on the
new tuples' candidate keys; window: ``|t_r - t_s| <= window_s``), every pair once.
*Nodes*: AQE may split a skewed partition into several tasks or coalesce small ones,
so the stateful stage need not have ``n_nodes`` tasks. Its tasks are placed on
``n_nodes`` slots as Spark's FIFO scheduler would run them on ``n_nodes`` cores (task
order, each to the least-loaded slot): split pieces of one hot partition run on
different slots, which is what AQE is for; coalesced partitions run as one task on one
slot. When Spark broadcasts a join side, the join runs in the scan tasks of the other
side, which read the kept pieces (task ``j`` reads partition ``j mod n_nodes`` of a
piece, node ``j mod n_nodes``): ``node_received`` is the rows they scan plus the
broadcast rows, which every node receives. *State per node*: the rows of the kept
pieces per partition (partition ``i`` of every piece = node ``i``): aggregation, the
window's batches; join, every batch holding a tuple still inside the window (a piece is
dropped once all its tuples are older than ``window_s`` before the next batch; older
tuples of a kept piece are filtered out by the next query). The batch's extras report
the broadcast rows, the skewed partitions and their splits, the coalesced partitions
(from Spark's SQL metrics) and the effective thresholds.

``spark_salting``: the manual salting recipe per micro-batch (AQE off, broadcast off,
``n_nodes`` shuffle partitions, so the stage tasks are the nodes; a union of the two
joins has ``2 n_nodes`` tasks, task ``j`` on node ``j mod n_nodes``). Aggregation:
``count`` by ``(key, salt)``, ``salt = hash(tuple_id) mod S``, then ``sum`` by key: both
reduce stages are measured. Join: each of the two joins above salts its larger side
(``hash(tuple_id) mod S``) and replicates its smaller side ``S`` times, joined on
``(key, salt)``; the replicas show in ``node_received``. State per node: as for AQE.
Spark 4's optimizer rule ``CollapseGroupedSumOfCount`` folds the two-phase aggregate
back into one count by key (dropping the salt); it is excluded for this baseline so the
recipe runs as written. Map-side partial aggregation already shrinks a hot key's
tuples to one partial count per map task, so salting a ``count`` mostly adds a shuffle.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from balancebench.core.cost_model import CORE_WAIT
from balancebench.spark.join_keys import candidate_keys, n_candidates
from balancebench.spark.loop import BatchResult, PhaseClock, release
from balancebench.spark.native_baselines import COLUMNS, Baseline
from balancebench.spark.replay_stream import batch_frame
from balancebench.spark.rest_task_metrics import ROUTE

#: Seed of the tuple-id hash that picks a tuple's salt (spark_salting).
SALT_SEED = 0x5A17
#: Spark's own defaults of the AQE settings the baselines touch (Spark 4.3 docs).
AQE_SPARK_DEFAULTS = {
    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": "256MB",
    "spark.sql.adaptive.skewJoin.skewedPartitionFactor": "5.0",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "64MB",
    "spark.sql.adaptive.coalescePartitions.minPartitionSize": "1MB",
}
SPARK_BROADCAST_THRESHOLD = "10MB"
EXCLUDED_RULES = "spark.sql.optimizer.excludedRules"
COLLAPSE_SUM_OF_COUNT = "org.apache.spark.sql.catalyst.optimizer.CollapseGroupedSumOfCount"


def _bytes(value: str | None) -> int:
    """A Spark size setting ("256MB", "1", "-1") in bytes."""
    text = (value or "0").strip().upper().removesuffix("B")
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(float(text))


# ---- batch queries per micro-batch (spark_aqe, spark_salting) -------------------------------
class _BatchQueries(Baseline):
    """Keeps the tuples so far as per-batch pieces of ``n`` round-robin partitions."""

    def start(self) -> None:
        self.pieces: dict[int, DataFrame] = {}
        #: Rows per partition of each kept piece.
        self.piece_rows: dict[int, np.ndarray] = {}

    def close(self) -> None:
        for piece in getattr(self, "pieces", {}).values():
            release(piece)

    def horizon(self, b: int) -> float | None:
        """Oldest event time a join still needs after batch ``b`` (None: full history)."""
        return self.config.horizon(b)

    def kept_batches(self, b: int) -> list[int]:
        """Batches whose pieces the user keeps after batch ``b``."""
        cfg = self.config
        if self.op.aggregates:
            first = cfg.first_window_batch(b)
            return [j for j in sorted(self.pieces) if first <= j <= b]
        horizon = self.horizon(b)
        if horizon is None:
            return sorted(self.pieces)
        # Batch j's tuples are older than (j + 1) * interval (the last batch is never dropped).
        return [j for j in sorted(self.pieces) if (j + 1) * cfg.interval_s > horizon or j == b]

    def union(self, batches: list[int]) -> DataFrame | None:
        frames = [self.pieces[j] for j in batches]
        if not frames:
            return None
        out = frames[0]
        for f in frames[1:]:
            out = out.unionByName(f)
        return out

    def batch(self, b: int, clock: PhaseClock) -> BatchResult:
        extra: dict[str, float] = {}
        piece, ingest = self._ingest(b)
        clock.lap("ingest")
        earlier = self.union(sorted(self.pieces))
        self.pieces[b] = piece
        self.group(b, "prepare")  # building the query may run jobs (salting's hot keys)
        if self.op.aggregates:
            query = self.aggregate(b, self.union(self.kept_batches(b)))
        else:
            query = self.join(b, piece, earlier)
        group = self.group(b, "operator")
        answer = self.keep(query)
        clock.lap("operator")
        run, cpu, received, info = self.measure(group)
        # Receiving the batch: its scan and shuffle are the senders', its n tasks the nodes'.
        info["route_work_s"] += ingest.route_work_s
        info[CORE_WAIT] = info.get(CORE_WAIT, 0.0) + ingest.core_wait_s
        extra.update(info)
        clock.lap("task_metrics")
        state = self._drop_and_count(b)
        return self.finish(
            b,
            clock,
            (run + ingest.node_run_s, cpu + ingest.node_cpu_s),
            received,
            state,
            answer,
            extra,
        )

    def _ingest(self, b: int) -> tuple[DataFrame, Any]:
        """Batch ``b``'s tuples as the user keeps them: ``n`` round-robin partitions,
        checkpointed (``keep``); its rows per partition from the job's task metrics, and
        the job's measured work."""
        group = self.group(b, "ingest")
        rows = batch_frame(self.stream, b).select(*COLUMNS)
        piece = self.keep(rows.repartition(self.n))
        sizes = np.zeros(self.n, dtype=np.int64)
        for job in self.sc.statusTracker().getJobIdsForGroup(group):
            info = self.sc.statusTracker().getJobInfo(job)
            for sid in info.stageIds if info else []:
                tasks = self.rest.stage_tasks(sid)
                if tasks is not None and len(tasks) == self.n:
                    read = [t["taskMetrics"]["shuffleReadMetrics"]["recordsRead"] for t in tasks]
                    sizes = np.maximum(sizes, np.array(read, dtype=np.int64))
        if int(sizes.sum()) != self.batch_tuples(b):
            raise RuntimeError(
                f"{self.name}: batch {b} ingested {sizes.tolist()} rows per partition, "
                f"expected {self.batch_tuples(b)} in all"
            )
        self.piece_rows[b] = sizes
        return piece, self.work(group, ROUTE)

    def _drop_and_count(self, b: int) -> np.ndarray:
        """Drop the pieces the user no longer needs; kept tuples per node."""
        keep = set(self.kept_batches(b))
        for j in [j for j in self.pieces if j not in keep]:
            release(self.pieces.pop(j))
            self.piece_rows.pop(j, None)
        state = np.zeros(self.n, dtype=np.int64)
        for j in self.pieces:
            state += self.piece_rows[j]
        return state

    # Queries ------------------------------------------------------------------------------
    def aggregate(self, b: int, window: DataFrame | None) -> DataFrame:
        raise NotImplementedError

    def join(self, b: int, new: DataFrame, earlier: DataFrame | None) -> DataFrame:
        """``new R ⋈ (earlier S ∪ new S)`` ∪ ``earlier R ⋈ new S``: every pair whose later
        tuple is in batch ``b``, once."""
        cfg = self.config
        horizon = cfg.horizon(b - 1)  # what batch b can still meet
        if earlier is not None and horizon is not None:
            earlier = earlier.where(F.col("event_time_s") >= horizon)
        new_r, new_s = (new.where(F.col("side") == s) for s in ("R", "S"))
        old_s = None if earlier is None else earlier.where(F.col("side") == "S")
        all_s = new_s if old_s is None else old_s.unionByName(new_s)
        n_new = {s: self.counts.get((b, s), 0) for s in ("R", "S")}
        # Sizes the user knows: the batch's tuples and the kept earlier pieces.
        n_old = {
            s: sum(
                c
                for (j, side), c in self.counts.items()
                if side == s and j < b and j in self.pieces
            )
            for s in ("R", "S")
        }
        pairs = self.pairs(new_r, "R", all_s, n_new["R"], n_old["S"] + n_new["S"])
        if earlier is not None:
            old_r = earlier.where(F.col("side") == "R")
            pairs = pairs.unionByName(self.pairs(new_s, "S", old_r, n_new["S"], n_old["R"]))
        return pairs

    def pairs(
        self, new: DataFrame, new_side: str, other: DataFrame, n_new: int, n_other: int
    ) -> DataFrame:
        """Pairs of the batch's ``new`` tuples of one side with ``other`` tuples of the
        other side (band: on the new tuples' candidate keys)."""
        cfg = self.config
        k = candidate_keys(self.op, new_side, cfg.band_width)
        a = new.select(
            F.col("tuple_id").alias("a_id"),
            k.alias("a_k"),
            F.col("event_time_s").alias("a_t"),
        )
        o = other.select(
            F.col("tuple_id").alias("o_id"),
            F.col("key").alias("o_k"),
            F.col("event_time_s").alias("o_t"),
        )
        a, o, cond = self.equi(a, o, n_new * n_candidates(self.op, cfg.band_width), n_other)
        in_window = cfg.in_window_of(F.col("a_t"), F.col("o_t"), new_side)
        if in_window is not None:
            cond = cond & in_window
        r_id, s_id = ("a_id", "o_id") if new_side == "R" else ("o_id", "a_id")
        return a.join(o, cond).select(F.col(r_id).alias("r_id"), F.col(s_id).alias("s_id"))

    def equi(
        self, a: DataFrame, o: DataFrame, n_a: int, n_o: int
    ) -> tuple[DataFrame, DataFrame, Any]:
        """The equality part of a join of ``a`` (key ``a_k``) with ``o`` (key ``o_k``)."""
        return a, o, F.col("a_k") == F.col("o_k")


class AqeRunner(_BatchQueries):
    adaptive = True

    def conf(self) -> dict[str, str]:
        s = self.settings
        mode = str(s.get("thresholds", "scaled"))
        if mode not in ("scaled", "spark"):
            raise ValueError(f"spark_aqe_thresholds: {mode!r}; allowed values: ['scaled', 'spark']")
        conf = {
            "spark.sql.adaptive.enabled": "true",
            "spark.sql.adaptive.skewJoin.enabled": "true",
            "spark.sql.adaptive.coalescePartitions.enabled": "true",
            "spark.sql.shuffle.partitions": str(self.n),
            "spark.sql.autoBroadcastJoinThreshold": (
                SPARK_BROADCAST_THRESHOLD if s.get("broadcast", True) else "-1"
            ),
            **AQE_SPARK_DEFAULTS,
        }
        if mode == "scaled":
            # Byte floors off: a partition is skewed when larger than skew_factor x the
            # median, split into pieces of the mean non-skewed partition (AQE's target is
            # max(advisory, that mean)), and nothing is coalesced below a partition.
            conf.update(
                {
                    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": "1",
                    "spark.sql.adaptive.skewJoin.skewedPartitionFactor": str(
                        float(s.get("skew_factor", 2.0))
                    ),
                    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "1",
                    "spark.sql.adaptive.coalescePartitions.minPartitionSize": "1",
                }
            )
        return conf

    def measure(self, group: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[str, float]]:
        run, cpu, received, info = super().measure(group)
        conf = self.spark.conf
        for name, key in (
            ("aqe_skew_threshold_bytes", "skewJoin.skewedPartitionThresholdInBytes"),
            ("aqe_advisory_bytes", "advisoryPartitionSizeInBytes"),
            ("aqe_min_partition_bytes", "coalescePartitions.minPartitionSize"),
        ):
            info[name] = float(_bytes(conf.get(f"spark.sql.adaptive.{key}")))
        info["aqe_skew_factor"] = float(
            conf.get("spark.sql.adaptive.skewJoin.skewedPartitionFactor") or 0
        )
        info["broadcast_threshold_bytes"] = float(
            _bytes(conf.get("spark.sql.autoBroadcastJoinThreshold"))
        )
        return run, cpu, received, info

    def aggregate(self, b: int, window: DataFrame | None) -> DataFrame:
        assert window is not None
        return window.groupBy("key").agg(F.count(F.lit(1)).alias("count"))


class SaltingRunner(_BatchQueries):
    def conf(self) -> dict[str, str]:
        # Spark 4's optimizer folds "count by (key, salt), then sum by key" into one count
        # by key (CollapseGroupedSumOfCount), silently dropping the salt; the recipe needs
        # it off to run as written.
        excluded = self.spark.conf.get(EXCLUDED_RULES, None) or ""
        rules = [r for r in excluded.split(",") if r.strip()]
        if COLLAPSE_SUM_OF_COUNT not in rules:
            rules.append(COLLAPSE_SUM_OF_COUNT)
        return {
            "spark.sql.adaptive.enabled": "false",
            "spark.sql.shuffle.partitions": str(self.n),
            "spark.sql.autoBroadcastJoinThreshold": "-1",
            EXCLUDED_RULES: ",".join(rules),
        }

    @property
    def salts(self) -> int:
        salts = int(self.settings.get("salts", 0) or 0)
        return salts if salts > 0 else self.n

    def _hot(self, df: DataFrame, key: str) -> list[int] | None:
        """The ``hot_keys`` most frequent keys of ``df`` (None: salt every key)."""
        hot = int(self.settings.get("hot_keys", 0) or 0)
        if hot <= 0:
            return None
        top = df.groupBy(key).count().orderBy(F.col("count").desc(), F.col(key)).limit(hot)
        return [int(r[key]) for r in top.collect()]

    def _salt(self, key: str, tuple_id: str, hot: list[int] | None) -> Any:
        """``hash(tuple_id) mod S`` (hot keys only: other keys get salt 0)."""
        seed = F.lit(SALT_SEED).cast("bigint")
        salt = F.pmod(F.hash(F.col(tuple_id), seed), F.lit(self.salts))
        if hot is None:
            return salt
        return F.when(F.col(key).isin(hot), salt).otherwise(F.lit(0))

    def _replicas(self, key: str, hot: list[int] | None) -> Any:
        """One row per salt ``0..S-1`` (hot keys only: other keys only salt 0)."""
        every = F.sequence(F.lit(0), F.lit(self.salts - 1))
        if hot is None:
            return F.explode(every)
        return F.explode(F.when(F.col(key).isin(hot), every).otherwise(F.array(F.lit(0))))

    def aggregate(self, b: int, window: DataFrame | None) -> DataFrame:
        assert window is not None
        hot = self._hot(window, "key")
        partial = (
            window.withColumn("_salt", self._salt("key", "tuple_id", hot))
            .groupBy("key", "_salt")
            .agg(F.count(F.lit(1)).alias("_count"))
        )
        return partial.groupBy("key").agg(F.sum("_count").cast("bigint").alias("count"))

    def equi(
        self, a: DataFrame, o: DataFrame, n_a: int, n_o: int
    ) -> tuple[DataFrame, DataFrame, Any]:
        """Salt the larger side by its tuple id, replicate the smaller side per salt."""
        if n_a >= n_o:
            big, small, big_k, small_k, big_id = a, o, "a_k", "o_k", "a_id"
        else:
            big, small, big_k, small_k, big_id = o, a, "o_k", "a_k", "o_id"
        hot = self._hot(big, big_k)
        big = big.withColumn("_salt_" + big_k, self._salt(big_k, big_id, hot))
        small = small.withColumn("_salt_" + small_k, self._replicas(small_k, hot))
        a, o = (big, small) if big_k == "a_k" else (small, big)
        cond = (F.col("a_k") == F.col("o_k")) & (F.col("_salt_a_k") == F.col("_salt_o_k"))
        return a, o, cond
