"""A window is data on the operator: three window shapes no registered workload has, each
added here as a user would add it to the product (an operator, ``core/operators.py``, and
a workload, ``core/workloads.py``: the two entries below and nothing else), run by the
engine and by Spark's own streaming query, each batch checked by the oracle and against
an independent pandas count of what the window holds.

- a tumbling TOPK: windows of 2 batches that restart every 2 batches;
- a sliding TOPK: windows of 3 batches that slide by 2;
- a band join with an asymmetric lag: S from half a window before R to a whole window
  after it.
"""

from __future__ import annotations

import pandas as pd
import pytest

from balancebench.core.operators import BandJoin, Operator
from balancebench.core.workloads import Workload
from balancebench.experiment.streams import build_stream
from balancebench.generators import generate
from balancebench.spark.engine_config import EngineConfig
from balancebench.spark.runners import make_runner
from balancebench.state.paths import datasets_dir
from balancebench.strategies import get_strategy

pytestmark = pytest.mark.slow

N_NODES = 4
N_BATCHES = 4
RATE = {"seed": 5, "input_rate_tuples_per_s": 2000.0}

# ---- the user's additions: one operator and one workload each -------------------------------
TUMBLING = Operator("aggregate_tumbling", aggregates=True, slide_batches=None)
SLIDE_2 = Operator("aggregate_slide_2", aggregates=True, slide_batches=2)
LAGGED_BAND = BandJoin("band_join_lagged", aggregates=False, time_bounds=(-0.5, 1.0))
TOPK_TUMBLING = Workload(
    "topk_tumbling", TUMBLING, ("stream",), "topic_stream", "-", "tumbling TOPK", top_k=True
)
TOPK_SLIDE_2 = Workload(
    "topk_slide_2", SLIDE_2, ("stream",), "topic_stream", "-", "sliding TOPK", top_k=True
)
BAND_LAGGED = Workload(
    "band_lagged", LAGGED_BAND, ("tpch",), "tpch", "-", "band join, lagged", stream_from="band"
)


@pytest.fixture(scope="module")
def streams(spark):
    """The topic stream and the band join's stream, each in 4 batches."""
    from balancebench.spark.replay_stream import load_replay, release_replay

    topics, _ = generate(
        "topic_stream",
        datasets_dir(),
        {"n_tuples": 6000, "n_keys": 150, "zipf_s": 1.1, **RATE},
    )
    tpch, _ = generate("tpch", datasets_dir(), {"tpch_scale_factor": 0.001, "zipf_s": 1.0})
    out = {}
    for name, workload, folder in (("topk", "topk", topics), ("band", "band", tpch)):
        df, interval = load_replay(spark, build_stream(workload, folder, RATE), N_BATCHES, 3)
        out[name] = (df, interval, df.toPandas())
    yield out
    for df, _, _ in out.values():
        release_replay(df)


def _run(spark, stream, workload: Workload, window_s: float, strategy: str):
    df, interval, _ = stream
    config = EngineConfig(workload, N_NODES, N_BATCHES, interval, window_s=window_s, top_k=5)
    runner = make_runner(spark, df, config, get_strategy(strategy, n_nodes=N_NODES), strategy, 0.05)
    results = runner.run()
    assert [r.batch for r in results] == list(range(N_BATCHES))
    assert all(r.oracle_passed for r in results), [r.answer for r in results]
    return results


def _top(pdf: pd.DataFrame, first: int, b: int, k: int = 5) -> list[tuple[int, int]]:
    """The top ``k`` keys by count (then key) over batches ``first .. b``, by pandas."""
    window = pdf[(pdf["batch"] >= first) & (pdf["batch"] <= b)]
    counts = window.groupby("key").size().reset_index(name="count")
    counts = counts.sort_values(["count", "key"], ascending=[False, True]).head(k)
    rows = counts[["key", "count"]].itertuples(index=False)
    return [(int(key), int(count)) for key, count in rows]


@pytest.mark.parametrize(
    ("workload", "size", "first_batches", "strategies"),
    [
        # tumbling, 2 batches: the window restarts at batches 0 and 2
        (TOPK_TUMBLING, 2, [0, 0, 2, 2], ["pkg", "spark_streaming"]),
        # 3 batches sliding by 2: windows start at -2, 0, 2; each batch answers the
        # oldest one holding it
        (TOPK_SLIDE_2, 3, [-2, 0, 0, 2], ["qmmp", "spark_streaming"]),
    ],
    ids=["tumbling", "slide-2"],
)
def test_a_windowed_topk_answers_its_window_in_the_engine_and_in_spark_streaming(
    spark, streams, workload, size, first_batches, strategies
):
    _, interval, pdf = streams["topk"]
    answers = {}
    for name in strategies:
        results = _run(spark, streams["topk"], workload, size * interval, name)
        answers[name] = [r.answer for r in results]
    want = [_top(pdf, first, b) for b, first in enumerate(first_batches)]
    for name, got in answers.items():
        assert got == want, name


def test_a_band_join_with_an_asymmetric_lag_in_the_engine_and_in_spark_streaming(spark, streams):
    _, interval, pdf = streams["band"]
    window_s = 1.5 * interval
    # The pairs per batch, by pandas: |k_r - k_s| <= band_width (1), the later tuple in
    # the batch, and -0.5 window_s <= t_s - t_r <= window_s
    r, s = pdf[pdf["side"] == "R"], pdf[pdf["side"] == "S"]
    pairs = r.merge(s, how="cross", suffixes=("_r", "_s"))
    pairs = pairs[(pairs["key_r"] - pairs["key_s"]).abs() <= 1]
    lag = pairs["event_time_s_s"] - pairs["event_time_s_r"]
    lagged = pairs[(lag >= -0.5 * window_s) & (lag <= window_s)]
    later = lagged[["batch_r", "batch_s"]].max(axis=1)
    want = [int((later == b).sum()) for b in range(N_BATCHES)]
    # the lag leaves out pairs a symmetric window keeps
    assert 0 < sum(want) < int((lag.abs() <= window_s).sum())
    for name in ("hash", "spark_streaming"):
        results = _run(spark, streams["band"], BAND_LAGGED, window_s, name)
        assert [r.result_rows for r in results] == want, name
