"""Spark-native baselines (spark_streaming, spark_aqe, spark_salting) pass the engine's
oracle on small data, and their node metrics mean what the module docstring says."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from balancebench.core.cost_model import CORE_WAIT
from balancebench.core.workloads import get_workload
from balancebench.experiment.streams import build_stream
from balancebench.generators import generate
from balancebench.state.paths import datasets_dir
from balancebench.strategies import get_strategy

pytestmark = pytest.mark.slow


def run_baseline(spark, df, config, strategy, name, on_batch=None):
    """A baseline through the runner registry, as every DAG run does."""
    from balancebench.spark.runners import make_runner

    return make_runner(spark, df, config, strategy, name, 0.05, on_batch).run()


N_NODES = 4
N_BATCHES = 3
#: Upstream instances: the replay's partitions (tuple i is sent by i mod SENDERS).
SENDERS = 3


@pytest.fixture(scope="module")
def replays(spark):
    """Each workload's replay stream (cached DataFrame, interval, pandas copy)."""
    from balancebench.spark.replay_stream import load_replay, release_replay

    topics, _ = generate(
        "topic_stream",
        datasets_dir(),
        {"n_tuples": 6000, "n_keys": 200, "zipf_s": 1.2, "input_rate_tuples_per_s": 10000.0},
    )
    tpch, _ = generate("tpch", datasets_dir(), {"tpch_scale_factor": 0.001, "zipf_s": 1.0})
    phones, _ = generate(
        "phone_stream",
        datasets_dir(),
        {"n_tuples": 3000, "phone_stream_steps": 3, "input_rate_tuples_per_s": 5000.0},
    )
    text, _ = generate(
        "tasks", datasets_dir(), {"tasks_total_words": 3000, "tasks_sizes": [1, 1, 1]}
    )
    out = {}
    for workload, folder in (
        ("topk", topics),
        ("eq5", tpch),
        ("band", tpch),
        ("phone", phones),
        ("wordcount", text),
    ):
        replay = build_stream(workload, folder, {"seed": 1, "input_rate_tuples_per_s": 5000.0})
        df, interval = load_replay(spark, replay, N_BATCHES, SENDERS)
        out[workload] = (df, interval, df.toPandas())
    yield out
    for df, _, _ in out.values():
        release_replay(df)


def _config(replays, workload: str, window_batches: float):
    from balancebench.spark.engine_config import EngineConfig

    _, interval, _ = replays[workload]
    return EngineConfig(
        get_workload(workload),
        n_nodes=N_NODES,
        n_batches=N_BATCHES,
        interval_s=interval,
        window_s=window_batches * interval,
    )


def _run(spark, replays, strategy: str, workload: str, window_batches: float, **params):
    df, _, _ = replays[workload]
    config = _config(replays, workload, window_batches)
    seen = []
    before = {
        k: spark.conf.get(k, None)
        for k in ("spark.sql.adaptive.enabled", "spark.sql.shuffle.partitions")
    }
    results = run_baseline(
        spark, df, config, get_strategy(strategy, n_nodes=N_NODES, **params), strategy, seen.append
    )
    after = {k: spark.conf.get(k, None) for k in before}
    assert after == before, "the session conf is restored after a baseline"
    assert [r.batch for r in results] == list(range(N_BATCHES))
    assert seen == results
    for r in results:
        assert r.oracle_passed, r.answer
        for arr in (r.node_received, r.node_run_time_s, r.node_state, r.node_cpu_time_s):
            assert arr is not None and arr.shape == (N_NODES,)
        assert r.node_received.sum() > 0
        assert r.node_run_time_s.sum() > 0
        assert r.routing_table_entries == 0 and r.migrated_tuples == 0 and r.plan is None
        assert r.input_tuples == int((replays[workload][2]["batch"] == r.batch).sum())
        # measured like the engine's: its charged stages' wait for one of the 2 cores
        assert r.extra[CORE_WAIT] >= 0.0
    return config, results


def _sides(pdf: pd.DataFrame, b: int, upto: bool = False) -> dict[str, int]:
    rows = pdf[pdf["batch"] <= b] if upto else pdf[pdf["batch"] == b]
    return {s: int((rows["side"] == s).sum()) for s in ("R", "S")}


# ---- spark_streaming ------------------------------------------------------------------------
@pytest.mark.parametrize("window_batches", [0, 2])
def test_streaming_aggregation(spark, replays, window_batches):
    config, results = _run(spark, replays, "spark_streaming", "topk", window_batches)
    pdf = replays["topk"][2]
    windows = config.window.size_batches if config.window else 1
    for r in results:
        batch = pdf[pdf["batch"] == r.batch]
        # One map task per sender (its own file of the batch): the stateful stage reads
        # one partial count per key and sender (and per sliding window holding the batch).
        per_sender = batch.groupby(batch["tuple_id"] % SENDERS)["key"].nunique().sum()
        assert per_sender > batch["key"].nunique()  # the senders' partials are apart
        assert r.node_received.sum() == per_sender * windows
        first = 0 if config.window is None else r.batch - windows + 1
        in_window = pdf[(pdf["batch"] >= first) & (pdf["batch"] <= r.batch)]
        if config.window is None:
            assert r.node_state.sum() == in_window["key"].nunique()
        else:  # one state row per (window, key) still open
            assert r.node_state.sum() >= in_window["key"].nunique()
        assert r.node_state.sum() == r.extra["state_rows_total"]


