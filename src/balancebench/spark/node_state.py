"""What a node keeps across batches, and the node operator that updates it, for each
kind of operator: the engine (``spark.engine``) asks the node state of its workload's
operator (:func:`node_state_for`), never the operator's kind.

- :class:`PartialCounts` (an aggregation): one row of partial counts per node, key and
  age, rewritten by each batch's node stage; a migration splits a part's counts.
- :class:`StoredTuples` (a join, whatever its predicate: ``Operator.key_offsets``): the
  stored tuples of each side in pieces, written once and merged like a binary counter;
  a migration lists the rows that left a piece as gone.

Each says how many node stages a batch has, what its node stage computes (``flow``),
what its state holds after a batch (``frame``), how the batch's state is committed,
made durable and released, and what a node received per part (``sent``). The engine's
module docstring describes the execution model they share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from balancebench.core.hashing import FRACTION_UNITS
from balancebench.core.operators import Operator
from balancebench.spark.engine_config import EngineConfig
from balancebench.spark.join_keys import candidate_keys
from balancebench.spark.loop import release
from balancebench.spark.placement import home_node, partition_by_node
from balancebench.spark.routers import (
    BATCH_COLUMNS,
    BOTH,
    MOVED,
    PROBES,
    STORE,
    STORES,
    Reassignment,
)
from balancebench.spark.stored_pieces import (
    SIDES,
    Piece,
    drop_gone,
    kept_view,
    merge_pieces,
    migration_unit,
    partitions_of,
    release_pieces,
    union_frames,
)


@dataclass
class Flow:
    """One batch's Spark work before its job runs: what the exchange carries and what
    the node stage(s) keep."""

    #: Partitions of the routed rows (the senders); the exchange's map stage has these
    #: first, then the partitions that read state a migration moves.
    route_partitions: int
    #: The operator's output, materialised by the batch's job (``MicroBatchLoop.keep``).
    answer: DataFrame
    #: Rows the node stage kept as it read them, for the statistics (aggregation: the
    #: batch's partial counts; join: the received rows).
    received: DataFrame
    #: The state after the batch (aggregation: partial counts; join: the pieces).
    state: Any


class Host(Protocol):
    """What a node state uses of the engine that runs it."""

    spark: SparkSession
    config: EngineConfig
    n: int
    surrogates: Column

    def keep_lazy(self, df: DataFrame, serialized: bool = False) -> DataFrame: ...

    def on_nodes(self, rows: DataFrame) -> DataFrame: ...

    def durable(self, df: DataFrame) -> DataFrame: ...


class NodeState:
    """The state policy and node operator of one kind of operator (module docstring)."""

    #: Node stages of a batch (the fused receive/operator/state stage, and any after it).
    node_stages: int
    #: The role of a calibration batch's rows (``routers``: store, or store and probe).
    calibration_role: str
    #: Whether the state holds two sides (the statistics then count R's apart).
    two_sides: bool

    def __init__(self, host: Host) -> None:
        self.host = host

    def flow(
        self, b: int, routed: DataFrame, moves: Reassignment | None, calibrating: bool
    ) -> Flow:
        """The batch's rows through the exchange and the node stage(s), as a plan: the
        job that keeps ``Flow.answer`` runs it."""
        raise NotImplementedError

    def frame(self, b: int, state: Any = None) -> DataFrame | None:
        """All state rows after batch ``b`` (``state``: a flow's, else the committed)."""
        raise NotImplementedError

    def make_durable(self, b: int, flow: Flow) -> None:
        """With ``reliable_state``: the state this batch wrote, copied to reliable
        checkpoint files by its node tasks; the in-memory rows are released."""
        raise NotImplementedError

    def commit(self, flow: Flow) -> None:
        """The batch's state becomes the node's; what it replaces is released."""
        raise NotImplementedError

    def discard(self, flow: Flow) -> None:
        """Release a flow's state that is not kept (a calibration batch's)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the committed state."""
        raise NotImplementedError

    def sent(self, received: DataFrame, by: list[str]) -> DataFrame:
        """Per part (``by``): the copies received, the tuples stored (``load``), and the
        rows and tuples a migration moved there."""
        raise NotImplementedError


def counted_rows(routed: DataFrame) -> DataFrame:
    """What an aggregation's routing stage writes into the exchange: a row per routed
    tuple, ``(key, node, age 0, count 1, not moved)``."""
    zero, one = F.lit(0).cast("bigint"), F.lit(1).cast("bigint")
    return routed.select(
        "key", "node", zero.alias("age"), one.alias("count"), F.lit(0).alias("_moved")
    )


class PartialCounts(NodeState):
    """An aggregation's state: partial counts (module docstring)."""

    node_stages = 2
    calibration_role = STORE
    two_sides = False

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        #: Partial counts, one row per (node, key, age).
        self.state: DataFrame | None = None

    def flow(
        self, b: int, routed: DataFrame, moves: Reassignment | None, calibrating: bool
    ) -> Flow:
        """Each node counts its tuples per key into its partial counts (age 0; inside a
        window every older row ages by one batch and leaves once it is older than the
        window's first batch, ``Window.first_batch``; full history keeps one running
        count), then every key's
        partials are merged at the key's home node ``F(k)``: a split key's partials travel
        there.

        A migration's partial counts ride the batch's exchange with its tuples (read off
        the sending nodes' state on the exchange's map side, tagged with the node they go
        to); the sending node leaves them out of its state update, which rewrites the
        state anyway. Both happen in the stages every batch runs."""
        cfg = self.host.config
        assert moves is None or moves.split is None, "re-placing every row is for joins"
        first = cfg.first_window_batch(b)
        rows = counted_rows(routed)
        route_partitions = partitions_of(rows)
        # A window that starts with this batch keeps nothing: no state to age or move.
        state = None if calibrating or first == b else self.state
        if state is not None and cfg.window is not None:
            # A batch older; out once older than the window's first batch (before any
            # row moves).
            aged = (F.col("age") + 1).alias("age")
            state = state.select("_surrogate", "node", "key", aged, "count")
            state = state.where(F.col("age") <= b - first)
        if moves is not None and state is not None:
            state, arrived = split_counts(self.host.spark, state, moves)
            rows = rows.unionByName(
                arrived.select("key", "node", "age", "count", F.lit(1).alias("_moved"))
            )
        moved = F.col("_moved") == 1
        counted = (
            partition_by_node(rows, self.host.n)
            .groupBy("_surrogate", "node", "key", "age")
            .agg(
                F.sum("count").alias("count"),
                F.sum(F.when(moved, 0).otherwise(1)).alias("tuples"),
                F.sum(F.col("_moved")).alias("moved_rows"),
                F.sum(F.when(moved, F.col("count")).otherwise(0)).alias("moved_count"),
            )
        )
        received = self.host.keep_lazy(counted, serialized=True)
        merged = received.select("_surrogate", "node", "key", "age", "count")
        if state is not None:
            merged = state.unionByName(merged)
        # One row per (node, key, age): a running count for full history.
        new_state = self.host.keep_lazy(
            merged.groupBy("_surrogate", "node", "key", "age").agg(F.sum("count").alias("count")),
            serialized=True,
        )
        per_node = new_state.groupBy("_surrogate", "node", "key").agg(F.sum("count").alias("count"))
        at_home = per_node.drop("_surrogate").withColumn("node", home_node("key", self.host.n))
        answer = (
            partition_by_node(at_home, self.host.n)
            .groupBy("_surrogate", "key")
            .agg(F.sum("count").alias("count"))
            .select("key", "count")
        )
        return Flow(route_partitions, answer, received, new_state)

    def frame(self, b: int, state: Any = None) -> DataFrame | None:
        return self.state if state is None else state

    def make_durable(self, b: int, flow: Flow) -> None:
        flow.state = self.host.durable(flow.state)

    def commit(self, flow: Flow) -> None:
        if self.state is not None:
            release(self.state)
        release(flow.received)
        self.state = flow.state

    def discard(self, flow: Flow) -> None:
        release(flow.state)

    def close(self) -> None:
        if self.state is not None:
            release(self.state)
            self.state = None

    def sent(self, received: DataFrame, by: list[str]) -> DataFrame:
        return received.groupBy(*by).agg(
            F.sum("tuples").cast("double").alias("received"),
            F.sum("tuples").cast("double").alias("load"),
            F.sum("moved_rows").cast("double").alias("moved_rows"),
            F.sum("moved_count").cast("double").alias("moved_tuples"),
        )


class StoredTuples(NodeState):
    """A join's state: the stored tuples of each side, in pieces (module docstring)."""

    node_stages = 1
    calibration_role = BOTH
    two_sides = True

    def __init__(self, host: Host) -> None:
        super().__init__(host)
        #: The stored tuples of each side, in pieces.
        self.pieces: list[Piece] = []

    def flow(
        self, b: int, routed: DataFrame, moves: Reassignment | None, calibrating: bool
    ) -> Flow:
        """Probes (``probe``/``both`` rows) pair with the stored tuples of the other side
        on their node: its pieces and the batch's own stored rows, which become one new
        piece per side. The probes are the hash table and the stored rows stream through
        it, so a node reads its history once per batch and never sorts it.

        One node stage: it receives the batch's rows (and a migration's, which ride the
        same exchange), keeps them as the new pieces, merges the pieces the binary counter
        says, and probes. A migration's rows are read off the sending nodes' pieces on
        the exchange's map side; the pieces list them as gone (:class:`Piece`)."""
        cfg = self.host.config
        rows = routed.select(*BATCH_COLUMNS, "node", "role")
        route_partitions = partitions_of(rows)
        pieces = [] if calibrating else list(self.pieces)
        # Pieces whose every tuple is older than this batch's window are dropped.
        horizon = self.horizon(b - 1)
        pieces = [
            p for p in pieces if horizon is None or (p.newest_batch + 1) * cfg.interval_s > horizon
        ]
        if moves is not None and pieces:
            pieces, arrived = self._move_stored(b, pieces, moves)
            if arrived is not None:
                rows = rows.unionByName(arrived)
        received = self.host.keep_lazy(partition_by_node(rows, self.host.n))
        for side in SIDES:
            view = kept_view(side)
            pieces.append(Piece(b, side, view(received), received, 1, b, view))
        pieces = self._merge(b, pieces)
        probe = received.where(F.col("role").isin(*PROBES)).drop("role")
        # The stored keys each probe meets (the operator's predicate, one row per key).
        match = candidate_keys(cfg.workload.operator, F.col("side"), cfg.band_width)
        probe = probe.withColumn("_match", match)
        found = []
        for side in SIDES:
            # One join per side: the union of a side's pieces keeps their node partitioning
            # (spark.sql.unionOutputPartitioning), so each node's task scans its own rows.
            mine = [p for p in pieces if p.side == side]
            stored = union_frames(
                [p.frame.withColumn("_piece", F.lit(i)) for i, p in enumerate(mine)]
            )
            if stored is None:
                continue
            other = "S" if side == "R" else "R"
            pairs = self._pairs(probe.where(F.col("side") == other), stored)
            gone = [p.gone_table(self.host.spark, i) for i, p in enumerate(mine) if p.has_gone]
            if gone:
                pairs = drop_gone(pairs, union_frames(gone), F.col("_piece"))
            # The node's surrogate is kept with the pairs: Spark then sees both sides'
            # joins as one node partitioning (one task per node, not one per join).
            found.append(pairs.select("r_id", "s_id", "_surrogate"))
        pairs = union_frames(found)
        assert pairs is not None
        return Flow(route_partitions, pairs, received, pieces)

    def _merge(self, b: int, pieces: list[Piece]) -> list[Piece]:
        """Merge each side's newest pieces when ``merge_pieces`` says so: the merged rows
        are written by the node stage that reads them first (this batch's probe), the
        gone rows left behind."""
        out = list(pieces)
        for side in SIDES:
            own = [p for p in out if p.side == side]
            n = merge_pieces(own)
            if n == 0:
                continue
            merging = own[-n:]
            rows = union_frames([p.live(self.host.spark) for p in merging])
            assert rows is not None
            kept = self.host.keep_lazy(self.host.on_nodes(rows))
            newest = max(p.newest_batch for p in merging)
            merged = Piece(newest, side, kept, kept, sum(p.span for p in merging), b)
            gone = {id(p) for p in merging}
            out = [p for p in out if id(p) not in gone] + [merged]
        return out

    def _pairs(self, probe: DataFrame, stored: DataFrame) -> DataFrame:
        """Every probe with a stored tuple of the other side that arrived earlier (within
        the window), on the probe's node: ``r_id``, ``s_id`` and the stored tuple's
        ``key``, ``node``, ``tuple_id``, ``_piece`` (to leave gone rows out) and
        ``_surrogate`` (the node's partitioning)."""
        cfg = self.host.config
        p, s = probe.alias("p"), stored.alias("s")
        cond = (
            (F.col("p._surrogate") == F.col("s._surrogate"))
            & (F.col("p._match") == F.col("s.key"))
            & (F.col("s.tuple_id") < F.col("p.tuple_id"))
        )
        in_window = cfg.in_window_of(
            F.col("p.event_time_s"), F.col("s.event_time_s"), F.col("p.side")
        )
        if in_window is not None:
            cond = cond & in_window
        # The batch's probes are the build side; stored tuples stream through.
        joined = s.join(p.hint("shuffle_hash"), cond)
        return joined.select(
            F.when(F.col("p.side") == "R", F.col("p.tuple_id"))
            .otherwise(F.col("s.tuple_id"))
            .alias("r_id"),
            F.when(F.col("p.side") == "R", F.col("s.tuple_id"))
            .otherwise(F.col("p.tuple_id"))
            .alias("s_id"),
            F.col("s.key").alias("key"),
            F.col("s.node").alias("node"),
            F.col("s.tuple_id").alias("tuple_id"),
            F.col("s._piece").alias("_piece"),
            F.col("s._surrogate").alias("_surrogate"),
        )

    def _move_stored(
        self, b: int, pieces: list[Piece], moves: Reassignment
    ) -> tuple[list[Piece], DataFrame | None]:
        """Stored tuples a reassignment moves: the rows to ship (role ``moved``, their new
        node set), read off the pieces on the exchange's map side; the pieces either list
        them as gone (a plan's moves, the two-stream rule's sync) or, for a re-placement
        of every row (``Reassignment.split``), are rewritten by this batch's node stage."""
        columns = [*BATCH_COLUMNS, "node"]
        shipped: list[DataFrame] = []
        out: list[Piece] = []
        if moves.split is not None:
            for piece in pieces:
                stay, go = moves.split(piece.live(self.host.spark).select(*columns, "_surrogate"))
                shipped.append(go.select(*columns))
                kept = self.host.keep_lazy(self.host.on_nodes(stay))
                out.append(Piece(piece.newest_batch, piece.side, kept, kept, piece.span, b))
        else:
            seg = segment_table(self.host.spark, moves)
            sync = self._sync_table(moves)
            gone = self._gone_segments(moves)
            for piece in pieces:
                live = piece.live(self.host.spark)
                plain = live
                if sync is not None:
                    plain, _, copies = self._split_replicas(live, sync)
                    shipped.append(copies.select(*columns))
                if seg is not None:
                    shipped.append(self._split_tuples(plain, seg).select(*columns))
                key, node, lo, hi = gone[piece.side]
                piece.forget(key, node, lo, hi)
                out.append(piece)
        rows = union_frames(shipped)
        if rows is None:
            return out, None
        return out, rows.withColumn("role", F.lit(MOVED))

    def _gone_segments(self, moves: Reassignment) -> dict[str, tuple[np.ndarray, ...]]:
        """Per side, the segments of stored rows that leave their node: a plan's segments
        (for keys whose side is not synced) and, for a synced (key, side), every node
        outside its targets (the whole unit range)."""
        synced: dict[str, dict[int, list[int]]] = {side: {} for side in SIDES}
        sync = moves.replicas
        if sync is not None:
            for k, side, targets in zip(sync.key.tolist(), sync.side, sync.targets, strict=True):
                synced[side][int(k)] = [int(t) for t in targets]
        out = {}
        for side in SIDES:
            keep = ~np.isin(moves.key, list(synced[side]))
            key = [moves.key[keep]]
            node = [moves.from_node[keep]]
            lo = [moves.lo_units[keep]]
            hi = [moves.hi_units[keep]]
            for k, targets in synced[side].items():
                off = np.setdiff1d(np.arange(self.host.n), targets)
                key.append(np.full(len(off), k, np.int64))
                node.append(off.astype(np.int32))
                lo.append(np.zeros(len(off), np.int64))
                hi.append(np.full(len(off), FRACTION_UNITS, np.int64))
            out[side] = (
                np.concatenate(key).astype(np.int64),
                np.concatenate(node).astype(np.int32),
                np.concatenate(lo).astype(np.int64),
                np.concatenate(hi).astype(np.int64),
            )
        return out

    def _sync_table(self, moves: Reassignment) -> DataFrame | None:
        """The two-stream rule's sync (``routers.ReplicaSync``) as a broadcast table."""
        sync = moves.replicas
        if sync is None or len(sync) == 0:
            return None
        ints = pa.list_(pa.int32())
        return self.host.spark.createDataFrame(
            pa.table(
                {
                    "_yk": pa.array(sync.key),
                    "_yside": pa.array(sync.side, pa.string()),
                    "_ysrc": pa.array(sync.source),
                    "_yhave": pa.array(sync.have, ints),
                    "_ytargets": pa.array(sync.targets, ints),
                }
            )
        )

    def _split_replicas(
        self, state: DataFrame, sync: DataFrame
    ) -> tuple[DataFrame, DataFrame, DataFrame]:
        """Rows of a piece outside the sync (they move with the plan's segments); the
        synced rows that stay (on a target node); and the copies this piece sends: each
        source row to every target that does not hold it yet (already on their node)."""
        columns = state.columns
        match = (state["key"] == sync["_yk"]) & (state["side"] == sync["_yside"])
        tagged = state.join(F.broadcast(sync), match, "left")
        synced = F.col("_yk").isNotNull()
        plain = tagged.where(~synced).select(*columns)
        kept = tagged.where(synced & F.array_contains("_ytargets", F.col("node"))).select(*columns)
        source = (F.col("_ysrc") == -1) | (F.col("_ysrc") == F.col("node"))
        lacking = F.array_except(
            F.col("_ytargets"), F.array_union(F.col("_yhave"), F.array(F.col("node").cast("int")))
        )
        copies = (
            tagged.where(synced & source)
            .withColumn("node", F.explode(lacking))
            .withColumn("_surrogate", F.element_at(self.host.surrogates, F.col("node") + 1))
            .select(*columns)
        )
        return plain, kept, copies

    def _split_tuples(self, state: DataFrame, seg: DataFrame) -> DataFrame:
        """Stored tuples that move (a tuple moves by its migration unit falling in a moved
        segment of its part), their ``node`` set to where they go."""
        columns = state.columns
        unit = migration_unit()
        on_part = (state["key"] == seg["_mk"]) & (state["node"] == seg["_mfrom"])
        hit = on_part & (unit >= seg["_mlo"]) & (unit < seg["_mhi"])
        return (
            state.join(F.broadcast(seg), hit, "inner")
            .withColumn("node", F.col("_mto"))
            .select(*columns)
        )

    def horizon(self, b: int) -> float | None:
        """Oldest event time a window join keeps after batch ``b`` (None: full history)."""
        return self.host.config.horizon(b)

    def frame(self, b: int, state: Any = None) -> DataFrame | None:
        """Every piece's live rows, rows older than the window's horizon left out."""
        pieces = self.pieces if state is None else state
        out = union_frames([p.live(self.host.spark) for p in pieces])
        horizon = self.horizon(b)
        if out is not None and horizon is not None:
            out = out.where(F.col("event_time_s") >= horizon)
        return out

    def make_durable(self, b: int, flow: Flow) -> None:
        copies: dict[int, DataFrame] = {}
        for piece in flow.state:
            if piece.written_in != b:
                continue
            if id(piece.base) not in copies:
                copies[id(piece.base)] = self.host.durable(piece.base)
            piece.rebase(copies[id(piece.base)])
        if id(flow.received) in copies:
            flow.received = copies[id(flow.received)]

    def commit(self, flow: Flow) -> None:
        release_pieces(self.pieces, flow.state)
        self.pieces = flow.state

    def discard(self, flow: Flow) -> None:
        release_pieces(flow.state, [])

    def close(self) -> None:
        release_pieces(self.pieces, [])
        self.pieces = []

    def sent(self, received: DataFrame, by: list[str]) -> DataFrame:
        role = F.col("role")
        return received.groupBy(*by).agg(
            F.sum((role != MOVED).cast("long")).cast("double").alias("received"),
            F.sum(role.isin(*STORES).cast("long")).cast("double").alias("load"),
            F.sum((role == MOVED).cast("long")).cast("double").alias("moved_rows"),
            F.sum((role == MOVED).cast("long")).cast("double").alias("moved_tuples"),
        )


def segment_table(spark: SparkSession, moves: Reassignment) -> DataFrame | None:
    if len(moves.key) == 0:
        return None
    return spark.createDataFrame(
        pa.table(
            {
                "_mk": pa.array(moves.key),
                "_mfrom": pa.array(moves.from_node),
                "_mto": pa.array(moves.to_node),
                "_mlo": pa.array(moves.lo_units),
                "_mhi": pa.array(moves.hi_units),
            }
        )
    )


def split_counts(
    spark: SparkSession, state: DataFrame, moves: Reassignment
) -> tuple[DataFrame, DataFrame]:
    """Partial counts: a part's count ``c`` splits by the moved shares, ``floor(c *
    hi) - floor(c * lo)`` per segment; the part's segments lie end to end from 0 up to
    ``H`` (``Reassignment.part_extent``), so what stays is ``c - floor(c * H)`` and the
    pieces sum to ``c`` exactly. The state holds one row per (node, key, age) (the
    node stage aggregates it), so each row splits on its own, with no aggregation.
    Returns the rows that stay (in place, for the node's state update) and those that
    move (``node`` set to where they go)."""
    columns = state.columns
    key, node, extent = moves.part_extent()
    parts = spark.createDataFrame(
        pa.table({"_pk": pa.array(key), "_pn": pa.array(node), "_ph": pa.array(extent)})
    )
    on_part = (state["key"] == parts["_pk"]) & (state["node"] == parts["_pn"])
    leaves = F.floor(F.col("count") * F.col("_ph") / FRACTION_UNITS)
    stay = (
        state.join(F.broadcast(parts), on_part, "left")
        .withColumn("count", (F.col("count") - F.coalesce(leaves, F.lit(0))).cast("bigint"))
        .where(F.col("count") > 0)
        .select(*columns)
    )
    seg = segment_table(spark, moves)
    assert seg is not None
    on_seg = (state["key"] == seg["_mk"]) & (state["node"] == seg["_mfrom"])
    piece = F.floor(F.col("count") * F.col("_mhi") / FRACTION_UNITS) - F.floor(
        F.col("count") * F.col("_mlo") / FRACTION_UNITS
    )
    arrived = (
        state.join(F.broadcast(seg), on_seg, "inner")
        .select("key", F.col("_mto").alias("node"), "age", piece.cast("bigint").alias("count"))
        .where(F.col("count") > 0)
    )
    return stay, arrived


def node_state_for(operator: Operator, host: Host) -> NodeState:
    """The node state of ``operator``: partial counts for an aggregation, stored tuples
    for a join (every join predicate stores the same way)."""
    return PartialCounts(host) if operator.aggregates else StoredTuples(host)
