"""The TOPK executor on small streams: every strategy matches the plain groupBy."""

from __future__ import annotations

import numpy as np
import pytest

from balancebench.generators import generate_zipf_stream
from balancebench.replay import batch_interval_s
from balancebench.spark import topk as topk_module
from balancebench.spark.topk import OracleMismatch, load_stream, run_topk
from balancebench.strategies import STRATEGIES, get_strategy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stream(spark, tmp_path_factory):
    folder, manifest = generate_zipf_stream(
        tmp_path_factory.mktemp("data"),
        n_tuples=60_000,
        n_keys=300,
        zipf_s=1.2,
        input_rate_tuples_per_s=30_000.0,
        seed=11,
    )
    interval = batch_interval_s(manifest.row_count, 30_000.0, 4)
    df = load_stream(spark, [str(folder / f) for f in manifest.files], interval, 4).cache()
    df.count()
    return df


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_strategy_passes_the_oracle(spark, stream, name):
    run = run_topk(
        spark, stream, get_strategy(name), n_nodes=5, n_batches=4, tolerance=0.05, top_k=10
    )
    assert [b.oracle_passed for b in run.batches] == [True] * 4
    assert sum(b.tuples for b in run.batches) == 60_000
    for b in run.batches:
        assert len(b.node_run_time_s) == 5 and (b.node_run_time_s >= 0).all()
        assert len(b.topk) == 10
    first = run.batches[0].imbalance_max_over_mean
    later = max(b.imbalance_max_over_mean for b in run.batches[1:])
    if name in ("qmmp", "mnrt"):
        # Batches after the first are routed by the plan made from the previous batch.
        assert first > 0.3 and later < 0.2
        assert run.batches[-1].routing_table_entries > 0
    elif name in ("readj", "balanceload"):  # whole keys: a hot key bounds the balance
        assert later <= first
    elif name == "pkg":  # per tuple from the first batch on, but a key gets only 2 nodes
        hash_run = run_topk(
            spark, stream, get_strategy("hash"), n_nodes=5, n_batches=4, tolerance=0.05, top_k=10
        )
        assert max(first, later) < min(b.imbalance_max_over_mean for b in hash_run.batches)
    elif name in ("dchoices", "wchoices"):  # heavy hitters get more than 2 nodes
        assert max(first, later) < 0.2


def test_oracle_catches_a_lost_tuple(spark, stream, monkeypatch):
    real = topk_module._sorted_counts
    calls = {"n": 0}

    def lose_one(table):
        key, count = real(table)
        calls["n"] += 1
        if calls["n"] == 1:  # the balanced result of the first batch, not the oracle's
            count = count.copy()
            count[np.argmax(count)] -= 1
        return key, count

    monkeypatch.setattr(topk_module, "_sorted_counts", lose_one)
    with pytest.raises(OracleMismatch, match="differs from Spark's groupBy"):
        run_topk(
            spark, stream, get_strategy("qmmp"), n_nodes=5, n_batches=4, tolerance=0.05, top_k=10
        )