def test_streaming_equi_join_full_history(spark, replays):
    _, results = _run(spark, replays, "spark_streaming", "eq5", 0)
    pdf = replays["eq5"][2]
    for r in results:
        assert r.node_received.sum() == r.input_tuples
        assert r.node_state.sum() == sum(_sides(pdf, r.batch, upto=True).values())


def test_streaming_band_join_window(spark, replays):
    config, results = _run(spark, replays, "spark_streaming", "band", 1)
    pdf = replays["band"][2]
    totals = {s: int((pdf["side"] == s).sum()) for s in ("R", "S")}
    exploded = "R" if totals["R"] <= totals["S"] else "S"
    copies = 2 * config.band_width + 1
    for r in results:
        n = _sides(pdf, r.batch)
        other = "S" if exploded == "R" else "R"
        assert r.node_received.sum() == n[exploded] * copies + n[other]
        upto = _sides(pdf, r.batch, upto=True)
        assert 0 < r.node_state.sum() <= upto[exploded] * copies + upto[other]


def test_streaming_band_join_window_keeps_the_pairs_of_a_tuple_at_time_zero(spark, replays):
    """Spark's first watermark is 0 and a stream-stream join drops a row at or below it as
    late: a tuple at event time 0 (a stream's first microsecond) must keep its pairs."""
    from balancebench.spark.oracle import expected_answer

    df, _, _ = replays["band"]
    config = _config(replays, "band", 1)
    pair = expected_answer(df, config, 0).first()
    assert pair is not None
    at_zero = F.when(F.col("tuple_id") == pair["s_id"], F.lit(0.0))
    zeroed = df.withColumn("event_time_s", at_zero.otherwise(F.col("event_time_s")))
    strategy = get_strategy("spark_streaming", n_nodes=N_NODES)
    results = run_baseline(spark, zeroed, config, strategy, "spark_streaming")
    assert all(r.oracle_passed for r in results)


# ---- spark_aqe ------------------------------------------------------------------------------
def test_aqe_aggregation_window(spark, replays):
    _, results = _run(spark, replays, "spark_aqe", "topk", 2)
    pdf = replays["topk"][2]
    for r in results:
        window = pdf[(pdf["batch"] >= r.batch - 1) & (pdf["batch"] <= r.batch)]
        # Map-side partial aggregation: partial counts, at least one per key.
        assert window["key"].nunique() <= r.node_received.sum() <= len(window)
        assert r.node_state.sum() == len(window)  # the window's tuples are kept


def test_aqe_equi_join_whatever_plan(spark, replays):
    _, results = _run(spark, replays, "spark_aqe", "eq5", 0)
    pdf = replays["eq5"][2]
    for r in results:
        assert r.node_state.sum() == sum(_sides(pdf, r.batch, upto=True).values())
        assert r.node_received.sum() >= N_NODES * r.extra["broadcast_rows"]


def _shuffled_join_rows(pdf, b: int, width: int, salts: int | None) -> int:
    """Rows the two joins of batch ``b`` shuffle into the join stage: the new side's
    candidate keys and the other side; salting replicates the smaller side per salt."""
    new, upto = _sides(pdf, b), _sides(pdf, b, upto=True)
    old = {s: upto[s] - new[s] for s in upto}
    copies = 2 * width + 1
    joins = [(new["R"] * copies, upto["S"])]
    if b > 0:
        joins.append((new["S"] * copies, old["R"]))
    total = 0
    for a, o in joins:
        if salts is None:
            total += a + o
        else:
            total += max(a, o) + salts * min(a, o)
    return total


def test_aqe_band_join_shuffled(spark, replays):
    config, results = _run(spark, replays, "spark_aqe", "band", 0, broadcast=False)
    pdf = replays["band"][2]
    for r in results:
        assert r.extra["broadcast_rows"] == 0
        expected = _shuffled_join_rows(pdf, r.batch, config.band_width, None)
        assert r.node_received.sum() == expected


# ---- spark_salting --------------------------------------------------------------------------
def test_salting_aggregation_full_history(spark, replays):
    _, results = _run(spark, replays, "spark_salting", "topk", 0)
    for r in results:
        assert r.extra["stages_measured"] == 2  # (key, salt) counts, then sums by key


def test_salting_equi_join_window(spark, replays):
    _, results = _run(spark, replays, "spark_salting", "eq5", 1)
    for r in results:
        assert r.node_received.sum() >= r.input_tuples


def test_salting_band_join_replicates_the_small_side(spark, replays):
    config, results = _run(spark, replays, "spark_salting", "band", 0)
    pdf = replays["band"][2]
    for r in results:
        expected = _shuffled_join_rows(pdf, r.batch, config.band_width, N_NODES)
        assert r.node_received.sum() == expected
        assert r.node_state.sum() == sum(_sides(pdf, r.batch, upto=True).values())
    assert np.all([r.replication_factor > 1 for r in results])


@pytest.mark.parametrize("workload", ["phone", "wordcount"])
@pytest.mark.parametrize("strategy", ["spark_streaming", "spark_aqe", "spark_salting"])
def test_every_baseline_serves_the_other_aggregations(spark, replays, strategy, workload):
    # Given paper 001's phone stream and paper 002's WordCount text, full history
    # When the baseline runs them (run_baseline raises OracleMismatch on any difference)
    config, results = _run(spark, replays, strategy, workload, 0)
    # Then every batch matched plain Spark SQL, on every node
    assert config.workload.name == workload
    assert [r.oracle_passed for r in results] == [True] * N_BATCHES
    assert all(len(r.node_received) == N_NODES for r in results)
